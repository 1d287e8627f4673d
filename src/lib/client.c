/* client.c: the client's core, what every object and backend uses of a
 * dlock_client: its options and id, keys and names, the thread owner
 * string, commands on the pool (pool.c), the backend's offer (backend.h)
 * and the registry of held objects. It calls nothing above it: making and
 * destroying a client, which chooses the backend, is client_create.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend.h"
#include "client_priv.h"
#include "slot.h"
#include "util.h"

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

DLOCK_API int dlock_client_set_clock_drift(dlock_client *c, int64_t drift_ppm, int64_t drift_ms)
{
    if (!c || drift_ppm < 0 || drift_ppm > 500000 || drift_ms < 0 || drift_ms > 60000) return DLOCK_EINVAL;
    atomic_store(&c->drift_ppm, drift_ppm);
    atomic_store(&c->drift_ms, drift_ms);
    return 0;
}

int64_t dlock__valid_until_rule(int64_t sent_ms, int64_t lease_ms, int64_t drift_ppm, int64_t drift_ms)
{
    /* lease_ms <= 2^53 in practice; ppm <= 5e5 keeps the product in range */
    return sent_ms + lease_ms - (lease_ms / 1000) * drift_ppm / 1000 - (lease_ms % 1000) * drift_ppm / 1000000 -
           drift_ms;
}

int64_t dlock__client_valid_until(const dlock_client *c, int64_t sent_ms, int64_t lease_ms)
{
    int64_t ppm = atomic_load(&((dlock_client *)c)->drift_ppm);
    int64_t fixed = atomic_load(&((dlock_client *)c)->drift_ms);
    return dlock__valid_until_rule(sent_ms, lease_ms, ppm, fixed);
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

void dlock__held_report(dlock_client *c)
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

/* ---- the backend's offer (backend.h) --------------------------------- */

const dlock__backend *dlock__client_backend(const dlock_client *c)
{
    return c->be;
}

int dlock__client_offers(const dlock_client *c, dlock__object object, const char *what)
{
    if (c->be->objects & (unsigned)object) return 0;
    dlock__log(c, DLOCK_LOG_WARN, "a %s is not offered by the %s backend", what, c->be->name);
    return DLOCK_ENOTSUP;
}
