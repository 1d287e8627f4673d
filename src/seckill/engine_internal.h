/* engine_internal.h: what engine.c, engine_server.c, engine_lease.c, engine_health.c and
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

enum { SK__LUA_PURCHASE = 0, SK__LUA_HEAT, SK__LUA_INFO, SK__LUA_LEASE, SK__LUA_TRANSFER, SK__NLUA };

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
    int64_t connect_ms;     /* monotonic time the current connect began (connect deadline) */
    /* what the connected server said at connect (engine_server.c) */
    char runid[41];         /* INFO server run_id; "" unknown */
    int info_due;           /* connect-time replies still to come */
    int srv_replicas;       /* INFO replication connected_slaves */
    bool srv_aof_yes, srv_fsync_always;
    bool srv_cluster;       /* INFO cluster cluster_enabled:1: every node has its own run id */
    /* What is known of the replicas of the masters WAITs go to
     * (engine_acks.c): entry 0 is the connected server (one server, or
     * Sentinel's master); on a Cluster one entry per master whose WAIT came
     * back short, by "host:port". known: replicas online and in sync, -1
     * unknown (WAIT is sent); listed: replicas the master lists in any
     * state, -1 unknown. */
    struct sk__acks { char node[64]; int slot; int known; int listed; int64_t seen_ms; } acks[SK_STAT_NODES];
    int64_t acks_probe_ms;  /* when the last periodic probe was sent */
    int acks_probe_due;     /* its replies still to come */
    bool reprobe_off;       /* a probe was refused (ACL, renamed command): not sent again on this connection */
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
    /* what /healthz is told (engine_health.c) */
    bool proven;            /* this connection answered a command without an error */
    bool auth_refused;      /* until a connection is proven */
    bool drop_due;          /* this connection's credentials were refused: the tick drops it */
    bool writes_refused;    /* until a write succeeds */
    bool probe_busy;        /* the write probe is in flight */
    int64_t probe_ms;       /* when it was last sent */
    char down_why[200];     /* why the last connection failed or went down */
    char auth_why[300];
    char writes_why[300];
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
/* The periodic probe (every ACK_PROBE_MS, one at a time): the replicas
 * online and in sync (INFO replication) while the plan is WAIT, the AOF
 * settings (CONFIG GET) of a standalone server while it is not; on a
 * Cluster INFO replication of each master known short. */
void sk__server_reprobe(sk_engine *e, int64_t now_ms);
/* Replicas online (state=online) and in sync (lag <= a bound) in an INFO
 * replication text; *listed_out (may be NULL) gets every replica it lists. */
int sk__info_replicas_in_sync(const char *info, int *listed_out);

/* engine_acks.c: the acknowledgement plan. */
/* How a purchase batch is acknowledged now: SK__ACK_* (coalesce.h) and,
 * for SK__ACK_WAIT, the replicas and the timeout of its WAIT. */
int sk__ack_plan(const sk_engine *e, int *replicas_out, int64_t *timeout_ms_out);
/* Forgets what was known (a new connection: nothing is known yet). */
void sk__acks_reset(sk_engine *e);
/* A probe or a WAIT's reply says node i (0: the connected server) has
 * known replicas online and in sync; logs a change across replica-acks. */
void sk__acks_set(sk_engine *e, int i, int known, const char *why);
/* A WAIT for slot (-1: the connected server) asking for asked replicas
 * was answered got (fewer: the known count drops at once). */
void sk__acks_note_wait(sk_engine *e, int slot, long long asked, long long got);
/* Sends a batch's WAIT unless the master serving route_key is known to
 * have fewer replicas in sync than it asks for: 0 sent (fn will run),
 * 1 skipped (no WAIT: the batch is pending), or an error. */
int sk__acks_send_wait(sk_engine *e, const char *route_key, int argc, const char **argv, sk__reply_fn fn,
                       void *priv);
/* The master serving route_key lists no replica at all (its last INFO
 * replication): a promoted master whose replica is gone, or a server
 * without replicas. False when unknown, and for a master that still lists
 * a replica that does not acknowledge (cut off from it, as a master cut
 * off from Sentinel is): there a confirmed replay stays 202. */
bool sk__acks_alone(sk_engine *e, const char *route_key);
/* Replicas known in sync on the connected server (Cluster: the fewest of
 * the masters known), -1 unknown: the seckill_ack_replicas_in_sync gauge. */
int sk__acks_known(const sk_engine *e);
/* "host:port" of the node serving slot now (one server: its endpoint). */
int sk__node_of_slot(const sk_engine *e, int slot, char *out, size_t cap);

/* engine_health.c: the state /healthz reports (see its file comment). */
/* An error reply msg on the current connection. True when it is a refused
 * credential (logged once as the state, not per command). */
bool sk__health_error_reply(sk_engine *e, const char *msg);
void sk__health_good_reply(sk_engine *e); /* a reply without error */
void sk__health_up(sk_engine *e);         /* a new connection is open (not proven yet) */
/* The connection ac is gone (or could not open: ac NULL); logs "what: why". */
void sk__health_down(sk_engine *e, dlock__aconn *ac, const char *what, const char *why);
/* Sends the write probe while writes are refused. True when the open
 * connection must be dropped (its credentials were refused). */
bool sk__health_tick(sk_engine *e, int64_t now_ms);

/* engine_lease.c: the order-id worker lease. */
void sk__lease_step(sk_engine *e);          /* take or renew now (one in flight) */
void sk__lease_tick(sk_engine *e, int64_t now_ms); /* renew at 1/3, give up at lease - margin */
bool sk__lease_valid(const sk_engine *e, int64_t now_ms); /* ids may be issued now */

#endif
