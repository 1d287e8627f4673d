/* lock.h: mutual-exclusion locks over Redis: the interoperable simple lock
 * (redis-py Lock / node redlock layout), the Redisson-compatible reentrant
 * lock, fencing tokens and admin queries. Key layouts, the watchdog and the
 * fencing guarantee are explained in docs/locks.md.
 *
 * Thread-safety: a dlock_lock handle tracks one holder at a time and is used
 * by one thread at a time, except dlock_lock_cancel() and dlock_lock_is_held(),
 * which any thread may call at any time. Many handles (in many threads and
 * processes) on one name exclude each other. The lost-lock callback runs on
 * one of the client's watchdog threads.
 * Errors: 0 or a negative dlock_err (see dlock.h). DLOCK_EUNKNOWN means the
 * command was sent but its reply never came: whether the acquire/release
 * happened is unknown; resolve it with dlock_lock_is_held_by_me() (after an
 * acquire the handle keeps the owner value it sent, so the query, and
 * dlock_lock_unlock() to give such a lock back, work on the handle).
 */
#ifndef DLOCK_LOCK_H
#define DLOCK_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_lock dlock_lock;

typedef enum dlock_lock_kind {
    /* String key = random token; SET NX PX acquire; compare-and-delete
     * release. Same layout as redis-py Lock and node redlock. */
    DLOCK_LOCK_SIMPLE = 0,
    /* Hash key { "<owner>": hold count }, unlock published ("0") on
     * redisson_lock__channel:{<name>} (redisson_lock__channel:<name> when
     * the name already contains '{', as Redisson names it). Same layout as
     * Redisson RLock. */
    DLOCK_LOCK_REENTRANT = 1,
} dlock_lock_kind;

/* Longest explicit owner id accepted (bytes). */
#define DLOCK_OWNER_MAX 256
/* Longest holder label accepted (bytes). Since 1.1. */
#define DLOCK_LABEL_MAX 256

/* Called on a watchdog thread when a held lock is found lost: the
 * renewal found the key gone or owned by someone else, or no renewal
 * succeeded before its validity deadline (dlock.h), which is declared at
 * the deadline even when the server or the network does not answer.
 * reason is DLOCK_ELOST. By the time it runs, dlock_lock_is_held() is
 * already false. The callback may call
 * dlock_lock_unlock() (which then returns DLOCK_ELOST) but not
 * dlock_lock_free(). */
typedef void (*dlock_lost_fn)(dlock_lock *lock, int reason, void *ud);

typedef struct dlock_lock_options {
    size_t size; /* set by dlock_lock_options_init (dlock.h, "Contracts"); do not change */
    dlock_lock_kind kind; /* default DLOCK_LOCK_SIMPLE */
    /* NULL (default): SIMPLE uses a fresh random 128-bit token per
     * acquisition; REENTRANT uses "<client id>:<thread id>" of the calling
     * thread. Non-NULL (1..DLOCK_OWNER_MAX bytes, copied): SIMPLE uses it as
     * the token (so another process knowing it can release or extend);
     * REENTRANT uses it as the hash field, for event-loop code where one
     * thread serves many requests. Handles sharing an explicit id are one
     * holder: a SIMPLE acquire finding its own token succeeds again (with
     * the current fencing token), a REENTRANT one re-enters. On etcd
     * (since 1.1) only the 16 hex digits of a lease that dlock_lock_owner()
     * named in an earlier process: the first acquisition resumes that
     * hold while its key still leads (elections' resume, election.h);
     * any other owner id is DLOCK_ENOTSUP there. */
    const char *owner_id;
    dlock_lost_fn on_lost; /* NULL: only logged and counted */
    void *on_lost_ud;
} dlock_lock_options;

DLOCK_API void dlock_lock_options_init(dlock_lock_options *opts);

/* Creates a handle for the lock called name (key = key_prefix + name) on
 * client. No Redis command is sent. opts NULL means defaults.
 * Returns 0 and *lock_out, or DLOCK_EINVAL (NULL client, bad name: empty or
 * longer than DLOCK_NAME_MAX, logged with its length; bad owner id),
 * DLOCK_ENOMEM. Other calls on the handle must not run after its client is
 * destroyed (dlock_lock_free may). */
DLOCK_API int dlock_lock_new(dlock_client *client, const char *name, const dlock_lock_options *opts,
                             dlock_lock **lock_out);

/* Acquires the lock, waiting at most wait_ms (0: one attempt only;
 * DLOCK_WAIT_FOREVER: no bound). Waiting never busy-polls: it sleeps on the
 * lock's unlock channel, capped by the holder's remaining TTL and a growing
 * recheck interval (foreign holders may not publish).
 * lease_ms > 0: the lock expires after lease_ms unless extended (no
 * watchdog). lease_ms == 0: watchdog mode: the lease is the client's
 * watchdog_timeout_ms, renewed every third of it while held.
 * fence_out (may be NULL) receives the fencing token of this acquisition,
 * strictly greater than every token issued before for this name; a
 * re-entry of a REENTRANT lock returns the token of the first acquisition.
 * Tokens are issued on demand: a SIMPLE lock with the default owner, a
 * NULL fence_out and the client's wait_replicas 0 is acquired with the
 * plain `SET NX PX` (one command, no script) and gets no token
 * (dlock_lock_fence() is 0 for that hold); in every other case a token is
 * issued as above.
 * Returns 0 (acquired; for REENTRANT re-entry increments the hold count),
 *   DLOCK_EBUSY     wait_ms == 0 and someone else holds it,
 *   DLOCK_ETIMEOUT  wait_ms ran out,
 *   DLOCK_ECANCELED dlock_lock_cancel() was called,
 *   DLOCK_EALREADY  SIMPLE lock already held through this handle,
 *   DLOCK_EINVAL    negative lease, or REENTRANT handle held by another thread,
 *   DLOCK_ENOTREPL  (client option wait_replicas = n > 0) the key was set
 *                   but fewer than n replicas acknowledged it within
 *                   wait_replicas_timeout_ms: it is released again at
 *                   once (not held; if that release fails too, the key
 *                   expires on its lease, logged at WARN). A 0 return
 *                   with wait_replicas = n means n replicas have the
 *                   acquisition (and its fence); see docs/locks.md,
 *                   "Replica safety". The watchdog's renewals wait the
 *                   same way: a renewal fewer than n replicas have does
 *                   not move the validity deadline (it is retried; the
 *                   lock is lost at the deadline if none gets through),
 *   DLOCK_EUNKNOWN  an attempt's reply was lost and asking the server
 *                   whether it was applied failed too (see top),
 *   DLOCK_ECONN     no connection (while waiting, connection failures are
 *                   retried until wait_ms runs out), ESERVER, ENOMEM,
 *   DLOCK_ECLOSED   the client is being destroyed. */
DLOCK_API int dlock_lock_try_lock(dlock_lock *lock, int64_t wait_ms, int64_t lease_ms,
                                  uint64_t *fence_out);

/* Releases one hold (REENTRANT: decrements; at 0 deletes the key and
 * publishes the unlock). Stops the watchdog when the last hold goes.
 * Returns 0, or
 *   DLOCK_ELOST     the lock was lost while held (expired or taken); the
 *                   handle is no longer held,
 *   DLOCK_ENOTHELD  this handle holds nothing and (with an explicit owner id)
 *                   the server has no such lock,
 *   DLOCK_ENOTOWNER (explicit owner id or other thread) the lock is held by
 *                   someone else: nothing changed,
 *   DLOCK_EUNKNOWN, DLOCK_ECONN, DLOCK_ESERVER. */
DLOCK_API int dlock_lock_unlock(dlock_lock *lock);

/* Makes a dlock_lock_try_lock() waiting on this handle (now or the next
 * one to start) return DLOCK_ECANCELED. Safe from any thread. */
DLOCK_API void dlock_lock_cancel(dlock_lock *lock);

/* Local view, no Redis call: true while this handle believes it holds the
 * lock: acquired, not released, not found lost, and before its validity
 * deadline (dlock.h: from the send time of the acquire or the last good
 * renewal, lease less the drift allowance; in watchdog mode as with an
 * explicit lease). Any thread. */
DLOCK_API bool dlock_lock_is_held(dlock_lock *lock);
/* Milliseconds left before that deadline (0: not held, or past it). Code
 * that must stop before anyone else can hold (a child process, a batch of
 * writes) schedules its stop from this. No Redis call; any thread. Since 1.1. */
DLOCK_API int64_t dlock_lock_validity_ms(dlock_lock *lock);

/* Server queries (one round trip each). */
/* *held_out = the key holds this handle's token / owner field. */
DLOCK_API int dlock_lock_is_held_by_me(dlock_lock *lock, bool *held_out);
/* *locked_out = the key exists (held by anyone). */
DLOCK_API int dlock_lock_is_locked(dlock_lock *lock, bool *locked_out);
/* *count_out = how many times this handle's owner holds the lock, as the
 * server says now (SIMPLE: 1 or 0); one round trip. Hold count means this
 * for every object (dlock.h, "Contracts"). */
DLOCK_API int dlock_lock_hold_count(dlock_lock *lock, int64_t *count_out);
/* *ttl_ms_out = remaining TTL in ms, -1 no expiry, -2 no such key. */
DLOCK_API int dlock_lock_remaining_ttl(dlock_lock *lock, int64_t *ttl_ms_out);

/* Sets the remaining lease to lease_ms (> 0) if this handle still holds
 * the lock (owner-checked on the server); switches a watchdog-mode lock to
 * the explicit lease (the watchdog stops renewing it).
 * Returns 0, DLOCK_ENOTHELD, DLOCK_ELOST, DLOCK_EINVAL, DLOCK_EUNKNOWN,
 * DLOCK_ENOTREPL (wait_replicas = n > 0: fewer than n replicas have the
 * new lease; the server has it, the handle keeps its old deadline)... */
DLOCK_API int dlock_lock_extend(dlock_lock *lock, int64_t lease_ms);

/* The lock's name (as given), its Redis key, the owner value of the
 * current / last acquisition (SIMPLE: token; REENTRANT: hash field; "" if
 * never acquired) and the fencing token of the current / last first
 * acquisition (0 if none, or if it asked for none: see try_lock). Pointers
 * valid until the next call on lock. */
DLOCK_API const char *dlock_lock_name(const dlock_lock *lock);
DLOCK_API const char *dlock_lock_key(const dlock_lock *lock);
DLOCK_API const char *dlock_lock_owner(const dlock_lock *lock);
DLOCK_API uint64_t dlock_lock_fence(const dlock_lock *lock);

/* Sets the holder label of this handle: 1..DLOCK_LABEL_MAX bytes, no
 * control characters, copied. A label is a name for the holder that
 * anyone can read with dlock_lock_label_get() while it holds (the dlock
 * CLI sets "host:pid:command"). Every later acquisition of the handle
 * carries it. On Redis it lives in a companion key in the lock's slot,
 * written by the acquire script with the lock's lease, renewed and deleted
 * with it; the lock key itself keeps the redis-py / Redisson layout
 * (docs/locks.md, "Holder labels"); a labelled SIMPLE acquire uses the
 * script, not the plain SET. Not held: no I/O. Held: the label of the hold
 * is replaced too, checked on the server against this handle's owner
 * value and written in the same step with the lock's remaining TTL, and
 * the lock's waiters and observers are woken (its unlock channel): one
 * round trip. (A label is set by this call, not by an options field, so
 * dlock_lock_options keeps its 1.0 size.) Returns 0, DLOCK_EINVAL (bad
 * label: nothing changed), DLOCK_ELOST (held, but the server no longer
 * has this holder: the label is kept for the next acquisitions), or a
 * transport code (dlock.h). Since 1.1. */
DLOCK_API int dlock_lock_set_label(dlock_lock *lock, const char *label);

/* Frees the handle. A lock still held is NOT released: it is reported
 * through the log hook (WARN), its watchdog stops, and it expires on its
 * lease. NULL is a no-op. Not concurrently with other calls on lock. It may
 * be called after the client was destroyed (it then only frees memory;
 * held locks were already reported by dlock_client_destroy). */
DLOCK_API void dlock_lock_free(dlock_lock *lock);

/* ---- admin ------------------------------------------------------------ */

/* Deletes the lock called name whatever its holder (the key is deleted only
 * if its type matches kind: string for SIMPLE, hash for REENTRANT) and
 * publishes the unlock so waiters wake. Audited through the log hook
 * (WARN). *removed_out (may be NULL) = a key was deleted.
 * Returns 0, DLOCK_EINVAL, DLOCK_EUNKNOWN, DLOCK_ECONN, DLOCK_ESERVER. */
DLOCK_API int dlock_force_unlock(dlock_client *client, const char *name, dlock_lock_kind kind,
                                 bool *removed_out);

/* Frozen for 1.x (dlock.h, "Contracts"): holder is sized by DLOCK_OWNER_MAX,
 * which 1.x keeps at 256. */
typedef struct dlock_lock_status {
    bool locked;            /* the key exists */
    dlock_lock_kind kind;   /* SIMPLE (string key) or REENTRANT (hash key) */
    char holder[DLOCK_OWNER_MAX + 1]; /* token or hash field; "" if free */
    int64_t hold_count;     /* REENTRANT count, SIMPLE 1, 0 if free */
    int64_t ttl_ms;         /* -1 no expiry, -2 free */
    uint64_t last_fence;    /* last fencing token issued for name (0: none
                             * within the fence key's expiry) */
} dlock_lock_status;

/* One read-only round trip describing the lock called name (for
 * `dlock status NAME`). A key of another type reports locked with kind
 * SIMPLE and holder "". Returns 0, DLOCK_EINVAL, or a transport code (dlock.h). */
DLOCK_API int dlock_lock_status_get(dlock_client *client, const char *name,
                                    dlock_lock_status *status_out);

/* The label of whoever holds the lock called name now, into a new
 * NUL-terminated *label_out (free with dlock_free): "" when the lock is
 * free or its holder set no label (a redis-py, node redlock or Redisson
 * holder never does). One read-only round trip; a label is only ever
 * reported with the holder that wrote it. Returns 0, DLOCK_EINVAL,
 * DLOCK_ENOMEM or a transport code (dlock.h). Since 1.1. */
DLOCK_API int dlock_lock_label_get(dlock_client *client, const char *name, char **label_out);

/* ---- fencing ------------------------------------------------------------ */

/* A storage-side guard against stale writers: atomically compares token
 * with the highest token recorded for resource (Redis key key_prefix +
 * resource, no expiry) and records it if it is not lower. Call it in the
 * same atomic step as the write it protects (or mirror it in your database
 * as "UPDATE ... WHERE fence <= :token").
 * Returns 0 (token >= highest: accepted), DLOCK_ESTALE (a newer holder has
 * written: reject the write), DLOCK_EINVAL (bad resource name, token 0), or
 * a transport code (dlock.h; DLOCK_EUNKNOWN: the token may have been recorded).
 * *highest_out (may be NULL) = the highest token after the call. */
DLOCK_API int dlock_fence_guard(dlock_client *client, const char *resource, uint64_t token,
                                uint64_t *highest_out);

/* Orders two fencing tokens of one lock name: <0, 0, >0 like strcmp. */
DLOCK_API int dlock_fence_compare(uint64_t a, uint64_t b);

#ifdef __cplusplus
}
#endif
#endif
