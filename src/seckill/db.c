/* db.c: schema migrations, campaigns and the order lifecycle in the system
 * of record. Design note:
 *  - every order write runs inside a transaction that also moves
 *    campaign_stock.remaining (guarded by remaining >= qty, and the CHECK
 *    remaining >= 0) and user_totals.qty (guarded by qty <= limit);
 *  - orders.order_id is the primary key: a redelivered order is a no-op;
 *  - status moves persisted -> paid | cancelled with WHERE status =
 *    'persisted', which makes each transition happen once;
 *  - on PostgreSQL a batch first locks its campaigns' stock rows in id
 *    order, so concurrent persisters never deadlock. */
#include "db.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_sql.h"
#include "ids.h"
#include "sk_err.h"
#include "util.h"

/* ---- migrations -------------------------------------------------------- */

typedef struct migration {
    int version;
    const char *sqlite, *pg; /* NULL: nothing to do on that engine */
} migration;

/* Types differ only where SQLite gains from it: INTEGER PRIMARY KEY makes
 * order_id the rowid (one b-tree less per insert), WITHOUT ROWID likewise. */
#define M1_CAMPAIGNS                                                                                     \
    "CREATE TABLE campaigns ("                                                                          \
    " id TEXT PRIMARY KEY,"                                                                             \
    " title TEXT NOT NULL,"                                                                             \
    " stock BIGINT NOT NULL CHECK (stock >= 0),"                                                        \
    " per_user_limit BIGINT NOT NULL CHECK (per_user_limit >= 1),"                                      \
    " starts_at_ms BIGINT NOT NULL,"                                                                    \
    " ends_at_ms BIGINT NOT NULL,"                                                                      \
    " price_cents BIGINT NOT NULL CHECK (price_cents >= 0),"                                            \
    " created_ms BIGINT NOT NULL);"                                                                     \
    "CREATE TABLE campaign_stock ("                                                                     \
    " campaign TEXT PRIMARY KEY REFERENCES campaigns(id),"                                              \
    " remaining BIGINT NOT NULL CHECK (remaining >= 0));"
#define M1_ORDERS(idtype)                                                                                \
    "CREATE TABLE orders ("                                                                             \
    " order_id " idtype " PRIMARY KEY,"                                                                 \
    " campaign TEXT NOT NULL,"                                                                          \
    " user_id TEXT NOT NULL,"                                                                           \
    " qty BIGINT NOT NULL CHECK (qty > 0),"                                                             \
    " status TEXT NOT NULL CHECK (status IN ('persisted','paid','cancelled','rejected')),"              \
    " reason TEXT NOT NULL DEFAULT '',"                                                                 \
    " path TEXT NOT NULL CHECK (path IN ('redis','db')),"                                               \
    " redis_released INTEGER NOT NULL DEFAULT 0,"                                                       \
    " created_ms BIGINT NOT NULL,"                                                                      \
    " updated_ms BIGINT NOT NULL);"                                                                     \
    "CREATE INDEX orders_campaign_status ON orders (campaign, status);"
#define M1_USERS(suffix)                                                                                 \
    "CREATE TABLE user_totals ("                                                                        \
    " campaign TEXT NOT NULL,"                                                                          \
    " user_id TEXT NOT NULL,"                                                                           \
    " qty BIGINT NOT NULL CHECK (qty >= 0),"                                                            \
    " PRIMARY KEY (campaign, user_id))" suffix ";"

/* PostgreSQL: the batch guard as one server-side function, so a batch
 * costs one round trip. After locking the batch's stock rows (in id
 * order): if every order is new and the whole batch fits (per campaign:
 * units <= remaining; per user: held + units <= limit; the locks keep both
 * true until commit) it is written set-wise; otherwise the loop applies
 * apply_one()'s steps order by order, with the same reasons. */
#define M3_PG_APPLY_BATCH                                                                                \
    "CREATE FUNCTION sk_apply_batch(p_ids BIGINT[], p_camps TEXT[], p_users TEXT[], p_qtys BIGINT[],"   \
    " p_paths TEXT[], p_created BIGINT[], p_now BIGINT) RETURNS INTEGER[] LANGUAGE plpgsql AS $f$\n"     \
    "DECLARE res INTEGER[] := '{}'; v_camp TEXT; v_lim BIGINT; v_n INTEGER; v_reason TEXT; i INTEGER;\n" \
    "  v_len INTEGER := coalesce(array_length(p_ids, 1), 0); v_ok BOOLEAN := false;\n"                   \
    "BEGIN\n"                                                                                           \
    "  FOR v_camp IN SELECT DISTINCT x FROM unnest(p_camps) AS x ORDER BY x LOOP\n"                    \
    "    PERFORM 1 FROM campaign_stock WHERE campaign = v_camp FOR UPDATE;\n"                           \
    "  END LOOP;\n"                                                                                     \
    "  IF (SELECT count(DISTINCT x) FROM unnest(p_ids) AS x) = v_len\n"                                \
    "     AND NOT EXISTS (SELECT 1 FROM unnest(p_ids) AS x\n"                                       \
    "                     WHERE EXISTS (SELECT 1 FROM orders o WHERE o.order_id = x)) THEN\n"            \
    "    WITH b AS (SELECT * FROM unnest(p_camps, p_users, p_qtys) AS t(camp, usr, qty)),\n"             \
    "      pc AS (SELECT camp, sum(qty) AS q FROM b GROUP BY camp),\n"                                   \
    "      pu AS (SELECT camp, usr, sum(qty) AS q FROM b GROUP BY camp, usr)\n"                          \
    "    SELECT NOT EXISTS (SELECT 1 FROM pc WHERE coalesce((SELECT s.remaining FROM campaign_stock s\n" \
    "                       WHERE s.campaign = pc.camp), -1) < pc.q)\n"                                  \
    "       AND NOT EXISTS (SELECT 1 FROM pu WHERE coalesce((SELECT u.qty FROM user_totals u\n"          \
    "                       WHERE u.campaign = pu.camp AND u.user_id = pu.usr), 0) + pu.q >\n"           \
    "                       coalesce((SELECT c.per_user_limit FROM campaigns c WHERE c.id = pu.camp), 0))\n" \
    "      INTO v_ok;\n"                                                                                \
    "  END IF;\n"                                                                                       \
    "  IF v_ok THEN\n"                                                                                  \
    "    INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms,"       \
    " updated_ms) SELECT id, camp, usr, qty, 'persisted', '', pth, cr, p_now"                           \
    " FROM unnest(p_ids, p_camps, p_users, p_qtys, p_paths, p_created) AS t(id, camp, usr, qty, pth, cr);\n" \
    "    UPDATE campaign_stock s SET remaining = s.remaining - pc.q FROM (SELECT camp, sum(qty) AS q"    \
    " FROM unnest(p_camps, p_qtys) AS t(camp, qty) GROUP BY camp) pc"                                   \
    " WHERE s.campaign = pc.camp AND s.remaining >= pc.q;\n"                                            \
    "    GET DIAGNOSTICS v_n = ROW_COUNT;\n"                                                            \
    "    IF v_n <> (SELECT count(DISTINCT x) FROM unnest(p_camps) AS x) THEN\n"                        \
    "      RAISE EXCEPTION 'sk_apply_batch: stock guard failed under lock';\n"                          \
    "    END IF;\n"                                                                                     \
    "    INSERT INTO user_totals (campaign, user_id, qty) SELECT camp, usr, sum(qty)"                   \
    " FROM unnest(p_camps, p_users, p_qtys) AS t(camp, usr, qty) GROUP BY camp, usr"                    \
    " ON CONFLICT (campaign, user_id) DO UPDATE SET qty = user_totals.qty + excluded.qty;\n"             \
    "    RETURN array_fill(1, ARRAY[v_len]);\n"                                                         \
    "  END IF;\n"                                                                                       \
    "  FOR i IN 1 .. v_len LOOP\n"                                                                      \
    "    INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms,"       \
    " updated_ms) VALUES (p_ids[i], p_camps[i], p_users[i], p_qtys[i], 'persisted', '', p_paths[i],"    \
    " p_created[i], p_now) ON CONFLICT (order_id) DO NOTHING;\n"                                        \
    "    GET DIAGNOSTICS v_n = ROW_COUNT;\n"                                                            \
    "    IF v_n = 0 THEN res := res || 3; CONTINUE; END IF;\n"                                          \
    "    v_reason := NULL;\n"                                                                           \
    "    v_lim := NULL;\n"                                                                              \
    "    SELECT per_user_limit INTO v_lim FROM campaigns WHERE id = p_camps[i];\n"                      \
    "    IF v_lim IS NULL THEN v_reason := 'unknown campaign';\n"                                       \
    "    ELSIF p_qtys[i] > v_lim THEN v_reason := 'per-user limit';\n"                                  \
    "    ELSE\n"                                                                                        \
    "      UPDATE campaign_stock SET remaining = remaining - p_qtys[i] WHERE campaign = p_camps[i]"     \
    " AND remaining >= p_qtys[i];\n"                                                                    \
    "      GET DIAGNOSTICS v_n = ROW_COUNT;\n"                                                          \
    "      IF v_n = 0 THEN v_reason := 'sold out in database';\n"                                       \
    "      ELSE\n"                                                                                      \
    "        INSERT INTO user_totals (campaign, user_id, qty) VALUES (p_camps[i], p_users[i], p_qtys[i])" \
    " ON CONFLICT (campaign, user_id) DO UPDATE SET qty = user_totals.qty + excluded.qty"               \
    " WHERE user_totals.qty + excluded.qty <= v_lim;\n"                                                 \
    "        GET DIAGNOSTICS v_n = ROW_COUNT;\n"                                                        \
    "        IF v_n = 0 THEN\n"                                                                         \
    "          v_reason := 'per-user limit';\n"                                                         \
    "          UPDATE campaign_stock SET remaining = remaining + p_qtys[i] WHERE campaign = p_camps[i];\n" \
    "        END IF;\n"                                                                                 \
    "      END IF;\n"                                                                                   \
    "    END IF;\n"                                                                                     \
    "    IF v_reason IS NULL THEN res := res || 1;\n"                                                   \
    "    ELSE UPDATE orders SET status = 'rejected', reason = v_reason WHERE order_id = p_ids[i];"      \
    " res := res || 2; END IF;\n"                                                                       \
    "  END LOOP;\n"                                                                                     \
    "  RETURN res;\n"                                                                                   \
    "END $f$;"

/* The sweep runs every second: its "still to do in Redis" queries must
 * not scan the orders of a whole sale. Partial indexes hold only those. */
#define M5_PENDING_INDEXES                                                                               \
    "CREATE INDEX orders_release_pending ON orders (updated_ms)"                                        \
    " WHERE status = 'cancelled' AND redis_released = 0;"                                               \
    "CREATE INDEX orders_mirror_pending ON orders (order_id) WHERE path = 'db' AND redis_mirrored = 0;"

static const migration migrations[] = {
    {1, M1_CAMPAIGNS M1_ORDERS("INTEGER") M1_USERS(" WITHOUT ROWID"), M1_CAMPAIGNS M1_ORDERS("BIGINT") M1_USERS("")},
    {2, "CREATE INDEX orders_status_created ON orders (status, created_ms);",
     "CREATE INDEX orders_status_created ON orders (status, created_ms);"},
    {3, NULL, M3_PG_APPLY_BATCH},
    {4, "ALTER TABLE orders ADD COLUMN redis_mirrored INTEGER NOT NULL DEFAULT 0;",
     "ALTER TABLE orders ADD COLUMN redis_mirrored INTEGER NOT NULL DEFAULT 0;"},
    {5, M5_PENDING_INDEXES, M5_PENDING_INDEXES},
};
#define N_MIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))

static void int_cb(int n, const char *const *v, void *ud)
{
    if (n > 0) *(int64_t *)ud = sk__db_i64(v[0]);
}

static const char SQL_VERSION[] = "SELECT COALESCE(MAX(version), 0) FROM schema_version";
static const char SQL_VERSION_ADD[] = "INSERT INTO schema_version (version, applied_ms) VALUES ($1, $2)";

/* One transaction for all pending migrations; concurrent openers serialise
 * on the SQLite write lock or a PostgreSQL advisory lock and re-read the
 * version inside it. */
static int migrate(sk_db *db)
{
    if (sk__db_begin(db)) return SK_EDB;
    if (sk__db_kindof(db) == SK__DB_PG && sk__db_script(db, "SELECT pg_advisory_xact_lock(7303311)")) goto fail;
    if (sk__db_script(db, "CREATE TABLE IF NOT EXISTS schema_version ("
                          " version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)"))
        goto fail;
    int64_t have = 0;
    if (sk__db_run(db, SQL_VERSION, 0, NULL, NULL, int_cb, &have)) goto fail;
    for (int i = 0; i < N_MIGRATIONS; i++) {
        if (migrations[i].version <= have) continue;
        const char *sql = sk__db_kindof(db) == SK__DB_PG ? migrations[i].pg : migrations[i].sqlite;
        if (sql && sk__db_script(db, sql)) goto fail;
        sk__arg a[2] = {SK_I(migrations[i].version), SK_I(dlock__wall_ms())};
        if (sk__db_run(db, SQL_VERSION_ADD, 2, a, NULL, NULL, NULL)) goto fail;
    }
    return sk__db_commit(db);
fail:
    sk__db_rollback(db);
    return SK_EDB;
}

int sk_db_open(const char *url, sk_db **out, char *err, size_t errlen)
{
    sk_db *db = NULL;
    int rc = sk__db_connect(url, &db, err, errlen);
    if (rc) return rc;
    if (migrate(db)) {
        snprintf(err, errlen, "schema migration: %s", sk_db_errmsg(db));
        sk__db_disconnect(db);
        return SK_EDB;
    }
    *out = db;
    return 0;
}

void sk_db_close(sk_db *db) { sk__db_disconnect(db); }

static const char SQL_PING[] = "SELECT 1";

int sk_db_ping(sk_db *db)
{
    int64_t one = 0;
    return sk__db_run(db, SQL_PING, 0, NULL, NULL, int_cb, &one) == 0 && one == 1 ? 0 : SK_EDB;
}

int sk_db_schema_version(sk_db *db, int *version_out)
{
    int64_t v = 0;
    if (sk__db_run(db, SQL_VERSION, 0, NULL, NULL, int_cb, &v)) return SK_EDB;
    *version_out = (int)v;
    return 0;
}

/* ---- validation -------------------------------------------------------- */

const char *sk_db_order_invalid(const sk_order_in *o)
{
    if (o->order_id == 0 || o->order_id > (uint64_t)INT64_MAX) return "order_id out of range";
    if (!sk_valid_campaign_id(o->campaign)) return "bad campaign id";
    if (!sk_valid_user_id(o->user)) return "bad user id";
    if (o->qty <= 0 || o->qty > 1000000) return "bad qty";
    if (!o->path || (strcmp(o->path, "redis") != 0 && strcmp(o->path, "db") != 0)) return "bad path";
    if (o->created_ms < 0) return "bad ts_ms";
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
    " created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
static const char SQL_STOCK_INSERT[] = "INSERT INTO campaign_stock (campaign, remaining) VALUES ($1, $2)";

int sk_db_campaign_create(sk_db *db, const sk_campaign *c)
{
    if (!c || !sk_valid_campaign_id(c->id) || c->stock < 0 || c->per_user_limit < 1 || c->price_cents < 0 ||
        memchr(c->title, '\0', sizeof(c->title)) == NULL)
        return SK_EINVAL;
    if (sk__db_begin(db)) return SK_EDB;
    int64_t found = 0;
    sk__arg id = SK_T(c->id);
    if (sk__db_run(db, SQL_CAMP_EXISTS, 1, &id, NULL, int_cb, &found)) goto fail;
    if (found) {
        sk__db_rollback(db);
        return SK_EEXIST;
    }
    sk__arg a[8] = {SK_T(c->id), SK_T(c->title), SK_I(c->stock), SK_I(c->per_user_limit),
                    SK_I(c->starts_at_ms), SK_I(c->ends_at_ms), SK_I(c->price_cents), SK_I(dlock__wall_ms())};
    if (sk__db_run(db, SQL_CAMP_INSERT, 8, a, NULL, NULL, NULL)) goto fail;
    sk__arg s[2] = {SK_T(c->id), SK_I(c->stock)};
    if (sk__db_run(db, SQL_STOCK_INSERT, 2, s, NULL, NULL, NULL)) goto fail;
    if (sk__db_commit(db) == 0) return 0;
    /* a concurrent creator won the primary key */
    return sk_db_campaign_get(db, c->id, NULL, NULL) == 0 ? SK_EEXIST : SK_EDB;
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
    if (n < 8) return;
    memset(&a->c, 0, sizeof(a->c));
    copy_str(a->c.id, sizeof(a->c.id), v[0]);
    copy_str(a->c.title, sizeof(a->c.title), v[1]);
    a->c.stock = sk__db_i64(v[2]);
    a->c.per_user_limit = sk__db_i64(v[3]);
    a->c.starts_at_ms = sk__db_i64(v[4]);
    a->c.ends_at_ms = sk__db_i64(v[5]);
    a->c.price_cents = sk__db_i64(v[6]);
    a->remaining = sk__db_i64(v[7]);
    a->found++;
    if (a->cb) a->cb(&a->c, a->remaining, a->ud);
}

#define CAMP_COLS                                                                                        \
    "SELECT c.id, c.title, c.stock, c.per_user_limit, c.starts_at_ms, c.ends_at_ms, c.price_cents,"     \
    " s.remaining FROM campaigns c JOIN campaign_stock s ON s.campaign = c.id"
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

#define ORDER_COLS "SELECT order_id, campaign, user_id, qty, status, reason, path, created_ms, updated_ms FROM orders"
static const char SQL_ORDER_GET[] = ORDER_COLS " WHERE order_id = $1";

typedef struct order_acc {
    sk_order_row row;
    int found;
    sk_db_order_cb cb;
    void *ud;
} order_acc;

static void order_row(int n, const char *const *v, void *ud)
{
    order_acc *a = ud;
    if (n < 9) return;
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

/* ---- applying accepted orders (the guard) ------------------------------ */

static const char SQL_ORDER_INSERT[] =
    "INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms, updated_ms)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (order_id) DO NOTHING";
static const char SQL_ORDER_REJECT[] =
    "UPDATE orders SET status = 'rejected', reason = $2 WHERE order_id = $1";
static const char SQL_STOCK_TAKE[] =
    "UPDATE campaign_stock SET remaining = remaining - $2 WHERE campaign = $1 AND remaining >= $2";
static const char SQL_USER_TAKE[] =
    "INSERT INTO user_totals (campaign, user_id, qty) VALUES ($1, $2, $3)"
    " ON CONFLICT (campaign, user_id) DO UPDATE SET qty = user_totals.qty + excluded.qty"
    " WHERE user_totals.qty + excluded.qty <= $4";
static const char SQL_LIMIT_GET[] = "SELECT per_user_limit FROM campaigns WHERE id = $1";
static const char SQL_STOCK_LOCK[] = "SELECT remaining FROM campaign_stock WHERE campaign = $1 FOR UPDATE";

/* Inside an open transaction: records o and runs the guard. Returns an
 * sk_apply_result, or SK_EDB. reason_out names a refusal. */
static int apply_one(sk_db *db, const sk_order_in *o, int64_t limit, const char **reason_out)
{
    int64_t now = dlock__wall_ms(), changed = 0;
    sk__arg ins[9] = {SK_I(o->order_id), SK_T(o->campaign), SK_T(o->user), SK_I(o->qty), SK_T("persisted"),
                      SK_T(""), SK_T(o->path), SK_I(o->created_ms), SK_I(now)};
    if (sk__db_run(db, SQL_ORDER_INSERT, 9, ins, &changed, NULL, NULL)) return SK_EDB;
    if (changed == 0) return SK_APPLY_DUPLICATE;
    const char *reason = NULL;
    if (limit <= 0) {
        reason = "unknown campaign";
    } else if (o->qty > limit) {
        reason = "per-user limit";
    } else {
        sk__arg s[2] = {SK_T(o->campaign), SK_I(o->qty)};
        if (sk__db_run(db, SQL_STOCK_TAKE, 2, s, &changed, NULL, NULL)) return SK_EDB;
        if (changed == 0) {
            reason = "sold out in database";
        } else {
            sk__arg u[4] = {SK_T(o->campaign), SK_T(o->user), SK_I(o->qty), SK_I(limit)};
            if (sk__db_run(db, SQL_USER_TAKE, 4, u, &changed, NULL, NULL)) return SK_EDB;
            if (changed == 0) {
                reason = "per-user limit";
                if (sk__db_run(db, SQL_STOCK_GIVE, 2, s, NULL, NULL, NULL)) return SK_EDB;
            }
        }
    }
    if (!reason) return SK_APPLY_PERSISTED;
    sk__arg r[2] = {SK_I(o->order_id), SK_T(reason)};
    if (sk__db_run(db, SQL_ORDER_REJECT, 2, r, NULL, NULL, NULL)) return SK_EDB;
    if (reason_out) *reason_out = reason;
    return SK_APPLY_REJECTED;
}

typedef struct camp_limit {
    const char *id;
    int64_t limit; /* 0: campaign unknown */
} camp_limit;

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
        if (j == k) lim[k++] = (camp_limit){orders[i].campaign, 0};
    }
    qsort(lim, k, sizeof(*lim), cmp_limit);
    for (size_t j = 0; j < k; j++) {
        sk__arg a = SK_T(lim[j].id);
        if (sk__db_kindof(db) == SK__DB_PG && sk__db_run(db, SQL_STOCK_LOCK, 1, &a, NULL, NULL, NULL))
            return SK_EDB;
        if (sk__db_run(db, SQL_LIMIT_GET, 1, &a, NULL, int_cb, &lim[j].limit)) return SK_EDB;
    }
    *nlim_out = k;
    return 0;
}

static int64_t limit_of(const camp_limit *lim, size_t k, const char *id)
{
    for (size_t j = 0; j < k; j++)
        if (strcmp(lim[j].id, id) == 0) return lim[j].limit;
    return 0;
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
        if (r->out) r->out[r->got] = (int)x;
        r->got++;
        p = *end == ',' ? end + 1 : end;
    }
}

static const char SQL_PG_APPLY[] =
    "SELECT sk_apply_batch($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[], $7)";

/* One statement (so one implicit transaction and one round trip). */
static int apply_batch_pg(sk_db *db, const sk_order_in *orders, size_t n, int *results_out)
{
    dlock__buf a[6] = {{0}};
    for (size_t i = 0; i < n; i++) {
        const char *sep = i ? "," : "{";
        dlock__buf_printf(&a[0], "%s%" PRIu64, sep, orders[i].order_id);
        pg_array_str(&a[1], orders[i].campaign, i == 0);
        pg_array_str(&a[2], orders[i].user, i == 0);
        dlock__buf_printf(&a[3], "%s%" PRId64, sep, orders[i].qty);
        pg_array_str(&a[4], orders[i].path, i == 0);
        dlock__buf_printf(&a[5], "%s%" PRId64, sep, orders[i].created_ms);
    }
    bool oom = false;
    for (int k = 0; k < 6; k++) {
        dlock__buf_append(&a[k], "}", 1);
        oom |= a[k].oom;
    }
    int rc = SK_EDB;
    if (!oom) {
        sk__arg args[7] = {SK_T(a[0].data), SK_T(a[1].data), SK_T(a[2].data), SK_T(a[3].data),
                           SK_T(a[4].data), SK_T(a[5].data), SK_I(dlock__wall_ms())};
        pg_res r = {results_out, n, 0};
        rc = sk__db_run(db, SQL_PG_APPLY, 7, args, NULL, pg_res_row, &r);
        if (rc == 0 && r.got != n) rc = SK_EDB; /* cannot happen: committed, but say so */
    }
    for (int k = 0; k < 6; k++) dlock__buf_free(&a[k]);
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
        int r = apply_one(db, &orders[i], limit_of(lim, k, orders[i].campaign), NULL);
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

/* ---- degraded path ----------------------------------------------------- */

int sk_db_purchase_direct(sk_db *db, uint64_t order_id, const char *campaign, const char *user,
                          int64_t qty, int64_t now_ms)
{
    sk_order_in o = {order_id, campaign, user, qty, "db", now_ms};
    if (sk_db_order_invalid(&o)) return SK_EINVAL;
    sk_campaign c;
    int rc = sk_db_campaign_get(db, campaign, &c, NULL);
    if (rc) return rc;
    if (now_ms < c.starts_at_ms) return SK_ENOTSTARTED;
    if (c.ends_at_ms > 0 && now_ms >= c.ends_at_ms) return SK_EENDED;
    if (sk__db_begin(db)) return SK_EDB;
    camp_limit lim;
    size_t k = 0;
    if (batch_limits(db, &o, 1, &lim, &k)) goto fail;
    const char *reason = NULL;
    int r = apply_one(db, &o, lim.limit, &reason);
    if (r < 0) goto fail;
    if (r == SK_APPLY_DUPLICATE) {
        sk__db_rollback(db);
        return SK_EEXIST;
    }
    if (r == SK_APPLY_REJECTED) { /* a refused direct purchase leaves no trace */
        sk__db_rollback(db);
        return strcmp(reason, "sold out in database") == 0 ? SK_ESOLDOUT : SK_ELIMIT;
    }
    return sk__db_commit(db);
fail:
    sk__db_rollback(db);
    return SK_EDB;
}

/* ---- lifecycle and reconciliation queries ------------------------------ */

static const char SQL_UNPAID[] = ORDER_COLS " WHERE status = 'persisted' AND created_ms < $1"
                                            " AND ($3 = '' OR campaign = $3) ORDER BY created_ms LIMIT $2";
/* SQLite has no statistics unless ANALYZE ran, so it is told which
 * (partial) index to use; PostgreSQL's planner finds it. */
#define REL_PENDING_WHERE                                                                                \
    " WHERE status = 'cancelled' AND redis_released = 0 AND (path = 'redis' OR redis_mirrored = 1)"    \
    " AND ($2 = '' OR campaign = $2) ORDER BY updated_ms LIMIT $1"
#define MIRROR_PENDING_WHERE                                                                             \
    " WHERE path = 'db' AND redis_mirrored = 0 AND status IN ('persisted', 'paid')"                    \
    " AND ($2 = '' OR campaign = $2) ORDER BY order_id LIMIT $1"
static const char SQL_REL_PENDING[] = ORDER_COLS REL_PENDING_WHERE;
static const char SQL_REL_PENDING_LITE[] = ORDER_COLS " INDEXED BY orders_release_pending" REL_PENDING_WHERE;
static const char SQL_MIRROR_PENDING[] = ORDER_COLS MIRROR_PENDING_WHERE;
static const char SQL_MIRROR_PENDING_LITE[] = ORDER_COLS " INDEXED BY orders_mirror_pending" MIRROR_PENDING_WHERE;
static const char SQL_MARK_MIRRORED[] = "UPDATE orders SET redis_mirrored = 1 WHERE order_id = $1";
static const char SQL_MARK_RELEASED[] = "UPDATE orders SET redis_released = 1 WHERE order_id = $1";
static const char SQL_BY_STATUS[] = ORDER_COLS " WHERE campaign = $1 AND status = $2 ORDER BY order_id LIMIT $3";

/* Runs an order query, cb per row: the number of rows or SK_EDB. */
static int order_query(sk_db *db, const char *sql, int nargs, const sk__arg *args, sk_db_order_cb cb, void *ud)
{
    order_acc a = {.cb = cb, .ud = ud};
    if (sk__db_run(db, sql, nargs, args, NULL, order_row, &a)) return SK_EDB;
    return a.found;
}

int sk_db_orders_unpaid_before(sk_db *db, const char *campaign, int64_t cutoff_ms, int max, sk_db_order_cb cb,
                               void *ud)
{
    sk__arg args[3] = {SK_I(cutoff_ms), SK_I(max), SK_T(campaign ? campaign : "")};
    return order_query(db, SQL_UNPAID, 3, args, cb, ud);
}

/* The (max, campaign) queries with a SQLite-specific spelling. */
static int pending_query(sk_db *db, const char *sql_pg, const char *sql_lite, const char *campaign, int max,
                         sk_db_order_cb cb, void *ud)
{
    sk__arg args[2] = {SK_I(max), SK_T(campaign ? campaign : "")};
    return order_query(db, sk__db_kindof(db) == SK__DB_SQLITE ? sql_lite : sql_pg, 2, args, cb, ud);
}

int sk_db_orders_release_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud)
{
    return pending_query(db, SQL_REL_PENDING, SQL_REL_PENDING_LITE, campaign, max, cb, ud);
}

int sk_db_orders_mirror_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud)
{
    return pending_query(db, SQL_MIRROR_PENDING, SQL_MIRROR_PENDING_LITE, campaign, max, cb, ud);
}

/* Runs an UPDATE ... WHERE order_id = $1: 0 or SK_EDB. */
static int order_mark(sk_db *db, const char *sql, uint64_t order_id)
{
    sk__arg arg = SK_I(order_id);
    return sk__db_run(db, sql, 1, &arg, NULL, NULL, NULL) ? SK_EDB : 0;
}

int sk_db_order_mark_mirrored(sk_db *db, uint64_t order_id) { return order_mark(db, SQL_MARK_MIRRORED, order_id); }

int sk_db_order_mark_released(sk_db *db, uint64_t order_id) { return order_mark(db, SQL_MARK_RELEASED, order_id); }

int sk_db_orders_by_status(sk_db *db, const char *campaign, const char *status, int max,
                           sk_db_order_cb cb, void *ud)
{
    sk__arg args[3] = {SK_T(campaign), SK_T(status), SK_I(max)};
    return order_query(db, SQL_BY_STATUS, 3, args, cb, ud);
}

static const char SQL_STATS_ORDERS[] =
    "SELECT status, COUNT(*), COALESCE(SUM(qty), 0) FROM orders WHERE campaign = $1 GROUP BY status";
static const char SQL_STATS_USERS[] = "SELECT COALESCE(SUM(qty), 0) FROM user_totals WHERE campaign = $1";
static const char SQL_STATS_RELPEND[] =
    "SELECT COUNT(*) FROM orders WHERE campaign = $1 AND status = 'cancelled' AND redis_released = 0"
    " AND (path = 'redis' OR redis_mirrored = 1)";
static const char SQL_STATS_MIRPEND[] =
    "SELECT COUNT(*) FROM orders WHERE campaign = $1 AND path = 'db' AND redis_mirrored = 0"
    " AND status IN ('persisted', 'paid')";
static const char SQL_STATS_DBREL[] =
    "SELECT COUNT(*) FROM orders WHERE campaign = $1 AND status = 'cancelled' AND redis_released = 1";

static const char SQL_STATS_DBPATH[] = "SELECT COUNT(*) FROM orders WHERE campaign = $1 AND path = 'db'";

static void stats_row(int n, const char *const *v, void *ud)
{
    sk_db_campaign_stats *s = ud;
    if (n < 3 || !v[0]) return;
    static const char *const names[4] = {"persisted", "paid", "cancelled", "rejected"};
    for (int i = 0; i < 4; i++)
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
    if (sk__db_run(db, SQL_STATS_USERS, 1, &a, NULL, int_cb, &out->user_total_units)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_RELPEND, 1, &a, NULL, int_cb, &out->released_pending)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_DBPATH, 1, &a, NULL, int_cb, &out->db_path_orders)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_MIRPEND, 1, &a, NULL, int_cb, &out->mirror_pending)) return SK_EDB;
    if (sk__db_run(db, SQL_STATS_DBREL, 1, &a, NULL, int_cb, &out->released_done)) return SK_EDB;
    return 0;
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
