/* pool.c: the client's connections to its master (see pool.h).
 *
 * Design note. Commands run on pooled sync connections (at most pool_size,
 * opened on demand). A command that failed with ECONN was never sent, so
 * it is retried (retry_attempts times, doubling delay with jitter); for a
 * Sentinel URL the master is asked for again first, and a pooled connection
 * opened for an older master is closed instead of reused (so a failover is
 * followed). EUNKNOWN (sent, no reply) is never retried: the caller decides.
 * A READONLY error (we reached a demoted master) also triggers re-resolution
 * and, since READONLY means nothing was applied, a retry. Every code from
 * src/common passes through dlock__err_from_common here.
 */
#include "pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "scripts.h"
#include "util.h"

#define MAX_ARGS 160 /* EVALSHA sha n + a multi-lock's 64 keys + 64 publish commands + owner */

/* ---- master endpoint ---------------------------------------------------- */

int dlock__pool_master(dlock__pool *p, dlock__url *out, uint64_t *gen_out)
{
    pthread_mutex_lock(&p->mu);
    int rc = dlock__err_from_common(dlock__url_copy(&p->master, out));
    if (gen_out) *gen_out = p->master_gen;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void dlock__pool_reresolve(dlock__pool *p)
{
    if (p->url->kind != DLOCK__URL_SENTINEL) return;
    dlock__url m;
    char err[256] = "";
    int rc = dlock__err_from_common(dlock__sentinel_resolve(p->url, &p->copts, &m, err, sizeof(err)));
    if (rc) {
        dlock__log_opts(p->opts, DLOCK_LOG_WARN, "sentinel: cannot resolve master: %s", err);
        return;
    }
    pthread_mutex_lock(&p->mu);
    bool changed = !p->master.host || strcmp(p->master.host, m.host) != 0 || p->master.port != m.port;
    if (changed) {
        dlock__url_free(&p->master);
        p->master = m;
        p->master_gen++;
    }
    pthread_mutex_unlock(&p->mu);
    if (changed) dlock__log_opts(p->opts, DLOCK_LOG_WARN, "sentinel: master is now %s:%d", m.host, m.port);
    else dlock__url_free(&m);
}

/* ---- pool ----------------------------------------------------------------- */

/* The calling thread's deadline (dlock__pool_io_deadline); 0: none. */
static _Thread_local int64_t io_until_ms;

void dlock__pool_io_deadline(int64_t until_ms)
{
    io_until_ms = until_ms;
}

/* The connection options for a call starting now: the pool's, each
 * shortened to what is left before the thread's deadline. */
static dlock__conn_opts call_opts(const dlock__pool *p)
{
    dlock__conn_opts o = p->copts;
    if (io_until_ms == 0) return o;
    int64_t left = io_until_ms - dlock__now_ms();
    if (left < 1) left = 1;
    if (o.connect_timeout_ms > left) o.connect_timeout_ms = left;
    if (o.command_timeout_ms > left) o.command_timeout_ms = left;
    return o;
}

/* Waits for a free connection slot; false when the thread's deadline
 * passed first. mu held. */
static bool wait_slot(dlock__pool *p)
{
    if (io_until_ms == 0) {
        pthread_cond_wait(&p->cv, &p->mu);
        return true;
    }
    struct timespec ts;
    dlock__abstime_ms(io_until_ms - dlock__now_ms(), &ts);
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    return dlock__now_ms() < io_until_ms;
}

static int pool_get(dlock__pool *p, dlock__pooled *out)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->closing) {
            pthread_mutex_unlock(&p->mu);
            return DLOCK_ECLOSED;
        }
        if (p->n_idle > 0) {
            *out = p->idle[--p->n_idle];
            if (out->gen == p->master_gen) {
                pthread_mutex_unlock(&p->mu);
                return 0;
            }
            p->n_open--; /* opened for an old master: drop it */
            pthread_mutex_unlock(&p->mu);
            dlock__conn_close(out->conn);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        if (p->n_open < p->opts->pool_size) break;
        if (!wait_slot(p)) {
            pthread_mutex_unlock(&p->mu);
            return DLOCK_ETIMEOUT;
        }
    }
    p->n_open++;
    dlock__url m;
    int rc = dlock__err_from_common(dlock__url_copy(&p->master, &m));
    out->gen = p->master_gen;
    pthread_mutex_unlock(&p->mu);
    char err[256] = "";
    if (rc == 0) {
        dlock__conn_opts o = call_opts(p);
        rc = dlock__err_from_common(dlock__conn_open(&m, &o, &out->conn, err, sizeof(err)));
        dlock__url_free(&m);
        if (rc) dlock__log_opts(p->opts, DLOCK_LOG_WARN, "connect: %s", err);
    }
    if (rc) {
        pthread_mutex_lock(&p->mu);
        p->n_open--;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return rc;
}

static void pool_put(dlock__pool *p, dlock__pooled *pc)
{
    pthread_mutex_lock(&p->mu);
    if (p->closing || pc->gen != p->master_gen) {
        p->n_open--;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        dlock__conn_close(pc->conn);
        return;
    }
    p->idle[p->n_idle++] = *pc;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Runs fn on a pooled connection; retries when fn (or connecting) reports
 * ECONN, i.e. nothing was sent. fn returns a dlock code. */
typedef int (*conn_fn)(dlock__pool *p, dlock__conn *conn, void *ctx);

/* fn on conn, its timeouts bounded by the thread's deadline for the call
 * and the pool's restored after it (the connection goes back to the pool). */
static int run_bounded(dlock__pool *p, dlock__conn *conn, conn_fn fn, void *ctx)
{
    if (io_until_ms == 0) return fn(p, conn, ctx);
    if (dlock__now_ms() >= io_until_ms) return DLOCK_ETIMEOUT;
    dlock__conn_opts o = call_opts(p);
    dlock__conn_set_timeouts(conn, &o);
    int rc = fn(p, conn, ctx);
    dlock__conn_set_timeouts(conn, &p->copts);
    return rc;
}

static int with_conn(dlock__pool *p, conn_fn fn, void *ctx)
{
    if (!p->started) return DLOCK_ENOTSUP; /* no Redis behind this client (etcd) */
    int rc = DLOCK_ECONN;
    for (int attempt = 0;; attempt++) {
        dlock__pooled pc;
        rc = pool_get(p, &pc);
        if (rc == 0) {
            rc = run_bounded(p, pc.conn, fn, ctx);
            pool_put(p, &pc);
        }
        if (rc != DLOCK_ECONN || attempt >= p->opts->retry_attempts) break;
        dlock__pool_reresolve(p);
        int64_t pause = dlock__backoff_ms(p->opts->retry_delay_ms, attempt, 2000);
        if (io_until_ms && dlock__now_ms() + pause >= io_until_ms) break; /* no time for another try */
        dlock__sleep_ms(pause);
    }
    return rc;
}

/* A READONLY error means we talked to a demoted master: nothing applied. */
static int check_readonly(dlock__pool *p, dlock__reply **r)
{
    if (!*r || !dlock__reply_is_error(*r, "READONLY")) return 0;
    dlock__reply_free(*r);
    *r = NULL;
    dlock__pool_reresolve(p);
    return DLOCK_ECONN;
}

typedef struct cmd_ctx {
    int argc;
    const char **argv;
    const size_t *lens;
    dlock__reply **out;
} cmd_ctx;

static int run_cmd(dlock__pool *p, dlock__conn *conn, void *ctx)
{
    cmd_ctx *x = ctx;
    int rc = dlock__err_from_common(dlock__conn_cmd(conn, x->argc, x->argv, x->lens, x->out));
    return rc ? rc : check_readonly(p, x->out);
}

int dlock__pool_cmd(dlock__pool *p, int argc, const char **argv, const size_t *lens,
                    dlock__reply **out)
{
    *out = NULL;
    cmd_ctx x = {argc, argv, lens, out};
    return with_conn(p, run_cmd, &x);
}

typedef struct cmds_ctx {
    size_t n;
    const int *argcs;
    const char *const *const *argvs;
    dlock__reply **replies;
} cmds_ctx;

static int run_cmds(dlock__pool *p, dlock__conn *conn, void *ctx)
{
    cmds_ctx *x = ctx;
    int rc = dlock__err_from_common(dlock__conn_pipeline(conn, x->n, x->argcs, x->argvs, NULL, x->replies));
    for (size_t i = 0; rc == 0 && i < x->n; i++) rc = check_readonly(p, &x->replies[i]);
    if (rc)
        for (size_t i = 0; i < x->n; i++) {
            dlock__reply_free(x->replies[i]);
            x->replies[i] = NULL;
        }
    return rc;
}

int dlock__pool_cmds(dlock__pool *p, size_t n, const int *argcs, const char *const *const *argvs,
                     dlock__reply **replies_out)
{
    for (size_t i = 0; i < n; i++) replies_out[i] = NULL;
    cmds_ctx x = {n, argcs, argvs, replies_out};
    return with_conn(p, run_cmds, &x);
}

typedef struct node_ctx {
    const char *channel;
    bool refresh;
    dlock__url *out;
} node_ctx;

static int run_node_for(dlock__pool *p, dlock__conn *conn, void *ctx)
{
    (void)p;
    node_ctx *x = ctx;
    if (x->refresh) { /* a read routed to the slot follows MOVED, or reloads the map past a dead master */
        const char *argv[2] = {"EXISTS", x->channel};
        dlock__reply *r = NULL;
        int rc = dlock__err_from_common(dlock__conn_cmd(conn, 2, argv, NULL, &r));
        dlock__reply_free(r);
        if (rc) return rc;
    }
    return dlock__err_from_common(dlock__conn_master_of_key(conn, x->channel, strlen(x->channel), x->out));
}

int dlock__pool_node_for(dlock__pool *p, const char *channel, bool refresh, dlock__url *out)
{
    if (!p->routing) return dlock__pool_master(p, out, NULL);
    node_ctx x = {channel, refresh, out};
    dlock__pooled pc;
    int rc = pool_get(p, &pc);
    if (rc) return rc;
    rc = run_node_for(p, pc.conn, &x);
    pool_put(p, &pc);
    return rc;
}

/* ---- scripts ---------------------------------------------------------- */

const char *dlock__pool_script_sha(dlock__pool *p, const dlock__script *s)
{
    (void)p;
    return s->sha;
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

/* The script on conn: EVALSHA, EVAL on NOSCRIPT (script.h). */
static int eval_on(dlock__pool *p, dlock__conn *conn, eval_ctx *x)
{
    bool reloaded = false;
    int rc = dlock__err_from_common(
        dlock__script_call(conn, x->s, x->nkeys, x->keys, x->nargs, x->args, x->out, &reloaded));
    /* Script cache emptied (restart, failover, SCRIPT FLUSH): EVAL ran it
     * and cached it again. */
    if (reloaded)
        dlock__log_opts(p->opts, DLOCK_LOG_INFO, "script %s not cached on server: reloaded", x->s->name);
    if (rc) return rc;
    return check_readonly(p, x->out);
}

/* The WAIT reply: *acked_out = replicas that acknowledged, or ESERVER. */
static int wait_result(const dlock__reply *w, int *acked_out)
{
    if (dlock__reply_kind(w) != DLOCK__R_INTEGER) return DLOCK_ESERVER;
    *acked_out = (int)dlock__reply_int(w);
    return 0;
}

static void wait_argv(const eval_ctx *x, const char *argv[3], char n[16], char t[24])
{
    snprintf(n, 16, "%d", x->replicas);
    snprintf(t, 24, "%lld", (long long)x->timeout_ms);
    argv[0] = "WAIT";
    argv[1] = n;
    argv[2] = t;
}

/* The script, then WAIT: two round trips (no SHA, or after NOSCRIPT). */
static int eval_then_wait(dlock__pool *p, dlock__conn *conn, eval_ctx *x)
{
    int rc = eval_on(p, conn, x);
    if (rc || dlock__reply_kind(*x->out) == DLOCK__R_ERROR) return rc;
    const char *argv[3];
    char n[16], t[24];
    wait_argv(x, argv, n, t);
    dlock__reply *w = NULL;
    rc = dlock__err_from_common(dlock__conn_cmd(conn, 3, argv, NULL, &w));
    if (rc == DLOCK_ECONN) rc = DLOCK_EUNKNOWN; /* the eval did run: never retry it */
    if (rc == 0) rc = wait_result(w, x->acked_out);
    dlock__reply_free(w);
    return rc;
}

/* EVALSHA and `WAIT replicas timeout` pipelined: one round trip. WAIT
 * counts the replicas that have this connection's last write, so it covers
 * the script's writes (a script that wrote nothing leaves the offset of an
 * earlier write, normally acknowledged long ago). *noscript_out: the
 * script was not cached, nothing ran (the caller falls back). */
static int eval_with_wait(dlock__pool *p, dlock__conn *conn, eval_ctx *x, bool *noscript_out)
{
    const char *argv[MAX_ARGS], *wargv[3];
    size_t lens[MAX_ARGS], wlens[3];
    char nk[16], n[16], t[24];
    const char *const *argvs[2] = {argv, wargv};
    const size_t *lv[2] = {lens, wlens};
    int argcs[2] = {dlock__script_argv(x->s, false, x->nkeys, x->keys, x->nargs, x->args, argv, lens, nk), 3};
    wait_argv(x, wargv, n, t);
    for (int i = 0; i < 3; i++) wlens[i] = strlen(wargv[i]);
    dlock__reply *rs[2] = {NULL, NULL};
    int rc = dlock__err_from_common(dlock__conn_pipeline(conn, 2, argcs, argvs, lv, rs));
    *noscript_out = rc == 0 && dlock__script_missing(rs[0]);
    if (rc == 0 && !*noscript_out) {
        *x->out = rs[0];
        rs[0] = NULL;
        rc = check_readonly(p, x->out);
        if (rc == 0 && dlock__reply_kind(*x->out) != DLOCK__R_ERROR) rc = wait_result(rs[1], x->acked_out);
    }
    dlock__reply_free(rs[0]);
    dlock__reply_free(rs[1]);
    return rc;
}

static int run_eval(dlock__pool *p, dlock__conn *conn, void *ctx)
{
    eval_ctx *x = ctx;
    if (x->replicas <= 0) return eval_on(p, conn, x);
    bool noscript = false;
    int rc = eval_with_wait(p, conn, x, &noscript);
    return noscript ? eval_then_wait(p, conn, x) : rc;
}

int dlock__pool_eval_wait(dlock__pool *p, const dlock__script *s, int nkeys,
                          const char *const *keys, int nargs, const char *const *args,
                          int replicas, int64_t timeout_ms, dlock__reply **out, int *acked_out)
{
    *out = NULL;
    int acked = replicas;
    if (nkeys < 0 || nargs < 0 || 3 + nkeys + nargs > MAX_ARGS) return DLOCK_EINVAL;
    eval_ctx x = {s, nkeys, nargs, keys, args, replicas, timeout_ms, out, &acked};
    if (replicas > 0) acked = 0;
    int rc = with_conn(p, run_eval, &x);
    if (acked_out) *acked_out = acked;
    return rc;
}

typedef struct pipe_ctx {
    size_t n;
    const dlock__renew_cmd *cmds;
    dlock__reply **replies;
} pipe_ctx;

static int run_pipeline(dlock__pool *p, dlock__conn *conn, void *ctx)
{
    (void)p;
    pipe_ctx *x = ctx;
    int *argcs = calloc(x->n, sizeof(int));
    const char **flat = calloc(x->n * (3 + 2 * DLOCK__RENEW_MAXARGS), sizeof(char *));
    const char *const **argvs = calloc(x->n, sizeof(*argvs));
    size_t *flens = calloc(x->n * (3 + 2 * DLOCK__RENEW_MAXARGS), sizeof(size_t));
    const size_t **lv = calloc(x->n, sizeof(*lv));
    char(*nks)[16] = calloc(x->n, sizeof(*nks));
    int rc = DLOCK_ENOMEM;
    if (argcs && flat && argvs && nks && flens && lv) {
        for (size_t i = 0; i < x->n; i++) {
            const dlock__renew_cmd *m = &x->cmds[i];
            const char **a = flat + i * (3 + 2 * DLOCK__RENEW_MAXARGS);
            size_t *l = flens + i * (3 + 2 * DLOCK__RENEW_MAXARGS);
            argcs[i] =
                dlock__script_argv(m->script, false, m->nkeys, m->keys, m->nargs, m->args, a, l, nks[i]);
            argvs[i] = a;
            lv[i] = l;
        }
        rc = dlock__err_from_common(dlock__conn_pipeline(conn, x->n, argcs, argvs, lv, x->replies));
    }
    free(argcs);
    free(flat);
    free(flens);
    free((void *)lv);
    free((void *)argvs);
    free(nks);
    return rc;
}

int dlock__pool_pipeline_eval(dlock__pool *p, size_t n, const dlock__renew_cmd *cmds,
                              dlock__reply **replies_out)
{
    pipe_ctx x = {n, cmds, replies_out};
    return with_conn(p, run_pipeline, &x);
}

/* ---- start / destroy -------------------------------------------------- */

int dlock__pool_init(dlock__pool *p)
{
    if (pthread_mutex_init(&p->mu, NULL) != 0) return DLOCK_ENOMEM;
    if (dlock__cond_init(&p->cv) != 0) { /* timed waits: dlock__pool_io_deadline */
        pthread_mutex_destroy(&p->mu);
        return DLOCK_ENOMEM;
    }
    return 0;
}

/* The endpoint as given, or the master its sentinels name. */
static int first_master(dlock__pool *p)
{
    if (p->url->kind != DLOCK__URL_SENTINEL)
        return dlock__err_from_common(dlock__url_copy(p->url, &p->master));
    char err[256] = "";
    int rc = dlock__err_from_common(dlock__sentinel_resolve(p->url, &p->copts, &p->master, err, sizeof(err)));
    if (rc) dlock__log_opts(p->opts, DLOCK_LOG_ERROR, "sentinel: %s", err);
    return rc;
}

/* SCRIPT LOAD of the preload scripts on conn; a server whose SHA differs
 * from ours is only logged (EVALSHA then falls back to EVAL). */
static int preload(dlock__pool *p, dlock__conn *conn)
{
    int rc = 0;
    for (int i = 0; rc == 0 && dlock__preload_scripts[i]; i++) {
        const dlock__script *s = dlock__preload_scripts[i];
        const char *argv[3] = {"SCRIPT", "LOAD", s->src};
        dlock__reply *r = NULL;
        rc = dlock__err_from_common(dlock__conn_cmd(conn, 3, argv, NULL, &r));
        const char *sha = s->sha;
        if (rc == 0 && dlock__reply_kind(r) != DLOCK__R_STRING) {
            dlock__log_opts(p->opts, DLOCK_LOG_ERROR, "SCRIPT LOAD %s: %s", s->name, dlock__reply_str(r, NULL));
            rc = DLOCK_ESERVER;
        } else if (rc == 0 && strcmp(dlock__reply_str(r, NULL), sha) != 0) {
            dlock__log_opts(p->opts, DLOCK_LOG_WARN, "script %s: server SHA differs", s->name);
        }
        dlock__reply_free(r);
    }
    return rc;
}

/* Whether conn's server is a Cluster node with sharded pub/sub: `INFO
 * server cluster` (two sections: Redis >= 7.0, which has SSUBSCRIBE; older
 * servers refuse the form) says cluster_enabled:1. A server that refuses
 * INFO (ACL) counts as not one: plain pub/sub works everywhere. */
static bool server_is_cluster(dlock__conn *conn)
{
    const char *argv[3] = {"INFO", "server", "cluster"};
    dlock__reply *r = NULL;
    bool yes = dlock__conn_cmd(conn, 3, argv, NULL, &r) == 0 && dlock__reply_kind(r) == DLOCK__R_STRING &&
               strstr(dlock__reply_str(r, NULL), "cluster_enabled:1") != NULL;
    dlock__reply_free(r);
    return yes;
}

int dlock__pool_start(dlock__pool *p, const dlock_client_options *opts, const dlock__url *url)
{
    p->opts = opts;
    p->url = url;
    p->copts.connect_timeout_ms = opts->connect_timeout_ms;
    p->copts.command_timeout_ms = opts->command_timeout_ms;
    p->idle = calloc((size_t)opts->pool_size, sizeof(*p->idle));
    if (!p->idle) return DLOCK_ENOMEM;
    int rc = first_master(p);
    if (rc) return rc;
    char err[256] = "";
    dlock__pooled pc = {.gen = 0};
    rc = dlock__err_from_common(dlock__conn_open(&p->master, &p->copts, &pc.conn, err, sizeof(err)));
    if (rc) {
        dlock__log_opts(p->opts, DLOCK_LOG_ERROR, "connect: %s", err);
        return rc;
    }
    p->n_open = 1;
    p->routing = dlock__conn_is_cluster(pc.conn);
    p->cluster = server_is_cluster(pc.conn);
    rc = preload(p, pc.conn);
    p->idle[p->n_idle++] = pc;
    p->started = rc == 0;
    return rc;
}

void dlock__pool_destroy(dlock__pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->closing = true;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_idle; i++) dlock__conn_close(p->idle[i].conn);
    free(p->idle);
    dlock__url_free(&p->master);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}
