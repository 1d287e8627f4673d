/* db_guard.c: applying accepted orders from the stream (the database
 * guard). Invariant: an order is stored once (order_id primary key) and
 * counted only when its epoch is the campaign's or later, Redis's share of
 * the stock (remaining - reserve_remaining) holds its units and its user
 * stays within the limit; otherwise it is stored rejected with the reason
 * (orders.reason_code: its outcome id, reason: the outcome table's text).
 * SQLite runs apply_one() per order; PostgreSQL the same rules in the
 * server-side function sk_apply_batch (db_schema.c, migration 8), which
 * reports outcome ids and gets the ids and texts from the same table. */
#include "db.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"
#include "rulebook.h"
#include "sk_err.h"
#include "util.h"

static const char SQL_ORDER_INSERT[] =
    "INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms, updated_ms, idem,"
    " epoch) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (order_id) DO NOTHING";
static const char SQL_ORDER_REJECT[] =
    "UPDATE orders SET status = 'rejected', reason = $2, reason_code = $3 WHERE order_id = $1";
static const char SQL_STOCK_TAKE[] =
    "UPDATE campaign_stock SET remaining = remaining - $2 WHERE campaign = $1"
    " AND remaining - reserve_remaining >= $2";
static const char SQL_STOCK_GIVE[] = "UPDATE campaign_stock SET remaining = remaining + $2 WHERE campaign = $1";
static const char SQL_USER_TAKE[] =
    "INSERT INTO user_totals (campaign, user_id, qty) VALUES ($1, $2, $3)"
    " ON CONFLICT (campaign, user_id) DO UPDATE SET qty = user_totals.qty + excluded.qty"
    " WHERE user_totals.qty + excluded.qty <= $4";
static const char SQL_USER_HELD[] =
    "SELECT COALESCE((SELECT qty FROM user_totals WHERE campaign = $1 AND user_id = $2), 0)";
static const char SQL_LIMIT_GET[] =
    "SELECT c.per_user_limit, s.epoch FROM campaigns c JOIN campaign_stock s ON s.campaign = c.id WHERE c.id = $1";

typedef struct camp_limit {
    const char *id;
    int64_t limit; /* 0: campaign unknown */
    int64_t epoch; /* campaign_stock.epoch */
} camp_limit;

static int64_t epoch_of(const sk_order_in *o) { return o->epoch > 0 ? o->epoch : 1; }

/* The guard's verdict on o, in rule order (rulebook.h ids): SK_OUT_ACCEPTED
 * when it may take units, else the reason it is refused. */
static int guard_rule(const sk_order_in *o, const camp_limit *cl)
{
    if (cl->limit <= 0) return SK_OUT_NOT_FOUND;
    if (epoch_of(o) < cl->epoch) return SK_OUT_STALE;
    if (o->qty > cl->limit) return SK_OUT_BAD_QUANTITY;
    return SK_OUT_ACCEPTED;
}

/* The user's allowance, then Redis's share (the order purchase.lua checks
 * them in): SK_OUT_ACCEPTED with the units taken, SK_OUT_LIMIT,
 * SK_OUT_SOLD_OUT or SK_EDB. */
static int guard_take(sk_db *db, const sk_order_in *o, int64_t limit)
{
    int64_t changed = 0, held = 0;
    sk__arg cu[2] = {SK_T(o->campaign), SK_T(o->user)};
    if (sk__db_run(db, SQL_USER_HELD, 2, cu, NULL, sk__db_int_cb, &held)) return SK_EDB;
    if (held + o->qty > limit) return SK_OUT_LIMIT;
    sk__arg s[2] = {SK_T(o->campaign), SK_I(o->qty)};
    if (sk__db_run(db, SQL_STOCK_TAKE, 2, s, &changed, NULL, NULL)) return SK_EDB;
    if (changed == 0) return SK_OUT_SOLD_OUT;
    sk__arg u[4] = {SK_T(o->campaign), SK_T(o->user), SK_I(o->qty), SK_I(limit)};
    if (sk__db_run(db, SQL_USER_TAKE, 4, u, &changed, NULL, NULL)) return SK_EDB;
    if (changed) return SK_OUT_ACCEPTED;
    if (sk__db_run(db, SQL_STOCK_GIVE, 2, s, NULL, NULL, NULL)) return SK_EDB; /* not under the write lock */
    return SK_OUT_LIMIT;
}

int sk__db_apply_of_outcome(int id)
{
    if (id == SK_OUT_ACCEPTED) return SK_APPLY_PERSISTED;
    if (id == SK_OUT_REPLAY) return SK_APPLY_DUPLICATE;
    return id == SK_OUT_STALE ? SK_APPLY_STALE : SK_APPLY_REJECTED;
}

/* Inside an open transaction: records o and runs the guard. Returns an
 * sk_apply_result, or SK_EDB. */
static int apply_one(sk_db *db, const sk_order_in *o, const camp_limit *cl)
{
    int64_t now = dlock__wall_ms(), changed = 0;
    sk__arg ins[11] = {SK_I(o->order_id), SK_T(o->campaign), SK_T(o->user), SK_I(o->qty), SK_T("persisted"),
                       SK_T(""), SK_T(o->path), SK_I(o->created_ms), SK_I(now), SK_T(o->idem ? o->idem : ""),
                       SK_I(epoch_of(o))};
    if (sk__db_run(db, SQL_ORDER_INSERT, 11, ins, &changed, NULL, NULL)) return SK_EDB;
    if (changed == 0) return sk__db_apply_of_outcome(SK_OUT_REPLAY);
    int id = guard_rule(o, cl);
    if (id == SK_OUT_ACCEPTED) id = guard_take(db, o, cl->limit);
    if (id < 0) return SK_EDB;
    if (id != SK_OUT_ACCEPTED) {
        sk__arg r[3] = {SK_I(o->order_id), SK_T(sk_outcome_get(id)->stored), SK_I(id)};
        if (sk__db_run(db, SQL_ORDER_REJECT, 3, r, NULL, NULL, NULL)) return SK_EDB;
    }
    return sk__db_apply_of_outcome(id);
}

static void limit_row(int n, const char *const *v, void *ud)
{
    camp_limit *cl = ud;
    if (n < 2) return;
    cl->limit = sk__db_i64(v[0]);
    cl->epoch = sk__db_i64(v[1]);
}

static int cmp_limit(const void *a, const void *b)
{
    return strcmp(((const camp_limit *)a)->id, ((const camp_limit *)b)->id);
}

/* Distinct campaigns of the batch, sorted; PostgreSQL locks their stock
 * rows in that order before touching anything else. */
static int batch_limits(sk_db *db, const sk_order_in *orders, size_t n, camp_limit *lim, size_t *nlim_out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k && strcmp(lim[j].id, orders[i].campaign) != 0) j++;
        if (j == k) lim[k++] = (camp_limit){orders[i].campaign, 0, 0};
    }
    qsort(lim, k, sizeof(*lim), cmp_limit);
    for (size_t j = 0; j < k; j++) {
        sk__arg a = SK_T(lim[j].id);
        if (sk__db_lock_stock(db, lim[j].id)) return SK_EDB;
        if (sk__db_run(db, SQL_LIMIT_GET, 1, &a, NULL, limit_row, &lim[j])) return SK_EDB;
    }
    *nlim_out = k;
    return 0;
}

static const camp_limit *limit_of(const camp_limit *lim, size_t k, const char *id)
{
    static const camp_limit unknown = {"", 0, 0};
    for (size_t j = 0; j < k; j++)
        if (strcmp(lim[j].id, id) == 0) return &lim[j];
    return &unknown;
}

/* Appends s as a double-quoted element of a PostgreSQL array literal. */
static void pg_array_str(dlock__buf *b, const char *s, bool first)
{
    dlock__buf_append(b, first ? "{\"" : ",\"", 2);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') dlock__buf_append(b, "\\", 1);
        dlock__buf_append(b, s, 1);
    }
    dlock__buf_append(b, "\"", 1);
}

typedef struct pg_res {
    int *out;
    size_t n, got;
} pg_res;

static void pg_res_row(int ncols, const char *const *v, void *ud)
{
    pg_res *r = ud;
    if (ncols < 1 || !v[0] || v[0][0] != '{') return;
    const char *p = v[0] + 1;
    while (*p && *p != '}' && r->got < r->n) {
        char *end = NULL;
        long x = strtol(p, &end, 10);
        if (end == p) break;
        if (r->out) r->out[r->got] = sk__db_apply_of_outcome((int)x);
        r->got++;
        p = *end == ',' ? end + 1 : end;
    }
}

static const char SQL_PG_APPLY[] =
    "SELECT sk_apply_batch($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[],"
    " $7::text[], $8::bigint[], $9, $10::integer[], $11::text[])";

/* The outcome ids sk_apply_batch reports, in the order of its p_codes
 * (db_schema.c, migration 8), and their stored texts as p_texts. */
static const int pg_codes[] = {SK_OUT_ACCEPTED, SK_OUT_REPLAY, SK_OUT_NOT_FOUND, SK_OUT_STALE,
                               SK_OUT_BAD_QUANTITY, SK_OUT_SOLD_OUT, SK_OUT_LIMIT};
#define N_PG_CODES (sizeof(pg_codes) / sizeof(pg_codes[0]))

static void pg_rule_args(dlock__buf *codes, dlock__buf *texts)
{
    for (size_t i = 0; i < N_PG_CODES; i++) {
        const char *t = sk_outcome_get(pg_codes[i])->stored;
        dlock__buf_printf(codes, "%s%d", i ? "," : "{", pg_codes[i]);
        pg_array_str(texts, t ? t : "", i == 0);
    }
    dlock__buf_append(codes, "}", 1);
    dlock__buf_append(texts, "}", 1);
}

/* One statement (so one implicit transaction and one round trip). */
static int apply_batch_pg(sk_db *db, const sk_order_in *orders, size_t n, int *results_out)
{
    dlock__buf a[10] = {{0}};
    for (size_t i = 0; i < n; i++) {
        const char *sep = i ? "," : "{";
        dlock__buf_printf(&a[0], "%s%" PRIu64, sep, orders[i].order_id);
        pg_array_str(&a[1], orders[i].campaign, i == 0);
        pg_array_str(&a[2], orders[i].user, i == 0);
        dlock__buf_printf(&a[3], "%s%" PRId64, sep, orders[i].qty);
        pg_array_str(&a[4], orders[i].path, i == 0);
        dlock__buf_printf(&a[5], "%s%" PRId64, sep, orders[i].created_ms);
        pg_array_str(&a[6], orders[i].idem ? orders[i].idem : "", i == 0);
        dlock__buf_printf(&a[7], "%s%" PRId64, sep, epoch_of(&orders[i]));
    }
    bool oom = false;
    for (int k = 0; k < 8; k++) dlock__buf_append(&a[k], "}", 1);
    pg_rule_args(&a[8], &a[9]);
    for (int k = 0; k < 10; k++) oom |= a[k].oom;
    int rc = SK_EDB;
    if (!oom) {
        sk__arg args[11] = {SK_T(a[0].data), SK_T(a[1].data), SK_T(a[2].data), SK_T(a[3].data),
                            SK_T(a[4].data), SK_T(a[5].data), SK_T(a[6].data), SK_T(a[7].data),
                            SK_I(dlock__wall_ms()), SK_T(a[8].data), SK_T(a[9].data)};
        pg_res r = {results_out, n, 0};
        rc = sk__db_run(db, SQL_PG_APPLY, 11, args, NULL, pg_res_row, &r);
        if (rc == 0 && r.got != n) rc = SK_EDB; /* cannot happen: committed, but say so */
    }
    for (int k = 0; k < 10; k++) dlock__buf_free(&a[k]);
    return rc;
}

int sk_db_apply_batch(sk_db *db, const sk_order_in *orders, size_t n, int *results_out)
{
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (sk_db_order_invalid(&orders[i])) return SK_EINVAL;
    if (sk__db_kindof(db) == SK__DB_PG) return apply_batch_pg(db, orders, n, results_out);
    camp_limit *lim = calloc(n, sizeof(*lim));
    if (!lim) return SK_EDB;
    size_t k = 0;
    if (sk__db_begin(db)) {
        free(lim);
        return SK_EDB;
    }
    if (batch_limits(db, orders, n, lim, &k)) goto fail;
    for (size_t i = 0; i < n; i++) {
        int r = apply_one(db, &orders[i], limit_of(lim, k, orders[i].campaign));
        if (r < 0) goto fail;
        if (results_out) results_out[i] = r;
    }
    free(lim);
    return sk__db_commit(db);
fail:
    free(lim);
    sk__db_rollback(db);
    return SK_EDB;
}
