/* redlock.h: RedLock - one lock over N independent Redis masters (no
 * replication between them). A lock is held when a quorum (N/2 + 1) of
 * nodes accepted `SET key token NX PX lease` within the lease; the holder
 * may rely on it for
 *     validity = lease - elapsed - (drift_factor * lease + 2 ms)
 * measured on this process' monotonic clock from just before the first
 * request was sent. Requests go to all nodes in parallel: the group
 * starts one worker thread per node when it is created (joined when it is
 * destroyed); each operation queues its request on every node's worker and
 * waits for all of them, so no thread is started per operation. See
 * docs/locks-family.md for the key layout, the fencing token and the rules
 * the algorithm needs to be safe (notably: a node that restarts without
 * persistence must stay down for at least one lease - the "delayed
 * restart" rule).
 *
 * Thread-safety: a dlock_redlock (the node group) may be used by any number
 * of threads at once; requests to one node are serialised on its single
 * connection. A dlock_redlock_hold is used by one thread at a time.
 * Errors: 0 or a negative dlock_err. DLOCK_ENOQUORUM: fewer than a quorum
 * of nodes answered (down, unreachable or timing out); nothing is held
 * (every node is asked to release whatever it may have set).
 */
#ifndef DLOCK_REDLOCK_H
#define DLOCK_REDLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_redlock dlock_redlock;
typedef struct dlock_redlock_hold dlock_redlock_hold;

typedef struct dlock_redlock_options {
    size_t size; /* set by dlock_redlock_options_init (dlock.h, "Contracts"); do not change */
    /* The N independent masters: redis://... or unix://... URLs (not
     * sentinel or cluster), 1..16 of them, copied. Required. */
    const char *const *urls;
    size_t n_urls;
    int64_t connect_timeout_ms; /* per node; default 100 */
    int64_t command_timeout_ms; /* per node and request; default 100 */
    int64_t retry_delay_ms;     /* base pause between attempts, default 100;
                                 * each pause is uniform in [base/2, 3*base/2] */
    double drift_factor;        /* clock drift allowance, default 0.01 */
    const char *key_prefix;     /* default "" */
    dlock_log_fn log_fn;        /* NULL: discard */
    void *log_ud;
} dlock_redlock_options;

DLOCK_API void dlock_redlock_options_init(dlock_redlock_options *opts);

/* Creates the node group. No connection is made yet (nodes may be down;
 * each request (re)connects as needed).
 * Returns 0 and *rl_out, DLOCK_EINVAL (no URLs, more than 16, drift not in
 * [0, 0.5), timeouts < 1), DLOCK_EURL (a URL does not parse, or is a
 * sentinel or cluster URL: RedLock is over independent masters; the
 * reason goes to log_fn), DLOCK_ENOMEM. */
DLOCK_API int dlock_redlock_new(const dlock_redlock_options *opts, dlock_redlock **rl_out);

/* Closes the connections and frees the group. Holds must be released or
 * freed first. NULL is a no-op. */
DLOCK_API void dlock_redlock_free(dlock_redlock *rl);

/* Acquires name (key = key_prefix + name) for lease_ms (>= 10) on a quorum
 * of nodes. A failed attempt is released on every node, then retried after
 * a random pause, until wait_ms is spent (0: one attempt;
 * DLOCK_WAIT_FOREVER (-1): no bound).
 * Returns 0 and *hold_out, or
 *   DLOCK_ECANCELED dlock_redlock_cancel() was called,
 *   DLOCK_EBUSY     wait_ms == 0 and the lock is held elsewhere,
 *   DLOCK_ETIMEOUT  wait_ms ran out while others held it,
 *   DLOCK_ENOQUORUM the last attempt reached fewer than a quorum of nodes,
 *   DLOCK_EINVAL    bad name or lease, NULL pointers,
 *   DLOCK_ENOMEM. */
DLOCK_API int dlock_redlock_lock(dlock_redlock *rl, const char *name, int64_t lease_ms,
                                 int64_t wait_ms, dlock_redlock_hold **hold_out);

/* Makes every dlock_redlock_lock() waiting on rl (between attempts) return
 * DLOCK_ECANCELED; if none waits, the next one does. An attempt in flight
 * finishes first (bounded by the node timeouts). Any thread. */
DLOCK_API void dlock_redlock_cancel(dlock_redlock *rl);

/* Remaining validity in ms (monotonic clock), <= 0 once it has passed:
 * past that point the holder must not assume exclusion. */
DLOCK_API int64_t dlock_redlock_validity_ms(const dlock_redlock_hold *h);

/* Fencing token of this hold: the largest of the per-node counters (key
 * "{key}:fence", incremented by each node that granted the lock). Any two
 * quorums share a node, so a later hold's token is larger - as long as no
 * node lost its counter (restart without persistence) and no hold outlived
 * its validity. Pass it to the protected store (dlock_fence_guard, or a
 * "WHERE fence < :token" column) to reject late writers. */
DLOCK_API uint64_t dlock_redlock_fence(const dlock_redlock_hold *h);

/* Number of nodes that granted the current hold. */
DLOCK_API int dlock_redlock_nodes_held(const dlock_redlock_hold *h);

/* Extends the hold to lease_ms from now on every node still holding our
 * token; needs a quorum within the new lease.
 * Returns 0 (validity renewed), DLOCK_ELOST (a quorum answered but fewer
 * than a quorum still had our token: the lock is gone), DLOCK_ENOQUORUM
 * (too few nodes answered: the old validity still applies), DLOCK_EINVAL. */
DLOCK_API int dlock_redlock_extend(dlock_redlock_hold *h, int64_t lease_ms);

/* Releases the hold on every node (compare-and-delete, in parallel) and
 * frees h. Returns 0, or DLOCK_ELOST when fewer than a quorum of nodes
 * still held our token (it had expired: someone else may have held the
 * lock meanwhile). h is freed in every case; like every destructor, NULL
 * is a no-op (returns 0). */
DLOCK_API int dlock_redlock_unlock(dlock_redlock_hold *h);

#ifdef __cplusplus
}
#endif
#endif
