/* async_semaphore.c: dlock_async_semaphore (async.h), the owner-tracked
 * semaphore of semaphore.h on an event loop, with the blocking handle's
 * keys, scripts and channel (semaphore.c's design note: "{K}:sem",
 * ":sem:exp", ":sem:cnt", ":sem:ch"; lua/sem_*.lua), so blocking and
 * asynchronous holders of one name share its N permits and wake each
 * other. A handle is one holder id ("<client id>:<16 hex>") with a count.
 * States as the lock's (async_lock.c): idle -> acquiring (async_wait.c's
 * driver) -> held (permits > 0, one hold: every acquire sets the holder's
 * expiry anew, so the deadline moves with it) -> releasing -> idle;
 * held -> lost. Memory: one reference for the user and one per request in
 * flight (a late answer finds the handle and gives back what it brings). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/semaphore.h"
#include "async_internal.h"
#include "family.h"
#include "opts_read.h"
#include "util.h"

extern const dlock__script dlock__script_sem_acquire;
extern const dlock__script dlock__script_sem_release;
extern const dlock__script dlock__script_sem_extend;

#define RECHECK_MAX_MS 2000 /* as the blocking handle's longest nap */
#define TAG_K_BITS 32       /* an acquire's tag: its generation, then its k */

enum { K_BASE, K_META, K_EXP, K_CNT, K_CHAN, K_N };
enum { IDLE = 0, ACQUIRING, RELEASING };

struct dlock_async_semaphore {
    dlock__aobj obj;
    dlock_async_client *c;
    char keys[K_N][DLOCK__KEY_MAX];
    char owner[DLOCK__FAM_OWNER_LEN];
    char limit_arg[24], lease_arg[24], k_arg[24];
    int64_t limit, lease_ms; /* options: 0 lease = watchdog */
    int64_t held;            /* permits of this handle */
    int64_t k;               /* of the pending operation */
    int64_t try_sent_ms;
    dlock__aop op;
    dlock__ahold hold;
    dlock_async_semaphore_fn cb;
    void *ud;
    int pending, refs;
    bool freed, orphaned, lost;
    bool rel_counted; /* the pending release was counted (dlock__asub_release_sent) */
    dlock_async_semaphore_lost_fn on_lost;
    void *on_lost_ud;
};

#define SEM_OF_OP(p) ((dlock_async_semaphore *)(void *)((char *)(p)-offsetof(dlock_async_semaphore, op)))
#define SEM_OF_HOLD(p) ((dlock_async_semaphore *)(void *)((char *)(p)-offsetof(dlock_async_semaphore, hold)))
#define SEM_OF_OBJ(p) ((dlock_async_semaphore *)(void *)((char *)(p)-offsetof(dlock_async_semaphore, obj)))

static void unref(dlock_async_semaphore *s)
{
    if (--s->refs == 0) free(s);
}

static long long elem_int(const dlock__reply *r, size_t i)
{
    const dlock__reply *e = dlock__reply_at(r, i);
    return e && dlock__reply_kind(e) == DLOCK__R_INTEGER ? dlock__reply_int(e) : 0;
}

static void complete(dlock_async_semaphore *s, int rc)
{
    dlock_async_semaphore_fn cb = s->cb;
    void *ud = s->ud;
    s->cb = NULL;
    s->pending = IDLE;
    if (!cb) return;
    s->refs++;
    cb(s, rc, ud);
    unref(s);
}

static int eval(dlock_async_semaphore *s, const dlock__script *sc, int nkeys, int nargs, const char *const *args,
                dlock__areply_fn fn, uint64_t tag)
{
    const char *keys[3] = {s->keys[K_META], s->keys[K_EXP], s->keys[K_CNT]};
    if (sc == &dlock__script_sem_extend) keys[0] = s->keys[K_EXP];
    int rc = dlock__ac_eval(s->c, sc, nkeys, keys, nargs, args, fn, s, tag);
    if (rc == 0) s->refs++;
    return rc;
}

static void drop_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    (void)reply;
    (void)rc;
    (void)tag;
    unref(priv);
}

static int send_release(dlock_async_semaphore *s, int64_t k, dlock__areply_fn fn)
{
    char ks[24];
    snprintf(ks, sizeof(ks), "%lld", (long long)k);
    const char *args[4] = {s->owner, ks, s->keys[K_CHAN], dlock__pub_cmd(s->op.sharded)};
    return eval(s, &dlock__script_sem_release, 3, 4, args, fn, 0);
}

/* ---- acquire ------------------------------------------------------------------------ */

static void acq_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag);

static int try_send(dlock__aop *op, uint64_t tag)
{
    dlock_async_semaphore *s = SEM_OF_OP(op);
    const char *args[6] = {s->owner, s->k_arg, s->lease_arg, s->limit_arg, s->keys[K_CHAN], dlock__pub_cmd(s->op.sharded)};
    s->try_sent_ms = dlock__now_ms();
    /* k rides in the tag: a late answer gives back the permits it took */
    return eval(s, &dlock__script_sem_acquire, 3, 6, args, acq_reply, tag << TAG_K_BITS | (uint64_t)s->k);
}

static void op_done(dlock__aop *op, int rc)
{
    complete(SEM_OF_OP(op), rc);
}

static const dlock__aop_ops aop_ops = {.try_send = try_send, .done = op_done};

/* The script set the holder's one expiry (all its permits) anew. */
static int took(dlock_async_semaphore *s)
{
    int64_t lease = s->lease_ms ? s->lease_ms : dlock__ac_options(s->c)->watchdog_timeout_ms;
    int rc = dlock__ahold_begin(&s->hold, s->lease_ms == 0, s->try_sent_ms, lease);
    if (rc == 0) s->held += s->k;
    s->lost = false;
    return rc;
}

static int busy_code(dlock_async_semaphore *s, long long code, long long val)
{
    if (code == -2) {
        dlock__ac_log(s->c, DLOCK_LOG_ERROR, "async semaphore %s: recorded with %lld permits, handle says %s",
                      s->keys[K_BASE], val, s->limit_arg);
        return DLOCK_EINVAL;
    }
    return code == -3 ? DLOCK_ELIMIT : DLOCK_EBUSY;
}

static void acq_reply(void *priv, const dlock__reply *reply, int rc, uint64_t k_tag)
{
    dlock_async_semaphore *s = priv;
    uint64_t tag = k_tag >> TAG_K_BITS, mask = ((uint64_t)1 << (64 - TAG_K_BITS)) - 1;
    bool arr = rc == 0 && dlock__reply_kind(reply) == DLOCK__R_ARRAY;
    long long code = arr ? elem_int(reply, 0) : 0;
    if (s->orphaned) {
        unref(s);
        return;
    }
    if ((s->op.gen & mask) == tag) tag = s->op.gen;
    if (!s->op.active || tag != s->op.gen) {
        int64_t k = (int64_t)(k_tag & (((uint64_t)1 << TAG_K_BITS) - 1));
        if (arr && code == 1 && send_release(s, k, drop_reply) != 0)
            dlock__ac_log(s->c, DLOCK_LOG_WARN, "async semaphore %s: giving back a cancelled acquisition failed: "
                          "it expires on its lease", s->keys[K_BASE]);
        unref(s);
        return;
    }
    int64_t hint = -1;
    if (arr && code == 1) rc = took(s);
    else if (arr) {
        rc = busy_code(s, code, elem_int(reply, 1));
        hint = elem_int(reply, 1);
    } else if (rc == 0) rc = DLOCK_ESERVER;
    if (rc == DLOCK_ENOMEM) send_release(s, s->k, drop_reply);
    dlock__aop_result(&s->op, tag, rc, hint);
    unref(s);
}

/* ---- release ---------------------------------------------------------------------------- */

static void rel_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    (void)tag;
    dlock_async_semaphore *s = priv;
    if (s->orphaned || s->pending != RELEASING) {
        unref(s);
        return;
    }
    bool published = rc == 0 && dlock__reply_kind(reply) == DLOCK__R_INTEGER && dlock__reply_int(reply) == 1;
    dlock__asub_release_done(dlock__ac_sub(s->c), s->keys[K_CHAN], s->rel_counted, published);
    if (rc == 0 && dlock__reply_kind(reply) == DLOCK__R_INTEGER) {
        long long code = dlock__reply_int(reply);
        if (code == 1) s->held -= s->k;
        else if (code == 0) s->held = 0;
        if (s->held <= 0) dlock__ahold_end(&s->hold);
        rc = code == 1 ? 0 : code == 0 ? DLOCK_ELOST : DLOCK_ENOTHELD;
    } else if (rc == 0) {
        rc = DLOCK_ESERVER;
    }
    complete(s, rc);
    unref(s);
}

/* ---- the watchdog and the loss ------------------------------------------------------------ */

static void renew_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    dlock_async_semaphore *s = priv;
    if (!s->orphaned) {
        if (rc == 0) rc = dlock__reply_kind(reply) == DLOCK__R_INTEGER && dlock__reply_int(reply) == 1 ? 0
                                                                                                     : DLOCK_ELOST;
        dlock__ahold_renewed(&s->hold, tag, rc);
    }
    unref(s);
}

static int renew_send(dlock__ahold *h, int64_t lease_ms, uint64_t tag)
{
    dlock_async_semaphore *s = SEM_OF_HOLD(h);
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
    const char *args[2] = {s->owner, lease};
    return eval(s, &dlock__script_sem_extend, 1, 2, args, renew_reply, tag);
}

static void hold_lost(dlock__ahold *h)
{
    dlock_async_semaphore *s = SEM_OF_HOLD(h);
    s->held = 0;
    s->lost = true;
    dlock__ac_log(s->c, DLOCK_LOG_WARN, "async semaphore %s lost: no good renewal before its validity "
                  "deadline, or the server no longer has its permits", s->keys[K_BASE]);
    if (!s->on_lost) return;
    s->refs++;
    s->on_lost(s, DLOCK_ELOST, s->on_lost_ud);
    unref(s);
}

static const dlock__ahold_ops ahold_ops = {.renew_send = renew_send, .lost = hold_lost};

/* ---- lifetimes ------------------------------------------------------------------------------- */

static void end_pending(dlock_async_semaphore *s, int rc)
{
    if (s->pending == ACQUIRING) dlock__aop_end(&s->op, rc);
    else if (s->pending == RELEASING) complete(s, rc);
}

static void dispose(dlock_async_semaphore *s, const char *why)
{
    if (dlock__ahold_valid(&s->hold))
        dlock__ac_log(s->c, DLOCK_LOG_WARN, "async semaphore %s %s while holding permits: not released, they "
                      "expire on their lease", s->keys[K_BASE], why);
    dlock__aop_dispose(&s->op);
    dlock__ahold_dispose(&s->hold);
}

static void orphan(dlock__aobj *o)
{
    dlock_async_semaphore *s = SEM_OF_OBJ(o);
    s->refs++;
    end_pending(s, DLOCK_ECLOSED);
    dispose(s, "(its client freed)");
    s->orphaned = true;
    s->held = 0;
    unref(s);
}

DLOCK_API void dlock_async_semaphore_free(dlock_async_semaphore *s)
{
    if (!s || s->freed) return;
    s->freed = true;
    if (!s->orphaned) {
        end_pending(s, DLOCK_ECANCELED);
        dispose(s, "freed");
        dlock__ac_remove_obj(s->c, &s->obj);
    }
    unref(s);
}

/* ---- the API ------------------------------------------------------------------------------------ */

static int make_keys(dlock_async_semaphore *s, const char *name)
{
    static const char *const sfx[K_N - 1] = {":sem", ":sem:exp", ":sem:cnt", ":sem:ch"};
    const char *prefix = dlock__ac_options(s->c)->key_prefix;
    if (dlock__check_name(name) != 0) return DLOCK_EINVAL;
    int n = snprintf(s->keys[K_BASE], DLOCK__KEY_MAX, "%s%s", prefix, name);
    if (n < 0 || n >= DLOCK__KEY_MAX) return DLOCK_EINVAL;
    for (int i = 1; i < K_N; i++)
        if (dlock__companion_key(s->keys[K_BASE], sfx[i - 1], s->keys[i], DLOCK__KEY_MAX) != 0) return DLOCK_EINVAL;
    char rnd[17];
    int rc = dlock__err_from_common(dlock__random_hex(rnd, 8));
    if (rc == 0) snprintf(s->owner, sizeof(s->owner), "%s:%s", dlock_async_client_id(s->c), rnd);
    return rc;
}

DLOCK_API int dlock_async_semaphore_new(dlock_async_client *c, const char *name,
                                        const dlock_semaphore_options *opts, dlock_async_semaphore **sem_out)
{
    if (!c || !sem_out) return DLOCK_EINVAL;
    *sem_out = NULL;
    if (dlock__ac_closing(c)) return DLOCK_ECLOSED;
    dlock_semaphore_options o;
    dlock_semaphore_options_init(&o);
    if (opts && dlock__opts_read(&o, sizeof(o), DLOCK__SIZE_TO(dlock_semaphore_options, lease_ms), opts))
        return DLOCK_EINVAL;
    if (o.permits < 1 || o.permits > 1000000000 || o.lease_ms < 0) return DLOCK_EINVAL;
    dlock_async_semaphore *s = calloc(1, sizeof(*s));
    if (!s) return DLOCK_ENOMEM;
    s->c = c;
    int rc = make_keys(s, name);
    if (rc) {
        dlock__ac_log(c, DLOCK_LOG_WARN, "async semaphore: name missing, empty or too long");
        free(s);
        return rc;
    }
    s->refs = 1;
    s->limit = o.permits;
    s->lease_ms = o.lease_ms;
    snprintf(s->limit_arg, sizeof(s->limit_arg), "%lld", (long long)o.permits);
    bool sharded = dlock__ac_sharded(c, s->keys[K_BASE], s->keys[K_CHAN]);
    dlock__aop_init(&s->op, c, &aop_ops, s->keys[K_CHAN], sharded, RECHECK_MAX_MS);
    dlock__ahold_init(&s->hold, c, &ahold_ops);
    s->obj.orphan = orphan;
    dlock__ac_add_obj(c, &s->obj);
    *sem_out = s;
    return 0;
}

DLOCK_API int dlock_async_semaphore_acquire(dlock_async_semaphore *s, int64_t k, int64_t wait_ms,
                                            dlock_async_semaphore_fn cb, void *ud)
{
    if (!s || !cb || k < 1 || wait_ms < DLOCK_WAIT_FOREVER) return DLOCK_EINVAL;
    if (s->orphaned) return DLOCK_ECLOSED;
    if (s->pending != IDLE) return DLOCK_EINVAL;
    if (k > s->limit) return DLOCK_ELIMIT;
    if (!dlock__ahold_valid(&s->hold)) s->held = 0;
    int64_t lease = s->lease_ms ? s->lease_ms : dlock__ac_options(s->c)->watchdog_timeout_ms;
    snprintf(s->lease_arg, sizeof(s->lease_arg), "%lld", (long long)lease);
    snprintf(s->k_arg, sizeof(s->k_arg), "%lld", (long long)k);
    s->k = k;
    s->pending = ACQUIRING;
    s->cb = cb;
    s->ud = ud;
    int rc = dlock__aop_start(&s->op, wait_ms);
    if (rc) {
        s->pending = IDLE;
        s->cb = NULL;
    }
    return rc;
}

DLOCK_API int dlock_async_semaphore_release(dlock_async_semaphore *s, int64_t k, dlock_async_semaphore_fn cb,
                                            void *ud)
{
    if (!s || !cb || k < 1) return DLOCK_EINVAL;
    if (s->orphaned) return DLOCK_ECLOSED;
    if (s->pending != IDLE) return DLOCK_EINVAL;
    if (s->lost) {
        s->lost = false;
        return DLOCK_ELOST;
    }
    if (k > s->held) return DLOCK_ENOTHELD;
    int rc = send_release(s, k, rel_reply);
    if (rc) return rc;
    s->rel_counted = dlock__asub_release_sent(dlock__ac_sub(s->c), s->keys[K_CHAN]);
    s->k = k;
    s->pending = RELEASING;
    s->cb = cb;
    s->ud = ud;
    return 0;
}

DLOCK_API int dlock_async_semaphore_cancel(dlock_async_semaphore *s)
{
    if (!s || s->pending != ACQUIRING) return DLOCK_ENOTHELD;
    dlock__aop_end(&s->op, DLOCK_ECANCELED);
    return 0;
}

DLOCK_API int64_t dlock_async_semaphore_held(const dlock_async_semaphore *s)
{
    return s && !s->orphaned && dlock__ahold_valid(&s->hold) ? s->held : 0;
}

DLOCK_API int64_t dlock_async_semaphore_validity_ms(const dlock_async_semaphore *s)
{
    return s && !s->orphaned ? dlock__ahold_validity_ms(&s->hold) : 0;
}

DLOCK_API void dlock_async_semaphore_set_on_lost(dlock_async_semaphore *s, dlock_async_semaphore_lost_fn fn,
                                                 void *ud)
{
    if (!s) return;
    s->on_lost = fn;
    s->on_lost_ud = ud;
}
