/* coalesce_internal.h: what the purchase path's two files share: the
 * coalescer (coalesce.c: batching per bucket lane, acknowledgement,
 * answers) and the transfers of a sharded campaign (transfer.c: moving
 * units into a lane whose purchases came back "short", the sold-out
 * decision over all buckets, recovery of stale journal entries). Loop
 * thread only. */
#ifndef SK_COALESCE_INTERNAL_H
#define SK_COALESCE_INTERNAL_H

#include "camp_table.h"
#include "coalesce.h"

struct sk__preq {
    sk_purchase_cb cb;
    void *arg;
    int64_t qty;
    char user[65];
    char idem[65];
    char ip[64];
    uint64_t order_id;      /* 0 until the first send; kept when sent again */
    bool resent;            /* sent again after a transfer: rate limits not counted twice */
    int64_t parked_ms;      /* monotonic ms it first came back "short" (0: never) */
    bool confirmed;         /* a replay of an order the database holds: 201 without an acknowledgement */
    struct sk__preq *next;  /* parked FIFO */
    sk_purchase_result res; /* decided, waiting for the acknowledgement */
};

struct sk__coalescer {
    struct event_base *base;
    sk__coalesce_hooks h;
    int max_batch;
    int64_t linger_us;
    int64_t limits[6];      /* user rate, window; ip rate, window; idem ttl; order ttl */
    int64_t park_max_ms;    /* a parked purchase answers 503 after this (the engine's command timeout) */
    int64_t xfer_pause_ms;  /* test hook: delay between take and give */
    sk__camp_table camps;
    size_t pending;         /* purchases queued, in flight or parked */
    bool freeing;
    struct sk__batch *failed; /* batches to fail from the loop (fail_ev) */
    struct event *fail_ev;
    uint64_t outcomes[SK_STAT_OUTCOMES];
    uint64_t batches[SK_STAT_BATCH_BUCKETS];
    uint64_t batched_purchases;
    uint64_t soldout_local;
    uint64_t answered_acked, answered_pending, answered_confirmed, ack_waits, ack_failures, ack_skipped;
    sk_engine_xfer_stats xs;
    char xid_base[17];      /* this coalescer's transfer ids: <xid_base>.<seq> */
    uint64_t xid_seq;
    int64_t last_recover_ms;
    char *wire;             /* the last batch's RESP arguments (reused) */
    size_t wire_cap;
};

/* coalesce.c */
void sk__co_log(sk__coalescer *co, int level, const char *msg);
/* Answers q now (res), counts it, frees it. */
void sk__co_answer(sk__coalescer *co, sk__preq *q, const sk_purchase_result *res);
/* Queues q on lane l (as a new arrival would be) and sends when due. */
void sk__co_enqueue(sk__lane *l, sk__preq *q);
/* Drops c if it is unknown and idle. */
void sk__co_maybe_drop(sk__coalescer *co, sk__camp *c);

/* transfer.c */
/* Lane l has parked purchases (or just drained: none): start moving
 * units into it unless a move into it is already under way. */
void sk__xfer_kick(sk__coalescer *co, sk__lane *l);
/* Finishes journal entries older than a few seconds in every bucket of
 * the sharded campaigns this coalescer knows (a crashed or stalled mover's). */
void sk__xfer_recover(sk__coalescer *co);
/* Answers every parked purchase of every lane with err (shutdown). */
void sk__xfer_fail_parked(sk__coalescer *co, int err);
/* Frees the pulls left (the coalescer's free: no reply is due any more). */
void sk__xfer_free_all(sk__coalescer *co);

#endif
