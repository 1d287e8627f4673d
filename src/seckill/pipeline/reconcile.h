/* reconcile.h: compares what Redis decided with what the database recorded
 * for one campaign and lists every difference. A campaign is consistent
 * only when the stream is drained (nothing pending or unread), nothing was
 * dead-lettered or rejected, and stock, buyers, orders and releases agree.
 * A campaign of K buckets (buckets.h) is the sum of its buckets plus the
 * units in transit between them: journal entries {T}:xfer whose transfer
 * id the destination's {T}:xin does not hold yet. The reads are not one
 * snapshot: run it on a quiet campaign (after the sale, streams drained),
 * or expect differences that a transfer or a purchase under way explains.
 * Uses one sync Redis connection and one database handle (one thread). */
#ifndef SK_RECONCILE_H
#define SK_RECONCILE_H

#include <stdbool.h>
#include <stdint.h>

#include "buckets.h"
#include "db.h"
#include "redis_io.h"
#include "util.h"

/* One bucket's Redis side (K = 1: the campaign's only bucket). */
typedef struct sk_reconcile_bucket {
    char tag[SK_BUCKET_TAG_MAX];
    bool present; /* {T}:stock exists */
    int64_t stock, buyer_units, buyers, stream_len, pending, lag, dead, released, carried;
    int64_t xfer_entries;                           /* journal entries of transfers leaving it */
    int64_t transit_out_entries, transit_out_units; /* of those, not yet given (in transit) */
    int64_t transit_oldest_ms;                      /* Redis clock of the oldest of those (0: none) */
    int64_t xin;                                    /* transfers given to it (SCARD {T}:xin) */
} sk_reconcile_bucket;

typedef struct sk_reconcile_report {
    char campaign[65];
    /* Redis */
    bool redis_present;
    int64_t r_initial, r_stock, r_buyer_units, r_buyers, r_stream_len, r_pending, r_lag, r_dead, r_released;
    int64_t r_carried; /* Redis-path orders a barrier gave this master (in the database, not in its stream) */
    /* sums over the buckets: r_stock, r_buyer_units, r_buyers, r_stream_len, r_pending, r_lag, r_dead,
     * r_released, r_carried; in transit: units taken from one bucket, not yet given to another */
    int64_t r_in_transit, r_in_transit_entries;
    int64_t r_transit_oldest_ms; /* Redis clock (unix ms) of the oldest take still in transit; 0: none */
    int nbuckets; /* K (1 when the layout could not be read) */
    sk_reconcile_bucket bucket[SK_MAX_SHARDS];
    /* database */
    sk_db_campaign_stats d;
    /* differences, one line each */
    dlock__buf diffs;
    int ndiffs;
} sk_reconcile_report;

/* Fills rep (release with sk_reconcile_report_free). Returns 0 (see
 * rep->ndiffs), SK_ENOTFOUND (campaign in neither), SK_EDB or a dlock code. */
int sk_reconcile_campaign(sk_db *db, dlock__conn *rc, const char *campaign, sk_reconcile_report *rep);
void sk_reconcile_report_free(sk_reconcile_report *rep);
/* The Redis side only (layout, buckets, journals; differences of Redis
 * alone, e.g. a malformed journal entry): for `seckill campaigns show`.
 * rep is reset first (free it with sk_reconcile_report_free). 0, SK_EINVAL
 * (bad id) or the connection's error. */
int sk_reconcile_redis(dlock__conn *rc, const char *campaign, sk_reconcile_report *rep);
/* Appends the report as text or as one JSON object. */
void sk_reconcile_format(const sk_reconcile_report *rep, bool json, dlock__buf *out);

#endif
