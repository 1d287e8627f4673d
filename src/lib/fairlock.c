/* fairlock.c: FIFO reentrant lock (see dlock/fairlock.h).
 *
 * Key layout (one hash tag), for key = prefix + name:
 *   key                  hash {owner: count}, PEXPIRE = lease (the
 *                        reentrant lock's layout)
 *   {key}:fair:q         list of waiting owners, arrival order
 *   {key}:fair:qt        zset waiting owner -> heartbeat deadline (ms,
 *                        server clock)
 *   {key}:fair:wake:<o>  channel of waiter o: the release / purge that
 *                        makes o the head publishes here (wake-one)
 * Scripts: lua/fair_*.lua. A waiter re-runs fair_acquire every third of
 * waiter_ttl (its heartbeat); every run purges waiters whose deadline
 * passed. Invariant: a free lock is taken only by the queue's head (or by
 * anyone when the queue is empty).
 */
#include "dlock/fairlock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "family.h"
#include "hold.h"
#include "opts_read.h"
#include "scripts.h"
#include "slot.h"
#include "util.h"

/* lua/<name>.lua, embedded with its SHA1 at build time (script.h) */
extern const dlock__script dlock__script_fair_acquire;
extern const dlock__script dlock__script_fair_release;
extern const dlock__script dlock__script_fair_leave;

enum { K_LOCK, K_Q, K_QT, K_WAKE, K_N };

struct dlock_fairlock {
    dlock_client *c;
    char keys[K_N][DLOCK__KEY_MAX]; /* K_WAKE: channel prefix */
    char chan[DLOCK__KEY_MAX];      /* prefix + owner */
    char owner[DLOCK__FAM_OWNER_LEN];
    bool sharded;                   /* every waiter's channel (see fl_sharded) */
    int64_t waiter_ttl_ms;
    int64_t lease_ms; /* of the first acquisition (handle thread only) */
    _Atomic int64_t count;
    dlock__hold hold;
    dlock__waitctl ctl;
};

#define FL_OF_HOLD(h) ((dlock_fairlock *)(void *)((char *)(h) - offsetof(dlock_fairlock, hold)))

DLOCK_API void dlock_fairlock_options_init(dlock_fairlock_options *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof(*opts));
    opts->size = sizeof(*opts);
    opts->waiter_ttl_ms = 3000;
}

static int fl_renew(dlock__hold *r, int64_t lease_ms)
{
    dlock_fairlock *fl = FL_OF_HOLD(r);
    const char *keys[1] = {fl->keys[K_LOCK]};
    long long ok = 0;
    int rc = dlock__fam_renew(fl->c, &dlock__script_rlock_renew, 1, keys, fl->owner, lease_ms, &ok);
    if (rc) return rc;
    return ok == 1 ? 0 : DLOCK_ELOST;
}

static void fl_describe(const dlock__hold *h, char *buf, size_t len)
{
    const dlock_fairlock *fl = FL_OF_HOLD(h);
    snprintf(buf, len, "fair lock %s (count %lld)", fl->keys[K_LOCK],
             (long long)atomic_load(&((dlock_fairlock *)fl)->count));
}

/* Waiter channels are prefix + owner and a release publishes on the head
 * waiter's, so the choice must not depend on the owner: sharded only when
 * the prefix carries key's tag (then every prefix + owner is in key's
 * slot). An untaggable name's prefix ("K#n:fair:wake:") is hashed whole,
 * so its channels use plain pub/sub. */
static bool fl_sharded(const dlock_client *c, const char *key, const char *prefix)
{
    size_t off = 0, len = 0, n = strlen(prefix);
    dlock__key_hashed_part(prefix, n, &off, &len);
    return len != n && dlock__client_sharded(c, key, prefix);
}

static void fl_lost(dlock__hold *h, int reason)
{
    void *ud = NULL;
    dlock_fairlock_lost_fn fn = (dlock_fairlock_lost_fn)dlock__hold_user_lost(h, &ud);
    if (fn) fn(FL_OF_HOLD(h), reason, ud);
}

DLOCK_API int dlock_fairlock_new(dlock_client *client, const char *name,
                                 const dlock_fairlock_options *opts, dlock_fairlock **fl_out)
{
    if (!client || !fl_out) return DLOCK_EINVAL;
    *fl_out = NULL;
    int offered = dlock__client_offers(client, DLOCK__OBJ_FAIRLOCK, "fair lock");
    if (offered) return offered;
    dlock_fairlock_options o;
    dlock_fairlock_options_init(&o);
    if (opts && dlock__opts_read(&o, sizeof(o), DLOCK__SIZE_TO(dlock_fairlock_options, waiter_ttl_ms), opts)) return DLOCK_EINVAL;
    if (o.waiter_ttl_ms < 30) return DLOCK_EINVAL;
    dlock_fairlock *fl = calloc(1, sizeof(*fl));
    if (!fl) return DLOCK_ENOMEM;
    static const char *const sfx[K_N - 1] = {":fair:q", ":fair:qt", ":fair:wake:"};
    int rc = dlock__fam_keys(client, name, K_N - 1, sfx, fl->keys);
    if (rc == 0) rc = dlock__fam_owner(client, fl->owner);
    if (rc == 0) {
        int n = snprintf(fl->chan, sizeof(fl->chan), "%s%s", fl->keys[K_WAKE], fl->owner);
        if (n < 0 || (size_t)n >= sizeof(fl->chan)) rc = DLOCK_EINVAL;
    }
    if (rc == 0) rc = dlock__waitctl_init(&fl->ctl);
    if (rc) {
        free(fl);
        return rc;
    }
    fl->c = client;
    fl->sharded = fl_sharded(client, fl->keys[K_LOCK], fl->keys[K_WAKE]);
    fl->waiter_ttl_ms = o.waiter_ttl_ms;
    atomic_init(&fl->count, 0);
    static const dlock__hold_ops ops = {.renew = fl_renew, .lost = fl_lost, .describe = fl_describe};
    if (dlock__hold_init(&fl->hold, client, &ops) != 0) {
        dlock__waitctl_destroy(&fl->ctl);
        free(fl);
        return DLOCK_ENOMEM;
    }
    *fl_out = fl;
    return 0;
}

static bool sync_lost(dlock_fairlock *fl)
{
    if (!dlock__hold_take_lost(&fl->hold)) return false;
    atomic_store(&fl->count, 0);
    return true;
}

typedef struct fl_try {
    dlock_fairlock *fl;
    char lease[24];
    char ttl[24];
    int64_t sent_ms; /* when the last attempt was sent */
} fl_try;

static int fl_attempt(void *ctx, int64_t *hint_ms)
{
    fl_try *t = ctx;
    dlock_fairlock *fl = t->fl;
    const char *keys[3] = {fl->keys[K_LOCK], fl->keys[K_Q], fl->keys[K_QT]};
    const char *args[5] = {fl->owner, t->lease, t->ttl, fl->keys[K_WAKE], dlock__pub_cmd(fl->sharded)};
    long long code = 0, val = 0;
    t->sent_ms = dlock__now_ms();
    int rc = dlock__fam_eval(fl->c, &dlock__script_fair_acquire, 3, keys, 5, args, &code, &val, NULL);
    if (rc) return rc;
    *hint_ms = val;
    return code == 1 ? 1 : 0;
}

static const char *fl_channel(void *ctx, bool *sharded_out)
{
    *sharded_out = ((fl_try *)ctx)->fl->sharded;
    return ((fl_try *)ctx)->fl->chan;
}

static void leave_queue(dlock_fairlock *fl)
{
    const char *keys[3] = {fl->keys[K_LOCK], fl->keys[K_Q], fl->keys[K_QT]};
    const char *args[3] = {fl->owner, fl->keys[K_WAKE], dlock__pub_cmd(fl->sharded)};
    long long was = 0;
    int rc = dlock__fam_eval(fl->c, &dlock__script_fair_leave, 3, keys, 3, args, &was, NULL, NULL);
    if (rc)
        dlock__log(fl->c, DLOCK_LOG_WARN, "fair lock %s: leaving the queue failed (%s); purged after %lld ms",
                   fl->keys[K_LOCK], dlock_strerror(rc), (long long)fl->waiter_ttl_ms);
}

DLOCK_API int dlock_fairlock_lock(dlock_fairlock *fl, int64_t wait_ms, int64_t lease_ms)
{
    if (!fl || wait_ms < -1 || lease_ms < 0) return DLOCK_EINVAL;
    sync_lost(fl);
    bool first = atomic_load(&fl->count) == 0;
    if (!first) lease_ms = fl->lease_ms; /* a re-entry keeps the first lease mode */
    fl_try t = {.fl = fl};
    int64_t lease = lease_ms ? lease_ms : dlock__client_watchdog_ms(fl->c);
    dlock__fam_fmt_i64(t.lease, sizeof(t.lease), lease);
    dlock__fam_fmt_i64(t.ttl, sizeof(t.ttl), wait_ms == 0 ? 0 : fl->waiter_ttl_ms);
    dlock__wait_spec sp = {.c = fl->c, .ctl = &fl->ctl, .attempt = fl_attempt,
                           .channel = fl_channel, .ctx = &t, .wait_ms = wait_ms,
                           .max_nap_ms = fl->waiter_ttl_ms / 3};
    int rc = dlock__fam_wait(&sp);
    dlock__metrics_acquire(fl->c, rc);
    if (rc) {
        if (wait_ms != 0) leave_queue(fl);
        return rc;
    }
    atomic_fetch_add(&fl->count, 1);
    if (first) {
        fl->lease_ms = lease_ms;
        dlock__hold_begin(&fl->hold, lease_ms == 0, t.sent_ms, lease);
    }
    return 0;
}

DLOCK_API int dlock_fairlock_unlock(dlock_fairlock *fl)
{
    if (!fl) return DLOCK_EINVAL;
    if (sync_lost(fl)) return DLOCK_ELOST;
    if (atomic_load(&fl->count) == 0) return DLOCK_ENOTHELD;
    const char *keys[3] = {fl->keys[K_LOCK], fl->keys[K_Q], fl->keys[K_QT]};
    const char *args[3] = {fl->owner, fl->keys[K_WAKE], dlock__pub_cmd(fl->sharded)};
    long long left = 0;
    int rc = dlock__fam_eval(fl->c, &dlock__script_fair_release, 3, keys, 3, args, &left, NULL, NULL);
    if (rc) return rc;
    if (left < 0) {
        atomic_store(&fl->count, 0);
        dlock__metrics_lost(fl->c);
    } else {
        atomic_fetch_sub(&fl->count, 1);
    }
    if (atomic_load(&fl->count) == 0) dlock__hold_end(&fl->hold, true);
    return left < 0 ? DLOCK_ELOST : 0;
}

/* The server's count for this handle's owner: the lock hash {owner:
 * count} (any other type of value, or none: 0). */
DLOCK_API int dlock_fairlock_hold_count(dlock_fairlock *fl, int64_t *count_out)
{
    if (count_out) *count_out = 0;
    if (!fl || !count_out) return DLOCK_EINVAL;
    return dlock__fam_hcount(fl->c, fl->keys[K_LOCK], fl->owner, count_out);
}

DLOCK_API int dlock_fairlock_queue_length(dlock_fairlock *fl, int64_t *len_out)
{
    if (!fl || !len_out) return DLOCK_EINVAL;
    const char *argv[2] = {"LLEN", fl->keys[K_Q]};
    dlock__reply *r = NULL;
    int rc = dlock__client_cmd(fl->c, 2, argv, NULL, &r);
    if (rc == 0 && dlock__reply_kind(r) != DLOCK__R_INTEGER) rc = DLOCK_ESERVER;
    if (rc == 0) *len_out = dlock__reply_int(r);
    dlock__reply_free(r);
    return rc;
}

DLOCK_API int64_t dlock_fairlock_validity_ms(const dlock_fairlock *fl)
{
    return fl ? dlock__hold_validity_ms(&((dlock_fairlock *)fl)->hold) : 0;
}

DLOCK_API void dlock_fairlock_set_on_lost(dlock_fairlock *fl, dlock_fairlock_lost_fn fn, void *ud)
{
    if (fl) dlock__hold_set_user_lost(&fl->hold, (dlock__any_fn)fn, ud);
}

DLOCK_API void dlock_fairlock_cancel(dlock_fairlock *fl)
{
    if (fl) dlock__waitctl_cancel(&fl->ctl);
}

DLOCK_API void dlock_fairlock_free(dlock_fairlock *fl)
{
    if (!fl) return;
    dlock__hold_free(&fl->hold, "fair lock");
    dlock__waitctl_destroy(&fl->ctl);
    free(fl);
}
