/* semaphore.c: bounded owner-tracked semaphore and expirable permits (see
 * dlock/semaphore.h).
 *
 * Key layout (one hash tag, so one Cluster slot), for key = prefix + name:
 *   {key}:sem      hash  {limit: N, used: permits taken}
 *   {key}:sem:exp  zset  holder id -> expiry (ms, server clock)
 *   {key}:sem:cnt  hash  holder id -> permits held
 *   {key}:sem:ch   channel: a message whenever permits come back
 * A handle's holder id is "<client id>:<16 hex>"; an expirable permit's id is
 * 32 random hex digits with count 1. Scripts: lua/sem_*.lua. Every script
 * that takes permits first purges expired holders, so
 *   used == sum(cnt) <= limit   holds after every script,
 * and a crashed holder's permits return within its lease.
 */
#include "dlock/semaphore.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "family.h"
#include "hold.h"
#include "opts_read.h"
#include "util.h"

/* lua/<name>.lua, embedded with its SHA1 at build time (script.h) */
extern const dlock__script dlock__script_sem_acquire;
extern const dlock__script dlock__script_sem_release;
extern const dlock__script dlock__script_sem_extend;
extern const dlock__script dlock__script_sem_available;

enum { K_BASE, K_META, K_EXP, K_CNT, K_CHAN, K_N };

struct dlock_semaphore {
    dlock_client *c;
    char keys[K_N][DLOCK__KEY_MAX];
    char owner[DLOCK__FAM_OWNER_LEN];
    char limit_s[24];
    bool sharded; /* K_CHAN (dlock__client_sharded) */
    int64_t limit;
    int64_t lease_ms;      /* 0: watchdog */
    _Atomic int64_t held;  /* permits of this handle (read by the watchdog) */
    dlock__hold hold;
    dlock__waitctl ctl;
};

#define SEM_OF_HOLD(h) ((dlock_semaphore *)(void *)((char *)(h) - offsetof(dlock_semaphore, hold)))

DLOCK_API void dlock_semaphore_options_init(dlock_semaphore_options *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof(*opts));
    opts->size = sizeof(*opts);
    opts->permits = 1;
}

static int sem_renew(dlock__hold *r, int64_t lease_ms)
{
    dlock_semaphore *s = SEM_OF_HOLD(r);
    const char *keys[1] = {s->keys[K_EXP]};
    long long code = 0;
    int rc = dlock__fam_renew(s->c, &dlock__script_sem_extend, 1, keys, s->owner, lease_ms, &code);
    if (rc) return rc;
    return code == 1 ? 0 : DLOCK_ELOST;
}

static void sem_lost(dlock__hold *h, int reason)
{
    void *ud = NULL;
    dlock_semaphore_lost_fn fn = (dlock_semaphore_lost_fn)dlock__hold_user_lost(h, &ud);
    if (fn) fn(SEM_OF_HOLD(h), reason, ud);
}

static void sem_describe(const dlock__hold *h, char *buf, size_t len)
{
    const dlock_semaphore *s = SEM_OF_HOLD(h);
    snprintf(buf, len, "semaphore %s (%lld permits)", s->keys[K_BASE],
             (long long)atomic_load(&((dlock_semaphore *)s)->held));
}

DLOCK_API int dlock_semaphore_new(dlock_client *client, const char *name,
                                  const dlock_semaphore_options *opts, dlock_semaphore **sem_out)
{
    if (!client || !sem_out) return DLOCK_EINVAL;
    *sem_out = NULL;
    int offered = dlock__client_offers(client, DLOCK__OBJ_SEMAPHORE, "semaphore");
    if (offered) return offered;
    dlock_semaphore_options o;
    dlock_semaphore_options_init(&o);
    if (opts && dlock__opts_read(&o, sizeof(o), DLOCK__SIZE_TO(dlock_semaphore_options, lease_ms), opts)) return DLOCK_EINVAL;
    if (o.permits < 1 || o.permits > 1000000000 || o.lease_ms < 0) return DLOCK_EINVAL;
    dlock_semaphore *s = calloc(1, sizeof(*s));
    if (!s) return DLOCK_ENOMEM;
    static const char *const sfx[K_N - 1] = {":sem", ":sem:exp", ":sem:cnt", ":sem:ch"};
    int rc = dlock__fam_keys(client, name, K_N - 1, sfx, s->keys);
    if (rc == 0) rc = dlock__fam_owner(client, s->owner);
    if (rc == 0) rc = dlock__waitctl_init(&s->ctl);
    if (rc) {
        free(s);
        return rc;
    }
    s->c = client;
    s->sharded = dlock__client_sharded(client, s->keys[K_BASE], s->keys[K_CHAN]);
    s->limit = o.permits;
    s->lease_ms = o.lease_ms;
    dlock__fam_fmt_i64(s->limit_s, sizeof(s->limit_s), o.permits);
    atomic_init(&s->held, 0);
    static const dlock__hold_ops ops = {.renew = sem_renew, .lost = sem_lost, .describe = sem_describe};
    if (dlock__hold_init(&s->hold, client, &ops) != 0) {
        dlock__waitctl_destroy(&s->ctl);
        free(s);
        return DLOCK_ENOMEM;
    }
    *sem_out = s;
    return 0;
}

/* ---- taking permits ---------------------------------------------------- */

typedef struct sem_try {
    dlock_semaphore *s;
    const char *id;
    char k[24];
    char lease[24];
    int64_t sent_ms; /* when the last attempt was sent */
} sem_try;

static int sem_attempt(void *ctx, int64_t *hint_ms)
{
    sem_try *t = ctx;
    dlock_semaphore *s = t->s;
    const char *keys[3] = {s->keys[K_META], s->keys[K_EXP], s->keys[K_CNT]};
    const char *args[6] = {t->id, t->k, t->lease, s->limit_s, s->keys[K_CHAN], dlock__pub_cmd(s->sharded)};
    long long code = 0, val = 0;
    t->sent_ms = dlock__now_ms();
    int rc = dlock__fam_eval(s->c, &dlock__script_sem_acquire, 3, keys, 6, args, &code, &val, NULL);
    if (rc) return rc;
    if (code == -2) {
        dlock__log(s->c, DLOCK_LOG_ERROR, "semaphore %s: recorded with %lld permits, handle says %s",
                   s->keys[K_BASE], val, s->limit_s);
        return DLOCK_EINVAL;
    }
    if (code == -3) return DLOCK_ELIMIT;
    *hint_ms = val;
    return code == 1 ? 1 : 0;
}

static const char *sem_channel(void *ctx, bool *sharded_out)
{
    *sharded_out = ((sem_try *)ctx)->s->sharded;
    return ((sem_try *)ctx)->s->keys[K_CHAN];
}

/* *sent_out (may be NULL): when the successful attempt was sent. */
static int take(dlock_semaphore *s, const char *id, int64_t k, int64_t lease_ms, int64_t wait_ms,
                int64_t *sent_out)
{
    sem_try t = {.s = s, .id = id};
    dlock__fam_fmt_i64(t.k, sizeof(t.k), k);
    dlock__fam_fmt_i64(t.lease, sizeof(t.lease), lease_ms);
    dlock__wait_spec sp = {.c = s->c, .ctl = &s->ctl, .attempt = sem_attempt,
                           .channel = sem_channel, .ctx = &t, .wait_ms = wait_ms,
                           .max_nap_ms = 2000};
    int rc = dlock__fam_wait(&sp);
    dlock__metrics_acquire(s->c, rc);
    if (sent_out) *sent_out = t.sent_ms;
    return rc;
}

/* A loss found by the watchdog drops the handle's permits locally. */
static bool sync_lost(dlock_semaphore *s)
{
    if (!dlock__hold_take_lost(&s->hold)) return false;
    atomic_store(&s->held, 0);
    return true;
}

DLOCK_API int dlock_semaphore_acquire(dlock_semaphore *sem, int64_t k, int64_t wait_ms)
{
    if (!sem || k < 1 || wait_ms < -1) return DLOCK_EINVAL;
    if (k > sem->limit) return DLOCK_ELIMIT;
    sync_lost(sem);
    int64_t lease = sem->lease_ms ? sem->lease_ms : dlock__client_watchdog_ms(sem->c);
    int64_t sent = 0;
    int rc = take(sem, sem->owner, k, lease, wait_ms, &sent);
    if (rc) return rc;
    atomic_fetch_add(&sem->held, k);
    /* the script set the holder's one expiry (all its permits) anew */
    dlock__hold_begin(&sem->hold, sem->lease_ms == 0, sent, lease); /* no-op while holding */
    dlock__hold_renewed(&sem->hold, sent, lease);
    return 0;
}

DLOCK_API int dlock_semaphore_release(dlock_semaphore *sem, int64_t k)
{
    if (!sem || k < 1) return DLOCK_EINVAL;
    if (sync_lost(sem)) return DLOCK_ELOST;
    if (k > atomic_load(&sem->held)) return DLOCK_ENOTHELD;
    char ks[24];
    dlock__fam_fmt_i64(ks, sizeof(ks), k);
    const char *keys[3] = {sem->keys[K_META], sem->keys[K_EXP], sem->keys[K_CNT]};
    const char *args[4] = {sem->owner, ks, sem->keys[K_CHAN], dlock__pub_cmd(sem->sharded)};
    long long code = 0;
    int rc = dlock__fam_eval(sem->c, &dlock__script_sem_release, 3, keys, 4, args, &code, NULL, NULL);
    if (rc) return rc;
    if (code == -1) return DLOCK_ENOTHELD;
    if (code == 1)
        atomic_fetch_sub(&sem->held, k);
    else
        atomic_store(&sem->held, 0);
    if (atomic_load(&sem->held) == 0) dlock__hold_end(&sem->hold, true);
    if (code == 0) {
        dlock__metrics_lost(sem->c);
        return DLOCK_ELOST;
    }
    return 0;
}

DLOCK_API int64_t dlock_semaphore_held(const dlock_semaphore *sem)
{
    if (!sem) return 0;
    dlock_semaphore *s = (dlock_semaphore *)sem;
    return dlock__hold_valid(&s->hold) ? atomic_load(&s->held) : 0; /* dlock.h's validity rule */
}

DLOCK_API int64_t dlock_semaphore_validity_ms(const dlock_semaphore *sem)
{
    return sem ? dlock__hold_validity_ms(&((dlock_semaphore *)sem)->hold) : 0;
}

DLOCK_API void dlock_semaphore_set_on_lost(dlock_semaphore *sem, dlock_semaphore_lost_fn fn, void *ud)
{
    if (sem) dlock__hold_set_user_lost(&sem->hold, (dlock__any_fn)fn, ud);
}

DLOCK_API int dlock_semaphore_available(dlock_semaphore *sem, int64_t *available_out)
{
    if (!sem || !available_out) return DLOCK_EINVAL;
    const char *keys[3] = {sem->keys[K_META], sem->keys[K_EXP], sem->keys[K_CNT]};
    long long code = 0;
    int rc = dlock__fam_eval(sem->c, &dlock__script_sem_available, 3, keys, 0, NULL, &code, NULL, NULL);
    if (rc) return rc;
    *available_out = code < 0 ? sem->limit : code;
    return 0;
}

DLOCK_API void dlock_semaphore_cancel(dlock_semaphore *sem)
{
    if (sem) dlock__waitctl_cancel(&sem->ctl);
}

DLOCK_API void dlock_semaphore_free(dlock_semaphore *sem)
{
    if (!sem) return;
    dlock__hold_free(&sem->hold, "semaphore");
    dlock__waitctl_destroy(&sem->ctl);
    free(sem);
}

/* ---- expirable permits ------------------------------------------------- */

static int check_id(const char *id)
{
    if (!id) return DLOCK_EINVAL;
    size_t n = strnlen(id, DLOCK_PERMIT_ID_LEN);
    if (n != DLOCK_PERMIT_ID_LEN - 1) return DLOCK_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return DLOCK_EINVAL;
    return 0;
}

DLOCK_API int dlock_permits_acquire(dlock_semaphore *sem, int64_t lease_ms, int64_t wait_ms,
                                    char id_out[DLOCK_PERMIT_ID_LEN])
{
    if (!sem || !id_out || lease_ms < 1 || wait_ms < -1) return DLOCK_EINVAL;
    id_out[0] = '\0';
    char id[DLOCK_PERMIT_ID_LEN];
    int rc = dlock__err_from_common(dlock__random_hex(id, (DLOCK_PERMIT_ID_LEN - 1) / 2));
    if (rc) return rc;
    rc = take(sem, id, 1, lease_ms, wait_ms, NULL);
    if (rc == 0) memcpy(id_out, id, DLOCK_PERMIT_ID_LEN);
    return rc;
}

DLOCK_API int dlock_permits_release(dlock_semaphore *sem, const char *id)
{
    if (!sem || check_id(id) != 0) return DLOCK_EINVAL;
    const char *keys[3] = {sem->keys[K_META], sem->keys[K_EXP], sem->keys[K_CNT]};
    const char *args[4] = {id, "1", sem->keys[K_CHAN], dlock__pub_cmd(sem->sharded)};
    long long code = 0;
    int rc = dlock__fam_eval(sem->c, &dlock__script_sem_release, 3, keys, 4, args, &code, NULL, NULL);
    if (rc) return rc;
    return code == 1 ? 0 : DLOCK_ENOTHELD;
}

DLOCK_API int dlock_permits_extend(dlock_semaphore *sem, const char *id, int64_t lease_ms)
{
    if (!sem || check_id(id) != 0 || lease_ms < 1) return DLOCK_EINVAL;
    char lease[24];
    dlock__fam_fmt_i64(lease, sizeof(lease), lease_ms);
    const char *keys[1] = {sem->keys[K_EXP]};
    const char *args[2] = {id, lease};
    long long code = 0;
    int rc = dlock__fam_eval(sem->c, &dlock__script_sem_extend, 1, keys, 2, args, &code, NULL, NULL);
    if (rc) return rc;
    return code == 1 ? 0 : DLOCK_ENOTHELD;
}
