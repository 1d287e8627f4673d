/* pool.h: the client's way to its Redis master: the endpoint (the URL as
 * given, or the master the sentinels name, with a generation bumped on each
 * change), a bounded pool of sync command connections, commands with
 * reconnect/retry, and scripts by EVALSHA with the NOSCRIPT fallback
 * (src/common/script.h: the SHA is fixed at build time).
 * It knows nothing of the client's threads or objects: the client, the
 * subscriber and the watchdog each use it; it uses none of them.
 *
 * Thread-safety: every function may be called from any thread; mu guards
 * everything below it and is a leaf lock. Codes are dlock_err (common's
 * codes are mapped on the way in).
 */
#ifndef DLOCK_LIB_POOL_H
#define DLOCK_LIB_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client_internal.h"
#include "url.h"

typedef struct dlock__pooled {
    dlock__conn *conn;
    uint64_t gen; /* master generation the connection was opened for */
} dlock__pooled;

typedef struct dlock__pool {
    const dlock_client_options *opts; /* the client's: pool size, retries, log hook */
    const dlock__url *url;            /* the client's URL as given */
    dlock__conn_opts copts;

    pthread_mutex_t mu;
    pthread_cond_t cv;         /* a connection was returned or closed */
    dlock__url master;         /* url, or the master a sentinel named */
    uint64_t master_gen;       /* bumped when master changes */
    dlock__pooled *idle;
    int n_idle;
    int n_open;
    bool closing;
    bool started;      /* pool_start succeeded: a Redis backend (false on etcd clients) */
    /* Set once by pool_start, read-only after: the server is a Cluster node
     * (sharded pub/sub is used, see dlock__client_sharded), and the
     * connections route by slot (a redis-cluster:// URL). */
    bool cluster;
    bool routing;
} dlock__pool;

/* Initialises the lock and condition only (so dlock__pool_destroy is safe
 * from here on). 0 or ENOMEM. */
int dlock__pool_init(dlock__pool *p);

/* Checks the endpoint: resolves the master (Sentinel URLs), opens one
 * connection (kept in the pool) and loads the preload scripts with SCRIPT
 * LOAD (dlock__preload_scripts, scripts.h). opts and url must outlive the pool. Returns 0, ENOMEM, or the
 * connection's code (ECONN, EAUTH, ESERVER, ...), logged at ERROR. */
int dlock__pool_start(dlock__pool *p, const dlock_client_options *opts, const dlock__url *url);

/* Refuses further commands (ECLOSED), closes the idle connections and
 * frees everything. Callers must have stopped using the pool. */
void dlock__pool_destroy(dlock__pool *p);

/* Copy of the current master endpoint and its generation (gen_out may be
 * NULL). 0 or ENOMEM. */
int dlock__pool_master(dlock__pool *p, dlock__url *out, uint64_t *gen_out);
/* The endpoint a subscriber opens a plain connection to for channel:
 * the master that owns channel's slot on a routing (cluster) pool, else
 * the current master. refresh: the answer the pool's slot map gives may be
 * stale (the slot moved, its master died): first a keyed read of the
 * channel's slot, which makes the router follow MOVED or reload the map.
 * One attempt, no retry (the subscriber backs off). 0, ENOMEM or a
 * transport code. */
int dlock__pool_node_for(dlock__pool *p, const char *channel, bool refresh, dlock__url *out);
/* Sentinel URLs: asks the sentinels again (after connection errors); a
 * changed master bumps the generation, so older connections are dropped. */
void dlock__pool_reresolve(dlock__pool *p);

/* A deadline (monotonic ms; 0: none) bounding every pool call the calling
 * thread makes until it is cleared: the wait for a free connection, each
 * connect, each reply and the retries between them. A call that would
 * start at or past it returns DLOCK_ETIMEOUT with nothing sent; a reply
 * it cuts short is DLOCK_EUNKNOWN as usual. The watchdog sets it to the
 * validity deadline of what it renews, so a frozen server delays no
 * renewal beyond the point where it could still matter. */
void dlock__pool_io_deadline(int64_t until_ms);

/* The implementations of dlock__client_cmd / _eval_wait / dlock__script_sha
 * (client_internal.h), on this pool. */
int dlock__pool_cmd(dlock__pool *p, int argc, const char **argv, const size_t *lens,
                    dlock__reply **out);
int dlock__pool_eval_wait(dlock__pool *p, const dlock__script *s, int nkeys,
                          const char *const *keys, int nargs, const char *const *args,
                          int replicas, int64_t timeout_ms, dlock__reply **out, int *acked_out);
const char *dlock__pool_script_sha(dlock__pool *p, const dlock__script *s);

/* n commands pipelined on one connection (one round trip); replies_out[n].
 * Retried as a whole on ECONN (nothing sent) and on a READONLY reply (a
 * demoted master applied nothing). On any error every reply is NULL. */
int dlock__pool_cmds(dlock__pool *p, size_t n, const int *argcs, const char *const *const *argvs,
                     dlock__reply **replies_out);

/* Pipelines n EVALSHA calls on one pooled connection (watchdog batches).
 * replies_out[n]; all-or-nothing on transport errors. */
int dlock__pool_pipeline_eval(dlock__pool *p, size_t n, const dlock__renew_cmd *cmds,
                              dlock__reply **replies_out);

#endif
