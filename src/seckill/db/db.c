/* db.c: campaigns and the order lifecycle in the system of record (the
 * schema: db_schema.c; the guard: db_guard.c; the reserve and tentative
 * orders: db_reserve.c; sweep and reconciliation queries: db_query.c).
 * Design note:
 *  - every order write runs inside a transaction that also moves
 *    campaign_stock.remaining (guarded by remaining >= qty, and the CHECK
 *    remaining >= 0) and user_totals.qty (guarded by qty <= limit);
 *  - orders.order_id is the primary key: a redelivered order is a no-op;
 *  - status moves pending -> persisted | rejected and persisted -> paid |
 *    cancelled with WHERE status = <from>, which makes each transition
 *    happen once;
 *  - on PostgreSQL a transaction first locks its campaigns' stock rows in
 *    id order, so concurrent writers never deadlock. */
#include "db.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "db_internal.h"
#include "rulebook.h"
#include "sk_err.h"
#include "util.h"

/* ---- validation -------------------------------------------------------- */

const char *sk_db_order_invalid(const sk_order_in *o)
{
    if (o->order_id == 0 || o->order_id > (uint64_t)INT64_MAX) return "order_id out of range";
    if (!sk_valid_campaign_id(o->campaign)) return "bad campaign id";
    if (!sk_valid_user_id(o->user)) return "bad user id";
    if (!sk_valid_qty(o->qty)) return "bad qty";
    if (!o->path || (strcmp(o->path, "redis") != 0 && strcmp(o->path, "db") != 0)) return "bad path";
    if (o->created_ms < 0) return "bad ts_ms";
    if (o->idem && o->idem[0] && !sk_valid_idem_key(o->idem)) return "bad idem";
    if (o->epoch < 0) return "bad epoch";
    return NULL;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* ---- campaigns --------------------------------------------------------- */

static const char SQL_CAMP_EXISTS[] = "SELECT 1 FROM campaigns WHERE id = $1";
static const char SQL_CAMP_INSERT[] =
    "INSERT INTO campaigns (id, title, stock, per_user_limit, starts_at_ms, ends_at_ms, price_cents,"
    " created_ms, db_reserve, shards, bucket_tags) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
static const char SQL_STOCK_INSERT[] =
    "INSERT INTO campaign_stock (campaign, remaining, reserve_remaining) VALUES ($1, $2, $3)";

/* shards 0 is read as 1 (tags "" or bucket 0's alone); K > 1 needs the
 * tag list sk_buckets_parse accepts for K, so a corrupted definition never
 * reaches the database. */
static bool layout_valid(const sk_campaign *c)
{
    if (memchr(c->bucket_tags, '\0', sizeof(c->bucket_tags)) == NULL) return false;
    if (c->shards < 0 || c->shards > SK_MAX_SHARDS) return false;
    sk_buckets b;
    if (c->shards <= 1) return c->bucket_tags[0] == '\0' || sk_buckets_parse(c->id, 1, c->bucket_tags, &b) == 0;
    return sk_buckets_parse(c->id, (int)c->shards, c->bucket_tags, &b) == 0;
}

int sk_db_campaign_create(sk_db *db, const sk_campaign *c)
{
    if (!c || !sk_valid_campaign_id(c->id) || c->stock < 0 || c->per_user_limit < 1 || c->price_cents < 0 ||
        c->db_reserve < 0 || c->db_reserve > c->stock || memchr(c->title, '\0', sizeof(c->title)) == NULL ||
        !layout_valid(c))
        return SK_EINVAL;
    if (sk__db_begin(db)) return SK_EDB;
    int64_t found = 0;
    sk__arg id = SK_T(c->id);
    if (sk__db_run(db, SQL_CAMP_EXISTS, 1, &id, NULL, sk__db_int_cb, &found)) goto fail;
    if (found) {
        sk__db_rollback(db);
        return SK_EEXIST;
    }
    int64_t shards = c->shards > 1 ? c->shards : 1;
    sk__arg a[11] = {SK_T(c->id), SK_T(c->title), SK_I(c->stock), SK_I(c->per_user_limit),
                     SK_I(c->starts_at_ms), SK_I(c->ends_at_ms), SK_I(c->price_cents), SK_I(dlock__wall_ms()),
                     SK_I(c->db_reserve), SK_I(shards), SK_T(shards > 1 ? c->bucket_tags : "")};
    if (sk__db_run(db, SQL_CAMP_INSERT, 11, a, NULL, NULL, NULL)) goto fail;
    sk__arg s[3] = {SK_T(c->id), SK_I(c->stock), SK_I(c->db_reserve)};
    if (sk__db_run(db, SQL_STOCK_INSERT, 3, s, NULL, NULL, NULL)) goto fail;
    if (sk__db_commit(db) == 0) return 0;
    /* a concurrent creator won the primary key */
    return sk_db_campaign_get(db, c->id, NULL, NULL) == 0 ? SK_EEXIST : SK_EDB;
fail:
    sk__db_rollback(db);
    return SK_EDB;
}

static const char SQL_CAMP_ORDERS[] = "SELECT COUNT(*) FROM orders WHERE campaign = $1";
static const char SQL_STOCK_DELETE[] = "DELETE FROM campaign_stock WHERE campaign = $1";
static const char SQL_CAMP_DELETE[] = "DELETE FROM campaigns WHERE id = $1";

/* Undoes a creation Redis never took (the caller answers 503 or 409), in
 * one transaction behind the stock row's lock, so an order the degraded
 * path took meanwhile is seen: then nothing is deleted (SK_ECONFLICT). */
int sk_db_campaign_delete_unsold(sk_db *db, const char *id)
{
    if (!sk_valid_campaign_id(id)) return SK_EINVAL;
    if (sk__db_begin(db)) return SK_EDB;
    int64_t orders = 0, gone = 0;
    sk__arg a = SK_T(id);
    if (sk__db_lock_stock(db, id) || sk__db_run(db, SQL_CAMP_ORDERS, 1, &a, NULL, sk__db_int_cb, &orders))
        goto fail;
    if (orders) {
        sk__db_rollback(db);
        return SK_ECONFLICT;
    }
    if (sk__db_run(db, SQL_STOCK_DELETE, 1, &a, NULL, NULL, NULL) ||
        sk__db_run(db, SQL_CAMP_DELETE, 1, &a, &gone, NULL, NULL))
        goto fail;
    if (!gone) {
        sk__db_rollback(db);
        return SK_ENOTFOUND;
    }
    return sk__db_commit(db) ? SK_EDB : 0;
fail:
    sk__db_rollback(db);
    return SK_EDB;
}

typedef struct camp_acc {
    sk_campaign c;
    int64_t remaining;
    int found;
    sk_db_campaign_cb cb;
    void *ud;
} camp_acc;

static void camp_row(int n, const char *const *v, void *ud)
{
    camp_acc *a = ud;
    if (n < 11) return;
    memset(&a->c, 0, sizeof(a->c));
    copy_str(a->c.id, sizeof(a->c.id), v[0]);
    copy_str(a->c.title, sizeof(a->c.title), v[1]);
    a->c.stock = sk__db_i64(v[2]);
    a->c.per_user_limit = sk__db_i64(v[3]);
    a->c.starts_at_ms = sk__db_i64(v[4]);
    a->c.ends_at_ms = sk__db_i64(v[5]);
    a->c.price_cents = sk__db_i64(v[6]);
    a->remaining = sk__db_i64(v[7]);
    a->c.db_reserve = sk__db_i64(v[8]);
    a->c.shards = sk__db_i64(v[9]);
    copy_str(a->c.bucket_tags, sizeof(a->c.bucket_tags), v[10]);
    a->found++;
    if (a->cb) a->cb(&a->c, a->remaining, a->ud);
}

#define CAMP_COLS                                                                                        \
    "SELECT c.id, c.title, c.stock, c.per_user_limit, c.starts_at_ms, c.ends_at_ms, c.price_cents,"     \
    " s.remaining, c.db_reserve, c.shards, c.bucket_tags FROM campaigns c JOIN campaign_stock s ON s.campaign = c.id"
static const char SQL_CAMP_GET[] = CAMP_COLS " WHERE c.id = $1";
static const char SQL_CAMP_LIST[] = CAMP_COLS " ORDER BY c.id";

int sk_db_campaign_get(sk_db *db, const char *id, sk_campaign *out, int64_t *remaining_out)
{
    if (!sk_valid_campaign_id(id)) return SK_EINVAL;
    camp_acc a = {0};
    sk__arg arg = SK_T(id);
    if (sk__db_run(db, SQL_CAMP_GET, 1, &arg, NULL, camp_row, &a)) return SK_EDB;
    if (!a.found) return SK_ENOTFOUND;
    if (out) *out = a.c;
    if (remaining_out) *remaining_out = a.remaining;
    return 0;
}

int sk_db_campaign_list(sk_db *db, sk_db_campaign_cb cb, void *ud)
{
    camp_acc a = {.cb = cb, .ud = ud};
    return sk__db_run(db, SQL_CAMP_LIST, 0, NULL, NULL, camp_row, &a) ? SK_EDB : 0;
}

/* ---- orders ------------------------------------------------------------ */

static const char SQL_ORDER_GET[] = SK__ORDER_COLS " WHERE order_id = $1";

typedef struct order_acc {
    sk_order_row row;
    int found;
    sk_db_order_cb cb;
    void *ud;
} order_acc;

static void order_row(int n, const char *const *v, void *ud)
{
    order_acc *a = ud;
    if (n < 14) return;
    memset(&a->row, 0, sizeof(a->row));
    a->row.order_id = (uint64_t)sk__db_i64(v[0]);
    copy_str(a->row.campaign, sizeof(a->row.campaign), v[1]);
    copy_str(a->row.user, sizeof(a->row.user), v[2]);
    a->row.qty = sk__db_i64(v[3]);
    copy_str(a->row.status, sizeof(a->row.status), v[4]);
    copy_str(a->row.reason, sizeof(a->row.reason), v[5]);
    copy_str(a->row.path, sizeof(a->row.path), v[6]);
    a->row.created_ms = sk__db_i64(v[7]);
    a->row.updated_ms = sk__db_i64(v[8]);
    copy_str(a->row.idem, sizeof(a->row.idem), v[9]);
    a->row.epoch = sk__db_i64(v[10]);
    a->row.redis_mirrored = sk__db_i64(v[11]) != 0;
    a->row.redis_released = sk__db_i64(v[12]) != 0;
    a->row.reason_code = (int)sk__db_i64(v[13]);
    a->found++;
    if (a->cb) a->cb(&a->row, a->ud);
}

int sk_db_order_get(sk_db *db, uint64_t order_id, sk_order_row *out)
{
    if (order_id == 0 || order_id > (uint64_t)INT64_MAX) return SK_ENOTFOUND;
    order_acc a = {0};
    sk__arg arg = SK_I(order_id);
    if (sk__db_run(db, SQL_ORDER_GET, 1, &arg, NULL, order_row, &a)) return SK_EDB;
    if (!a.found) return SK_ENOTFOUND;
    if (out) *out = a.row;
    return 0;
}

int sk__db_order_query(sk_db *db, const char *sql, int nargs, const sk__arg *args, sk_db_order_cb cb, void *ud)
{
    order_acc a = {.cb = cb, .ud = ud};
    if (sk__db_run(db, sql, nargs, args, NULL, order_row, &a)) return SK_EDB;
    return a.found;
}

int sk__db_order_mark(sk_db *db, const char *sql, uint64_t order_id)
{
    sk__arg arg = SK_I(order_id);
    return sk__db_run(db, sql, 1, &arg, NULL, NULL, NULL) ? SK_EDB : 0;
}

static const char SQL_STOCK_LOCK[] = "SELECT remaining FROM campaign_stock WHERE campaign = $1 FOR UPDATE";

int sk__db_lock_stock(sk_db *db, const char *campaign)
{
    if (sk__db_kindof(db) != SK__DB_PG) return 0;
    sk__arg a = SK_T(campaign);
    return sk__db_run(db, SQL_STOCK_LOCK, 1, &a, NULL, NULL, NULL) ? SK_EDB : 0;
}

static const char SQL_PAY[] =
    "UPDATE orders SET status = 'paid', updated_ms = $3 WHERE order_id = $1 AND user_id = $2"
    " AND status = 'persisted'";

int sk_db_order_pay(sk_db *db, uint64_t order_id, const char *user, sk_order_row *out)
{
    if (!sk_valid_user_id(user)) return SK_EINVAL;
    int64_t changed = 0;
    sk__arg a[3] = {SK_I(order_id), SK_T(user), SK_I(dlock__wall_ms())};
    if (order_id == 0 || order_id > (uint64_t)INT64_MAX) return SK_ENOTFOUND;
    if (sk__db_run(db, SQL_PAY, 3, a, &changed, NULL, NULL)) return SK_EDB;
    sk_order_row row;
    int rc = sk_db_order_get(db, order_id, &row);
    if (rc) return rc;
    if (out) *out = row;
    if (strcmp(row.user, user) != 0) return SK_EFORBIDDEN;
    if (changed == 1 || strcmp(row.status, "paid") == 0) return 0;
    return SK_ECONFLICT;
}

static const char SQL_CANCEL[] =
    "UPDATE orders SET status = 'cancelled', reason = $2, updated_ms = $3 WHERE order_id = $1"
    " AND status = 'persisted'";
static const char SQL_STOCK_GIVE[] = "UPDATE campaign_stock SET remaining = remaining + $2 WHERE campaign = $1";
static const char SQL_USER_GIVE[] =
    "UPDATE user_totals SET qty = qty - $3 WHERE campaign = $1 AND user_id = $2 AND qty >= $3";

int sk_db_order_cancel(sk_db *db, uint64_t order_id, const char *reason, sk_order_row *out)
{
    if (order_id == 0 || order_id > (uint64_t)INT64_MAX) return SK_ENOTFOUND;
    if (sk__db_begin(db)) return SK_EDB;
    int64_t changed = 0;
    sk__arg a[3] = {SK_I(order_id), SK_T(reason ? reason : "cancelled"), SK_I(dlock__wall_ms())};
    if (sk__db_run(db, SQL_CANCEL, 3, a, &changed, NULL, NULL)) goto fail;
    sk_order_row row;
    int rc = sk_db_order_get(db, order_id, &row);
    if (rc == SK_ENOTFOUND) {
        sk__db_rollback(db);
        return SK_ENOTFOUND;
    }
    if (rc) goto fail;
    if (changed == 1) {
        sk__arg s[2] = {SK_T(row.campaign), SK_I(row.qty)};
        sk__arg u[3] = {SK_T(row.campaign), SK_T(row.user), SK_I(row.qty)};
        if (sk__db_run(db, SQL_STOCK_GIVE, 2, s, NULL, NULL, NULL)) goto fail;
        if (sk__db_run(db, SQL_USER_GIVE, 3, u, NULL, NULL, NULL)) goto fail;
    }
    if (sk__db_commit(db)) return SK_EDB;
    if (out) *out = row;
    return changed == 1 ? 0 : SK_ECONFLICT;
fail:
    sk__db_rollback(db);
    return SK_EDB;
}
