/* lock.c: the simple (redis-py/redlock layout) and reentrant (Redisson
 * RLock layout) locks: acquire with bounded pub/sub waiting, release,
 * extend, watchdog renewal, lost-lock detection and server queries.
 *
 * Design note (details in docs/locks.md).
 * Keys: lock key K = prefix + name; fence key "{K}:fence" (K + ":fence"
 * when K has a hash tag; dlock__companion_key covers names no tag can hold)
 * and label key "{K}:label" (a hash {owner: label} with K's lease, written
 * by the acquire script, renewed and deleted with K; status reads only the
 * holder's entry) so every script touches one Cluster slot.
 * SIMPLE: K = token (string) with PX lease. REENTRANT: hash K {owner: count}.
 * Unlock channels: SIMPLE "dlock_lock__channel:{K}", REENTRANT
 * "redisson_lock__channel:{K}" (message "0", as Redisson publishes); both
 * drop the braces when K has a '{' (dlock__lock_channel). On a Cluster a
 * channel in K's slot is sharded (SSUBSCRIBE/SPUBLISH).
 * States of a handle: the one hold state machine of hold.h: free -> held
 * (count >= 1) -> free, or held -> lost (watchdog found it gone: is_held
 * false, the next unlock returns ELOST), unknown after a lost answer.
 * The public functions are lock_api.c's; this file is the Redis backend's
 * lock operations (dlock__redis_lock_ops, backend.h).
 * Waiting: the family's one mechanism (dlock__fam_wait, family.c): try,
 * subscribe (wake-one), try again, then sleep until a message, the holder's
 * TTL or a growing recheck interval, whichever is first; cancellation is
 * the handle's dlock__waitctl.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/lock.h"
#include "backend.h"
#include "family.h"
#include "hold.h"
#include "scripts.h"
#include "util.h"


/* PX of the fence counter, set only when the acquire script seeds it
 * (its first use, or after it expired): later INCRs keep that expiry, so a
 * counter lives 1 h from its seeding, not from its last use. A re-seeded
 * counter starts from the server clock in microseconds, above any token
 * the old one gave (lua/lock_acquire.lua, lua/rlock_acquire.lua). */
#define FENCE_TTL_MS "3600000"
#define RECHECK_MIN_MS 50
#define RECHECK_MAX_SIMPLE_MS 1000   /* foreign holders may not publish */
#define RECHECK_MAX_REENTRANT_MS 5000

/* lua/<name>.lua, embedded with its SHA1 at build time (script.h) */
extern const dlock__script dlock__script_lock_status;
extern const dlock__script dlock__script_lock_force_unlock;
extern const dlock__script dlock__script_fence_guard;
extern const dlock__script dlock__script_lock_label;

typedef struct rlock {
    dlock_client *c;
    dlock_lock *pub; /* the public handle (for on_lost) */
    dlock_lock_kind kind;
    char *name, *key, *fence_key, *label_key, *channel;
    bool sharded; /* channel (dlock__client_sharded) */
    char *explicit_owner; /* NULL: default owner rule */
    dlock_lost_fn on_lost;
    void *on_lost_ud;
    dlock__hold hold; /* held / lost / unknown / watched / orphaned (hold.h) */
    char lease_arg[24]; /* lease as text, for renewals */

    pthread_mutex_t mu; /* guards everything below */
    int64_t count;
    char owner[DLOCK_OWNER_MAX + 1];
    uint64_t fence;
    int64_t lease_ms;   /* 0: watchdog mode */
    char *label;        /* NULL: none; what each acquisition writes */

    dlock__waitctl ctl; /* waits and their cancellation (family.h); own lock */
} rlock;

#define LOCK_OF(p) ((rlock *)(void *)((char *)(p)-offsetof(rlock, hold)))

static const char *kind_name(dlock_lock_kind k)
{
    return k == DLOCK_LOCK_REENTRANT ? "reentrant" : "simple";
}

/* ---- keys and construction ------------------------------------------ */

static char *make_key(dlock_client *c, const char *name)
{
    size_t n = strlen(dlock__client_options(c)->key_prefix) + strlen(name) + 1;
    char *k = malloc(n);
    if (k && dlock__client_key(c, name, k, n) != 0) {
        free(k);
        k = NULL;
    }
    return k;
}

static char *make_channel(dlock_lock_kind kind, const char *key)
{
    if (kind == DLOCK_LOCK_REENTRANT) return dlock__redisson_channel(key);
    return dlock__lock_channel("dlock_lock__channel:", key);
}

static char *make_companion(const char *key, const char *suffix)
{
    size_t n = strlen(key) + 32; /* "{}" or "#" + n, and the suffix */
    char *f = malloc(n);
    if (f && dlock__companion_key(key, suffix, f, n) != 0) {
        free(f);
        f = NULL;
    }
    return f;
}

static int lock_renew(dlock__hold *h, int64_t lease_ms);
static int lock_prepare(dlock__hold *h, int64_t lease_ms, dlock__renew_cmd *cmd);
static int lock_finish(dlock__hold *h, const dlock__reply *reply);
static void lock_lost(dlock__hold *h, int reason);

/* Only held handles describe themselves (hold.c asks only those). */
static void lock_describe(const dlock__hold *h, char *buf, size_t len)
{
    const rlock *l = LOCK_OF(h);
    snprintf(buf, len, "lock %s (%s)", l->name, kind_name(l->kind));
}

static const dlock__hold_ops hold_ops = {.renew = lock_renew, .prepare = lock_prepare,
                                         .finish = lock_finish, .lost = lock_lost,
                                         .describe = lock_describe};

/* Frees the handle and the strings it owns (not its locks). */
static void free_strings(rlock *l)
{
    free(l->name);
    free(l->key);
    free(l->fence_key);
    free(l->label_key);
    free(l->label);
    free(l->channel);
    free(l->explicit_owner);
    free(l);
}

/* Arguments checked by lock_api.c (client, name, kind). */
static int redis_lock_new(dlock_client *c, const char *name, const dlock_lock_options *opts,
                          dlock_lock *pub, void **impl_out)
{
    if (opts->owner_id && (!*opts->owner_id || strnlen(opts->owner_id, DLOCK_OWNER_MAX + 1) > DLOCK_OWNER_MAX))
        return DLOCK_EINVAL;
    rlock *l = calloc(1, sizeof(*l));
    if (!l) return DLOCK_ENOMEM;
    l->c = c;
    l->pub = pub;
    l->kind = opts->kind;
    l->on_lost = opts->on_lost;
    l->on_lost_ud = opts->on_lost_ud;
    l->name = strdup(name);
    l->key = make_key(c, name);
    l->fence_key = l->key ? make_companion(l->key, ":fence") : NULL;
    l->label_key = l->key ? make_companion(l->key, ":label") : NULL;
    l->channel = l->key ? make_channel(l->kind, l->key) : NULL;
    l->explicit_owner = opts->owner_id ? strdup(opts->owner_id) : NULL;
    bool oom = !l->name || !l->key || !l->fence_key || !l->label_key || !l->channel ||
               (opts->owner_id && !l->explicit_owner); /* a label comes by set_label */
    bool mu_ok = !oom && pthread_mutex_init(&l->mu, NULL) == 0;
    if (mu_ok && dlock__waitctl_init(&l->ctl) != 0) {
        pthread_mutex_destroy(&l->mu);
        mu_ok = false;
    }
    if (mu_ok && dlock__hold_init(&l->hold, c, &hold_ops) != 0) {
        dlock__waitctl_destroy(&l->ctl);
        pthread_mutex_destroy(&l->mu);
        mu_ok = false;
    }
    if (!mu_ok) {
        free_strings(l);
        return DLOCK_ENOMEM;
    }
    l->sharded = dlock__client_sharded(c, l->key, l->channel);
    *impl_out = l;
    return 0;
}

/* ---- owners and script calls ------------------------------------------ */

/* The owner value a call from this thread would use for a new hold. */
static int call_owner(const rlock *l, char *out, size_t len)
{
    if (l->explicit_owner) {
        snprintf(out, len, "%s", l->explicit_owner);
        return 0;
    }
    if (l->kind == DLOCK_LOCK_SIMPLE) return dlock__err_from_common(dlock__random_hex(out, 16));
    dlock__thread_owner(l->c, out, len);
    return 0;
}

static long long elem_int(const dlock__reply *r, size_t i)
{
    const dlock__reply *e = dlock__reply_at(r, i);
    if (!e) return 0;
    if (dlock__reply_kind(e) == DLOCK__R_STRING) return strtoll(dlock__reply_str(e, NULL), NULL, 10);
    return dlock__reply_int(e);
}

/* A script reply that is an ERROR: log it, ESERVER. */
static int server_error(const rlock *l, const char *what, const dlock__reply *r)
{
    dlock__log(l->c, DLOCK_LOG_ERROR, "%s %s: %s", what, l->name, dlock__reply_str(r, NULL));
    return DLOCK_ESERVER;
}

typedef struct attempt_result {
    bool plain;     /* in: SET NX PX without a fencing token (plain_ok) */
    bool no_hint;   /* in: plain and no wait: the holder's TTL is not needed */
    int state;      /* 0 busy, 1 first acquisition, 2 re-entry */
    int64_t ttl_ms; /* busy: holder's pttl */
    int64_t count;  /* re-entry: new hold count */
    uint64_t fence;
    int acked;      /* replicas that acknowledged */
} attempt_result;

/* Whether an acquire may be the plain redis-py/redlock one, `SET K token
 * NX PX lease` without the script: a SIMPLE lock with a fresh random token
 * (an explicit owner id needs the script's "already mine" rule), no
 * fencing token asked for, no replica wait (WAIT pipelining is the
 * script path's). Such a hold has no fencing token (dlock_lock_fence 0). */
static bool plain_ok(const rlock *l, const uint64_t *fence_out)
{
    return l->kind == DLOCK_LOCK_SIMPLE && !l->explicit_owner && !fence_out && !l->label &&
           dlock__client_options(l->c)->wait_replicas == 0;
}

/* The plain acquire, with PTTL pipelined for the waiting hint (none when
 * not waiting): one round trip, no script. */
static int attempt_plain(rlock *l, const char *owner, int64_t lease_ms, attempt_result *res)
{
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
    const char *set[6] = {"SET", l->key, owner, "NX", "PX", lease};
    const char *pttl[2] = {"PTTL", l->key};
    const char *const *argvs[2] = {set, pttl};
    const int argcs[2] = {6, 2};
    dlock__reply *rs[2];
    rs[1] = NULL;
    int rc = dlock__client_cmds(l->c, res->no_hint ? 1 : 2, argcs, argvs, rs);
    if (rc == 0 && dlock__reply_kind(rs[0]) == DLOCK__R_ERROR) rc = server_error(l, "acquire", rs[0]);
    if (rc == 0) {
        res->state = dlock__reply_kind(rs[0]) == DLOCK__R_NIL ? 0 : 1;
        res->ttl_ms = res->state == 0 && rs[1] ? dlock__reply_int(rs[1]) : 0;
        res->count = 1;
        res->fence = 0;
    }
    dlock__reply_free(rs[0]);
    dlock__reply_free(rs[1]);
    return rc;
}

static int attempt(rlock *l, const char *owner, int64_t lease_ms, attempt_result *res)
{
    if (res->plain) return attempt_plain(l, owner, lease_ms, res);
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
    const char *keys[3] = {l->key, l->fence_key, l->label_key};
    pthread_mutex_lock(&l->mu); /* the label may be replaced (set_label) */
    char *label = l->label ? strdup(l->label) : NULL;
    pthread_mutex_unlock(&l->mu);
    const char *args[4] = {owner, lease, FENCE_TTL_MS, label};
    const dlock_client_options *o = dlock__client_options(l->c);
    dlock__reply *r = NULL;
    int rc = dlock__client_eval_wait(l->c, l->kind == DLOCK_LOCK_SIMPLE ? &dlock__script_lock_acquire : &dlock__script_rlock_acquire, 3,
                                     keys, label ? 4 : 3, args, o->wait_replicas, o->wait_replicas_timeout_ms, &r,
                                     &res->acked);
    free(label);
    if (rc == 0 && dlock__reply_count(r) < 2) rc = server_error(l, "acquire", r);
    if (rc == 0) {
        res->state = (int)elem_int(r, 0);
        res->ttl_ms = res->state == 0 ? elem_int(r, 1) : 0;
        res->count = res->state == 2 ? elem_int(r, 1) : 1;
        res->fence = (uint64_t)elem_int(r, res->state == 2 ? 2 : 1);
    }
    dlock__reply_free(r);
    return rc;
}

/* Runs the release script for owner. *res_out: SIMPLE 1 released; REENTRANT
 * holds left (0 released); both -1 no key, -2 another owner. */
static int release_script(rlock *l, const char *owner, int64_t lease_ms, long long *res_out)
{
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
    const char *keys[2] = {l->key, l->label_key};
    dlock__reply *r = NULL;
    int rc;
    if (l->kind == DLOCK_LOCK_SIMPLE) {
        const char *args[3] = {owner, l->channel, dlock__pub_cmd(l->sharded)};
        rc = dlock__client_eval(l->c, &dlock__script_lock_release, 2, keys, 3, args, &r);
    } else {
        const char *args[4] = {owner, lease, l->channel, dlock__pub_cmd(l->sharded)};
        rc = dlock__client_eval(l->c, &dlock__script_rlock_release, 2, keys, 4, args, &r);
    }
    if (rc == 0 && dlock__reply_kind(r) != DLOCK__R_INTEGER) rc = server_error(l, "release", r);
    if (rc == 0) *res_out = dlock__reply_int(r);
    dlock__reply_free(r);
    return rc;
}

/* Renews owner's hold for lease_ms. With wait_replicas = n > 0 the renewal
 * is a good one only once n replicas have it (WAIT pipelined after the
 * script): a renewal only the master saw would move the holder's validity
 * past the lease a promoted replica keeps, and after a failover the next
 * holder could get in while this one still believes. DLOCK_ENOTREPL then:
 * the server has the new lease, the holder keeps its old deadline. */
static int renew_script(rlock *l, const char *owner, int64_t lease_ms)
{
    const dlock_client_options *o = dlock__client_options(l->c);
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
    const char *keys[2] = {l->key, l->label_key};
    const char *args[2] = {owner, lease};
    const dlock__script *sc = l->kind == DLOCK_LOCK_SIMPLE ? &dlock__script_lock_renew : &dlock__script_rlock_renew;
    dlock__reply *r = NULL;
    int acked = o->wait_replicas;
    int rc = o->wait_replicas > 0
                 ? dlock__client_eval_wait(l->c, sc, 2, keys, 2, args, o->wait_replicas, o->wait_replicas_timeout_ms,
                                           &r, &acked)
                 : dlock__client_eval(l->c, sc, 2, keys, 2, args, &r);
    if (rc == 0) rc = lock_finish(&l->hold, r);
    if (rc == 0 && acked < o->wait_replicas) rc = DLOCK_ENOTREPL;
    dlock__reply_free(r);
    return rc;
}

/* ---- watchdog hooks (watchdog thread) ---------------------------------- */

static int lock_prepare(dlock__hold *h, int64_t lease_ms, dlock__renew_cmd *cmd)
{
    rlock *l = LOCK_OF(h);
    if (dlock__client_options(l->c)->wait_replicas > 0) return -1; /* renew(): each renewal waits for its WAIT */
    snprintf(cmd->num, sizeof(cmd->num), "%lld", (long long)lease_ms);
    cmd->script = l->kind == DLOCK_LOCK_SIMPLE ? &dlock__script_lock_renew : &dlock__script_rlock_renew;
    cmd->nkeys = 2;
    cmd->keys[0] = l->key;
    cmd->keys[1] = l->label_key;
    cmd->nargs = 2;
    cmd->args[0] = l->owner; /* not written while the lock is watched */
    cmd->args[1] = cmd->num;
    return 0;
}

static int lock_finish(dlock__hold *h, const dlock__reply *reply)
{
    rlock *l = LOCK_OF(h);
    if (dlock__reply_kind(reply) != DLOCK__R_INTEGER) return server_error(l, "renew", reply);
    return dlock__reply_int(reply) == 1 ? 0 : DLOCK_ELOST;
}

static int lock_renew(dlock__hold *h, int64_t lease_ms)
{
    rlock *l = LOCK_OF(h);
    return renew_script(l, l->owner, lease_ms);
}

/* The hold went HELD -> LOST (hold.c; the watchdog logged and counted it). */
static void lock_lost(dlock__hold *h, int reason)
{
    rlock *l = LOCK_OF(h);
    pthread_mutex_lock(&l->mu);
    l->count = 0;
    pthread_mutex_unlock(&l->mu);
    dlock__log(l->c, DLOCK_LOG_ERROR, "lock %s (%s) was lost while held: %s", l->name,
               kind_name(l->kind), dlock_strerror(reason));
    if (l->on_lost) l->on_lost(l->pub, reason, l->on_lost_ud);
}

/* ---- acquire --------------------------------------------------------- */

/* Records a first acquisition; starts the watchdog in watchdog mode. */
static void became_holder(rlock *l, const char *owner, const attempt_result *res, int64_t lease_ms,
                          int64_t sent_ms)
{
    pthread_mutex_lock(&l->mu);
    l->count = res->count > 0 ? res->count : 1;
    snprintf(l->owner, sizeof(l->owner), "%s", owner);
    l->fence = res->fence;
    l->lease_ms = lease_ms;
    pthread_mutex_unlock(&l->mu);
    dlock__hold_begin(&l->hold, lease_ms == 0, sent_ms,
                      lease_ms > 0 ? lease_ms : dlock__client_watchdog_ms(l->c));
}

/* Ends a hold (released or found lost by us). */
static void end_hold(rlock *l, bool released)
{
    dlock__hold_end(&l->hold, released);
    pthread_mutex_lock(&l->mu);
    l->count = 0;
    pthread_mutex_unlock(&l->mu);
}

static int resolve_unknown(rlock *l, const char *owner, int64_t lease, attempt_result *res);

/* One acquisition attempt inside dlock__fam_wait. While an earlier
 * attempt's outcome is unknown, it asks before trying again. Connection
 * trouble (ECONN, EUNKNOWN) keeps the wait going like a busy lock; the last
 * such code is what the caller reports if the wait then runs out. */
typedef struct acquire_try {
    rlock *l;
    const char *owner;
    int64_t lease;
    bool unknown;     /* the last attempt's outcome is not known yet */
    int last_rc;      /* ECONN/EUNKNOWN of the last attempt, or 0 */
    attempt_result res;
    int64_t sent_ms;  /* when the last attempt was sent */
} acquire_try;

static int acquire_attempt(void *ctx, int64_t *hint_ms)
{
    acquire_try *t = ctx;
    t->sent_ms = dlock__now_ms();
    int rc = t->unknown ? resolve_unknown(t->l, t->owner, t->lease, &t->res)
                        : attempt(t->l, t->owner, t->lease, &t->res);
    if (!t->unknown && rc == DLOCK_EUNKNOWN) rc = resolve_unknown(t->l, t->owner, t->lease, &t->res);
    t->unknown = rc == DLOCK_EUNKNOWN;
    t->last_rc = rc == DLOCK_ECONN || rc == DLOCK_EUNKNOWN ? rc : 0;
    *hint_ms = rc == 0 ? t->res.ttl_ms : -1;
    if (t->last_rc) return 0;
    if (rc) return rc;
    return t->res.state != 0 ? 1 : 0;
}

static const char *acquire_channel(void *ctx, bool *sharded_out)
{
    *sharded_out = ((acquire_try *)ctx)->l->sharded;
    return ((acquire_try *)ctx)->l->channel;
}

/* Try, then wait on the unlock channel (wake-one: one release admits one
 * waiter) until acquired, wait_ms ran out or a cancel. Sleeps are capped by
 * the holder's TTL and a recheck interval that grows from RECHECK_MIN_MS
 * (foreign holders may not publish). */
static int acquire_wait(acquire_try *t, int64_t wait_ms)
{
    rlock *l = t->l;
    dlock__wait_spec sp = {.c = l->c, .ctl = &l->ctl, .attempt = acquire_attempt,
                           .channel = acquire_channel, .ctx = t, .wait_ms = wait_ms,
                           .min_nap_ms = RECHECK_MIN_MS, .wake_one = true,
                           .max_nap_ms = l->kind == DLOCK_LOCK_SIMPLE ? RECHECK_MAX_SIMPLE_MS
                                                                      : RECHECK_MAX_REENTRANT_MS};
    int rc = dlock__fam_wait(&sp);
    if ((rc == DLOCK_ETIMEOUT || rc == DLOCK_EBUSY) && t->last_rc) rc = t->last_rc;
    return rc;
}

static int undo_unreplicated(rlock *l, const char *owner, int acked, int64_t lease);

/* Re-entry of a held REENTRANT lock by its owner. */
static int reenter(rlock *l, uint64_t *fence_out)
{
    pthread_mutex_lock(&l->mu);
    int64_t lease = l->lease_ms ? l->lease_ms : dlock__client_watchdog_ms(l->c);
    bool watchdog = l->lease_ms == 0;
    pthread_mutex_unlock(&l->mu);
    attempt_result res = {0};
    int64_t sent = dlock__now_ms();
    int rc = attempt(l, l->owner, lease, &res);
    if (rc) return rc;
    if (res.state == 0) { /* someone else holds it: ours was lost */
        end_hold(l, false);
        dlock__metrics_lost(l->c);
        dlock__log(l->c, DLOCK_LOG_ERROR, "lock %s: re-entry found it held by another owner: lost", l->name);
        return DLOCK_ELOST;
    }
    int want = dlock__client_options(l->c)->wait_replicas;
    if (res.state == 1 && want > 0 && res.acked < want) { /* a new hold without its promise */
        end_hold(l, false);
        return undo_unreplicated(l, l->owner, res.acked, lease);
    }
    if (res.state == 1) { /* a new hold: its validity counts from this send */
        dlock__hold_end(&l->hold, false);
        dlock__hold_begin(&l->hold, watchdog, sent, lease);
    } else {
        dlock__hold_renewed(&l->hold, sent, lease); /* the script set the lease again */
    }
    pthread_mutex_lock(&l->mu);
    if (res.state == 1) { /* expired and taken afresh: a new first hold */
        l->count = 1;
        l->fence = res.fence;
        dlock__log(l->c, DLOCK_LOG_WARN, "lock %s: re-entry found it expired; acquired anew", l->name);
    } else {
        l->count++;
    }
    if (fence_out) *fence_out = l->fence;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

/* Replica safety for a hold found by resolve_unknown: the WAIT that
 * followed the lost attempt is lost too, and a WAIT on another connection
 * says nothing about that write. So renew the hold (an owner-checked
 * write) with WAIT pipelined: replication is one ordered stream, so a
 * replica that has the renewal has the acquisition before it. */
static int confirm_replicas(rlock *l, const char *owner, int64_t lease, int *acked_out)
{
    const dlock_client_options *o = dlock__client_options(l->c);
    *acked_out = o->wait_replicas;
    if (o->wait_replicas <= 0) return 0;
    char ls[24];
    snprintf(ls, sizeof(ls), "%lld", (long long)lease);
    const char *keys[1] = {l->key};
    const char *args[2] = {owner, ls};
    dlock__reply *r = NULL;
    int rc = dlock__client_eval_wait(l->c, l->kind == DLOCK_LOCK_SIMPLE ? &dlock__script_lock_renew : &dlock__script_rlock_renew,
                                     1, keys, 2, args, o->wait_replicas, o->wait_replicas_timeout_ms, &r, acked_out);
    if (rc == 0 && lock_finish(&l->hold, r) != 0) *acked_out = 0; /* gone again: not safe */
    dlock__reply_free(r);
    return rc ? DLOCK_EUNKNOWN : 0;
}

/* An acquire attempt ended EUNKNOWN (sent, no reply): ask whether owner
 * holds the lock now. 0 with res->state 1 (it does; fence read back) or 0
 * (it does not: keep waiting), or EUNKNOWN when the question failed too. */
static int resolve_unknown(rlock *l, const char *owner, int64_t lease, attempt_result *res)
{
    bool simple = l->kind == DLOCK_LOCK_SIMPLE;
    const char *q[3] = {simple ? "GET" : "HGET", l->key, owner};
    dlock__reply *r = NULL;
    int rc = dlock__client_cmd(l->c, simple ? 2 : 3, q, NULL, &r);
    const char *v = rc == 0 && dlock__reply_kind(r) == DLOCK__R_STRING ? dlock__reply_str(r, NULL) : NULL;
    bool mine = v && (simple ? strcmp(v, owner) == 0 : strtoll(v, NULL, 10) > 0);
    res->count = v && !simple ? strtoll(v, NULL, 10) : 1;
    dlock__reply_free(r);
    if (rc) return DLOCK_EUNKNOWN;
    res->state = mine ? 1 : 0;
    res->ttl_ms = -1;
    res->fence = 0;
    if (!mine) return 0;
    if (!res->plain) { /* a plain acquire issued no token */
        const char *g[2] = {"GET", l->fence_key};
        rc = dlock__client_cmd(l->c, 2, g, NULL, &r);
        res->fence = rc == 0 ? strtoull(dlock__reply_str(r, NULL), NULL, 10) : 0;
        dlock__reply_free(r);
    }
    dlock__log(l->c, DLOCK_LOG_INFO, "lock %s: acquire outcome was unknown; it was applied", l->name);
    return confirm_replicas(l, owner, lease, &res->acked);
}

/* Replica safety: too few replicas acknowledged a fresh acquisition. */
static int undo_unreplicated(rlock *l, const char *owner, int acked, int64_t lease)
{
    long long res = 0;
    int rc = release_script(l, owner, lease, &res);
    dlock__log(l->c, DLOCK_LOG_WARN, "lock %s: %d of %d replicas acknowledged: %s", l->name, acked,
               dlock__client_options(l->c)->wait_replicas,
               rc == 0 ? "released" : "release failed; it expires on its lease");
    return DLOCK_ENOTREPL;
}

/* Arguments checked by lock_api.c; *fence_out (if any) is 0. */
static int redis_try_lock(void *impl, int64_t wait_ms, int64_t lease_ms, uint64_t *fence_out)
{
    rlock *l = impl;
    char owner[DLOCK_OWNER_MAX + 1];
    int rc = call_owner(l, owner, sizeof(owner));
    if (rc) return rc;
    if (dlock__waitctl_take_pending(&l->ctl)) return DLOCK_ECANCELED; /* cancelled before this call */
    bool held = dlock__hold_get(&l->hold) == DLOCK__HOLD_HELD;
    pthread_mutex_lock(&l->mu);
    bool same_owner = strcmp(owner, l->owner) == 0;
    bool lapsed = held && l->lease_ms > 0 && !dlock__hold_valid(&l->hold);
    pthread_mutex_unlock(&l->mu);
    if (lapsed) { /* the explicit lease ran out while "held": that hold is over */
        dlock__log(l->c, DLOCK_LOG_WARN, "lock %s: lease ran out before unlock", l->name);
        dlock__metrics_lost(l->c);
        end_hold(l, false);
        held = false;
    }
    if (held && l->kind == DLOCK_LOCK_SIMPLE) return DLOCK_EALREADY;
    if (held) return same_owner ? reenter(l, fence_out) : DLOCK_EINVAL;

    acquire_try t = {.l = l, .owner = owner,
                     .lease = lease_ms > 0 ? lease_ms : dlock__client_watchdog_ms(l->c),
                     .res = {.plain = plain_ok(l, fence_out), .no_hint = wait_ms == 0}};
    rc = acquire_wait(&t, wait_ms);
    attempt_result res = t.res;
    int64_t lease = t.lease, sent = t.sent_ms;
    if (rc == 0) {
        int want = dlock__client_options(l->c)->wait_replicas;
        if (res.state == 1 && want > 0 && res.acked < want)
            rc = undo_unreplicated(l, owner, res.acked, lease);
    }
    if (rc != DLOCK_ECANCELED) dlock__metrics_acquire(l->c, rc);
    if (rc == DLOCK_EUNKNOWN) { /* keep the owner so is_held_by_me/unlock can resolve it */
        pthread_mutex_lock(&l->mu);
        snprintf(l->owner, sizeof(l->owner), "%s", owner);
        pthread_mutex_unlock(&l->mu);
        dlock__hold_set_unknown(&l->hold, true);
    }
    if (rc) return rc;
    became_holder(l, owner, &res, lease_ms, sent);
    if (fence_out) *fence_out = res.fence;
    return 0;
}

/* ---- release, extend, cancel ------------------------------------------- */

/* Unlock through a handle that holds nothing: only meaningful with an
 * owner the server may know (explicit id, or this thread's REENTRANT id). */
static int unlock_unheld(rlock *l)
{
    char owner[DLOCK_OWNER_MAX + 1];
    bool unknown = dlock__hold_get(&l->hold) == DLOCK__HOLD_UNKNOWN;
    pthread_mutex_lock(&l->mu);
    if (unknown) snprintf(owner, sizeof(owner), "%s", l->owner);
    pthread_mutex_unlock(&l->mu);
    if (!unknown && l->kind == DLOCK_LOCK_SIMPLE && !l->explicit_owner) return DLOCK_ENOTHELD;
    int rc = unknown ? 0 : call_owner(l, owner, sizeof(owner));
    long long res = 0;
    if (rc == 0) rc = release_script(l, owner, dlock__client_watchdog_ms(l->c), &res);
    if (rc) return rc;
    if (unknown && res >= 0 && (l->kind == DLOCK_LOCK_SIMPLE || res == 0)) {
        dlock__hold_set_unknown(&l->hold, false);
    }
    return res == -1 ? DLOCK_ENOTHELD : res == -2 ? DLOCK_ENOTOWNER : 0;
}

static int redis_unlock(void *impl)
{
    rlock *l = impl;
    char me[DLOCK_OWNER_MAX + 1] = "";
    if (l->kind == DLOCK_LOCK_REENTRANT && !l->explicit_owner) dlock__thread_owner(l->c, me, sizeof(me));
    if (dlock__hold_take_lost(&l->hold)) return DLOCK_ELOST;
    bool held = dlock__hold_get(&l->hold) == DLOCK__HOLD_HELD;
    pthread_mutex_lock(&l->mu);
    bool other_thread = held && me[0] && strcmp(me, l->owner) != 0;
    int64_t lease = l->lease_ms ? l->lease_ms : dlock__client_watchdog_ms(l->c);
    pthread_mutex_unlock(&l->mu);
    if (!held) return unlock_unheld(l);
    if (other_thread) return DLOCK_ENOTOWNER;

    long long res = 0;
    int rc = release_script(l, l->owner, lease, &res);
    if (rc) return rc; /* EUNKNOWN: still treated as held; see is_held_by_me */
    if (l->kind == DLOCK_LOCK_REENTRANT && res > 0) {
        pthread_mutex_lock(&l->mu);
        l->count = res;
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    bool released = l->kind == DLOCK_LOCK_SIMPLE ? res == 1 : res == 0;
    if (released) dlock__wait_notify_local(l->c, l->channel);
    if (!released) {
        bool counted = dlock__hold_get(&l->hold) == DLOCK__HOLD_LOST; /* the watchdog got there first */
        if (!counted) dlock__metrics_lost(l->c);
        dlock__log(l->c, DLOCK_LOG_WARN, "lock %s: release found it %s: it was lost while held",
                   l->name, res == -1 ? "gone" : "held by another owner");
    }
    end_hold(l, released);
    return released ? 0 : DLOCK_ELOST;
}

/* lease_ms > 0 (lock_api.c). */
static int redis_extend(void *impl, int64_t lease_ms)
{
    rlock *l = impl;
    dlock__hold_state st = dlock__hold_get(&l->hold);
    if (st != DLOCK__HOLD_HELD) return st == DLOCK__HOLD_LOST ? DLOCK_ELOST : DLOCK_ENOTHELD;
    if (!dlock__hold_valid(&l->hold)) { /* past its deadline: another may hold it by now */
        if (!dlock__hold_take_lost(&l->hold)) dlock__metrics_lost(l->c); /* not declared yet */
        end_hold(l, false);
        return DLOCK_ELOST;
    }
    int64_t sent = dlock__now_ms();
    bool watched = dlock__hold_unwatch(&l->hold); /* owner stays stable below */
    int rc = renew_script(l, l->owner, lease_ms);
    if (rc == DLOCK_ELOST) {
        dlock__metrics_lost(l->c);
        end_hold(l, false);
        return rc;
    }
    if (rc == 0) {
        pthread_mutex_lock(&l->mu);
        l->lease_ms = lease_ms;
        pthread_mutex_unlock(&l->mu);
        dlock__hold_renewed(&l->hold, sent, lease_ms);
    } else if (watched) {
        dlock__hold_rewatch(&l->hold); /* failed: keep renewing as before */
    }
    return rc;
}

/* The label was checked by lock_api.c. */
static int redis_set_label(void *impl, const char *label)
{
    rlock *l = impl;
    char *copy = strdup(label);
    if (!copy) return DLOCK_ENOMEM;
    pthread_mutex_lock(&l->mu);
    free(l->label);
    l->label = copy; /* the next acquisitions carry it too */
    char owner[DLOCK_OWNER_MAX + 1];
    snprintf(owner, sizeof(owner), "%s", l->owner);
    pthread_mutex_unlock(&l->mu);
    if (!dlock__hold_valid(&l->hold)) return 0; /* only the next acquisitions */
    const char *keys[2] = {l->key, l->label_key};
    const char *args[4] = {owner, label, l->channel, dlock__pub_cmd(l->sharded)};
    dlock__reply *r = NULL;
    int rc = dlock__client_eval(l->c, &dlock__script_lock_label, 2, keys, 4, args, &r);
    if (rc == 0 && dlock__reply_kind(r) != DLOCK__R_INTEGER) rc = server_error(l, "set label", r);
    if (rc == 0 && dlock__reply_int(r) != 1) rc = DLOCK_ELOST;
    dlock__reply_free(r);
    return rc;
}

static void redis_cancel(void *impl)
{
    dlock__waitctl_cancel(&((rlock *)impl)->ctl);
}

static int64_t redis_validity_ms(void *impl)
{
    return dlock__hold_validity_ms(&((rlock *)impl)->hold);
}

/* ---- queries ------------------------------------------------------------ */

/* The owner value to ask the server about; false if there is none. */
static bool query_owner(rlock *l, char *out, size_t len)
{
    dlock__hold_state st = dlock__hold_get(&l->hold);
    bool known = st == DLOCK__HOLD_HELD || st == DLOCK__HOLD_UNKNOWN; /* unknown: the value sent */
    pthread_mutex_lock(&l->mu);
    if (known) snprintf(out, len, "%s", l->owner);
    pthread_mutex_unlock(&l->mu);
    if (known) return true;
    if (l->kind == DLOCK_LOCK_SIMPLE && !l->explicit_owner) return false;
    return call_owner(l, out, len) == 0;
}

static int simple_cmd(rlock *l, int argc, const char **argv, dlock__reply **r)
{
    int rc = dlock__client_cmd(l->c, argc, argv, NULL, r);
    if (rc == 0 && dlock__reply_kind(*r) == DLOCK__R_ERROR && !dlock__reply_is_error(*r, "WRONGTYPE")) {
        rc = server_error(l, argv[0], *r);
        dlock__reply_free(*r);
        *r = NULL;
    }
    return rc;
}

static int redis_hold_count(void *impl, int64_t *count_out)
{
    rlock *l = impl;
    char owner[DLOCK_OWNER_MAX + 1];
    if (!query_owner(l, owner, sizeof(owner))) return 0;
    const char *argv[3] = {l->kind == DLOCK_LOCK_SIMPLE ? "GET" : "HGET", l->key, owner};
    dlock__reply *r = NULL;
    int rc = simple_cmd(l, l->kind == DLOCK_LOCK_SIMPLE ? 2 : 3, argv, &r);
    if (rc) return rc;
    if (dlock__reply_kind(r) == DLOCK__R_STRING) {
        const char *v = dlock__reply_str(r, NULL);
        *count_out = l->kind == DLOCK_LOCK_SIMPLE ? strcmp(v, owner) == 0 : strtoll(v, NULL, 10);
    }
    dlock__reply_free(r);
    return 0;
}

static int int_query(rlock *l, const char *cmd, long long *out)
{
    const char *argv[2] = {cmd, l->key};
    dlock__reply *r = NULL;
    int rc = simple_cmd(l, 2, argv, &r);
    if (rc == 0) *out = dlock__reply_int(r);
    dlock__reply_free(r);
    return rc;
}

static int redis_is_locked(void *impl, bool *locked_out)
{
    long long n = 0;
    int rc = int_query(impl, "EXISTS", &n);
    *locked_out = n > 0;
    return rc;
}

static int redis_remaining_ttl(void *impl, int64_t *ttl_ms_out)
{
    long long n = -2;
    int rc = int_query(impl, "PTTL", &n);
    *ttl_ms_out = n;
    return rc;
}

static const char *redis_name(const void *impl)
{
    return ((const rlock *)impl)->name;
}

static const char *redis_key(const void *impl)
{
    return ((const rlock *)impl)->key;
}

static const char *redis_owner(const void *impl)
{
    return ((const rlock *)impl)->owner;
}

static uint64_t redis_fence(const void *impl)
{
    return ((const rlock *)impl)->fence;
}

static void redis_free(void *impl)
{
    rlock *l = impl;
    dlock__hold_free(&l->hold, "lock"); /* safe after the client is gone */
    dlock__waitctl_destroy(&l->ctl);
    pthread_mutex_destroy(&l->mu);
    free_strings(l);
}

/* ---- admin and fencing ---------------------------------------------------- */

/* Arguments checked by lock_api.c, as for the two below. */
static int redis_force_unlock(dlock_client *c, const char *name, dlock_lock_kind kind, bool *removed_out)
{
    char *key = make_key(c, name);
    char *chan = key ? make_channel(kind, key) : NULL;
    char *label = key ? make_companion(key, ":label") : NULL;
    int rc = DLOCK_ENOMEM;
    if (chan && label) {
        const char *keys[2] = {key, label};
        const char *args[3] = {kind == DLOCK_LOCK_SIMPLE ? "string" : "hash", chan,
                               dlock__pub_cmd(dlock__client_sharded(c, key, chan))};
        dlock__reply *r = NULL;
        rc = dlock__client_eval(c, &dlock__script_lock_force_unlock, 2, keys, 3, args, &r);
        if (rc == 0 && dlock__reply_kind(r) != DLOCK__R_INTEGER) rc = DLOCK_ESERVER;
        bool removed = rc == 0 && dlock__reply_int(r) == 1;
        if (removed_out) *removed_out = removed;
        dlock__log(c, DLOCK_LOG_WARN, "audit: force_unlock %s (%s) by client %s: %s", name, kind_name(kind),
                   dlock_client_id(c), rc ? dlock_strerror(rc) : removed ? "deleted" : "no such lock");
        dlock__reply_free(r);
    }
    free(chan);
    free(label);
    free(key);
    return rc;
}

static int redis_status_get(dlock_client *c, const char *name, dlock_lock_status *st, dlock__holder_extra *x)
{
    if (x) memset(x, 0, sizeof(*x));
    char *key = make_key(c, name);
    char *fence = key ? make_companion(key, ":fence") : NULL;
    char *lkey = key ? make_companion(key, ":label") : NULL;
    int rc = DLOCK_ENOMEM;
    if (fence && lkey) {
        const char *keys[3] = {key, fence, lkey};
        dlock__reply *r = NULL;
        rc = dlock__client_eval(c, &dlock__script_lock_status, 3, keys, 0, NULL, &r);
        if (rc == 0 && dlock__reply_count(r) < 7) rc = DLOCK_ESERVER;
        if (rc == 0) {
            const char *type = dlock__reply_str(dlock__reply_at(r, 0), NULL);
            st->locked = strcmp(type, "none") != 0;
            st->kind = strcmp(type, "hash") == 0 ? DLOCK_LOCK_REENTRANT : DLOCK_LOCK_SIMPLE;
            snprintf(st->holder, sizeof(st->holder), "%s", dlock__reply_str(dlock__reply_at(r, 1), NULL));
            st->hold_count = elem_int(r, 2);
            st->ttl_ms = elem_int(r, 3);
            st->last_fence = strtoull(dlock__reply_str(dlock__reply_at(r, 4), NULL), NULL, 10);
            if (x) {
                snprintf(x->label, sizeof(x->label), "%s", dlock__reply_str(dlock__reply_at(r, 5), NULL));
                x->fence = strtoull(dlock__reply_str(dlock__reply_at(r, 6), NULL), NULL, 10);
            }
        }
        dlock__reply_free(r);
    }
    free(lkey);
    free(fence);
    free(key);
    return rc;
}

static int redis_fence_guard(dlock_client *c, const char *resource, uint64_t token, uint64_t *highest_out)
{
    char *key = make_key(c, resource);
    if (!key) return DLOCK_ENOMEM;
    char tok[24];
    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)token);
    const char *keys[1] = {key};
    const char *args[1] = {tok};
    dlock__reply *r = NULL;
    int rc = dlock__client_eval(c, &dlock__script_fence_guard, 1, keys, 1, args, &r);
    if (rc == 0 && dlock__reply_count(r) < 2) rc = DLOCK_ESERVER;
    if (rc == 0) {
        if (highest_out) *highest_out = strtoull(dlock__reply_str(dlock__reply_at(r, 1), NULL), NULL, 10);
        if (elem_int(r, 0) != 1) rc = DLOCK_ESTALE;
    }
    dlock__reply_free(r);
    free(key);
    return rc;
}

const dlock__lock_ops dlock__redis_lock_ops = {
    .lock_new = redis_lock_new, .try_lock = redis_try_lock, .unlock = redis_unlock,
    .cancel = redis_cancel, .validity_ms = redis_validity_ms, .hold_count = redis_hold_count,
    .is_locked = redis_is_locked, .remaining_ttl = redis_remaining_ttl, .extend = redis_extend,
    .name = redis_name, .key = redis_key, .owner = redis_owner, .fence = redis_fence,
    .free = redis_free, .force_unlock = redis_force_unlock, .status_get = redis_status_get,
    .set_label = redis_set_label, .fence_guard = redis_fence_guard};
