/* test_upgrade.c: a rolling upgrade, with real processes. An instance of
 * the previous release decides with its own purchase.lua (its text is the
 * fixture fixtures/purchase_1ae8af2.lua, as that release shipped it): an
 * order hash per order, the Idempotency-Key answer as a string, the stream
 * entry of eight fields. This release's engine decides beside it on the
 * same Redis. Then: each replays the other's Idempotency-Key answers
 * (scoped to the user), GET finds orders of both formats, the persister
 * drains both entry formats into SQLite and confirms both answers,
 * reconcile finds no difference, and a barrier on the campaign takes no
 * order twice and applies the releases the master lost to both formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "barrier.h"
#include "db.h"
#include "dlock/dlock.h"
#include "engine.h"
#include "lifecycle.h"
#include "util.h"
#include "promise_fixture.h"

static char *old_lua; /* the previous release's purchase.lua */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static dlock__reply *cmd(int argc, const char **argv)
{
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(pf_rc, argc, argv, NULL, &r), 0);
    if (dlock__reply_kind(r) == DLOCK__R_ERROR) fail_msg("redis %s: %s", argv[0], dlock__reply_str(r, NULL));
    return r;
}

static void str_of(const char *c, const char *key, const char *field, char *out, size_t len)
{
    const char *argv[] = {c, key, field};
    dlock__reply *r = cmd(field ? 3 : 2, argv);
    bool text = dlock__reply_kind(r) == DLOCK__R_STRING || dlock__reply_kind(r) == DLOCK__R_STATUS;
    snprintf(out, len, "%s", text ? dlock__reply_str(r, NULL) : "");
    dlock__reply_free(r);
}

static char run_id[41];

/* One purchase through the previous release's script, as its engine sent
 * it: {code, value, order id}. */
static int old_buy(const char *user, const char *idem, uint64_t *oid_out)
{
    char k[8][160], oid[24];
    uint64_t id = pf_next_id();
    static const char *const sfx[4] = {"meta", "stock", "buyers", "orders"};
    for (int i = 0; i < 4; i++) snprintf(k[i], sizeof(k[i]), "{c:up}:%s", sfx[i]);
    snprintf(k[4], sizeof(k[4]), "{c:up}:idem:%s", idem ? idem : "");
    snprintf(k[5], sizeof(k[5]), "{c:up}:order:%" PRIu64, id);
    snprintf(k[6], sizeof(k[6]), "{c:up}:rl:u:%s", user);
    snprintf(k[7], sizeof(k[7]), "{c:up}:rl:ip:");
    snprintf(oid, sizeof(oid), "%" PRIu64, id);
    const char *argv[] = {"EVAL", old_lua, "8", k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7],
                          "up", "1", "0", "1000", "0", "1000", "86400000", "604800000", run_id, "1",
                          oid, user, "1", idem ? idem : "", "", ""};
    dlock__reply *r = cmd(27, argv);
    assert_int_equal(dlock__reply_kind(r), DLOCK__R_ARRAY);
    int code = (int)dlock__reply_int(dlock__reply_at(r, 0));
    *oid_out = strtoull(dlock__reply_str(dlock__reply_at(r, 2), NULL), NULL, 10);
    dlock__reply_free(r);
    return code;
}

/* ---- this release's engine ---------------------------------------------- */

static struct event_base *base;
static sk_engine *eng;
static int done;

static void run_until(int target)
{
    int64_t deadline = dlock__now_ms() + 5000;
    while (done < target && dlock__now_ms() < deadline) event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(done, target);
}

static void on_buy(const sk_purchase_result *r, void *arg)
{
    *(sk_purchase_result *)arg = *r;
    done++;
}

static sk_purchase_result new_buy(const char *user, const char *idem)
{
    sk_purchase_result r;
    memset(&r, 0, sizeof(r));
    int want = done + 1;
    assert_int_equal(sk_engine_purchase(eng, "up", user, 1, idem, "", on_buy, &r), 0);
    run_until(want);
    return r;
}

typedef struct got_order {
    int err;
    sk_order_info o;
} got_order;

static void on_order(int err, const sk_order_info *o, void *arg)
{
    got_order *g = arg;
    g->err = err;
    if (o) g->o = *o;
    done++;
}

static void expect_order_status(uint64_t id, const char *user, const char *status)
{
    got_order g;
    memset(&g, 0, sizeof(g));
    int want = done + 1;
    assert_int_equal(sk_engine_order_get(eng, id, "up", on_order, &g), 0);
    run_until(want);
    assert_int_equal(g.err, 0);
    assert_string_equal(g.o.campaign, "up");
    assert_string_equal(g.o.user, user);
    assert_int_equal(g.o.qty, 1);
    assert_string_equal(g.o.status, status);
}

static void expect_order(uint64_t id, const char *user) { expect_order_status(id, user, "accepted"); }

/* Cancels order id (database and Redis), then undoes the Redis half by
 * hand, as a master that lost the release would hold it. */
static void cancel_lost_by_master(uint64_t id, const char *user)
{
    assert_int_equal(sk_order_cancel(pf_db, pf_rc, id, "test"), 0);
    char oid[24];
    snprintf(oid, sizeof(oid), "%" PRIu64, id);
    const char *srem[] = {"SREM", "{c:up}:released", oid};
    const char *decr[] = {"DECRBY", "{c:up}:stock", "1"};
    const char *buyer[] = {"HINCRBY", "{c:up}:buyers", user, "1"};
    dlock__reply_free(cmd(3, srem));
    dlock__reply_free(cmd(3, decr));
    dlock__reply_free(cmd(4, buyer));
    char key[64], field[160];
    snprintf(key, sizeof(key), "{c:up}:order:%s", oid);
    const char *hash[] = {"HSET", key, "status", "accepted"};
    str_of("TYPE", key, NULL, field, sizeof(field));
    if (strcmp(field, "hash") == 0) dlock__reply_free(cmd(4, hash));
    snprintf(field, sizeof(field), "%s\n1", user);
    const char *st[] = {"HSET", "{c:up}:order_status", oid, field};
    str_of("HGET", "{c:up}:order_status", oid, key, sizeof(key));
    if (key[0]) dlock__reply_free(cmd(4, st));
}

static void test_both_releases_on_one_redis(void **state)
{
    (void)state;
    old_lua = slurp(UPGRADE_FIXTURE);
    assert_non_null(old_lua);
    pf_seed("up", 20, 1, 0);
    const char *info[] = {"INFO", "server"};
    dlock__reply *r = cmd(2, info);
    snprintf(run_id, sizeof(run_id), "%.40s", strstr(dlock__reply_str(r, NULL), "run_id:") + 7);
    dlock__reply_free(r);
    char end[24];
    snprintf(end, sizeof(end), "%" PRId64, dlock__wall_ms() + 3600000);
    const char *h[] = {"HSET", "{c:up}:meta", "ends_at_ms", end};
    dlock__reply_free(cmd(4, h));

    /* the previous release decides first: an order hash, a string answer */
    uint64_t o_a, o_b, x;
    assert_int_equal(old_buy("ua", "ko", &o_a), 0);
    assert_int_equal(old_buy("ub", NULL, &o_b), 0);

    base = event_base_new();
    sk_engine_opts o;
    sk_engine_opts_init(&o);
    char err[128];
    assert_int_equal(sk_engine_new(base, pf_redis_url, &o, &eng, err, sizeof(err)), 0);
    int64_t deadline = dlock__now_ms() + 3000;
    while (!sk_engine_ready(eng) && dlock__now_ms() < deadline) event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    assert_true(sk_engine_ready(eng));

    /* this release replays the old answer to its user ... */
    sk_purchase_result p = new_buy("ua", "ko");
    assert_int_equal(p.err, 0);
    assert_true(p.replay);
    assert_int_equal(p.order_id, o_a);
    /* ... decides another user's use of the key on its own (no WRONGTYPE:
     * the old name stays a string) ... */
    sk_purchase_result pc = new_buy("uc", "ko");
    assert_int_equal(pc.err, 0);
    assert_false(pc.replay);
    /* ... and writes a new key's answer where the old release reads it */
    sk_purchase_result pe = new_buy("ue", "kn");
    assert_int_equal(pe.err, 0);
    assert_false(pe.replay);
    sk_purchase_result pd = new_buy("ud", NULL);
    assert_int_equal(pd.err, 0);
    assert_int_equal(old_buy("ue", "kn", &x), 1); /* the old release replays it */
    assert_int_equal(x, pe.order_id);
    assert_int_equal(old_buy("ua", "ko", &x), 1);
    assert_int_equal(x, o_a);
    assert_int_equal(old_buy("ud", NULL, &x), 3); /* the limit counts orders of both */
    sk_purchase_result pb = new_buy("ub", NULL);
    assert_int_equal(pb.err, SK_ELIMIT);
    char t[16];
    str_of("TYPE", "{c:up}:idem:ko", NULL, t, sizeof(t));
    assert_string_equal(t, "string");
    /* a key of another type under the old name (no release wrote one) fails
     * nothing and is left alone: the answer goes under the user's name */
    const char *hk[] = {"HSET", "{c:up}:idem:kh", "ux", "ux\n1\n1\n1"};
    dlock__reply_free(cmd(4, hk));
    sk_purchase_result py = new_buy("uy", "kh");
    assert_int_equal(py.err, 0);
    assert_false(py.replay);
    str_of("TYPE", "{c:up}:idem:kh", NULL, t, sizeof(t));
    assert_string_equal(t, "hash");
    char ans[128], wans[128];
    str_of("GET", "{c:up}:iu:uy/kh", NULL, ans, sizeof(ans));
    snprintf(wans, sizeof(wans), "uy\n%" PRIu64 "\n1\n", py.order_id);
    assert_memory_equal(ans, wans, strlen(wans));

    /* GET finds an order of either format */
    expect_order(o_a, "ua");
    expect_order(o_b, "ub");
    expect_order(pc.order_id, "uc");
    expect_order(pd.order_id, "ud");

    /* the persister drains both entry formats into SQLite */
    pf_drain("up");
    const struct {
        uint64_t id;
        const char *user, *idem;
    } want[] = {{o_a, "ua", "ko"}, {o_b, "ub", ""}, {pc.order_id, "uc", "ko"}, {pe.order_id, "ue", "kn"},
                {pd.order_id, "ud", ""}};
    int64_t now = dlock__wall_ms();
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        sk_order_row row;
        assert_int_equal(sk_db_order_get(pf_db, want[i].id, &row), 0);
        assert_string_equal(row.campaign, "up");
        assert_string_equal(row.user, want[i].user);
        assert_int_equal(row.qty, 1);
        assert_string_equal(row.status, "persisted");
        assert_string_equal(row.path, "redis");
        assert_string_equal(row.idem, want[i].idem);
        assert_true(row.created_ms > now - 60000 && row.created_ms <= now);
    }
    /* both answers confirmed, so a replay is 201 whatever the replicas */
    char v[128];
    str_of("GET", "{c:up}:idem:ko", NULL, v, sizeof(v));
    assert_true(strlen(v) > 2 && strcmp(v + strlen(v) - 2, "\nc") == 0);
    str_of("GET", "{c:up}:iu:uc/ko", NULL, v, sizeof(v));
    assert_true(strlen(v) > 2 && strcmp(v + strlen(v) - 2, "\nc") == 0);
    p = new_buy("uc", "ko");
    assert_true(p.replay);
    assert_false(p.pending);
    assert_int_equal(p.order_id, pc.order_id);
    assert_int_equal(pf_reconcile("up"), 0);

    /* a barrier (as after a failover) takes no order of either format again,
     * and applies again the releases the master lost, to either format */
    cancel_lost_by_master(o_b, "ub");
    cancel_lost_by_master(pd.order_id, "ud");
    expect_order_status(o_b, "ub", "accepted");
    int64_t stock = pf_redis_int("GET", "up", "stock", NULL);
    assert_int_equal(stock, 20 - 6);
    assert_int_equal(sk_barrier_force(pf_rc, "up", "tester"), 0);
    sk_barrier_run run;
    sk_barrier_run_init(&run, "tester");
    int st = SK_BARRIER_WAITING;
    for (int i = 0; i < 100 && st == SK_BARRIER_WAITING; i++) st = sk_barrier_step(pf_db, pf_rc, "up", run_id, &run);
    assert_int_equal(st, SK_BARRIER_OPEN);
    assert_int_equal(run.mirrored, 0);
    assert_int_equal(run.given_back, 2);
    assert_int_equal(pf_redis_int("GET", "up", "stock", NULL), stock + 2);
    assert_int_equal(pf_redis_int("HGET", "up", "buyers", "ua"), 1);
    assert_int_equal(pf_redis_int("HGET", "up", "buyers", "ud"), 0);
    assert_int_equal(pf_redis_int("HGET", "up", "buyers", "ub"), 0);
    expect_order_status(o_b, "ub", "cancelled");
    expect_order_status(pd.order_id, "ud", "cancelled");
    assert_int_equal(pf_reconcile("up"), 0);

    sk_engine_free(eng);
    event_base_free(base);
    free(old_lua);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_both_releases_on_one_redis)};
    return cmocka_run_group_tests(tests, pf_setup, pf_teardown);
}
