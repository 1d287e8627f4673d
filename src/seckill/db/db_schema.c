/* db_schema.c: the schema of the system of record and its migrations,
 * applied at every open (sk_db_open) in one transaction; concurrent
 * openers serialise on the SQLite write lock or a PostgreSQL advisory lock
 * and re-read the version inside it. A released migration is never
 * edited: a change is a new one appended to migrations[] (docs/schema.md). */
#include "db.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"
#include "rulebook.h"
#include "sk_err.h"
#include "util.h"

typedef struct migration {
    int version;
    const char *sqlite, *pg; /* NULL: nothing to do on that engine */
    const char *pg_tail;     /* appended to pg (C99 bounds one string literal to 4095 bytes) */
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


/* Migration 6 ("a 201 is a promise", docs/design/promise.md): the
 * campaign's timeline (epoch) and database reserve, the reserve handback,
 * tentative database-path orders (status pending), and what a new master
 * must be given back (the Idempotency-Key, the epoch of each order). */
#define M6_CAMPAIGN_COLS(sep)                                                                            \
    "ALTER TABLE campaigns ADD COLUMN db_reserve BIGINT NOT NULL DEFAULT 0;"                            \
    "ALTER TABLE campaign_stock ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1" sep                          \
    " ADD COLUMN reserve_remaining BIGINT NOT NULL DEFAULT 0 CHECK (reserve_remaining >= 0)" sep         \
    " ADD COLUMN handback_id TEXT NOT NULL DEFAULT ''" sep                                               \
    " ADD COLUMN handback_units BIGINT NOT NULL DEFAULT 0" sep                                           \
    " ADD COLUMN handback_done INTEGER NOT NULL DEFAULT 0;"
#define M6_STATUSES "('persisted','paid','cancelled','rejected','pending')"
#define M6_INDEXES                                                                                       \
    "CREATE INDEX orders_campaign_status ON orders (campaign, status);"                                 \
    "CREATE INDEX orders_status_created ON orders (status, created_ms);" M5_PENDING_INDEXES              \
    "CREATE INDEX orders_tentative ON orders (campaign, order_id) WHERE status = 'pending';"
/* SQLite cannot change a CHECK: the orders table is rebuilt (same rowid). */
#define M6_SQLITE                                                                                        \
    M6_CAMPAIGN_COLS(";ALTER TABLE campaign_stock")                                                      \
    "CREATE TABLE orders_v6 ("                                                                          \
    " order_id INTEGER PRIMARY KEY,"                                                                    \
    " campaign TEXT NOT NULL,"                                                                          \
    " user_id TEXT NOT NULL,"                                                                           \
    " qty BIGINT NOT NULL CHECK (qty > 0),"                                                             \
    " status TEXT NOT NULL CHECK (status IN " M6_STATUSES "),"                                         \
    " reason TEXT NOT NULL DEFAULT '',"                                                                 \
    " path TEXT NOT NULL CHECK (path IN ('redis','db')),"                                               \
    " redis_released INTEGER NOT NULL DEFAULT 0,"                                                       \
    " created_ms BIGINT NOT NULL,"                                                                      \
    " updated_ms BIGINT NOT NULL,"                                                                      \
    " redis_mirrored INTEGER NOT NULL DEFAULT 0,"                                                       \
    " idem TEXT NOT NULL DEFAULT '',"                                                                   \
    " epoch BIGINT NOT NULL DEFAULT 1);"                                                                \
    "INSERT INTO orders_v6 (order_id, campaign, user_id, qty, status, reason, path, redis_released,"    \
    " created_ms, updated_ms, redis_mirrored) SELECT order_id, campaign, user_id, qty, status, reason,"  \
    " path, redis_released, created_ms, updated_ms, redis_mirrored FROM orders;"                        \
    "DROP TABLE orders;"                                                                                \
    "ALTER TABLE orders_v6 RENAME TO orders;" M6_INDEXES
/* The fast path of every sk_apply_batch since migration 6: locks the
 * campaigns' stock rows in order, then (v_ok) when every order is new, of
 * the current epoch and fits, writes them all at once. */
#define PG_APPLY_FAST_CHECK                                                                              \
    "BEGIN\n"                                                                                           \
    "  FOR v_camp IN SELECT DISTINCT x FROM unnest(p_camps) AS x ORDER BY x LOOP\n"                    \
    "    PERFORM 1 FROM campaign_stock WHERE campaign = v_camp FOR UPDATE;\n"                           \
    "  END LOOP;\n"                                                                                     \
    "  IF (SELECT count(DISTINCT x) FROM unnest(p_ids) AS x) = v_len\n"                                \
    "     AND NOT EXISTS (SELECT 1 FROM unnest(p_ids) AS x\n"                                           \
    "                     WHERE EXISTS (SELECT 1 FROM orders o WHERE o.order_id = x)) THEN\n"            \
    "    WITH b AS (SELECT * FROM unnest(p_camps, p_users, p_qtys, p_epochs) AS t(camp, usr, qty, ep)),\n" \
    "      pc AS (SELECT camp, sum(qty) AS q, min(ep) AS ep FROM b GROUP BY camp),\n"                    \
    "      pu AS (SELECT camp, usr, sum(qty) AS q FROM b GROUP BY camp, usr)\n"                          \
    "    SELECT NOT EXISTS (SELECT 1 FROM pc WHERE coalesce((SELECT s.remaining - s.reserve_remaining\n"  \
    "                       FROM campaign_stock s WHERE s.campaign = pc.camp), -1) < pc.q\n"             \
    "                       OR pc.ep < (SELECT s.epoch FROM campaign_stock s WHERE s.campaign = pc.camp))\n" \
    "       AND NOT EXISTS (SELECT 1 FROM pu WHERE coalesce((SELECT u.qty FROM user_totals u\n"          \
    "                       WHERE u.campaign = pu.camp AND u.user_id = pu.usr), 0) + pu.q >\n"           \
    "                       coalesce((SELECT c.per_user_limit FROM campaigns c WHERE c.id = pu.camp), 0))\n" \
    "      INTO v_ok;\n"                                                                                \
    "  END IF;\n"                                                                                       \
    "  IF v_ok THEN\n"
#define PG_APPLY_FAST_WRITE                                                                              \
    "    INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms,"       \
    " updated_ms, idem, epoch) SELECT id, camp, usr, qty, 'persisted', '', pth, cr, p_now, idm, ep"      \
    " FROM unnest(p_ids, p_camps, p_users, p_qtys, p_paths, p_created, p_idems, p_epochs)"              \
    " AS t(id, camp, usr, qty, pth, cr, idm, ep);\n"                                                   \
    "    UPDATE campaign_stock s SET remaining = s.remaining - pc.q FROM (SELECT camp, sum(qty) AS q"    \
    " FROM unnest(p_camps, p_qtys) AS t(camp, qty) GROUP BY camp) pc"                                   \
    " WHERE s.campaign = pc.camp AND s.remaining - s.reserve_remaining >= pc.q;\n"                     \
    "    GET DIAGNOSTICS v_n = ROW_COUNT;\n"                                                            \
    "    IF v_n <> (SELECT count(DISTINCT x) FROM unnest(p_camps) AS x) THEN\n"                        \
    "      RAISE EXCEPTION 'sk_apply_batch: stock guard failed under lock';\n"                          \
    "    END IF;\n"                                                                                     \
    "    INSERT INTO user_totals (campaign, user_id, qty) SELECT camp, usr, sum(qty)"                   \
    " FROM unnest(p_camps, p_users, p_qtys) AS t(camp, usr, qty) GROUP BY camp, usr"                    \
    " ON CONFLICT (campaign, user_id) DO UPDATE SET qty = user_totals.qty + excluded.qty;\n"
/* PostgreSQL: the batch guard of apply_one() (db_guard.c) as one
 * server-side function, now with the reserve and the timeline: the fast
 * path needs every order new, of the current epoch and fitting (per
 * campaign: units <= remaining - reserve_remaining; per user: held + units
 * <= limit; the row locks keep both true); otherwise order by order.
 * Results: 1 persisted, 2 rejected, 3 duplicate, 4 stale timeline. */
#define M6_PG_APPLY_BATCH                                                                                \
    "DROP FUNCTION sk_apply_batch(BIGINT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[], BIGINT);"       \
    "CREATE FUNCTION sk_apply_batch(p_ids BIGINT[], p_camps TEXT[], p_users TEXT[], p_qtys BIGINT[],"   \
    " p_paths TEXT[], p_created BIGINT[], p_idems TEXT[], p_epochs BIGINT[], p_now BIGINT)"             \
    " RETURNS INTEGER[] LANGUAGE plpgsql AS $f$\n"                                                     \
    "DECLARE res INTEGER[] := '{}'; v_camp TEXT; v_lim BIGINT; v_ep BIGINT; v_n INTEGER; v_reason TEXT;" \
    " i INTEGER; v_len INTEGER := coalesce(array_length(p_ids, 1), 0); v_ok BOOLEAN := false;\n"       \
    PG_APPLY_FAST_CHECK
#define M6_PG_APPLY_BATCH_TAIL                                                                           \
    PG_APPLY_FAST_WRITE                                                                                  \
    "    RETURN array_fill(1, ARRAY[v_len]);\n"                                                         \
    "  END IF;\n"                                                                                       \
    "  FOR i IN 1 .. v_len LOOP\n"                                                                      \
    "    INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms,"       \
    " updated_ms, idem, epoch) VALUES (p_ids[i], p_camps[i], p_users[i], p_qtys[i], 'persisted', '',"    \
    " p_paths[i], p_created[i], p_now, p_idems[i], p_epochs[i]) ON CONFLICT (order_id) DO NOTHING;\n"   \
    "    GET DIAGNOSTICS v_n = ROW_COUNT;\n"                                                            \
    "    IF v_n = 0 THEN res := res || 3; CONTINUE; END IF;\n"                                          \
    "    v_reason := NULL; v_lim := NULL; v_ep := NULL;\n"                                              \
    "    SELECT c.per_user_limit, s.epoch INTO v_lim, v_ep FROM campaigns c"                            \
    " JOIN campaign_stock s ON s.campaign = c.id WHERE c.id = p_camps[i];\n"                            \
    "    IF v_lim IS NULL THEN v_reason := 'unknown campaign';\n"                                       \
    "    ELSIF p_epochs[i] < v_ep THEN v_reason := 'stale timeline';\n"                                 \
    "    ELSIF p_qtys[i] > v_lim THEN v_reason := 'per-user limit';\n"                                  \
    "    ELSE\n"                                                                                        \
    "      UPDATE campaign_stock SET remaining = remaining - p_qtys[i] WHERE campaign = p_camps[i]"     \
    " AND remaining - reserve_remaining >= p_qtys[i];\n"                                                \
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
    " res := res || CASE WHEN v_reason = 'stale timeline' THEN 4 ELSE 2 END; END IF;\n"                 \
    "  END LOOP;\n"                                                                                     \
    "  RETURN res;\n"                                                                                   \
    "END $f$;"
#define M6_PG                                                                                            \
    M6_CAMPAIGN_COLS(",")                                                                                \
    "ALTER TABLE orders DROP CONSTRAINT orders_status_check,"                                           \
    " ADD CONSTRAINT orders_status_check CHECK (status IN " M6_STATUSES "),"                           \
    " ADD COLUMN idem TEXT NOT NULL DEFAULT '', ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1;"            \
    "CREATE INDEX orders_tentative ON orders (campaign, order_id) WHERE status = 'pending';"            \
    M6_PG_APPLY_BATCH

/* The bucket layout of a sharded campaign (docs/seckill.md, "One hot
 * campaign over many masters"): shards K and the tags of its buckets, as
 * bucket 0's meta keeps them. Nothing else moves: the guard, the reserve
 * and the timeline stay per campaign. */
#define M7_SHARDS                                                                                        \
    "ALTER TABLE campaigns ADD COLUMN shards BIGINT NOT NULL DEFAULT 1 CHECK (shards >= 1 AND shards <= 64);" \
    "ALTER TABLE campaigns ADD COLUMN bucket_tags TEXT NOT NULL DEFAULT '';"

/* Rejection reasons as outcome ids (rulebook.h): orders.reason_code holds
 * the id, orders.reason its text from the same table. Rows refused before
 * take their id from the text they were stored with (the ids are fixed:
 * rulebook.h never renumbers; checked below). The PL/pgSQL guard reports
 * outcome ids and receives the ids it may report (p_codes: accepted,
 * replay, not_found, stale, bad_quantity, sold_out, limit) and their texts
 * (p_texts) from the C table, so it writes no code or text of its own.
 * The rules run in purchase.lua's order: the user's limit before stock. */
#define M8_REASON_CODE                                                                                   \
    "ALTER TABLE orders ADD COLUMN reason_code INTEGER NOT NULL DEFAULT 0;"                              \
    "UPDATE orders SET reason_code = CASE reason WHEN 'stale timeline' THEN 14 WHEN 'unknown campaign'"  \
    " THEN 6 WHEN 'sold out in database' THEN 2 ELSE 3 END WHERE status = 'rejected';"
#define M8_PG_APPLY_BATCH                                                                                \
    "DROP FUNCTION sk_apply_batch(BIGINT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[], TEXT[], BIGINT[],"  \
    " BIGINT);"                                                                                          \
    "CREATE FUNCTION sk_apply_batch(p_ids BIGINT[], p_camps TEXT[], p_users TEXT[], p_qtys BIGINT[],"   \
    " p_paths TEXT[], p_created BIGINT[], p_idems TEXT[], p_epochs BIGINT[], p_now BIGINT,"              \
    " p_codes INTEGER[], p_texts TEXT[]) RETURNS INTEGER[] LANGUAGE plpgsql AS $f$\n"                   \
    "DECLARE res INTEGER[] := '{}'; v_camp TEXT; v_lim BIGINT; v_ep BIGINT; v_n INTEGER; v_code INTEGER;" \
    " i INTEGER; v_len INTEGER := coalesce(array_length(p_ids, 1), 0); v_ok BOOLEAN := false;\n"       \
    PG_APPLY_FAST_CHECK
#define M8_PG_APPLY_BATCH_TAIL                                                                           \
    PG_APPLY_FAST_WRITE                                                                                  \
    "    RETURN array_fill(p_codes[1], ARRAY[v_len]);\n"                                                \
    "  END IF;\n"                                                                                       \
    "  FOR i IN 1 .. v_len LOOP\n"                                                                      \
    "    INSERT INTO orders (order_id, campaign, user_id, qty, status, reason, path, created_ms,"       \
    " updated_ms, idem, epoch) VALUES (p_ids[i], p_camps[i], p_users[i], p_qtys[i], 'persisted', '',"    \
    " p_paths[i], p_created[i], p_now, p_idems[i], p_epochs[i]) ON CONFLICT (order_id) DO NOTHING;\n"   \
    "    GET DIAGNOSTICS v_n = ROW_COUNT;\n"                                                            \
    "    IF v_n = 0 THEN res := res || p_codes[2]; CONTINUE; END IF;\n"                                 \
    "    v_code := p_codes[1]; v_lim := NULL; v_ep := NULL;\n"                                          \
    "    SELECT c.per_user_limit, s.epoch INTO v_lim, v_ep FROM campaigns c"                            \
    " JOIN campaign_stock s ON s.campaign = c.id WHERE c.id = p_camps[i];\n"                            \
    "    IF v_lim IS NULL THEN v_code := p_codes[3];\n"                                                 \
    "    ELSIF p_epochs[i] < v_ep THEN v_code := p_codes[4];\n"                                         \
    "    ELSIF p_qtys[i] > v_lim THEN v_code := p_codes[5];\n"                                          \
    "    ELSIF coalesce((SELECT u.qty FROM user_totals u WHERE u.campaign = p_camps[i]"                  \
    " AND u.user_id = p_users[i]), 0) + p_qtys[i] > v_lim THEN v_code := p_codes[7];\n"               \
    "    ELSE\n"                                                                                        \
    "      UPDATE campaign_stock SET remaining = remaining - p_qtys[i] WHERE campaign = p_camps[i]"     \
    " AND remaining - reserve_remaining >= p_qtys[i];\n"                                                \
    "      GET DIAGNOSTICS v_n = ROW_COUNT;\n"                                                          \
    "      IF v_n = 0 THEN v_code := p_codes[6];\n"                                                     \
    "      ELSE\n"                                                                                      \
    "        INSERT INTO user_totals (campaign, user_id, qty) VALUES (p_camps[i], p_users[i], p_qtys[i])" \
    " ON CONFLICT (campaign, user_id) DO UPDATE SET qty = user_totals.qty + excluded.qty"               \
    " WHERE user_totals.qty + excluded.qty <= v_lim;\n"                                                 \
    "        GET DIAGNOSTICS v_n = ROW_COUNT;\n"                                                        \
    "        IF v_n = 0 THEN\n"                                                                         \
    "          v_code := p_codes[7];\n"                                                                 \
    "          UPDATE campaign_stock SET remaining = remaining + p_qtys[i] WHERE campaign = p_camps[i];\n" \
    "        END IF;\n"                                                                                 \
    "      END IF;\n"                                                                                   \
    "    END IF;\n"                                                                                     \
    "    IF v_code <> p_codes[1] THEN UPDATE orders SET status = 'rejected',"                           \
    " reason = p_texts[array_position(p_codes, v_code)], reason_code = v_code WHERE order_id = p_ids[i];" \
    " END IF;\n"                                                                                        \
    "    res := res || v_code;\n"                                                                       \
    "  END LOOP;\n"                                                                                     \
    "  RETURN res;\n"                                                                                   \
    "END $f$;"
_Static_assert(SK_OUT_SOLD_OUT == 2 && SK_OUT_LIMIT == 3 && SK_OUT_NOT_FOUND == 6 && SK_OUT_STALE == 14,
               "migration 8 names these outcome ids");

static const migration migrations[] = {
    {1, M1_CAMPAIGNS M1_ORDERS("INTEGER") M1_USERS(" WITHOUT ROWID"), M1_CAMPAIGNS M1_ORDERS("BIGINT") M1_USERS(""),
     NULL},
    {2, "CREATE INDEX orders_status_created ON orders (status, created_ms);",
     "CREATE INDEX orders_status_created ON orders (status, created_ms);", NULL},
    {3, NULL, M3_PG_APPLY_BATCH, NULL},
    {4, "ALTER TABLE orders ADD COLUMN redis_mirrored INTEGER NOT NULL DEFAULT 0;",
     "ALTER TABLE orders ADD COLUMN redis_mirrored INTEGER NOT NULL DEFAULT 0;", NULL},
    {5, M5_PENDING_INDEXES, M5_PENDING_INDEXES, NULL},
    {6, M6_SQLITE, M6_PG, M6_PG_APPLY_BATCH_TAIL},
    {7, M7_SHARDS, M7_SHARDS, NULL},
    {8, M8_REASON_CODE, M8_REASON_CODE M8_PG_APPLY_BATCH, M8_PG_APPLY_BATCH_TAIL},
};
#define N_MIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))

void sk__db_int_cb(int n, const char *const *v, void *ud)
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
    if (sk__db_run(db, SQL_VERSION, 0, NULL, NULL, sk__db_int_cb, &have)) goto fail;
    for (int i = 0; i < N_MIGRATIONS; i++) {
        if (migrations[i].version <= have) continue;
        const char *sql = sk__db_kindof(db) == SK__DB_PG ? migrations[i].pg : migrations[i].sqlite;
        dlock__buf text = {0};
        if (sql) dlock__buf_printf(&text, "%s%s", sql, sk__db_kindof(db) == SK__DB_PG && migrations[i].pg_tail
                                                           ? migrations[i].pg_tail : "");
        int bad = sql && (text.oom || sk__db_script(db, text.data));
        dlock__buf_free(&text);
        if (bad) goto fail;
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
    return sk__db_run(db, SQL_PING, 0, NULL, NULL, sk__db_int_cb, &one) == 0 && one == 1 ? 0 : SK_EDB;
}

int sk_db_schema_version(sk_db *db, int *version_out)
{
    int64_t v = 0;
    if (sk__db_run(db, SQL_VERSION, 0, NULL, NULL, sk__db_int_cb, &v)) return SK_EDB;
    *version_out = (int)v;
    return 0;
}
