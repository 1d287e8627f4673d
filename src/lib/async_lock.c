/* async_lock.c: dlock_async_lock (async.h), the simple and the reentrant
 * lock on an event loop, with the blocking lock's keys, scripts and
 * channels (lock.c's design note: K, "{K}:fence", "dlock_lock__channel:
 * {K}" / "redisson_lock__channel:{K}"), so blocking and asynchronous
 * holders of one name exclude and wake each other.
 * States: idle -> acquiring (the driver of async_wait.c) -> held (count
 * >= 1, the hold's validity and watchdog) -> unlocking -> idle; held ->
 * lost (deadline passed or renewal found it gone: the next unlock says
 * ELOST). One operation at a time on a handle.
 * Memory: one reference for the user and one per request in flight, so a
 * handle freed with a try still out lives until its answer, and gives
 * back a hold that answer brings (nobody will use it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_internal.h"
#include "opts_read.h"
#include "scripts.h"
#include "util.h"

#define FENCE_TTL_MS "3600000" /* as lock.c */
#define RECHECK_MAX_SIMPLE_MS 1000
#define RECHECK_MAX_REENTRANT_MS 5000

enum { IDLE = 0, ACQUIRING, UNLOCKING };

struct dlock_async_lock {
    dlock__aobj obj;
    dlock_async_client *c;
    dlock_lock_kind kind;
    char *name, *key, *fence_key, *channel, *explicit_owner;
    char owner[DLOCK_OWNER_MAX + 1]; /* of the current / last acquisition */
    char lease_arg[24];
    uint64_t fence;
    int64_t count;        /* holds (SIMPLE: 0 or 1) */
    int64_t try_sent_ms;  /* the try in flight was sent then */
    int64_t lease_ms;     /* of the pending / current acquisition */
    bool want_watchdog;   /* the acquire asked for watchdog mode */
    dlock__aop op;
    dlock__ahold hold;
    dlock_async_lock_fn cb; /* the pending operation's */
    void *ud;
    int pending;
    int refs;
    bool freed, orphaned, lost, unknown;
    bool rel_counted; /* the pending unlock was counted (dlock__asub_release_sent) */
    dlock_async_lost_fn on_lost;
    void *on_lost_ud;
};

#define LOCK_OF_OP(p) ((dlock_async_lock *)(void *)((char *)(p)-offsetof(dlock_async_lock, op)))
#define LOCK_OF_HOLD(p) ((dlock_async_lock *)(void *)((char *)(p)-offsetof(dlock_async_lock, hold)))
#define LOCK_OF_OBJ(p) ((dlock_async_lock *)(void *)((char *)(p)-offsetof(dlock_async_lock, obj)))

static void lock_release_mem(dlock_async_lock *l)
{
    free(l->name);
    free(l->key);
    free(l->fence_key);
    free(l->channel);
    free(l->explicit_owner);
    free(l);
}

static void unref(dlock_async_lock *l)
{
    if (--l->refs == 0) lock_release_mem(l);
}

static long long elem_int(const dlock__reply *r, size_t i)
{
    const dlock__reply *e = dlock__reply_at(r, i);
    if (!e) return 0;
    if (dlock__reply_kind(e) == DLOCK__R_STRING) return strtoll(dlock__reply_str(e, NULL), NULL, 10);
    return dlock__reply_int(e);
}

/* Runs the pending operation's callback (with a reference: it may free l). */
static void complete(dlock_async_lock *l, int rc)
{
    dlock_async_lock_fn cb = l->cb;
    void *ud = l->ud;
    l->cb = NULL;
    l->pending = IDLE;
    if (!cb) return;
    l->refs++;
    cb(l, rc, ud);
    unref(l);
}

static int eval(dlock_async_lock *l, const dlock__script *s, int nargs, const char *const *args,
                dlock__areply_fn fn, uint64_t tag)
{
    const char *keys[2] = {l->key, l->fence_key};
    int nkeys = s == &dlock__script_lock_acquire || s == &dlock__script_rlock_acquire ? 2 : 1;
    int rc = dlock__ac_eval(l->c, s, nkeys, keys, nargs, args, fn, l, tag);
    if (rc == 0) l->refs++;
    return rc;
}

/* ---- giving back a hold nobody asked for ---------------------------------------- */

static void undo_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    (void)reply;
    (void)tag;
    dlock_async_lock *l = priv;
    if (rc && !l->orphaned) dlock__ac_log(l->c, DLOCK_LOG_WARN, "async lock %s: giving back a cancelled "
                                          "acquisition failed (%s): it expires on its lease", l->name,
                                          dlock_strerror(rc));
    unref(l);
}

static void send_release(dlock_async_lock *l, dlock__areply_fn fn, uint64_t tag, int *rc_out);

static void undo(dlock_async_lock *l)
{
    int rc = 0;
    if (!l->orphaned) send_release(l, undo_reply, 0, &rc);
}

/* ---- acquire --------------------------------------------------------------------- */

static void acq_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag);

static int try_send(dlock__aop *op, uint64_t tag)
{
    dlock_async_lock *l = LOCK_OF_OP(op);
    const char *args[3] = {l->owner, l->lease_arg, FENCE_TTL_MS};
    const dlock__script *s = l->kind == DLOCK_LOCK_SIMPLE ? &dlock__script_lock_acquire : &dlock__script_rlock_acquire;
    l->try_sent_ms = dlock__now_ms();
    return eval(l, s, 3, args, acq_reply, tag);
}

static void op_done(dlock__aop *op, int rc)
{
    complete(LOCK_OF_OP(op), rc);
}

static const dlock__aop_ops aop_ops = {.try_send = try_send, .done = op_done};

/* An acquired answer: the hold begins (re-entry: one more), then the
 * caller is told. */
static int took(dlock_async_lock *l, const dlock__reply *reply)
{
    long long kind = elem_int(reply, 0);
    if (kind == 2) {
        l->count = elem_int(reply, 1);
        if (!l->fence) l->fence = (uint64_t)elem_int(reply, 2);
    } else {
        l->count = 1;
        l->fence = (uint64_t)elem_int(reply, 1);
    }
    l->unknown = l->lost = false;
    return dlock__ahold_begin(&l->hold, l->want_watchdog, l->try_sent_ms, l->lease_ms);
}

static void acq_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    dlock_async_lock *l = priv;
    bool got = rc == 0 && dlock__reply_kind(reply) == DLOCK__R_ARRAY && elem_int(reply, 0) >= 1;
    if (l->orphaned) {
        unref(l);
        return;
    }
    if (!l->op.active || tag != l->op.gen) {
        if (got) undo(l); /* the acquire ended (cancel, timeout, free) before this answer */
        unref(l);
        return;
    }
    int64_t ttl = -1;
    if (got) {
        rc = took(l, reply);
        if (rc) undo(l);
    } else if (rc == 0 && dlock__reply_kind(reply) == DLOCK__R_ARRAY) {
        rc = DLOCK_EBUSY;
        ttl = elem_int(reply, 1);
    } else if (rc == 0) {
        rc = DLOCK_ESERVER;
    }
    if (rc == DLOCK_EUNKNOWN) l->unknown = true;
    dlock__aop_result(&l->op, tag, rc, ttl);
    unref(l);
}

/* ---- unlock ------------------------------------------------------------------------- */

static void send_release(dlock_async_lock *l, dlock__areply_fn fn, uint64_t tag, int *rc_out)
{
    if (l->kind == DLOCK_LOCK_SIMPLE) {
        const char *args[3] = {l->owner, l->channel, dlock__pub_cmd(l->op.sharded)};
        *rc_out = eval(l, &dlock__script_lock_release, 3, args, fn, tag);
    } else {
        const char *args[4] = {l->owner, l->lease_arg, l->channel, dlock__pub_cmd(l->op.sharded)};
        *rc_out = eval(l, &dlock__script_rlock_release, 4, args, fn, tag);
    }
}

/* The release script's answer as the blocking unlock reads it: SIMPLE 1
 * released; REENTRANT n > 0 holds left, 0 released; -1 no such key, -2
 * another owner's. */
static int released(dlock_async_lock *l, long long v)
{
    if (l->kind == DLOCK_LOCK_REENTRANT && v > 0) {
        l->count = v;
        return 0;
    }
    bool ok = l->kind == DLOCK_LOCK_SIMPLE ? v == 1 : v == 0;
    bool believed = l->count > 0;
    l->count = 0;
    l->unknown = false;
    dlock__ahold_end(&l->hold);
    if (ok) return 0;
    if (believed) return DLOCK_ELOST;
    return v == -1 ? DLOCK_ENOTHELD : DLOCK_ENOTOWNER;
}

static void unlock_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    (void)tag;
    dlock_async_lock *l = priv;
    if (l->orphaned || l->pending != UNLOCKING) {
        unref(l);
        return;
    }
    long long v = rc == 0 && dlock__reply_kind(reply) == DLOCK__R_INTEGER ? dlock__reply_int(reply) : -1;
    bool published = l->kind == DLOCK_LOCK_SIMPLE ? v == 1 : v == 0;
    dlock__asub_release_done(dlock__ac_sub(l->c), l->channel, l->rel_counted, published);
    if (rc == 0 && dlock__reply_kind(reply) == DLOCK__R_INTEGER) {
        rc = released(l, dlock__reply_int(reply));
    } else if (rc == 0) {
        rc = DLOCK_ESERVER;
    }
    complete(l, rc);
    unref(l);
}

/* ---- the watchdog's renewals and the loss --------------------------------------------- */

static void renew_reply(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    dlock_async_lock *l = priv;
    if (!l->orphaned) {
        if (rc == 0) rc = dlock__reply_kind(reply) == DLOCK__R_INTEGER && dlock__reply_int(reply) == 1 ? 0
                                                                                                     : DLOCK_ELOST;
        dlock__ahold_renewed(&l->hold, tag, rc);
    }
    unref(l);
}

static int renew_send(dlock__ahold *h, int64_t lease_ms, uint64_t tag)
{
    dlock_async_lock *l = LOCK_OF_HOLD(h);
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
    const char *args[2] = {l->owner, lease};
    const dlock__script *s = l->kind == DLOCK_LOCK_SIMPLE ? &dlock__script_lock_renew : &dlock__script_rlock_renew;
    return eval(l, s, 2, args, renew_reply, tag);
}

static void hold_lost(dlock__ahold *h)
{
    dlock_async_lock *l = LOCK_OF_HOLD(h);
    l->count = 0;
    l->lost = true;
    dlock__ac_log(l->c, DLOCK_LOG_WARN, "async lock %s lost: no good renewal before its validity deadline, "
                  "or the server no longer has it", l->name);
    if (!l->on_lost) return;
    l->refs++;
    l->on_lost(l, DLOCK_ELOST, l->on_lost_ud);
    unref(l);
}

static const dlock__ahold_ops ahold_ops = {.renew_send = renew_send, .lost = hold_lost};

/* ---- the client goes ------------------------------------------------------------------- */

static void end_pending(dlock_async_lock *l, int rc)
{
    if (l->pending == ACQUIRING) dlock__aop_end(&l->op, rc);
    else if (l->pending == UNLOCKING) complete(l, rc);
}

static void orphan(dlock__aobj *o)
{
    dlock_async_lock *l = LOCK_OF_OBJ(o);
    l->refs++;
    end_pending(l, DLOCK_ECLOSED);
    if (dlock__ahold_valid(&l->hold))
        dlock__ac_log(l->c, DLOCK_LOG_WARN, "async client freed while lock %s is held: not released, it "
                      "expires on its lease", l->name);
    dlock__aop_dispose(&l->op);
    dlock__ahold_dispose(&l->hold);
    l->orphaned = true;
    l->count = 0;
    unref(l);
}

/* ---- the API ------------------------------------------------------------------------------ */

DLOCK_API void dlock_async_lock_options_init(dlock_async_lock_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->kind = DLOCK_LOCK_SIMPLE;
}

static int make_names(dlock_async_lock *l, const char *prefix, const char *name)
{
    size_t n = strlen(prefix) + strlen(name) + 1;
    l->name = strdup(name);
    l->key = malloc(n);
    l->fence_key = malloc(n + 32);
    if (!l->name || !l->key || !l->fence_key) return DLOCK_ENOMEM;
    snprintf(l->key, n, "%s%s", prefix, name);
    if (dlock__companion_key(l->key, ":fence", l->fence_key, n + 32) != 0) return DLOCK_EINVAL;
    l->channel = l->kind == DLOCK_LOCK_REENTRANT ? dlock__redisson_channel(l->key)
                                                 : dlock__lock_channel("dlock_lock__channel:", l->key);
    return l->channel ? 0 : DLOCK_ENOMEM;
}

static int check_new(dlock_async_client *c, const char *name, const dlock_async_lock_options *o)
{
    if (!c || !o || dlock__check_name(name) != 0) {
        if (c) dlock__ac_log(c, DLOCK_LOG_WARN, "async lock: name missing, empty or longer than %d bytes",
                             DLOCK_NAME_MAX);
        return DLOCK_EINVAL;
    }
    if (dlock__ac_closing(c)) return DLOCK_ECLOSED;
    if (o->kind != DLOCK_LOCK_SIMPLE && o->kind != DLOCK_LOCK_REENTRANT) return DLOCK_EINVAL;
    if (o->owner_id && (!*o->owner_id || strnlen(o->owner_id, DLOCK_OWNER_MAX + 1) > DLOCK_OWNER_MAX))
        return DLOCK_EINVAL;
    return 0;
}

DLOCK_API int dlock_async_lock_new(dlock_async_client *c, const char *name, const dlock_async_lock_options *opts,
                                   dlock_async_lock **lock_out)
{
    if (!lock_out) return DLOCK_EINVAL;
    *lock_out = NULL;
    dlock_async_lock_options o;
    dlock_async_lock_options_init(&o);
    if (opts && dlock__opts_read(&o, sizeof(o), sizeof(o), opts) != 0) return DLOCK_EINVAL;
    int rc = check_new(c, name, &o);
    if (rc) return rc;
    dlock_async_lock *l = calloc(1, sizeof(*l));
    if (!l) return DLOCK_ENOMEM;
    l->c = c;
    l->kind = o.kind;
    l->refs = 1;
    l->on_lost = o.on_lost;
    l->on_lost_ud = o.on_lost_ud;
    rc = make_names(l, dlock__ac_options(c)->key_prefix, name);
    if (rc == 0 && o.owner_id && !(l->explicit_owner = strdup(o.owner_id))) rc = DLOCK_ENOMEM;
    if (rc) {
        lock_release_mem(l);
        return rc;
    }
    int64_t recheck = l->kind == DLOCK_LOCK_SIMPLE ? RECHECK_MAX_SIMPLE_MS : RECHECK_MAX_REENTRANT_MS;
    dlock__aop_init(&l->op, c, &aop_ops, l->channel, dlock__ac_sharded(c, l->key, l->channel), recheck);
    l->op.exclusive = true;
    dlock__ahold_init(&l->hold, c, &ahold_ops);
    if (l->kind == DLOCK_LOCK_REENTRANT && !l->explicit_owner)
        snprintf(l->owner, sizeof(l->owner), "%s:a%llu", dlock_async_client_id(c),
                 (unsigned long long)dlock__ac_serial(c));
    dlock__ac_add_obj(c, &l->obj);
    l->obj.orphan = orphan;
    *lock_out = l;
    return 0;
}

/* The owner value this acquisition sends (SIMPLE default: a fresh token,
 * unless re-sending the one of an acquisition whose outcome is unknown). */
static int pick_owner(dlock_async_lock *l)
{
    if (l->explicit_owner) {
        snprintf(l->owner, sizeof(l->owner), "%s", l->explicit_owner);
        return 0;
    }
    if (l->kind == DLOCK_LOCK_REENTRANT || l->unknown) return 0;
    return dlock__err_from_common(dlock__random_hex(l->owner, 16));
}

DLOCK_API int dlock_async_lock_acquire(dlock_async_lock *l, int64_t wait_ms, int64_t lease_ms,
                                       dlock_async_lock_fn cb, void *ud)
{
    if (!l || !cb || lease_ms < 0 || wait_ms < DLOCK_WAIT_FOREVER) return DLOCK_EINVAL;
    if (l->orphaned) return DLOCK_ECLOSED;
    if (l->pending != IDLE) return DLOCK_EINVAL;
    bool held = dlock__ahold_valid(&l->hold) && l->count > 0;
    if (held && l->kind == DLOCK_LOCK_SIMPLE) return DLOCK_EALREADY;
    if (!held) {
        int rc = pick_owner(l);
        if (rc) return rc;
        l->want_watchdog = lease_ms == 0;
        l->lease_ms = lease_ms ? lease_ms : dlock__ac_options(l->c)->watchdog_timeout_ms;
        l->fence = 0;
    }
    snprintf(l->lease_arg, sizeof(l->lease_arg), "%lld", (long long)l->lease_ms);
    l->pending = ACQUIRING;
    l->cb = cb;
    l->ud = ud;
    int rc = dlock__aop_start(&l->op, held ? 0 : wait_ms);
    if (rc) {
        l->pending = IDLE;
        l->cb = NULL;
    }
    return rc;
}

DLOCK_API int dlock_async_lock_unlock(dlock_async_lock *l, dlock_async_lock_fn cb, void *ud)
{
    if (!l || !cb) return DLOCK_EINVAL;
    if (l->orphaned) return DLOCK_ECLOSED;
    if (l->pending != IDLE) return DLOCK_EINVAL;
    if (l->lost) {
        l->lost = false;
        return DLOCK_ELOST;
    }
    if (l->count == 0 && !l->unknown) return DLOCK_ENOTHELD;
    int rc = 0;
    send_release(l, unlock_reply, 0, &rc);
    if (rc) return rc;
    /* the last hold's release publishes: the next head's try may go behind it */
    l->rel_counted = (l->kind == DLOCK_LOCK_SIMPLE || l->count <= 1) &&
                     dlock__asub_release_sent(dlock__ac_sub(l->c), l->channel);
    l->pending = UNLOCKING;
    l->cb = cb;
    l->ud = ud;
    return 0;
}

DLOCK_API int dlock_async_lock_cancel(dlock_async_lock *l)
{
    if (!l || l->pending != ACQUIRING) return DLOCK_ENOTHELD;
    dlock__aop_end(&l->op, DLOCK_ECANCELED);
    return 0;
}

DLOCK_API bool dlock_async_lock_is_held(const dlock_async_lock *l)
{
    return l && !l->orphaned && l->count > 0 && dlock__ahold_valid(&l->hold);
}

DLOCK_API int64_t dlock_async_lock_validity_ms(const dlock_async_lock *l)
{
    return dlock_async_lock_is_held(l) ? dlock__ahold_validity_ms(&l->hold) : 0;
}

DLOCK_API uint64_t dlock_async_lock_fence(const dlock_async_lock *l)
{
    return l ? l->fence : 0;
}

DLOCK_API const char *dlock_async_lock_owner(const dlock_async_lock *l)
{
    return l ? l->owner : "";
}

DLOCK_API const char *dlock_async_lock_name(const dlock_async_lock *l)
{
    return l ? l->name : "";
}

DLOCK_API const char *dlock_async_lock_key(const dlock_async_lock *l)
{
    return l ? l->key : "";
}

DLOCK_API void dlock_async_lock_free(dlock_async_lock *l)
{
    if (!l || l->freed) return;
    l->freed = true;
    if (!l->orphaned) {
        dlock_async_client *c = l->c;
        end_pending(l, DLOCK_ECANCELED);
        if (dlock_async_lock_is_held(l))
            dlock__ac_log(c, DLOCK_LOG_WARN, "async lock %s freed while held: not released, it expires on its "
                          "lease", l->name);
        dlock__aop_dispose(&l->op);
        dlock__ahold_dispose(&l->hold);
        dlock__ac_remove_obj(c, &l->obj);
    }
    unref(l);
}
