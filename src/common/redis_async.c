/* redis_async.c: the async door (see redis_async.h), a dlock__script run
 * on it (script.h), and the reconnecting connection built on the door
 * (dlock__rconn, the engine's every connection). A dlock__aconn is either
 * a plain connection (redis_aplain.c) or a routing one that carries the
 * async Cluster router (cluster_async.c); each door function picks one.
 * This file only calls down: neither of those calls back into it.
 * Invariants: a script call keeps a copy of its arguments so that a
 * NOSCRIPT answer can be followed by EVAL once, and its callback runs
 * exactly once; every command an rconn sends is in its FIFO from just
 * before it is handed to the door until its callback runs, so the oldest
 * unanswered one is always the head (Redis answers one connection's
 * commands in order), and a callback that runs while the door is still
 * sending finds it there. */
#include "redis_async.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cluster_async.h"
#include "common_err.h"
#include "redis_aplain.h"
#include "script.h"
#include "util.h"

int dlock__aconn_open(struct event_base *base, const dlock__url *url, dlock__astate_cb on_state, void *priv,
                      dlock__aconn **out, char *err, size_t errlen)
{
    *out = NULL;
    if (url->kind != DLOCK__URL_CLUSTER)
        return dlock__aplain_open(base, url, on_state, priv, out, err, errlen);
    dlock__aconn *ac = NULL;
    int rc = dlock__aplain_routing(base, url, on_state, priv, &ac);
    if (rc) return rc;
    dlock__acluster *cl = NULL;
    rc = dlock__acluster_open(base, url, ac, &cl, err, errlen);
    if (rc) {
        dlock__aplain_close(ac);
        return rc;
    }
    dlock__aplain_set_router(ac, cl);
    *out = ac;
    return 0;
}

int dlock__aconn_cmd(dlock__aconn *ac, dlock__acb cb, void *priv, int argc, const char **argv,
                     const size_t *lens)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (cl) return dlock__acluster_cmd(cl, -1, cb, priv, argc, argv, lens);
    return dlock__aplain_cmd(ac, cb, priv, argc, argv, lens);
}

int dlock__aconn_cmd_resp(dlock__aconn *ac, dlock__acb cb, void *priv, const char *cmd, size_t len)
{
    return dlock__aconn_cmd_resp_slot(ac, -1, cb, priv, cmd, len);
}

int dlock__aconn_cmd_resp_slot(dlock__aconn *ac, int slot, dlock__acb cb, void *priv, const char *cmd,
                               size_t len)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (cl) return dlock__acluster_cmd_resp(cl, slot < 0 ? -1 : slot, cb, priv, cmd, len);
    return dlock__aplain_cmd_resp(ac, cb, priv, cmd, len);
}

uint64_t dlock__aconn_resp_parsed(const dlock__aconn *ac)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    return cl ? dlock__acluster_parsed(cl) : 0;
}

void dlock__aconn_close(dlock__aconn *ac)
{
    if (!ac) return;
    dlock__acluster_close(dlock__aplain_detach_router(ac)); /* pending callbacks run now, naming ac */
    dlock__aplain_close(ac);
}

bool dlock__aconn_is_up(const dlock__aconn *ac)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (cl) return dlock__acluster_is_up(cl);
    return dlock__aplain_is_up(ac);
}

const char *dlock__aconn_refusal(const dlock__aconn *ac, bool *auth_out)
{
    return dlock__aplain_refusal(ac, auth_out);
}

bool dlock__aconn_is_cluster(const dlock__aconn *ac)
{
    return dlock__aplain_router(ac) != NULL;
}

int dlock__aconn_cmd_slot(dlock__aconn *ac, unsigned slot, dlock__acb cb, void *priv, int argc,
                          const char **argv, const size_t *lens)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (!cl) return dlock__aplain_cmd(ac, cb, priv, argc, argv, lens);
    if (slot >= 16384) return DLOCK__EINVAL;
    return dlock__acluster_cmd(cl, (int)slot, cb, priv, argc, argv, lens);
}

int dlock__aconn_node_of_slot(dlock__aconn *ac, unsigned slot, char *buf, size_t len)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (cl) return dlock__acluster_node_of_slot(cl, slot, buf, len);
    snprintf(buf, len, "%s", dlock__aplain_addr(ac));
    return 0;
}

/* ---- scripts on the async door (script.h) ------------------------------ */

typedef struct acall {
    const dlock__script *s;
    dlock__acb cb;
    void *priv;
    int argc;
    bool by_source; /* NOSCRIPT was answered: EVAL sent */
    char nk[16];
    const char **argv; /* argc entries, after the struct */
    size_t *lens;
} acall;

static void on_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv)
{
    acall *a = priv;
    if (reply && !a->by_source && dlock__script_missing(reply)) {
        a->by_source = true;
        a->argv[0] = "EVAL";
        a->lens[0] = 4;
        a->argv[1] = a->s->src;
        a->lens[1] = a->s->len;
        if (dlock__aconn_cmd(ac, on_reply, a, a->argc, a->argv, a->lens) == 0) return;
        reply = NULL;
        err = DLOCK__ECONN; /* nothing of it ran */
    }
    a->cb(ac, reply, err, a->priv);
    free(a);
}

/* The call with its argv, lens and a copy of the keys and arguments
 * after it (one allocation). */
static acall *acall_new(const dlock__script *s, int nkeys, const char *const *keys, int nargs,
                        const char *const *args)
{
    size_t n = (size_t)nkeys + (size_t)nargs + 3, bytes = 0;
    for (int i = 0; i < nkeys; i++)
        bytes += strlen(keys[i]) + 1;
    for (int i = 0; i < nargs; i++)
        bytes += strlen(args[i]) + 1;
    acall *a = calloc(1, sizeof(*a) + n * (sizeof(char *) + sizeof(size_t)) + bytes);
    if (!a) return NULL;
    a->argv = (const char **)(void *)(a + 1);
    a->lens = (size_t *)(void *)(a->argv + n);
    char *p = (char *)(a->lens + n);
    const char **copy = a->argv + 3; /* the copies sit where script_argv puts them */
    for (int i = 0; i < nkeys + nargs; i++) {
        const char *v = i < nkeys ? keys[i] : args[i - nkeys];
        size_t len = strlen(v) + 1;
        memcpy(p, v, len);
        copy[i] = p;
        p += len;
    }
    a->s = s;
    a->argc = dlock__script_argv(s, false, nkeys, copy, nargs, copy + nkeys, a->argv, a->lens, a->nk);
    return a;
}

int dlock__script_acall(dlock__aconn *ac, const dlock__script *s, int nkeys, const char *const *keys,
                        int nargs, const char *const *args, dlock__acb cb, void *priv)
{
    if (nkeys < 0 || nargs < 0 || nkeys > INT_MAX - 3 - nargs) return DLOCK__EINVAL;
    acall *a = acall_new(s, nkeys, keys, nargs, args);
    if (!a) return DLOCK__ENOMEM;
    a->cb = cb;
    a->priv = priv;
    int rc = dlock__aconn_cmd(ac, on_reply, a, a->argc, a->argv, a->lens);
    if (rc) free(a);
    return rc;
}

/* ---- calls whose arguments come written as RESP ------------------------- */

int dlock__script_rcall_send(dlock__aconn *ac, const dlock__script_rcall *c, dlock__acb cb, void *priv)
{
    if (!c->by_source) {
        char head[DLOCK__SCRIPT_HEAD_ROOM];
        size_t hn = (size_t)(dlock__script_resp_head(c->s, false, c->nargs, head) - head);
        char *start = c->args - hn;
        memcpy(start, head, hn);
        return dlock__aconn_cmd_resp_slot(ac, c->slot, cb, priv, start, hn + c->len);
    }
    char *buf = malloc(DLOCK__SCRIPT_HEAD_ROOM + c->s->len + c->len);
    if (!buf) return DLOCK__ENOMEM;
    char *p = dlock__script_resp_head(c->s, true, c->nargs, buf);
    memcpy(p, c->args, c->len);
    int rc = dlock__aconn_cmd_resp_slot(ac, c->slot, cb, priv, buf, (size_t)(p - buf) + c->len);
    free(buf); /* the door copied it */
    return rc;
}

bool dlock__script_rcall_retry(dlock__script_rcall *c, const dlock__reply *reply)
{
    if (c->by_source || !reply || !dlock__script_missing(reply)) return false;
    c->by_source = true;
    return true;
}

/* ---- the reconnecting connection (dlock__rconn) --------------------------- */

typedef struct rcall {
    dlock__rconn *rc;
    dlock__rconn_fn fn;
    void *priv;
    int64_t sent_ms;
    int64_t block_ms;           /* WAIT's timeout (0 for other commands) */
    struct rcall *prev, *next;  /* in flight, oldest first */
    int slot;                   /* the slot it goes to or its keys are in, -1 none */
    int argc;
    const char **argv;          /* a command (same allocation); NULL for a script */
    size_t *lens;
    dlock__script_rcall sc;     /* a script: its arguments follow, after the head's room */
} rcall;

struct dlock__rconn {
    dlock__rconn_opts o;
    dlock__aconn *ac; /* connecting or up; NULL between connections */
    bool up;
    bool freeing;
    int attempt;      /* reconnects since the connection last worked (backoff) */
    int in_cb;        /* > 0 while its callbacks are on the stack: a free waits */
    int64_t connect_ms;
    int64_t last_reply_ms;
    struct event *retry_ev;
    rcall *head, *tail;
};

/* ---- the FIFO -------------------------------------------------------------- */

static void track(dlock__rconn *rc, rcall *c)
{
    c->sent_ms = dlock__now_ms();
    c->prev = rc->tail;
    c->next = NULL;
    if (rc->tail) rc->tail->next = c;
    else rc->head = c;
    rc->tail = c;
}

static void untrack(dlock__rconn *rc, rcall *c)
{
    if (c->prev) c->prev->next = c->next;
    else rc->head = c->next;
    if (c->next) c->next->prev = c->prev;
    else rc->tail = c->prev;
    c->prev = c->next = NULL;
}

static void on_call_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv);

static int send_call(dlock__rconn *rc, rcall *c)
{
    if (!dlock__rconn_is_up(rc)) return DLOCK__ECONN;
    track(rc, c);
    int e;
    if (!c->argv)
        e = dlock__script_rcall_send(rc->ac, &c->sc, on_call_reply, c);
    else if (c->slot >= 0)
        e = dlock__aconn_cmd_slot(rc->ac, (unsigned)c->slot, on_call_reply, c, c->argc, c->argv, c->lens);
    else
        e = dlock__aconn_cmd(rc->ac, on_call_reply, c, c->argc, c->argv, c->lens);
    if (e) untrack(rc, c);
    return e;
}

static void on_call_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv)
{
    rcall *c = priv;
    dlock__rconn *rc = c->rc;
    rc->in_cb++;
    if (reply) rc->last_reply_ms = dlock__now_ms();
    untrack(rc, c);
    /* The server's script cache is gone (restart, SCRIPT FLUSH): nothing
     * ran; the source goes once, on the same connection only. */
    if (!c->argv && ac == rc->ac && dlock__rconn_is_up(rc) && dlock__script_rcall_retry(&c->sc, reply)) {
        if (send_call(rc, c) == 0) {
            rc->in_cb--;
            return;
        }
        reply = NULL;
        err = DLOCK__ECONN;
    }
    if (rc->o.on_reply) err = rc->o.on_reply(rc, c->slot, reply, err, rc->o.owner);
    c->fn(reply, err, c->priv);
    free(c);
    rc->in_cb--;
}

/* ---- commands ---------------------------------------------------------------- */

static rcall *call_new(dlock__rconn *rc, size_t extra, dlock__rconn_fn fn, void *priv)
{
    rcall *c = malloc(sizeof(*c) + extra);
    if (!c) return NULL;
    *c = (rcall){.rc = rc, .fn = fn, .priv = priv, .slot = -1};
    return c;
}

/* A command with its argv copied into the call's allocation. */
static rcall *call_argv(dlock__rconn *rc, int argc, const char **argv, const size_t *lens, dlock__rconn_fn fn,
                        void *priv)
{
    size_t bytes = 0;
    for (int i = 0; i < argc; i++) bytes += (lens ? lens[i] : strlen(argv[i])) + 1;
    rcall *c = call_new(rc, (size_t)argc * (sizeof(char *) + sizeof(size_t)) + bytes, fn, priv);
    if (!c) return NULL;
    c->argc = argc;
    c->argv = (const char **)(void *)(c + 1);
    c->lens = (size_t *)(void *)(c->argv + argc);
    char *p = (char *)(c->lens + argc);
    for (int i = 0; i < argc; i++) {
        size_t n = lens ? lens[i] : strlen(argv[i]);
        memcpy(p, argv[i], n);
        p[n] = '\0';
        c->argv[i] = p;
        c->lens[i] = n;
        p += n + 1;
    }
    return c;
}

static int send_new(dlock__rconn *rc, rcall *c)
{
    int e = send_call(rc, c);
    if (e) free(c);
    return e;
}

int dlock__rconn_cmd(dlock__rconn *rc, int slot, int argc, const char **argv, const size_t *lens,
                     dlock__rconn_fn fn, void *priv)
{
    if (!dlock__rconn_is_up(rc)) return DLOCK__ECONN;
    if (argc < 1 || slot >= 16384) return DLOCK__EINVAL;
    rcall *c = call_argv(rc, argc, argv, lens, fn, priv);
    if (!c) return DLOCK__ENOMEM;
    c->slot = slot < 0 ? -1 : slot;
    return send_new(rc, c);
}

int dlock__rconn_wait(dlock__rconn *rc, int slot, int replicas, int64_t timeout_ms, dlock__rconn_fn fn,
                      void *priv)
{
    if (replicas < 0 || timeout_ms <= 0) return DLOCK__EINVAL; /* WAIT with timeout 0 blocks forever */
    char n[16], t[24];
    snprintf(n, sizeof(n), "%d", replicas);
    snprintf(t, sizeof(t), "%lld", (long long)timeout_ms);
    const char *argv[] = {"WAIT", n, t};
    if (!dlock__rconn_is_up(rc)) return DLOCK__ECONN;
    if (slot >= 16384) return DLOCK__EINVAL;
    rcall *c = call_argv(rc, 3, argv, NULL, fn, priv);
    if (!c) return DLOCK__ENOMEM;
    c->slot = slot < 0 ? -1 : slot;
    c->block_ms = timeout_ms;
    return send_new(rc, c);
}

int dlock__rconn_script(dlock__rconn *rc, const dlock__script *s, const char *args, size_t len, int nargs,
                        int slot, dlock__rconn_fn fn, void *priv)
{
    if (!dlock__rconn_is_up(rc)) return DLOCK__ECONN;
    if (nargs < 1 || slot >= 16384) return DLOCK__EINVAL;
    rcall *c = call_new(rc, DLOCK__SCRIPT_HEAD_ROOM + len, fn, priv);
    if (!c) return DLOCK__ENOMEM;
    c->slot = slot < 0 ? -1 : slot;
    c->sc = (dlock__script_rcall){.s = s, .nargs = nargs, .slot = c->slot,
                                  .args = (char *)(c + 1) + DLOCK__SCRIPT_HEAD_ROOM, .len = len};
    memcpy(c->sc.args, args, len);
    return send_new(rc, c);
}

/* ---- the connection ---------------------------------------------------------- */

static void report(dlock__rconn *rc, dlock__rconn_event ev, dlock__aconn *ac, const char *why)
{
    if (rc->o.on_state) rc->o.on_state(rc, ev, ac, why ? why : "", rc->o.owner);
}

static void schedule(dlock__rconn *rc)
{
    if (rc->freeing) return;
    int64_t ms = dlock__backoff_ms(50, rc->attempt++, rc->o.backoff_max_ms);
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    event_add(rc->retry_ev, &tv);
}

/* The connection is gone (ev: LOST or DROPPED): the owner hears it while
 * ac is still readable, then ac is closed (its commands in flight fail
 * now, unless hiredis already failed them) and the backoff starts. */
static void lose(dlock__rconn *rc, dlock__rconn_event ev, const char *why)
{
    dlock__aconn *ac = rc->ac;
    rc->ac = NULL;
    rc->up = false;
    rc->in_cb++;
    report(rc, ev, ac, why);
    dlock__aconn_close(ac); /* safe inside ac's own callbacks (redis_async.h) */
    schedule(rc);
    rc->in_cb--;
}

static void on_state(dlock__aconn *ac, bool up, const char *why, void *priv)
{
    dlock__rconn *rc = priv;
    if (ac != rc->ac) return;
    if (!up) {
        lose(rc, DLOCK__RCONN_LOST, why);
        return;
    }
    rc->up = true;
    rc->in_cb++;
    report(rc, DLOCK__RCONN_UP, ac, why);
    rc->in_cb--;
}

void dlock__rconn_connect(dlock__rconn *rc)
{
    if (rc->ac || rc->freeing) return;
    event_del(rc->retry_ev);
    char err[256] = "";
    rc->up = false;
    rc->connect_ms = dlock__now_ms();
    if (dlock__aconn_open(rc->o.base, rc->o.url, on_state, rc, &rc->ac, err, sizeof(err)) == 0) return;
    rc->ac = NULL;
    rc->in_cb++;
    report(rc, DLOCK__RCONN_FAILED, NULL, err);
    schedule(rc);
    rc->in_cb--;
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    dlock__rconn *rc = arg;
    if (rc->ac || (rc->o.may_connect && !rc->o.may_connect(rc, rc->o.owner))) return;
    dlock__rconn_connect(rc);
}

void dlock__rconn_drop(dlock__rconn *rc, const char *why)
{
    if (rc->ac && !rc->freeing) lose(rc, DLOCK__RCONN_DROPPED, why);
}

int dlock__rconn_check(dlock__rconn *rc, int64_t now)
{
    if (!rc->ac) return DLOCK__RCONN_IN_TIME;
    if (!rc->up && now - rc->connect_ms > rc->o.timeout_ms) {
        dlock__rconn_drop(rc, "connect timed out");
        return DLOCK__RCONN_CONNECT_LATE;
    }
    /* the head could start only when the reply ahead of it came */
    const rcall *h = rc->head;
    if (!h) return DLOCK__RCONN_IN_TIME;
    int64_t since = h->sent_ms > rc->last_reply_ms ? h->sent_ms : rc->last_reply_ms;
    if (now - since <= rc->o.timeout_ms + h->block_ms) return DLOCK__RCONN_IN_TIME;
    dlock__rconn_drop(rc, "reply deadline passed");
    return DLOCK__RCONN_REPLY_LATE;
}

void dlock__rconn_backoff_reset(dlock__rconn *rc) { rc->attempt = 0; }

bool dlock__rconn_is_up(const dlock__rconn *rc) { return rc && rc->up && rc->ac && !rc->freeing; }

dlock__aconn *dlock__rconn_aconn(const dlock__rconn *rc) { return rc ? rc->ac : NULL; }

/* ---- life cycle --------------------------------------------------------------- */

int dlock__rconn_new(const dlock__rconn_opts *o, dlock__rconn **out)
{
    *out = NULL;
    if (!o->base || !o->url || o->timeout_ms <= 0) return DLOCK__EINVAL;
    dlock__rconn *rc = calloc(1, sizeof(*rc));
    if (!rc) return DLOCK__ENOMEM;
    rc->o = *o;
    rc->retry_ev = event_new(o->base, -1, 0, on_retry, rc);
    if (!rc->retry_ev) {
        free(rc);
        return DLOCK__ENOMEM;
    }
    *out = rc;
    return 0;
}

static void destroy_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    free(arg);
}

void dlock__rconn_free(dlock__rconn *rc)
{
    if (!rc || rc->freeing) return;
    rc->freeing = true;
    dlock__aconn *ac = rc->ac;
    rc->ac = NULL;
    rc->up = false;
    rc->in_cb++;
    dlock__aconn_close(ac); /* the commands in flight fail now */
    rc->in_cb--;
    event_free(rc->retry_ev);
    dlock__after_callbacks(rc->o.base, rc->in_cb, destroy_cb, rc);
}
