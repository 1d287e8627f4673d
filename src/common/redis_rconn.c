/* redis_rconn.c: the reconnecting connection (see redis_rconn.h).
 * Invariant: every command sent is in the FIFO from just before it is
 * handed to the door until its callback runs, so the oldest unanswered one
 * is always the head (Redis answers one connection's commands in order),
 * and a callback that runs while the door is still sending finds it there. */
#include "redis_rconn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common_err.h"
#include "redis_aplain.h" /* dlock__after_callbacks */
#include "util.h"

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
