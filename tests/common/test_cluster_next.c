/* test_cluster_next.c: what a Cluster node's reply asks of the router
 * (dlock__cluster_next), and how the router's shared state follows it
 * (dlock__router_follow), for every redirect and retryable error and at
 * every bound, from replies parsed from RESP as a node sends them. A
 * command is resent only on replies that say it did not run. The
 * asynchronous drivers' map walk (dlock__rwalk). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_map.h"
#include "cluster_router.h"
#include "common_err.h"
#include "reply.h"

static dlock__reply *parse(const char *resp)
{
    dlock__reply *r = NULL;
    assert_int_equal(dlock__reply_parse(resp, strlen(resp), &r), 0);
    return r;
}

/* dlock__cluster_next of resp after `redirects` and `busy` earlier hops. */
static dlock__next next_of(const char *resp, int redirects, int busy, dlock__redirect *rd, int64_t *wait)
{
    dlock__reply *r = parse(resp);
    dlock__next n = dlock__cluster_next(r, redirects, busy, rd, wait);
    dlock__reply_free(r);
    return n;
}

static void test_moved_resends_to_the_named_node(void **state)
{
    (void)state;
    dlock__redirect rd;
    int64_t w = -1;
    assert_int_equal(next_of("-MOVED 3999 10.0.0.2:7001\r\n", 0, 0, &rd, &w), DLOCK__NEXT_MOVED);
    assert_int_equal(rd.slot, 3999);
    assert_string_equal(rd.host, "10.0.0.2");
    assert_int_equal(rd.port, 7001);
    assert_int_equal(w, 0);
}

static void test_ask_resends_once_with_asking(void **state)
{
    (void)state;
    dlock__redirect rd;
    int64_t w;
    assert_int_equal(next_of("-ASK 12 [::1]:7002\r\n", 2, 0, &rd, &w), DLOCK__NEXT_ASK);
    assert_int_equal(rd.kind, DLOCK__REDIR_ASK);
    assert_string_equal(rd.host, "[::1]");
    assert_int_equal(rd.port, 7002);
}

static void test_redirects_stop_at_the_bound(void **state)
{
    (void)state;
    dlock__redirect rd;
    int64_t w;
    int last = DLOCK__CLUSTER_MAX_REDIRECTS - 1;
    assert_int_equal(next_of("-MOVED 1 h:1\r\n", last, 0, &rd, &w), DLOCK__NEXT_MOVED);
    assert_int_equal(next_of("-MOVED 1 h:1\r\n", last + 1, 0, &rd, &w), DLOCK__NEXT_DONE);
    assert_int_equal(next_of("-ASK 1 h:1\r\n", last + 1, 0, &rd, &w), DLOCK__NEXT_DONE);
}

static void test_busy_errors_retry_with_growing_waits_up_to_the_bound(void **state)
{
    (void)state;
    static const char *busy[] = {
        "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
        "-LOADING Redis is loading the dataset in memory\r\n",
        "-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n"};
    static const int64_t waits[DLOCK__CLUSTER_BUSY_RETRIES] = {5, 10, 20, 40, 80, 100, 100, 100};
    dlock__redirect rd;
    for (size_t k = 0; k < sizeof(busy) / sizeof(busy[0]); k++) {
        for (int b = 0; b < DLOCK__CLUSTER_BUSY_RETRIES; b++) {
            int64_t w = -1;
            assert_int_equal(next_of(busy[k], 0, b, &rd, &w), DLOCK__NEXT_BUSY);
            assert_int_equal(w, waits[b]);
        }
        int64_t w = -1;
        assert_int_equal(next_of(busy[k], 0, DLOCK__CLUSTER_BUSY_RETRIES, &rd, &w), DLOCK__NEXT_DONE);
        assert_int_equal(w, 0);
    }
}

static void test_clusterdown_and_readonly_ask_for_a_new_map(void **state)
{
    (void)state;
    dlock__redirect rd;
    int64_t w;
    assert_int_equal(next_of("-CLUSTERDOWN The cluster is down\r\n", 0, 0, &rd, &w), DLOCK__NEXT_DOWN);
    assert_int_equal(w, 5);
    assert_int_equal(next_of("-READONLY You can't write against a read only replica.\r\n", 0, 1, &rd, &w),
                     DLOCK__NEXT_DEMOTED);
    assert_int_equal(w, 10);
    assert_int_equal(next_of("-READONLY x\r\n", 0, DLOCK__CLUSTER_BUSY_RETRIES, &rd, &w), DLOCK__NEXT_DONE);
    assert_int_equal(next_of("-CLUSTERDOWN x\r\n", 0, DLOCK__CLUSTER_BUSY_RETRIES, &rd, &w),
                     DLOCK__NEXT_DONE);
}

/* Anything that does not say "not run" is the answer: a success, the
 * script's own error, a code that only starts like a retryable one, a
 * malformed redirect, and no reply at all (a lost connection is the
 * drivers' EUNKNOWN: never resent). */
static void test_other_replies_and_connection_errors_are_final(void **state)
{
    (void)state;
    static const char *final[] = {
        "+OK\r\n",
        ":1\r\n",
        "$-1\r\n",
        "-ERR Error running script: @user_script:1: user error\r\n",
        "-NOSCRIPT No matching script\r\n",
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
        "-LOADINGX not a code we know\r\n",
        "-TRYAGAINS\r\n",
        "-ERR READONLY is not the code here\r\n",
        "-MOVED 99999 h:1\r\n",
        "-MOVED 1 h:0\r\n",
        "-MOVED 1 nocolon\r\n",
        "-ASK 1 h:70000\r\n",
    };
    dlock__redirect rd;
    for (size_t i = 0; i < sizeof(final) / sizeof(final[0]); i++) {
        int64_t w = -1;
        assert_int_equal(next_of(final[i], 0, 0, &rd, &w), DLOCK__NEXT_DONE);
        assert_int_equal(w, 0);
    }
    int64_t w = -1;
    assert_int_equal(dlock__cluster_next(NULL, 0, 0, &rd, &w), DLOCK__NEXT_DONE);
}

/* ---- the router's state ------------------------------------------------------ */

static void router_with_two_masters(dlock__router *rt)
{
    dlock__router_init(rt);
    int a = dlock__router_node(rt, "10.0.0.1", 7000), b = dlock__router_node(rt, "10.0.0.2", 7000);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    for (unsigned s = 0; s < DLOCK__SLOTS; s++)
        rt->owner[s] = s < DLOCK__SLOTS / 2 ? 0 : 1;
}

static dlock__hop_step follow(dlock__router *rt, dlock__hop *h, int slot, const char *resp, int64_t *w,
                              dlock__next *n)
{
    dlock__reply *r = parse(resp);
    dlock__hop_step st = dlock__router_follow(rt, h, slot, r, w, n);
    dlock__reply_free(r);
    return st;
}

static void test_moved_points_the_slot_at_the_new_node_and_asks_for_a_refresh(void **state)
{
    (void)state;
    dlock__router rt;
    router_with_two_masters(&rt);
    dlock__hop h = {.target = dlock__router_target(&rt, 100)};
    int64_t w;
    dlock__next n;
    assert_int_equal(follow(&rt, &h, 100, "-MOVED 100 10.0.0.3:7000\r\n", &w, &n), DLOCK__HOP_RESEND);
    assert_int_equal(n, DLOCK__NEXT_MOVED);
    assert_int_equal(h.target, 2);
    assert_int_equal(h.redirects, 1);
    assert_false(h.asking);
    assert_int_equal(dlock__router_target(&rt, 100), 2);
    assert_int_equal(dlock__router_target(&rt, 101), 0);
    assert_true(rt.refresh_due);
    dlock__router_free(&rt);
}

static void test_ask_goes_once_elsewhere_and_leaves_the_map(void **state)
{
    (void)state;
    dlock__router rt;
    router_with_two_masters(&rt);
    dlock__hop h = {.target = 0};
    int64_t w;
    assert_int_equal(follow(&rt, &h, 100, "-ASK 100 :7000\r\n", &w, NULL), DLOCK__HOP_RESEND);
    assert_int_equal(h.target, 0); /* empty host: the node that answered */
    assert_true(h.asking);
    assert_false(rt.refresh_due);
    assert_int_equal(follow(&rt, &h, 100, "-ASK 100 10.0.0.2:7000\r\n", &w, NULL), DLOCK__HOP_RESEND);
    assert_int_equal(h.target, 1);
    assert_int_equal(dlock__router_target(&rt, 100), 0);
    dlock__router_free(&rt);
}

static void test_readonly_on_a_write_refreshes_then_reroutes(void **state)
{
    (void)state;
    dlock__router rt;
    router_with_two_masters(&rt);
    dlock__hop h = {.target = 0};
    int64_t w;
    dlock__next n;
    assert_int_equal(
        follow(&rt, &h, 100, "-READONLY You can't write against a read only replica.\r\n", &w, &n),
        DLOCK__HOP_RESEND);
    assert_int_equal(n, DLOCK__NEXT_DEMOTED);
    assert_true(rt.refresh_due);
    assert_true(h.reroute);
    assert_int_equal(h.busy, 1);
    assert_int_equal(w, 5);
    dlock__router_free(&rt);
}

static void test_busy_retries_the_same_node_without_a_refresh(void **state)
{
    (void)state;
    dlock__router rt;
    router_with_two_masters(&rt);
    dlock__hop h = {.target = 1};
    int64_t w;
    for (int i = 0; i < DLOCK__CLUSTER_BUSY_RETRIES; i++)
        assert_int_equal(follow(&rt, &h, 9000, "-LOADING x\r\n", &w, NULL), DLOCK__HOP_RESEND);
    assert_int_equal(h.target, 1);
    assert_false(rt.refresh_due);
    assert_false(h.reroute);
    assert_int_equal(follow(&rt, &h, 9000, "-LOADING x\r\n", &w, NULL), DLOCK__HOP_FINAL);
    dlock__router_free(&rt);
}

static void test_a_keyless_command_is_not_rerouted_after_clusterdown(void **state)
{
    (void)state;
    dlock__router rt;
    router_with_two_masters(&rt);
    dlock__hop h = {.target = 1};
    int64_t w;
    assert_int_equal(follow(&rt, &h, -1, "-CLUSTERDOWN x\r\n", &w, NULL), DLOCK__HOP_RESEND);
    assert_true(rt.refresh_due);
    assert_false(h.reroute); /* WAIT stays on the node of the write it counts */
    dlock__router_free(&rt);
}

static void test_a_full_node_table_makes_the_redirect_final(void **state)
{
    (void)state;
    dlock__router rt;
    router_with_two_masters(&rt);
    char host[32];
    for (int i = 2; i < DLOCK__ROUTER_MAX_NODES; i++) {
        snprintf(host, sizeof(host), "10.1.0.%d", i);
        assert_int_equal(dlock__router_node(&rt, host, 7000), i);
    }
    assert_int_equal(dlock__router_node(&rt, "10.9.9.9", 7000), -1);
    dlock__hop h = {.target = 0};
    int64_t w;
    dlock__next n;
    assert_int_equal(follow(&rt, &h, 5, "-MOVED 5 10.9.9.9:7000\r\n", &w, &n), DLOCK__HOP_FINAL);
    assert_int_equal(n, DLOCK__NEXT_DONE);
    assert_int_equal(dlock__router_target(&rt, 5), 0);
    dlock__router_free(&rt);
}

static void test_refresh_order_is_masters_then_seeds_then_the_suspect(void **state)
{
    (void)state;
    dlock__router rt;
    router_with_two_masters(&rt);
    dlock__hostport seeds[2] = {{.host = (char *)"10.0.0.2", .port = 7000},
                                {.host = (char *)"seed", .port = 1}};
    dlock__url url = {.kind = DLOCK__URL_CLUSTER, .seeds = seeds, .n_seeds = 2};
    dlock__router_lost(&rt, 0);
    int order[DLOCK__ROUTER_MAX_NODES + 1];
    size_t n = dlock__router_refresh_order(&rt, &url, order);
    assert_int_equal(n, 3);
    assert_int_equal(order[0], 1);
    assert_string_equal(rt.nodes[order[1]].host, "seed");
    assert_int_equal(order[2], 0);
    assert_false(dlock__router_refresh_allowed(&rt, 50) && rt.refreshed_at_ms > 0);
    dlock__router_refresh_begins(&rt, 1000);
    assert_false(dlock__router_refresh_allowed(&rt, 1000 + DLOCK__CLUSTER_REFRESH_GAP_MS - 1));
    assert_true(dlock__router_refresh_allowed(&rt, 1000 + DLOCK__CLUSTER_REFRESH_GAP_MS));
    dlock__router_refreshed(&rt);
    assert_false(rt.refresh_due);
    assert_int_equal(rt.suspect, -1);
    dlock__router_free(&rt);
}

/* The asynchronous drivers' walk for the map: one node at a time, SHARDS
 * asked of a node that refused SLOTS, the first good reply applied. */
static void test_the_map_walk_asks_one_node_at_a_time_slots_then_shards(void **state)
{
    (void)state;
    dlock__router rt;
    router_with_two_masters(&rt);
    dlock__url url = {.kind = DLOCK__URL_CLUSTER};
    dlock__rwalk w;
    const char *sub = NULL;
    rt.refresh_due = true;
    dlock__rwalk_begin(&rt, &url, &w, 5000);
    assert_int_equal(dlock__router_refresh_wait_ms(&rt, 5010), DLOCK__CLUSTER_REFRESH_GAP_MS - 10);
    assert_int_equal(dlock__router_refresh_wait_ms(&rt, 5000 + DLOCK__CLUSTER_REFRESH_GAP_MS), 0);
    assert_int_equal(dlock__rwalk_next(&w, &sub), 0);
    assert_string_equal(sub, DLOCK__CMAP_FIRST);
    dlock__reply *refused = parse("-ERR unknown subcommand\r\n");
    assert_int_equal(dlock__rwalk_reply(&rt, &w, refused, &sub), DLOCK__RWALK_AGAIN);
    assert_string_equal(sub, DLOCK__CMAP_SECOND);
    assert_true(w.answered);
    assert_int_equal(dlock__rwalk_reply(&rt, &w, refused, &sub), DLOCK__RWALK_NEXT);
    assert_int_equal(dlock__rwalk_next(&w, &sub), 1);
    assert_string_equal(sub, DLOCK__CMAP_FIRST);
    assert_int_equal(dlock__rwalk_reply(&rt, &w, NULL, &sub), DLOCK__RWALK_NEXT); /* nothing came */
    assert_int_equal(dlock__rwalk_next(&w, &sub), -1);
    assert_true(rt.refresh_due); /* the walk failed: the map is unchanged */
    assert_int_equal(dlock__router_target(&rt, 5), 0);

    dlock__rwalk_begin(&rt, &url, &w, 6000);
    assert_false(w.answered);
    assert_int_equal(dlock__rwalk_next(&w, &sub), 0);
    dlock__reply *slots = parse("*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$8\r\n10.0.0.3\r\n:7000\r\n$2\r\nid\r\n");
    assert_int_equal(dlock__rwalk_reply(&rt, &w, slots, &sub), DLOCK__RWALK_DONE);
    assert_false(rt.refresh_due);
    assert_string_equal(rt.nodes[dlock__router_target(&rt, 5)].host, "10.0.0.3");
    dlock__reply_free(refused);
    dlock__reply_free(slots);
    dlock__router_free(&rt);
}

/* No reply: resent only when nothing was written, within the bound. */
static void test_a_command_without_a_reply_is_resent_only_when_never_written(void **state)
{
    (void)state;
    dlock__router rt;
    router_with_two_masters(&rt);
    dlock__hop h = {.target = 1, .asking = true};
    assert_false(dlock__router_no_reply(&rt, &h, 1, true, true)); /* written: may have run */
    assert_int_equal(rt.suspect, 1);
    assert_true(rt.refresh_due);
    assert_false(dlock__router_no_reply(&rt, &h, 1, false, false)); /* pinned to its node */
    for (int i = 0; i < DLOCK__CLUSTER_MAX_REDIRECTS; i++) assert_true(dlock__router_no_reply(&rt, &h, 0, false, true));
    assert_false(h.asking);
    assert_int_equal(h.redirects, DLOCK__CLUSTER_MAX_REDIRECTS);
    assert_false(dlock__router_no_reply(&rt, &h, 0, false, true));
    dlock__router_free(&rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moved_resends_to_the_named_node),
        cmocka_unit_test(test_ask_resends_once_with_asking),
        cmocka_unit_test(test_redirects_stop_at_the_bound),
        cmocka_unit_test(test_busy_errors_retry_with_growing_waits_up_to_the_bound),
        cmocka_unit_test(test_clusterdown_and_readonly_ask_for_a_new_map),
        cmocka_unit_test(test_other_replies_and_connection_errors_are_final),
        cmocka_unit_test(test_moved_points_the_slot_at_the_new_node_and_asks_for_a_refresh),
        cmocka_unit_test(test_ask_goes_once_elsewhere_and_leaves_the_map),
        cmocka_unit_test(test_readonly_on_a_write_refreshes_then_reroutes),
        cmocka_unit_test(test_busy_retries_the_same_node_without_a_refresh),
        cmocka_unit_test(test_a_keyless_command_is_not_rerouted_after_clusterdown),
        cmocka_unit_test(test_a_full_node_table_makes_the_redirect_final),
        cmocka_unit_test(test_refresh_order_is_masters_then_seeds_then_the_suspect),
        cmocka_unit_test(test_the_map_walk_asks_one_node_at_a_time_slots_then_shards),
        cmocka_unit_test(test_a_command_without_a_reply_is_resent_only_when_never_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
