/* rwlock.c: distributed read-write lock (see dlock/rwlock.h).
 *
 * Key layout (one hash tag), for key = prefix + name:
 *   {key}:rw:w   hash {owner, n}: the writer and its re-entry count; PEXPIRE
 *                is the writer's lease
 *   {key}:rw:r   zset reader owner -> lease expiry (ms, server clock)
 *   {key}:rw:rn  hash reader owner -> re-entry count
 *   {key}:rw:ww  zset waiting writer -> intent expiry (ms, server clock)
 *   {key}:rw:ch  channel: a message when a side is released
 * Scripts: lua/rw_*.lua. Each acquire purges expired readers and intents
 * first, so a crashed reader blocks writers for at most its lease and a
 * crashed waiting writer blocks readers for at most writer_intent_ms.
 * Invariant: the writer hash exists only when no other owner is a live
 * reader, and a reader is admitted only when no other owner writes.
 */
#include "dlock/rwlock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "family.h"
#include "hold.h"
#include "opts_read.h"
#include "util.h"

/* lua/<name>.lua, embedded with its SHA1 at build time (script.h) */
extern const dlock__script dlock__script_rw_read_acquire;
extern const dlock__script dlock__script_rw_write_acquire;
extern const dlock__script dlock__script_rw_release;
extern const dlock__script dlock__script_rw_renew;
extern const dlock__script dlock__script_rw_withdraw;

enum { K_BASE, K_W, K_R, K_RN, K_WW, K_CHAN, K_N };

struct dlock_rwlock {
    dlock_client *c;
    char keys[K_N][DLOCK__KEY_MAX];
    char owner[DLOCK__FAM_OWNER_LEN];
    bool sharded; /* K_CHAN (dlock__client_sharded) */
    int64_t lease_ms;
    int64_t intent_ms;
    _Atomic int64_t rcount;
    _Atomic int64_t wcount;
    dlock__hold hold;
    dlock__waitctl ctl;
};

#define RW_OF_HOLD(h) ((dlock_rwlock *)(void *)((char *)(h) - offsetof(dlock_rwlock, hold)))

DLOCK_API void dlock_rwlock_options_init(dlock_rwlock_options *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof(*opts));
    opts->size = sizeof(*opts);
    opts->writer_intent_ms = 1000;
}

static int rw_renew_cb(dlock__hold *r, int64_t lease_ms)
{
    dlock_rwlock *rw = RW_OF_HOLD(r);
    const char *keys[2] = {rw->keys[K_W], rw->keys[K_R]};
    long long mask = 0;
    int rc = dlock__fam_renew(rw->c, &dlock__script_rw_renew, 2, keys, rw->owner, lease_ms, &mask);
    if (rc) return rc;
    long long want = (atomic_load(&rw->wcount) > 0 ? 1 : 0) | (atomic_load(&rw->rcount) > 0 ? 2 : 0);
    return (mask & want) == want ? 0 : DLOCK_ELOST;
}

static void rw_lost(dlock__hold *h, int reason)
{
    void *ud = NULL;
    dlock_rwlock_lost_fn fn = (dlock_rwlock_lost_fn)dlock__hold_user_lost(h, &ud);
    if (fn) fn(RW_OF_HOLD(h), reason, ud);
}

static void rw_describe(const dlock__hold *h, char *buf, size_t len)
{
    const dlock_rwlock *rw = RW_OF_HOLD(h);
    snprintf(buf, len, "rwlock %s (read %lld, write %lld)", rw->keys[K_BASE],
             (long long)atomic_load(&rw->rcount), (long long)atomic_load(&rw->wcount));
}

DLOCK_API int dlock_rwlock_new(dlock_client *client, const char *name,
                               const dlock_rwlock_options *opts, dlock_rwlock **rw_out)
{
    if (!client || !rw_out) return DLOCK_EINVAL;
    *rw_out = NULL;
    int offered = dlock__client_offers(client, DLOCK__OBJ_RWLOCK, "read-write lock");
    if (offered) return offered;
    dlock_rwlock_options o;
    dlock_rwlock_options_init(&o);
    if (opts && dlock__opts_read(&o, sizeof(o), DLOCK__SIZE_TO(dlock_rwlock_options, writer_intent_ms), opts)) return DLOCK_EINVAL;
    if (o.lease_ms < 0 || o.writer_intent_ms < 0) return DLOCK_EINVAL;
    dlock_rwlock *rw = calloc(1, sizeof(*rw));
    if (!rw) return DLOCK_ENOMEM;
    static const char *const sfx[K_N - 1] = {":rw:w", ":rw:r", ":rw:rn", ":rw:ww", ":rw:ch"};
    int rc = dlock__fam_keys(client, name, K_N - 1, sfx, rw->keys);
    if (rc == 0) rc = dlock__fam_owner(client, rw->owner);
    if (rc == 0) rc = dlock__waitctl_init(&rw->ctl);
    if (rc) {
        free(rw);
        return rc;
    }
    rw->c = client;
    rw->sharded = dlock__client_sharded(client, rw->keys[K_BASE], rw->keys[K_CHAN]);
    rw->lease_ms = o.lease_ms;
    rw->intent_ms = o.writer_intent_ms;
    atomic_init(&rw->rcount, 0);
    atomic_init(&rw->wcount, 0);
    static const dlock__hold_ops ops = {.renew = rw_renew_cb, .lost = rw_lost, .describe = rw_describe};
    if (dlock__hold_init(&rw->hold, client, &ops) != 0) {
        dlock__waitctl_destroy(&rw->ctl);
        free(rw);
        return DLOCK_ENOMEM;
    }
    *rw_out = rw;
    return 0;
}

/* A loss seen by the watchdog drops both sides locally. */
static bool sync_lost(dlock_rwlock *rw)
{
    if (!dlock__hold_take_lost(&rw->hold)) return false;
    atomic_store(&rw->rcount, 0);
    atomic_store(&rw->wcount, 0);
    return true;
}

typedef struct rw_try {
    dlock_rwlock *rw;
    bool write;
    char lease[24];
    char intent[24];
    int64_t sent_ms; /* when the last attempt was sent */
} rw_try;

static int rw_attempt(void *ctx, int64_t *hint_ms)
{
    rw_try *t = ctx;
    dlock_rwlock *rw = t->rw;
    const char *keys[4] = {rw->keys[K_W], rw->keys[K_R], rw->keys[K_RN], rw->keys[K_WW]};
    const char *args[3] = {rw->owner, t->lease, t->intent};
    long long code = 0, val = 0;
    const dlock__script *s = t->write ? &dlock__script_rw_write_acquire : &dlock__script_rw_read_acquire;
    t->sent_ms = dlock__now_ms();
    int rc = dlock__fam_eval(rw->c, s, 4, keys, t->write ? 3 : 2, args, &code, &val, NULL);
    if (rc) return rc;
    if (code == -1) return DLOCK_EUPGRADE;
    *hint_ms = val;
    return code == 1 ? 1 : 0;
}

static const char *rw_channel(void *ctx, bool *sharded_out)
{
    *sharded_out = ((rw_try *)ctx)->rw->sharded;
    return ((rw_try *)ctx)->rw->keys[K_CHAN];
}

/* A writer that stops waiting withdraws its intent and lets readers in. */
static void withdraw_intent(dlock_rwlock *rw)
{
    const char *keys[1] = {rw->keys[K_WW]};
    const char *args[3] = {rw->owner, rw->keys[K_CHAN], dlock__pub_cmd(rw->sharded)};
    long long was = 0;
    dlock__fam_eval(rw->c, &dlock__script_rw_withdraw, 1, keys, 3, args, &was, NULL, NULL);
}

static int acquire(dlock_rwlock *rw, bool write, int64_t wait_ms)
{
    if (!rw || wait_ms < -1) return DLOCK_EINVAL;
    sync_lost(rw);
    if (write && atomic_load(&rw->rcount) > 0 && atomic_load(&rw->wcount) == 0)
        return DLOCK_EUPGRADE;
    rw_try t = {.rw = rw, .write = write};
    int64_t lease = rw->lease_ms ? rw->lease_ms : dlock__client_watchdog_ms(rw->c);
    dlock__fam_fmt_i64(t.lease, sizeof(t.lease), lease);
    dlock__fam_fmt_i64(t.intent, sizeof(t.intent), wait_ms == 0 ? 0 : rw->intent_ms);
    int64_t nap = rw->intent_ms > 0 ? rw->intent_ms / 3 : 1000;
    dlock__wait_spec sp = {.c = rw->c, .ctl = &rw->ctl, .attempt = rw_attempt,
                           .channel = rw_channel, .ctx = &t, .wait_ms = wait_ms,
                           .max_nap_ms = nap < 1 ? 1 : nap};
    int rc = dlock__fam_wait(&sp);
    dlock__metrics_acquire(rw->c, rc);
    if (write && wait_ms != 0 && rw->intent_ms > 0 && rc != 0 && rc != DLOCK_EUPGRADE)
        withdraw_intent(rw);
    if (rc) return rc;
    atomic_fetch_add(write ? &rw->wcount : &rw->rcount, 1);
    /* a side taken while holding the other keeps the earlier deadline */
    dlock__hold_begin(&rw->hold, rw->lease_ms == 0, t.sent_ms, lease);
    return 0;
}

DLOCK_API int dlock_rwlock_read_lock(dlock_rwlock *rw, int64_t wait_ms)
{
    return acquire(rw, false, wait_ms);
}

DLOCK_API int dlock_rwlock_write_lock(dlock_rwlock *rw, int64_t wait_ms)
{
    return acquire(rw, true, wait_ms);
}

static int release(dlock_rwlock *rw, bool write)
{
    if (!rw) return DLOCK_EINVAL;
    if (sync_lost(rw)) return DLOCK_ELOST;
    _Atomic int64_t *cnt = write ? &rw->wcount : &rw->rcount;
    if (atomic_load(cnt) == 0) return DLOCK_ENOTHELD;
    const char *keys[3] = {rw->keys[K_W], rw->keys[K_R], rw->keys[K_RN]};
    const char *args[4] = {rw->owner, write ? "w" : "r", rw->keys[K_CHAN], dlock__pub_cmd(rw->sharded)};
    long long left = 0;
    int rc = dlock__fam_eval(rw->c, &dlock__script_rw_release, 3, keys, 4, args, &left, NULL, NULL);
    if (rc) return rc;
    if (left < 0) {
        atomic_store(cnt, 0);
        dlock__metrics_lost(rw->c);
    } else {
        atomic_fetch_sub(cnt, 1);
    }
    if (atomic_load(&rw->rcount) == 0 && atomic_load(&rw->wcount) == 0)
        dlock__hold_end(&rw->hold, true);
    return left < 0 ? DLOCK_ELOST : 0;
}

DLOCK_API int dlock_rwlock_read_unlock(dlock_rwlock *rw)
{
    return release(rw, false);
}

DLOCK_API int dlock_rwlock_write_unlock(dlock_rwlock *rw)
{
    return release(rw, true);
}

/* A count is believed only while the hold is valid (dlock.h's rule). */
static int64_t valid_count(const dlock_rwlock *rw, bool write)
{
    if (!rw) return 0;
    dlock_rwlock *w = (dlock_rwlock *)rw;
    if (!dlock__hold_valid(&w->hold)) return 0;
    return atomic_load(write ? &w->wcount : &w->rcount);
}

DLOCK_API int64_t dlock_rwlock_read_count(const dlock_rwlock *rw)
{
    return valid_count(rw, false);
}

DLOCK_API int64_t dlock_rwlock_write_count(const dlock_rwlock *rw)
{
    return valid_count(rw, true);
}

DLOCK_API int64_t dlock_rwlock_validity_ms(const dlock_rwlock *rw)
{
    return rw ? dlock__hold_validity_ms(&((dlock_rwlock *)rw)->hold) : 0;
}

DLOCK_API void dlock_rwlock_set_on_lost(dlock_rwlock *rw, dlock_rwlock_lost_fn fn, void *ud)
{
    if (rw) dlock__hold_set_user_lost(&rw->hold, (dlock__any_fn)fn, ud);
}

DLOCK_API void dlock_rwlock_cancel(dlock_rwlock *rw)
{
    if (rw) dlock__waitctl_cancel(&rw->ctl);
}

DLOCK_API void dlock_rwlock_free(dlock_rwlock *rw)
{
    if (!rw) return;
    dlock__hold_free(&rw->hold, "rwlock");
    dlock__waitctl_destroy(&rw->ctl);
    free(rw);
}
