/* async_rwlock.c: dlock_async_rwlock (async.h), the read-write lock of
 * rwlock.h on an event loop, with the blocking handle's keys, scripts and
 * channel (rwlock.c's design note: "{K}:rw:w", ":rw:r", ":rw:rn",
 * ":rw:ww", ":rw:ch"; lua/rw_*.lua), so blocking and asynchronous readers
 * and writers of one name exclude and wake each other, and a waiting
 * writer's intent holds back readers of both kinds.
 * States as the lock's (async_lock.c): idle -> acquiring (async_wait.c's
 * driver) -> held (read and write counts, one hold with its validity and
 * watchdog for both sides) -> releasing -> idle; held -> lost.
 * A side taken while the other is held keeps the earlier deadline (as the
 * blocking handle). Memory: one reference for the user and one per
 * request in flight (a late answer finds the handle and gives back what
 * it brings). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/rwlock.h"
#include "async_internal.h"
#include "family.h"
#include "opts_read.h"
#include "util.h"

extern const dlock__script dlock__script_rw_read_acquire;
extern const dlock__script dlock__script_rw_write_acquire;
extern const dlock__script dlock__script_rw_release;
extern const dlock__script dlock__script_rw_renew;
extern const dlock__script dlock__script_rw_withdraw;

enum { K_BASE, K_W, K_R, K_RN, K_WW, K_CHAN, K_N };
enum { IDLE = 0, ACQUIRING, RELEASING };

struct dlock_async_rwlock {
    dlock__aobj obj;
    dlock_async_client *c;
    char keys[K_N][DLOCK__KEY_MAX];
    char owner[DLOCK__FAM_OWNER_LEN];
    char lease_arg[24], intent_arg[24];
    int64_t lease_ms, intent_ms; /* options: 0 lease = watchdog */
    int64_t rcount, wcount;
    int64_t try_sent_ms;
    bool write;  /* the side of the pending operation */
    bool waited; /* the pending acquire may wait (writer intent) */
    dlock__aop op;
    dlock__ahold hold;
    dlock_async_rwlock_fn cb;
    void *ud;
    int pending, refs;
    bool freed, orphaned, lost;
    bool rel_counted; /* the pending release was counted (dlock__asub_release_sent) */
    dlock_async_rwlock_lost_fn on_lost;
    void *on_lost_ud;
};

#define RW_OF_OP(p) ((dlock_async_rwlock *)(void *)((char *)(p)-offsetof(dlock_async_rwlock, op)))
#define RW_OF_HOLD(p) ((dlock_async_rwlock *)(void *)((char *)(p)-offsetof(dlock_async_rwlock, hold)))
#define RW_OF_OBJ(p) ((dlock_async_rwlock *)(void *)((char *)(p)-offsetof(dlock_async_rwlock, obj)))

static void unref(dlock_async_rwlock *rw)
{
    if (--rw->refs == 0) free(rw);
}

static long long elem_int(const dlock__reply *r, size_t i)
{
    const dlock__reply *e = dlock__reply_at(r, i);
    return e && dlock__reply_kind(e) == DLOCK__R_INTEGER ? dlock__reply_int(e) : 0;
}

static void complete(dlock_async_rwlock *rw, int rc)
{
    dlock_async_rwlock_fn cb = rw->cb;
    void *ud = rw->ud;
    rw->cb = NULL;
    rw->pending = IDLE;
    if (!cb) return;
    rw->refs++;
    cb(rw, rc, ud);
    unref(rw);
}

static int eval(dlock_async_rwlock *rw, const dlock__script *s, int nkeys, const char *const *keys, int nargs,
                const char *const *args, dlock__areply_fn fn, uint64_t tag)
{
    int rc = dlock__ac_eval(rw->c, s, nkeys, keys, nargs, args, fn, rw, tag);
    if (rc == 0) rw->refs++;
    return rc;
}

static void drop_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    (void)reply;
    (void)rc;
    (void)tag;
    unref(priv);
}

static int send_release(dlock_async_rwlock *rw, bool write, dlock__areply_fn fn)
{
    const char *keys[3] = {rw->keys[K_W], rw->keys[K_R], rw->keys[K_RN]};
    const char *args[4] = {rw->owner, write ? "w" : "r", rw->keys[K_CHAN], dlock__pub_cmd(rw->op.sharded)};
    return eval(rw, &dlock__script_rw_release, 3, keys, 4, args, fn, 0);
}

/* ---- acquire -------------------------------------------------------------------- */

static void acq_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag);

static int try_send(dlock__aop *op, uint64_t tag)
{
    dlock_async_rwlock *rw = RW_OF_OP(op);
    const char *keys[4] = {rw->keys[K_W], rw->keys[K_R], rw->keys[K_RN], rw->keys[K_WW]};
    const char *args[3] = {rw->owner, rw->lease_arg, rw->intent_arg};
    rw->try_sent_ms = dlock__now_ms();
    /* the side rides in the tag: a late answer gives back the side it took */
    if (rw->write) return eval(rw, &dlock__script_rw_write_acquire, 4, keys, 3, args, acq_reply, tag << 1 | 1);
    return eval(rw, &dlock__script_rw_read_acquire, 4, keys, 2, args, acq_reply, tag << 1);
}

/* A writer that stops waiting withdraws its intent and lets readers in. */
static void withdraw(dlock_async_rwlock *rw)
{
    const char *keys[1] = {rw->keys[K_WW]};
    const char *args[3] = {rw->owner, rw->keys[K_CHAN], dlock__pub_cmd(rw->op.sharded)};
    if (eval(rw, &dlock__script_rw_withdraw, 1, keys, 3, args, drop_reply, 0) != 0)
        dlock__ac_log(rw->c, DLOCK_LOG_WARN, "async rwlock %s: withdrawing a writer's intent failed: it expires "
                      "in %lld ms", rw->keys[K_BASE], (long long)rw->intent_ms);
}

static void op_done(dlock__aop *op, int rc)
{
    dlock_async_rwlock *rw = RW_OF_OP(op);
    if (rw->write && rw->waited && rw->intent_ms > 0 && rc != 0 && rc != DLOCK_EUPGRADE && !rw->orphaned)
        withdraw(rw);
    complete(rw, rc);
}

static const dlock__aop_ops aop_ops = {.try_send = try_send, .done = op_done};

static int took(dlock_async_rwlock *rw)
{
    bool was_held = rw->rcount > 0 || rw->wcount > 0;
    if (rw->write) rw->wcount++;
    else rw->rcount++;
    rw->lost = false;
    if (was_held) return 0; /* the earlier deadline stays */
    int64_t lease = rw->lease_ms ? rw->lease_ms : dlock__ac_options(rw->c)->watchdog_timeout_ms;
    int rc = dlock__ahold_begin(&rw->hold, rw->lease_ms == 0, rw->try_sent_ms, lease);
    if (rc && rw->write) rw->wcount--;
    else if (rc) rw->rcount--;
    return rc;
}

static void acq_reply(void *priv, const dlock__reply *reply, int rc, uint64_t side_tag)
{
    dlock_async_rwlock *rw = priv;
    uint64_t tag = side_tag >> 1;
    bool arr = rc == 0 && dlock__reply_kind(reply) == DLOCK__R_ARRAY;
    long long code = arr ? elem_int(reply, 0) : 0;
    if (rw->orphaned) {
        unref(rw);
        return;
    }
    if (!rw->op.active || tag != rw->op.gen) {
        if (arr && code == 1 && send_release(rw, side_tag & 1, drop_reply) != 0)
            dlock__ac_log(rw->c, DLOCK_LOG_WARN, "async rwlock %s: giving back a cancelled acquisition failed: "
                          "it expires on its lease", rw->keys[K_BASE]);
        unref(rw);
        return;
    }
    int64_t hint = -1;
    if (arr && code == 1) rc = took(rw);
    else if (arr && code == -1) rc = DLOCK_EUPGRADE;
    else if (arr) {
        rc = DLOCK_EBUSY;
        hint = elem_int(reply, 1);
    } else if (rc == 0) rc = DLOCK_ESERVER;
    if (rc == DLOCK_ENOMEM) send_release(rw, rw->write, drop_reply);
    dlock__aop_result(&rw->op, tag, rc, hint);
    unref(rw);
}

/* ---- release -------------------------------------------------------------------------- */

static void rel_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    (void)tag;
    dlock_async_rwlock *rw = priv;
    if (rw->orphaned || rw->pending != RELEASING) {
        unref(rw);
        return;
    }
    bool published = rc == 0 && dlock__reply_kind(reply) == DLOCK__R_INTEGER && dlock__reply_int(reply) == 0;
    dlock__asub_release_done(dlock__ac_sub(rw->c), rw->keys[K_CHAN], rw->rel_counted, published);
    int64_t *cnt = rw->write ? &rw->wcount : &rw->rcount;
    if (rc == 0 && dlock__reply_kind(reply) == DLOCK__R_INTEGER) {
        long long left = dlock__reply_int(reply);
        if (left < 0) *cnt = 0;
        else if (*cnt > 0) (*cnt)--;
        if (rw->rcount == 0 && rw->wcount == 0) dlock__ahold_end(&rw->hold);
        rc = left < 0 ? DLOCK_ELOST : 0;
    } else if (rc == 0) {
        rc = DLOCK_ESERVER;
    }
    complete(rw, rc);
    unref(rw);
}

/* ---- the watchdog and the loss --------------------------------------------------------- */

static void renew_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    dlock_async_rwlock *rw = priv;
    if (!rw->orphaned) {
        long long want = (rw->wcount > 0 ? 1 : 0) | (rw->rcount > 0 ? 2 : 0);
        if (rc == 0) rc = dlock__reply_kind(reply) == DLOCK__R_INTEGER && (dlock__reply_int(reply) & want) == want
                              ? 0
                              : DLOCK_ELOST;
        dlock__ahold_renewed(&rw->hold, tag, rc);
    }
    unref(rw);
}

static int renew_send(dlock__ahold *h, int64_t lease_ms, uint64_t tag)
{
    dlock_async_rwlock *rw = RW_OF_HOLD(h);
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
    const char *keys[2] = {rw->keys[K_W], rw->keys[K_R]};
    const char *args[2] = {rw->owner, lease};
    return eval(rw, &dlock__script_rw_renew, 2, keys, 2, args, renew_reply, tag);
}

static void hold_lost(dlock__ahold *h)
{
    dlock_async_rwlock *rw = RW_OF_HOLD(h);
    rw->rcount = rw->wcount = 0;
    rw->lost = true;
    dlock__ac_log(rw->c, DLOCK_LOG_WARN, "async rwlock %s lost: no good renewal before its validity deadline, "
                  "or the server no longer has it", rw->keys[K_BASE]);
    if (!rw->on_lost) return;
    rw->refs++;
    rw->on_lost(rw, DLOCK_ELOST, rw->on_lost_ud);
    unref(rw);
}

static const dlock__ahold_ops ahold_ops = {.renew_send = renew_send, .lost = hold_lost};

/* ---- lifetimes ---------------------------------------------------------------------------- */

static void end_pending(dlock_async_rwlock *rw, int rc)
{
    if (rw->pending == ACQUIRING) dlock__aop_end(&rw->op, rc);
    else if (rw->pending == RELEASING) complete(rw, rc);
}

static void dispose(dlock_async_rwlock *rw, const char *why)
{
    if (dlock__ahold_valid(&rw->hold))
        dlock__ac_log(rw->c, DLOCK_LOG_WARN, "async rwlock %s %s while held: not released, it expires on its "
                      "lease", rw->keys[K_BASE], why);
    dlock__aop_dispose(&rw->op);
    dlock__ahold_dispose(&rw->hold);
}

static void orphan(dlock__aobj *o)
{
    dlock_async_rwlock *rw = RW_OF_OBJ(o);
    rw->refs++;
    end_pending(rw, DLOCK_ECLOSED);
    dispose(rw, "(its client freed)");
    rw->orphaned = true;
    rw->rcount = rw->wcount = 0;
    unref(rw);
}

DLOCK_API void dlock_async_rwlock_free(dlock_async_rwlock *rw)
{
    if (!rw || rw->freed) return;
    rw->freed = true;
    if (!rw->orphaned) {
        end_pending(rw, DLOCK_ECANCELED);
        dispose(rw, "freed");
        dlock__ac_remove_obj(rw->c, &rw->obj);
    }
    unref(rw);
}

/* ---- the API ---------------------------------------------------------------------------------- */

static int make_keys(dlock_async_rwlock *rw, const char *name)
{
    static const char *const sfx[K_N - 1] = {":rw:w", ":rw:r", ":rw:rn", ":rw:ww", ":rw:ch"};
    const char *prefix = dlock__ac_options(rw->c)->key_prefix;
    if (dlock__check_name(name) != 0) return DLOCK_EINVAL;
    int n = snprintf(rw->keys[K_BASE], DLOCK__KEY_MAX, "%s%s", prefix, name);
    if (n < 0 || n >= DLOCK__KEY_MAX) return DLOCK_EINVAL;
    for (int i = 1; i < K_N; i++)
        if (dlock__companion_key(rw->keys[K_BASE], sfx[i - 1], rw->keys[i], DLOCK__KEY_MAX) != 0) return DLOCK_EINVAL;
    char rnd[17];
    int rc = dlock__err_from_common(dlock__random_hex(rnd, 8));
    if (rc == 0) snprintf(rw->owner, sizeof(rw->owner), "%s:%s", dlock_async_client_id(rw->c), rnd);
    return rc;
}

DLOCK_API int dlock_async_rwlock_new(dlock_async_client *c, const char *name, const dlock_rwlock_options *opts,
                                     dlock_async_rwlock **rw_out)
{
    if (!c || !rw_out) return DLOCK_EINVAL;
    *rw_out = NULL;
    if (dlock__ac_closing(c)) return DLOCK_ECLOSED;
    dlock_rwlock_options o;
    dlock_rwlock_options_init(&o);
    if (opts && dlock__opts_read(&o, sizeof(o), DLOCK__SIZE_TO(dlock_rwlock_options, writer_intent_ms), opts))
        return DLOCK_EINVAL;
    if (o.lease_ms < 0 || o.writer_intent_ms < 0) return DLOCK_EINVAL;
    dlock_async_rwlock *rw = calloc(1, sizeof(*rw));
    if (!rw) return DLOCK_ENOMEM;
    rw->c = c;
    int rc = make_keys(rw, name);
    if (rc) {
        dlock__ac_log(c, DLOCK_LOG_WARN, "async rwlock: name missing, empty or too long");
        free(rw);
        return rc;
    }
    rw->refs = 1;
    rw->lease_ms = o.lease_ms;
    rw->intent_ms = o.writer_intent_ms;
    int64_t nap = o.writer_intent_ms > 0 ? o.writer_intent_ms / 3 : 1000;
    bool sharded = dlock__ac_sharded(c, rw->keys[K_BASE], rw->keys[K_CHAN]);
    dlock__aop_init(&rw->op, c, &aop_ops, rw->keys[K_CHAN], sharded, nap < 1 ? 1 : nap);
    dlock__ahold_init(&rw->hold, c, &ahold_ops);
    rw->obj.orphan = orphan;
    dlock__ac_add_obj(c, &rw->obj);
    *rw_out = rw;
    return 0;
}

static int start(dlock_async_rwlock *rw, bool write, int64_t wait_ms, dlock_async_rwlock_fn cb, void *ud)
{
    if (!rw || !cb || wait_ms < DLOCK_WAIT_FOREVER) return DLOCK_EINVAL;
    if (rw->orphaned) return DLOCK_ECLOSED;
    if (rw->pending != IDLE) return DLOCK_EINVAL;
    if (!dlock__ahold_valid(&rw->hold)) rw->rcount = rw->wcount = 0;
    if (write && rw->rcount > 0 && rw->wcount == 0) return DLOCK_EUPGRADE;
    int64_t lease = rw->lease_ms ? rw->lease_ms : dlock__ac_options(rw->c)->watchdog_timeout_ms;
    snprintf(rw->lease_arg, sizeof(rw->lease_arg), "%lld", (long long)lease);
    snprintf(rw->intent_arg, sizeof(rw->intent_arg), "%lld", (long long)(wait_ms == 0 ? 0 : rw->intent_ms));
    rw->write = write;
    rw->op.exclusive = write;
    rw->waited = wait_ms != 0;
    rw->pending = ACQUIRING;
    rw->cb = cb;
    rw->ud = ud;
    int rc = dlock__aop_start(&rw->op, wait_ms);
    if (rc) {
        rw->pending = IDLE;
        rw->cb = NULL;
    }
    return rc;
}

DLOCK_API int dlock_async_rwlock_read_lock(dlock_async_rwlock *rw, int64_t wait_ms, dlock_async_rwlock_fn cb,
                                           void *ud)
{
    return start(rw, false, wait_ms, cb, ud);
}

DLOCK_API int dlock_async_rwlock_write_lock(dlock_async_rwlock *rw, int64_t wait_ms, dlock_async_rwlock_fn cb,
                                            void *ud)
{
    return start(rw, true, wait_ms, cb, ud);
}

static int unlock(dlock_async_rwlock *rw, bool write, dlock_async_rwlock_fn cb, void *ud)
{
    if (!rw || !cb) return DLOCK_EINVAL;
    if (rw->orphaned) return DLOCK_ECLOSED;
    if (rw->pending != IDLE) return DLOCK_EINVAL;
    if (rw->lost) {
        rw->lost = false;
        return DLOCK_ELOST;
    }
    if ((write ? rw->wcount : rw->rcount) == 0) return DLOCK_ENOTHELD;
    int rc = send_release(rw, write, rel_reply);
    if (rc) return rc;
    /* the last hold of the side publishes: the next head's try may go behind it */
    rw->rel_counted = (write ? rw->wcount : rw->rcount) == 1 &&
                      dlock__asub_release_sent(dlock__ac_sub(rw->c), rw->keys[K_CHAN]);
    rw->write = write;
    rw->pending = RELEASING;
    rw->cb = cb;
    rw->ud = ud;
    return 0;
}

DLOCK_API int dlock_async_rwlock_read_unlock(dlock_async_rwlock *rw, dlock_async_rwlock_fn cb, void *ud)
{
    return unlock(rw, false, cb, ud);
}

DLOCK_API int dlock_async_rwlock_write_unlock(dlock_async_rwlock *rw, dlock_async_rwlock_fn cb, void *ud)
{
    return unlock(rw, true, cb, ud);
}

DLOCK_API int dlock_async_rwlock_cancel(dlock_async_rwlock *rw)
{
    if (!rw || rw->pending != ACQUIRING) return DLOCK_ENOTHELD;
    dlock__aop_end(&rw->op, DLOCK_ECANCELED);
    return 0;
}

DLOCK_API int64_t dlock_async_rwlock_read_count(const dlock_async_rwlock *rw)
{
    return rw && !rw->orphaned && dlock__ahold_valid(&rw->hold) ? rw->rcount : 0;
}

DLOCK_API int64_t dlock_async_rwlock_write_count(const dlock_async_rwlock *rw)
{
    return rw && !rw->orphaned && dlock__ahold_valid(&rw->hold) ? rw->wcount : 0;
}

DLOCK_API int64_t dlock_async_rwlock_validity_ms(const dlock_async_rwlock *rw)
{
    return rw && !rw->orphaned ? dlock__ahold_validity_ms(&rw->hold) : 0;
}

DLOCK_API void dlock_async_rwlock_set_on_lost(dlock_async_rwlock *rw, dlock_async_rwlock_lost_fn fn, void *ud)
{
    if (!rw) return;
    rw->on_lost = fn;
    rw->on_lost_ud = ud;
}
