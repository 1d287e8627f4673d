/* lockface.c: connects to Redis and drives the lock kind the options
 * chose through libdlock's public API. The library never prints; its log
 * hook here keeps the last warning (to explain a failure in one line) and
 * echoes everything with -v. Kinds this build lacks fail with a clear
 * message and CLI_EXIT_USAGE before anything is sent.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock/lock.h"

#include "dlock/fairlock.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"
#include "etcd_url.h"
#include "lockface.h"
#include "log_limit.h"

/* Exactly one handle is set, by the kind. */
struct cli_lock {
    const cli_options *o;
    dlock_client *client;
    dlock_lock *lock; /* SIMPLE, REENTRANT */
    dlock_fairlock *fair;
    dlock_rwlock *rw;
    dlock_semaphore *sem;
    cli_lost_fn lost; /* called on a watchdog thread */
    void *lost_ud;
};

/* ---- the library's log hook --------------------------------------------- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_last[512];
static bool log_echo;

static void print_line(int level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    fprintf(stderr, "dlock: [libdlock] %s\n", msg);
}

/* -v echoes the library's lines; a line repeated within 10 s is counted,
 * not printed again (log_limit.h). */
static dlock__loglimit log_limit = DLOCK__LOGLIMIT_INIT(DLOCK__LOGLIMIT_WINDOW_MS, print_line, NULL);

static void flush_log(void) { dlock__loglimit_flush(&log_limit); }

static void on_log(dlock_log_level level, const char *msg, void *ud)
{
    (void)ud;
    pthread_mutex_lock(&log_mu);
    if (level >= DLOCK_LOG_WARN) snprintf(log_last, sizeof(log_last), "%s", msg);
    pthread_mutex_unlock(&log_mu);
    if (log_echo) dlock__loglimit_line(&log_limit, (int)level, msg);
}

/* Forgets the last warning, so a failure is explained by its own. */
static void log_reset(void)
{
    pthread_mutex_lock(&log_mu);
    log_last[0] = '\0';
    pthread_mutex_unlock(&log_mu);
}

static void last_log(char *out, size_t outlen)
{
    pthread_mutex_lock(&log_mu);
    snprintf(out, outlen, "%s", log_last);
    pthread_mutex_unlock(&log_mu);
}

/* ---- errors ------------------------------------------------------------- */

int cli_exit_code(int rc)
{
    switch (rc) {
    case DLOCK_OK: return 0;
    case DLOCK_EINVAL:
    case DLOCK_ENOTSUP: return CLI_EXIT_USAGE; /* a kind the URL's backend lacks */
    case DLOCK_EURL:
    case DLOCK_ETLS: return CLI_EXIT_CONFIG;
    case DLOCK_EAUTH: return CLI_EXIT_NOPERM;
    case DLOCK_ECONN:
    case DLOCK_EIO:
    case DLOCK_EUNKNOWN:
    case DLOCK_ENOQUORUM:
    case DLOCK_ENOTREPL: return CLI_EXIT_UNAVAILABLE;
    case DLOCK_ELOST: return CLI_EXIT_LOST;
    default: return CLI_EXIT_SOFTWARE;
    }
}

void cli_redact_url(const char *url, char *out, size_t outlen)
{
    const char *scheme = strstr(url, "://");
    const char *start = scheme ? scheme + 3 : url;
    const char *at = strrchr(start, '@');
    const char *colon = at ? memchr(start, ':', (size_t)(at - start)) : NULL;
    if (!colon) { /* no user info, or a user name without password */
        snprintf(out, outlen, "%s", url);
        return;
    }
    snprintf(out, outlen, "%.*s:***%s", (int)(colon - url), url, at);
}

/* Strips a "component: " prefix from a library log line ("url: empty
 * host" -> "empty host"), keeping the rest. */
static const char *log_detail(const char *msg)
{
    const char *sep = strstr(msg, ": ");
    return sep && sep - msg < 16 ? sep + 2 : msg;
}

/* The library reports a server that wants a password and got none as a
 * server error (NOAUTH); for the user that is an authentication failure. */
static int refine(int rc, const char *detail)
{
    if (rc == DLOCK_ESERVER && strstr(detail, "NOAUTH")) return DLOCK_EAUTH;
    return rc;
}

/* "etcd" or "Redis": what the URL names, for messages. */
static const char *server_kind(const char *url)
{
    return dlock__etcd_url_is(url) ? "etcd" : "Redis";
}

/* One line: what failed, why, and where. */
static void print_failure(const cli_options *o, int rc, const char *what)
{
    const char *srv = server_kind(o->url);
    char where[600], detail[512];
    cli_redact_url(o->url, where, sizeof(where));
    last_log(detail, sizeof(detail));
    const char *d = detail[0] ? log_detail(detail) : dlock_strerror(rc);
    switch (rc) {
    case DLOCK_EURL:
        /* the Redis URL parser lists only its own schemes; dlock takes etcd's too */
        if (strncmp(d, "unknown scheme", 14) == 0)
            cli_err("bad URL '%s': unknown scheme (expected " CLI_URL_SCHEMES ")", where);
        else
            cli_err("bad URL '%s': %s", where, d);
        break;
    case DLOCK_ETLS:
        cli_err("bad URL '%s': %s", where, dlock_strerror(rc));
        break;
    case DLOCK_ECONN:
    case DLOCK_EIO:
        cli_err("cannot connect to %s at %s: %s", srv, where, d);
        break;
    case DLOCK_EAUTH:
        cli_err("%s at %s refused authentication: %s", srv, where, d);
        break;
    case DLOCK_EUNKNOWN:
        if (strcmp(what, "cannot acquire lock") == 0)
            cli_err("%s '%s': no reply from %s at %s (outcome unknown; a lock taken "
                    "then expires on its lease)", what, o->name, srv, where);
        else if (strcmp(what, "cannot release lock") == 0)
            cli_err("%s '%s': no reply from %s at %s (outcome unknown; if still held "
                    "it expires on its lease)", what, o->name, srv, where);
        else
            cli_err("%s '%s': %s at %s did not answer in time", what, o->name, srv, where);
        break;
    default:
        if (detail[0]) cli_err("%s '%s': %s (%s)", what, o->name, dlock_strerror(rc), d);
        else cli_err("%s '%s': %s", what, o->name, dlock_strerror(rc));
        break;
    }
}

int cli_fail_name(const cli_options *o, int rc, const char *what)
{
    char detail[512];
    last_log(detail, sizeof(detail));
    rc = refine(rc, detail);
    print_failure(o, rc, what);
    return cli_exit_code(rc);
}

int cli_sem_mismatch(const cli_options *o)
{
    char detail[512];
    long long n = 0;
    last_log(detail, sizeof(detail));
    const char *p = strstr(detail, "recorded with ");
    if (p && sscanf(p, "recorded with %lld permits", &n) == 1 && n > 0)
        cli_err("semaphore '%s' is in use with N = %lld, not %d: give --semaphore %lld (every user of a "
                "name gives the same N); to change N, stop its holders, then delete the keys '{%s%s}:sem', "
                "'{%s%s}:sem:exp' and '{%s%s}:sem:cnt'", o->name, n, o->permits, n, o->prefix, o->name,
                o->prefix, o->name, o->prefix, o->name);
    else
        cli_err("semaphore '%s' is in use with a different N than %d: give the N its other users give", o->name, o->permits);
    return CLI_EXIT_USAGE;
}

int cli_fail(cli_lock *lk, int rc, const char *what)
{
    return cli_fail_name(lk->o, rc, what);
}

/* ---- client ------------------------------------------------------------- */

int cli_client_open(const cli_options *o, dlock_client **client_out)
{
    static bool flush_at_exit;
    if (o->verbose && !flush_at_exit) flush_at_exit = atexit(flush_log) == 0;
    log_echo = o->verbose;
    if (o->wait_replicas > 0 && o->url && strncmp(o->url, "etcd", 4) == 0) {
        cli_err("--wait-replicas is for Redis: etcd acknowledges every write on a majority of its members "
                "already; leave it out");
        return CLI_EXIT_USAGE;
    }
    dlock_client_options co;
    dlock_client_options_init(&co);
    co.url = o->url;
    co.key_prefix = o->prefix;
    co.wait_replicas = o->wait_replicas;
    if (o->watchdog_ms > 0) co.watchdog_timeout_ms = o->watchdog_ms;
    /* A renewal must not hang longer than a third of the lease. */
    if (co.command_timeout_ms > co.watchdog_timeout_ms / 3)
        co.command_timeout_ms = co.watchdog_timeout_ms / 3;
    /* A replica on a busy host may take more than the library's 100 ms to
     * acknowledge; a lock for a job can wait for it up to half the command
     * timeout (the rest is for the round trip). Validity is counted from
     * the send either way. */
    if (co.command_timeout_ms / 2 > co.wait_replicas_timeout_ms)
        co.wait_replicas_timeout_ms = co.command_timeout_ms / 2;
    co.log_fn = on_log;
    co.log_level = o->verbose ? DLOCK_LOG_DEBUG : DLOCK_LOG_WARN;
    co.pool_size = 2;
    log_reset();
    int rc = dlock_client_create(&co, client_out);
    if (rc == 0) return 0;
    return cli_fail_name(o, rc, "cannot use lock");
}

/* ---- the lock kinds ----------------------------------------------------- */

/* Every kind's loss callback: wake the main loop (events.c). */
static void post(cli_lock *lk)
{
    if (lk->lost) lk->lost(lk->lost_ud);
}

static void on_lost(dlock_lock *lock, int reason, void *ud)
{
    (void)lock;
    (void)reason;
    post(ud);
}

static void on_fair_lost(dlock_fairlock *fl, int reason, void *ud)
{
    (void)fl;
    (void)reason;
    post(ud);
}

static void on_rw_lost(dlock_rwlock *rw, int reason, void *ud)
{
    (void)rw;
    (void)reason;
    post(ud);
}

static void on_sem_lost(dlock_semaphore *sem, int reason, void *ud)
{
    (void)sem;
    (void)reason;
    post(ud);
}

/* SIMPLE and REENTRANT. A reentrant holder is named "<client id>:<pid>":
 * unique per run, and the same whichever of our threads acquires or
 * releases. */
static int open_mutex(cli_lock *lk)
{
    const cli_options *o = lk->o;
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    char owner[96];
    if (o->kind == CLI_KIND_REENTRANT) {
        lo.kind = DLOCK_LOCK_REENTRANT;
        snprintf(owner, sizeof(owner), "%s:%ld", dlock_client_id(lk->client), (long)getpid());
        lo.owner_id = owner;
    }
    lo.on_lost = on_lost;
    lo.on_lost_ud = lk;
    int rc = dlock_lock_new(lk->client, o->name, &lo, &lk->lock);
    /* who holds it, for `dlock status`: carried by every acquisition */
    if (rc == 0) rc = dlock_lock_set_label(lk->lock, cli_label(o));
    if (rc) {
        dlock_lock_free(lk->lock);
        lk->lock = NULL;
    }
    return rc;
}

static int open_kind(cli_lock *lk)
{
    const cli_options *o = lk->o;
    switch (o->kind) {
    case CLI_KIND_FAIR: return dlock_fairlock_new(lk->client, o->name, NULL, &lk->fair);
    case CLI_KIND_READ:
    case CLI_KIND_WRITE: {
        dlock_rwlock_options ro;
        dlock_rwlock_options_init(&ro);
        ro.lease_ms = o->lease_ms;
        return dlock_rwlock_new(lk->client, o->name, &ro, &lk->rw);
    }
    case CLI_KIND_SEMAPHORE: {
        dlock_semaphore_options so;
        dlock_semaphore_options_init(&so);
        so.permits = o->permits;
        so.lease_ms = o->lease_ms;
        return dlock_semaphore_new(lk->client, o->name, &so, &lk->sem);
    }
    default: return open_mutex(lk);
    }
}

int cli_lock_open(const cli_options *o, cli_lost_fn lost, void *lost_ud, cli_lock **lk_out)
{
    cli_lock *lk = calloc(1, sizeof(*lk));
    if (!lk) {
        cli_err("out of memory");
        return CLI_EXIT_SOFTWARE;
    }
    lk->o = o;
    lk->lost = lost;
    lk->lost_ud = lost_ud;
    int code = cli_client_open(o, &lk->client);
    if (code == 0) {
        int rc = open_kind(lk);
        if (rc != 0) code = cli_fail(lk, rc, "cannot use lock");
    }
    if (lk->fair) dlock_fairlock_set_on_lost(lk->fair, on_fair_lost, lk);
    if (lk->rw) dlock_rwlock_set_on_lost(lk->rw, on_rw_lost, lk);
    if (lk->sem) dlock_semaphore_set_on_lost(lk->sem, on_sem_lost, lk);
    if (code != 0) {
        cli_lock_close(lk);
        return code;
    }
    *lk_out = lk;
    return 0;
}

int cli_lock_acquire(cli_lock *lk, int64_t wait_ms, int64_t lease_ms, uint64_t *fence_out,
                     bool *has_fence_out)
{
    int64_t wait = wait_ms < 0 ? DLOCK_WAIT_FOREVER : wait_ms;
    log_reset();
    *has_fence_out = lk->lock != NULL; /* only the mutex kinds issue tokens */
    if (lk->lock) return dlock_lock_try_lock(lk->lock, wait, lease_ms, fence_out);
    if (lk->fair) return dlock_fairlock_lock(lk->fair, wait, lease_ms);
    if (lk->rw && lk->o->kind == CLI_KIND_READ) return dlock_rwlock_read_lock(lk->rw, wait);
    if (lk->rw) return dlock_rwlock_write_lock(lk->rw, wait);
    if (lk->sem) return dlock_semaphore_acquire(lk->sem, 1, wait);
    return DLOCK_EINVAL;
}

void cli_lock_cancel(cli_lock *lk)
{
    if (lk->lock) dlock_lock_cancel(lk->lock);
    if (lk->fair) dlock_fairlock_cancel(lk->fair);
    if (lk->rw) dlock_rwlock_cancel(lk->rw);
    if (lk->sem) dlock_semaphore_cancel(lk->sem);
}

int cli_lock_release(cli_lock *lk)
{
    if (lk->lock) return dlock_lock_unlock(lk->lock);
    if (lk->fair) return dlock_fairlock_unlock(lk->fair);
    if (lk->rw && lk->o->kind == CLI_KIND_READ) return dlock_rwlock_read_unlock(lk->rw);
    if (lk->rw) return dlock_rwlock_write_unlock(lk->rw);
    if (lk->sem) return dlock_semaphore_held(lk->sem) > 0 ? dlock_semaphore_release(lk->sem, 1)
                                                          : DLOCK_ELOST;
    return DLOCK_EINVAL;
}

int64_t cli_lock_validity_ms(cli_lock *lk)
{
    if (lk->lock) return dlock_lock_validity_ms(lk->lock);
    if (lk->fair) return dlock_fairlock_validity_ms(lk->fair);
    if (lk->rw) return dlock_rwlock_validity_ms(lk->rw);
    if (lk->sem) return dlock_semaphore_validity_ms(lk->sem);
    return 0;
}

void cli_lock_close(cli_lock *lk)
{
    if (!lk) return;
    dlock_lock_free(lk->lock);
    dlock_fairlock_free(lk->fair);
    dlock_rwlock_free(lk->rw);
    dlock_semaphore_free(lk->sem);
    dlock_client_destroy(lk->client);
    free(lk);
}
