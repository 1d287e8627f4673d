/* async_client.c: dlock_async_client (async.h): options, one command
 * connection opened without blocking and reopened on the next command
 * after a loss, requests with one reply deadline timer for all (replies
 * come in send order, so the oldest's deadline is the next to pass; when
 * it passes the connection is dropped and every request on it ends
 * EUNKNOWN), scripts (EVALSHA, EVAL once on NOSCRIPT), the registry of
 * handles and the client's own lifetime.
 * Invariant: the client's memory lives until it was freed by the user, no
 * loop callback is on the stack (depth) and no request is pending (nreq),
 * because hiredis may call a request's callback after the free returned
 * (when the free happened inside one of its callbacks).
 * Sentinel URLs: the master comes from async_sentinel.c; a request made
 * while it is not known (first use, after a connection loss, a failover)
 * is parked in the list with its deadline and sent when the sentinels
 * answer, or ends ECONN (never sent) when none does or its deadline
 * passes first.
 * Cluster URLs: every request goes through async_cluster.c (the map, a
 * connection per master, redirects, deadlines per node); this file keeps
 * what every URL shares (scripts, NOSCRIPT, error codes, lifetimes). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_internal.h"
#include "opts_read.h"
#include "slot.h"
#include "util.h"

#define MAXARGV 24
#define PARKED 1 /* ensure_conn: no master known yet; asked the sentinels */

struct dlock_async_client {
    dlock_async_loop loop;
    dlock__evloop ev;
    dlock_client_options opts;
    char *url_copy, *prefix_copy;
    dlock__url url;
    char id[33];
    int64_t drift_ppm, drift_ms;
    dlock__lconn *conn;
    bool conn_up;
    int64_t connect_deadline_ms;
    int64_t next_connect_ms; /* no new connection before (after a failed one) */
    void *timer;             /* connect and reply deadlines */
    struct areq *head, *tail; /* requests in flight, in send order */
    size_t nreq;             /* requests and handshake commands pending */
    dlock__asub *sub;
    dlock__asent *sent;   /* Sentinel URLs */
    dlock__acl *acl;      /* Cluster URLs */
    bool master_stale;    /* the connection to it was lost: ask again */
    char conn_host[256];  /* where conn goes (Sentinel URLs) */
    int conn_port;
    dlock__aobj objs; /* ring of handles */
    uint64_t serial;
    int depth;
    bool closing, free_pending;
};

typedef struct areq {
    dlock_async_client *c;
    dlock__areply_fn fn;
    void *priv;
    uint64_t tag;
    const dlock__script *s;
    int nkeys, nargs;
    char **strs; /* keys, then args (in the same block) */
    int64_t deadline_ms;
    bool by_source, listed, parked;
    struct areq *prev, *next;
} areq;

/* ---- lifetime ---------------------------------------------------------------- */

static void real_free(dlock_async_client *c)
{
    dlock__url_free(&c->url);
    free(c->url_copy);
    free(c->prefix_copy);
    free(c);
}

static void maybe_free(dlock_async_client *c)
{
    if (c->free_pending && c->depth == 0 && c->nreq == 0) real_free(c);
}

void dlock__ac_enter(dlock_async_client *c)
{
    c->depth++;
}

void dlock__ac_leave(dlock_async_client *c)
{
    c->depth--;
    maybe_free(c);
}

void dlock__ac_log(const dlock_async_client *c, dlock_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dlock__vlog_opts(&c->opts, level, fmt, ap);
    va_end(ap);
}

/* ---- deadlines ------------------------------------------------------------------ */

static void rearm(dlock_async_client *c)
{
    int64_t at = INT64_MAX;
    if (c->conn && !c->conn_up) at = c->connect_deadline_ms;
    if (c->head && c->head->deadline_ms < at) at = c->head->deadline_ms;
    if (at == INT64_MAX) dlock__atimer_stop(&c->loop, c->timer);
    else dlock__atimer_start(&c->loop, c->timer, at - dlock__now_ms());
}

/* The connection goes: every request on it ends (EUNKNOWN if it was up,
 * ECONN if not), the next command opens a new one. */
static void drop_conn(dlock_async_client *c, const char *why)
{
    dlock__lconn *lc = c->conn;
    if (!lc) return;
    dlock__ac_log(c, DLOCK_LOG_WARN, "async connection dropped: %s", why);
    if (!c->conn_up) c->next_connect_ms = dlock__now_ms() + c->opts.retry_delay_ms;
    c->conn = NULL;
    c->conn_up = false;
    c->master_stale = true;
    dlock__lconn_drop(lc);
    dlock__lconn_close(lc);
}

static void end_req(dlock_async_client *c, struct areq *r, int rc);

static void on_timer(void *arg)
{
    dlock_async_client *c = arg;
    dlock__ac_enter(c);
    int64_t now = dlock__now_ms();
    while (c->head && c->head->parked && now >= c->head->deadline_ms) end_req(c, c->head, DLOCK_ECONN);
    if (c->conn && !c->conn_up && now >= c->connect_deadline_ms) drop_conn(c, "connect timed out");
    else if (c->head && now >= c->head->deadline_ms) drop_conn(c, "no reply within command_timeout_ms");
    if (!c->closing) rearm(c);
    dlock__ac_leave(c);
}

/* ---- the connection ---------------------------------------------------------------- */

static void on_state(dlock__lconn *lc, bool up, const char *why, void *priv)
{
    dlock_async_client *c = priv;
    if (lc != c->conn) return;
    dlock__ac_enter(c);
    if (up) {
        c->conn_up = true;
    } else {
        dlock__ac_log(c, DLOCK_LOG_INFO, "async connection lost: %s", why);
        if (!c->conn_up) c->next_connect_ms = dlock__now_ms() + c->opts.retry_delay_ms;
        c->conn = NULL;
        c->conn_up = false;
        c->master_stale = true;
        dlock__lconn_close(lc);
    }
    rearm(c);
    dlock__ac_leave(c);
}

/* AUTH / SELECT refused: the commands behind them fail (NOAUTH: EAUTH). */
static void handshake_reply(dlock__lconn *lc, dlock__reply *reply, int err, void *priv)
{
    (void)lc;
    (void)err;
    dlock_async_client *c = priv;
    c->nreq--;
    if (reply && dlock__reply_kind(reply) == DLOCK__R_ERROR && !c->closing)
        dlock__ac_log(c, DLOCK_LOG_ERROR, "async connection refused: %s", dlock__reply_str(reply, NULL));
    maybe_free(c);
}

static void queue_handshake(dlock_async_client *c)
{
    const char *auth[3];
    int argc = dlock__url_auth_argv(&c->url, auth);
    if (argc && dlock__lconn_cmd(c->conn, handshake_reply, c, argc, auth, NULL) == 0) c->nreq++;
    if (c->url.db) {
        char db[16];
        snprintf(db, sizeof(db), "%d", c->url.db);
        const char *argv[2] = {"SELECT", db};
        if (dlock__lconn_cmd(c->conn, handshake_reply, c, 2, argv, NULL) == 0) c->nreq++;
    }
}

/* Where the command connection goes: the URL's server, or the master the
 * sentinels named (PARKED while none is known: they are asked). */
static int target(dlock_async_client *c, const char **host, int *port)
{
    *host = c->url.kind == DLOCK__URL_UNIX ? NULL : c->url.host;
    *port = c->url.port;
    if (c->url.kind != DLOCK__URL_SENTINEL) return 0;
    if (c->master_stale) dlock__asent_resolve(c->sent);
    c->master_stale = false;
    if (dlock__asent_resolving(c->sent) || !dlock__asent_master(c->sent, host, port)) {
        dlock__asent_resolve(c->sent);
        return PARKED;
    }
    return 0;
}

static int ensure_conn(dlock_async_client *c)
{
    if (c->conn) return 0;
    const char *host;
    int port;
    int rc = target(c, &host, &port);
    if (rc) return rc;
    int64_t now = dlock__now_ms();
    if (now < c->next_connect_ms) return DLOCK_ECONN;
    const char *path = c->url.kind == DLOCK__URL_UNIX ? c->url.path : NULL;
    char err[160];
    rc = dlock__lconn_open(&c->ev, host, port, path, on_state, c, &c->conn, err, sizeof(err));
    if (rc) {
        dlock__ac_log(c, DLOCK_LOG_WARN, "async %s", err);
        c->next_connect_ms = now + c->opts.retry_delay_ms;
        return dlock__err_from_common(rc);
    }
    c->conn_up = false;
    c->connect_deadline_ms = now + c->opts.connect_timeout_ms;
    snprintf(c->conn_host, sizeof(c->conn_host), "%s", host ? host : "");
    c->conn_port = port;
    queue_handshake(c);
    rearm(c);
    return 0;
}

/* ---- requests -------------------------------------------------------------------------- */

static void unlist(dlock_async_client *c, areq *r)
{
    if (!r->listed) return;
    if (r->prev) r->prev->next = r->next;
    else c->head = r->next;
    if (r->next) r->next->prev = r->prev;
    else c->tail = r->prev;
    r->prev = r->next = NULL;
    r->listed = false;
}

static void enlist(dlock_async_client *c, areq *r)
{
    r->deadline_ms = dlock__now_ms() + c->opts.command_timeout_ms;
    r->prev = c->tail;
    r->next = NULL;
    if (c->tail) c->tail->next = r;
    else c->head = r;
    c->tail = r;
    r->listed = true;
}

static void on_reply(dlock__lconn *lc, dlock__reply *reply, int err, void *priv);
static int cluster_send(dlock_async_client *c, areq *r);

static int send_req(dlock_async_client *c, areq *r)
{
    if (c->acl) return cluster_send(c, r);
    int rc = ensure_conn(c);
    if (rc == PARKED) {
        enlist(c, r);
        r->parked = true;
        if (c->head == r) rearm(c);
        return 0;
    }
    if (rc) return rc;
    const char *argv[MAXARGV];
    size_t lens[MAXARGV];
    char nk[16];
    int argc = dlock__script_argv(r->s, r->by_source, r->nkeys, (const char *const *)r->strs, r->nargs,
                                  (const char *const *)r->strs + r->nkeys, argv, lens, nk);
    rc = dlock__err_from_common(dlock__lconn_cmd(c->conn, on_reply, r, argc, argv, lens));
    if (rc) return rc;
    enlist(c, r);
    if (c->head == r) rearm(c);
    return 0;
}

/* An error reply as a code: NOAUTH / WRONGPASS are EAUTH (the handshake
 * was refused: nothing ran), others ESERVER (logged). */
static int error_code(dlock_async_client *c, const areq *r, const dlock__reply *reply)
{
    if (dlock__reply_is_error(reply, "NOAUTH") || dlock__reply_is_error(reply, "WRONGPASS")) return DLOCK_EAUTH;
    dlock__ac_log(c, DLOCK_LOG_WARN, "script %s: %s", r->s->name, dlock__reply_str(reply, NULL));
    return DLOCK_ESERVER;
}

/* A Sentinel URL's master turned replica (a failover this client has not
 * heard of yet): the write was refused, nothing ran; the connection goes
 * and the sentinels are asked again. */
static bool demoted(dlock_async_client *c, dlock__lconn *lc, const dlock__reply *reply)
{
    if (c->url.kind != DLOCK__URL_SENTINEL || !dlock__reply_is_error(reply, "READONLY")) return false;
    if (c->conn == lc) {
        dlock__ac_log(c, DLOCK_LOG_WARN, "async sentinel: the master answered READONLY: asking the sentinels");
        c->conn = NULL;
        c->conn_up = false;
        c->master_stale = true;
        dlock__lconn_close(lc); /* the requests behind end EUNKNOWN */
    }
    return true;
}

static void on_reply(dlock__lconn *lc, dlock__reply *reply, int err, void *priv)
{
    areq *r = priv;
    dlock_async_client *c = r->c;
    dlock__ac_enter(c);
    unlist(c, r);
    int rc = c->closing ? DLOCK_ECLOSED : reply ? 0 : dlock__err_from_common(err);
    if (reply && dlock__reply_kind(reply) == DLOCK__R_ERROR) {
        if (!c->closing && !r->by_source && dlock__script_missing(reply)) {
            r->by_source = true; /* NOSCRIPT: nothing ran; EVAL once */
            if (send_req(c, r) == 0) goto out;
            rc = DLOCK_ECONN;
        } else if (!c->closing) {
            rc = demoted(c, lc, reply) ? DLOCK_ECONN : error_code(c, r, reply);
        }
    }
    r->fn(r->priv, rc == 0 ? reply : NULL, rc, r->tag);
    c->nreq--;
    free(r);
out:
    if (!c->closing) rearm(c);
    dlock__ac_leave(c);
}

/* A Cluster URL's reply (redirects followed by async_cluster.c). */
static void on_cluster_reply(void *priv, const dlock__reply *reply, int rc)
{
    areq *r = priv;
    dlock_async_client *c = r->c;
    dlock__ac_enter(c);
    if (c->closing) rc = DLOCK_ECLOSED;
    if (rc == 0 && dlock__reply_kind(reply) == DLOCK__R_ERROR) {
        if (!r->by_source && dlock__script_missing(reply)) {
            r->by_source = true; /* NOSCRIPT on that master: nothing ran; EVAL once */
            if (send_req(c, r) == 0) goto out;
            rc = DLOCK_ECONN;
        } else {
            rc = error_code(c, r, reply);
        }
    }
    r->fn(r->priv, rc == 0 ? reply : NULL, rc, r->tag);
    c->nreq--;
    free(r);
out:
    dlock__ac_leave(c);
}

/* To the master of the slot of the script's keys (they share one slot by
 * hash tag, docs/locks.md). */
static int cluster_send(dlock_async_client *c, areq *r)
{
    const char *argv[MAXARGV];
    size_t lens[MAXARGV];
    char nk[16];
    int argc = dlock__script_argv(r->s, r->by_source, r->nkeys, (const char *const *)r->strs, r->nargs,
                                  (const char *const *)r->strs + r->nkeys, argv, lens, nk);
    int slot = r->nkeys > 0 ? (int)dlock__key_slot(r->strs[0], strlen(r->strs[0])) : -1;
    return dlock__acl_cmd(c->acl, slot, argc, argv, lens, on_cluster_reply, r);
}

static areq *req_new(dlock_async_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                     int nargs, const char *const *args)
{
    size_t n = (size_t)nkeys + (size_t)nargs, bytes = sizeof(areq) + n * sizeof(char *);
    for (int i = 0; i < nkeys; i++) bytes += strlen(keys[i]) + 1;
    for (int i = 0; i < nargs; i++) bytes += strlen(args[i]) + 1;
    areq *r = calloc(1, bytes);
    if (!r) return NULL;
    r->c = c;
    r->s = s;
    r->nkeys = nkeys;
    r->nargs = nargs;
    r->strs = (char **)(void *)(r + 1);
    char *p = (char *)(r->strs + n);
    for (size_t i = 0; i < n; i++) {
        const char *src = i < (size_t)nkeys ? keys[i] : args[i - (size_t)nkeys];
        size_t len = strlen(src) + 1;
        memcpy(p, src, len);
        r->strs[i] = p;
        p += len;
    }
    return r;
}

/* A parked request ends without having been sent. */
static void end_req(dlock_async_client *c, areq *r, int rc)
{
    unlist(c, r);
    r->fn(r->priv, NULL, rc, r->tag);
    c->nreq--;
    free(r);
}

/* The sentinels answered (ok: a master is known) or a failover named a new
 * master: a connection elsewhere goes (its requests end EUNKNOWN), the
 * pub/sub connection follows, the parked requests are sent or end ECONN. */
static void master_changed(void *priv, bool ok)
{
    dlock_async_client *c = priv;
    if (c->closing) return;
    dlock__ac_enter(c);
    const char *host = NULL;
    int port = 0;
    if (ok && dlock__asent_master(c->sent, &host, &port)) {
        if (c->conn && (strcmp(c->conn_host, host) != 0 || c->conn_port != port)) drop_conn(c, "the master moved");
        c->master_stale = false;
        dlock__asub_set_master(c->sub, host, port);
    }
    for (areq *r = c->head, *nx; r; r = nx) {
        nx = r->next;
        if (!r->parked) continue;
        unlist(c, r);
        r->parked = false;
        if (!ok || send_req(c, r) != 0) {
            r->fn(r->priv, NULL, DLOCK_ECONN, r->tag);
            c->nreq--;
            free(r);
        }
    }
    rearm(c);
    dlock__ac_leave(c);
}

int dlock__ac_eval(dlock_async_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                   int nargs, const char *const *args, dlock__areply_fn fn, void *priv, uint64_t tag)
{
    if (c->closing) return DLOCK_ECLOSED;
    if (nkeys < 0 || nargs < 0 || nkeys + nargs + 3 > MAXARGV) return DLOCK_EINVAL;
    areq *r = req_new(c, s, nkeys, keys, nargs, args);
    if (!r) return DLOCK_ENOMEM;
    r->fn = fn;
    r->priv = priv;
    r->tag = tag;
    int rc = send_req(c, r);
    if (rc) {
        free(r);
        return rc;
    }
    c->nreq++;
    return 0;
}

/* ---- the client's API ------------------------------------------------------------------ */

static int copy_options(dlock_async_client *c, const dlock_client_options *given)
{
    dlock_client_options_init(&c->opts);
    if (dlock__opts_read(&c->opts, sizeof(c->opts), DLOCK__SIZE_TO(dlock_client_options, log_level), given))
        return DLOCK_EINVAL;
    dlock_client_options *o = &c->opts;
    c->url_copy = strdup(o->url ? o->url : "redis://127.0.0.1:6379");
    c->prefix_copy = strdup(o->key_prefix ? o->key_prefix : "");
    if (!c->url_copy || !c->prefix_copy) return DLOCK_ENOMEM;
    o->url = c->url_copy;
    o->key_prefix = c->prefix_copy;
    if (o->connect_timeout_ms <= 0 || o->command_timeout_ms <= 0 || o->watchdog_timeout_ms < 30 ||
        o->retry_delay_ms < 0 || o->wait_replicas < 0 || strlen(c->prefix_copy) > DLOCK__NAME_MAX)
        return DLOCK_EINVAL;
    if (o->wait_replicas > 0) return DLOCK_ENOTSUP;
    return 0;
}

static int parse_url(dlock_async_client *c)
{
    if (strncmp(c->url_copy, "etcd", 4) == 0) return DLOCK_ENOTSUP;
    char err[200];
    int rc = dlock__err_from_common(dlock__url_parse(c->url_copy, &c->url, err, sizeof(err)));
    if (rc) {
        dlock__ac_log(c, DLOCK_LOG_ERROR, "async client: %s", err);
        return rc;
    }
    return 0;
}

static int client_init(dlock_async_client *c, const dlock_async_loop *loop, const dlock_client_options *opts)
{
    c->loop = *loop;
    dlock__aloop_evloop(loop, &c->ev);
    c->drift_ppm = DLOCK_DRIFT_PPM_DEFAULT;
    c->drift_ms = DLOCK_DRIFT_MS_DEFAULT;
    c->objs.prev = c->objs.next = &c->objs;
    int rc = copy_options(c, opts);
    if (rc == 0) rc = parse_url(c);
    if (rc == 0) rc = dlock__err_from_common(dlock__random_hex(c->id, 16));
    if (rc == 0 && !(c->timer = dlock__atimer_new(loop, on_timer, c))) rc = DLOCK_ENOMEM;
    if (rc == 0 && c->url.kind == DLOCK__URL_CLUSTER) rc = dlock__acl_new(loop, &c->url, &c->opts, &c->acl);
    if (rc == 0) rc = dlock__asub_new(loop, &c->url, &c->opts, c->acl, &c->sub);
    if (rc == 0 && c->url.kind == DLOCK__URL_SENTINEL)
        rc = dlock__asent_new(loop, &c->url, &c->opts, master_changed, c, &c->sent);
    if (rc == 0 && !c->acl) rc = ensure_conn(c);
    return rc == PARKED ? 0 : rc;
}

DLOCK_API int dlock_async_client_new(const dlock_async_loop *loop, const dlock_client_options *opts,
                                     dlock_async_client **client_out)
{
    if (!client_out) return DLOCK_EINVAL;
    *client_out = NULL;
    if (!opts || dlock__aloop_check(loop) != 0) return DLOCK_EINVAL;
    dlock_async_client *c = calloc(1, sizeof(*c));
    if (!c) return DLOCK_ENOMEM;
    int rc = client_init(c, loop, opts);
    if (rc) {
        dlock_async_client_free(c);
        return rc;
    }
    *client_out = c;
    return 0;
}

DLOCK_API void dlock_async_client_free(dlock_async_client *c)
{
    if (!c || c->closing) return;
    c->closing = true;
    dlock__ac_enter(c);
    while (c->objs.next != &c->objs) {
        dlock__aobj *o = c->objs.next;
        dlock__ac_remove_obj(c, o);
        o->orphan(o);
    }
    dlock__asub_free(c->sub);
    c->sub = NULL;
    dlock__lconn *lc = c->conn;
    c->conn = NULL;
    dlock__lconn_close(lc); /* each request ends ECLOSED (now, or when hiredis returns) */
    dlock__asent_free(c->sent);
    c->sent = NULL;
    dlock__acl *acl = c->acl;
    c->acl = NULL;
    dlock__acl_free(acl); /* the same on each master's connection */
    for (areq *r = c->head, *nx; r; r = nx) {
        nx = r->next;
        if (r->parked) end_req(c, r, DLOCK_ECLOSED);
    }
    dlock__atimer_free(&c->loop, c->timer);
    c->timer = NULL;
    c->free_pending = true;
    dlock__ac_leave(c);
}

DLOCK_API int dlock_async_client_set_clock_drift(dlock_async_client *c, int64_t drift_ppm, int64_t drift_ms)
{
    if (!c || drift_ppm < 0 || drift_ppm > 500000 || drift_ms < 0 || drift_ms > 60000) return DLOCK_EINVAL;
    c->drift_ppm = drift_ppm;
    c->drift_ms = drift_ms;
    return 0;
}

DLOCK_API const char *dlock_async_client_id(const dlock_async_client *c)
{
    return c ? c->id : "";
}

/* ---- for the handles ---------------------------------------------------------------------- */

const dlock_client_options *dlock__ac_options(const dlock_async_client *c)
{
    return &c->opts;
}

const dlock_async_loop *dlock__ac_loop(const dlock_async_client *c)
{
    return &c->loop;
}

dlock__asub *dlock__ac_sub(dlock_async_client *c)
{
    return c->sub;
}

bool dlock__ac_closing(const dlock_async_client *c)
{
    return c->closing;
}

bool dlock__ac_sharded(const dlock_async_client *c, const char *key, const char *channel)
{
    return c->url.kind == DLOCK__URL_CLUSTER &&
           dlock__key_slot(key, strlen(key)) == dlock__key_slot(channel, strlen(channel));
}

uint64_t dlock__ac_serial(dlock_async_client *c)
{
    return ++c->serial;
}

int64_t dlock__ac_valid_until(const dlock_async_client *c, int64_t sent_ms, int64_t lease_ms)
{
    return dlock__valid_until_rule(sent_ms, lease_ms, c->drift_ppm, c->drift_ms);
}

void dlock__ac_add_obj(dlock_async_client *c, dlock__aobj *o)
{
    o->next = &c->objs;
    o->prev = c->objs.prev;
    c->objs.prev->next = o;
    c->objs.prev = o;
}

void dlock__ac_remove_obj(dlock_async_client *c, dlock__aobj *o)
{
    (void)c;
    if (!o->prev) return;
    o->prev->next = o->next;
    o->next->prev = o->prev;
    o->prev = o->next = NULL;
}
