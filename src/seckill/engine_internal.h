/* engine_internal.h: what engine.c and campaign.c share: the engine
 * struct, which owns its parts (engine_health.h, engine_lease.h,
 * engine_server.h, engine_acks.h: each reaches Redis only through the
 * port engine.c gives it), and the command helpers. Every Redis command
 * goes through sk__call_script/sk__call_cmd (on connection 0) or a
 * batch's call on its data connection (sk__conn), whose FIFO drops the
 * connection when a reply is late (command_timeout_ms). The purchase
 * path (coalesce.c) does not include this: it is given hooks. */
#ifndef SK_ENGINE_INTERNAL_H
#define SK_ENGINE_INTERNAL_H

#include <event2/event.h>

#include "coalesce.h"
#include "engine.h"
#include "engine_acks.h"
#include "engine_health.h"
#include "engine_lease.h"
#include "engine_port.h"
#include "engine_server.h"
#include "orderid.h"
#include "redis_async.h"
#include "redis_rconn.h"
#include "url.h"

/* One of the engine's SK__CONNS connections (coalesce.h), all alike
 * (redis_rconn.h: reconnect with backoff, deadlines, NOSCRIPT): each
 * carries purchase batches and their WAITs, so that one batch's script
 * runs while another connection's WAIT waits for the replica; connection
 * 0 also carries the engine's own commands (scripts, probes, the lease,
 * campaigns), and the others connect only beside it. Sentinel resolves
 * the master at every open. A connection > 0 carries batches only while
 * the run id its server gave at connect is connection 0's (off a
 * Cluster; on a Cluster the script reads its node's). */
typedef struct sk__conn {
    struct sk_engine *e;
    int i;              /* its number: 0 .. SK__CONNS - 1 */
    dlock__rconn *rc;
    char runid[41];     /* i > 0: INFO server run_id on this connection; "" until read */
} sk__conn;

struct sk_engine {
    struct event_base *base;
    dlock__url url;
    sk_engine_opts o;
    bool ever_up;
    bool freeing;
    struct event *tick_ev;
    char instance[33];      /* this engine's name in the lease and probe keys */
    int64_t last_poll_ms;
    sk__coalescer *co;      /* the purchase path */
    sk_engine_stats st;     /* redis_errors, reconnects, nodes (the rest is co's and the parts') */
    /* the parts, each on a port to this engine and its clock */
    sk__server srv;         /* what the connected server said at connect */
    sk__acks acks;          /* the acknowledgement plan */
    sk__lease lease;        /* the order-id worker lease and the id generator */
    sk__health health;      /* what /healthz is told */
    sk__conn conns[SK__CONNS];
};

/* Sends a script (EVALSHA; EVAL again on NOSCRIPT). args = numkeys, keys,
 * argv as strings (lens may be NULL for NUL-terminated strings). Returns 0
 * (fn will run) or SK_EUNAVAIL / DLOCK_ENOMEM (fn will not). */
int sk__call_script(sk_engine *e, int script, int nargs, const char **args, const size_t *lens,
                    sk__reply_fn fn, void *priv);
int sk__call_cmd(sk_engine *e, int argc, const char **argv, const size_t *lens, sk__reply_fn fn,
                 void *priv);
/* sk__call_script with the arguments after the sha already written as
 * RESP bulk strings, with their keys' slot (a->resp copied): the purchase batch. */
int sk__call_script_resp(sk_engine *e, int script, const sk__resp_args *a, sk__reply_fn fn, void *priv);
/* The same on data connection conn (0: the engine's own; coalesce.h). */
int sk__call_script_resp_on(sk_engine *e, int conn, int script, const sk__resp_args *a, sk__reply_fn fn,
                            void *priv);
/* The same for a keyless command that must reach the master of slot (WAIT
 * on a Cluster); slot -1: wherever sk__call_cmd sends. */
int sk__call_cmd_slot(sk_engine *e, int slot, int argc, const char **argv, const size_t *lens, sk__reply_fn fn,
                      void *priv);
/* "host:port" of the node serving slot now (one server: its endpoint). */
int sk__node_of_slot(const sk_engine *e, int slot, char *out, size_t cap);
/* Connection 0's current async connection (NULL while there is none),
 * and whether it is up. */
dlock__aconn *sk__engine_aconn(const sk_engine *e);
bool sk__engine_connected(const sk_engine *e);

const char *sk__script_runid(const sk_engine *e);

#define sk__log(e, level, ...) sk_logf((e)->o.log, (e)->o.log_ud, level, __VA_ARGS__)

#endif
