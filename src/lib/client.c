/* client.c: the dlock_client composes its parts: it validates and copies
 * the options, starts the connection pool (pool.c), the subscriber
 * (subscriber.c) and the watchdog (watchdog.c), and stops them in reverse.
 * It also owns keys, the thread owner string and the registry of held
 * objects. The backend (backend.h: Redis, Redis Cluster or etcd) is chosen
 * once here from the URL and attached/detached through its table; the
 * parts use this file's registry and key helpers, nothing else of it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend.h"
#include "client_priv.h"
#include "opts_read.h"
#include "slot.h"
#include "util.h"

DLOCK_API void dlock_client_options_init(dlock_client_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
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

int dlock__client_check_name(const dlock_client *c, const char *what, const char *name)
{
    int rc = dlock__check_name(name);
    if (rc == 0 || !c) return rc;
    if (!name) dlock__log(c, DLOCK_LOG_WARN, "%s name missing (NULL)", what);
    else if (!*name) dlock__log(c, DLOCK_LOG_WARN, "%s name is empty", what);
    else
        dlock__log(c, DLOCK_LOG_WARN, "%s name of %zu bytes is longer than the maximum of %d bytes", what,
                   strlen(name), DLOCK__NAME_MAX);
    return rc;
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

/* Adds one to the decimal number in num (len digits, no NUL); returns the
 * new length (one more when it carried past the first digit). */
static size_t decimal_increment(char *num, size_t len)
{
    for (size_t i = len; i-- > 0;) {
        if (num[i] != '9') {
            num[i]++;
            return len;
        }
        num[i] = '0';
    }
    memmove(num + 1, num, len);
    num[0] = '1';
    return len + 1;
}

/* Case 3 of the companion rule (client_internal.h): key has no hash tag but
 * contains '}', so no tag can hold it. The companion key + "#" + n + suffix
 * is untagged too (the '{' that failed to open a tag in key still fails),
 * so the Cluster hashes all of it: pick the smallest n that gives key's
 * slot. About 16384 tries on average, each a few CRC steps (~0.3 ms). */
static int untaggable_companion(const char *key, size_t n, const char *suffix, char *out,
                                size_t outlen)
{
    unsigned want = dlock__key_slot(key, n);
    uint16_t head = dlock__crc16(dlock__crc16(0, key, n), "#", 1);
    size_t slen = strlen(suffix), dlen = 1;
    char num[16] = "0";
    for (unsigned long i = 0; i < (1UL << 24); i++) { /* odds of no hit: e^-1024 */
        uint16_t crc = dlock__crc16(dlock__crc16(head, num, dlen), suffix, slen);
        if ((crc & (DLOCK__SLOTS - 1)) == want) {
            int w = snprintf(out, outlen, "%s#%.*s%s", key, (int)dlen, num, suffix);
            return w < 0 || (size_t)w >= outlen ? DLOCK_EINVAL : 0;
        }
        dlen = decimal_increment(num, dlen);
    }
    return DLOCK_EINVAL;
}

int dlock__companion_key(const char *key, const char *suffix, char *out, size_t outlen)
{
    if (strpbrk(suffix, "{}0123456789")) return DLOCK_EINVAL; /* see the rule's proof */
    size_t n = strlen(key), off, len;
    dlock__key_hashed_part(key, n, &off, &len);
    bool tagged = len != n;
    if (!tagged && memchr(key, '}', n)) return untaggable_companion(key, n, suffix, out, outlen);
    int w = tagged ? snprintf(out, outlen, "%s%s", key, suffix)
                   : snprintf(out, outlen, "{%s}%s", key, suffix);
    return w < 0 || (size_t)w >= outlen ? DLOCK_EINVAL : 0;
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

/* ---- commands: the pool's, for the objects ----------------------------- */

int dlock__client_cmd(dlock_client *c, int argc, const char **argv, const size_t *lens,
                      dlock__reply **out)
{
    return dlock__pool_cmd(&c->pool, argc, argv, lens, out);
}

int dlock__client_cmds(dlock_client *c, size_t n, const int *argcs, const char *const *const *argvs,
                       dlock__reply **replies_out)
{
    return dlock__pool_cmds(&c->pool, n, argcs, argvs, replies_out);
}

int dlock__client_eval_wait(dlock_client *c, const dlock__script *s, int nkeys,
                            const char *const *keys, int nargs, const char *const *args,
                            int replicas, int64_t timeout_ms, dlock__reply **out, int *acked_out)
{
    return dlock__pool_eval_wait(&c->pool, s, nkeys, keys, nargs, args, replicas, timeout_ms, out,
                                 acked_out);
}

int dlock__client_eval(dlock_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                       int nargs, const char *const *args, dlock__reply **out)
{
    return dlock__pool_eval_wait(&c->pool, s, nkeys, keys, nargs, args, 0, 0, out, NULL);
}

const char *dlock__script_sha(dlock_client *c, const dlock__script *s)
{
    return dlock__pool_script_sha(&c->pool, s);
}

/* ---- create / destroy ------------------------------------------------- */

static int copy_options(dlock_client *c, const dlock_client_options *given)
{
    dlock_client_options_init(&c->opts);
    if (dlock__opts_read(&c->opts, sizeof(c->opts),
                         DLOCK__SIZE_TO(dlock_client_options, log_level), given) != 0)
        return DLOCK_EINVAL;
    const dlock_client_options *o = &c->opts;
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
    return 0;
}

static int init_sync(dlock_client *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_mutex_init(&c->mu, NULL) || pthread_mutex_init(&c->sub_mu, NULL) ||
             pthread_mutex_init(&c->wd_mu, NULL) || pthread_mutex_init(&c->m_mu, NULL) ||
             pthread_cond_init(&c->sub_cv, &ca) || pthread_cond_init(&c->wd_cv, &ca) ||
             dlock__pool_init(&c->pool);
    pthread_condattr_destroy(&ca);
    return rc ? DLOCK_ENOMEM : 0;
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
    if (rc == 0) rc = dlock__err_from_common(dlock__random_hex(c->id, 16));
    c->be = dlock__backend_for_url(c->url_copy);
    if (rc == 0) rc = c->be->attach(c);
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
    if (c->be && c->be->quiesce) c->be->quiesce(c);
    dlock__watchdog_stop(c);
    report_held(c);
    if (c->be) c->be->detach(c);
    dlock__pool_destroy(&c->pool);
    dlock__url_free(&c->url);
    free(c->url_copy);
    free(c->prefix_copy);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->sub_mu);
    pthread_mutex_destroy(&c->wd_mu);
    pthread_mutex_destroy(&c->m_mu);
    pthread_cond_destroy(&c->sub_cv);
    pthread_cond_destroy(&c->wd_cv);
    free(c);
}

bool dlock__client_sharded(const dlock_client *c, const char *key, const char *channel)
{
    return c->pool.cluster && dlock__key_slot(key, strlen(key)) == dlock__key_slot(channel, strlen(channel));
}

const char *dlock__pub_cmd(bool sharded)
{
    return sharded ? "SPUBLISH" : "PUBLISH";
}

char *dlock__lock_channel(const char *prefix, const char *key)
{
    bool tagged = strchr(key, '{') != NULL;
    size_t n = strlen(prefix) + strlen(key) + 3;
    char *ch = malloc(n);
    if (ch) snprintf(ch, n, tagged ? "%s%s" : "%s{%s}", prefix, key);
    return ch;
}

char *dlock__redisson_channel(const char *key)
{
    return dlock__lock_channel("redisson_lock__channel:", key);
}
