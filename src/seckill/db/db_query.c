/* db_query.c: the database's read side for the sweep, the barrier and
 * reconciliation: the orders still to be done in Redis (releases, mirrors,
 * finalisations, give-backs), the barrier's pages of orders, and the
 * figures of one campaign. Every "still to do" query runs on a partial
 * index, so a sweep never scans the orders of a whole sale. */
#include "db.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"
#include "rulebook.h"
#include "sk_err.h"
#include "util.h"

static const char SQL_UNPAID[] = SK__ORDER_COLS " WHERE status = 'persisted' AND created_ms < $1"
                                            " AND ($3 = '' OR campaign = $3) ORDER BY created_ms LIMIT $2";
/* SQLite has no statistics unless ANALYZE ran, so it is told which
 * (partial) index to use; PostgreSQL's planner finds it. */
#define REL_PENDING_WHERE                                                                                \
    " WHERE status = 'cancelled' AND redis_released = 0 AND (path = 'redis' OR redis_mirrored = 1)"    \
    " AND ($2 = '' OR campaign = $2) ORDER BY updated_ms LIMIT $1"
#define MIRROR_PENDING_WHERE                                                                             \
    " WHERE path = 'db' AND redis_mirrored = 0 AND status IN ('pending', 'persisted', 'paid')"                    \
    " AND ($2 = '' OR campaign = $2) ORDER BY order_id LIMIT $1"
static const char SQL_REL_PENDING[] = SK__ORDER_COLS REL_PENDING_WHERE;
static const char SQL_REL_PENDING_LITE[] = SK__ORDER_COLS " INDEXED BY orders_release_pending" REL_PENDING_WHERE;
static const char SQL_MIRROR_PENDING[] = SK__ORDER_COLS MIRROR_PENDING_WHERE;
static const char SQL_MIRROR_PENDING_LITE[] = SK__ORDER_COLS " INDEXED BY orders_mirror_pending" MIRROR_PENDING_WHERE;
static const char SQL_MARK_MIRRORED[] = "UPDATE orders SET redis_mirrored = 1 WHERE order_id = $1";
static const char SQL_MARK_RELEASED[] = "UPDATE orders SET redis_released = 1 WHERE order_id = $1";
#define FINALISE_WHERE                                                                                   \
    " WHERE status = 'pending' AND redis_mirrored = 1 AND ($2 = '' OR campaign = $2) ORDER BY order_id LIMIT $1"
static const char SQL_FINALISE_PENDING[] = SK__ORDER_COLS FINALISE_WHERE;
static const char SQL_FINALISE_PENDING_LITE[] = SK__ORDER_COLS " INDEXED BY orders_tentative" FINALISE_WHERE;
/* Few rows: refusals at finalisation are rare (the buyer's limit). */
static const char SQL_DROP_PENDING[] =
    SK__ORDER_COLS " WHERE status = 'rejected' AND path = 'db' AND redis_mirrored = 1 AND redis_released = 0"
    " AND ($2 = '' OR campaign = $2) ORDER BY order_id LIMIT $1";
static const char SQL_FOR_BARRIER[] =
    SK__ORDER_COLS " WHERE campaign = $1 AND order_id > $2 AND (status <> 'rejected'"
    " OR (path = 'db' AND redis_mirrored = 1)) ORDER BY order_id LIMIT $3";
static const char SQL_BY_STATUS[] = SK__ORDER_COLS " WHERE campaign = $1 AND status = $2 ORDER BY order_id LIMIT $3";

void sk_db_rows_add(const sk_order_row *row, void *ud)
{
    sk_db_rows *l = ud;
    if (l->n < l->cap) l->v[l->n++] = *row;
}

int sk_db_orders_unpaid_before(sk_db *db, const char *campaign, int64_t cutoff_ms, int max, sk_db_order_cb cb,
                               void *ud)
{
    sk__arg args[3] = {SK_I(cutoff_ms), SK_I(max), SK_T(campaign ? campaign : "")};
    return sk__db_order_query(db, SQL_UNPAID, 3, args, cb, ud);
}

/* The (max, campaign) queries with a SQLite-specific spelling. */
static int pending_query(sk_db *db, const char *sql_pg, const char *sql_lite, const char *campaign, int max,
                         sk_db_order_cb cb, void *ud)
{
    sk__arg args[2] = {SK_I(max), SK_T(campaign ? campaign : "")};
    return sk__db_order_query(db, sk__db_kindof(db) == SK__DB_SQLITE ? sql_lite : sql_pg, 2, args, cb, ud);
}

int sk_db_orders_release_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud)
{
    return pending_query(db, SQL_REL_PENDING, SQL_REL_PENDING_LITE, campaign, max, cb, ud);
}

int sk_db_orders_mirror_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud)
{
    return pending_query(db, SQL_MIRROR_PENDING, SQL_MIRROR_PENDING_LITE, campaign, max, cb, ud);
}

int sk_db_orders_finalise_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud)
{
    return pending_query(db, SQL_FINALISE_PENDING, SQL_FINALISE_PENDING_LITE, campaign, max, cb, ud);
}

int sk_db_orders_drop_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud)
{
    return pending_query(db, SQL_DROP_PENDING, SQL_DROP_PENDING, campaign, max, cb, ud);
}

int sk_db_orders_for_barrier(sk_db *db, const char *campaign, uint64_t after, int max, sk_db_order_cb cb,
                             void *ud)
{
    sk__arg args[3] = {SK_T(campaign), SK_I(after), SK_I(max)};
    return sk__db_order_query(db, SQL_FOR_BARRIER, 3, args, cb, ud);
}

int sk_db_order_mark_mirrored(sk_db *db, uint64_t order_id) { return sk__db_order_mark(db, SQL_MARK_MIRRORED, order_id); }

int sk_db_order_mark_released(sk_db *db, uint64_t order_id) { return sk__db_order_mark(db, SQL_MARK_RELEASED, order_id); }

int sk_db_orders_by_status(sk_db *db, const char *campaign, const char *status, int max,
                           sk_db_order_cb cb, void *ud)
{
    sk__arg args[3] = {SK_T(campaign), SK_T(status), SK_I(max)};
    return sk__db_order_query(db, SQL_BY_STATUS, 3, args, cb, ud);
}

static const char SQL_STATS_ORDERS[] =
    "SELECT status, COUNT(*), COALESCE(SUM(qty), 0) FROM orders WHERE campaign = $1 GROUP BY status";
static const char SQL_STATS_USERS[] = "SELECT COALESCE(SUM(qty), 0) FROM user_totals WHERE campaign = $1";
static const char SQL_STATS_RELPEND[] =
    "SELECT COUNT(*) FROM orders WHERE campaign = $1 AND status = 'cancelled' AND redis_released = 0"
    " AND (path = 'redis' OR redis_mirrored = 1)";
static const char SQL_STATS_MIRPEND[] =
    "SELECT COUNT(*) FROM orders WHERE campaign = $1 AND path = 'db' AND redis_mirrored = 0"
    " AND status IN ('pending', 'persisted', 'paid')";
static const char SQL_STATS_DBREL[] =
    "SELECT COUNT(*) FROM orders WHERE campaign = $1 AND status = 'cancelled' AND redis_released = 1";

static const char SQL_STATS_DBPATH[] = "SELECT COUNT(*) FROM orders WHERE campaign = $1 AND path = 'db'";
static const char SQL_STATS_REJECTS[] =
    "SELECT COALESCE(SUM(CASE WHEN path = 'redis' AND reason_code <> $2 THEN 1 ELSE 0 END), 0),"
    " COALESCE(SUM(CASE WHEN reason_code = $2 THEN 1 ELSE 0 END), 0),"
    " COALESCE(SUM(CASE WHEN path = 'db' AND reason_code = $3 THEN 1 ELSE 0 END), 0)"
    " FROM orders WHERE campaign = $1 AND status = 'rejected'";
static const char SQL_STATS_RESERVE[] =
    "SELECT c.db_reserve, s.reserve_remaining, s.epoch FROM campaigns c JOIN campaign_stock s"
    " ON s.campaign = c.id WHERE c.id = $1";

static void rejects_row(int n, const char *const *v, void *ud)
{
    sk_db_campaign_stats *s = ud;
    if (n < 3) return;
    s->broken_promises = sk__db_i64(v[0]);
    s->stale = sk__db_i64(v[1]);
    s->finalised_lost = sk__db_i64(v[2]);
}

static void reserve_row(int n, const char *const *v, void *ud)
{
    sk_db_campaign_stats *s = ud;
    if (n < 3) return;
    s->db_reserve = sk__db_i64(v[0]);
    s->reserve_remaining = sk__db_i64(v[1]);
    s->epoch = sk__db_i64(v[2]);
}

static void stats_row(int n, const char *const *v, void *ud)
{
    sk_db_campaign_stats *s = ud;
    if (n < 3 || !v[0]) return;
    static const char *const names[5] = {"persisted", "paid", "cancelled", "rejected", "pending"};
    for (int i = 0; i < 5; i++)
        if (strcmp(v[0], names[i]) == 0) {
            s->orders[i] = sk__db_i64(v[1]);
            s->units[i] = sk__db_i64(v[2]);
        }
}

int sk_db_campaign_stats_get(sk_db *db, const char *campaign, sk_db_campaign_stats *out)
{
    memset(out, 0, sizeof(*out));
    sk_campaign c;
    int rc = sk_db_campaign_get(db, campaign, &c, &out->remaining);
    if (rc) return rc;
    out->stock = c.stock;
    sk__arg a = SK_T(campaign);
    if (sk__db_run(db, SQL_STATS_ORDERS, 1, &a, NULL, stats_row, out)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_USERS, 1, &a, NULL, sk__db_int_cb, &out->user_total_units)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_RELPEND, 1, &a, NULL, sk__db_int_cb, &out->released_pending)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_DBPATH, 1, &a, NULL, sk__db_int_cb, &out->db_path_orders)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_MIRPEND, 1, &a, NULL, sk__db_int_cb, &out->mirror_pending)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_DBREL, 1, &a, NULL, sk__db_int_cb, &out->released_done)) return SK_EDB;
    sk__arg rj[3] = {SK_T(campaign), SK_I(SK_OUT_STALE), SK_I(SK_OUT_LIMIT)}; /* reasons by outcome id */
    if (sk__db_run(db, SQL_STATS_REJECTS, 3, rj, NULL, rejects_row, out)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_RESERVE, 1, &a, NULL, reserve_row, out)) return SK_EDB;
    return sk_db_handback_get(db, campaign, &out->handback);
}

typedef struct user_acc {
    sk_db_user_cb cb;
    void *ud;
} user_acc;

static void user_row(int n, const char *const *v, void *ud)
{
    user_acc *a = ud;
    if (n >= 2 && v[0]) a->cb(v[0], sk__db_i64(v[1]), a->ud);
}

static const char SQL_USERS[] = "SELECT user_id, qty FROM user_totals WHERE campaign = $1 AND qty > 0";

int sk_db_user_totals(sk_db *db, const char *campaign, sk_db_user_cb cb, void *ud)
{
    user_acc a = {cb, ud};
    sk__arg arg = SK_T(campaign);
    return sk__db_run(db, SQL_USERS, 1, &arg, NULL, user_row, &a) ? SK_EDB : 0;
}

static const char SQL_STOCK_SET[] = "UPDATE campaign_stock SET remaining = $2 WHERE campaign = $1";

int sk_db_stock_set(sk_db *db, const char *campaign, int64_t remaining)
{
    sk__arg a[2] = {SK_T(campaign), SK_I(remaining)};
    int64_t changed = 0;
    if (sk__db_run(db, SQL_STOCK_SET, 2, a, &changed, NULL, NULL)) return SK_EDB;
    return changed == 1 ? 0 : SK_ENOTFOUND;
}
