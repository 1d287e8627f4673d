/* redlock.c: RedLock over N independent masters (see dlock/redlock.h).
 *
 * Design: the group keeps, per node, one sync connection (opened lazily,
 * reopened by redis_io on failure) and one worker thread started with the
 * group, which owns that connection and runs the node's requests in order
 * from a queue. Each operation queues its script on every node at once and
 * waits for all of them; a node that is down fails fast (connect refused)
 * or within its command timeout, so an operation takes at most connect +
 * command timeout however many nodes are gone, and no thread is started
 * per operation. Scripts run as dlock__script (EVALSHA, EVAL on NOSCRIPT).
 * Per node: key = prefix + name holds the token (SET NX PX);
 * "{key}:fence" counts grants (lua/redlock_*.lua; extend is lua/lock_renew.lua).
 * Invariant: a hold is returned only if a quorum granted it and its
 * validity (lease - elapsed - drift) is positive; any failed attempt is
 * released on every node before the next one.
 */
#include "dlock/redlock.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "family.h"
#include "opts_read.h"
#include "redis_io.h"
#include "url.h"
#include "util.h"

/* lua/<name>.lua, embedded with its SHA1 at build time (script.h); the
 * extend is the simple lock's renew */
extern const dlock__script dlock__script_redlock_acquire, dlock__script_redlock_release,
    dlock__script_lock_renew;

typedef struct node_job node_job;

#define RL_MAX_NODES 16
#define RL_KEY_MAX (DLOCK__NAME_MAX + 300)

typedef struct rl_node {
    dlock__url url;
    char desc[128];
    pthread_mutex_t mu;  /* guards the queue, done flags and stop */
    pthread_cond_t work; /* a job was queued, or stop */
    pthread_cond_t done; /* a job of this node finished */
    node_job *head, *tail;
    bool stop;
    bool has_worker;      /* else jobs run on the caller's thread */
    pthread_t worker;
    dlock__conn *conn;    /* the worker's (or, without one, under mu) */
} rl_node;

struct dlock_redlock {
    rl_node nodes[RL_MAX_NODES];
    size_t n;
    int quorum;
    dlock__conn_opts copts;
    int64_t retry_delay_ms;
    double drift;
    char *prefix;
    dlock_log_fn log_fn;
    void *log_ud;
    dlock__waitctl ctl; /* cancels the pauses between attempts */
    bool ctl_ok;
};

struct dlock_redlock_hold {
    dlock_redlock *rl;
    char key[RL_KEY_MAX];
    char token[33];
    int64_t valid_until_ms; /* monotonic */
    uint64_t fence;
    int nodes;
};

static void start_workers(dlock_redlock *rl);
static void stop_workers(dlock_redlock *rl);
static void rl_log(const dlock_redlock *rl, dlock_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void rl_log(const dlock_redlock *rl, dlock_log_level lvl, const char *fmt, ...)
{
    if (!rl->log_fn) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rl->log_fn(lvl, msg, rl->log_ud);
}

DLOCK_API void dlock_redlock_options_init(dlock_redlock_options *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof(*opts));
    opts->size = sizeof(*opts);
    opts->connect_timeout_ms = 100;
    opts->command_timeout_ms = 100;
    opts->retry_delay_ms = 100;
    opts->drift_factor = 0.01;
}

static int check_opts(const dlock_redlock_options *o)
{
    if (!o->urls || o->n_urls < 1 || o->n_urls > RL_MAX_NODES) return DLOCK_EINVAL;
    if (o->connect_timeout_ms < 1 || o->command_timeout_ms < 1 || o->retry_delay_ms < 0)
        return DLOCK_EINVAL;
    if (!(o->drift_factor >= 0.0 && o->drift_factor < 0.5)) return DLOCK_EINVAL;
    if (o->key_prefix && strlen(o->key_prefix) > 256) return DLOCK_EINVAL;
    return 0;
}

/* A member must be one independent master: a Sentinel or Cluster URL
 * names a group of servers, whose failover or resharding RedLock's
 * majority argument does not cover. Refused with a log line. */
static bool not_one_master(const dlock_redlock *rl, size_t i, const dlock__url *u)
{
    if (u->kind != DLOCK__URL_SENTINEL && u->kind != DLOCK__URL_CLUSTER) return false;
    rl_log(rl, DLOCK_LOG_ERROR,
           "redlock: member %zu is a %s URL: RedLock runs over independent masters (redis:// or unix://), "
           "one per member; RedLock across clusters is not supported",
           i + 1, u->kind == DLOCK__URL_SENTINEL ? "Sentinel" : "Cluster");
    return true;
}

DLOCK_API int dlock_redlock_new(const dlock_redlock_options *given, dlock_redlock **rl_out)
{
    if (!given || !rl_out) return DLOCK_EINVAL;
    dlock_redlock_options read;
    dlock_redlock_options_init(&read);
    if (dlock__opts_read(&read, sizeof(read), DLOCK__SIZE_TO(dlock_redlock_options, log_ud), given))
        return DLOCK_EINVAL;
    const dlock_redlock_options *opts = &read;
    *rl_out = NULL;
    int rc = check_opts(opts);
    if (rc) return rc;
    dlock_redlock *rl = calloc(1, sizeof(*rl));
    if (!rl) return DLOCK_ENOMEM;
    rl->prefix = strdup(opts->key_prefix ? opts->key_prefix : "");
    if (!rl->prefix) rc = DLOCK_ENOMEM;
    rl->log_fn = opts->log_fn;
    rl->log_ud = opts->log_ud;
    for (size_t i = 0; rc == 0 && i < opts->n_urls; i++) {
        rl_node *nd = &rl->nodes[i];
        char err[256];
        rc = dlock__err_from_common(dlock__url_parse(opts->urls[i], &nd->url, err, sizeof(err)));
        if (rc == 0 && not_one_master(rl, i, &nd->url)) rc = DLOCK_EURL;
        else if (rc && rc != DLOCK_ENOMEM) rl_log(rl, DLOCK_LOG_ERROR, "redlock: member %zu: %s", i + 1, err);
        if (rc) {
            if (rc != DLOCK_ENOMEM) rc = DLOCK_EURL;
            dlock__url_free(&nd->url);
            break;
        }
        dlock__url_describe(&nd->url, nd->desc, sizeof(nd->desc));
        pthread_mutex_init(&nd->mu, NULL);
        pthread_cond_init(&nd->work, NULL);
        pthread_cond_init(&nd->done, NULL);
        rl->n++;
    }
    if (rc == 0) {
        rc = dlock__waitctl_init(&rl->ctl);
        rl->ctl_ok = rc == 0;
    }
    if (rc) {
        dlock_redlock_free(rl);
        return rc;
    }
    rl->quorum = (int)(rl->n / 2 + 1);
    rl->copts.connect_timeout_ms = opts->connect_timeout_ms;
    rl->copts.command_timeout_ms = opts->command_timeout_ms;
    rl->retry_delay_ms = opts->retry_delay_ms;
    rl->drift = opts->drift_factor;
    start_workers(rl);
    *rl_out = rl;
    return 0;
}

DLOCK_API void dlock_redlock_free(dlock_redlock *rl)
{
    if (!rl) return;
    stop_workers(rl);
    for (size_t i = 0; i < rl->n; i++) {
        dlock__conn_close(rl->nodes[i].conn);
        dlock__url_free(&rl->nodes[i].url);
        pthread_mutex_destroy(&rl->nodes[i].mu);
        pthread_cond_destroy(&rl->nodes[i].work);
        pthread_cond_destroy(&rl->nodes[i].done);
    }
    if (rl->ctl_ok) dlock__waitctl_destroy(&rl->ctl);
    free(rl->prefix);
    free(rl);
}

DLOCK_API void dlock_redlock_cancel(dlock_redlock *rl)
{
    if (rl) dlock__waitctl_cancel(&rl->ctl);
}

/* ---- one request to every node in parallel ----------------------------- */

struct node_job {
    dlock_redlock *rl;
    const dlock__script *script;
    int nkeys, nargs;
    const char *const *keys;
    const char *const *args;
    node_job *next;
    bool done;         /* under the node's mu */
    int rc;            /* transport code, or ESERVER for an error reply */
    long long result;  /* the script's integer reply */
};

/* Runs job j on node nd's connection (the worker's thread, or the
 * caller's with nd->mu held). */
static void job_run(rl_node *nd, node_job *j)
{
    j->rc = 0;
    if (!nd->conn) {
        char err[256];
        j->rc = dlock__err_from_common(dlock__conn_open(&nd->url, &j->rl->copts, &nd->conn, err, sizeof(err)));
        if (j->rc) nd->conn = NULL;
    }
    dlock__reply *r = NULL;
    if (j->rc == 0)
        j->rc = dlock__err_from_common(
            dlock__script_call(nd->conn, j->script, j->nkeys, j->keys, j->nargs, j->args, &r, NULL));
    if (j->rc == 0) {
        if (dlock__reply_kind(r) == DLOCK__R_INTEGER)
            j->result = dlock__reply_int(r);
        else
            j->rc = DLOCK_ESERVER;
    }
    dlock__reply_free(r);
}

static void *worker_main(void *p)
{
    rl_node *nd = p;
    pthread_mutex_lock(&nd->mu);
    for (;;) {
        while (!nd->head && !nd->stop) pthread_cond_wait(&nd->work, &nd->mu);
        if (!nd->head) break; /* stop, queue drained */
        node_job *j = nd->head;
        nd->head = j->next;
        if (!nd->head) nd->tail = NULL;
        pthread_mutex_unlock(&nd->mu);
        job_run(nd, j);
        pthread_mutex_lock(&nd->mu);
        j->done = true;
        pthread_cond_broadcast(&nd->done);
    }
    pthread_mutex_unlock(&nd->mu);
    return NULL;
}

/* One worker per node, for the group's life; a node whose thread cannot
 * start runs its jobs on the callers' threads (one at a time, under mu). */
static void start_workers(dlock_redlock *rl)
{
    for (size_t i = 0; i < rl->n; i++) {
        rl_node *nd = &rl->nodes[i];
        nd->has_worker = pthread_create(&nd->worker, NULL, worker_main, nd) == 0;
        if (!nd->has_worker) rl_log(rl, DLOCK_LOG_WARN, "redlock: node %s: no worker thread", nd->desc);
    }
}

static void stop_workers(dlock_redlock *rl)
{
    for (size_t i = 0; i < rl->n; i++) {
        rl_node *nd = &rl->nodes[i];
        if (!nd->has_worker) continue;
        pthread_mutex_lock(&nd->mu);
        nd->stop = true;
        pthread_cond_signal(&nd->work);
        pthread_mutex_unlock(&nd->mu);
        pthread_join(nd->worker, NULL);
        nd->has_worker = false;
    }
}

static void job_queue(rl_node *nd, node_job *j)
{
    pthread_mutex_lock(&nd->mu);
    if (!nd->has_worker) {
        job_run(nd, j);
        j->done = true;
    } else {
        j->next = NULL;
        if (nd->tail) nd->tail->next = j;
        else nd->head = j;
        nd->tail = j;
        pthread_cond_signal(&nd->work);
    }
    pthread_mutex_unlock(&nd->mu);
}

static void job_wait(rl_node *nd, node_job *j)
{
    pthread_mutex_lock(&nd->mu);
    while (!j->done) pthread_cond_wait(&nd->done, &nd->mu);
    pthread_mutex_unlock(&nd->mu);
}

/* Runs the same script on every node at once; jobs[i] gets node i's answer. */
static void run_all(dlock_redlock *rl, const dlock__script *script, int nkeys, const char *const *keys,
                    int nargs, const char *const *args, node_job *jobs)
{
    for (size_t i = 0; i < rl->n; i++) {
        jobs[i] = (node_job){
            .rl = rl, .script = script, .nkeys = nkeys, .nargs = nargs, .keys = keys, .args = args};
        job_queue(&rl->nodes[i], &jobs[i]);
    }
    for (size_t i = 0; i < rl->n; i++)
        job_wait(&rl->nodes[i], &jobs[i]);
}

/* ---- lock / extend / unlock ------------------------------------------ */

/* Runs script with ARGV {token, lease_ms} on every node; *t0_out is when
 * it was sent, the result how long the answers took (the validity of what
 * was granted is counted from t0, less that time and the drift). */
static int64_t run_timed(dlock_redlock *rl, const dlock__script *script, int nkeys,
                         const char *const *keys, const char *token, int64_t lease_ms,
                         node_job *jobs, int64_t *t0_out)
{
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
    const char *args[2] = {token, lease};
    *t0_out = dlock__now_ms();
    run_all(rl, script, nkeys, keys, 2, args, jobs);
    return dlock__now_ms() - *t0_out;
}

static int64_t drift_ms(const dlock_redlock *rl, int64_t lease_ms)
{
    return (int64_t)(rl->drift * (double)lease_ms) + 2;
}

static void release_all(dlock_redlock *rl, const char *key, const char *token, int *released_out)
{
    node_job jobs[RL_MAX_NODES];
    const char *keys[1] = {key};
    const char *args[1] = {token};
    run_all(rl, &dlock__script_redlock_release, 1, keys, 1, args, jobs);
    int n = 0;
    for (size_t i = 0; i < rl->n; i++) n += jobs[i].rc == 0 && jobs[i].result == 1;
    if (released_out) *released_out = n;
}

/* One attempt: 1 acquired (h filled), 0 refused by a quorum, or ENOQUORUM
 * (too few nodes answered). Anything partly taken is released again. */
static int attempt(dlock_redlock *rl, dlock_redlock_hold *h, const char *fence_key, int64_t lease_ms)
{
    int rc = dlock__err_from_common(dlock__random_hex(h->token, 16));
    if (rc) return rc;
    const char *keys[2] = {h->key, fence_key};
    node_job jobs[RL_MAX_NODES];
    int64_t t0 = 0;
    int64_t elapsed = run_timed(rl, &dlock__script_redlock_acquire, 2, keys, h->token, lease_ms, jobs, &t0);
    int granted = 0, answered = 0;
    uint64_t fence = 0;
    for (size_t i = 0; i < rl->n; i++) {
        if (jobs[i].rc != 0) {
            rl_log(rl, DLOCK_LOG_DEBUG, "redlock %s: node %s: %s", h->key, rl->nodes[i].desc,
                   dlock_strerror(jobs[i].rc));
            continue;
        }
        answered++;
        if (jobs[i].result > 0) {
            granted++;
            if ((uint64_t)jobs[i].result > fence) fence = (uint64_t)jobs[i].result;
        }
    }
    int64_t validity = lease_ms - elapsed - drift_ms(rl, lease_ms);
    if (granted >= rl->quorum && validity > 0) {
        h->valid_until_ms = t0 + lease_ms - drift_ms(rl, lease_ms);
        h->fence = fence;
        h->nodes = granted;
        return 1;
    }
    /* Release everywhere, also where the reply was lost (EUNKNOWN). */
    if (granted > 0 || answered < (int)rl->n) release_all(rl, h->key, h->token, NULL);
    return answered < rl->quorum ? DLOCK_ENOQUORUM : 0;
}

DLOCK_API int dlock_redlock_lock(dlock_redlock *rl, const char *name, int64_t lease_ms,
                                 int64_t wait_ms, dlock_redlock_hold **hold_out)
{
    if (!rl || !hold_out || lease_ms < 10 || wait_ms < -1) return DLOCK_EINVAL;
    *hold_out = NULL;
    if (dlock__check_name(name) != 0) return DLOCK_EINVAL;
    dlock_redlock_hold *h = calloc(1, sizeof(*h));
    if (!h) return DLOCK_ENOMEM;
    h->rl = rl;
    char fence_key[RL_KEY_MAX + 16];
    int n = snprintf(h->key, sizeof(h->key), "%s%s", rl->prefix, name);
    if (n < 0 || (size_t)n >= sizeof(h->key) ||
        dlock__companion_key(h->key, ":fence", fence_key, sizeof(fence_key)) != 0) {
        free(h);
        return DLOCK_EINVAL;
    }
    int64_t deadline = wait_ms < 0 ? -1 : dlock__now_ms() + wait_ms;
    uint64_t gen = dlock__waitctl_start(&rl->ctl);
    int rc = 0;
    for (;;) {
        if (dlock__waitctl_canceled(&rl->ctl, gen)) {
            rc = DLOCK_ECANCELED;
            break;
        }
        rc = attempt(rl, h, fence_key, lease_ms);
        if (rc == 1) {
            dlock__waitctl_end(&rl->ctl);
            *hold_out = h;
            return 0;
        }
        if (rc != 0 && rc != DLOCK_ENOQUORUM) break;
        int64_t pause = rl->retry_delay_ms / 2 +
                        (int64_t)dlock__random_below((uint64_t)rl->retry_delay_ms + 1);
        if (wait_ms == 0 || (deadline >= 0 && dlock__now_ms() + pause >= deadline)) break;
        if (dlock__waitctl_sleep(&rl->ctl, gen, pause) != 0) {
            rc = DLOCK_ECANCELED;
            break;
        }
    }
    dlock__waitctl_end(&rl->ctl);
    free(h);
    if (rc == DLOCK_ECANCELED) return rc;
    if (rc == DLOCK_ENOQUORUM) {
        rl_log(rl, DLOCK_LOG_WARN, "redlock %s%s: no quorum of %zu nodes reachable", rl->prefix,
               name, rl->n);
        return rc;
    }
    if (rc != 0) return rc;
    return wait_ms == 0 ? DLOCK_EBUSY : DLOCK_ETIMEOUT;
}

DLOCK_API int64_t dlock_redlock_validity_ms(const dlock_redlock_hold *h)
{
    return h ? h->valid_until_ms - dlock__now_ms() : 0;
}

DLOCK_API uint64_t dlock_redlock_fence(const dlock_redlock_hold *h)
{
    return h ? h->fence : 0;
}

DLOCK_API int dlock_redlock_nodes_held(const dlock_redlock_hold *h)
{
    return h ? h->nodes : 0;
}

DLOCK_API int dlock_redlock_extend(dlock_redlock_hold *h, int64_t lease_ms)
{
    if (!h || lease_ms < 10) return DLOCK_EINVAL;
    dlock_redlock *rl = h->rl;
    const char *keys[1] = {h->key};
    node_job jobs[RL_MAX_NODES];
    int64_t t0 = 0;
    int64_t elapsed = run_timed(rl, &dlock__script_lock_renew, 1, keys, h->token, lease_ms, jobs, &t0);
    int ok = 0, answered = 0;
    for (size_t i = 0; i < rl->n; i++) {
        answered += jobs[i].rc == 0;
        ok += jobs[i].rc == 0 && jobs[i].result == 1;
    }
    if (ok >= rl->quorum && lease_ms - elapsed - drift_ms(rl, lease_ms) > 0) {
        h->valid_until_ms = t0 + lease_ms - drift_ms(rl, lease_ms);
        h->nodes = ok;
        return 0;
    }
    if (answered < rl->quorum) return DLOCK_ENOQUORUM;
    rl_log(rl, DLOCK_LOG_WARN, "redlock %s: extension found the lock gone on a quorum", h->key);
    return DLOCK_ELOST;
}

DLOCK_API int dlock_redlock_unlock(dlock_redlock_hold *h)
{
    if (!h) return 0; /* it frees h: a destructor, so NULL is a no-op */
    int released = 0;
    release_all(h->rl, h->key, h->token, &released);
    int rc = released >= h->rl->quorum ? 0 : DLOCK_ELOST;
    free(h);
    return rc;
}
