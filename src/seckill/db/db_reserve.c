/* db_reserve.c: the database path's reserve and the campaign's timeline.
 * Invariant: the degraded database path sells only reserve_remaining (the
 * units Redis was never given), stores each sale as a tentative order
 * (pending, not in user_totals) and each tentative order is finalised once
 * (WHERE status = 'pending'): persisted within the limit, otherwise
 * rejected (SK_OUT_LIMIT, rulebook.h) with its units back in the reserve.
 * Refusals are the engine's codes, so they map through the outcome table. The unsold reserve goes to
 * Redis's share at most once per campaign (handback_id recorded in the
 * transaction that empties it), and epoch only grows (the barrier's seal).
 * Design: docs/design/promise.md. */
#include "db.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"
#include "rulebook.h"
#include "sk_err.h"
#include "util.h"

static const char SQL_LIMIT[] = "SELECT per_user_limit FROM campaigns WHERE id = $1";
/* What a user holds or may soon hold: persisted + paid, plus tentative. */
static const char SQL_HELD[] =
    "SELECT COALESCE((SELECT qty FROM user_totals WHERE campaign = $1 AND user_id = $2), 0)"
    " + COALESCE((SELECT SUM(qty) FROM orders WHERE campaign = $1 AND user_id = $2 AND status = 'pending'), 0)";
static const char SQL_RESERVE_TAKE[] =
    "UPDATE campaign_stock SET remaining = remaining - $2, reserve_remaining = reserve_remaining - $2"
    " WHERE campaign = $1 AND reserve_remaining >= $2 AND remaining >= $2";
static const char SQL_RESERVE_GIVE[] =
    "UPDATE campaign_stock SET remaining = remaining + $2, reserve_remaining = reserve_remaining + $2"
    " WHERE campaign = $1";
static const char SQL_PENDING_INSERT[] =
    "INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms, updated_ms)"
    " VALUES ($1, $2, $3, $4, 'pending', '', 'db', $5, $5) ON CONFLICT (order_id) DO NOTHING";

/* Inside the transaction of sk_db_purchase_direct: 0 or a refusal code. */
static int direct_steps(sk_db *db, uint64_t order_id, const char *campaign, const char *user, int64_t qty,
                        int64_t now_ms)
{
    if (sk__db_lock_stock(db, campaign)) return SK_EDB;
    int64_t limit = 0, held = 0, changed = 0;
    sk__arg c = SK_T(campaign);
    if (sk__db_run(db, SQL_LIMIT, 1, &c, NULL, sk__db_int_cb, &limit)) return SK_EDB;
    sk__arg cu[2] = {SK_T(campaign), SK_T(user)};
    if (sk__db_run(db, SQL_HELD, 2, cu, NULL, sk__db_int_cb, &held)) return SK_EDB;
    if (held + qty > limit) return SK_ELIMIT;
    sk__arg s[2] = {SK_T(campaign), SK_I(qty)};
    if (sk__db_run(db, SQL_RESERVE_TAKE, 2, s, &changed, NULL, NULL)) return SK_EDB;
    if (changed == 0) return SK_ESOLDOUT;
    sk__arg ins[5] = {SK_I(order_id), SK_T(campaign), SK_T(user), SK_I(qty), SK_I(now_ms)};
    if (sk__db_run(db, SQL_PENDING_INSERT, 5, ins, &changed, NULL, NULL)) return SK_EDB;
    return changed == 1 ? 0 : SK_EEXIST;
}

int sk_db_purchase_direct(sk_db *db, uint64_t order_id, const char *campaign, const char *user,
                          int64_t qty, int64_t now_ms)
{
    sk_order_in o = {order_id, campaign, user, qty, "db", now_ms, NULL, 0};
    if (sk_db_order_invalid(&o)) return SK_EINVAL;
    sk_campaign c;
    int rc = sk_db_campaign_get(db, campaign, &c, NULL);
    if (rc) return rc;
    /* purchase.lua's order: the quantity bound, the window, the limit, stock */
    if (qty > c.per_user_limit) return SK_EINVAL; /* bad_quantity, as purchase.lua answers */
    if (now_ms < c.starts_at_ms) return SK_ENOTSTARTED;
    if (c.ends_at_ms > 0 && now_ms >= c.ends_at_ms) return SK_EENDED;
    if (sk__db_begin(db)) return SK_EDB;
    rc = direct_steps(db, order_id, campaign, user, qty, now_ms);
    if (rc) { /* a refused direct purchase leaves no trace */
        sk__db_rollback(db);
        return rc;
    }
    return sk__db_commit(db);
}

/* ---- finalisation ------------------------------------------------------ */

static const char SQL_USER_TAKE[] =
    "INSERT INTO user_totals (campaign, user_id, qty) VALUES ($1, $2, $3)"
    " ON CONFLICT (campaign, user_id) DO UPDATE SET qty = user_totals.qty + excluded.qty"
    " WHERE user_totals.qty + excluded.qty <= $4";
static const char SQL_CONFIRM[] =
    "UPDATE orders SET status = 'persisted', updated_ms = $2 WHERE order_id = $1 AND status = 'pending'";
static const char SQL_REFUSE[] =
    "UPDATE orders SET status = 'rejected', reason = $3, reason_code = $4, updated_ms = $2 WHERE order_id = $1"
    " AND status = 'pending'";

/* Inside the transaction: *result_out as sk_db_order_finalise's. */
static int finalise_steps(sk_db *db, const sk_order_row *row, int *result_out)
{
    if (sk__db_lock_stock(db, row->campaign)) return SK_EDB;
    int64_t limit = 0, took = 0, changed = 0;
    sk__arg c = SK_T(row->campaign);
    if (sk__db_run(db, SQL_LIMIT, 1, &c, NULL, sk__db_int_cb, &limit)) return SK_EDB;
    sk__arg u[4] = {SK_T(row->campaign), SK_T(row->user), SK_I(row->qty), SK_I(limit)};
    if (sk__db_run(db, SQL_USER_TAKE, 4, u, &took, NULL, NULL)) return SK_EDB;
    sk__arg st[4] = {SK_I(row->order_id), SK_I(dlock__wall_ms()), SK_T(sk_outcome_get(SK_OUT_LIMIT)->stored),
                     SK_I(SK_OUT_LIMIT)};
    if (sk__db_run(db, took ? SQL_CONFIRM : SQL_REFUSE, took ? 2 : 4, st, &changed, NULL, NULL)) return SK_EDB;
    if (changed == 0) return 1; /* finalised by someone else meanwhile: roll back */
    if (!took) {
        sk__arg s[2] = {SK_T(row->campaign), SK_I(row->qty)};
        if (sk__db_run(db, SQL_RESERVE_GIVE, 2, s, NULL, NULL, NULL)) return SK_EDB;
    }
    *result_out = took ? SK_APPLY_PERSISTED : SK_APPLY_REJECTED;
    return 0;
}

int sk_db_order_finalise(sk_db *db, uint64_t order_id, int *result_out)
{
    *result_out = 0;
    sk_order_row row;
    int rc = sk_db_order_get(db, order_id, &row);
    if (rc == SK_ENOTFOUND || (rc == 0 && strcmp(row.status, "pending") != 0)) return 0;
    if (rc) return rc;
    if (sk__db_begin(db)) return SK_EDB;
    rc = finalise_steps(db, &row, result_out);
    if (rc) {
        sk__db_rollback(db);
        return rc < 0 ? rc : 0;
    }
    return sk__db_commit(db);
}

/* ---- handback ---------------------------------------------------------- */

static const char SQL_HANDBACK_GET[] =
    "SELECT handback_id, handback_units, handback_done, reserve_remaining FROM campaign_stock WHERE campaign = $1";
static const char SQL_PENDING_COUNT[] = "SELECT COUNT(*) FROM orders WHERE campaign = $1 AND status = 'pending'";
static const char SQL_HANDBACK_SET[] =
    "UPDATE campaign_stock SET handback_id = $2, handback_units = reserve_remaining, reserve_remaining = 0"
    " WHERE campaign = $1 AND handback_id = '' AND reserve_remaining > 0";
static const char SQL_HANDBACK_DONE[] = "UPDATE campaign_stock SET handback_done = 1 WHERE campaign = $1";

typedef struct handback_acc {
    sk_db_handback *hb;
    int64_t reserve;
    int found;
} handback_acc;

static void handback_row(int n, const char *const *v, void *ud)
{
    handback_acc *a = ud;
    if (n < 4) return;
    snprintf(a->hb->id, sizeof(a->hb->id), "%s", v[0] ? v[0] : "");
    a->hb->units = sk__db_i64(v[1]);
    a->hb->done = sk__db_i64(v[2]) != 0;
    a->reserve = a->hb->reserve_remaining = sk__db_i64(v[3]);
    a->found = 1;
}

static int handback_read(sk_db *db, const char *campaign, sk_db_handback *out, int64_t *reserve_out)
{
    memset(out, 0, sizeof(*out));
    handback_acc a = {out, 0, 0};
    sk__arg c = SK_T(campaign);
    if (sk__db_run(db, SQL_HANDBACK_GET, 1, &c, NULL, handback_row, &a)) return SK_EDB;
    if (reserve_out) *reserve_out = a.reserve;
    return a.found ? 0 : SK_ENOTFOUND;
}

int sk_db_handback_get(sk_db *db, const char *campaign, sk_db_handback *out)
{
    return handback_read(db, campaign, out, NULL);
}

/* Inside the transaction: 1 begun, 0 nothing to do, or a code. */
static int handback_steps(sk_db *db, const char *campaign, sk_db_handback *out)
{
    if (sk__db_lock_stock(db, campaign)) return SK_EDB;
    int64_t reserve = 0, pending = 0, changed = 0;
    int rc = handback_read(db, campaign, out, &reserve);
    if (rc) return rc;
    if (out->id[0] || reserve <= 0) return 0;
    sk__arg c = SK_T(campaign);
    if (sk__db_run(db, SQL_PENDING_COUNT, 1, &c, NULL, sk__db_int_cb, &pending)) return SK_EDB;
    if (pending > 0) return 0; /* a refusal at finalisation would refill the reserve: wait */
    char rnd[9], id[48];
    dlock__random_hex(rnd, 4);
    snprintf(id, sizeof(id), "hb-%" PRId64 "-%s", dlock__wall_ms(), rnd);
    sk__arg a[2] = {SK_T(campaign), SK_T(id)};
    if (sk__db_run(db, SQL_HANDBACK_SET, 2, a, &changed, NULL, NULL)) return SK_EDB;
    if (changed != 1) return 0;
    return handback_read(db, campaign, out, NULL) ? SK_EDB : 1;
}

int sk_db_handback_begin(sk_db *db, const char *campaign, sk_db_handback *out)
{
    if (!sk_valid_campaign_id(campaign)) return SK_EINVAL;
    if (sk__db_begin(db)) return SK_EDB;
    int rc = handback_steps(db, campaign, out);
    if (rc != 1) {
        sk__db_rollback(db);
        return rc;
    }
    return sk__db_commit(db) ? SK_EDB : 1;
}

int sk_db_handback_mark_done(sk_db *db, const char *campaign)
{
    sk__arg c = SK_T(campaign);
    return sk__db_run(db, SQL_HANDBACK_DONE, 1, &c, NULL, NULL, NULL) ? SK_EDB : 0;
}

/* ---- the timeline ------------------------------------------------------ */

static const char SQL_SEAL[] = "UPDATE campaign_stock SET epoch = $2 WHERE campaign = $1 AND epoch < $2";
static const char SQL_EPOCH[] = "SELECT epoch FROM campaign_stock WHERE campaign = $1";

int sk_db_campaign_epoch(sk_db *db, const char *campaign, int64_t *epoch_out)
{
    *epoch_out = 0;
    sk__arg c = SK_T(campaign);
    if (sk__db_run(db, SQL_EPOCH, 1, &c, NULL, sk__db_int_cb, epoch_out)) return SK_EDB;
    return *epoch_out > 0 ? 0 : SK_ENOTFOUND;
}

int sk_db_campaign_seal(sk_db *db, const char *campaign, int64_t at_least)
{
    int64_t have = 0;
    int rc = sk_db_campaign_epoch(db, campaign, &have);
    if (rc || have >= at_least) return rc;
    sk__arg a[2] = {SK_T(campaign), SK_I(at_least)};
    return sk__db_run(db, SQL_SEAL, 2, a, NULL, NULL, NULL) ? SK_EDB : 0;
}
