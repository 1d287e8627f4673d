/* test_shard_pipeline.c: the order pipeline of a campaign sharded over K
 * buckets (docs/seckill.md, "One hot campaign over many masters"), with a
 * real redis-server and a real database (a SQLite file, or a private
 * PostgreSQL with SK_TEST_PG=1). The buckets are heated by hand as the
 * engine heats them (promise_fixture.c); purchases decide like
 * purchase.lua in the buyer's home bucket. Cases: the persister drains
 * the K streams and the database guard stays per campaign; a campaign
 * known only to Redis gets its layout in the database, and one whose
 * layout cannot be read is retried; the barrier of one bucket mirrors only
 * that bucket's orders while the others go on selling, and an old
 * timeline of that bucket is refused; the reserve goes back to bucket 0
 * only when every bucket is empty and no transfer is in flight; a
 * tentative order waits only for its home bucket's stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "barrier.h"
#include "buckets.h"
#include "db.h"
#include "layout.h"
#include "persist.h"
#include "persist_thread.h"
#include "reserve.h"
#include "servers.h"
#include "sk_err.h"
#include "util.h"
#include "promise_fixture.h"

/* ---- helpers ------------------------------------------------------------ */

static dlock__reply *cmd(int argc, const char **argv)
{
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(pf_rc, argc, argv, NULL, &r), 0);
    if (dlock__reply_kind(r) == DLOCK__R_ERROR) fail_msg("redis %s: %s", argv[0], dlock__reply_str(r, NULL));
    return r;
}

static int64_t rint_of(dlock__reply *r)
{
    int64_t v = -1;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER) v = dlock__reply_int(r);
    else if (dlock__reply_kind(r) == DLOCK__R_STRING) v = strtoll(dlock__reply_str(r, NULL), NULL, 10);
    dlock__reply_free(r);
    return v;
}

/* An integer of bucket j: cmd {tag_j}:part [field]; -1 when nil. */
static int64_t bint(const sk_buckets *lay, int j, const char *c, const char *part, const char *field)
{
    char key[200];
    sk_bucket_key(lay, j, part, key, sizeof(key));
    const char *argv[] = {c, key, field};
    return rint_of(cmd(field ? 3 : 2, argv));
}

static void bset(const sk_buckets *lay, int j, const char *c, const char *part, const char *a1, const char *a2)
{
    char key[200];
    sk_bucket_key(lay, j, part, key, sizeof(key));
    const char *argv[] = {c, key, a1, a2};
    dlock__reply_free(cmd(a2 ? 4 : a1 ? 3 : 2, argv));
}

/* A user whose home bucket among lay->k is j: "<prefix><n>" for the
 * smallest n >= *next (advanced past it). */
static void user_of(const sk_buckets *lay, int j, const char *prefix, int *next, char *out, size_t len)
{
    for (;; (*next)++) {
        snprintf(out, len, "%s%d", prefix, *next);
        if (sk_home_bucket(out, lay->k) == j) break;
    }
    (*next)++;
}

static void layout3(const char *camp, sk_buckets *lay)
{
    assert_int_equal(sk_buckets_place(camp, 3, NULL, NULL, lay), 0);
}

static void seed3(const char *camp, int64_t stock, int64_t limit, int64_t reserve, int64_t per_bucket,
                  sk_buckets *lay)
{
    layout3(camp, lay);
    int64_t st[3] = {per_bucket, per_bucket, per_bucket};
    pf_seed_sharded_on(NULL, camp, stock, limit, reserve, lay, st, true);
}

/* n purchases in bucket j by fresh users of it; their order ids in ids (may be NULL). */
static void buy_in(const sk_buckets *lay, const char *camp, int j, int n, int *next, uint64_t *ids)
{
    for (int i = 0; i < n; i++) {
        char user[32];
        user_of(lay, j, "u", next, user, sizeof(user));
        uint64_t id = pf_tag_buy_on(NULL, lay->tag[j], camp, user, 1, NULL);
        if (ids) ids[i] = id;
    }
}

/* A persister on camp on a thread, until bg_stop. */
typedef pt_worker bg;

static void bg_start(bg *b, const char *camp)
{
    pt_init(b, pf_redis_url, pf_db_url, camp);
    assert_int_equal(pt_start(b), 0);
}

static void bg_stop(bg *b) { assert_int_equal(pt_stop(b), 0); }

static int64_t db_orders(const char *camp, int status)
{
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    return s.orders[status];
}

/* ---- the persister over K streams --------------------------------------- */

/* Redis holds 4 + 4 + 4 units of a 10-unit campaign (a Redis that sold
 * beyond the database), and one buyer got a second order in a bucket not
 * his home: the persister drains all three streams, and the database
 * keeps the campaign to 10 units and the user to 1, across buckets. */
static void test_k3_persister_drains_every_bucket_and_the_guard_stays_per_campaign(void **state)
{
    (void)state;
    const char *camp = "sh3";
    sk_buckets lay;
    seed3(camp, 10, 1, 0, 4, &lay);
    int next = 0;
    for (int j = 0; j < 3; j++) buy_in(&lay, camp, j, 4, &next, NULL);
    char twice[32];
    int n0 = 0;
    user_of(&lay, 0, "u", &n0, twice, sizeof(twice)); /* bought in bucket 0 already */
    pf_tag_xadd_on(NULL, lay.tag[1], camp, twice, 1, 1);
    int64_t pending = -1, lag = -1;
    assert_int_equal(sk_persist_backlog(pf_rc, camp, &pending, &lag), 0);
    assert_int_equal(pending, 0);
    assert_int_equal(lag, 13); /* summed over the three streams */
    pf_drain(camp);
    assert_int_equal(sk_persist_backlog(pf_rc, camp, &pending, &lag), 0);
    assert_int_equal(pending + lag, 0);
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 10);
    assert_int_equal(s.orders[SK_ST_REJECTED], 3);
    assert_int_equal(s.remaining, 0);
    int64_t persisted = 0;
    for (int j = 0; j < 3; j++) {
        int64_t p = bint(&lay, j, "HGET", "pipeline", "persisted");
        assert_true(p >= 0);
        persisted += p;
    }
    assert_int_equal(persisted, 10); /* each bucket's counters in its own slot */
    sk_campaign got;
    assert_int_equal(sk_db_campaign_get(pf_db, camp, &got, NULL), 0);
    assert_int_equal(got.shards, 3);
    char tags[SK_MAX_SHARDS * SK_BUCKET_TAG_MAX];
    sk_buckets_format(&lay, tags, sizeof(tags));
    assert_string_equal(got.bucket_tags, tags);
}

/* The database refuses a layout sk_buckets_parse would refuse, and a
 * K = 1 campaign keeps shards 1 and no tags. */
static void test_campaign_layout_columns_are_checked_and_kept(void **state)
{
    (void)state;
    sk_campaign *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    snprintf(c->id, sizeof(c->id), "lay1");
    c->stock = 5;
    c->per_user_limit = 1;
    assert_int_equal(sk_db_campaign_create(pf_db, c), 0);
    assert_int_equal(sk_db_campaign_get(pf_db, "lay1", c, NULL), 0);
    assert_int_equal(c->shards, 1);
    assert_string_equal(c->bucket_tags, "");
    snprintf(c->id, sizeof(c->id), "lay2");
    c->shards = 2;
    snprintf(c->bucket_tags, sizeof(c->bucket_tags), "c:lay2,c:other/1.0");
    assert_int_equal(sk_db_campaign_create(pf_db, c), SK_EINVAL);
    c->shards = 65;
    snprintf(c->bucket_tags, sizeof(c->bucket_tags), "c:lay2,c:lay2/1.0");
    assert_int_equal(sk_db_campaign_create(pf_db, c), SK_EINVAL);
    c->shards = 2;
    assert_int_equal(sk_db_campaign_create(pf_db, c), 0);
    assert_int_equal(sk_db_campaign_get(pf_db, "lay2", c, NULL), 0);
    assert_int_equal(c->shards, 2);
    assert_string_equal(c->bucket_tags, "c:lay2,c:lay2/1.0");
    free(c);
}

/* A K = 3 campaign heated without a database row: the persister creates
 * it from bucket 0's meta with its layout. A campaign whose meta holds a
 * layout that does not parse is not followed (nothing of it read) until
 * the meta is right, then followed by the same persister. */
static void test_layout_from_meta_and_an_unreadable_layout_is_retried(void **state)
{
    (void)state;
    sk_buckets lay;
    layout3("shm", &lay);
    int64_t st[3] = {2, 2, 2};
    pf_seed_sharded_on(NULL, "shm", 6, 1, 0, &lay, st, false);
    int next = 0;
    for (int j = 0; j < 3; j++) buy_in(&lay, "shm", j, 2, &next, NULL);
    pf_drain("shm");
    assert_int_equal(db_orders("shm", SK_ST_PERSISTED), 6);
    sk_campaign *got = calloc(1, sizeof(*got));
    assert_int_equal(sk_db_campaign_get(pf_db, "shm", got, NULL), 0);
    assert_int_equal(got->shards, 3);
    assert_int_equal(strncmp(got->bucket_tags, "c:shm,c:shm/1.", 14), 0);
    free(got);

    sk_buckets bad;
    layout3("shb", &bad);
    int64_t st2[3] = {1, 1, 1};
    pf_seed_sharded_on(NULL, "shb", 3, 1, 0, &bad, st2, true);
    bset(&bad, 0, "HSET", "meta", "bucket_tags", "c:shb,c:evil/1.0,c:shb/2.0");
    next = 0;
    for (int j = 0; j < 3; j++) buy_in(&bad, "shb", j, 1, &next, NULL);
    bg b;
    bg_start(&b, "shb");
    dlock__sleep_ms(400);
    assert_int_equal(db_orders("shb", SK_ST_PERSISTED), 0);
    char tags[SK_MAX_SHARDS * SK_BUCKET_TAG_MAX];
    sk_buckets_format(&bad, tags, sizeof(tags));
    bset(&bad, 0, "HSET", "meta", "bucket_tags", tags);
    for (int i = 0; i < 100 && db_orders("shb", SK_ST_PERSISTED) < 3; i++) dlock__sleep_ms(50);
    bg_stop(&b);
    assert_int_equal(db_orders("shb", SK_ST_PERSISTED), 3);
}

/* ---- the barrier of one bucket ------------------------------------------ */

/* Bucket 1 of a K = 3 campaign moves to a "new master" that lost its
 * buyers, order hashes and stock (its meta names another run id); buckets
 * 0 and 2 go on selling meanwhile, with entries not yet persisted. The
 * barrier of bucket 1 raises the others' epoch, waits until their streams
 * are persisted through the raise, seals, mirrors into bucket 1 only the
 * orders of its users, and opens it: nothing of buckets 0 and 2 is
 * refused, an old-timeline entry of bucket 1 is. */
static void test_barrier_of_one_bucket_mirrors_its_orders_and_leaves_the_others_open(void **state)
{
    (void)state;
    const char *camp = "shbar";
    sk_buckets lay;
    seed3(camp, 30, 1, 0, 10, &lay);
    int next = 0;
    uint64_t ids1[3];
    buy_in(&lay, camp, 0, 3, &next, NULL);
    buy_in(&lay, camp, 1, 3, &next, ids1);
    buy_in(&lay, camp, 2, 3, &next, NULL);
    pf_drain(camp);
    assert_int_equal(db_orders(camp, SK_ST_PERSISTED), 9);
    /* the new master of bucket 1 lacks what it sold */
    bset(&lay, 1, "DEL", "buyers", NULL, NULL);
    bset(&lay, 1, "DEL", "mirrored", NULL, NULL);
    bset(&lay, 1, "SET", "stock", "10", NULL);
    bset(&lay, 1, "DEL", "order_status", NULL, NULL); /* the statuses of ids1 */
    assert_int_equal(sk_barrier_force_bucket(pf_rc, &lay, 3, "test"), SK_EINVAL);
    assert_int_equal(sk_barrier_force_bucket(pf_rc, &lay, 1, "test"), 0);
    buy_in(&lay, camp, 0, 2, &next, NULL); /* epoch 1, not persisted yet */
    buy_in(&lay, camp, 2, 1, &next, NULL);
    char run_id[41];
    assert_int_equal(sk_barrier_bucket_run_id(pf_rc, &lay, 1, run_id), 0);
    sk_barrier_run b;
    sk_barrier_run_init(&b, "test");
    assert_int_equal(sk_barrier_step_bucket(pf_db, pf_rc, camp, &lay, 1, run_id, &b), SK_BARRIER_WAITING);
    assert_int_equal(bint(&lay, 0, "HGET", "meta", "epoch"), 2); /* raised: later orders carry 2 */
    assert_int_equal(bint(&lay, 2, "HGET", "meta", "epoch"), 2);
    int64_t ep = 0;
    assert_int_equal(sk_db_campaign_epoch(pf_db, camp, &ep), 0);
    assert_int_equal(ep, 1); /* not sealed while their epoch-1 entries wait */
    buy_in(&lay, camp, 0, 1, &next, NULL); /* bucket 0 sells on, now at epoch 2 */
    int st = SK_BARRIER_WAITING;
    for (int i = 0; i < 20 && st == SK_BARRIER_WAITING; i++) {
        pf_drain(camp);
        st = sk_barrier_step_bucket(pf_db, pf_rc, camp, &lay, 1, run_id, &b);
    }
    assert_int_equal(st, SK_BARRIER_OPEN);
    assert_true(b.opened);
    assert_int_equal(b.epoch, 2);
    assert_int_equal(b.mirrored, 3);
    assert_int_equal(sk_db_campaign_epoch(pf_db, camp, &ep), 0);
    assert_int_equal(ep, 2);
    assert_int_equal(bint(&lay, 1, "HGET", "meta", "epoch"), 2);
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 13);
    assert_int_equal(s.stale, 0);
    /* bucket 1 got back exactly its own three orders */
    assert_int_equal(bint(&lay, 1, "HLEN", "buyers", NULL), 3);
    assert_int_equal(bint(&lay, 1, "SCARD", "mirrored", NULL), 3);
    assert_int_equal(bint(&lay, 1, "GET", "stock", NULL), 7);
    assert_int_equal(bint(&lay, 1, "HLEN", "order_status", NULL), 3);
    for (int i = 0; i < 3; i++) {
        char oid[24];
        snprintf(oid, sizeof(oid), "%" PRIu64, ids1[i]);
        assert_int_equal(bint(&lay, 1, "HEXISTS", "order_status", oid), 1);
    }
    assert_int_equal(bint(&lay, 0, "HLEN", "buyers", NULL), 6);
    assert_int_equal(bint(&lay, 0, "EXISTS", "mirrored", NULL), 0);
    /* an entry of bucket 1's lost timeline is refused; the others' are not */
    pf_tag_xadd_on(NULL, lay.tag[1], camp, "late1", 1, 1);
    buy_in(&lay, camp, 2, 1, &next, NULL);
    pf_drain(camp);
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.stale, 1);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 14);
    assert_int_equal(pf_redis_int("EXISTS", camp, "sealing", NULL), 0); /* the seal lock is gone */
}

/* Every bucket due at once (the one server restarted) and two persisters
 * running: the seal lock puts the barriers one after the other, each
 * bucket opens, every bucket ends at the database's epoch, and what they
 * sell next is persisted (no order below the seal). */
static void test_all_buckets_due_at_once_open_one_after_the_other(void **state)
{
    (void)state;
    const char *camp = "shall";
    sk_buckets lay;
    seed3(camp, 30, 1, 0, 10, &lay);
    int next = 0;
    for (int j = 0; j < 3; j++) buy_in(&lay, camp, j, 2, &next, NULL);
    for (int j = 0; j < 3; j++) bset(&lay, j, "HSET", "meta", "runid", "0123456789012345678901234567890123456789");
    bg a, b;
    bg_start(&a, camp);
    bg_start(&b, camp);
    char rid[41];
    assert_int_equal(sk_barrier_bucket_run_id(pf_rc, &lay, 0, rid), 0);
    bool open = false;
    for (int i = 0; i < 200 && !open; i++) {
        dlock__sleep_ms(50);
        open = true;
        for (int j = 0; j < 3; j++) {
            char key[200], got[64] = "";
            sk_bucket_key(&lay, j, "meta", key, sizeof(key));
            const char *argv[] = {"HGET", key, "runid"};
            dlock__reply *r = cmd(3, argv);
            if (dlock__reply_kind(r) == DLOCK__R_STRING) snprintf(got, sizeof(got), "%s", dlock__reply_str(r, NULL));
            dlock__reply_free(r);
            open = open && strcmp(got, rid) == 0;
        }
    }
    assert_true(open);
    for (int j = 0; j < 3; j++) buy_in(&lay, camp, j, 1, &next, NULL);
    for (int i = 0; i < 100 && db_orders(camp, SK_ST_PERSISTED) < 9; i++) dlock__sleep_ms(50);
    bg_stop(&a);
    bg_stop(&b);
    int64_t ep = 0;
    assert_int_equal(sk_db_campaign_epoch(pf_db, camp, &ep), 0);
    assert_true(ep >= 4); /* three seals, one after the other */
    for (int j = 0; j < 3; j++) assert_int_equal(bint(&lay, j, "HGET", "meta", "epoch"), ep);
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 9);
    assert_int_equal(s.stale, 0);
}

/* ---- the reserve -------------------------------------------------------- */

/* The unsold reserve goes back only when every bucket's stock is 0 and no
 * transfer journal holds an entry, and then into bucket 0 alone. */
static void test_handback_to_bucket_0_only_when_every_bucket_is_empty_and_nothing_in_transit(void **state)
{
    (void)state;
    const char *camp = "shhb";
    sk_buckets lay;
    seed3(camp, 10, 1, 4, 2, &lay);
    bset(&lay, 0, "SET", "stock", "0", NULL);
    bset(&lay, 1, "SET", "stock", "0", NULL);
    bset(&lay, 2, "SET", "stock", "1", NULL);
    sk_reserve_stats rs = {0};
    assert_int_equal(sk_reserve_handback(pf_db, pf_rc, camp, &rs), 0); /* bucket 2 still sells */
    bset(&lay, 2, "SET", "stock", "0", NULL);
    bset(&lay, 2, "HSET", "xfer", "x1", "0\n1\n1");
    assert_int_equal(sk_reserve_handback(pf_db, pf_rc, camp, &rs), 0); /* a unit in transit */
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.reserve_remaining, 4);
    bset(&lay, 2, "HDEL", "xfer", "x1", NULL);
    assert_int_equal(sk_reserve_handback(pf_db, pf_rc, camp, &rs), 1);
    assert_int_equal(rs.handbacks, 1);
    assert_int_equal(bint(&lay, 0, "GET", "stock", NULL), 4);
    assert_int_equal(bint(&lay, 1, "GET", "stock", NULL), 0);
    assert_int_equal(bint(&lay, 2, "GET", "stock", NULL), 0);
    assert_int_equal(sk_reserve_handback(pf_db, pf_rc, camp, &rs), 0); /* once */
    assert_int_equal(bint(&lay, 0, "GET", "stock", NULL), 4);
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.reserve_remaining, 0);
}

/* A tentative order is finalised once its user's home bucket's stream is
 * drained; a backlog in another bucket does not hold it back. */
static void test_tentative_order_waits_for_its_home_bucket_stream_only(void **state)
{
    (void)state;
    const char *camp = "shfin";
    sk_buckets lay;
    seed3(camp, 10, 1, 2, 2, &lay);
    char ua[32], ub[32];
    int na = 0, nb = 0, next = 0;
    user_of(&lay, 1, "t", &na, ua, sizeof(ua));
    user_of(&lay, 2, "t", &nb, ub, sizeof(ub));
    uint64_t oa = pf_next_id(), ob = pf_next_id();
    assert_int_equal(sk_db_purchase_direct(pf_db, oa, camp, ua, 1, dlock__wall_ms()), 0);
    assert_int_equal(sk_db_purchase_direct(pf_db, ob, camp, ub, 1, dlock__wall_ms()), 0);
    assert_int_equal(sk_db_order_mark_mirrored(pf_db, oa), 0);
    assert_int_equal(sk_db_order_mark_mirrored(pf_db, ob), 0);
    char key[200];
    sk_bucket_key(&lay, 1, "orders", key, sizeof(key));
    const char *grp[] = {"XGROUP", "CREATE", key, SK_PERSIST_GROUP, "0", "MKSTREAM"};
    dlock__reply_free(cmd(6, grp));
    buy_in(&lay, camp, 1, 1, &next, NULL); /* bucket 1 not drained */
    sk_reserve_stats rs = {0};
    assert_int_equal(sk_reserve_finalise(pf_db, pf_rc, camp, 100, &rs), 0);
    assert_int_equal(rs.confirmed, 1);
    sk_order_row row;
    assert_int_equal(sk_db_order_get(pf_db, ob, &row), 0);
    assert_string_equal(row.status, "persisted");
    assert_int_equal(sk_db_order_get(pf_db, oa, &row), 0);
    assert_string_equal(row.status, "pending");
    pf_drain(camp); /* its reserve pass may finalise it already */
    assert_int_equal(sk_reserve_finalise(pf_db, pf_rc, camp, 100, &rs), 0);
    assert_int_equal(sk_db_order_get(pf_db, oa, &row), 0);
    assert_string_equal(row.status, "persisted");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_k3_persister_drains_every_bucket_and_the_guard_stays_per_campaign),
        cmocka_unit_test(test_campaign_layout_columns_are_checked_and_kept),
        cmocka_unit_test(test_layout_from_meta_and_an_unreadable_layout_is_retried),
        cmocka_unit_test(test_barrier_of_one_bucket_mirrors_its_orders_and_leaves_the_others_open),
        cmocka_unit_test(test_all_buckets_due_at_once_open_one_after_the_other),
        cmocka_unit_test(test_handback_to_bucket_0_only_when_every_bucket_is_empty_and_nothing_in_transit),
        cmocka_unit_test(test_tentative_order_waits_for_its_home_bucket_stream_only),
    };
    return cmocka_run_group_tests(tests, pf_setup, pf_teardown);
}
