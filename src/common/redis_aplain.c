/* redis_aplain.c: one plain async connection (hiredis's async API on a
 * libevent loop), behind dlock__aconn (see redis_aplain.h; the door the
 * rest of dlock uses is redis_async.h). Invariant: every accepted command's
 * callback runs exactly once, and an aconn is never freed while hiredis is
 * still calling into it (dlock__after_callbacks: the one deferred free of
 * the async door). Uses only redisAsyncConnect/ConnectUnix,
 * redisAsyncCommandArgv, redisAsyncFormattedCommand,
 * redisAsyncDisconnect/Free, redisAsyncHandleRead/Write and the ev hooks
 * of redisAsyncContext, which hiredis 0.14.1 and 1.x share.
 *
 * The loop glue is this file's, not hiredis's libevent adapter: that one
 * adds the read event again after every read and the write event for
 * every command, then deletes it (about four epoll_ctl calls a batch).
 * Here the read event is persistent, added once; a command queued on a
 * connected socket is written from a deferred callback on the same loop
 * turn (event_active, no syscall), and the write event is armed only
 * while the kernel's buffer is full or the connect is in progress. */
#include "redis_aplain.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

struct dlock__aconn {
    dlock__acluster *cl;    /* a routing shell (dlock__aplain_routing): the router; ctx stays NULL */
    char addr[160];         /* plain: the endpoint, for dlock__aconn_node_of_slot */
    redisAsyncContext *ctx; /* NULL once hiredis has freed it */
    struct event_base *base;
    dlock__astate_cb on_state;
    void *priv;
    bool up;
    bool closing;
    bool auth_refused;
    char refused[256]; /* "AUTH refused: <server error>" (or SELECT); "" none */
    int in_cb;         /* >0 while hiredis is calling us: freeing must wait */
};

/* The loop glue of one hiredis context (its ev.data). */
typedef struct aglue {
    redisAsyncContext *ctx;
    struct event *rev;   /* EV_READ|EV_PERSIST: added once */
    struct event *wev;   /* EV_WRITE: only while a write must wait for the socket */
    struct event *flush; /* no fd: activated to write what was queued this turn */
    bool reading, writing_armed;
    bool in_write; /* inside redisAsyncHandleWrite: a free waits for its return */
    bool dead;     /* hiredis cleaned up during in_write */
} aglue;

typedef struct acmd {
    dlock__aconn *ac;
    dlock__acb cb;
    void *priv;
} acmd;

void dlock__after_callbacks(struct event_base *base, int in_cb, event_callback_fn destroy, void *obj)
{
    struct timeval zero = {0, 0};
    if (in_cb > 0 && event_base_once(base, -1, EV_TIMEOUT, destroy, obj, &zero) == 0) return;
    destroy(-1, 0, obj);
}

static void free_aconn_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    free(arg);
}

/* ---- loop glue ------------------------------------------------------------ */

static void glue_free(aglue *g)
{
    event_free(g->rev);
    event_free(g->wev);
    event_free(g->flush);
    free(g);
}

/* Writes through hiredis; hiredis may free the context (and ask for this
 * glue's cleanup) inside: the glue is then freed here, after it returns. */
static void glue_write(aglue *g)
{
    g->in_write = true;
    redisAsyncHandleWrite(g->ctx);
    g->in_write = false;
    if (g->dead) glue_free(g);
}

static void glue_on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    redisAsyncHandleRead(((aglue *)arg)->ctx);
}

static void glue_on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    aglue *g = arg;
    g->writing_armed = false; /* a non-persistent event is removed once it fires */
    glue_write(g);
}

static void glue_on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    aglue *g = arg;
    if (!g->writing_armed) glue_write(g);
}

static void glue_add_read(void *data)
{
    aglue *g = data;
    if (g->reading) return; /* persistent: already in epoll */
    if (event_add(g->rev, NULL) == 0) g->reading = true;
}

static void glue_del_read(void *data)
{
    aglue *g = data;
    if (g->reading) event_del(g->rev);
    g->reading = false;
}

/* hiredis has bytes to send: a connected socket takes them at the end of
 * this loop turn (commands queued in the same turn go out in one write);
 * a connect in progress, or a write the kernel could not take whole,
 * waits for the socket to be writable. */
static void glue_add_write(void *data)
{
    aglue *g = data;
    if (g->writing_armed) return;
    if ((g->ctx->c.flags & REDIS_CONNECTED) && !g->in_write) {
        event_active(g->flush, EV_WRITE, 0);
        return;
    }
    if (event_add(g->wev, NULL) == 0) g->writing_armed = true;
}

static void glue_del_write(void *data)
{
    aglue *g = data;
    if (g->writing_armed) event_del(g->wev);
    g->writing_armed = false;
}

static void glue_cleanup(void *data)
{
    aglue *g = data;
    glue_del_read(g);
    glue_del_write(g);
    event_del(g->flush);
    if (g->in_write) g->dead = true;
    else glue_free(g);
}

static int glue_attach(redisAsyncContext *ctx, struct event_base *base)
{
    aglue *g = calloc(1, sizeof(*g));
    if (!g) return -1;
    g->ctx = ctx;
    int fd = ctx->c.fd;
    g->rev = event_new(base, fd, EV_READ | EV_PERSIST, glue_on_read, g);
    g->wev = event_new(base, fd, EV_WRITE, glue_on_write, g);
    g->flush = event_new(base, -1, 0, glue_on_flush, g);
    if (!g->rev || !g->wev || !g->flush) {
        if (g->rev) event_free(g->rev);
        if (g->wev) event_free(g->wev);
        if (g->flush) event_free(g->flush);
        free(g);
        return -1;
    }
    ctx->ev.data = g;
    ctx->ev.addRead = glue_add_read;
    ctx->ev.delRead = glue_del_read;
    ctx->ev.addWrite = glue_add_write;
    ctx->ev.delWrite = glue_del_write;
    ctx->ev.cleanup = glue_cleanup;
    glue_add_read(g);
    glue_add_write(g); /* the connect completes when the socket is writable */
    return 0;
}

static void on_reply(redisAsyncContext *ctx, void *reply, void *privdata)
{
    (void)ctx;
    acmd *cmd = privdata;
    dlock__aconn *ac = cmd->ac;
    ac->in_cb++;
    cmd->cb(ac, reply, reply ? 0 : DLOCK__EUNKNOWN, cmd->priv);
    ac->in_cb--;
    free(cmd);
}

static void on_connect(const redisAsyncContext *ctx, int status)
{
    dlock__aconn *ac = ctx->data;
    ac->in_cb++;
    if (status == REDIS_OK) {
        ac->up = true;
        if (!ac->closing) ac->on_state(ac, true, "connected", ac->priv);
    } else {
        ac->ctx = NULL; /* hiredis frees it after this callback */
        ac->up = false;
        if (!ac->closing) ac->on_state(ac, false, ctx->errstr, ac->priv);
    }
    ac->in_cb--;
}

static void on_disconnect(const redisAsyncContext *ctx, int status)
{
    dlock__aconn *ac = ctx->data;
    ac->ctx = NULL;
    ac->up = false;
    ac->in_cb++;
    const char *why = ac->refused[0] ? ac->refused : status == REDIS_OK ? "closed" : ctx->errstr;
    if (!ac->closing) ac->on_state(ac, false, why, ac->priv);
    ac->in_cb--;
}

static void queue_auth_select(dlock__aconn *ac, const dlock__url *u);

int dlock__aplain_open(struct event_base *base, const dlock__url *url, dlock__astate_cb on_state, void *priv,
                       dlock__aconn **out, char *err, size_t errlen)
{
    *out = NULL;
    dlock__aconn *ac = calloc(1, sizeof(*ac));
    if (!ac) return DLOCK__ENOMEM;
    ac->base = base;
    ac->on_state = on_state;
    ac->priv = priv;
    dlock__url_describe(url, ac->addr, sizeof(ac->addr));
    if (url->kind == DLOCK__URL_CLUSTER) {
        if (err && errlen) snprintf(err, errlen, "connect: a redis-cluster:// URL needs the router");
        free(ac);
        return DLOCK__EINVAL;
    }
    if (url->kind == DLOCK__URL_UNIX) {
        ac->ctx = redisAsyncConnectUnix(url->path);
    } else if (url->kind == DLOCK__URL_TCP) {
        ac->ctx = redisAsyncConnect(url->host, url->port);
    } else {
        /* Sentinel: resolved synchronously (bounded: 500 ms a sentinel);
         * callers reconnect through here after a failover. */
        dlock__conn_opts so = {.connect_timeout_ms = 500, .command_timeout_ms = 500};
        dlock__url m;
        int rc = dlock__sentinel_resolve(url, &so, &m, err, errlen);
        if (rc) {
            free(ac);
            return rc == DLOCK__ENOMEM ? rc : DLOCK__ECONN;
        }
        ac->ctx = redisAsyncConnect(m.host, m.port);
        dlock__url_free(&m);
    }
    if (!ac->ctx || ac->ctx->err) {
        if (err && errlen) snprintf(err, errlen, "connect: %s", ac->ctx ? ac->ctx->errstr : "bad URL kind");
        if (ac->ctx) redisAsyncFree(ac->ctx);
        free(ac);
        return DLOCK__ECONN;
    }
    ac->ctx->data = ac;
    if (glue_attach(ac->ctx, base) != 0) {
        redisAsyncFree(ac->ctx);
        free(ac);
        return DLOCK__ENOMEM;
    }
    redisAsyncSetConnectCallback(ac->ctx, on_connect);
    redisAsyncSetDisconnectCallback(ac->ctx, on_disconnect);
    queue_auth_select(ac, url);
    *out = ac;
    return 0;
}

/* priv: the command's name ("AUTH", "SELECT"). */
static void handshake_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv)
{
    (void)err;
    /* A refused AUTH/SELECT makes every later command fail with NOAUTH or
     * use the wrong db: drop the connection so the owner sees it go down,
     * with the server's answer as the reason. */
    if (!reply || !dlock__reply_is_error(reply, NULL)) return;
    const char *what = priv;
    const char *msg = dlock__reply_str(reply, NULL);
    if (!ac->refused[0]) snprintf(ac->refused, sizeof(ac->refused), "%s refused: %s", what, msg ? msg : "?");
    if (what[0] == 'A' || dlock__reply_is_error(reply, "NOAUTH")) ac->auth_refused = true;
    if (ac->ctx) redisAsyncDisconnect(ac->ctx);
}

static void queue_auth_select(dlock__aconn *ac, const dlock__url *u)
{
    const char *auth[3];
    int argc = dlock__url_auth_argv(u, auth);
    if (argc) dlock__aplain_cmd(ac, handshake_reply, (void *)"AUTH", argc, auth, NULL);
    if (u->db) {
        char db[16];
        snprintf(db, sizeof(db), "%d", u->db);
        const char *argv[2] = {"SELECT", db};
        dlock__aplain_cmd(ac, handshake_reply, (void *)"SELECT", 2, argv, NULL);
    }
}

int dlock__aplain_cmd(dlock__aconn *ac, dlock__acb cb, void *priv, int argc, const char **argv,
                      const size_t *lens)
{
    if (!ac->ctx || ac->closing) return DLOCK__ECONN;
    acmd *cmd = malloc(sizeof(*cmd));
    if (!cmd) return DLOCK__ENOMEM;
    *cmd = (acmd){.ac = ac, .cb = cb, .priv = priv};
    if (redisAsyncCommandArgv(ac->ctx, on_reply, cmd, argc, argv, lens) != REDIS_OK) {
        free(cmd);
        return DLOCK__ECONN;
    }
    return 0;
}

int dlock__aplain_cmd_resp(dlock__aconn *ac, dlock__acb cb, void *priv, const char *cmd, size_t len)
{
    if (!ac->ctx || ac->closing) return DLOCK__ECONN;
    acmd *c = malloc(sizeof(*c));
    if (!c) return DLOCK__ENOMEM;
    *c = (acmd){.ac = ac, .cb = cb, .priv = priv};
    if (redisAsyncFormattedCommand(ac->ctx, on_reply, c, cmd, len) != REDIS_OK) {
        free(c);
        return DLOCK__ECONN;
    }
    return 0;
}

void dlock__aplain_close(dlock__aconn *ac)
{
    if (!ac) return;
    ac->closing = true;
    if (ac->ctx) {
        redisAsyncContext *ctx = ac->ctx;
        ac->ctx = NULL;
        redisAsyncFree(ctx); /* deferred by hiredis when inside its callback */
    }
    /* hiredis may still call us on this stack: then free on the next turn */
    dlock__after_callbacks(ac->base, ac->in_cb, free_aconn_cb, ac);
}

bool dlock__aplain_is_up(const dlock__aconn *ac)
{
    return ac && ac->up && ac->ctx;
}

const char *dlock__aplain_refusal(const dlock__aconn *ac, bool *auth_out)
{
    if (auth_out) *auth_out = ac && ac->auth_refused;
    return ac && ac->refused[0] ? ac->refused : NULL;
}

/* ---- routing shells ---------------------------------------------------- */

int dlock__aplain_routing(struct event_base *base, const dlock__url *url, dlock__astate_cb on_state,
                          void *priv, dlock__aconn **out)
{
    *out = NULL;
    dlock__aconn *ac = calloc(1, sizeof(*ac));
    if (!ac) return DLOCK__ENOMEM;
    ac->base = base;
    ac->on_state = on_state;
    ac->priv = priv;
    dlock__url_describe(url, ac->addr, sizeof(ac->addr));
    *out = ac;
    return 0;
}

void dlock__aplain_set_router(dlock__aconn *ac, dlock__acluster *cl)
{
    ac->cl = cl;
}

dlock__acluster *dlock__aplain_router(const dlock__aconn *ac)
{
    return ac && !ac->closing ? ac->cl : NULL;
}

dlock__acluster *dlock__aplain_detach_router(dlock__aconn *ac)
{
    dlock__acluster *cl = ac->cl;
    ac->closing = true;
    ac->cl = NULL;
    return cl;
}

const char *dlock__aplain_addr(const dlock__aconn *ac)
{
    return ac->addr;
}

void dlock__aplain_deliver(dlock__aconn *ac, dlock__acb cb, dlock__reply *reply, int err, void *priv)
{
    ac->in_cb++;
    cb(ac, reply, err, priv);
    ac->in_cb--;
}

void dlock__aplain_report(dlock__aconn *ac, bool up, const char *why)
{
    if (ac->closing) return;
    ac->in_cb++;
    ac->on_state(ac, up, why, ac->priv);
    ac->in_cb--;
}
