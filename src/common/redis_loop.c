/* redis_loop.c: one async Redis connection on any event loop (see
 * redis_loop.h): hiredis's async context with its five event hooks
 * (addRead, delRead, addWrite, delWrite, cleanup: the ones hiredis 0.14.1
 * and 1.x share) mapped onto a dlock__evloop watcher. Invariant: every
 * accepted command's callback runs exactly once, and the connection is
 * freed only when no hiredis call into it is on the stack (depth). */
#include "redis_loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "common_err.h"

typedef struct lcmd {
    dlock__lconn *lc;
    dlock__lcb cb;
    void *priv;
} lcmd;

struct dlock__lconn {
    dlock__evloop loop;
    redisAsyncContext *ctx; /* NULL once hiredis cleaned it up */
    void *io;               /* the loop's watcher of the socket */
    int events;             /* what hiredis wants now */
    dlock__lstate_cb on_state;
    void *priv;
    lcmd sub;            /* the subscription callback (sub.cb NULL: none yet) */
    bool up, was_up;     /* connected now / ever */
    bool closing;        /* dlock__lconn_close called: no more state reports */
    bool down_reported;  /* the state callback said down once */
    bool free_pending;   /* close while depth > 0: free when it drops to 0 */
    const char *drop_why; /* set by dlock__lconn_drop */
    int connect_result;   /* set inside hiredis's connect callback, reported after it returned */
    char connect_err[128];
    int depth;           /* hiredis calls into this connection on the stack */
};

static void lc_free_now(dlock__lconn *lc)
{
    free(lc);
}

static void lc_enter(dlock__lconn *lc)
{
    lc->depth++;
}

static void lc_leave(dlock__lconn *lc)
{
    if (--lc->depth == 0 && lc->free_pending) lc_free_now(lc);
}

static void report_down(dlock__lconn *lc, const char *why)
{
    lc->up = false;
    if (lc->closing || lc->down_reported) return;
    lc->down_reported = true;
    lc->on_state(lc, false, why, lc->priv);
}

/* ---- the five hooks ------------------------------------------------------ */

static void want(dlock__lconn *lc, int on, int off)
{
    int ev = (lc->events | on) & ~off;
    if (ev == lc->events || !lc->io) return;
    lc->events = ev;
    lc->loop.io_set(lc->io, ev);
}

static void hook_add_read(void *p)
{
    want(p, DLOCK__EV_READ, 0);
}

static void hook_del_read(void *p)
{
    want(p, 0, DLOCK__EV_READ);
}

static void hook_add_write(void *p)
{
    want(p, DLOCK__EV_WRITE, 0);
}

static void hook_del_write(void *p)
{
    want(p, 0, DLOCK__EV_WRITE);
}

/* hiredis is freeing the context: the watcher goes, and ctx is never used again. */
static void hook_cleanup(void *p)
{
    dlock__lconn *lc = p;
    if (lc->io) lc->loop.io_free(lc->io);
    lc->io = NULL;
    lc->ctx = NULL;
    lc->events = 0;
}

/* hiredis may not be freed from inside its connect callback (it goes on
 * using the context after it), so the outcome is reported from here, once
 * hiredis has returned. */
static void report_connect(dlock__lconn *lc)
{
    int r = lc->connect_result;
    lc->connect_result = 0;
    if (r > 0 && !lc->closing && !lc->down_reported) lc->on_state(lc, true, "connected", lc->priv);
    if (r < 0) report_down(lc, lc->connect_err);
}

static void on_ready(void *arg, int events)
{
    dlock__lconn *lc = arg;
    lc_enter(lc);
    if ((events & DLOCK__EV_READ) && lc->ctx) redisAsyncHandleRead(lc->ctx);
    if ((events & DLOCK__EV_WRITE) && lc->ctx) redisAsyncHandleWrite(lc->ctx);
    if (lc->connect_result) report_connect(lc);
    lc_leave(lc);
}

/* ---- hiredis callbacks ----------------------------------------------------- */

static void on_reply(redisAsyncContext *ctx, void *reply, void *privdata)
{
    (void)ctx;
    lcmd *cmd = privdata;
    dlock__lconn *lc = cmd->lc;
    if (cmd == &lc->sub && lc->closing) return; /* its owner may be gone (redis_loop.h) */
    int err = reply ? 0 : lc->was_up ? DLOCK__EUNKNOWN : DLOCK__ECONN;
    cmd->cb(lc, reply, err, cmd->priv);
    if (cmd != &lc->sub) free(cmd);
}

static void on_connect(const redisAsyncContext *ctx, int status)
{
    dlock__lconn *lc = ctx->data;
    if (status == REDIS_OK) {
        lc->up = lc->was_up = true;
        lc->connect_result = 1;
        return;
    }
    lc->connect_result = -1;
    snprintf(lc->connect_err, sizeof(lc->connect_err), "connect: %s",
             ctx->errstr[0] ? ctx->errstr : "failed");
}

static void on_disconnect(const redisAsyncContext *ctx, int status)
{
    dlock__lconn *lc = ctx->data;
    const char *why = lc->drop_why ? lc->drop_why : status == REDIS_OK ? "closed" : ctx->errstr;
    report_down(lc, why);
}

/* ---- the door ---------------------------------------------------------------- */

static int attach(dlock__lconn *lc, char *err, size_t errlen)
{
    redisAsyncContext *ctx = lc->ctx;
    ctx->data = lc;
    lc->io = lc->loop.io_new(lc->loop.ud, ctx->c.fd, on_ready, lc);
    if (!lc->io) {
        if (err && errlen) snprintf(err, errlen, "connect: the loop refused a watcher");
        return DLOCK__ENOMEM;
    }
    ctx->ev.data = lc;
    ctx->ev.addRead = hook_add_read;
    ctx->ev.delRead = hook_del_read;
    ctx->ev.addWrite = hook_add_write;
    ctx->ev.delWrite = hook_del_write;
    ctx->ev.cleanup = hook_cleanup;
    redisAsyncSetDisconnectCallback(ctx, on_disconnect);
    redisAsyncSetConnectCallback(ctx, on_connect); /* asks for write: connect completes */
    return 0;
}

int dlock__lconn_open(const dlock__evloop *loop, const char *host, int port, const char *path,
                      dlock__lstate_cb on_state, void *priv, dlock__lconn **out, char *err, size_t errlen)
{
    *out = NULL;
    dlock__lconn *lc = calloc(1, sizeof(*lc));
    if (!lc) return DLOCK__ENOMEM;
    lc->loop = *loop;
    lc->on_state = on_state;
    lc->priv = priv;
    lc->ctx = path ? redisAsyncConnectUnix(path) : redisAsyncConnect(host, port);
    if (!lc->ctx || lc->ctx->err) {
        if (err && errlen) snprintf(err, errlen, "connect: %s", lc->ctx ? lc->ctx->errstr : "out of memory");
        int rc = lc->ctx ? DLOCK__ECONN : DLOCK__ENOMEM;
        if (lc->ctx) redisAsyncFree(lc->ctx);
        free(lc);
        return rc;
    }
    int rc = attach(lc, err, errlen);
    if (rc) {
        lc->closing = true;
        redisAsyncFree(lc->ctx);
        free(lc);
        return rc;
    }
    *out = lc;
    return 0;
}

int dlock__lconn_cmd(dlock__lconn *lc, dlock__lcb cb, void *priv, int argc, const char **argv,
                     const size_t *lens)
{
    if (!lc->ctx || lc->closing || lc->down_reported) return DLOCK__ECONN;
    lcmd *cmd = malloc(sizeof(*cmd));
    if (!cmd) return DLOCK__ENOMEM;
    *cmd = (lcmd){.lc = lc, .cb = cb, .priv = priv};
    if (redisAsyncCommandArgv(lc->ctx, on_reply, cmd, argc, argv, lens) != REDIS_OK) {
        free(cmd);
        return DLOCK__ECONN;
    }
    return 0;
}

int dlock__lconn_sub(dlock__lconn *lc, dlock__lcb cb, void *priv, int argc, const char **argv)
{
    if (!lc->ctx || lc->closing || lc->down_reported) return DLOCK__ECONN;
    if (!lc->sub.cb && !cb) return DLOCK__EINVAL;
    if (!lc->sub.cb) lc->sub = (lcmd){.lc = lc, .cb = cb, .priv = priv};
    if (redisAsyncCommandArgv(lc->ctx, on_reply, &lc->sub, argc, argv, NULL) != REDIS_OK) return DLOCK__ECONN;
    return 0;
}

void dlock__lconn_close(dlock__lconn *lc)
{
    if (!lc || lc->closing) return;
    lc->closing = true;
    lc_enter(lc);
    if (lc->ctx) redisAsyncFree(lc->ctx); /* deferred by hiredis inside its callback */
    lc->free_pending = true;
    lc_leave(lc);
}

void dlock__lconn_drop(dlock__lconn *lc)
{
    if (!lc || lc->closing || !lc->ctx) return;
    lc->drop_why = "no reply before the deadline: connection dropped";
    lc_enter(lc);
    redisAsyncFree(lc->ctx);
    /* Never connected: hiredis calls no disconnect callback. */
    report_down(lc, lc->drop_why);
    lc_leave(lc);
}

bool dlock__lconn_is_up(const dlock__lconn *lc)
{
    return lc && lc->up && lc->ctx && !lc->closing;
}
