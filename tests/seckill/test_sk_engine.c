/* test_sk_engine.c: the engine without HTTP against a real redis-server:
 * coalesced batches answer exactly like one-by-one calls on the same
 * recorded request sequence (same user twice in a batch, replays, key
 * conflicts, limits, sell-out); the local sold-out flag answers without
 * Redis and clears when stock comes back; a frozen Redis (SIGSTOP) gives
 * "outcome unknown" within the reply deadline and the engine recovers;
 * every answer carries its own value and the purchase as sent.
 * With DLOCK_TEST_CLUSTER=1 (test_sk_engine_cluster) the same cases run on
 * a 3-master + 3-replica Cluster through a redis-cluster:// URL, except
 * the one that freezes the single server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "dlock/dlock.h"
#include "engine.h"
#include "lib_target.h"
#include "sk_fixture.h"
#include "util.h"

static sk_engine *engine(struct event_base *base, int max_batch, int64_t timeout_ms)
{
    sk_engine_opts o;
    sk_engine_opts_init(&o);
    o.max_batch = max_batch;
    o.soldout_poll_ms = 100;
    if (timeout_ms) o.command_timeout_ms = timeout_ms;
    o.reconnect_max_ms = 200;
    return sk_fx_engine(base, &o, 3000);
}

static void heat(struct event_base *base, sk_engine *e, const char *id, int64_t stock, int64_t limit)
{
    sk_campaign d;
    sk_fx_campaign(&d, id, stock, limit);
    assert_int_equal(sk_fx_heat(base, e, &d, SK_HEAT_CREATE, 3000, NULL), 0);
}

typedef struct rec {
    char user[16];
    int qty;
    char idem[16];
} rec;

enum { NREC = 400 };

static void make_sequence(rec *seq)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < NREC; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        snprintf(seq[i].user, sizeof(seq[i].user), "u%d", (int)(x % 60));
        seq[i].qty = 1 + (int)((x >> 8) % 3);
        seq[i].idem[0] = '\0';
        if ((x >> 16) % 4 == 0) snprintf(seq[i].idem, sizeof(seq[i].idem), "k%d", (int)((x >> 20) % 25));
        if (i % 17 == 0 && i) {
            /* the same user twice in a row: lands in one batch */
            seq[i] = seq[i - 1];
            seq[i].idem[0] = '\0';
        }
    }
}

static void run_sequence(struct event_base *base, sk_engine *e, const char *campaign, const rec *seq,
                         sk_fx_slot *out)
{
    sk_fx_answered = 0;
    int sent = 0;
    for (int i = 0; i < NREC; i++) {
        int rc = sk_engine_purchase(e, campaign, seq[i].user, seq[i].qty, seq[i].idem[0] ? seq[i].idem : NULL,
                                    NULL, sk_fx_on_result, &out[i]);
        if (rc) {
            out[i].r.err = rc; /* answered at once (local sold-out flag) */
            out[i].done = 1;
        } else {
            sent++;
        }
    }
    sk_fx_run_until(base, &sk_fx_answered, sent, 10000);
    assert_int_equal(sk_fx_answered, sent);
}

/* Index of the first request whose accepted order id is id (replays point at it). */
static int origin(const sk_fx_slot *s, uint64_t id)
{
    for (int i = 0; i < NREC; i++)
        if (s[i].r.err == 0 && !s[i].r.replay && s[i].r.order_id == id) return i;
    return -1;
}

static void test_coalesced_and_one_by_one_give_identical_answers(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    sk_engine *batched = engine(base, 64, 0), *single = engine(base, 1, 0);
    heat(base, batched, "co_a", 150, 3);
    heat(base, batched, "co_b", 150, 3);
    rec *seq = calloc(NREC, sizeof(rec));
    sk_fx_slot *a = calloc(NREC, sizeof(sk_fx_slot)), *b = calloc(NREC, sizeof(sk_fx_slot));
    make_sequence(seq);
    run_sequence(base, batched, "co_a", seq, a);
    run_sequence(base, single, "co_b", seq, b);
    int accepted = 0, replays = 0, limits = 0, soldout = 0, conflicts = 0, shared = 0;
    for (int i = 0; i < NREC; i++) {
        if (a[i].r.err != b[i].r.err || a[i].r.replay != b[i].r.replay || a[i].r.qty != b[i].r.qty ||
            a[i].r.remaining != b[i].r.remaining || a[i].r.value != b[i].r.value)
            fail_msg("request %d (%s qty %d key %s) differs: batched err %d rem %lld, one-by-one err %d rem %lld",
                     i, seq[i].user, seq[i].qty, seq[i].idem, a[i].r.err, (long long)a[i].r.remaining,
                     b[i].r.err, (long long)b[i].r.remaining);
        if (a[i].r.replay) {
            assert_int_equal(origin(a, a[i].r.order_id), origin(b, b[i].r.order_id));
            assert_true(origin(a, a[i].r.order_id) >= 0);
            replays++;
        }
        accepted += a[i].r.err == 0 && !a[i].r.replay;
        limits += a[i].r.err == SK_ELIMIT;
        soldout += a[i].r.err == SK_ESOLDOUT;
        conflicts += a[i].r.err == SK_EIDEMPOTENCY;
        /* a key another user sent before: decided on its own (scoped to user and campaign) */
        bool other = false;
        for (int j = 0; j < i && seq[i].idem[0]; j++)
            other |= strcmp(seq[j].idem, seq[i].idem) == 0 && strcmp(seq[j].user, seq[i].user) != 0;
        if (other && !a[i].r.replay) shared++;
    }
    print_message("accepted %d replays %d limits %d soldout %d shared keys %d\n", accepted, replays, limits, soldout,
                  shared);
    /* the sequence exercised every branch; a key is never another user's */
    assert_true(accepted > 20 && replays > 0 && limits > 0 && soldout > 0 && shared > 0);
    assert_int_equal(conflicts, 0);
    sk_engine_stats st;
    sk_engine_get_stats(batched, &st);
    uint64_t multi = 0;
    for (int k = 1; k < SK_STAT_BATCH_BUCKETS; k++) multi += st.batches[k];
    assert_true(multi > 0); /* batches of more than one really happened */
    sk_engine_get_stats(single, &st);
    for (int k = 1; k < SK_STAT_BATCH_BUCKETS; k++) assert_int_equal(st.batches[k], 0);
    free(seq);
    free(a);
    free(b);
    sk_engine_free(batched);
    sk_engine_free(single);
    event_base_free(base);
}

static void test_local_sold_out_flag_clears_when_stock_returns(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    sk_engine *e = engine(base, 64, 0);
    heat(base, e, "flag", 1, 1);
    sk_fx_slot s[2];
    memset(s, 0, sizeof(s));
    sk_fx_answered = 0;
    assert_int_equal(sk_engine_purchase(e, "flag", "a", 1, NULL, NULL, sk_fx_on_result, &s[0]), 0);
    sk_fx_run_until(base, &sk_fx_answered, 1, 3000);
    assert_int_equal(s[0].r.err, 0);
    assert_int_equal(s[0].r.remaining, 0);
    /* known sold out: answered without a round trip */
    assert_int_equal(sk_engine_purchase(e, "flag", "b", 1, NULL, NULL, sk_fx_on_result, &s[1]), SK_ESOLDOUT);
    sk_engine_stats st;
    sk_engine_get_stats(e, &st);
    assert_int_equal(st.soldout_local, 1);
    /* a cancellation gives a unit back (as the release script does) */
    const char *argv[] = {"INCRBY", "{c:flag}:stock", "1"};
    assert_int_equal(lt_cmd(&sk_fx_redis, NULL, 0, 3, argv), 0);
    int64_t deadline = dlock__now_ms() + 3000;
    int rc;
    do {
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        rc = sk_engine_purchase(e, "flag", "b", 1, NULL, NULL, sk_fx_on_result, &s[1]);
    } while (rc == SK_ESOLDOUT && dlock__now_ms() < deadline);
    assert_int_equal(rc, 0);
    sk_fx_run_until(base, &sk_fx_answered, 2, 3000);
    assert_int_equal(s[1].r.err, 0);
    sk_engine_free(e);
    event_base_free(base);
}

static void test_frozen_redis_is_outcome_unknown_then_recovers(void **state)
{
    (void)state;
    LT_STANDALONE_ONLY("it freezes the one server (SIGSTOP)");
    struct event_base *base = event_base_new();
    sk_engine *e = engine(base, 64, 300);
    heat(base, e, "frz", 100, 5);
    sk_fx_slot s[3];
    memset(s, 0, sizeof(s));
    sk_fx_answered = 0;
    test_server_pause(&sk_fx_redis, true);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(sk_engine_purchase(e, "frz", "a", 1, NULL, NULL, sk_fx_on_result, &s[0]), 0);
    sk_fx_run_until(base, &sk_fx_answered, 1, 3000);
    int64_t took = dlock__now_ms() - t0;
    assert_int_equal(s[0].r.err, DLOCK_EUNKNOWN);
    assert_true(took >= 250 && took < 1500);
    /* while it is away, requests fail fast */
    int rc = sk_engine_purchase(e, "frz", "a", 1, NULL, NULL, sk_fx_on_result, &s[1]);
    assert_int_equal(rc, SK_EUNAVAIL);
    test_server_pause(&sk_fx_redis, false);
    int64_t deadline = dlock__now_ms() + 5000;
    while (!sk_engine_ready(e) && dlock__now_ms() < deadline) event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    assert_true(sk_engine_ready(e));
    assert_int_equal(sk_engine_purchase(e, "frz", "b", 1, NULL, NULL, sk_fx_on_result, &s[2]), 0);
    sk_fx_run_until(base, &sk_fx_answered, 2, 3000);
    assert_int_equal(s[2].r.err, 0);
    sk_engine_stats st;
    sk_engine_get_stats(e, &st);
    assert_true(st.reconnects >= 1);
    assert_true(st.redis_errors >= 1);
    sk_engine_free(e);
    event_base_free(base);
}

/* SCRIPT FLUSH under a running engine: the batch (sent as formatted RESP)
 * meets NOSCRIPT and is sent again with the script's source, arguments
 * intact: the replay under the same Idempotency-Key finds the first order. */
static void test_a_batch_after_script_flush_is_sent_again_with_the_source(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    sk_engine *e = engine(base, 64, 0);
    heat(base, e, "fl", 10, 2);
    sk_fx_slot s[3];
    memset(s, 0, sizeof(s));
    sk_fx_answered = 0;
    assert_int_equal(sk_engine_purchase(e, "fl", "buyer-1", 1, "key-1", "10.0.0.1", sk_fx_on_result, &s[0]), 0);
    sk_fx_run_until(base, &sk_fx_answered, 1, 3000);
    assert_int_equal(s[0].r.err, 0);
    const char *flush[] = {"SCRIPT", "FLUSH"};
    assert_int_equal(lt_cmd(&sk_fx_redis, NULL, 0, 2, flush), 0);
    assert_int_equal(sk_engine_purchase(e, "fl", "buyer-1", 1, "key-1", "10.0.0.1", sk_fx_on_result, &s[1]), 0);
    assert_int_equal(sk_engine_purchase(e, "fl", "buyer-2", 2, NULL, NULL, sk_fx_on_result, &s[2]), 0);
    sk_fx_run_until(base, &sk_fx_answered, 3, 3000);
    assert_int_equal(s[1].r.err, 0);
    assert_true(s[1].r.replay);
    assert_true(s[1].r.order_id == s[0].r.order_id);
    assert_int_equal(s[2].r.err, 0);
    assert_int_equal(s[2].r.qty, 2);
    assert_int_equal(s[2].r.remaining, 7);
    sk_engine_free(e);
    event_base_free(base);
}

/* Each answer of a batch carries its own value, and the order id and
 * quantity of the purchase as sent (the script returns code + 16 * value
 * for them): a refusal's value, an acceptance's remaining stock; and a
 * start too far off to write that way (past 2^49 ms, which only a direct
 * caller can set) still answers "not started", its value saturated. */
static void test_answers_carry_their_values_and_the_purchase_as_sent(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    sk_engine *e = engine(base, 64, 0);
    heat(base, e, "vals", 10, 3);
    sk_campaign d;
    sk_fx_campaign(&d, "far", 10, 3);
    d.starts_at_ms = INT64_C(1) << 60;
    d.ends_at_ms = d.starts_at_ms + 1000;
    assert_int_equal(sk_fx_heat(base, e, &d, SK_HEAT_CREATE, 3000, NULL), 0);
    sk_fx_slot s[4];
    memset(s, 0, sizeof(s));
    sk_fx_answered = 0;
    assert_int_equal(sk_engine_purchase(e, "vals", "a", 2, NULL, NULL, sk_fx_on_result, &s[0]), 0);
    assert_int_equal(sk_engine_purchase(e, "vals", "a", 2, NULL, NULL, sk_fx_on_result, &s[1]), 0);
    assert_int_equal(sk_engine_purchase(e, "vals", "b", 3, NULL, NULL, sk_fx_on_result, &s[2]), 0);
    assert_int_equal(sk_engine_purchase(e, "far", "a", 1, NULL, NULL, sk_fx_on_result, &s[3]), 0);
    sk_fx_run_until(base, &sk_fx_answered, 4, 3000);
    assert_int_equal(s[0].r.err, 0);
    assert_int_equal(s[0].r.remaining, 8);
    assert_int_equal(s[0].r.qty, 2);
    assert_true(s[0].r.order_id != 0);
    assert_int_equal(s[1].r.err, SK_ELIMIT); /* holds 2 of 3: 2 more is over */
    assert_int_equal(s[1].r.value, 2);
    assert_int_equal(s[1].r.qty, 2);
    assert_int_equal(s[2].r.err, 0);
    assert_int_equal(s[2].r.remaining, 5);
    assert_int_equal(s[2].r.qty, 3);
    assert_true(s[2].r.order_id != s[0].r.order_id);
    assert_int_equal(s[3].r.err, SK_ENOTSTARTED);
    assert_int_equal(s[3].r.value, (INT64_C(1) << 49) - 1);
    sk_engine_free(e);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coalesced_and_one_by_one_give_identical_answers),
        cmocka_unit_test(test_local_sold_out_flag_clears_when_stock_returns),
        cmocka_unit_test(test_frozen_redis_is_outcome_unknown_then_recovers),
        cmocka_unit_test(test_a_batch_after_script_flush_is_sent_again_with_the_source),
        cmocka_unit_test(test_answers_carry_their_values_and_the_purchase_as_sent),
    };
    return cmocka_run_group_tests(tests, sk_fx_setup, sk_fx_teardown);
}
