/* engine.c: the engine's Redis side: SK__CONNS connections, all the same
 * reconnecting object (dlock__rconn, redis_async.h: backoff, a FIFO of
 * commands in flight with a reply deadline, EVALSHA then EVAL once on
 * NOSCRIPT);
 * a WAIT blocks its connection, so purchase batches spread over them,
 * each WAIT on its batch's; connection 0 also carries the engine's own
 * commands. Besides: the order-id worker lease and the campaign table. *
 * Design note. Purchases of one campaign are decided by purchase.lua in
 * one round trip; keys of a campaign share the hash tag {c:<id>} so each
 * script runs in one Cluster slot. The connection is the only shared
 * resource: while it is down every request fails fast with SK_EUNAVAIL
 * (HTTP 503); a command sent but not answered reports DLOCK_EUNKNOWN (the
 * decision may have happened: a retry with the same Idempotency-Key gives
 * the first answer). Order ids need the worker lease (engine_lease.c);
 * what /healthz is told about Redis (refused credentials or writes) and
 * when the reconnect backoff starts again is engine_health.c. Those parts
 * (and engine_server.c, engine_acks.c) are sub-structs of the engine that
 * reach Redis, the log and the clock only through the wire (engine_wire.h)
 * init_parts gives them; this file calls them, they never call it (the
 * server part's probes are sent here, and their replies handed to it:
 * its answer says when the facts are complete).
 * A new connection first loads the scripts and probes the server
 * (engine_server.c: run id, replicas, persistence); the engine is ready
 * once those replies are in and a lease is held. Purchases go to the
 * coalescer (coalesce.c), which owns their flow: it sends through the
 * wire and reads the parts' facts, and never calls this file; each batch
 * is followed by WAIT when replicas must
 * acknowledge it and enough of them are known in sync (engine_acks.c,
 * docs/design/promise.md). A WAIT blocks the connection for up to its
 * timeout (plus Redis's timer granularity), so the reply deadline runs per
 * command ("Deadlines" at dlock__rconn, redis_async.h); a late reply on
 * any connection drops connection 0 too. */
#include <event2/event.h>

#include "coalesce.h"
#include "engine.h"
#include "engine_acks.h"
#include "engine_health.h"
#include "engine_lease.h"
#include "engine_parts.h"
#include "engine_server.h"
#include "engine_wire.h"
#include "orderid.h"
#include "redis_async.h"
#include "url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "dlock/dlock.h"
#include "resp_write.h"
#include "script.h"
#include "slot.h"
#include "util.h"

/* lua/<name>.lua, with its SHA-1, fixed at build time (script.h) */
extern const dlock__script sk_script_purchase, sk_script_campaign_heat, sk_script_campaign_info,
    sk_script_sk_worker_lease, sk_script_transfer;

static const dlock__script *const lua[SK__NLUA] = {&sk_script_purchase, &sk_script_campaign_heat,
                                                   &sk_script_campaign_info, &sk_script_sk_worker_lease,
                                                   &sk_script_transfer};

#define TICK_MS 50

/* One of the engine's SK__CONNS connections (engine_wire.h), all alike
 * (dlock__rconn, redis_async.h: reconnect with backoff, deadlines, NOSCRIPT):
 * each carries purchase batches and their WAITs, so that one batch's script
 * runs while another connection's WAIT waits for the replica; connection 0
 * also carries the engine's own commands (scripts, probes, the lease,
 * campaigns), and the others connect only beside it. Sentinel resolves the
 * master at every open. A connection > 0 carries batches only while the run
 * id its server gave at connect is connection 0's (off a Cluster; on a
 * Cluster the script reads its node's). */
typedef struct sk__conn {
    struct sk_engine *e;
    int i;              /* its number: 0 .. SK__CONNS - 1 */
    dlock__rconn *rc;   /* also wire.conns[i]; its run id (i > 0) is wire.runid[i] */
} sk__conn;

/* The reply of the server part's probe i (engine_server.h). */
typedef struct sk__probe {
    struct sk_engine *e;
    int i;
} sk__probe;

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
    /* the parts, each on the wire */
    sk__server srv;         /* what the connected server said at connect */
    sk__probe probes[SK__PROBES];
    sk__acks acks;          /* the acknowledgement plan */
    sk__lease lease;        /* the order-id worker lease and the id generator */
    sk__health health;      /* what /healthz is told */
    sk__conn conns[SK__CONNS];
    sk__wire wire;          /* the connections as every sender sees them */
};

#define sk__log(e, level, ...) sk_logf((e)->o.log, (e)->o.log_ud, level, __VA_ARGS__)

sk__wire *sk__engine_wire(sk_engine *e) { return &e->wire; }

const sk__server *sk__engine_server(const sk_engine *e) { return &e->srv; }

sk__coalescer *sk__engine_coalescer(sk_engine *e) { return e->co; }

void sk_engine_opts_init(sk_engine_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->max_batch = 64;
    o->linger_us = 1000;
    o->soldout_poll_ms = 500;
    o->user_rate_window_ms = 1000;
    o->ip_rate_window_ms = 1000;
    o->idem_ttl_ms = 24LL * 3600 * 1000;
    o->order_ttl_ms = 7LL * 24 * 3600 * 1000;
    o->command_timeout_ms = 2000;
    o->reconnect_max_ms = 2000;
    o->replica_acks = -1;
    o->replica_ack_timeout_ms = 100;
    o->worker_lease_ms = 60000;
}

static bool conn_up(const sk_engine *e, int conn);

bool sk_engine_ready(const sk_engine *e) { return sk__coalescer_ready(e->co); }

int sk_engine_next_order_id(sk_engine *e, uint64_t *id_out)
{
    return sk__lease_next_id(&e->lease, id_out);
}

size_t sk_engine_pending(const sk_engine *e) { return sk__coalescer_pending(e->co); }

void sk_engine_get_stats(const sk_engine *e, sk_engine_stats *out)
{
    *out = e->st;
    sk__coalescer_stats(e->co, out);
    out->ack_mode = sk__acks_plan(&e->acks, &out->ack_replicas, &(int64_t){0});
    out->ack_in_sync = sk__acks_known(&e->acks);
    out->worker_id = sk__lease_worker(&e->lease);
    out->lease_held = out->worker_id >= 0;
    out->lease_fence = e->lease.fence;
    out->lease_lost = e->lease.lost;
}

int sk_engine_purchase(sk_engine *e, const char *campaign, const char *user, int64_t qty,
                       const char *idem, const char *ip, sk_purchase_cb cb, void *arg)
{
    if (!e) return SK_EINVAL;
    return sk__coalescer_purchase(e->co, campaign, user, qty, idem, ip, cb, arg);
}

/* ---- commands: every one goes through the wire (engine_wire.h) --------- */

static dlock__rconn *conn_rc(const sk_engine *e, int conn) { return e->conns[conn].rc; }

static bool conn_up(const sk_engine *e, int conn) { return sk__wire_up(&e->wire, conn); }

/* Counts a reply for the node that served it (seckill_redis_node_calls_total). */
static void count_node(sk_engine *e, int slot)
{
    if (slot < 0) return;
    char name[64];
    if (sk__wire_node_of_slot(&e->wire, slot, name, sizeof(name)) != 0) return;
    sk_engine_stats_add_node(&e->st, name, 1);
}

void sk_engine_stats_add_node(sk_engine_stats *st, const char *node, uint64_t calls)
{
    int i = 0;
    while (i < st->nnodes && strcmp(st->nodes[i].node, node) != 0) i++;
    if (i == st->nnodes) {
        if (st->nnodes == SK_STAT_NODES) i = SK_STAT_NODES - 1; /* the rest */
        else snprintf(st->nodes[st->nnodes++].node, sizeof(st->nodes[0].node), "%s", node);
    }
    st->nodes[i].calls += calls;
}

static bool health_error_reply(sk_engine *e, const char *msg); /* true: a refused credential */
static void health_good_reply(sk_engine *e);

/* Every final reply on every connection, before its command's callback:
 * the door's code (a dlock__err) becomes the engine's here at the edge
 * (callers compare with the engine's codes only), an ERROR reply
 * DLOCK_ESERVER; what it says about the server goes to the health part. */
static int on_conn_reply(dlock__rconn *rc, int slot, const dlock__reply *reply, int err, void *owner)
{
    (void)rc;
    sk_engine *e = ((sk__conn *)owner)->e;
    if (!reply && err) err = sk_err_from_common(err);
    if (reply && dlock__reply_kind(reply) != DLOCK__R_ERROR) {
        count_node(e, slot);
        health_good_reply(e);
        return 0;
    }
    e->st.redis_errors++;
    if (!reply) return err ? err : DLOCK_EUNKNOWN;
    const char *msg = dlock__reply_str(reply, NULL);
    if (!health_error_reply(e, msg ? msg : "")) sk__log(e, DLOCK_LOG_WARN, "redis error: %s", msg ? msg : "?");
    return DLOCK_ESERVER;
}

/* ---- the parts ---------------------------------------------------------- */

static void links_open(sk_engine *e);

/* Data connections are opened only beside an engine connection that is up
 * and whose login was not refused in any way: a refusal is retried there,
 * at its backoff, and not on every data connection too. */
static bool links_wanted(const sk_engine *e)
{
    return conn_up(e, 0) && !e->freeing && !e->health.auth_refused &&
           !dlock__aconn_refusal(dlock__rconn_aconn(conn_rc(e, 0)), NULL);
}

/* Each probe's reply goes to the server part; after the last one the
 * server's connect-time facts are in. */
static void on_probe(const dlock__reply *r, int err, void *priv)
{
    const sk__probe *p = priv;
    sk_engine *e = p->e;
    if (!sk__server_read(&e->srv, p->i, r, err)) return;
    sk__acks_connected(&e->acks);
    if (links_wanted(e)) links_open(e);
}

/* A new connection: the server part forgets the facts; its probes go out
 * (due counts those sent). */
static void probe_server(sk_engine *e)
{
    sk__server_forget(&e->srv);
    for (int i = 0; i < SK__PROBES; i++) {
        const char **argv = NULL;
        int argc = sk__server_probe_argv(i, &argv);
        e->probes[i] = (sk__probe){.e = e, .i = i};
        if (sk__wire_cmd(&e->wire, 0, -1, argc, argv, on_probe, &e->probes[i]) == 0) e->srv.due++;
    }
}

static void init_parts(sk_engine *e)
{
    sk__wire *w = &e->wire;
    *w = (sk__wire){.muted = &e->health.auth_refused, .strip_db = e->url.kind == DLOCK__URL_TCP, .log = e->o.log,
                    .log_ud = e->o.log_ud};
    bool failover = e->url.kind == DLOCK__URL_SENTINEL || e->url.kind == DLOCK__URL_CLUSTER;
    sk__server_init(&e->srv, w);
    sk__acks_init(&e->acks, w, &e->srv, e->o.replica_acks, e->o.replica_ack_timeout_ms, failover);
    sk__lease_init(&e->lease, w, e->instance, (int)dlock__random_below(SK_ORDERID_MAX_WORKER + 1),
                   e->o.worker_lease_ms);
    sk__health_init(&e->health, w, &e->url, e->instance, e->o.reconnect_max_ms);
}

static bool health_error_reply(sk_engine *e, const char *msg)
{
    return sk__health_error(&e->health, msg, dlock__aconn_refusal(dlock__rconn_aconn(conn_rc(e, 0)), NULL));
}

static void health_good_reply(sk_engine *e)
{
    /* the backoff starts again only from a connection that works */
    dlock__rconn *rc = conn_rc(e, 0);
    if (sk__health_good(&e->health, dlock__aconn_refusal(dlock__rconn_aconn(rc), NULL) != NULL))
        dlock__rconn_backoff_reset(rc);
}



sk_redis_health sk_engine_redis_health(const sk_engine *e, const char **why_out)
{
    return sk__health_state(&e->health, conn_up(e, 0), why_out);
}

int sk_engine_check_auth(const char *redis_url, int64_t timeout_ms, char *err, size_t errlen)
{
    return sk__health_check_auth(redis_url, timeout_ms, err, errlen);
}

/* The connection ac is gone (or could not open: ac NULL). */
static void health_down(sk_engine *e, dlock__aconn *ac, const char *what, const char *why)
{
    bool auth = false;
    const char *refused = ac ? dlock__aconn_refusal(ac, &auth) : NULL;
    sk__health_down(&e->health, refused, auth, what, why);
}

/* ---- the connections ---------------------------------------------------- */

static void on_script_loaded(const dlock__reply *r, int err, void *priv)
{
    (void)r;
    (void)err;
    (void)priv;
}

/* Loads every script first thing on a new connection: commands on one
 * connection run in order, so no EVALSHA after this meets NOSCRIPT (and
 * batches of a campaign keep their order). NOSCRIPT can still happen after
 * a SCRIPT FLUSH; those calls are sent again as EVAL (redis_async.c). */
static void load_scripts(sk_engine *e)
{
    for (int i = 0; i < SK__NLUA; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", lua[i]->src};
        sk__wire_cmd(&e->wire, 0, -1, 3, argv, on_script_loaded, NULL);
    }
}

/* Connection 0 carries the engine's own commands besides batches: its
 * coming up starts the probes and the lease; its going stops them. */
static void main_state(sk_engine *e, dlock__rconn_event ev, dlock__aconn *ac, const char *why)
{
    switch (ev) {
    case DLOCK__RCONN_UP:
        if (e->ever_up) e->st.reconnects++;
        e->ever_up = true;
        sk__health_up(&e->health); /* "redis connected" and the backoff reset wait for a good reply */
        load_scripts(e);
        sk__acks_reset(&e->acks);
        probe_server(e);
        sk__lease_step(&e->lease);
        return;
    case DLOCK__RCONN_FAILED:
        health_down(e, NULL, "redis", why);
        return;
    case DLOCK__RCONN_LOST:
    case DLOCK__RCONN_DROPPED:
        health_down(e, ac, ev == DLOCK__RCONN_LOST ? "redis connection lost" : "redis connection dropped", why);
        sk__lease_disconnected(&e->lease);
        return;
    }
}

/* INFO server on a data connection: the run id of the server it reached. */
static void on_link_info(const dlock__reply *r, int err, void *priv)
{
    sk__conn *l = priv;
    char *runid = l->e->wire.runid[l->i];
    if (err || !dlock__rconn_is_up(l->rc) || dlock__reply_kind(r) != DLOCK__R_STRING) return; /* stays unused */
    if (dlock__aconn_refusal(dlock__rconn_aconn(l->rc), NULL)) return; /* its login was refused: not to rely on */
    if (sk__info_field(dlock__reply_str(r, NULL), "run_id", runid, sizeof(l->e->wire.runid[0])))
        dlock__rconn_backoff_reset(l->rc);
}

/* A connection > 0 carries batches once its server's run id is read. */
static void link_state(sk__conn *l, dlock__rconn_event ev, const char *why)
{
    l->e->wire.runid[l->i][0] = '\0';
    if (ev == DLOCK__RCONN_UP) {
        const char *argv[] = {"INFO", "server"};
        sk__wire_cmd(&l->e->wire, l->i, -1, 2, argv, on_link_info, l);
    } else if (ev != DLOCK__RCONN_FAILED) {
        sk__log(l->e, DLOCK_LOG_DEBUG, "redis data connection %d %s: %s", l->i,
                ev == DLOCK__RCONN_LOST ? "lost" : "dropped", why);
    }
}

static void on_conn_state(dlock__rconn *rc, dlock__rconn_event ev, dlock__aconn *ac, const char *why, void *owner)
{
    (void)rc;
    sk__conn *c = owner;
    if (c->i == 0) main_state(c->e, ev, ac, why);
    else link_state(c, ev, why);
}

/* Connection 0 reconnects at its backoff; the others only beside it (a
 * refused login or a server down is retried there, not on each of them:
 * links_open opens them again). */
static bool conn_may_connect(dlock__rconn *rc, void *owner)
{
    (void)rc;
    const sk__conn *c = owner;
    return c->i == 0 || links_wanted(c->e);
}

/* The engine's connection knows its server (run id, Cluster mode): the
 * data connections that are not open connect now. */
static void links_open(sk_engine *e)
{
    for (int i = 1; i < SK__CONNS; i++) dlock__rconn_connect(conn_rc(e, i));
}

/* A data connection's deadlines; a late reply there means the server does
 * not answer: the engine's connection goes too (requests fail fast until
 * it answers again). One on another server than the engine's connection
 * (a failover moved one of them) connects again. */
static void link_tick(sk_engine *e, sk__conn *l, int64_t now)
{
    int late = dlock__rconn_check(l->rc, now);
    if (late == DLOCK__RCONN_REPLY_LATE) dlock__rconn_drop(conn_rc(e, 0), "reply deadline passed on a data connection");
    if (late) return;
    const char *runid = e->wire.runid[l->i];
    if (conn_up(e, l->i) && runid[0] && conn_up(e, 0) && e->srv.due == 0 && !e->srv.cluster && e->srv.runid[0] &&
        strcmp(runid, e->srv.runid) != 0)
        dlock__rconn_drop(l->rc, "on another server than the engine's connection");
}

/* ---- the tick ---------------------------------------------------------- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk_engine *e = arg;
    int64_t now = dlock__now_ms();
    if (dlock__rconn_check(conn_rc(e, 0), now)) return;
    for (int i = 1; i < SK__CONNS; i++) link_tick(e, &e->conns[i], now);
    bool up = conn_up(e, 0);
    if (sk__health_tick(&e->health, up)) {
        dlock__rconn_drop(conn_rc(e, 0), "credentials refused");
        return;
    }
    if (e->srv.due == 0) sk__lease_tick(&e->lease, up);
    if (up && e->srv.due == 0) sk__acks_tick(&e->acks);
    if (up && now - e->last_poll_ms >= e->o.soldout_poll_ms) {
        e->last_poll_ms = now;
        sk__coalescer_poll_soldout(e->co);
    }
}

/* ---- life cycle --------------------------------------------------------- */

/* Every connection alike: the same reconnecting object and callbacks,
 * told apart by its number (sk__conn.i). */
static int conns_new(sk_engine *e)
{
    for (int i = 0; i < SK__CONNS; i++) {
        sk__conn *c = &e->conns[i];
        c->e = e;
        c->i = i;
        const dlock__rconn_opts o = {.base = e->base, .url = &e->url, .timeout_ms = e->o.command_timeout_ms,
                                     .backoff_max_ms = e->o.reconnect_max_ms, .owner = c,
                                     .on_state = on_conn_state, .on_reply = on_conn_reply,
                                     .may_connect = conn_may_connect};
        if (dlock__rconn_new(&o, &c->rc) != 0) return DLOCK_ENOMEM;
        e->wire.conns[i] = c->rc;
    }
    return 0;
}

/* The options as the engine runs them (bounds a caller may miss). */
static void opts_fix(sk_engine_opts *o)
{
    if (o->max_batch < 1) o->max_batch = 1;
    if (o->max_batch > 512) o->max_batch = 512;
    if (o->command_timeout_ms <= 0) o->command_timeout_ms = 2000;
    if (o->soldout_poll_ms <= 0) o->soldout_poll_ms = 500;
    /* WAIT with timeout 0 would block forever */
    if (o->replica_ack_timeout_ms <= 0) o->replica_ack_timeout_ms = 100;
    if (o->worker_lease_ms <= 0) o->worker_lease_ms = 60000;
    if (o->worker_lease_ms < 300) o->worker_lease_ms = 300;
}

int sk_engine_new(struct event_base *base, const char *redis_url, const sk_engine_opts *opts,
                  sk_engine **out, char *err, size_t errlen)
{
    *out = NULL;
    sk_engine *e = calloc(1, sizeof(*e));
    if (!e) return DLOCK_ENOMEM;
    e->base = base;
    if (opts) e->o = *opts;
    else sk_engine_opts_init(&e->o);
    opts_fix(&e->o);
    if (dlock__url_parse(redis_url ? redis_url : "redis://127.0.0.1:6379", &e->url, err, errlen)) {
        free(e);
        return SK_EINVAL;
    }
    dlock__random_hex(e->instance, 16);
    init_parts(e);
    e->tick_ev = event_new(base, -1, EV_PERSIST, on_tick, e);
    const sk__co_deps deps = {.w = &e->wire, .lease = &e->lease, .acks = &e->acks, .srv = &e->srv};
    int rc = sk__coalescer_new(base, &e->o, &deps, &e->co);
    if (rc || !e->tick_ev || conns_new(e) != 0) {
        sk_engine_free(e);
        return DLOCK_ENOMEM;
    }
    struct timeval tick = {0, TICK_MS * 1000};
    event_add(e->tick_ev, &tick);
    dlock__rconn_connect(conn_rc(e, 0));
    *out = e;
    return 0;
}

void sk_engine_free(sk_engine *e)
{
    if (!e) return;
    e->freeing = true;
    if (e->co) sk__coalescer_fail_all(e->co, DLOCK_ECLOSED);
    for (int i = 0; i < SK__CONNS; i++) dlock__rconn_free(e->conns[i].rc); /* replies due run now */
    if (e->tick_ev) event_free(e->tick_ev);
    sk__coalescer_free(e->co); /* after the close: no reply is due any more */
    dlock__url_free(&e->url);
    free(e);
}

/* ---- ping ---------------------------------------------------------------- */

typedef struct ping_req {
    void (*cb)(int err, void *arg);
    void *arg;
} ping_req;

static void on_ping(const dlock__reply *r, int err, void *priv)
{
    (void)r;
    ping_req *p = priv;
    p->cb(err ? (err == DLOCK_EUNKNOWN ? err : SK_EUNAVAIL) : 0, p->arg);
    free(p);
}

int sk_engine_ping(sk_engine *e, void (*cb)(int err, void *arg), void *arg)
{
    ping_req *p = malloc(sizeof(*p));
    if (!p) return DLOCK_ENOMEM;
    p->cb = cb;
    p->arg = arg;
    const char *argv[] = {"PING"};
    int rc = sk__wire_cmd(&e->wire, 0, -1, 1, argv, on_ping, p);
    if (rc) free(p);
    return rc;
}
