/* test_promise.c: the pipeline's half of "a 201 is a promise"
 * (docs/design/promise.md) against a real redis-server and a real database
 * (a SQLite file, or a private PostgreSQL with SK_TEST_PG=1): the guard
 * keeps Redis-path orders off the database reserve and refuses an old
 * timeline's orders unless held; the database path sells only the reserve,
 * tentatively; finalisation confirms within the limit and refuses beyond
 * it (unit back, buyer total back in Redis once); the reserve is handed
 * back once even across a crash; the migration of an old database. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "db.h"
#include "lifecycle.h"
#include "persist.h"
#include "promise_fixture.h"
#include "reconcile.h"
#include "release.h"
#include "reserve.h"
#include "rulebook.h"
#include "servers.h"
#include "sk_err.h"
#include "util.h"

/* ---- guard -------------------------------------------------------------- */

/* Redis's share is remaining - reserve_remaining: a Redis-path order can
 * never take a reserve unit, however far behind the persister is. */
static void test_redis_path_order_cannot_take_reserve_units(void **state)
{
    (void)state;
    const char *camp = "g-reserve";
    pf_seed(camp, 4, 5, 2); /* Redis gets 2, the database keeps 2 */
    sk_order_in in[3] = {pf_order(camp, "r1", 1), pf_order(camp, "r2", 1), pf_order(camp, "r3", 1)};
    int res[3];
    assert_int_equal(sk_db_apply_batch(pf_db, in, 3, res), 0);
    assert_int_equal(res[0], SK_APPLY_PERSISTED);
    assert_int_equal(res[1], SK_APPLY_PERSISTED);
    assert_int_equal(res[2], SK_APPLY_REJECTED); /* the third would be a reserve unit */
    sk_order_row row;
    assert_int_equal(sk_db_order_get(pf_db, in[2].order_id, &row), 0);
    assert_string_equal(row.reason, "sold out in database");
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.remaining, 2);
    assert_int_equal(s.reserve_remaining, 2);
    assert_int_equal(s.broken_promises, 1); /* a Redis-path refusal is counted as one */
    /* the database path still has its two units */
    int64_t now = dlock__wall_ms();
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "d1", 1, now), 0);
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "d2", 1, now), 0);
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "d3", 1, now), SK_ESOLDOUT);
}

/* After the seal (epoch 2) an entry of epoch 1 (or without the field) is
 * refused as a stale timeline, unless the database already holds it. */
static void test_stale_epoch_entry_is_refused_unless_held(void **state)
{
    (void)state;
    const char *camp = "g-epoch";
    pf_seed(camp, 10, 5, 0);
    sk_order_in held = pf_order(camp, "e1", 1); /* epoch 0: no field, the first timeline */
    int res = 0;
    assert_int_equal(sk_db_apply_batch(pf_db, &held, 1, &res), 0);
    assert_int_equal(res, SK_APPLY_PERSISTED);
    assert_int_equal(sk_db_campaign_seal(pf_db, camp, 2), 0);
    assert_int_equal(sk_db_campaign_seal(pf_db, camp, 2), 0); /* twice: no change */
    int64_t ep = 0;
    assert_int_equal(sk_db_campaign_epoch(pf_db, camp, &ep), 0);
    assert_int_equal(ep, 2);
    sk_order_in in[3] = {held, pf_order(camp, "e2", 1), pf_order(camp, "e3", 1)};
    in[1].epoch = 1;
    in[2].epoch = 2;
    int r3[3];
    assert_int_equal(sk_db_apply_batch(pf_db, in, 3, r3), 0);
    assert_int_equal(r3[0], SK_APPLY_DUPLICATE); /* held: a redelivery stays a no-op */
    assert_int_equal(r3[1], SK_APPLY_STALE);
    assert_int_equal(r3[2], SK_APPLY_PERSISTED);
    sk_order_row row;
    assert_int_equal(sk_db_order_get(pf_db, in[1].order_id, &row), 0);
    assert_string_equal(row.status, "rejected");
    assert_string_equal(row.reason, "stale timeline");
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.stale, 1);
    assert_int_equal(s.broken_promises, 0); /* never acknowledged: not a broken promise */
    assert_int_equal(s.remaining, 8);
}

/* ---- database path and finalisation ------------------------------------- */

/* The database path sells the reserve only, stores pending orders outside
 * user_totals, holds a user to persisted + pending <= limit, and keeps the
 * order id unique; a refusal leaves no row. */
static void test_database_path_sells_only_the_reserve_tentatively(void **state)
{
    (void)state;
    const char *camp = "p-direct";
    pf_seed(camp, 10, 2, 3);
    int64_t now = dlock__wall_ms();
    uint64_t a = pf_next_id(), b = pf_next_id();
    assert_int_equal(sk_db_purchase_direct(pf_db, a, camp, "u1", 1, now), 0);
    assert_int_equal(sk_db_purchase_direct(pf_db, b, camp, "u1", 1, now), 0);
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "u1", 1, now), SK_ELIMIT);
    /* above the limit: bad_quantity, as purchase.lua answers (one rulebook) */
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "u2", 3, now), SK_EINVAL);
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "u2", 2, now), SK_ESOLDOUT); /* 1 left */
    assert_int_equal(sk_db_purchase_direct(pf_db, a, camp, "u3", 1, now), SK_EEXIST); /* order id reused */
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), "nocamp", "u3", 1, now), SK_ENOTFOUND);
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "", 1, now), SK_EINVAL);
    uint64_t refused = pf_next_id();
    assert_int_equal(sk_db_purchase_direct(pf_db, refused, camp, "u1", 1, now), SK_ELIMIT);
    sk_order_row row;
    assert_int_equal(sk_db_order_get(pf_db, refused, &row), SK_ENOTFOUND); /* refusals leave no row */
    assert_int_equal(sk_db_order_get(pf_db, a, &row), 0);
    assert_string_equal(row.status, "pending");
    assert_string_equal(row.path, "db");
    assert_int_equal(sk_db_order_pay(pf_db, a, "u1", NULL), SK_ECONFLICT); /* not final yet */
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.remaining, 8);
    assert_int_equal(s.reserve_remaining, 1);
    assert_int_equal(s.orders[SK_ST_PENDING], 2);
    assert_int_equal(s.user_total_units, 0);
}

/* A tentative order is finalised only once the stream is drained after
 * its mirror: within the limit it is confirmed; a user whose Redis-path
 * order was persisted after the tentative one loses the tentative one,
 * its unit goes back to the reserve and its buyer total in Redis once. */
static void test_finalisation_confirms_within_limit_and_refuses_beyond(void **state)
{
    (void)state;
    const char *camp = "p-final";
    pf_seed(camp, 10, 1, 3);
    int64_t now = dlock__wall_ms();
    uint64_t keep = pf_next_id(), lose = pf_next_id();
    assert_int_equal(sk_db_purchase_direct(pf_db, keep, camp, "fa", 1, now), 0);
    assert_int_equal(sk_db_purchase_direct(pf_db, lose, camp, "fb", 1, now), 0);
    /* fb also bought on the Redis path, decided before Redis saw the mirror */
    uint64_t redis_order = pf_redis_buy(camp, "fb", 1);
    pf_sweep(camp); /* mirrors both into Redis's buyer totals */
    sk_reserve_stats rs = {0};
    assert_int_equal(sk_reserve_finalise(pf_db, pf_rc, camp, 100, &rs), 0);
    assert_int_equal(rs.confirmed + rs.lost, 0); /* the stream is not drained: wait */
    sk_order_row row;
    assert_int_equal(sk_db_order_get(pf_db, keep, &row), 0);
    assert_string_equal(row.status, "pending");
    pf_drain(camp); /* the persister's sweep, after the batch: drained now */
    assert_int_equal(sk_reserve_finalise(pf_db, pf_rc, camp, 100, &rs), 0); /* again: no-op */
    assert_int_equal(rs.confirmed + rs.lost, 0);
    assert_int_equal(pf_redis_int("HGET", camp, "pipeline", "confirmed"), 1);
    assert_int_equal(sk_db_order_get(pf_db, keep, &row), 0);
    assert_string_equal(row.status, "persisted");
    assert_int_equal(sk_db_order_get(pf_db, lose, &row), 0);
    assert_string_equal(row.status, "rejected");
    assert_string_equal(row.reason, "per-user limit"); /* the outcome table's text, as the guard's */
    assert_int_equal(row.reason_code, SK_OUT_LIMIT);
    assert_int_equal(sk_db_order_get(pf_db, redis_order, &row), 0);
    assert_string_equal(row.status, "persisted");
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.reserve_remaining, 2); /* the refused unit is back */
    assert_int_equal(s.remaining, 8);
    assert_int_equal(s.finalised_lost, 1);
    assert_int_equal(pf_redis_int("HGET", camp, "buyers", "fb"), 1); /* its Redis order only */
    assert_int_equal(pf_redis_int("HGET", camp, "buyers", "fa"), 1);
    assert_int_equal(pf_redis_int("HGET", camp, "pipeline", "lost"), 1);
    assert_int_equal(pf_reconcile(camp), 0);
}

/* Orders decided by the database while Redis was down sold reserve units:
 * when Redis is back they are mirrored into its buyer totals once (not its
 * stock), then finalised; cancelling one gives its unit to Redis once. */
static void test_degraded_orders_are_mirrored_into_redis_once(void **state)
{
    (void)state;
    const char *camp = "degraded";
    pf_seed(camp, 10, 1, 3);
    pf_redis_buy(camp, "dr1", 1);
    pf_redis_buy(camp, "dr2", 1);
    pf_drain(camp);
    int64_t now = dlock__wall_ms();
    uint64_t ids[3];
    for (int i = 0; i < 3; i++) {
        char user[16];
        snprintf(user, sizeof(user), "dd%d", i);
        ids[i] = pf_next_id();
        assert_int_equal(sk_db_purchase_direct(pf_db, ids[i], camp, user, 1, now), 0);
    }
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "dr1", 1, now), SK_ELIMIT); /* via Redis */
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "dd9", 1, now), SK_ESOLDOUT); /* reserve gone */
    assert_true(pf_reconcile(camp) > 0); /* not mirrored, not finalised */
    pf_sweep(camp);
    pf_sweep(camp);
    assert_int_equal(pf_redis_int("GET", camp, "stock", NULL), 5); /* reserve units were never in Redis's stock */
    assert_int_equal(pf_redis_int("HGET", camp, "buyers", "dd0"), 1);
    sk_reserve_stats rs = {0};
    assert_int_equal(sk_reserve_finalise(pf_db, pf_rc, camp, 100, &rs), 0);
    assert_int_equal(rs.confirmed, 3);
    assert_int_equal(pf_reconcile(camp), 0);
    assert_int_equal(sk_order_cancel(pf_db, pf_rc, ids[1], "changed mind"), 0);
    assert_int_equal(sk_order_cancel(pf_db, pf_rc, ids[1], "changed mind"), SK_ECONFLICT);
    pf_sweep(camp); /* a database-path order is released by the sweep */
    pf_sweep(camp);
    assert_int_equal(pf_redis_int("GET", camp, "stock", NULL), 6);
    int64_t rem = 0;
    assert_int_equal(sk_db_campaign_get(pf_db, camp, NULL, &rem), 0);
    assert_int_equal(rem, 6);
    assert_int_equal(pf_reconcile(camp), 0);
}

/* ---- handback ------------------------------------------------------------ */

/* Redis sold out: the unsold reserve goes to Redis once. A crash after the
 * database half is finished by the next pass; more passes add nothing. */
static void test_handback_survives_a_crash_between_database_and_redis(void **state)
{
    (void)state;
    const char *camp = "h-once";
    pf_seed(camp, 5, 5, 3); /* Redis 2 */
    pf_redis_buy(camp, "h1", 2);
    assert_int_equal(pf_redis_int("GET", camp, "stock", NULL), 0);
    sk_db_handback hb;
    assert_int_equal(sk_db_handback_begin(pf_db, camp, &hb), 1); /* the database half only: "crash" */
    assert_int_equal(hb.units, 3);
    assert_false(hb.done);
    assert_int_equal(sk_db_handback_begin(pf_db, camp, &hb), 0); /* never a second one */
    assert_int_equal(pf_redis_int("GET", camp, "stock", NULL), 0);
    pf_drain(camp); /* the next pass (the persister's sweep) finishes it */
    assert_int_equal(pf_redis_int("GET", camp, "stock", NULL), 3);
    sk_reserve_stats rs = {0};
    for (int i = 0; i < 3; i++) assert_int_equal(sk_reserve_handback(pf_db, pf_rc, camp, &rs), 0);
    pf_drain(camp);
    assert_int_equal(rs.handbacks, 0);
    assert_int_equal(pf_redis_int("HGET", camp, "pipeline", "handbacks"), 1);
    assert_int_equal(pf_redis_int("GET", camp, "stock", NULL), 3);
    assert_int_equal(sk_db_handback_get(pf_db, camp, &hb), 0);
    assert_true(hb.done);
    /* a crash after Redis applied it but before the mark: still once */
    assert_int_equal(sk_reserve_handback_apply(pf_rc, camp, &hb), 0);
    assert_int_equal(pf_redis_int("GET", camp, "stock", NULL), 3);
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.reserve_remaining, 0);
    assert_int_equal(pf_reconcile(camp), 0);
    /* Redis sells the handed-back units; the database accepts them */
    pf_redis_buy(camp, "h2", 3);
    pf_drain(camp);
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.remaining, 0);
    assert_int_equal(s.broken_promises, 0);
}

/* No handback while a tentative order may still be refused (its unit
 * would come back to a reserve already handed back). */
static void test_no_handback_while_tentative_orders_are_pending(void **state)
{
    (void)state;
    const char *camp = "h-wait";
    pf_seed(camp, 4, 5, 2);
    assert_int_equal(sk_db_purchase_direct(pf_db, pf_next_id(), camp, "w1", 1, dlock__wall_ms()), 0);
    pf_redis_buy(camp, "w2", 2);
    sk_reserve_stats rs = {0};
    assert_int_equal(sk_reserve_handback(pf_db, pf_rc, camp, &rs), 0); /* Redis sold out, one pending */
    sk_db_handback hb;
    assert_int_equal(sk_db_handback_get(pf_db, camp, &hb), 0);
    assert_string_equal(hb.id, "");
    pf_drain(camp); /* mirror, drained, finalised; then the handback */
    assert_int_equal(pf_redis_int("HGET", camp, "pipeline", "confirmed"), 1);
    assert_int_equal(sk_db_handback_get(pf_db, camp, &hb), 0);
    assert_true(hb.done);
    assert_int_equal(hb.units, 1);
    assert_int_equal(pf_redis_int("GET", camp, "stock", NULL), 1);
    assert_int_equal(pf_reconcile(camp), 0);
}

/* ---- migration ------------------------------------------------------------ */

static void test_an_old_database_is_migrated_at_open(void **state)
{
    (void)state;
    if (SK_TEST_PG) skip(); /* PostgreSQL runs migrations 1..6 in turn at every fixture start */
    char url[512];
    uint64_t old_order = pf_make_schema5_sqlite(url, sizeof(url));
    sk_db *d = NULL;
    char err[256];
    assert_int_equal(sk_db_open(url, &d, err, sizeof(err)), 0);
    int v = 0;
    assert_int_equal(sk_db_schema_version(d, &v), 0);
    assert_int_equal(v, 8);
    sk_order_row row;
    assert_int_equal(sk_db_order_get(d, old_order, &row), 0);
    assert_string_equal(row.status, "persisted");
    assert_int_equal(row.epoch, 1);
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(d, "old", &s), 0);
    assert_int_equal(s.epoch, 1);
    assert_int_equal(s.reserve_remaining, 0);
    assert_int_equal(s.remaining, 4);
    sk_order_in o = pf_order("old", "n1", 1);
    int res = 0;
    assert_int_equal(sk_db_apply_batch(d, &o, 1, &res), 0);
    assert_int_equal(res, SK_APPLY_PERSISTED);
    sk_db_close(d);
    assert_int_equal(sk_db_open(url, &d, err, sizeof(err)), 0); /* again: nothing to do */
    assert_int_equal(sk_db_schema_version(d, &v), 0);
    assert_int_equal(v, 8);
    sk_db_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_path_order_cannot_take_reserve_units),
        cmocka_unit_test(test_stale_epoch_entry_is_refused_unless_held),
        cmocka_unit_test(test_database_path_sells_only_the_reserve_tentatively),
        cmocka_unit_test(test_finalisation_confirms_within_limit_and_refuses_beyond),
        cmocka_unit_test(test_degraded_orders_are_mirrored_into_redis_once),
        cmocka_unit_test(test_handback_survives_a_crash_between_database_and_redis),
        cmocka_unit_test(test_no_handback_while_tentative_orders_are_pending),
        cmocka_unit_test(test_an_old_database_is_migrated_at_open),
    };
    return cmocka_run_group_tests(tests, pf_setup, pf_teardown);
}
