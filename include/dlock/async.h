/* async.h: libdlock for event loops: a client, locks and a rate limiter that never block
 * the calling thread. The client asks the host loop for socket interest
 * and timers through a small table of functions (dlock_async_loop); ready
 * tables for libevent 2.1 and libuv ship as header-only adapters
 * (dlock/async_libevent.h, dlock/async_libuv.h), so libdlock itself links
 * neither. Same servers, key layouts, scripts and channels as the blocking
 * API (lock.h): a blocking holder and an asynchronous holder of one name
 * exclude each other and wake each other. docs/locks.md, "Event loops".
 *
 * Threads. A dlock_async_client and every handle made from it belong to
 * one loop and are used only from that loop's thread; every callback runs
 * on that thread, from the loop (never from inside the call that started
 * the operation, except where a function below says so: cancel and free).
 * Nothing here takes a lock or sleeps; two clients on two loops in two
 * threads are independent.
 *
 * Blocking. No function blocks: connects are non-blocking, replies and
 * deadlines come through the loop. One exception: a TCP host given by
 * name is resolved by getaddrinfo(3) when a connection is opened; give
 * numeric addresses (127.0.0.1, ::1) or a unix:// URL where that matters.
 *
 * Errors. Functions return 0 or a negative dlock_err (dlock.h) at once; a
 * function that returns an error has started nothing and will not call
 * its callback. A function that returns 0 calls its callback exactly
 * once, later, with the outcome. DLOCK_EUNKNOWN keeps its meaning (sent,
 * reply lost or late: outcome unknown). A reply later than the client's
 * command_timeout_ms ends the operation with DLOCK_EUNKNOWN and drops the
 * connection (a new one is opened on the next command).
 *
 * Lifetimes.
 * - A handle may be freed at any time, also inside its own callbacks; an
 *   operation still pending on it ends first, its callback called with
 *   DLOCK_ECANCELED before the free returns. A held lock is not released
 *   by a free (as lock.h): it is reported (WARN) and expires on its lease.
 * - Freeing the client with operations in flight calls each pending
 *   callback exactly once with DLOCK_ECLOSED before the free returns;
 *   its handles are then orphaned: every call but *_free returns
 *   DLOCK_ECLOSED, and *_free only frees memory. The client may be freed
 *   inside a callback.
 * - Nothing is touched after its callback returned: a callback's ud is
 *   never used again by the library, and after a *_free returns, no
 *   callback of that handle runs. The loop's io and timer objects are
 *   all freed (io_free / timer_free) by dlock_async_client_free.
 *
 * Objects: the lock (simple and reentrant), the read-write lock, the
 * semaphore (a handle's permits; not the expirable permits) and the rate
 * limiter, on a standalone server, a Sentinel-managed master or a Redis
 * Cluster. Left out (blocking API only, for now): etcd URLs,
 * wait_replicas, and the fair lock, multi-lock, RedLock,
 * latch, elections and expirable permits; dlock_async_client_new refuses
 * those URLs and options with DLOCK_ENOTSUP.
 */
#ifndef DLOCK_ASYNC_H
#define DLOCK_ASYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"
#include "dlock/lock.h"
#include "dlock/ratelimit.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the host loop ----------------------------------------------------- */

#define DLOCK_ASYNC_READ 1
#define DLOCK_ASYNC_WRITE 2

typedef void (*dlock_async_io_fn)(void *arg, int events);
typedef void (*dlock_async_timer_fn)(void *arg);

/* What the library needs from a loop. The adapters fill one; a host with
 * its own loop fills it by hand. Every function is called on the loop's
 * thread.
 * io_new: a watcher of fd (not yet watching anything) that, while io_set
 *   asked for events (DLOCK_ASYNC_READ | DLOCK_ASYNC_WRITE; 0: none),
 *   calls fn(arg, events ready). NULL on failure.
 * io_free: stops and frees it; may be called inside its own fn, and the
 *   adapter must not touch the watcher after fn returned in that case.
 * timer_new / timer_start (one-shot, after_ms >= 0 from now; starting a
 *   started timer moves it) / timer_stop / timer_free (stops first; may be
 *   called inside its own fn). io_set and timer_start return 0 or -1.
 * size: sizeof(dlock_async_loop), set by the adapter. */
typedef struct dlock_async_loop {
    size_t size;
    void *ud; /* the adapter's loop: struct event_base *, uv_loop_t *, ... */
    void *(*io_new)(void *ud, int fd, dlock_async_io_fn fn, void *arg);
    int (*io_set)(void *io, int events);
    void (*io_free)(void *io);
    void *(*timer_new)(void *ud, dlock_async_timer_fn fn, void *arg);
    int (*timer_start)(void *timer, int64_t after_ms);
    void (*timer_stop)(void *timer);
    void (*timer_free)(void *timer);
} dlock_async_loop;

/* ---- the client ------------------------------------------------------------ */

typedef struct dlock_async_client dlock_async_client;

/* Makes a client on loop (the table is copied; its ud must outlive the
 * client). opts as dlock_client_create's (dlock_client_options_init, then
 * override): url (redis://, unix://, redis-sentinel:// or
 * redis-cluster://, below),
 * connect_timeout_ms,
 * command_timeout_ms, watchdog_timeout_ms, retry_delay_ms (the pause
 * before reconnecting after a failed connect), key_prefix, log_fn/log_ud/
 * log_level (called on the loop thread); pool_size and retry_attempts are
 * not used (one command connection, one pub/sub connection; on a
 * Cluster one of each per master).
 * Starts connecting (non-blocking) and returns; an unreachable server or a
 * refused AUTH shows up as the operations' DLOCK_ECONN / DLOCK_EAUTH.
 * Returns 0 and *client_out, or DLOCK_EINVAL (NULL, a bad option or loop
 * table), DLOCK_EURL, DLOCK_ETLS, DLOCK_ENOTSUP (an etcd URL;
 * wait_replicas > 0), DLOCK_ECONN (the socket could not be made),
 * DLOCK_ENOMEM.
 * redis-sentinel://: the master is asked of the sentinels (in URL order,
 * each bounded by connect_timeout_ms) without blocking; a command made
 * before they answered waits for them (within command_timeout_ms) and
 * ends DLOCK_ECONN when none does. The sentinel that answered is watched
 * (+switch-master): after a failover the command and pub/sub connections
 * move to the new master (commands in flight on the old one end
 * DLOCK_EUNKNOWN). A lost connection, or a master answering READONLY
 * (that command ends DLOCK_ECONN: nothing ran), makes the next command
 * ask the sentinels again. The URL's credentials go to the master only.
 * redis-cluster://: the slot map is asked of the nodes (CLUSTER SLOTS,
 * then SHARDS; the map's masters, then the URL's nodes) on the loop; a
 * command made before it is known waits for it (within
 * command_timeout_ms) and ends DLOCK_ECONN when no node answers. Each
 * command goes to the master of its keys' slot (every object's keys
 * share one by hash tag), on a connection per master opened on first use
 * with the URL's credentials, and keeps its reply deadline there: a
 * master that stops answering has its connection dropped (its commands
 * end DLOCK_EUNKNOWN) and the map is asked again. MOVED sends the command
 * again to the named master at once (at most 5 redirects; the map is
 * refreshed in the background), ASK sends ASKING and the command to the
 * named node once; TRYAGAIN, LOADING, MASTERDOWN, CLUSTERDOWN and READONLY
 * (a failover) are retried for about half a second, the last two on the
 * slot's master in the refreshed map. A renewal's validity still counts
 * from its first send. Waiters subscribe on the master of their channel's
 * slot (SSUBSCRIBE when the channel shares its object's slot, as the
 * blocking client does, whose holders they exclude and wake) and again
 * where the slot lives after the server dropped the subscription (the
 * slot moved) or the connection broke. */
DLOCK_API int dlock_async_client_new(const dlock_async_loop *loop, const dlock_client_options *opts,
                                     dlock_async_client **client_out);

/* Frees the client: pending callbacks of every handle run with
 * DLOCK_ECLOSED, held locks are reported (WARN) and left to expire on
 * their lease, connections and loop objects are closed. NULL is a no-op.
 * May be called inside a callback. */
DLOCK_API void dlock_async_client_free(dlock_async_client *client);

/* The drift allowance of the validity rule (dlock.h), as
 * dlock_client_set_clock_drift. 0 or DLOCK_EINVAL. */
DLOCK_API int dlock_async_client_set_clock_drift(dlock_async_client *client, int64_t drift_ppm,
                                                 int64_t drift_ms);

/* The client's random 128-bit id as 32 hex digits (also the default owner
 * prefix of reentrant handles). */
DLOCK_API const char *dlock_async_client_id(const dlock_async_client *client);

/* ---- the lock ---------------------------------------------------------------- */

typedef struct dlock_async_lock dlock_async_lock;

/* Completion of an acquire or unlock: rc as the blocking call's. */
typedef void (*dlock_async_lock_fn)(dlock_async_lock *lock, int rc, void *ud);
/* A held lock found lost (watchdog mode): the renewal found it gone or
 * taken, or its validity deadline passed without a good renewal; a loop
 * timer declares it at the deadline even when the server never answers.
 * reason DLOCK_ELOST; is_held is already false. May unlock or free lock. */
typedef void (*dlock_async_lost_fn)(dlock_async_lock *lock, int reason, void *ud);

typedef struct dlock_async_lock_options {
    size_t size;          /* set by dlock_async_lock_options_init; do not change */
    dlock_lock_kind kind; /* default DLOCK_LOCK_SIMPLE; key layouts as lock.h */
    /* The owner value, never the thread. NULL (default): SIMPLE uses a
     * fresh random token per acquisition; REENTRANT uses
     * "<client id>:a<n>", unique to this handle. Non-NULL (1..
     * DLOCK_OWNER_MAX bytes, copied): the token / hash field, so handles
     * (and blocking handles) that share it are one holder, as in lock.h. */
    const char *owner_id;
    dlock_async_lost_fn on_lost; /* NULL: only logged */
    void *on_lost_ud;
} dlock_async_lock_options;

DLOCK_API void dlock_async_lock_options_init(dlock_async_lock_options *opts);

/* A handle for the lock called name (key = key_prefix + name, as lock.h).
 * Nothing is sent. 0 and *lock_out, DLOCK_EINVAL (bad name or owner),
 * DLOCK_ECLOSED, DLOCK_ENOMEM. */
DLOCK_API int dlock_async_lock_new(dlock_async_client *client, const char *name,
                                   const dlock_async_lock_options *opts, dlock_async_lock **lock_out);

/* Acquires, waiting at most wait_ms (0: one attempt; DLOCK_WAIT_FOREVER:
 * no bound) and lease_ms as dlock_lock_try_lock (0: watchdog mode on the
 * loop's timers; > 0: that lease, no renewals). Waiting subscribes to the
 * lock's unlock channel (the blocking API's) and never polls: the
 * longest-waiting handle of this client on a name tries again when a
 * release is published, when the holder's TTL runs out, or on a growing
 * recheck interval (foreign holders may not publish); the others wait for
 * their turn (FIFO within a client). Every acquisition gets a fencing
 * token (dlock_async_lock_fence), as lock.h describes.
 * cb gets 0 (held; REENTRANT re-entry counts one more hold), DLOCK_EBUSY
 * (wait_ms 0, held by another), DLOCK_ETIMEOUT, DLOCK_ECANCELED (cancel or
 * free), DLOCK_ECLOSED (client freed), DLOCK_EUNKNOWN (sent, reply lost:
 * the handle keeps the owner value it sent, so unlock gives such a lock
 * back), DLOCK_ECONN / DLOCK_EAUTH / DLOCK_ESERVER (while waiting,
 * connection failures are retried until wait_ms runs out).
 * Returns 0 (cb will run), DLOCK_EINVAL (negative lease or wait, NULL cb,
 * an operation already pending on this handle: one at a time),
 * DLOCK_EALREADY (SIMPLE, held by this handle), DLOCK_ECLOSED,
 * DLOCK_ECONN (no connection and none can be started now), DLOCK_ENOMEM. */
DLOCK_API int dlock_async_lock_acquire(dlock_async_lock *lock, int64_t wait_ms, int64_t lease_ms,
                                       dlock_async_lock_fn cb, void *ud);

/* Releases one hold (REENTRANT: one less; at zero the key goes and the
 * unlock is published). cb gets 0, DLOCK_ELOST, DLOCK_ENOTHELD,
 * DLOCK_ENOTOWNER, or a transport code (dlock.h), as dlock_lock_unlock.
 * Returns 0 (cb will run), DLOCK_EINVAL (NULL cb, an operation pending),
 * DLOCK_ENOTHELD (the handle holds nothing: nothing sent), DLOCK_ELOST
 * (found lost since: the handle is free now), DLOCK_ECLOSED,
 * DLOCK_ECONN, DLOCK_ENOMEM. */
DLOCK_API int dlock_async_lock_unlock(dlock_async_lock *lock, dlock_async_lock_fn cb, void *ud);

/* Cancels a pending acquire: its callback runs with DLOCK_ECANCELED
 * before this returns. An attempt already sent may still be applied by
 * the server; the handle then gives that hold back by itself. Returns 0,
 * or DLOCK_ENOTHELD when no acquire was pending. */
DLOCK_API int dlock_async_lock_cancel(dlock_async_lock *lock);

/* Local view, as dlock_lock_is_held / dlock_lock_validity_ms (the
 * validity rule of dlock.h). */
DLOCK_API bool dlock_async_lock_is_held(const dlock_async_lock *lock);
DLOCK_API int64_t dlock_async_lock_validity_ms(const dlock_async_lock *lock);
/* Fencing token of the current / last first acquisition (0: none). */
DLOCK_API uint64_t dlock_async_lock_fence(const dlock_async_lock *lock);
/* The owner value of the current / last acquisition ("" if none), the
 * name, the key: valid until the next call on lock. */
DLOCK_API const char *dlock_async_lock_owner(const dlock_async_lock *lock);
DLOCK_API const char *dlock_async_lock_name(const dlock_async_lock *lock);
DLOCK_API const char *dlock_async_lock_key(const dlock_async_lock *lock);

/* Frees the handle (see "Lifetimes"). NULL is a no-op. */
DLOCK_API void dlock_async_lock_free(dlock_async_lock *lock);

/* ---- the read-write lock ---------------------------------------------------------- */

/* rwlock.h's read-write lock: the same keys, scripts, channel and rules
 * (reentrant per handle on both sides, downgrade, upgrade refused with
 * DLOCK_EUPGRADE, writer preference through a waiting writer's intent),
 * so blocking and asynchronous readers and writers of one name exclude
 * each other. A handle is one owner ("<client id>:<16 hex>"). Waiting as
 * the lock's (the unlock channel, FIFO within a client: only the
 * longest-waiting handle of this client on a name tries again; a waiting
 * writer's intent is kept alive by its tries, so a writer queued behind
 * another handle of this client may see its intent expire meanwhile).
 * Watchdog (lease_ms 0) and validity as the lock's; a side taken while
 * the other is held keeps the earlier deadline. */
typedef struct dlock_async_rwlock dlock_async_rwlock;
/* Completion: rc as the blocking call's (below). */
typedef void (*dlock_async_rwlock_fn)(dlock_async_rwlock *rw, int rc, void *ud);
/* Both sides found lost (as dlock_async_lost_fn); may unlock or free rw. */
typedef void (*dlock_async_rwlock_lost_fn)(dlock_async_rwlock *rw, int reason, void *ud);

/* opts: dlock_rwlock_options (rwlock.h; NULL: defaults). Nothing is sent.
 * 0 and *rw_out, DLOCK_EINVAL (NULL, bad name or option), DLOCK_ECLOSED,
 * DLOCK_ENOMEM. */
DLOCK_API int dlock_async_rwlock_new(dlock_async_client *client, const char *name, const dlock_rwlock_options *opts,
                                     dlock_async_rwlock **rw_out);
/* Takes (or re-enters) one side, waiting at most wait_ms (0: one attempt;
 * DLOCK_WAIT_FOREVER: no bound). cb gets 0, DLOCK_EBUSY (wait_ms 0),
 * DLOCK_ETIMEOUT, DLOCK_EUPGRADE (write asked while this owner reads, as
 * the server saw it), DLOCK_ECANCELED, DLOCK_ECLOSED, DLOCK_EUNKNOWN (the
 * side may have been taken: it then expires on its lease), a transport
 * code. Returns 0 (cb will run), DLOCK_EINVAL (NULL cb, negative wait, an
 * operation pending on this handle), DLOCK_EUPGRADE (write while this
 * handle holds only the read side: nothing sent), DLOCK_ECLOSED,
 * DLOCK_ECONN, DLOCK_ENOMEM. */
DLOCK_API int dlock_async_rwlock_read_lock(dlock_async_rwlock *rw, int64_t wait_ms, dlock_async_rwlock_fn cb,
                                           void *ud);
DLOCK_API int dlock_async_rwlock_write_lock(dlock_async_rwlock *rw, int64_t wait_ms, dlock_async_rwlock_fn cb,
                                            void *ud);
/* Leaves one level of a side (at zero the side goes and a release is
 * published). cb gets 0, DLOCK_ELOST (the server no longer had it), or a
 * transport code. Returns 0 (cb will run), DLOCK_EINVAL, DLOCK_ENOTHELD
 * (this side not held: nothing sent), DLOCK_ELOST (found lost since: the
 * handle holds nothing now), DLOCK_ECLOSED, DLOCK_ECONN, DLOCK_ENOMEM. */
DLOCK_API int dlock_async_rwlock_read_unlock(dlock_async_rwlock *rw, dlock_async_rwlock_fn cb, void *ud);
DLOCK_API int dlock_async_rwlock_write_unlock(dlock_async_rwlock *rw, dlock_async_rwlock_fn cb, void *ud);
/* As dlock_async_lock_cancel (a writer's intent is withdrawn). */
DLOCK_API int dlock_async_rwlock_cancel(dlock_async_rwlock *rw);
/* Local view under the validity rule (0 once the deadline passed). */
DLOCK_API int64_t dlock_async_rwlock_read_count(const dlock_async_rwlock *rw);
DLOCK_API int64_t dlock_async_rwlock_write_count(const dlock_async_rwlock *rw);
DLOCK_API int64_t dlock_async_rwlock_validity_ms(const dlock_async_rwlock *rw);
/* The loss callback (NULL: only logged); set before or while holding. */
DLOCK_API void dlock_async_rwlock_set_on_lost(dlock_async_rwlock *rw, dlock_async_rwlock_lost_fn fn, void *ud);
/* As dlock_async_lock_free. NULL is a no-op. */
DLOCK_API void dlock_async_rwlock_free(dlock_async_rwlock *rw);

/* ---- the semaphore ------------------------------------------------------------------- */

/* semaphore.h's owner-tracked semaphore of N permits: the same keys,
 * scripts and channel, so blocking and asynchronous holders of one name
 * share the N permits. A handle is one holder id with a count (its
 * permits share one expiry, set anew by each acquire and renewed by the
 * watchdog when lease_ms is 0). Waiting as the lock's (FIFO within a
 * client: a head asking for more permits than are free holds back the
 * handles behind it). Expirable permits (dlock_permits_*) and
 * dlock_semaphore_available stay blocking-only. */
typedef struct dlock_async_semaphore dlock_async_semaphore;
typedef void (*dlock_async_semaphore_fn)(dlock_async_semaphore *sem, int rc, void *ud);
typedef void (*dlock_async_semaphore_lost_fn)(dlock_async_semaphore *sem, int reason, void *ud);

/* opts: dlock_semaphore_options (semaphore.h; NULL: defaults). Nothing is
 * sent. 0 and *sem_out, DLOCK_EINVAL, DLOCK_ECLOSED, DLOCK_ENOMEM. */
DLOCK_API int dlock_async_semaphore_new(dlock_async_client *client, const char *name,
                                        const dlock_semaphore_options *opts, dlock_async_semaphore **sem_out);
/* Takes k more permits, waiting at most wait_ms. cb gets 0, DLOCK_EBUSY
 * (wait_ms 0), DLOCK_ETIMEOUT, DLOCK_EINVAL (the name is recorded with
 * another N), DLOCK_ECANCELED, DLOCK_ECLOSED, DLOCK_EUNKNOWN (the permits
 * may have been taken: they then expire on their lease), a transport
 * code. Returns 0 (cb will run), DLOCK_EINVAL (k < 1, NULL cb, negative
 * wait, an operation pending), DLOCK_ELIMIT (k > N: nothing sent),
 * DLOCK_ECLOSED, DLOCK_ECONN, DLOCK_ENOMEM. */
DLOCK_API int dlock_async_semaphore_acquire(dlock_async_semaphore *sem, int64_t k, int64_t wait_ms,
                                            dlock_async_semaphore_fn cb, void *ud);
/* Gives back k of this handle's permits (a release is published). cb gets
 * 0, DLOCK_ELOST (the server no longer had them: the handle holds none
 * now), DLOCK_ENOTHELD (the server saw fewer than k), a transport code.
 * Returns 0 (cb will run), DLOCK_EINVAL, DLOCK_ENOTHELD (k above what the
 * handle holds: nothing sent), DLOCK_ELOST (found lost since),
 * DLOCK_ECLOSED, DLOCK_ECONN, DLOCK_ENOMEM. */
DLOCK_API int dlock_async_semaphore_release(dlock_async_semaphore *sem, int64_t k, dlock_async_semaphore_fn cb,
                                            void *ud);
/* As dlock_async_lock_cancel. */
DLOCK_API int dlock_async_semaphore_cancel(dlock_async_semaphore *sem);
/* Permits held under the validity rule, and the validity left. */
DLOCK_API int64_t dlock_async_semaphore_held(const dlock_async_semaphore *sem);
DLOCK_API int64_t dlock_async_semaphore_validity_ms(const dlock_async_semaphore *sem);
DLOCK_API void dlock_async_semaphore_set_on_lost(dlock_async_semaphore *sem, dlock_async_semaphore_lost_fn fn,
                                                 void *ud);
/* As dlock_async_lock_free. NULL is a no-op. */
DLOCK_API void dlock_async_semaphore_free(dlock_async_semaphore *sem);

/* ---- the rate limiter ---------------------------------------------------------- */

typedef struct dlock_async_ratelimit dlock_async_ratelimit;

/* A try's answer: rc 0 with *result (allowed or refused: a refusal is not
 * an error; result is valid during the call), or DLOCK_ELIMIT,
 * DLOCK_ECANCELED (the limiter was freed), DLOCK_ECLOSED, a transport code
 * (DLOCK_EUNKNOWN: the tokens may have been taken) with result NULL. */
typedef void (*dlock_async_ratelimit_fn)(dlock_async_ratelimit *rl, int rc, const dlock_ratelimit_result *result,
                                         void *ud);

/* The limiter called name with opts (ratelimit.h: same buckets, keys and
 * options as dlock_ratelimit_new; NULL: defaults). Nothing is sent.
 * 0 and *rl_out, DLOCK_EINVAL, DLOCK_ECLOSED, DLOCK_ENOMEM. */
DLOCK_API int dlock_async_ratelimit_new(dlock_async_client *client, const char *name,
                                        const dlock_ratelimit_options *opts, dlock_async_ratelimit **rl_out);
/* Takes n tokens from subject's bucket if they are there: one round trip,
 * never waits (to wait, start a loop timer for result->retry_after_ms and
 * try again). Any number of tries may be in flight on one limiter.
 * Returns 0 (cb will run), DLOCK_EINVAL (NULL, n < 1, bad subject),
 * DLOCK_ELIMIT (n > burst: never allowed; nothing sent), DLOCK_ECLOSED,
 * DLOCK_ECONN, DLOCK_ENOMEM. */
DLOCK_API int dlock_async_ratelimit_try_acquire(dlock_async_ratelimit *rl, const char *subject, int64_t n,
                                                dlock_async_ratelimit_fn cb, void *ud);
/* Frees the limiter: tries in flight end with DLOCK_ECANCELED before it
 * returns. NULL is a no-op. */
DLOCK_API void dlock_async_ratelimit_free(dlock_async_ratelimit *rl);

#ifdef __cplusplus
}
#endif
#endif
