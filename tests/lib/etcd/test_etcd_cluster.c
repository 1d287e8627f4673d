/* test_etcd_cluster.c: the etcd lock on a real 3-member cluster: a client
 * fails over from a dead listed endpoint; a lock survives kill -9 of the
 * leader (its keepalives reach the new leader, it is never reported lost,
 * nobody else gets it); a waiter whose watch ran through a killed member
 * is still served when the holder releases; a watch through a member cut
 * off from the other two ends (etcd's "require leader") instead of
 * waiting on a stream that can see nothing. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "etcd_gw.h"
#include "etcd_support.h"
#include "servers.h"
#include "util.h"

static test_etcd etcd;

static int setup(void **state)
{
    (void)state;
    test_prefix();
    return test_etcd_start(&etcd, 3);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_stop(&etcd);
    return 0;
}

/* Kills the leader, waits for a new one; returns the killed index. */
static int kill_leader(void)
{
    int leader = test_etcd_leader(&etcd);
    assert_true(leader >= 0);
    test_etcd_kill(&etcd, leader);
    assert_int_equal(test_etcd_wait_leader(&etcd, 10000), 0);
    assert_true(test_etcd_leader(&etcd) != leader);
    return leader;
}

static void test_client_fails_over_from_a_dead_endpoint(void **state)
{
    (void)state;
    char url[1100];
    snprintf(url, sizeof(url), "etcd://127.0.0.1:%d,%.1000s", test_free_port(), etcd.url + 7);
    dlock_client *c = es_client(url, 0);
    assert_non_null(c);
    dlock_lock *l = es_lock(c, "failover", NULL, NULL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
        assert_int_equal(dlock_lock_unlock(l), 0);
    }
    dlock_lock_free(l);
    dlock_client_destroy(c);
}

static int lost_calls;

static void on_lost(dlock_lock *l, int reason, void *ud)
{
    (void)l;
    (void)reason;
    (void)ud;
    __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
}

/* The cluster's URL with the leader's endpoint first, so the client talks
 * to the leader until it dies. */
static void leader_first_url(char *out, size_t len)
{
    int leader = test_etcd_leader(&etcd);
    assert_true(leader >= 0);
    int n = snprintf(out, len, "etcd://127.0.0.1:%d", etcd.client_port[leader]);
    for (int i = 0; i < etcd.n; i++)
        if (i != leader) n += snprintf(out + n, len - (size_t)n, ",127.0.0.1:%d", etcd.client_port[i]);
}

static void test_lock_survives_kill9_of_the_leader(void **state)
{
    (void)state;
    char url[256];
    leader_first_url(url, sizeof(url));
    dlock_client *c = es_client(url, 3000), *other = es_client(etcd.url, 3000);
    assert_non_null(c);
    assert_non_null(other);
    dlock_lock *l = es_lock(c, "leader", on_lost, NULL), *o = es_lock(other, "leader", NULL, NULL);
    uint64_t fence = 0;
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, &fence), 0);
    int killed = kill_leader();
    long long renewed = es_metric(c, "lock_watchdog_renew_total");
    /* two leases' worth of time under the new leader */
    for (int64_t end = dlock__now_ms() + 6000; dlock__now_ms() < end;) {
        assert_true(dlock_lock_is_held(l));
        dlock__sleep_ms(100);
    }
    assert_int_equal(lost_calls, 0);
    assert_true(es_metric(c, "lock_watchdog_renew_total") >= renewed + 4);
    assert_int_equal(es_metric(c, "lock_lost_total"), 0);
    bool mine = false;
    assert_int_equal(dlock_lock_is_held_by_me(l, &mine), 0);
    assert_true(mine);
    assert_int_equal(dlock_lock_try_lock(o, 0, 0, NULL), DLOCK_EBUSY);
    dlock_lock_status st;
    assert_int_equal(dlock_lock_status_get(other, "leader", &st), 0);
    assert_int_equal(st.last_fence, fence); /* the same acquisition, on the new leader */
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_int_equal(dlock_lock_try_lock(o, 0, 0, NULL), 0);
    assert_int_equal(dlock_lock_unlock(o), 0);
    dlock_lock_free(l);
    dlock_lock_free(o);
    dlock_client_destroy(c);
    dlock_client_destroy(other);
    assert_int_equal(test_etcd_restart(&etcd, killed), 0);
    assert_int_equal(test_etcd_wait_leader(&etcd, 10000), 0);
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_try_lock(w->l, 20000, 0, NULL);
    return NULL;
}

static void test_waiter_is_served_across_a_leader_kill(void **state)
{
    (void)state;
    char url[256];
    leader_first_url(url, sizeof(url)); /* the waiter's watch runs through the leader */
    dlock_client *c = es_client(url, 3000);
    assert_non_null(c);
    dlock_lock *h = es_lock(c, "handoff", NULL, NULL);
    waiter w = {.l = es_lock(c, "handoff", NULL, NULL)};
    assert_int_equal(dlock_lock_try_lock(h, 0, 0, NULL), 0);
    pthread_t t;
    pthread_create(&t, NULL, wait_for_it, &w);
    dlock__sleep_ms(500);
    int killed = kill_leader();
    dlock__sleep_ms(500);
    assert_int_equal(dlock_lock_unlock(h), 0);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    assert_int_equal(dlock_lock_unlock(w.l), 0);
    dlock_lock_free(h);
    dlock_lock_free(w.l);
    dlock_client_destroy(c);
    assert_int_equal(test_etcd_restart(&etcd, killed), 0);
}

static void test_watch_through_a_member_without_leader_ends(void **state)
{
    (void)state;
    dlock__etcd_url u;
    char url[64], err[256] = "";
    snprintf(url, sizeof(url), "etcd://127.0.0.1:%d", etcd.client_port[0]);
    assert_int_equal(dlock__etcd_url_parse(url, &u, err, sizeof(err)), 0);
    dlock__gw_opts o = {.connect_timeout_ms = 500, .command_timeout_ms = 2000, .retry_attempts = 0,
                        .retry_delay_ms = 50, .pool_size = 2};
    dlock__gw *g = NULL;
    assert_int_equal(dlock__gw_open(&u, &o, &g, err, sizeof(err)), 0);
    dlock__etcd_url_free(&u);
    dlock__gw_wait *w = NULL;
    assert_int_equal(dlock__gw_wait_new(&w), 0);
    test_etcd_pause(&etcd, 1, true); /* member 0 is alone: no leader */
    test_etcd_pause(&etcd, 2, true);
    int64_t t0 = dlock__now_ms();
    int rc = dlock__gw_watch_delete(g, w, "nokey", 5, 1, t0 + 10000, 100, NULL, NULL);
    int64_t took = dlock__now_ms() - t0;
    test_etcd_pause(&etcd, 1, false);
    test_etcd_pause(&etcd, 2, false);
    assert_int_equal(rc, DLOCK_ECONN); /* not ETIMEOUT: the stream was ended */
    assert_true(took < 8000);
    dlock__gw_wait_free(w);
    dlock__gw_close(g);
    assert_int_equal(test_etcd_wait_leader(&etcd, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_fails_over_from_a_dead_endpoint),
        cmocka_unit_test(test_lock_survives_kill9_of_the_leader),
        cmocka_unit_test(test_waiter_is_served_across_a_leader_kill),
        cmocka_unit_test(test_watch_through_a_member_without_leader_ends),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
