/* engine.c: the engine's Redis side: one async connection with reconnect
 * and backoff (plus the extra data connections for purchase batches,
 * sk__link: a WAIT blocks its connection, so batches spread over
 * SK__CONNS connections, each WAIT on its batch's), a FIFO of in-flight
 * commands per connection with a reply deadline, script
 * calls through the one script object (script.h: EVALSHA, EVAL once on
 * NOSCRIPT), the order-id worker lease and the campaign table.
 *
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
 * reach Redis, the log and the clock only through the port and clock
 * init_parts gives them; this file calls them, they never call it.
 * A new connection first loads the scripts and probes the server
 * (engine_server.c: run id, replicas, persistence); the engine is ready
 * once those replies are in and a lease is held. Purchases go through the
 * coalescer (coalesce.c), which reaches this file only by the hooks it is
 * given here; each batch is followed by WAIT when replicas must
 * acknowledge it and enough of them are known in sync (engine_acks.c,
 * docs/design/promise.md). A WAIT blocks the connection
 * for up to its timeout (plus Redis's timer granularity), so the reply
 * deadline runs per command: the oldest unanswered one is late when it was
 * not answered command_timeout_ms (plus its own WAIT timeout) after it was
 * sent and after the reply ahead of it came. Measured from the reply ahead,
 * not accumulated, so a queue of WAITs that each overshoot a little never
 * adds up to a false deadline. */
#include "engine_internal.h"

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

struct sk__call {
    sk_engine *e;
    sk__reply_fn fn;
    void *priv;
    int64_t sent_ms;
    int64_t block_ms;             /* WAIT's timeout (0 for other commands) */
    struct sk__call *prev, *next; /* in-flight FIFO */
    int script;                   /* SK__LUA_* or -1 */
    int slot;                     /* a keyless command for this slot's master (Cluster), or -1 */
    int argc;
    const char **argv;            /* owned (same allocation); NULL for a RESP call */
    size_t *lens;
    dlock__script_rcall rc;       /* a script call (argv NULL): its arguments (same allocation) and slot */
    sk__link *link;               /* the extra data connection it went on; NULL: the engine's own */
};

#define TICK_MS 50

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

static bool ready(const sk_engine *e)
{
    return e->up && e->ac && e->srv.due == 0 && sk__lease_valid(&e->lease);
}

bool sk_engine_ready(const sk_engine *e) { return ready(e); }

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

/* ---- command tracking ------------------------------------------------ */

/* The connection a call goes on, its FIFO and the time of its last reply. */
static dlock__aconn *call_ac(const sk__call *c) { return c->link ? c->link->ac : c->e->ac; }

static bool call_up(const sk__call *c) { return c->link ? c->link->up && c->link->ac : c->e->up && c->e->ac; }

static sk__call **fifo_head(sk__call *c) { return c->link ? &c->link->head : &c->e->head; }

static sk__call **fifo_tail(sk__call *c) { return c->link ? &c->link->tail : &c->e->tail; }

static void unlink_call(sk_engine *e, sk__call *c)
{
    (void)e;
    if (c->prev) c->prev->next = c->next;
    else *fifo_head(c) = c->next;
    if (c->next) c->next->prev = c->prev;
    else *fifo_tail(c) = c->prev;
    c->prev = c->next = NULL;
}

static void on_call_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv);

/* Appends a sent command to the FIFO (Redis answers them in order). */
static void track_call(sk_engine *e, sk__call *c)
{
    (void)e;
    sk__call **head = fifo_head(c), **tail = fifo_tail(c);
    c->sent_ms = dlock__now_ms();
    c->prev = *tail;
    c->next = NULL;
    if (*tail) (*tail)->next = c;
    else *head = c;
    *tail = c;
}

int sk__node_of_slot(const sk_engine *e, int slot, char *out, size_t cap)
{
    if (!e->ac || dlock__aconn_node_of_slot(e->ac, (unsigned)slot, out, cap) != 0) return -1;
    char *db = e->url.kind == DLOCK__URL_TCP ? strrchr(out, '/') : NULL; /* "host:port/db" */
    if (db) *db = '\0';
    return 0;
}

/* A keyless command to the master of c->slot (WAIT on a Cluster): WAIT
 * there counts the replicas of this engine's writes on that node. */
static int aconn_cmd_slot(dlock__aconn *ac, sk__call *c)
{
    return dlock__aconn_cmd_slot(ac, (unsigned)c->slot, on_call_reply, c, c->argc, c->argv, c->lens);
}

static int send_call(sk_engine *e, sk__call *c)
{
    if (!call_up(c)) return SK_EUNAVAIL;
    int rc = c->slot >= 0 ? aconn_cmd_slot(call_ac(c), c)
                          : dlock__aconn_cmd(call_ac(c), on_call_reply, c, c->argc, c->argv, c->lens);
    if (rc) return rc == DLOCK__ENOMEM ? DLOCK_ENOMEM : SK_EUNAVAIL;
    track_call(e, c);
    return 0;
}

/* ---- RESP calls: the purchase batch's arguments come formatted ---------- */

/* EVALSHA (or EVAL after NOSCRIPT) in front of the call's arguments, by
 * the script object (script.h): the bytes are sent as the writer made them. */
static int send_resp(sk_engine *e, sk__call *c)
{
    int rc = dlock__script_rcall_send(call_ac(c), &c->rc, on_call_reply, c);
    if (rc) return rc == DLOCK__ENOMEM ? DLOCK_ENOMEM : SK_EUNAVAIL;
    track_call(e, c);
    return 0;
}

/* The scripts' cache of the server is gone (restart, SCRIPT FLUSH): true
 * when c is to be sent again with the source (once; nothing ran). */
static bool script_missing(sk__call *c, const dlock__reply *reply)
{
    if (!reply || c->script < 0) return false;
    return dlock__script_rcall_retry(&c->rc, reply);
}

/* The extra data connection conn (> 0), NULL for 0 (the engine's own). */
static sk__link *link_of(sk_engine *e, int conn)
{
    return conn > 0 && conn < SK__CONNS ? &e->links[conn - 1] : NULL;
}

int sk__call_script_resp(sk_engine *e, int script, const sk__resp_args *a, sk__reply_fn fn, void *priv)
{
    return sk__call_script_resp_on(e, 0, script, a, fn, priv);
}

int sk__call_script_resp_on(sk_engine *e, int conn, int script, const sk__resp_args *a, sk__reply_fn fn,
                            void *priv)
{
    sk__link *l = link_of(e, conn);
    if (l ? !l->ac || !l->up : !e->ac || !e->up) return SK_EUNAVAIL;
    sk__call *c = malloc(sizeof(*c) + DLOCK__SCRIPT_HEAD_ROOM + a->len);
    if (!c) return DLOCK_ENOMEM;
    *c = (sk__call){.e = e, .fn = fn, .priv = priv, .script = script, .slot = -1, .argc = a->nargs + 2,
                    .link = l};
    c->rc = (dlock__script_rcall){.s = lua[script], .nargs = a->nargs, .slot = a->slot,
                                  .args = (char *)(c + 1) + DLOCK__SCRIPT_HEAD_ROOM, .len = a->len};
    memcpy(c->rc.args, a->resp, a->len);
    int rc = send_resp(e, c);
    if (rc) free(c);
    return rc;
}

/* The slot a call goes to: the slot its writer gave (RESP calls), its
 * first key (argv scripts with keys), its c->slot (WAIT on a Cluster),
 * else -1 (keyless: not counted per node). */
static int call_slot(const sk__call *c)
{
    if (c->slot >= 0) return c->slot;
    return c->script < 0 ? -1 : c->rc.slot;
}

/* Counts a reply for the node that served it (seckill_redis_node_calls_total). */
static void count_node(sk_engine *e, const sk__call *c)
{
    int slot = call_slot(c);
    if (slot < 0) return;
    char name[64];
    if (sk__node_of_slot(e, slot, name, sizeof(name)) != 0) return;
    sk_engine_stats *st = &e->st;
    int i = 0;
    while (i < st->nnodes && strcmp(st->nodes[i].node, name) != 0) i++;
    if (i == st->nnodes) {
        if (st->nnodes == SK_STAT_NODES) i = SK_STAT_NODES - 1; /* the rest */
        else snprintf(st->nodes[st->nnodes++].node, sizeof(st->nodes[0].node), "%s", name);
    }
    st->nodes[i].calls++;
}

static bool health_error_reply(sk_engine *e, const char *msg); /* true: a refused credential */
static void health_good_reply(sk_engine *e);

static void on_call_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv)
{
    (void)ac;
    sk__call *c = priv;
    sk_engine *e = c->e;
    /* the async door's code (a dlock__err) as the engine's, here at the
     * edge: callers compare with the engine's codes only */
    if (!reply && err) err = sk_err_from_common(err);
    if (reply) *(c->link ? &c->link->last_reply_ms : &e->last_reply_ms) = dlock__now_ms();
    if (reply && dlock__reply_kind(reply) != DLOCK__R_ERROR) count_node(e, c);
    if (c->block_ms > 0 && reply && dlock__reply_kind(reply) == DLOCK__R_INTEGER)
        sk__acks_wait_answered(&e->acks, c->slot, strtoll(c->argv[1], NULL, 10), dlock__reply_int(reply));
    unlink_call(e, c);
    if (call_up(c) && script_missing(c, reply)) {
        /* Scripts are gone (restart, SCRIPT FLUSH): send the source once. */
        sk__log(e, DLOCK_LOG_DEBUG, "script %d not loaded on the server: sending it", c->script);
        if (send_resp(e, c) == 0) return;
        reply = NULL;
        err = SK_EUNAVAIL;
    }
    if (!reply || dlock__reply_kind(reply) == DLOCK__R_ERROR) {
        e->st.redis_errors++;
        if (reply) {
            const char *msg = dlock__reply_str(reply, NULL);
            if (!health_error_reply(e, msg ? msg : ""))
                sk__log(e, DLOCK_LOG_WARN, "redis error: %s", msg ? msg : "?");
            err = DLOCK_ESERVER;
        } else if (err == 0) {
            err = DLOCK_EUNKNOWN;
        }
    } else {
        health_good_reply(e);
    }
    c->fn(reply, reply && !err ? 0 : err, c->priv);
    free(c);
}

/* A plain command (argv copied into the call's allocation). */
static sk__call *new_call(sk_engine *e, int nargs, const char **args, const size_t *lens, sk__reply_fn fn,
                          void *priv)
{
    int argc = nargs;
    size_t bytes = 0;
    for (int i = 0; i < nargs; i++) bytes += (lens ? lens[i] : strlen(args[i])) + 1;
    size_t sz = sizeof(sk__call) + (size_t)argc * (sizeof(char *) + sizeof(size_t)) + bytes;
    sk__call *c = malloc(sz);
    if (!c) return NULL;
    memset(c, 0, sizeof(*c));
    c->e = e;
    c->fn = fn;
    c->priv = priv;
    c->script = -1;
    c->slot = -1;
    c->argc = argc;
    c->argv = (const char **)(void *)(c + 1);
    c->lens = (size_t *)(void *)(c->argv + argc);
    char *p = (char *)(c->lens + argc);
    for (int i = 0; i < nargs; i++) {
        size_t n = lens ? lens[i] : strlen(args[i]);
        memcpy(p, args[i], n);
        p[n] = '\0';
        c->argv[i] = p;
        c->lens[i] = n;
        p += n + 1;
    }
    if (argc == 3 && strcmp(c->argv[0], "WAIT") == 0) c->block_ms = strtoll(c->argv[2], NULL, 10);
    return c;
}

/* A script call given as arguments (numkeys, keys..., args...): written as
 * RESP and sent by the one script call (sk__call_script_resp), its slot
 * that of its first key (-1 when keyless). */
int sk__call_script(sk_engine *e, int script, int nargs, const char **args, const size_t *lens,
                    sk__reply_fn fn, void *priv)
{
    if (!e->ac || !e->up) return SK_EUNAVAIL;
    if (nargs < 1) return SK_EINVAL;
    size_t bytes = 0;
    for (int i = 0; i < nargs; i++) bytes += (lens ? lens[i] : strlen(args[i])) + DLOCK__RESP_BULK_OVERHEAD;
    char *buf = malloc(bytes);
    if (!buf) return DLOCK_ENOMEM;
    char *p = buf;
    for (int i = 0; i < nargs; i++) p = dlock__resp_bulk(p, args[i], lens ? lens[i] : strlen(args[i]));
    bool keyed = nargs >= 2 && strcmp(args[0], "0") != 0;
    sk__resp_args a = {.resp = buf, .len = (size_t)(p - buf), .nargs = nargs,
                       .slot = keyed ? (int)dlock__key_slot(args[1], lens ? lens[1] : strlen(args[1])) : -1};
    int rc = sk__call_script_resp(e, script, &a, fn, priv);
    free(buf);
    return rc;
}

int sk__call_cmd(sk_engine *e, int argc, const char **argv, const size_t *lens, sk__reply_fn fn,
                 void *priv)
{
    return sk__call_cmd_slot(e, -1, argc, argv, lens, fn, priv);
}

/* sk__call_cmd_slot on data connection conn (0: the engine's own). */
static int call_cmd_on(sk_engine *e, int conn, int slot, int argc, const char **argv, const size_t *lens,
                       sk__reply_fn fn, void *priv)
{
    sk__link *l = link_of(e, conn);
    if (l ? !l->ac || !l->up : !e->ac || !e->up) return SK_EUNAVAIL;
    sk__call *c = new_call(e, argc, argv, lens, fn, priv);
    if (!c) return DLOCK_ENOMEM;
    c->slot = slot;
    c->link = l;
    int rc = send_call(e, c);
    if (rc) free(c);
    return rc;
}

int sk__call_cmd_slot(sk_engine *e, int slot, int argc, const char **argv, const size_t *lens, sk__reply_fn fn,
                      void *priv)
{
    return call_cmd_on(e, 0, slot, argc, argv, lens, fn, priv);
}

/* ---- the parts' port and clock ------------------------------------------- */

static int port_cmd(void *ud, int slot, int argc, const char **argv, sk__reply_fn fn, void *priv)
{
    return sk__call_cmd_slot(ud, slot, argc, argv, NULL, fn, priv);
}

static int port_script(void *ud, int script, int nargs, const char **args, sk__reply_fn fn, void *priv)
{
    return sk__call_script(ud, script, nargs, args, NULL, fn, priv);
}

static int port_node_of_slot(void *ud, int slot, char *out, size_t cap) { return sk__node_of_slot(ud, slot, out, cap); }

static bool port_muted(void *ud) { return ((sk_engine *)ud)->health.auth_refused; }

static int64_t clock_now(void *ud)
{
    (void)ud;
    return dlock__now_ms();
}

static int64_t clock_wall(void *ud)
{
    (void)ud;
    return dlock__wall_ms();
}

static void links_open(sk_engine *e);

/* Data connections are opened only beside an engine connection that is up
 * and whose login was not refused in any way: a refusal is retried there,
 * at its backoff, and not on every data connection too. */
static bool links_wanted(const sk_engine *e)
{
    return e->up && e->ac && !e->freeing && !e->health.auth_refused && !dlock__aconn_refusal(e->ac, NULL);
}

/* The server's connect-time facts are in. */
static void on_server_probed(void *ud)
{
    sk_engine *e = ud;
    sk__acks_connected(&e->acks);
    if (links_wanted(e)) links_open(e);
}

static void init_parts(sk_engine *e)
{
    sk__port port = {.ud = e, .cmd = port_cmd, .script = port_script, .node_of_slot = port_node_of_slot,
                     .muted = port_muted, .log = e->o.log, .log_ud = e->o.log_ud};
    sk__clock clock = {.ud = e, .now_ms = clock_now, .wall_ms = clock_wall};
    bool failover = e->url.kind == DLOCK__URL_SENTINEL || e->url.kind == DLOCK__URL_CLUSTER;
    sk__server_init(&e->srv, &port, on_server_probed);
    sk__acks_init(&e->acks, &port, &clock, &e->srv, e->o.replica_acks, e->o.replica_ack_timeout_ms, failover);
    sk__lease_init(&e->lease, &port, &clock, e->instance, (int)dlock__random_below(SK_ORDERID_MAX_WORKER + 1),
                   e->o.worker_lease_ms);
    sk__health_init(&e->health, &port, &clock, &e->url, e->instance, e->o.reconnect_max_ms);
}

static bool health_error_reply(sk_engine *e, const char *msg)
{
    return sk__health_error(&e->health, msg, dlock__aconn_refusal(e->ac, NULL));
}

static void health_good_reply(sk_engine *e)
{
    /* the backoff starts again only from a connection that works */
    if (sk__health_good(&e->health, dlock__aconn_refusal(e->ac, NULL) != NULL)) e->attempt = 0;
}


const char *sk__script_runid(const sk_engine *e) { return sk__server_script_runid(&e->srv); }

sk_redis_health sk_engine_redis_health(const sk_engine *e, const char **why_out)
{
    return sk__health_state(&e->health, e->up && e->ac, why_out);
}

/* The connection ac is gone (or could not open: ac NULL). */
static void health_down(sk_engine *e, dlock__aconn *ac, const char *what, const char *why)
{
    bool auth = false;
    const char *refused = ac ? dlock__aconn_refusal(ac, &auth) : NULL;
    sk__health_down(&e->health, refused, auth, what, why);
}

/* ---- connection ------------------------------------------------------- */

static void on_state(dlock__aconn *ac, bool up, const char *why, void *priv);

static void schedule_reconnect(sk_engine *e)
{
    if (e->freeing) return;
    int64_t ms = dlock__backoff_ms(50, e->attempt++, e->o.reconnect_max_ms);
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    event_add(e->reconnect_ev, &tv);
}

static void drop_connection(sk_engine *e, const char *why)
{
    dlock__aconn *ac = e->ac;
    if (!ac) return;
    health_down(e, ac, "redis connection dropped", why);
    e->ac = NULL;
    e->up = false;
    sk__lease_disconnected(&e->lease);
    dlock__aconn_close(ac); /* pending callbacks run now with no reply */
    schedule_reconnect(e);
}

static void connect_now(sk_engine *e)
{
    char err[256] = "";
    /* A sentinel URL is resolved by dlock__aconn_open at every (re)connect. */
    int rc = dlock__aconn_open(e->base, &e->url, on_state, e, &e->ac, err, sizeof(err));
    e->connect_ms = dlock__now_ms();
    if (rc) {
        e->ac = NULL;
        health_down(e, NULL, "redis", err);
        schedule_reconnect(e);
    }
}

static void on_reconnect_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk_engine *e = arg;
    if (e->dead_ac) {
        dlock__aconn_close(e->dead_ac);
        e->dead_ac = NULL;
    }
    if (!e->ac) connect_now(e);
}

static void on_script_loaded(const dlock__reply *r, int err, void *priv)
{
    (void)r;
    (void)err;
    (void)priv;
}

/* Loads every script first thing on a new connection: commands on one
 * connection run in order, so no EVALSHA after this meets NOSCRIPT (and
 * batches of a campaign keep their order). NOSCRIPT can still happen after
 * a SCRIPT FLUSH; those calls are re-sent as EVAL (on_call_reply). */
static void load_scripts(sk_engine *e)
{
    for (int i = 0; i < SK__NLUA; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", lua[i]->src};
        sk__call_cmd(e, 3, argv, NULL, on_script_loaded, NULL);
    }
}

static void on_state(dlock__aconn *ac, bool up, const char *why, void *priv)
{
    sk_engine *e = priv;
    if (ac != e->ac) return;
    if (up) {
        e->up = true;
        if (e->ever_up) e->st.reconnects++;
        e->ever_up = true;
        sk__health_up(&e->health); /* "redis connected" and the backoff reset wait for a good reply */
        load_scripts(e);
        sk__acks_reset(&e->acks);
        sk__server_probe(&e->srv);
        sk__lease_step(&e->lease);
        return;
    }
    health_down(e, ac, "redis connection lost", why);
    e->up = false;
    e->ac = NULL;
    e->dead_ac = ac; /* closing must wait until hiredis has returned */
    sk__lease_disconnected(&e->lease);
    schedule_reconnect(e);
}

/* ---- the extra data connections ------------------------------------------ */

/* The oldest unanswered call of a connection (head) is late: it could start
 * only when the reply ahead of it came (last_reply_ms). */
static bool late(const sk_engine *e, const sk__call *head, int64_t last_reply_ms, int64_t now)
{
    if (!head) return false;
    int64_t since = head->sent_ms > last_reply_ms ? head->sent_ms : last_reply_ms;
    return now - since > e->o.command_timeout_ms + head->block_ms;
}

static void link_on_state(dlock__aconn *ac, bool up, const char *why, void *priv);

static void link_schedule(sk__link *l)
{
    if (l->e->freeing) return;
    int64_t ms = dlock__backoff_ms(50, l->attempt++, l->e->o.reconnect_max_ms);
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    event_add(l->reconnect_ev, &tv);
}

/* From the tick (never inside one of the link's callbacks): its calls
 * in flight run now with no reply (DLOCK_EUNKNOWN: 503 outcome unknown). */
static void link_drop(sk__link *l, const char *why)
{
    dlock__aconn *ac = l->ac;
    if (!ac) return;
    sk__log(l->e, DLOCK_LOG_DEBUG, "redis data connection %d dropped: %s", l->conn, why);
    l->ac = NULL;
    l->up = false;
    l->runid[0] = '\0';
    dlock__aconn_close(ac);
    link_schedule(l);
}

static void link_connect(sk__link *l)
{
    char err[256] = "";
    l->runid[0] = '\0';
    l->up = false;
    l->connect_ms = dlock__now_ms();
    if (dlock__aconn_open(l->e->base, &l->e->url, link_on_state, l, &l->ac, err, sizeof(err)) != 0) {
        l->ac = NULL;
        link_schedule(l);
    }
}

static void on_link_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk__link *l = arg;
    if (l->dead_ac) {
        dlock__aconn_close(l->dead_ac);
        l->dead_ac = NULL;
    }
    /* only beside a working engine connection (which opens it again,
     * links_open): a refused login or a server down is retried there, at
     * its backoff, not here too */
    if (!l->ac && links_wanted(l->e)) link_connect(l);
}

/* The engine's connection knows its server (run id, Cluster mode): the
 * data connections that are not open connect now. */
static void links_open(sk_engine *e)
{
    for (int i = 0; i < SK__CONNS - 1; i++) {
        sk__link *l = &e->links[i];
        if (l->ac) continue;
        event_del(l->reconnect_ev);
        if (l->dead_ac) {
            dlock__aconn_close(l->dead_ac);
            l->dead_ac = NULL;
        }
        link_connect(l);
    }
}

/* INFO server on the link: the run id of the server it reached. */
static void on_link_info(const dlock__reply *r, int err, void *priv)
{
    sk__link *l = priv;
    if (err || !l->up || dlock__reply_kind(r) != DLOCK__R_STRING) return; /* closed, or refused: stays unused */
    if (dlock__aconn_refusal(l->ac, NULL)) return; /* its login was refused: not a connection to rely on */
    if (sk__info_field(dlock__reply_str(r, NULL), "run_id", l->runid, sizeof(l->runid))) l->attempt = 0;
}

static void link_on_state(dlock__aconn *ac, bool up, const char *why, void *priv)
{
    sk__link *l = priv;
    if (ac != l->ac) return;
    if (up) {
        l->up = true;
        const char *argv[] = {"INFO", "server"};
        if (call_cmd_on(l->e, l->conn, -1, 2, argv, NULL, on_link_info, l) != 0) l->up = false;
        return;
    }
    sk__log(l->e, DLOCK_LOG_DEBUG, "redis data connection %d lost: %s", l->conn, why ? why : "");
    l->up = false;
    l->ac = NULL;
    l->runid[0] = '\0';
    l->dead_ac = ac; /* closing must wait until hiredis has returned */
    link_schedule(l);
}

/* Data connection conn may carry a batch: the engine's own whenever it is
 * ready (the coalescer asks only then); an extra one once its server's
 * run id is known to be the engine's connection's, so its batches pass
 * the barrier check exactly as the engine's own would (on a Cluster the
 * script reads the run id of the node it runs on). */
static bool link_usable(const sk_engine *e, int conn)
{
    if (conn == 0) return true;
    if (conn < 0 || conn >= SK__CONNS) return false;
    const sk__link *l = &e->links[conn - 1];
    if (!e->up || !e->ac || !l->up || !l->ac || !l->runid[0] || e->srv.due != 0) return false;
    return e->srv.cluster || (e->srv.runid[0] && strcmp(l->runid, e->srv.runid) == 0);
}

/* The link's connect and reply deadlines, as the engine's own (on_tick);
 * a link on another server than the engine's connection (a failover
 * moved one of them) connects again. */
static void link_tick(sk_engine *e, sk__link *l, int64_t now)
{
    if (l->ac && !l->up && now - l->connect_ms > e->o.command_timeout_ms) {
        link_drop(l, "connect timed out");
        return;
    }
    if (l->ac && late(e, l->head, l->last_reply_ms, now)) {
        /* the server does not answer: the engine's connection goes too
         * (requests fail fast until it answers again) */
        link_drop(l, "reply deadline passed");
        drop_connection(e, "reply deadline passed on a data connection");
        return;
    }
    if (l->up && l->runid[0] && e->up && e->srv.due == 0 && !e->srv.cluster && e->srv.runid[0] &&
        strcmp(l->runid, e->srv.runid) != 0)
        link_drop(l, "on another server than the engine's connection");
}

/* ---- the tick ---------------------------------------------------------- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk_engine *e = arg;
    int64_t now = dlock__now_ms();
    /* hiredis's async connect has no timeout: a master whose packets
     * vanish (partition) would hold a connect for the kernel's SYN retries
     * (~2 min), never asking Sentinel again */
    if (e->ac && !e->up && now - e->connect_ms > e->o.command_timeout_ms) {
        drop_connection(e, "connect timed out");
        return;
    }
    /* the head could start only when the reply ahead of it came */
    if (e->ac && late(e, e->head, e->last_reply_ms, now)) {
        drop_connection(e, "reply deadline passed");
        return;
    }
    for (int i = 0; i < SK__CONNS - 1; i++) link_tick(e, &e->links[i], now);
    if (sk__health_tick(&e->health, e->up && e->ac)) {
        drop_connection(e, "credentials refused");
        return;
    }
    if (e->srv.due == 0) sk__lease_tick(&e->lease, e->up);
    if (e->up && e->srv.due == 0) sk__acks_tick(&e->acks);
    if (e->up && now - e->last_poll_ms >= e->o.soldout_poll_ms) {
        e->last_poll_ms = now;
        sk__coalescer_poll_soldout(e->co);
    }
}

/* ---- the coalescer's hooks ---------------------------------------------- */

static int co_send_script(void *ud, int conn, const sk__resp_args *a, sk__reply_fn fn, void *priv)
{
    return sk__call_script_resp_on(ud, conn, SK__LUA_PURCHASE, a, fn, priv);
}

static int co_send_xfer(void *ud, int nargs, const char **args, sk__reply_fn fn, void *priv)
{
    return sk__call_script(ud, SK__LUA_TRANSFER, nargs, args, NULL, fn, priv);
}

static int co_send(void *ud, int argc, const char **argv, sk__reply_fn fn, void *priv)
{
    return sk__call_cmd(ud, argc, argv, NULL, fn, priv);
}

/* A batch's WAIT on the connection its script went on: only that
 * connection's WAIT counts the replicas of that script's write. */
static int co_send_wait(void *ud, int conn, const char *route_key, int argc, const char **argv, sk__reply_fn fn,
                        void *priv)
{
    sk_engine *e = ud;
    int slot = -1;
    if (sk__acks_wait_slot(&e->acks, route_key, strtoll(argv[1], NULL, 10), &slot)) return 1;
    return call_cmd_on(e, conn, slot, argc, argv, NULL, fn, priv);
}

static bool co_conn_usable(void *ud, int conn) { return link_usable(ud, conn); }

static bool co_master_alone(void *ud, const char *route_key)
{
    return sk__acks_master_alone(&((sk_engine *)ud)->acks, route_key);
}

static bool co_wait_after_reply(void *ud) { return ((sk_engine *)ud)->srv.cluster; }

static bool co_ready(void *ud) { return ready(ud); }

static int co_next_order_id(void *ud, uint64_t *id_out) { return sk_engine_next_order_id(ud, id_out); }

static int co_ack_plan(void *ud, int *replicas_out, int64_t *timeout_ms_out)
{
    return sk__acks_plan(&((sk_engine *)ud)->acks, replicas_out, timeout_ms_out);
}

static const char *co_server_runid(void *ud) { return sk__script_runid(ud); }

static void co_log(void *ud, int level, const char *msg)
{
    sk_engine *e = ud;
    sk__log(e, level, "%s", msg);
}

/* ---- life cycle --------------------------------------------------------- */

int sk_engine_new(struct event_base *base, const char *redis_url, const sk_engine_opts *opts,
                  sk_engine **out, char *err, size_t errlen)
{
    *out = NULL;
    sk_engine *e = calloc(1, sizeof(*e));
    if (!e) return DLOCK_ENOMEM;
    e->base = base;
    if (opts) e->o = *opts;
    else sk_engine_opts_init(&e->o);
    if (e->o.max_batch < 1) e->o.max_batch = 1;
    if (e->o.max_batch > 512) e->o.max_batch = 512;
    if (e->o.command_timeout_ms <= 0) e->o.command_timeout_ms = 2000;
    if (e->o.soldout_poll_ms <= 0) e->o.soldout_poll_ms = 500;
    /* WAIT with timeout 0 would block forever */
    if (e->o.replica_ack_timeout_ms <= 0) e->o.replica_ack_timeout_ms = 100;
    if (e->o.worker_lease_ms <= 0) e->o.worker_lease_ms = 60000;
    if (e->o.worker_lease_ms < 300) e->o.worker_lease_ms = 300;
    if (dlock__url_parse(redis_url ? redis_url : "redis://127.0.0.1:6379", &e->url, err, errlen)) {
        free(e);
        return SK_EINVAL;
    }
    dlock__random_hex(e->instance, 16);
    init_parts(e);
    e->reconnect_ev = event_new(base, -1, 0, on_reconnect_timer, e);
    e->tick_ev = event_new(base, -1, EV_PERSIST, on_tick, e);
    sk__coalesce_hooks hooks = {.ud = e, .send_script = co_send_script, .send_xfer = co_send_xfer, .send = co_send, .send_wait = co_send_wait,
                                 .conn_usable = co_conn_usable,
                                 .wait_after_reply = co_wait_after_reply, .master_alone = co_master_alone,
                                 .ready = co_ready,
                                 .next_order_id = co_next_order_id, .ack_plan = co_ack_plan,
                                 .server_runid = co_server_runid, .log = co_log};
    int rc = sk__coalescer_new(base, &e->o, &hooks, &e->co);
    if (rc || !e->reconnect_ev || !e->tick_ev) {
        sk_engine_free(e);
        return DLOCK_ENOMEM;
    }
    for (int i = 0; i < SK__CONNS - 1; i++) {
        sk__link *l = &e->links[i];
        *l = (sk__link){.e = e, .conn = i + 1, .reconnect_ev = event_new(base, -1, 0, on_link_timer, l)};
        if (!l->reconnect_ev) {
            sk_engine_free(e);
            return DLOCK_ENOMEM;
        }
    }
    struct timeval tick = {0, TICK_MS * 1000};
    event_add(e->tick_ev, &tick);
    connect_now(e);
    *out = e;
    return 0;
}

void sk_engine_free(sk_engine *e)
{
    if (!e) return;
    e->freeing = true;
    if (e->co) sk__coalescer_fail_all(e->co, DLOCK_ECLOSED);
    if (e->ac) {
        dlock__aconn *ac = e->ac;
        e->ac = NULL;
        e->up = false;
        dlock__aconn_close(ac);
    }
    if (e->dead_ac) dlock__aconn_close(e->dead_ac);
    for (int i = 0; i < SK__CONNS - 1; i++) {
        sk__link *l = &e->links[i];
        dlock__aconn *ac = l->ac;
        l->ac = NULL;
        l->up = false;
        if (ac) dlock__aconn_close(ac);
        if (l->dead_ac) dlock__aconn_close(l->dead_ac);
        if (l->reconnect_ev) event_free(l->reconnect_ev);
    }
    if (e->reconnect_ev) event_free(e->reconnect_ev);
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
    int rc = sk__call_cmd(e, 1, argv, NULL, on_ping, p);
    if (rc) free(p);
    return rc;
}
