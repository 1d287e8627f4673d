/* engine_internal.h: what engine.c, engine_server.c, engine_lease.c and
 * campaign.c share: the engine struct and the script-call helper. Every Redis command goes through
 * sk__call_script/sk__call_cmd, which track it in a FIFO so a late reply
 * (command_timeout_ms) drops the connection. The purchase path
 * (coalesce.c) does not include this: it is given hooks. */
#ifndef SK_ENGINE_INTERNAL_H
#define SK_ENGINE_INTERNAL_H

#include <event2/event.h>

#include "coalesce.h"
#include "engine.h"
#include "orderid.h"
#include "redis_async.h"
#include "url.h"

enum { SK__LUA_PURCHASE = 0, SK__LUA_HEAT, SK__LUA_INFO, SK__LUA_LEASE, SK__NLUA };

typedef struct sk__call sk__call; /* a command in flight (engine.c) */

struct sk_engine {
    struct event_base *base;
    dlock__url url;
    sk_engine_opts o;
    dlock__aconn *ac;       /* current connection (NULL while reconnecting) */
    dlock__aconn *dead_ac;  /* went down inside a callback: closed by the timer */
    bool up;
    bool ever_up;
    bool freeing;
    int attempt;
    struct event *reconnect_ev;
    struct event *tick_ev;
    sk__call *head, *tail;  /* in flight, oldest first */
    int64_t last_reply_ms;  /* monotonic time of the last reply (reply deadline) */
    char sha[SK__NLUA][41];
    /* what the connected server said at connect (engine_server.c) */
    char runid[41];         /* INFO server run_id; "" unknown */
    int info_due;           /* connect-time replies still to come */
    int srv_replicas;       /* INFO replication connected_slaves */
    bool srv_aof_yes, srv_fsync_always;
    bool srv_cluster;       /* INFO cluster cluster_enabled:1: every node has its own run id */
    /* Cluster: a node whose last WAIT had too few replicas (a promoted
     * master whose replica is gone) is not asked again before short_until_ms:
     * its batches answer 202 at once instead of each waiting the timeout */
    struct { char node[64]; int64_t short_until_ms; int misses; } ack_short[SK_STAT_NODES];
    bool config_refused_logged;
    /* order-id worker lease (engine_lease.c) */
    char instance[33];
    int lease_n;
    int lease_tries;
    bool lease_busy;        /* a lease command is in flight */
    bool lease_held;
    uint64_t lease_fence;   /* fencing token of the lease taken (0: none) */
    int64_t lease_sent_ms;  /* monotonic send time of the take/renew in flight */
    uint64_t lease_sent_fence; /* the fence it renews (0: a take) */
    int64_t lease_ok_ms;    /* send time of the last successful take/renew */
    sk_orderid_gen gen;
    int64_t last_poll_ms;
    sk__coalescer *co;      /* the purchase path */
    sk_engine_stats st;     /* redis_errors, reconnects, nodes (the rest is co's) */
};

/* Sends a script (EVALSHA; EVAL again on NOSCRIPT). args = numkeys, keys,
 * argv as strings (lens may be NULL for NUL-terminated strings). Returns 0
 * (fn will run) or SK_EUNAVAIL / DLOCK_ENOMEM (fn will not). */
int sk__call_script(sk_engine *e, int script, int nargs, const char **args, const size_t *lens,
                    sk__reply_fn fn, void *priv);
int sk__call_cmd(sk_engine *e, int argc, const char **argv, const size_t *lens, sk__reply_fn fn,
                 void *priv);
/* The same for a keyless command that must reach the master of slot (WAIT
 * on a Cluster); slot -1: wherever sk__call_cmd sends. */
int sk__call_cmd_slot(sk_engine *e, int slot, int argc, const char **argv, const size_t *lens, sk__reply_fn fn,
                      void *priv);

#define sk__log(e, level, ...) sk_logf((e)->o.log, (e)->o.log_ud, level, __VA_ARGS__)

/* engine_server.c: sends INFO server / INFO replication / CONFIG GET on a
 * new connection (e->info_due counts the replies); ready needs them. */
void sk__server_probe(sk_engine *e);
/* The run id purchase.lua and campaign_heat.lua check against: the
 * connected server's, or "" on a Cluster (the script reads the run id of
 * the node it runs on: the engine does not track which node serves a slot
 * through a reshard or a failover). */
const char *sk__script_runid(const sk_engine *e);
/* How a purchase batch is acknowledged now: SK__ACK_* (coalesce.h) and,
 * for SK__ACK_WAIT, the replicas and the timeout of its WAIT. */
int sk__ack_plan(const sk_engine *e, int *replicas_out, int64_t *timeout_ms_out);

/* engine_lease.c: the order-id worker lease. */
void sk__lease_step(sk_engine *e);          /* take or renew now (one in flight) */
void sk__lease_tick(sk_engine *e, int64_t now_ms); /* renew at 1/3, give up at lease - margin */
bool sk__lease_valid(const sk_engine *e, int64_t now_ms); /* ids may be issued now */

#endif
