/* lifecycle.c: cancellation of orders (on request or after the payment
 * timeout). Order of effects: database transition persisted -> cancelled
 * (the database's once-only gate, stock and quota back in the same
 * transaction), then order_units.lua (Redis's once-only gate), then the row is
 * marked released. A crash between the steps leaves a cancelled,
 * unreleased row that the next sweep finishes: each side returns once.
 * The sweep also mirrors degraded-path orders into Redis (once). */
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "lifecycle.h"
#include "release.h"
#include "sk_err.h"
#include "util.h"

/* Redis release + mark; 1 released now, 0 already, < 0 error. */
static int release_and_mark(sk_db *db, dlock__conn *rc, const sk_order_row *row)
{
    int r = sk_release_order(rc, row, "cancelled");
    if (r < 0) return r;
    int m = sk_db_order_mark_released(db, row->order_id);
    return m ? m : r;
}

int sk_order_cancel(sk_db *db, dlock__conn *rc, uint64_t order_id, const char *reason)
{
    sk_order_row row;
    int r = sk_db_order_cancel(db, order_id, reason, &row);
    if (r) return r;
    /* A degraded-path ("db") order is in Redis only once mirrored: the
     * sweep's release-pending query knows; so does a failed release here. */
    if (rc && strcmp(row.path, "redis") == 0) release_and_mark(db, rc, &row);
    return 0;
}

int sk_lifecycle_sweep(sk_db *db, dlock__conn *rc, const char *campaign, int64_t pay_timeout_ms, int max,
                       int64_t *cancelled_out, int64_t *released_out)
{
    return sk_lifecycle_sweep_cb(db, rc, campaign, pay_timeout_ms, max, cancelled_out, released_out, NULL, NULL);
}

int sk_lifecycle_sweep_cb(sk_db *db, dlock__conn *rc, const char *campaign, int64_t pay_timeout_ms, int max,
                          int64_t *cancelled_out, int64_t *released_out, sk_cancel_cb on_cancel, void *ud)
{
    if (max <= 0) max = 256;
    sk_db_rows l = {calloc((size_t)max, sizeof(sk_order_row)), 0, max};
    if (!l.v) return DLOCK_ENOMEM;
    int rc_out = 0;
    if (pay_timeout_ms > 0) {
        int found = sk_db_orders_unpaid_before(db, campaign, dlock__wall_ms() - pay_timeout_ms, max, sk_db_rows_add, &l);
        if (found < 0) rc_out = found;
        for (int i = 0; i < l.n; i++) {
            sk_order_row row;
            int r = sk_db_order_cancel(db, l.v[i].order_id, "payment timeout", &row);
            if (r == 0 && cancelled_out) (*cancelled_out)++;
            if (r == 0 && on_cancel) on_cancel(&row, ud);
            if (r == SK_EDB) rc_out = r;
        }
    }
    l.n = 0;
    if (rc) { /* degraded-path orders: mirrored into Redis once */
        int found = sk_db_orders_mirror_pending(db, campaign, max, sk_db_rows_add, &l);
        if (found < 0) rc_out = found;
        for (int i = 0; i < l.n; i++) {
            int r = sk_mirror_order(rc, &l.v[i]);
            if (r >= 0) r = sk_db_order_mark_mirrored(db, l.v[i].order_id);
            if (r < 0) {
                rc_out = r;
                break;
            }
        }
    }
    l.n = 0;
    if (rc) {
        int found = sk_db_orders_release_pending(db, campaign, max, sk_db_rows_add, &l);
        if (found < 0) rc_out = found;
        for (int i = 0; i < l.n; i++) {
            int r = release_and_mark(db, rc, &l.v[i]);
            if (r == 1 && released_out) (*released_out)++;
            if (r < 0) {
                rc_out = r;
                break; /* Redis trouble: try again next sweep */
            }
        }
    }
    free(l.v);
    return rc_out;
}
