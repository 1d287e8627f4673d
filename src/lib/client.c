/* client.c: the dlock_client: options, creation/destruction, the pool of
 * command connections, commands with reconnect/retry, EVALSHA with NOSCRIPT
 * fallback, Sentinel master resolution, keys, logging and the registry of
 * held objects.
 *
 * Design note. Commands run on pooled sync connections (at most pool_size,
 * opened on demand). A command that failed with ECONN was never sent, so
 * it is retried (retry_attempts times, doubling delay with jitter); for a
 * Sentinel URL the master is asked for again first, and a pooled connection
 * opened for an older master is closed instead of reused (so a failover is
 * followed). EUNKNOWN (sent, no reply) is never retried: the caller decides.
 * A READONLY error (we reached a demoted master) also triggers re-resolution
 * and, since READONLY means nothing was applied, a retry.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "client_priv.h"
#include "etcd.h"
#include "util.h"

#define MAX_ARGS 64

DLOCK_API void dlock_client_options_init(dlock_client_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof(*o));
    o->url = "redis://127.0.0.1:6379";
    o->connect_timeout_ms = 2000;
    o->command_timeout_ms = 2000;
    o->watchdog_timeout_ms = 30000;
    o->retry_attempts = 3;
    o->retry_delay_ms = 50;
    o->key_prefix = "";
    o->pool_size = 8;
    o->wait_replicas = 0;
    o->wait_replicas_timeout_ms = 100;
    o->log_level = DLOCK_LOG_INFO;
}

void dlock__log(const dlock_client *c, dlock_log_level level, const char *fmt, ...)
{
    if (!c || !c->opts.log_fn || level < c->opts.log_level) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->opts.log_fn(level, msg, c->opts.log_ud);
}

const dlock_client_options *dlock__client_options(const dlock_client *c)
{
    return &c->opts;
}

DLOCK_API const char *dlock_client_id(const dlock_client *c)
{
    return c ? c->id : "";
}

int64_t dlock__client_watchdog_ms(const dlock_client *c)
{
    return c->opts.watchdog_timeout_ms;
}

void dlock__thread_owner(const dlock_client *c, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s:%ld", c->id, (long)syscall(SYS_gettid));
}

/* ---- keys ------------------------------------------------------------ */

int dlock__check_name(const char *name)
{
    if (!name) return DLOCK_EINVAL;
    size_t n = strnlen(name, DLOCK__NAME_MAX + 1);
    return n == 0 || n > DLOCK__NAME_MAX ? DLOCK_EINVAL : 0;
}

int dlock__client_key(const dlock_client *c, const char *name, char *out, size_t outlen)
{
    int rc = dlock__check_name(name);
    if (rc) return rc;
    size_t n = strlen(name);
    if (c->prefix_len + n + 1 > outlen) return DLOCK_EINVAL;
    memcpy(out, c->prefix_copy, c->prefix_len);
    memcpy(out + c->prefix_len, name, n + 1);
    return 0;
}

int dlock__companion_key(const char *key, const char *suffix, char *out, size_t outlen)
{
    const char *open = strchr(key, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    bool tagged = open && close && close > open + 1; /* "{}" is no tag */
    int n = tagged ? snprintf(out, outlen, "%s%s", key, suffix)
                   : snprintf(out, outlen, "{%s}%s", key, suffix);
    return n < 0 || (size_t)n >= outlen ? DLOCK_EINVAL : 0;
}

/* ---- held registry ---------------------------------------------------- */

void dlock__held_add(dlock_client *c, dlock__held *h)
{
    pthread_mutex_lock(&c->mu);
    h->prev = NULL;
    h->next = c->held;
    if (c->held) c->held->prev = h;
    c->held = h;
    pthread_mutex_unlock(&c->mu);
}

void dlock__held_remove(dlock_client *c, dlock__held *h)
{
    pthread_mutex_lock(&c->mu);
    bool linked = h->prev || c->held == h;
    if (linked) {
        if (h->prev) h->prev->next = h->next;
        else c->held = h->next;
        if (h->next) h->next->prev = h->prev;
    }
    h->prev = h->next = NULL;
    pthread_mutex_unlock(&c->mu);
}

/* ---- master endpoint ---------------------------------------------------- */

int dlock__client_master(dlock_client *c, dlock__url *out, uint64_t *gen_out)
{
    pthread_mutex_lock(&c->mu);
    int rc = dlock__url_copy(&c->master, out);
    if (gen_out) *gen_out = c->master_gen;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void dlock__client_reresolve(dlock_client *c)
{
    if (c->url.kind != DLOCK__URL_SENTINEL) return;
    dlock__url m;
    char err[256] = "";
    int rc = dlock__sentinel_resolve(&c->url, &c->copts, &m, err, sizeof(err));
    if (rc) {
        dlock__log(c, DLOCK_LOG_WARN, "sentinel: cannot resolve master: %s", err);
        return;
    }
    pthread_mutex_lock(&c->mu);
    bool changed = !c->master.host || strcmp(c->master.host, m.host) != 0 || c->master.port != m.port;
    if (changed) {
        dlock__url_free(&c->master);
        c->master = m;
        c->master_gen++;
    }
    pthread_mutex_unlock(&c->mu);
    if (changed) dlock__log(c, DLOCK_LOG_WARN, "sentinel: master is now %s:%d", m.host, m.port);
    else dlock__url_free(&m);
}

/* ---- pool ----------------------------------------------------------------- */

static int pool_get(dlock_client *c, dlock__pooled *out)
{
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->closing) {
            pthread_mutex_unlock(&c->mu);
            return DLOCK_ECLOSED;
        }
        if (c->n_idle > 0) {
            *out = c->idle[--c->n_idle];
            if (out->gen == c->master_gen) {
                pthread_mutex_unlock(&c->mu);
                return 0;
            }
            c->n_open--; /* opened for an old master: drop it */
            pthread_mutex_unlock(&c->mu);
            dlock__conn_close(out->conn);
            pthread_mutex_lock(&c->mu);
            continue;
        }
        if (c->n_open < c->opts.pool_size) break;
        pthread_cond_wait(&c->pool_cv, &c->mu);
    }
    c->n_open++;
    dlock__url m;
    int rc = dlock__url_copy(&c->master, &m);
    out->gen = c->master_gen;
    pthread_mutex_unlock(&c->mu);
    char err[256] = "";
    if (rc == 0) {
        rc = dlock__conn_open(&m, &c->copts, &out->conn, err, sizeof(err));
        dlock__url_free(&m);
        if (rc) dlock__log(c, DLOCK_LOG_WARN, "connect: %s", err);
    }
    if (rc) {
        pthread_mutex_lock(&c->mu);
        c->n_open--;
        pthread_cond_signal(&c->pool_cv);
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

static void pool_put(dlock_client *c, dlock__pooled *p)
{
    pthread_mutex_lock(&c->mu);
    if (c->closing || p->gen != c->master_gen) {
        c->n_open--;
        pthread_cond_signal(&c->pool_cv);
        pthread_mutex_unlock(&c->mu);
        dlock__conn_close(p->conn);
        return;
    }
    c->idle[c->n_idle++] = *p;
    pthread_cond_signal(&c->pool_cv);
    pthread_mutex_unlock(&c->mu);
}

/* Runs fn on a pooled connection; retries when fn (or connecting) reports
 * ECONN, i.e. nothing was sent. fn returns a dlock code. */
typedef int (*conn_fn)(dlock_client *c, dlock__conn *conn, void *ctx);

static int with_conn(dlock_client *c, conn_fn fn, void *ctx)
{
    int rc = DLOCK_ECONN;
    if (c->etcd) return DLOCK_ENOTSUP; /* etcd backend hook: Redis-only objects */
    for (int attempt = 0;; attempt++) {
        dlock__pooled p;
        rc = pool_get(c, &p);
        if (rc == 0) {
            rc = fn(c, p.conn, ctx);
            pool_put(c, &p);
        }
        if (rc != DLOCK_ECONN || attempt >= c->opts.retry_attempts) break;
        dlock__client_reresolve(c);
        dlock__sleep_ms(dlock__backoff_ms(c->opts.retry_delay_ms, attempt, 2000));
    }
    return rc;
}

/* A READONLY error means we talked to a demoted master: nothing applied. */
static int check_readonly(dlock_client *c, dlock__reply **r)
{
    if (!*r || !dlock__reply_is_error(*r, "READONLY")) return 0;
    dlock__reply_free(*r);
    *r = NULL;
    dlock__client_reresolve(c);
    return DLOCK_ECONN;
}

typedef struct cmd_ctx {
    int argc;
    const char **argv;
    const size_t *lens;
    dlock__reply **out;
} cmd_ctx;

static int run_cmd(dlock_client *c, dlock__conn *conn, void *ctx)
{
    cmd_ctx *x = ctx;
    int rc = dlock__conn_cmd(conn, x->argc, x->argv, x->lens, x->out);
    return rc ? rc : check_readonly(c, x->out);
}

int dlock__client_cmd(dlock_client *c, int argc, const char **argv, const size_t *lens,
                      dlock__reply **out)
{
    *out = NULL;
    cmd_ctx x = {argc, argv, lens, out};
    return with_conn(c, run_cmd, &x);
}

/* ---- scripts ---------------------------------------------------------- */

const char *dlock__script_sha(dlock_client *c, const dlock__script *s)
{
    const char *sha = NULL;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_shas && !sha; i++)
        if (c->shas[i].src == s->src) sha = c->shas[i].sha; /* never changed once written */
    if (!sha && c->n_shas < DLOCK__SHA_CACHE) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        char *dst = c->shas[c->n_shas].sha;
        if (EVP_Digest(s->src, strlen((const char *)s->src), md, &mdlen, EVP_sha1(), NULL) == 1 && mdlen == 20) {
            for (unsigned int i = 0; i < 20; i++) snprintf(dst + 2 * i, 3, "%02x", md[i]);
            c->shas[c->n_shas++].src = s->src;
            sha = dst;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return sha;
}

typedef struct eval_ctx {
    const dlock__script *s;
    int nkeys, nargs;
    const char *const *keys;
    const char *const *args;
    int replicas;
    int64_t timeout_ms;
    dlock__reply **out;
    int *acked_out;
} eval_ctx;

static int eval_on(dlock_client *c, dlock__conn *conn, eval_ctx *x)
{
    const char *argv[MAX_ARGS];
    char nk[16];
    snprintf(nk, sizeof(nk), "%d", x->nkeys);
    const char *sha = dlock__script_sha(c, x->s);
    argv[0] = sha ? "EVALSHA" : "EVAL";
    argv[1] = sha ? sha : (const char *)x->s->src;
    argv[2] = nk;
    for (int i = 0; i < x->nkeys; i++) argv[3 + i] = x->keys[i];
    for (int i = 0; i < x->nargs; i++) argv[3 + x->nkeys + i] = x->args[i];
    int argc = 3 + x->nkeys + x->nargs;
    int rc = dlock__conn_cmd(conn, argc, argv, NULL, x->out);
    if (rc == 0 && sha && dlock__reply_is_error(*x->out, "NOSCRIPT")) {
        /* Script cache emptied (restart, failover, SCRIPT FLUSH): EVAL
         * runs it and caches it again. */
        dlock__log(c, DLOCK_LOG_INFO, "script %s not cached on server: reloading", x->s->name);
        dlock__reply_free(*x->out);
        *x->out = NULL;
        argv[0] = "EVAL";
        argv[1] = (const char *)x->s->src;
        rc = dlock__conn_cmd(conn, argc, argv, NULL, x->out);
    }
    if (rc) return rc;
    return check_readonly(c, x->out);
}

static int run_eval(dlock_client *c, dlock__conn *conn, void *ctx)
{
    eval_ctx *x = ctx;
    int rc = eval_on(c, conn, x);
    if (rc || x->replicas <= 0 || dlock__reply_kind(*x->out) == DLOCK__R_ERROR) return rc;
    char n[16], t[24];
    snprintf(n, sizeof(n), "%d", x->replicas);
    snprintf(t, sizeof(t), "%lld", (long long)x->timeout_ms);
    const char *argv[3] = {"WAIT", n, t};
    dlock__reply *w = NULL;
    rc = dlock__conn_cmd(conn, 3, argv, NULL, &w);
    if (rc == DLOCK_ECONN) rc = DLOCK_EUNKNOWN; /* the eval did run: never retry it */
    if (rc == 0 && dlock__reply_kind(w) == DLOCK__R_INTEGER) *x->acked_out = (int)dlock__reply_int(w);
    else if (rc == 0) rc = DLOCK_ESERVER;
    dlock__reply_free(w);
    return rc;
}

int dlock__client_eval_wait(dlock_client *c, const dlock__script *s, int nkeys,
                            const char *const *keys, int nargs, const char *const *args,
                            int replicas, int64_t timeout_ms, dlock__reply **out, int *acked_out)
{
    *out = NULL;
    int acked = replicas;
    if (nkeys < 0 || nargs < 0 || 3 + nkeys + nargs > MAX_ARGS) return DLOCK_EINVAL;
    eval_ctx x = {s, nkeys, nargs, keys, args, replicas, timeout_ms, out, &acked};
    if (replicas > 0) acked = 0;
    int rc = with_conn(c, run_eval, &x);
    if (acked_out) *acked_out = acked;
    return rc;
}

int dlock__client_eval(dlock_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                       int nargs, const char *const *args, dlock__reply **out)
{
    return dlock__client_eval_wait(c, s, nkeys, keys, nargs, args, 0, 0, out, NULL);
}

typedef struct pipe_ctx {
    size_t n;
    const dlock__renew_cmd *cmds;
    dlock__reply **replies;
} pipe_ctx;

static int run_pipeline(dlock_client *c, dlock__conn *conn, void *ctx)
{
    pipe_ctx *x = ctx;
    int *argcs = calloc(x->n, sizeof(int));
    const char **flat = calloc(x->n * (3 + 2 * DLOCK__RENEW_MAXARGS), sizeof(char *));
    const char *const **argvs = calloc(x->n, sizeof(*argvs));
    char(*nks)[4] = calloc(x->n, sizeof(*nks));
    int rc = DLOCK_ENOMEM;
    if (argcs && flat && argvs && nks) {
        for (size_t i = 0; i < x->n; i++) {
            const dlock__renew_cmd *m = &x->cmds[i];
            const char **a = flat + i * (3 + 2 * DLOCK__RENEW_MAXARGS);
            snprintf(nks[i], sizeof(nks[i]), "%d", m->nkeys);
            const char *sha = dlock__script_sha(c, m->script);
            a[0] = sha ? "EVALSHA" : "EVAL";
            a[1] = sha ? sha : (const char *)m->script->src;
            a[2] = nks[i];
            for (int k = 0; k < m->nkeys; k++) a[3 + k] = m->keys[k];
            for (int k = 0; k < m->nargs; k++) a[3 + m->nkeys + k] = m->args[k];
            argcs[i] = 3 + m->nkeys + m->nargs;
            argvs[i] = a;
        }
        rc = dlock__conn_pipeline(conn, x->n, argcs, argvs, NULL, x->replies);
    }
    free(argcs);
    free(flat);
    free((void *)argvs);
    free(nks);
    return rc;
}

int dlock__client_pipeline_eval(dlock_client *c, size_t n, const dlock__renew_cmd *cmds,
                                dlock__reply **replies_out)
{
    pipe_ctx x = {n, cmds, replies_out};
    return with_conn(c, run_pipeline, &x);
}

/* ---- create / destroy ------------------------------------------------- */

static int copy_options(dlock_client *c, const dlock_client_options *o)
{
    c->opts = *o;
    c->url_copy = strdup(o->url ? o->url : "redis://127.0.0.1:6379");
    c->prefix_copy = strdup(o->key_prefix ? o->key_prefix : "");
    if (!c->url_copy || !c->prefix_copy) return DLOCK_ENOMEM;
    c->opts.url = c->url_copy;
    c->opts.key_prefix = c->prefix_copy;
    c->prefix_len = strlen(c->prefix_copy);
    if (o->connect_timeout_ms <= 0 || o->command_timeout_ms <= 0 || o->watchdog_timeout_ms < 30 ||
        o->retry_attempts < 0 || o->retry_delay_ms < 0 || o->pool_size < 1 ||
        o->pool_size > 1024 || o->wait_replicas < 0 || o->wait_replicas_timeout_ms < 0 ||
        c->prefix_len > DLOCK__NAME_MAX)
        return DLOCK_EINVAL;
    c->copts.connect_timeout_ms = o->connect_timeout_ms;
    c->copts.command_timeout_ms = o->command_timeout_ms;
    c->idle = calloc((size_t)o->pool_size, sizeof(*c->idle));
    return c->idle ? 0 : DLOCK_ENOMEM;
}

static int init_sync(dlock_client *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_mutex_init(&c->mu, NULL) || pthread_mutex_init(&c->sub_mu, NULL) ||
             pthread_mutex_init(&c->wd_mu, NULL) || pthread_mutex_init(&c->m_mu, NULL) ||
             pthread_cond_init(&c->pool_cv, &ca) || pthread_cond_init(&c->sub_cv, &ca) ||
             pthread_cond_init(&c->wd_cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc ? DLOCK_ENOMEM : 0;
}

/* Checks the endpoint with one connection (kept in the pool) and loads
 * the lock scripts. */
static int first_contact(dlock_client *c)
{
    char err[256] = "";
    int rc;
    if (c->url.kind == DLOCK__URL_SENTINEL) {
        rc = dlock__sentinel_resolve(&c->url, &c->copts, &c->master, err, sizeof(err));
        if (rc) {
            dlock__log(c, DLOCK_LOG_ERROR, "sentinel: %s", err);
            return rc;
        }
    } else if ((rc = dlock__url_copy(&c->url, &c->master)) != 0) {
        return rc;
    }
    dlock__pooled p = {.gen = 0};
    rc = dlock__conn_open(&c->master, &c->copts, &p.conn, err, sizeof(err));
    if (rc) {
        dlock__log(c, DLOCK_LOG_ERROR, "connect: %s", err);
        return rc;
    }
    c->n_open = 1;
    for (int i = 0; rc == 0 && dlock__preload_scripts[i]; i++) {
        const dlock__script *s = dlock__preload_scripts[i];
        const char *argv[3] = {"SCRIPT", "LOAD", (const char *)s->src};
        dlock__reply *r = NULL;
        rc = dlock__conn_cmd(p.conn, 3, argv, NULL, &r);
        if (rc == 0 && dlock__reply_kind(r) != DLOCK__R_STRING) {
            dlock__log(c, DLOCK_LOG_ERROR, "SCRIPT LOAD %s: %s", s->name, dlock__reply_str(r, NULL));
            rc = DLOCK_ESERVER;
        } else if (rc == 0 && (!dlock__script_sha(c, s) ||
                               strcmp(dlock__reply_str(r, NULL), dlock__script_sha(c, s)) != 0)) {
            dlock__log(c, DLOCK_LOG_WARN, "script %s: server SHA differs", s->name);
        }
        dlock__reply_free(r);
    }
    c->idle[c->n_idle++] = p;
    return rc;
}

DLOCK_API int dlock_client_create(const dlock_client_options *opts, dlock_client **client_out)
{
    if (!client_out) return DLOCK_EINVAL;
    *client_out = NULL;
    if (!opts) return DLOCK_EINVAL;
    dlock_client *c = calloc(1, sizeof(*c));
    if (!c) return DLOCK_ENOMEM;
    c->wake_pipe[0] = c->wake_pipe[1] = -1;
    int rc = init_sync(c);
    if (rc) {
        free(c);
        return rc;
    }
    dlock__metrics_init(c);
    rc = copy_options(c, opts);
    /* ---- etcd backend hook (issue 16): etcd:// and etcds:// clients have
     * no Redis connection and no subscriber; locks go to etcd_lock.c. */
    if (rc == 0 && dlock__etcd_url_is(c->url_copy)) {
        rc = dlock__random_hex(c->id, 16);
        if (rc == 0) rc = dlock__etcd_attach(c);
        if (rc == 0) rc = dlock__watchdog_start(c);
        if (rc == 0) *client_out = c;
        else dlock_client_destroy(c);
        return rc;
    }
    /* ---- end of the etcd backend hook ---- */
    char err[256] = "";
    if (rc == 0) rc = dlock__url_parse(c->url_copy, &c->url, err, sizeof(err));
    if (rc == DLOCK_EURL) dlock__log(c, DLOCK_LOG_ERROR, "url: %s", err);
    if (rc == 0) rc = dlock__random_hex(c->id, 16);
    if (rc == 0) rc = first_contact(c);
    if (rc == 0) rc = dlock__subscriber_start(c);
    if (rc == 0) rc = dlock__watchdog_start(c);
    if (rc) {
        dlock_client_destroy(c);
        return rc;
    }
    *client_out = c;
    return 0;
}

static void report_held(dlock_client *c)
{
    pthread_mutex_lock(&c->mu);
    dlock__held *h = c->held;
    c->held = NULL;
    pthread_mutex_unlock(&c->mu);
    while (h) {
        dlock__held *next = h->next;
        char what[512] = "";
        h->describe(h, what, sizeof(what));
        if (what[0])
            dlock__log(c, DLOCK_LOG_WARN,
                       "client destroyed while %s is held: not released, it expires on its lease", what);
        h->prev = h->next = NULL;
        if (h->orphan) h->orphan(h);
        h = next;
    }
}

DLOCK_API void dlock_client_destroy(dlock_client *c)
{
    if (!c) return;
    dlock__subscriber_stop(c);
    dlock__watchdog_stop(c);
    report_held(c);
    dlock__etcd_detach(c); /* etcd backend hook */
    pthread_mutex_lock(&c->mu);
    c->closing = true;
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->n_idle; i++) dlock__conn_close(c->idle[i].conn);
    free(c->idle);
    dlock__url_free(&c->url);
    dlock__url_free(&c->master);
    free(c->url_copy);
    free(c->prefix_copy);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->sub_mu);
    pthread_mutex_destroy(&c->wd_mu);
    pthread_mutex_destroy(&c->m_mu);
    pthread_cond_destroy(&c->pool_cv);
    pthread_cond_destroy(&c->sub_cv);
    pthread_cond_destroy(&c->wd_cv);
    free(c);
}
