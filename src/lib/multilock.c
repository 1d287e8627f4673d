/* multilock.c: all-or-nothing lock over several names (see
 * dlock/multilock.h).
 *
 * Keys: each name's key = prefix + name, a hash {owner: count} with PEXPIRE
 * (the reentrant lock's layout); its unlock channel is
 * "redisson_lock__channel:{key}". Scripts: lua/multi_*.lua.
 * Two paths, chosen once at creation from the keys' Cluster hash slots:
 *  - one slot: multi_acquire/release/renew run once over all keys;
 *  - several slots: the same scripts run per key, in byte order of the key;
 *    a busy key rolls back the keys taken in this attempt.
 * Invariant: when lock() returns, the handle holds every key or none.
 */
#include "dlock/multilock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "family.h"
#include "hold.h"
#include "slot.h"
#include "util.h"

/* lua/<name>.lua, embedded with its SHA1 at build time (script.h) */
extern const dlock__script dlock__script_multi_acquire;
extern const dlock__script dlock__script_multi_release;
extern const dlock__script dlock__script_multi_renew;

struct dlock_multilock {
    dlock_client *c;
    size_t n;
    char **keys;  /* sorted */
    char **chans; /* chans[i] belongs to keys[i] */
    bool *sharded; /* sharded[i]: chans[i] is sharded (dlock__client_sharded) */
    bool atomic;
    char owner[DLOCK__FAM_OWNER_LEN];
    _Atomic int64_t count;
    size_t busy; /* index of the key the last attempt found busy */
    int64_t lease_ms; /* of the first acquisition (handle thread only) */
    dlock__hold hold;
    dlock__waitctl ctl;
};

#define ML_OF_HOLD(h) ((dlock_multilock *)(void *)((char *)(h) - offsetof(dlock_multilock, hold)))

/* ---- creation ------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ml_renew(dlock__hold *r, int64_t lease_ms);
static void ml_describe(const dlock__hold *h, char *buf, size_t len)
{
    const dlock_multilock *ml = ML_OF_HOLD(h);
    snprintf(buf, len, "multi-lock %s (+%zu more)", ml->keys[0], ml->n - 1);
}

static void ml_destroy(dlock_multilock *ml)
{
    for (size_t i = 0; i < ml->n; i++) {
        if (ml->keys) free(ml->keys[i]);
        if (ml->chans) free(ml->chans[i]);
    }
    free(ml->keys);
    free(ml->chans);
    free(ml->sharded);
    free(ml);
}

static int fill_keys(dlock_multilock *ml, const char *const *names)
{
    for (size_t i = 0; i < ml->n; i++) {
        char key[DLOCK__KEY_MAX];
        int rc = dlock__client_key(ml->c, names[i], key, sizeof(key));
        if (rc) return rc;
        ml->keys[i] = strdup(key);
        if (!ml->keys[i]) return DLOCK_ENOMEM;
    }
    qsort(ml->keys, ml->n, sizeof(char *), cmp_str);
    ml->atomic = true;
    unsigned slot0 = dlock__key_slot(ml->keys[0], strlen(ml->keys[0]));
    for (size_t i = 0; i < ml->n; i++) {
        if (i > 0 && strcmp(ml->keys[i - 1], ml->keys[i]) == 0) return DLOCK_EINVAL;
        if (dlock__key_slot(ml->keys[i], strlen(ml->keys[i])) != slot0) ml->atomic = false;
        ml->chans[i] = dlock__redisson_channel(ml->keys[i]);
        if (!ml->chans[i]) return DLOCK_ENOMEM;
        ml->sharded[i] = dlock__client_sharded(ml->c, ml->keys[i], ml->chans[i]);
    }
    return 0;
}

static void ml_lost(dlock__hold *h, int reason)
{
    void *ud = NULL;
    dlock_multilock_lost_fn fn = (dlock_multilock_lost_fn)dlock__hold_user_lost(h, &ud);
    if (fn) fn(ML_OF_HOLD(h), reason, ud);
}

DLOCK_API int dlock_multilock_new(dlock_client *client, const char *const *names, size_t n,
                                  dlock_multilock **ml_out)
{
    if (!client || !names || !ml_out || n < 1 || n > DLOCK_MULTILOCK_MAX) return DLOCK_EINVAL;
    *ml_out = NULL;
    int offered = dlock__client_offers(client, DLOCK__OBJ_MULTILOCK, "multi-lock");
    if (offered) return offered;
    for (size_t i = 0; i < n; i++)
        if (dlock__client_check_name(client, "lock", names[i]) != 0) return DLOCK_EINVAL;
    dlock_multilock *ml = calloc(1, sizeof(*ml));
    if (!ml) return DLOCK_ENOMEM;
    ml->c = client;
    ml->n = n;
    ml->keys = calloc(n, sizeof(char *));
    ml->chans = calloc(n, sizeof(char *));
    ml->sharded = calloc(n, sizeof(bool));
    int rc = ml->keys && ml->chans && ml->sharded ? fill_keys(ml, names) : DLOCK_ENOMEM;
    if (rc == 0) rc = dlock__fam_owner(client, ml->owner);
    if (rc == 0) rc = dlock__waitctl_init(&ml->ctl);
    if (rc) {
        ml_destroy(ml);
        return rc;
    }
    atomic_init(&ml->count, 0);
    static const dlock__hold_ops ops = {.renew = ml_renew, .lost = ml_lost, .describe = ml_describe};
    if (dlock__hold_init(&ml->hold, client, &ops) != 0) {
        dlock__waitctl_destroy(&ml->ctl);
        ml_destroy(ml);
        return DLOCK_ENOMEM;
    }
    *ml_out = ml;
    return 0;
}

DLOCK_API bool dlock_multilock_is_atomic(const dlock_multilock *ml)
{
    return ml && ml->atomic;
}

/* ---- scripts over a range of keys ------------------------------------------- */

/* Runs s over keys [from, from+cnt) and decodes its reply. */
static int run_range(dlock_multilock *ml, const dlock__script *s, size_t from, size_t cnt,
                     int nargs, const char *const *args, long long *code_out, long long *val_out,
                     long long *val2_out)
{
    return dlock__fam_eval(ml->c, s, (int)cnt, (const char *const *)&ml->keys[from], nargs, args,
                           code_out, val_out, val2_out);
}

/* multi_release (lease NULL) or multi_renew over [from, from+cnt): ARGV is
 * owner + each key's publish command, or owner + lease. */
static int leave_or_renew(dlock_multilock *ml, const char *lease, size_t from, size_t cnt,
                          long long *missing_out)
{
    const char *args[1 + DLOCK_MULTILOCK_MAX];
    args[0] = ml->owner;
    args[1] = lease;
    for (size_t i = 0; !lease && i < cnt; i++) args[1 + i] = dlock__pub_cmd(ml->sharded[from + i]);
    return run_range(ml, lease ? &dlock__script_multi_renew : &dlock__script_multi_release, from, cnt,
                     lease ? 2 : (int)(1 + cnt),
                     args, missing_out, NULL, NULL);
}

/* Release (lease NULL) or renew over all keys, by slot path (one script, or
 * one per key); *missing_out = keys not held. */
static int run_all(dlock_multilock *ml, const char *lease, long long *missing_out)
{
    if (ml->atomic) return leave_or_renew(ml, lease, 0, ml->n, missing_out);
    long long missing = 0;
    int first_rc = 0;
    for (size_t i = 0; i < ml->n; i++) {
        long long m = 0;
        int rc = leave_or_renew(ml, lease, i, 1, &m);
        if (rc && !first_rc) first_rc = rc;
        missing += rc ? 0 : m;
    }
    *missing_out = missing;
    return first_rc;
}

static int ml_renew(dlock__hold *r, int64_t lease_ms)
{
    dlock_multilock *ml = ML_OF_HOLD(r);
    char lease[24];
    dlock__fam_fmt_i64(lease, sizeof(lease), lease_ms);
    long long missing = 0;
    int rc = run_all(ml, lease, &missing);
    if (rc) return rc;
    return missing == 0 ? 0 : DLOCK_ELOST;
}

/* ---- lock / unlock ------------------------------------------------------------ */

typedef struct ml_try {
    dlock_multilock *ml;
    char lease[24];
    int64_t sent_ms; /* when the last attempt began: its first name's lease counts from then */
} ml_try;

static void rollback(dlock_multilock *ml, size_t taken)
{
    for (size_t i = 0; i < taken; i++) {
        long long m = 0;
        int rc = leave_or_renew(ml, NULL, i, 1, &m);
        if (rc)
            dlock__log(ml->c, DLOCK_LOG_WARN, "multi-lock: rollback of %s failed (%s); it expires",
                       ml->keys[i], dlock_strerror(rc));
    }
}

static int ml_attempt(void *ctx, int64_t *hint_ms)
{
    ml_try *t = ctx;
    dlock_multilock *ml = t->ml;
    const char *args[2] = {ml->owner, t->lease};
    long long code = 0, idx = 0, pttl = 0;
    t->sent_ms = dlock__now_ms();
    if (ml->atomic) {
        int rc = run_range(ml, &dlock__script_multi_acquire, 0, ml->n, 2, args, &code, &idx, &pttl);
        if (rc) return rc;
        if (code == 1) return 1;
        ml->busy = idx >= 1 && (size_t)idx <= ml->n ? (size_t)idx - 1 : 0;
        *hint_ms = pttl;
        return 0;
    }
    for (size_t i = 0; i < ml->n; i++) {
        int rc = run_range(ml, &dlock__script_multi_acquire, i, 1, 2, args, &code, &idx, &pttl);
        if (rc || code != 1) {
            rollback(ml, i);
            if (rc) return rc;
            ml->busy = i;
            *hint_ms = pttl;
            return 0;
        }
    }
    return 1;
}

static const char *ml_channel(void *ctx, bool *sharded_out)
{
    dlock_multilock *ml = ((ml_try *)ctx)->ml;
    *sharded_out = ml->sharded[ml->busy];
    return ml->chans[ml->busy];
}

static bool sync_lost(dlock_multilock *ml)
{
    if (!dlock__hold_take_lost(&ml->hold)) return false;
    atomic_store(&ml->count, 0);
    return true;
}

DLOCK_API int dlock_multilock_lock(dlock_multilock *ml, int64_t wait_ms, int64_t lease_ms)
{
    if (!ml || wait_ms < -1 || lease_ms < 0) return DLOCK_EINVAL;
    sync_lost(ml);
    bool first = atomic_load(&ml->count) == 0;
    if (!first) lease_ms = ml->lease_ms; /* a re-entry keeps the first lease mode */
    ml_try t = {.ml = ml};
    int64_t lease = lease_ms ? lease_ms : dlock__client_watchdog_ms(ml->c);
    dlock__fam_fmt_i64(t.lease, sizeof(t.lease), lease);
    dlock__wait_spec sp = {.c = ml->c, .ctl = &ml->ctl, .attempt = ml_attempt,
                           .channel = ml_channel, .ctx = &t, .wait_ms = wait_ms,
                           .max_nap_ms = 5000};
    int rc = dlock__fam_wait(&sp);
    dlock__metrics_acquire(ml->c, rc);
    if (rc) return rc;
    atomic_fetch_add(&ml->count, 1);
    if (first) {
        ml->lease_ms = lease_ms;
        dlock__hold_begin(&ml->hold, lease_ms == 0, t.sent_ms, lease);
    }
    return 0;
}

DLOCK_API int dlock_multilock_unlock(dlock_multilock *ml)
{
    if (!ml) return DLOCK_EINVAL;
    if (sync_lost(ml)) return DLOCK_ELOST;
    if (atomic_load(&ml->count) == 0) return DLOCK_ENOTHELD;
    long long missing = 0;
    int rc = run_all(ml, NULL, &missing);
    if (rc) return rc;
    if (missing > 0) {
        atomic_store(&ml->count, 0);
        dlock__metrics_lost(ml->c);
    } else {
        atomic_fetch_sub(&ml->count, 1);
    }
    if (atomic_load(&ml->count) == 0) dlock__hold_end(&ml->hold, true);
    return missing > 0 ? DLOCK_ELOST : 0;
}

/* The least of the server's counts for this handle's owner over every name
 * (0 when any name is not held by it): one round trip per name. */
DLOCK_API int dlock_multilock_hold_count(dlock_multilock *ml, int64_t *count_out)
{
    if (count_out) *count_out = 0;
    if (!ml || !count_out) return DLOCK_EINVAL;
    int64_t least = INT64_MAX;
    for (size_t i = 0; i < ml->n && least > 0; i++) {
        int64_t n = 0;
        int rc = dlock__fam_hcount(ml->c, ml->keys[i], ml->owner, &n);
        if (rc) return rc;
        if (n < least) least = n;
    }
    *count_out = least == INT64_MAX ? 0 : least;
    return 0;
}

DLOCK_API int64_t dlock_multilock_validity_ms(const dlock_multilock *ml)
{
    return ml ? dlock__hold_validity_ms(&((dlock_multilock *)ml)->hold) : 0;
}

DLOCK_API void dlock_multilock_set_on_lost(dlock_multilock *ml, dlock_multilock_lost_fn fn, void *ud)
{
    if (ml) dlock__hold_set_user_lost(&ml->hold, (dlock__any_fn)fn, ud);
}

DLOCK_API void dlock_multilock_cancel(dlock_multilock *ml)
{
    if (ml) dlock__waitctl_cancel(&ml->ctl);
}

DLOCK_API void dlock_multilock_free(dlock_multilock *ml)
{
    if (!ml) return;
    dlock__hold_free(&ml->hold, "multi-lock");
    dlock__waitctl_destroy(&ml->ctl);
    ml_destroy(ml);
}
