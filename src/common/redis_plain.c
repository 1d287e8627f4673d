/* redis_plain.c: one plain sync connection to one server (TCP, UNIX, or
 * the master a sentinel names), hiredis behind dlock's own types (see
 * redis_plain.h; the door the rest of dlock uses is redis_io.h).
 * Only calls and fields that hiredis 0.14.1 and 1.x both have are used:
 * redisConnectWithTimeout/UnixWithTimeout, redisSetTimeout,
 * redisEnableKeepAlive, redisCommandArgv, redisAppendFormattedCommand,
 * redisGetReply, redisGetReplyFromReader, redisBufferWrite, redisReaderCreate/
 * Feed/GetReply/Free, and redisReply's
 * type/integer/str/len/elements. The async half is redis_async.c. */
#include "redis_plain.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "common_err.h"
#include "resp_write.h"

struct dlock__conn {
    dlock__cluster *cl; /* a routing shell (dlock__plain_routing): the router; ctx stays NULL */
    redisContext *ctx;
    dlock__url url;
    dlock__conn_opts opts;
    char errstr[256];
};

static struct timeval tv_ms(int64_t ms)
{
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

static void set_err(dlock__conn *c, const char *what, const char *detail)
{
    snprintf(c->errstr, sizeof(c->errstr), "%s: %s", what, detail);
}

static void drop_ctx(dlock__conn *c)
{
    if (c->ctx) redisFree(c->ctx);
    c->ctx = NULL;
}

/* AUTH then SELECT on a fresh context; maps refusals to EAUTH/ESERVER. */
static int handshake(dlock__conn *c)
{
    const dlock__url *u = &c->url;
    const char *auth[3];
    int argc = dlock__url_auth_argv(u, auth);
    if (argc) {
        redisReply *r = redisCommandArgv(c->ctx, argc, auth, NULL);
        if (!r) {
            set_err(c, "AUTH", c->ctx->errstr);
            return DLOCK__ECONN;
        }
        int bad = r->type == REDIS_REPLY_ERROR;
        if (bad) set_err(c, "AUTH refused", r->str);
        freeReplyObject(r);
        if (bad) return DLOCK__EAUTH;
    }
    if (!argc) {
        /* Without credentials a protected server refuses the first command
         * with NOAUTH: find out now, so it is an auth error at connect time
         * instead of a server error on some later call. */
        const char *argv[1] = {"PING"};
        redisReply *r = redisCommandArgv(c->ctx, 1, argv, NULL);
        if (!r) {
            set_err(c, "PING", c->ctx->errstr);
            return DLOCK__ECONN;
        }
        int noauth = r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0;
        if (noauth) set_err(c, "server requires a password", r->str);
        freeReplyObject(r);
        if (noauth) return DLOCK__EAUTH;
    }
    if (u->db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", u->db);
        const char *argv[2] = {"SELECT", db};
        redisReply *r = redisCommandArgv(c->ctx, 2, argv, NULL);
        if (!r) {
            set_err(c, "SELECT", c->ctx->errstr);
            return DLOCK__ECONN;
        }
        int bad = r->type == REDIS_REPLY_ERROR;
        if (bad) set_err(c, "SELECT refused", r->str);
        if (bad && strncmp(r->str, "NOAUTH", 6) == 0) bad = 2;
        freeReplyObject(r);
        if (bad) return bad == 2 ? DLOCK__EAUTH : DLOCK__ESERVER;
    }
    return 0;
}

/* A sentinel-discovered node must really be the master: during a failover
 * the sentinels may still name the old one, now a replica. */
static int check_master_role(dlock__conn *c)
{
    const char *argv[1] = {"ROLE"};
    redisReply *r = redisCommandArgv(c->ctx, 1, argv, NULL);
    if (!r) {
        set_err(c, "ROLE", c->ctx->errstr);
        return DLOCK__ECONN;
    }
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING &&
             strcmp(r->element[0]->str, "master") == 0;
    freeReplyObject(r);
    if (!ok) set_err(c, "connect", "the node the sentinels named is not (yet) a master");
    return ok ? 0 : DLOCK__ECONN;
}

static int reopen(dlock__conn *c)
{
    drop_ctx(c);
    struct timeval ctv = tv_ms(c->opts.connect_timeout_ms);
    if (c->url.kind == DLOCK__URL_UNIX) {
        c->ctx = redisConnectUnixWithTimeout(c->url.path, ctv);
    } else if (c->url.kind == DLOCK__URL_TCP) {
        c->ctx = redisConnectWithTimeout(c->url.host, c->url.port, ctv);
    } else {
        /* Sentinel: ask for the current master at every (re)connect, so a
         * failover is followed by the next command after it. */
        dlock__url m;
        char why[200] = "";
        int rc = dlock__sentinel_resolve(&c->url, &c->opts, &m, why, sizeof(why));
        if (rc) {
            set_err(c, "sentinel", why[0] ? why : "no sentinel answered");
            return rc == DLOCK__ENOMEM ? rc : DLOCK__ECONN;
        }
        c->ctx = redisConnectWithTimeout(m.host, m.port, ctv);
        dlock__url_free(&m);
    }
    if (!c->ctx) {
        set_err(c, "connect", "out of memory");
        return DLOCK__ENOMEM;
    }
    if (c->ctx->err) {
        set_err(c, "connect", c->ctx->errstr);
        drop_ctx(c);
        return DLOCK__ECONN;
    }
    if (redisSetTimeout(c->ctx, tv_ms(c->opts.command_timeout_ms)) != REDIS_OK ||
        (c->url.kind == DLOCK__URL_TCP && redisEnableKeepAlive(c->ctx) != REDIS_OK)) {
        set_err(c, "socket options", c->ctx->errstr);
        drop_ctx(c);
        return DLOCK__ECONN;
    }
    int rc = handshake(c);
    if (rc == 0 && c->url.kind == DLOCK__URL_SENTINEL) rc = check_master_role(c);
    if (rc) drop_ctx(c);
    return rc;
}

void dlock__plain_set_timeouts(dlock__conn *c, const dlock__conn_opts *opts)
{
    c->opts = *opts;
    /* a failure leaves the old timeout, which still bounds the call */
    if (c->ctx) (void)redisSetTimeout(c->ctx, tv_ms(opts->command_timeout_ms));
}

int dlock__plain_open(const dlock__url *url, const dlock__conn_opts *opts, dlock__conn **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    dlock__conn *c = calloc(1, sizeof(*c));
    if (!c) return DLOCK__ENOMEM;
    c->opts = *opts;
    int rc = url->kind == DLOCK__URL_CLUSTER ? DLOCK__EINVAL : dlock__url_copy(url, &c->url);
    if (rc == DLOCK__EINVAL) set_err(c, "connect", "a redis-cluster:// URL needs the router");
    if (rc == 0) rc = reopen(c);
    if (rc) {
        if (err && errlen) snprintf(err, errlen, "%s", c->errstr);
        dlock__plain_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void dlock__plain_close(dlock__conn *c)
{
    if (!c) return;
    drop_ctx(c);
    dlock__url_free(&c->url);
    free(c);
}

/* An idle pooled connection whose socket is readable was closed by the
 * server (CLIENT KILL, timeout, restart): reopen it before sending, so a
 * command is never sent into a dead socket and reported as EUNKNOWN. */
static int ensure_open(dlock__conn *c)
{
    if (c->ctx) {
        struct pollfd p = {.fd = c->ctx->fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 0) return 0;
        set_err(c, "connection", "closed by server while idle");
    }
    return reopen(c);
}

/* Formats argv as a RESP array and appends it to the output buffer. Our
 * own formatting, because hiredis' redisAppendCommandArgv builds each
 * length with sdscatfmt, the largest single cost of a lock cycle in
 * callgrind (docs/BENCHMARKS.md). REDIS_OK or REDIS_ERR (out of memory). */
static int append_argv(redisContext *ctx, int argc, const char *const *argv, const size_t *lens)
{
    size_t total = 24;
    for (int i = 0; i < argc; i++)
        total += 24 + (lens ? lens[i] : strlen(argv[i]));
    char stack[2048];
    char *buf = total <= sizeof(stack) ? stack : malloc(total);
    if (!buf) return REDIS_ERR;
    char *p = dlock__resp_len(buf, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        size_t n = lens ? lens[i] : strlen(argv[i]);
        p = dlock__resp_len(p, '$', n);
        memcpy(p, argv[i], n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
    }
    int rc = redisAppendFormattedCommand(ctx, buf, (size_t)(p - buf));
    if (buf != stack) free(buf);
    return rc;
}

static int transport_failed(dlock__conn *c)
{
    set_err(c, "reply", c->ctx->errstr[0] ? c->ctx->errstr : "connection lost");
    drop_ctx(c);
    return DLOCK__EUNKNOWN;
}

int dlock__plain_cmd(dlock__conn *c, int argc, const char **argv, const size_t *lens,
                     dlock__reply **reply_out)
{
    *reply_out = NULL;
    int rc = ensure_open(c);
    if (rc) return rc;
    if (append_argv(c->ctx, argc, argv, lens) != REDIS_OK) {
        set_err(c, "append", "out of memory");
        drop_ctx(c);
        return DLOCK__ENOMEM;
    }
    void *r = NULL;
    if (redisGetReply(c->ctx, &r) != REDIS_OK || !r) return transport_failed(c);
    *reply_out = r;
    return 0;
}

int dlock__plain_pipeline(dlock__conn *c, size_t n, const int *argcs, const char *const *const *argvs,
                          const size_t *const *lens, dlock__reply **replies_out)
{
    for (size_t i = 0; i < n; i++)
        replies_out[i] = NULL;
    int rc = ensure_open(c);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        if (append_argv(c->ctx, argcs[i], argvs[i], lens ? lens[i] : NULL) != REDIS_OK) {
            set_err(c, "append", "out of memory");
            drop_ctx(c);
            return DLOCK__ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK || !r) {
            for (size_t j = 0; j < i; j++) {
                freeReplyObject(replies_out[j]);
                replies_out[j] = NULL;
            }
            return transport_failed(c);
        }
        replies_out[i] = r;
    }
    return 0;
}

int dlock__plain_read_push(dlock__conn *c, int64_t timeout_ms, dlock__reply **reply_out)
{
    *reply_out = NULL;
    if (!c->ctx) return c->cl ? DLOCK__EINVAL : DLOCK__ECONN;
    void *r = NULL;
    /* A whole reply may already be buffered from an earlier read. */
    if (redisGetReplyFromReader(c->ctx, &r) != REDIS_OK) return transport_failed(c), DLOCK__EIO;
    if (r) {
        *reply_out = r;
        return 0;
    }
    struct pollfd p = {.fd = c->ctx->fd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms < 0 ? 0 : (int)(timeout_ms > 60000 ? 60000 : timeout_ms));
    if (n == 0) return DLOCK__ETIMEOUT;
    if (n < 0) return errno == EINTR ? DLOCK__ETIMEOUT : (transport_failed(c), DLOCK__EIO);
    if (redisGetReply(c->ctx, &r) != REDIS_OK || !r) return transport_failed(c), DLOCK__EIO;
    *reply_out = r;
    return 0;
}

int dlock__plain_send(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
    if (!c->ctx) return c->cl ? DLOCK__EINVAL : DLOCK__ECONN;
    if (append_argv(c->ctx, argc, argv, lens) != REDIS_OK) {
        set_err(c, "append", "out of memory");
        drop_ctx(c);
        return DLOCK__ENOMEM;
    }
    int done = 0;
    while (!done) {
        if (redisBufferWrite(c->ctx, &done) != REDIS_OK) {
            set_err(c, "write", c->ctx->errstr[0] ? c->ctx->errstr : "write failed");
            drop_ctx(c);
            return DLOCK__ECONN;
        }
    }
    return 0;
}

int dlock__plain_fd(const dlock__conn *c)
{
    return c && c->ctx ? c->ctx->fd : -1;
}

const char *dlock__plain_errstr(const dlock__conn *c)
{
    return c ? c->errstr : "no connection";
}

int dlock__plain_routing(const dlock__url *url, dlock__cluster *cl, dlock__conn **out)
{
    *out = NULL;
    dlock__conn *c = calloc(1, sizeof(*c));
    if (!c) return DLOCK__ENOMEM;
    int rc = dlock__url_copy(url, &c->url);
    if (rc) {
        free(c);
        return rc;
    }
    c->cl = cl;
    *out = c;
    return 0;
}

dlock__cluster *dlock__plain_router(const dlock__conn *c)
{
    return c ? c->cl : NULL;
}

const dlock__url *dlock__plain_url(const dlock__conn *c)
{
    return &c->url;
}

bool dlock__plain_is_open(const dlock__conn *c)
{
    return c && (c->ctx || c->cl);
}

int dlock__sentinel_resolve(const dlock__url *url, const dlock__conn_opts *opts, dlock__url *master_out,
                            char *err, size_t errlen)
{
    if (url->kind != DLOCK__URL_SENTINEL) return DLOCK__EINVAL;
    int last = DLOCK__ECONN;
    for (size_t i = 0; i < url->n_sentinels; i++) {
        dlock__url s = {
            .kind = DLOCK__URL_TCP, .host = url->sentinels[i].host, .port = url->sentinels[i].port};
        dlock__conn *c = NULL;
        last = dlock__plain_open(&s, opts, &c, err, errlen);
        if (last) continue;
        const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", url->master_name};
        dlock__reply *r = NULL;
        last = dlock__plain_cmd(c, 3, argv, NULL, &r);
        if (last == 0 && dlock__reply_count(r) == 2) {
            const char *host = dlock__reply_str(dlock__reply_at(r, 0), NULL);
            const char *port = dlock__reply_str(dlock__reply_at(r, 1), NULL);
            last = dlock__url_copy(url, master_out);
            if (last == 0) {
                master_out->kind = DLOCK__URL_TCP;
                master_out->host = strdup(host);
                master_out->port = (int)strtol(port, NULL, 10);
                last = master_out->host ? 0 : DLOCK__ENOMEM;
                if (last) dlock__url_free(master_out);
            }
        } else if (last == 0) {
            if (err && errlen) snprintf(err, errlen, "sentinel does not know master '%s'", url->master_name);
            last = DLOCK__ECONN;
        }
        dlock__reply_free(r);
        dlock__plain_close(c);
        if (last == 0) return 0;
    }
    return last;
}
