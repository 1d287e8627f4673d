/* election.h: leader election over Redis (standalone, Sentinel, Cluster)
 * or etcd: candidates campaign with a value (their label), one leads at a
 * time, everyone can ask who leads and observe each change in order.
 * Leadership is a hold under the validity rule (dlock.h): the leader stops
 * leading at its validity deadline, told by its lost callback, even when
 * the server or the network is frozen; the next leader can start no
 * earlier than the lease after the old leader's last successful renewal
 * was received. Its term is a fencing token (lock.h, "fencing").
 * Across a Redis failover that holds only for renewals a replica has: on
 * Sentinel or Cluster give the client wait_replicas >= 1 (dlock.h), or
 * two leaders can overlap until the old master is demoted; a campaign
 * may then answer DLOCK_ENOTREPL (no replica acknowledged: not leading,
 * campaign again).
 * Key layouts and measured failure behaviour: docs/locks.md, "Elections".
 *
 * Thread-safety: a dlock_election handle is used by one thread at a time,
 * except dlock_election_cancel(), dlock_election_is_leader(),
 * dlock_election_validity_ms() and dlock_election_term(), which any thread
 * may call at any time. The lost callback runs on one of the client's
 * watchdog threads, the observe callback on the handle's own observer
 * thread; neither may free the handle or stop the observer.
 * Lifetimes: as every handle (dlock.h, "Contracts"): it may be freed
 * before or after its client is destroyed; every other call needs the
 * client alive, and so does a running observer: stop it
 * (dlock_election_observe_stop or free) before destroying the client.
 * Strings passed in are copied.
 * Errors: 0 or a negative dlock_err (dlock.h); "transport codes" as there.
 */
#ifndef DLOCK_ELECTION_H
#define DLOCK_ELECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"
#include "dlock/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_election dlock_election;

/* Longest election name accepted (bytes): the name is stored inside the
 * key "election:{NAME}" (docs/locks.md), which must fit DLOCK_NAME_MAX. */
#define DLOCK_ELECTION_NAME_MAX (DLOCK_NAME_MAX - 11)

/* Who leads, as one read saw it. Frozen for 1.x (dlock.h, "Contracts"). */
typedef struct dlock_leader {
    bool present;                      /* someone leads */
    uint64_t term;                     /* the leader's term (fencing token); 0 if none */
    char value[DLOCK_LABEL_MAX + 1];   /* the leader's value ("" none or not set) */
    int64_t ttl_ms;                    /* the server's remaining lease of the
                                        * leadership; -2 no leader */
} dlock_leader;

/* Called on a watchdog thread when this handle stops leading without
 * resigning: at its validity deadline (no renewal succeeded in time, the
 * server or the network frozen or cut), or when a renewal found the
 * leadership gone. reason is DLOCK_ELOST. By the time it runs,
 * dlock_election_is_leader() is already false. The callback may call
 * dlock_election_resign() (which returns DLOCK_ELOST) but not
 * dlock_election_free(). */
typedef void (*dlock_election_lost_fn)(dlock_election *e, int reason, void *ud);

/* Called on the handle's observer thread for each change of leader seen,
 * in the order they happened: a new leader (present, new term), a new
 * value of the same leader (same term), or "no leader" (present false).
 * Between two leaders there is always a "no leader" call (there was such
 * a moment, on both backends), even when no read fell inside it. A leader
 * that lasted less than one read may be skipped: its term is then missing
 * from the sequence of terms seen. leader is valid only during the call. */
typedef void (*dlock_observe_fn)(dlock_election *e, const dlock_leader *leader, void *ud);

typedef struct dlock_election_options {
    size_t size; /* set by dlock_election_options_init (dlock.h, "Contracts"); do not change */
    /* NULL (default): a fresh id. Non-NULL (1..DLOCK_OWNER_MAX bytes,
     * copied): the id dlock_election_id() gave an earlier process, so that
     * a process that restarts while its leadership still lives on the
     * server resumes it: campaign leads again at once with the same term.
     * Redis: any id (it is the holder token); two live handles must never
     * share one (both would lead). etcd: the 16 hex digits of the earlier
     * leadership's lease (else DLOCK_ENOTSUP at new); it is resumed while
     * the lease lives (its TTL after the last keepalive) and its key still
     * leads, and when the lease's TTL is not shorter than this client's
     * lease; otherwise the campaign starts afresh (docs/locks.md). */
    const char *id;
    dlock_election_lost_fn on_lost; /* NULL: only logged and counted */
    void *on_lost_ud;
    /* Longest time between two reads of the observer (default 250 ms,
     * 10..60000): the bound of the poll that backs up pub/sub on Redis
     * (a leader that expires publishes nothing) and the interval of
     * the observer's reads on etcd, where it does not watch. */
    int64_t poll_ms;
} dlock_election_options;

DLOCK_API void dlock_election_options_init(dlock_election_options *opts);

/* Creates a handle for the election called name on client; no command is
 * sent. The leadership lease is the client's watchdog_timeout_ms, renewed
 * every third of it while leading. opts NULL means defaults.
 * Returns 0 and *e_out, DLOCK_EINVAL (NULL client, name empty or longer
 * than DLOCK_ELECTION_NAME_MAX, bad id or poll_ms; logged),
 * DLOCK_ENOTSUP (on etcd, an id that is no lease id), DLOCK_ENOMEM. */
DLOCK_API int dlock_election_new(dlock_client *client, const char *name,
                                 const dlock_election_options *opts, dlock_election **e_out);

/* Campaigns with value (the candidate's label: 1..DLOCK_LABEL_MAX bytes,
 * no control characters) and waits at most wait_ms (0: one attempt;
 * DLOCK_WAIT_FOREVER) to lead. Waiting sleeps on the leader's release
 * (pub/sub on Redis, a watch on etcd) capped by its remaining lease, so a
 * standby takes over within the old leader's lease after it last renewed
 * plus one recheck. *term_out (may be NULL) receives the term, strictly
 * greater than every term before it in this election (as a fencing token;
 * a resumed leadership keeps its term).
 * Returns 0 (leading), DLOCK_EBUSY (wait_ms 0, someone else leads),
 * DLOCK_ETIMEOUT, DLOCK_ECANCELED (dlock_election_cancel), DLOCK_EALREADY
 * (this handle leads already: use proclaim), DLOCK_EINVAL (bad value),
 * DLOCK_EUNKNOWN (the answer was lost: dlock_election_leader tells),
 * or a transport code. */
DLOCK_API int dlock_election_campaign(dlock_election *e, const char *value, int64_t wait_ms,
                                      uint64_t *term_out);

/* Replaces the leader's value while this handle leads (same term);
 * observers see it. One round trip. Returns 0, DLOCK_EINVAL (bad value:
 * nothing changed), DLOCK_ENOTHELD (not leading), DLOCK_ELOST (the
 * server no longer has this leader), or a transport code. */
DLOCK_API int dlock_election_proclaim(dlock_election *e, const char *value);

/* Stops leading: deletes the leadership so a standby takes over at once.
 * Returns 0, DLOCK_ENOTHELD (not leading), DLOCK_ELOST (the leadership
 * was lost since: someone else may lead), or a transport code
 * (DLOCK_EUNKNOWN: it may still lead until its lease runs out). */
DLOCK_API int dlock_election_resign(dlock_election *e);

/* Makes a campaign waiting on this handle (now or the next one to start)
 * return DLOCK_ECANCELED. Any thread. */
DLOCK_API void dlock_election_cancel(dlock_election *e);

/* Local view, no server call: true while this handle leads and before
 * its validity deadline (dlock.h). Any thread. */
DLOCK_API bool dlock_election_is_leader(dlock_election *e);
/* Milliseconds left before that deadline (0: not leading). A leader that
 * must stop acting before anyone else can lead schedules its stop from
 * this. Any thread. */
DLOCK_API int64_t dlock_election_validity_ms(dlock_election *e);
/* The term of the current / last leadership of this handle (0: none). */
DLOCK_API uint64_t dlock_election_term(dlock_election *e);
/* The id to resume with after a restart: Redis: opts->id or the
 * generated one (valid for the handle's life); etcd: the lease of the
 * current / last leadership as 16 hex digits ("" before the first), valid
 * until the next call on the handle. */
DLOCK_API const char *dlock_election_id(const dlock_election *e);

/* Who leads now: one read-only round trip (etcd: two) giving the leader,
 * its term and value together. Returns 0, DLOCK_EINVAL, or a transport
 * code. */
DLOCK_API int dlock_election_leader(dlock_election *e, dlock_leader *leader_out);

/* Starts the handle's observer thread: fn is called with the leader as
 * first read, then at each change (see dlock_observe_fn), until
 * dlock_election_observe_stop or dlock_election_free. Reads follow
 * pub/sub wake-ups on Redis (campaign, proclaim and resign publish on the
 * election's channel), the leader's remaining lease (an expiry is read
 * when it happens) and at least every poll_ms. Transport errors are
 * logged and retried at poll_ms; no change is made up meanwhile.
 * Returns 0, DLOCK_EALREADY (already observing), DLOCK_EINVAL (NULL fn),
 * DLOCK_ENOMEM (no thread). */
DLOCK_API int dlock_election_observe(dlock_election *e, dlock_observe_fn fn, void *ud);
/* Stops the observer and waits for it: no call of fn runs after it
 * returns. Not from fn itself. NULL or not observing: no-op. */
DLOCK_API void dlock_election_observe_stop(dlock_election *e);

/* Frees the handle (stops its observer). A leadership still held is NOT
 * resigned: it is reported (WARN) and ends on its lease, so a standby
 * takes over no earlier than that. NULL is a no-op. */
DLOCK_API void dlock_election_free(dlock_election *e);

#ifdef __cplusplus
}
#endif
#endif
