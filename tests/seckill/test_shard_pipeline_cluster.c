/* test_shard_pipeline_cluster.c: a campaign of K = 3 buckets on a real
 * 3-master Redis Cluster (tests/support/cluster_fixture.c), its buckets
 * placed on the three masters by sk_buckets_place: one persister
 * (redis-cluster:// URL) drains the three streams of three masters into
 * SQLite with the database guard per campaign, the backlog sums the
 * three, and the barrier of one bucket (its meta names another run id)
 * raises the other two masters' buckets and seals once they are
 * persisted through, while they go on selling; then the master of one
 * bucket is killed (kill -9): after its replica's promotion a persister
 * runs that bucket's barrier on the new master while the other two sell,
 * and nothing any bucket sold is refused. */
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
#include "cluster_fixture.h"
#include "db.h"
#include "persist.h"
#include "redis_connect.h"
#include "persist_thread.h"
#include "slot.h"
#include "sk_err.h"
#include "util.h"
#include "promise_fixture.h"

static test_cluster cl;
static dlock__conn *cc; /* through the Cluster router */
static char dir[256], url[400];
/* slot -> "host:port" of its master, from one CLUSTER SLOTS */
static char (*slot_node)[32];

static int node_of(void *ud, unsigned slot, char *buf, size_t len)
{
    (void)ud;
    if (slot >= DLOCK__SLOTS || !slot_node[slot][0]) return -1;
    snprintf(buf, len, "%s", slot_node[slot]);
    return 0;
}

static void slots_read(void)
{
    const char *argv[] = {"CLUSTER", "SLOTS"};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(cc, 2, argv, NULL, &r), 0);
    assert_int_equal(dlock__reply_kind(r), DLOCK__R_ARRAY);
    for (size_t i = 0; i < dlock__reply_count(r); i++) {
        const dlock__reply *e = dlock__reply_at(r, i), *m = dlock__reply_at(e, 2);
        int64_t from = dlock__reply_int(dlock__reply_at(e, 0)), to = dlock__reply_int(dlock__reply_at(e, 1));
        for (int64_t s = from; s <= to && s < DLOCK__SLOTS; s++)
            snprintf(slot_node[s], sizeof(slot_node[s]), "%s:%" PRId64, dlock__reply_str(dlock__reply_at(m, 0), NULL),
                     (int64_t)dlock__reply_int(dlock__reply_at(m, 1)));
    }
    dlock__reply_free(r);
}

static int setup(void **state)
{
    (void)state;
    if (test_cluster_start(&cl, 3, 1) != 0) return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/sk-shardcl-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return -1;
    snprintf(url, sizeof(url), "sqlite://%s/orders.db", dir);
    snprintf(pf_db_url, sizeof(pf_db_url), "%s", url);
    char err[256];
    if (sk_db_open(url, &pf_db, err, sizeof(err)) != 0) return -1;
    slot_node = calloc(DLOCK__SLOTS, sizeof(*slot_node));
    return slot_node && dlock__conn_open_url(cl.url, 5000, &cc, err, sizeof(err)) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock__conn_close(cc);
    sk_db_close(pf_db);
    test_cluster_stop(&cl);
    free(slot_node);
    test_sqlite_dir_remove(dir, NULL);
    return 0;
}

static void drain(const char *camp)
{
    sk_persist_opts o;
    sk_persist_opts_init(&o);
    o.redis_url = cl.url;
    o.database_url = url;
    o.campaign = camp;
    o.block_ms = 50;
    o.pay_timeout_ms = 0;
    o.drain = true;
    char err[256];
    assert_int_equal(sk_persist_run(&o, NULL, err, sizeof(err)), 0);
}

static int64_t meta_epoch(const sk_buckets *lay, int j)
{
    char key[200];
    sk_bucket_key(lay, j, "meta", key, sizeof(key));
    const char *argv[] = {"HGET", key, "epoch"};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(cc, 3, argv, NULL, &r), 0);
    int64_t v = dlock__reply_kind(r) == DLOCK__R_STRING ? strtoll(dlock__reply_str(r, NULL), NULL, 10) : -1;
    dlock__reply_free(r);
    return v;
}

/* n purchases in bucket j by fresh users whose home it is. */
static void buy_in(const sk_buckets *lay, const char *camp, int j, int n, int *next)
{
    for (int i = 0; i < n; (*next)++) {
        char user[32];
        snprintf(user, sizeof(user), "c%d", *next);
        if (sk_home_bucket(user, lay->k) != j) continue;
        pf_tag_buy_on(cc, lay->tag[j], camp, user, 1, NULL);
        i++;
    }
}

static void test_k3_on_three_masters_drains_three_streams_and_barriers_one_bucket(void **state)
{
    (void)state;
    const char *camp = "shcl";
    slots_read();
    sk_buckets lay;
    assert_int_equal(sk_buckets_place(camp, 3, node_of, NULL, &lay), 0);
    int owner[3];
    for (int j = 0; j < 3; j++) {
        owner[j] = test_cluster_master_of_slot(&cl, dlock__key_slot(lay.tag[j], strlen(lay.tag[j])));
        assert_true(owner[j] >= 0);
    }
    assert_true(owner[0] != owner[1] && owner[1] != owner[2] && owner[0] != owner[2]);
    int64_t st[3] = {4, 4, 4}; /* 12 in Redis, 9 in the database */
    pf_seed_sharded_on(cc, camp, 9, 1, 0, &lay, st, true);
    int next = 0;
    for (int j = 0; j < 3; j++) buy_in(&lay, camp, j, 4, &next);
    int64_t pending = -1, lag = -1;
    assert_int_equal(sk_persist_backlog(cc, camp, &pending, &lag), 0);
    assert_int_equal(pending + lag, 12);
    drain(camp);
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 9);
    assert_int_equal(s.orders[SK_ST_REJECTED], 3);
    assert_int_equal(sk_persist_backlog(cc, camp, &pending, &lag), 0);
    assert_int_equal(pending + lag, 0);

    /* bucket 2's master "changed"; buckets 0 and 1 sell on meanwhile */
    char meta2[200];
    sk_bucket_key(&lay, 2, "meta", meta2, sizeof(meta2));
    dlock__reply *r = NULL;
    const char *due[] = {"HSET", meta2, "runid", "0123456789012345678901234567890123456789"};
    assert_int_equal(dlock__conn_cmd(cc, 4, due, NULL, &r), 0);
    dlock__reply_free(r);
    const char *restock[] = {"INCRBY", "{c:shcl}:stock", "2"}; /* and 2 more units in the database */
    assert_int_equal(dlock__conn_cmd(cc, 3, restock, NULL, &r), 0);
    dlock__reply_free(r);
    assert_int_equal(sk_db_stock_set(pf_db, camp, 2), 0);
    buy_in(&lay, camp, 0, 1, &next); /* epoch 1, not persisted yet */
    char rid2[41];
    assert_int_equal(sk_barrier_bucket_run_id(cc, &lay, 2, rid2), 0);
    sk_barrier_run b;
    sk_barrier_run_init(&b, "test");
    assert_int_equal(sk_barrier_step_bucket(pf_db, cc, camp, &lay, 2, rid2, &b), SK_BARRIER_WAITING);
    assert_int_equal(meta_epoch(&lay, 0), 2);
    assert_int_equal(meta_epoch(&lay, 1), 2);
    buy_in(&lay, camp, 0, 1, &next); /* epoch 2 */
    int stp = SK_BARRIER_WAITING;
    for (int i = 0; i < 20 && stp == SK_BARRIER_WAITING; i++) {
        drain(camp);
        stp = sk_barrier_step_bucket(pf_db, cc, camp, &lay, 2, rid2, &b);
    }
    assert_int_equal(stp, SK_BARRIER_OPEN);
    assert_int_equal(meta_epoch(&lay, 2), 2);
    int64_t ep = 0;
    assert_int_equal(sk_db_campaign_epoch(pf_db, camp, &ep), 0);
    assert_int_equal(ep, 2);
    assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 11);
    assert_int_equal(s.stale, 0);
}

static void run_id_wait(const sk_buckets *lay, int j, char out[41])
{
    char key[200];
    sk_bucket_key(lay, j, "meta", key, sizeof(key));
    for (int i = 0; i < 100; i++) {
        const char *argv[] = {"EVAL", "return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')", "1", key};
        dlock__reply *r = NULL;
        if (dlock__conn_cmd(cc, 4, argv, NULL, &r) == 0 && dlock__reply_kind(r) == DLOCK__R_STRING) {
            snprintf(out, 41, "%s", dlock__reply_str(r, NULL));
            dlock__reply_free(r);
            return;
        }
        dlock__reply_free(r);
        dlock__sleep_ms(100);
    }
    fail_msg("bucket %d: no master answers", j);
}

static void meta_field(const sk_buckets *lay, int j, const char *field, char *out, size_t len)
{
    char key[200];
    sk_bucket_key(lay, j, "meta", key, sizeof(key));
    const char *argv[] = {"HGET", key, field};
    dlock__reply *r = NULL;
    out[0] = '\0';
    if (dlock__conn_cmd(cc, 3, argv, NULL, &r) == 0 && dlock__reply_kind(r) == DLOCK__R_STRING)
        snprintf(out, len, "%s", dlock__reply_str(r, NULL));
    dlock__reply_free(r);
}

static void test_kill_of_one_buckets_master_barriers_that_bucket_only(void **state)
{
    (void)state;
    const char *camp = "shfo";
    sk_buckets lay;
    assert_int_equal(sk_buckets_place(camp, 3, node_of, NULL, &lay), 0);
    int64_t st[3] = {10, 10, 10};
    pf_seed_sharded_on(cc, camp, 30, 1, 0, &lay, st, true);
    int next = 1000;
    for (int j = 0; j < 3; j++) buy_in(&lay, camp, j, 3, &next);
    drain(camp);
    dlock__sleep_ms(300); /* the replicas catch up (each holds its master's stream and meta) */
    int dead = test_cluster_master_of_slot(&cl, dlock__key_slot(lay.tag[2], strlen(lay.tag[2])));
    assert_true(dead >= 0);
    char old[41], now[41], got[64];
    run_id_wait(&lay, 2, old);
    test_cluster_kill(&cl, dead);
    assert_true(test_cluster_wait_failover(&cl, dead, 15000) >= 0);
    pt_worker b;
    pt_init(&b, cl.url, url, camp);
    assert_int_equal(pt_start(&b), 0);
    buy_in(&lay, camp, 0, 2, &next); /* the other buckets sell on */
    buy_in(&lay, camp, 1, 2, &next);
    run_id_wait(&lay, 2, now);
    assert_string_not_equal(now, old);
    for (int i = 0; i < 100; i++) {
        meta_field(&lay, 2, "runid", got, sizeof(got));
        if (strcmp(got, now) == 0) break;
        dlock__sleep_ms(100);
    }
    assert_string_equal(got, now); /* bucket 2 opened on its new master */
    for (int j = 0; j < 3; j++) buy_in(&lay, camp, j, 1, &next); /* after the seal: all at its epoch */
    sk_db_campaign_stats s;
    for (int i = 0; i < 100; i++) {
        assert_int_equal(sk_db_campaign_stats_get(pf_db, camp, &s), 0);
        if (s.orders[SK_ST_PERSISTED] + s.stale >= 16) break;
        dlock__sleep_ms(100);
    }
    assert_int_equal(pt_stop(&b), 0);
    assert_int_equal(s.stale, 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 16);
    int64_t ep = 0;
    assert_int_equal(sk_db_campaign_epoch(pf_db, camp, &ep), 0);
    assert_int_equal(ep, 2);
    for (int j = 0; j < 3; j++) assert_int_equal(meta_epoch(&lay, j), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_k3_on_three_masters_drains_three_streams_and_barriers_one_bucket),
        cmocka_unit_test(test_kill_of_one_buckets_master_barriers_that_bucket_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
