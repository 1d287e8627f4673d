/* barrier.h: the barrier after a change of master (docs/design/promise.md):
 * a campaign whose {c:<id>}:meta names another master's run id than the
 * connected one does not sell (purchase.lua answers "barrier") until this
 * runner has (1) seen the campaign's group drained on the new master,
 * (2) sealed the old timeline in the database (campaign_stock.epoch =
 * meta.epoch + 1), (3) given the new master every order, release and
 * handback the database holds and it lacks (barrier_mirror.lua), and
 * (4) opened it (meta.runid = the new run id, meta.epoch + 1).
 * One runner per campaign at a time ({c:<id>}:barrier, SET NX PX).
 * A campaign of K > 1 buckets (buckets.h) has one barrier per bucket
 * ({<tag_j>}:meta's runid/epoch, lock {<tag_j>}:barrier): bucket j is
 * drained on and mirrored into its own master (the orders of users whose
 * home bucket is j; handbacks only into bucket 0), the others go on
 * selling; the seal of the campaign's one timeline is shared, taken
 * under {c:<id>}:sealing (barrier.c, docs/design/promise.md "Buckets").
 * Thread-safety: uses only the handles it is given (one thread). */
#ifndef SK_BARRIER_H
#define SK_BARRIER_H

#include <stdbool.h>
#include <stdint.h>

#include "buckets.h"
#include "db.h"
#include "redis_io.h"

/* The run id of the server behind rc (INFO server, run_id): 0 or a code. */
int sk_barrier_run_id(dlock__conn *rc, char out[41]);
/* The run id of the node that serves campaign's slot (node_runid.lua,
 * routed by {c:<id>}:meta): on a Cluster each campaign has its own master;
 * on one server the same as sk_barrier_run_id. 0 or a code. */
int sk_barrier_node_run_id(dlock__conn *rc, const char *campaign, char out[41]);
/* The same for bucket j of layout lay (routed by {<tag_j>}:meta). */
int sk_barrier_bucket_run_id(dlock__conn *rc, const sk_buckets *lay, int j, char out[41]);

typedef enum sk_barrier_state {
    SK_BARRIER_OPEN = 0,    /* the campaign sells on this master (no barrier due, or opened now) */
    SK_BARRIER_WAITING = 1, /* due: draining, or another runner holds the lock */
} sk_barrier_state;

typedef struct sk_barrier_run {
    const char *owner;    /* lock value (the persister's consumer name) */
    int64_t lock_ms;      /* lock lifetime, renewed at every step (default 10000) */
    int batch;            /* orders per barrier_mirror.lua call (default 200) */
    int64_t started_ms;   /* in/out: monotonic ms the drain began, 0 = not yet */
    /* monotonic send time of the last take/renewal of the bucket's lock and
     * of the seal lock: each is believed until then + lock_ms - drift */
    int64_t lock_sent_ms, seal_sent_ms;
    /* K > 1, while holding the seal lock: the epoch chosen, and per other
     * bucket the stream id it must be persisted through */
    int64_t seal_epoch;
    char raise_id[SK_MAX_SHARDS][32];
    /* out, when opened now: */
    bool opened;
    int64_t duration_ms, epoch, mirrored, given_back, handbacks;
} sk_barrier_run;

void sk_barrier_run_init(sk_barrier_run *b, const char *owner);

/* One step of the barrier for campaign on the master with run_id; never
 * waits: a drain not finished answers SK_BARRIER_WAITING (call again; the
 * lock is kept and renewed). A campaign without meta, or whose meta has
 * neither runid nor epoch (pre-heated before the barrier existed), is
 * SK_BARRIER_OPEN (see sk_barrier_force). Returns an sk_barrier_state or
 * a negative code (SK_EDB, a dlock code). */
int sk_barrier_step(sk_db *db, dlock__conn *rc, const char *campaign, const char *run_id, sk_barrier_run *b);
/* The same for bucket j (0 <= j < lay->k, else SK_EINVAL) of a campaign
 * with layout lay, run_id being the run id of the node serving bucket j
 * (sk_barrier_bucket_run_id); one sk_barrier_run per bucket. With K > 1
 * the step may also wait for the seal lock and for the other buckets'
 * streams to be persisted through the raise of their epoch.
 * sk_barrier_step is this for bucket 0 of the campaign's layout. */
int sk_barrier_step_bucket(sk_db *db, dlock__conn *rc, const char *campaign, const sk_buckets *lay, int j,
                           const char *run_id, sk_barrier_run *b);

/* Makes a barrier due on campaign (its bucket 0) even when its meta names this master:
 * meta.runid is overwritten (purchases stop at once), so the next
 * sk_barrier_step runs it. For `seckill barrier`. 0 or a code. */
int sk_barrier_force(dlock__conn *rc, const char *campaign, const char *owner);
/* The same for bucket j of layout lay (0 <= j < lay->k, else SK_EINVAL);
 * run its barrier with sk_barrier_step_bucket. */
int sk_barrier_force_bucket(dlock__conn *rc, const sk_buckets *lay, int j, const char *owner);

#endif
