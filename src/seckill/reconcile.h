/* reconcile.h: compares what Redis decided with what the database recorded
 * for one campaign and lists every difference. A campaign is consistent
 * only when the stream is drained (nothing pending or unread), nothing was
 * dead-lettered or rejected, and stock, buyers, orders and releases agree.
 * Uses one sync Redis connection and one database handle (one thread). */
#ifndef SK_RECONCILE_H
#define SK_RECONCILE_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "redis_io.h"
#include "util.h"

typedef struct sk_reconcile_report {
    char campaign[65];
    /* Redis */
    bool redis_present;
    int64_t r_initial, r_stock, r_buyer_units, r_buyers, r_stream_len, r_pending, r_lag, r_dead, r_released;
    int64_t r_carried; /* Redis-path orders a barrier gave this master (in the database, not in its stream) */
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
/* Appends the report as text or as one JSON object. */
void sk_reconcile_format(const sk_reconcile_report *rep, bool json, dlock__buf *out);

#endif
