/* test_engine_pipeline.c: the whole flash sale through the real engine
 * (purchase.lua via sk_engine) into a SQLite file through a persister:
 * 400 buyers for 100 units -> exactly 100 orders persisted and
 * reconciliation clean; a cancellation gives the unit back in Redis, the
 * engine's local sold-out flag clears and the unit sells again; a campaign
 * created while persisters run is consumed at once (announced); a
 * campaign sharded over K = 3 buckets has every bucket's stream persisted,
 * its database reserve handed back to bucket 0 once Redis sold out in
 * every bucket, and sold by the engine afterwards. */
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
#include <event2/event.h>

#include "db.h"
#include "buckets.h"
#include "engine.h"
#include "layout.h"
#include "lifecycle.h"
#include "persist.h"
#include "redis_connect.h"
#include "persist_thread.h"
#include "reconcile.h"
#include "servers.h"
#include "sk_fixture.h"
#include "sk_err.h"
#include "util.h"

static test_server srv;
static char redis_url[128], db_url[400], dir[256];
static sk_db *db;
static dlock__conn *rc;
static struct event_base *base;
static sk_engine *eng;

typedef struct tally {
    int done, accepted, soldout, other;
    uint64_t last_id;
} tally;

static void on_purchase(const sk_purchase_result *res, void *arg)
{
    tally *t = arg;
    t->done++;
    if (res->err == 0) {
        t->accepted++;
        t->last_id = res->order_id;
    } else if (res->err == SK_ESOLDOUT || res->err == SK_ELIMIT) {
        t->soldout++;
    } else {
        t->other++;
    }
}

static void on_heat(int err, const sk_campaign_info *info, void *arg)
{
    (void)info;
    *(int *)arg = err == 0 ? 1 : -1;
}

static void loop_until(volatile int *flag, int want, int64_t max_ms)
{
    int64_t end = dlock__now_ms() + max_ms;
    while (*flag < want && dlock__now_ms() < end) event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&srv, NULL) != 0) return -1;
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", srv.port);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/sk-engine-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return -1;
    snprintf(db_url, sizeof(db_url), "sqlite://%s/orders.db", dir);
    char err[256];
    if (sk_db_open(db_url, &db, err, sizeof(err)) || dlock__conn_open_url(redis_url, 5000, &rc, err, sizeof(err)))
        return -1;
    base = event_base_new();
    sk_engine_opts o;
    sk_engine_opts_init(&o);
    o.soldout_poll_ms = 50;
    if (sk_engine_new(base, redis_url, &o, &eng, err, sizeof(err)) != 0) return -1;
    int64_t end = dlock__now_ms() + 5000;
    while (!sk_engine_ready(eng) && dlock__now_ms() < end) event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    return sk_engine_ready(eng) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    sk_engine_free(eng);
    event_base_free(base);
    sk_db_close(db);
    dlock__conn_close(rc);
    test_server_stop(&srv);
    test_sqlite_dir_remove(dir, NULL);
    return 0;
}

static void drain(void)
{
    sk_persist_opts o;
    sk_persist_opts_init(&o);
    o.redis_url = redis_url;
    o.database_url = db_url;
    o.campaign = "e2e";
    o.block_ms = 50;
    o.pay_timeout_ms = 0;
    o.drain = true;
    sk_persist_stats st;
    char err[256];
    assert_int_equal(sk_persist_run(&o, &st, err, sizeof(err)), 0);
}

static int diffs(void) { return sk_fx_reconcile(db, rc, "e2e", false); }

static void test_engine_sale_persists_exactly_the_stock_and_restocks_once(void **state)
{
    (void)state;
    sk_campaign c = {.stock = 100, .per_user_limit = 1, .price_cents = 100};
    snprintf(c.id, sizeof(c.id), "e2e");
    snprintf(c.title, sizeof(c.title), "end to end");
    assert_int_equal(sk_db_campaign_create(db, &c), 0); /* the engine's job in seckilld */
    sk_campaign d = {.stock = 100, .per_user_limit = 1, .price_cents = 100};
    snprintf(d.id, sizeof(d.id), "e2e");
    snprintf(d.title, sizeof(d.title), "end to end");
    d.starts_at_ms = 0;
    d.ends_at_ms = dlock__wall_ms() + 3600 * 1000;
    int heated = 0;
    assert_int_equal(sk_engine_campaign_heat(eng, &d, SK_HEAT_CREATE, on_heat, &heated), 0);
    loop_until(&heated, 1, 5000);
    assert_int_equal(heated, 1);

    tally t = {0};
    int sent = 0;
    for (int i = 0; i < 400; i++) {
        char user[32];
        snprintf(user, sizeof(user), "buyer%d", i);
        int r = sk_engine_purchase(eng, "e2e", user, 1, NULL, NULL, on_purchase, &t);
        if (r == 0) sent++;
        else t.soldout += r == SK_ESOLDOUT;
        if (i % 50 == 49) loop_until(&t.done, sent, 5000);
    }
    loop_until(&t.done, sent, 5000);
    assert_int_equal(t.done, sent);
    assert_int_equal(t.accepted, 100);
    assert_int_equal(t.other, 0);

    drain();
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(db, "e2e", &s), 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 100);
    assert_int_equal(s.remaining, 0);
    assert_int_equal(diffs(), 0);

    /* cancel one: the unit returns once and sells again through the engine */
    assert_int_equal(sk_order_cancel(db, rc, t.last_id, "test"), 0);
    assert_int_equal(sk_order_cancel(db, rc, t.last_id, "test"), SK_ECONFLICT);
    assert_int_equal(diffs(), 0);
    tally t2 = {0};
    int64_t end = dlock__now_ms() + 3000;
    while (t2.accepted == 0 && dlock__now_ms() < end) {
        int target = t2.done + 1;
        if (sk_engine_purchase(eng, "e2e", "latecomer", 1, NULL, NULL, on_purchase, &t2) == 0)
            loop_until(&t2.done, target, 2000);
        else
            dlock__sleep_ms(20); /* locally sold out until the stock poll sees the restock */
        if (t2.accepted == 0) {
            struct timeval tv = {0, 20000};
            event_base_loopexit(base, &tv);
            event_base_dispatch(base);
        }
    }
    assert_int_equal(t2.accepted, 1);
    drain();
    assert_int_equal(sk_db_campaign_stats_get(db, "e2e", &s), 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 100);
    assert_int_equal(s.orders[SK_ST_CANCELLED], 1);
    assert_int_equal(s.remaining, 0);
    assert_int_equal(diffs(), 0);
}

/* Two persisters on every campaign (defaults: discovery every 2 s, BLOCK
 * 500 ms) are idle when a campaign is created through the engine and its
 * first order decided: the order is in the database well within a second
 * (the announcement wakes them; without it discovery takes 1.4-2 s more). */
static void test_new_campaign_is_consumed_at_once(void **state)
{
    (void)state;
    pt_worker p[2];
    for (int i = 0; i < 2; i++) {
        pt_init(&p[i], redis_url, db_url, NULL);
        sk_persist_opts defaults; /* as the comment above says: the defaults */
        sk_persist_opts_init(&defaults);
        p[i].o.block_ms = defaults.block_ms;
        p[i].o.sweep_interval_ms = defaults.sweep_interval_ms;
        assert_int_equal(pt_start(&p[i]), 0);
    }
    dlock__sleep_ms(600); /* both discovered what exists and block on their streams */
    int64_t t0 = dlock__now_ms();
    sk_campaign c = {.stock = 10, .per_user_limit = 1, .price_cents = 1, .ends_at_ms = dlock__wall_ms() + 3600000};
    snprintf(c.id, sizeof(c.id), "fresh");
    snprintf(c.title, sizeof(c.title), "announced");
    assert_int_equal(sk_db_campaign_create(db, &c), 0);
    int heated = 0;
    assert_int_equal(sk_engine_campaign_heat(eng, &c, SK_HEAT_CREATE, on_heat, &heated), 0);
    loop_until(&heated, 1, 5000);
    assert_int_equal(heated, 1);
    tally t = {0};
    assert_int_equal(sk_engine_purchase(eng, "fresh", "first", 1, NULL, NULL, on_purchase, &t), 0);
    loop_until(&t.done, 1, 5000);
    assert_int_equal(t.accepted, 1);
    int64_t took = -1;
    for (int64_t end = t0 + 5000; dlock__now_ms() < end; dlock__sleep_ms(2))
        if (sk_db_order_get(db, t.last_id, NULL) == 0) {
            took = dlock__now_ms() - t0;
            break;
        }
    for (int i = 0; i < 2; i++) pt_stop(&p[i]);
    fprintf(stderr, "new campaign: first order persisted %" PRId64 " ms after the create\n", took);
    assert_true(took >= 0);
    assert_true(took < 1000);
}

/* A persister on the sharded campaign until bg_stop (sweeps every 50 ms). */
typedef pt_worker bg;

static void bg_start(bg *b, const char *camp)
{
    pt_init(b, redis_url, db_url, camp);
    b->o.sweep_interval_ms = 50;
    assert_int_equal(pt_start(b), 0);
}

static void bg_stop(bg *b) { assert_int_equal(pt_stop(b), 0); }

/* Buyers <prefix><from..to) try once each (in chunks of 50). */
static void buyers(const char *camp, const char *prefix, int from, int to, tally *t)
{
    int sent = t->done;
    for (int i = from; i < to; i++) {
        char user[32];
        snprintf(user, sizeof(user), "%s%d", prefix, i);
        int r = sk_engine_purchase(eng, camp, user, 1, NULL, NULL, on_purchase, t);
        if (r == 0) sent++;
        else if (r == SK_ESOLDOUT) t->soldout++;
        else t->other++;
        if (i % 50 == 49) loop_until(&t->done, sent, 5000);
    }
    loop_until(&t->done, sent, 5000);
    assert_int_equal(t->done, sent);
}

static int64_t stock_of(const sk_buckets *lay, int j)
{
    char key[200];
    sk_bucket_key(lay, j, "stock", key, sizeof(key));
    const char *argv[] = {"GET", key};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(rc, 2, argv, NULL, &r), 0);
    int64_t v = dlock__reply_kind(r) == DLOCK__R_STRING ? strtoll(dlock__reply_str(r, NULL), NULL, 10) : -1;
    dlock__reply_free(r);
    return v;
}

/* The real engine sells a K = 3 campaign (stock 36, 6 of them the
 * database reserve) to 150 buyers: Redis sells its 30 across the buckets
 * (transfers: none stranded), a persister running beside it persists
 * them from the three streams, sees every bucket empty with no transfer
 * in flight and hands the 6 reserve units to bucket 0; the engine sells
 * them (moving them to the other buckets as needed): 36 persisted, once
 * each, and the database sold out. */
static void test_engine_k3_sale_persists_every_bucket_and_sells_the_reserve_handed_back(void **state)
{
    (void)state;
    sk_campaign *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    snprintf(d->id, sizeof(d->id), "e2e3");
    snprintf(d->title, sizeof(d->title), "sharded end to end");
    d->stock = 36;
    d->per_user_limit = 1;
    d->db_reserve = 6;
    d->shards = 3;
    d->ends_at_ms = dlock__wall_ms() + 3600 * 1000;
    assert_int_equal(sk_engine_place_buckets(eng, d), 0);
    assert_int_equal(sk_db_campaign_create(db, d), 0);
    int heated = 0;
    assert_int_equal(sk_engine_campaign_heat(eng, d, SK_HEAT_CREATE, on_heat, &heated), 0);
    loop_until(&heated, 1, 5000);
    assert_int_equal(heated, 1);
    sk_buckets lay;
    assert_int_equal(sk_layout_of_def(d->id, d->shards, d->bucket_tags, &lay), 0);
    bg b;
    bg_start(&b, "e2e3");
    tally t = {0};
    buyers("e2e3", "b", 0, 150, &t);
    assert_int_equal(t.accepted, 30);
    assert_int_equal(t.other, 0);
    sk_db_campaign_stats s;
    int64_t end = dlock__now_ms() + 10000;
    do { /* the persister hands the reserve back once it saw Redis sold out */
        struct timeval tv = {0, 20000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
        assert_int_equal(sk_db_campaign_stats_get(db, "e2e3", &s), 0);
    } while (!s.handback.done && dlock__now_ms() < end);
    assert_true(s.handback.done);
    assert_int_equal(s.handback.units, 6);
    assert_int_equal(s.reserve_remaining, 0);
    assert_int_equal(stock_of(&lay, 0) + stock_of(&lay, 1) + stock_of(&lay, 2), 6);
    for (int round = 0; round < 40 && t.accepted < 36; round++) {
        buyers("e2e3", "late", 10 * round, 10 * round + 10, &t); /* the engine's sold-out flag clears by its poll */
        struct timeval tv = {0, 60000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
    }
    assert_int_equal(t.accepted, 36);
    bg_stop(&b);
    sk_persist_opts o;
    sk_persist_opts_init(&o);
    o.redis_url = redis_url;
    o.database_url = db_url;
    o.campaign = "e2e3";
    o.block_ms = 50;
    o.pay_timeout_ms = 0;
    o.drain = true;
    char err[256];
    assert_int_equal(sk_persist_run(&o, NULL, err, sizeof(err)), 0);
    assert_int_equal(sk_db_campaign_stats_get(db, "e2e3", &s), 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 36);
    assert_int_equal(s.orders[SK_ST_REJECTED], 0);
    assert_int_equal(s.remaining, 0);
    int64_t pending = -1, lag = -1;
    assert_int_equal(sk_persist_backlog(rc, "e2e3", &pending, &lag), 0);
    assert_int_equal(pending + lag, 0);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_sale_persists_exactly_the_stock_and_restocks_once),
        cmocka_unit_test(test_new_campaign_is_consumed_at_once),
        cmocka_unit_test(test_engine_k3_sale_persists_every_bucket_and_sells_the_reserve_handed_back),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
