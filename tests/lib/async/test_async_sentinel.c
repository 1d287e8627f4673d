/* test_async_sentinel.c: the asynchronous client on a redis-sentinel://
 * URL (dlock/async.h), on libevent and on libuv: a master, a replica and
 * 3 sentinels; the client finds the master through the sentinels without
 * blocking (a request made before they answered waits for them), and
 * follows a failover (SENTINEL FAILOVER): after +switch-master its locks
 * land on the promoted replica, and a waiter whose connection went
 * carries on there. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "async_harness.h"
#include "dlock/async.h"
#include "servers.h"
#include "util.h"

#define MASTER_NAME "asyncmaster"

static test_server master, replica, sentinels[3];

static int moved; /* the client logged a +switch-master */

static void on_log(dlock_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    if (strstr(msg, "async sentinel: master " MASTER_NAME " moved")) moved = 1;
}

static dlock_async_client *sentinel_client(void)
{
    char url[256];
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/" MASTER_NAME,
             sentinels[0].port, sentinels[1].port, sentinels[2].port);
    dlock_client_options o;
    ah_client_options(&o, url, 2000);
    o.retry_delay_ms = 100;
    o.log_fn = on_log;
    o.log_level = DLOCK_LOG_WARN;
    return ah_client(&o);
}

static int acquire_now(dlock_async_lock *l, int64_t wait_ms)
{
    ah_rec r = {0};
    assert_int_equal(dlock_async_lock_acquire(l, wait_ms, 30000, ah_on_lock, &r), 0);
    ah_run_until(&r.calls, wait_ms + 3000);
    assert_int_equal(r.calls, 1);
    return r.rc;
}

static bool holds(const test_server *s, const char *name, const char *token)
{
    char key[256], got[256] = "";
    snprintf(key, sizeof(key), "%s%s", test_prefix(), name);
    const char *argv[2] = {"GET", key};
    return test_redis_cmd(s, got, sizeof(got), 2, argv) == 0 && strcmp(got, token) == 0;
}

static bool is_master(const test_server *s)
{
    const char *argv[2] = {"INFO", "replication"};
    char info[4096] = "";
    return test_redis_cmd(s, info, sizeof(info), 2, argv) == 0 && strstr(info, "role:master") != NULL;
}

static void test_the_master_is_found_and_a_failover_followed(void **state)
{
    (void)state;
    dlock_async_client *c = sentinel_client();
    dlock_async_lock *a = NULL, *b = NULL, *w = NULL;
    assert_int_equal(dlock_async_lock_new(c, "before", NULL, &a), 0);
    assert_int_equal(dlock_async_lock_new(c, "after", NULL, &b), 0);
    assert_int_equal(dlock_async_lock_new(c, "before", NULL, &w), 0);
    assert_int_equal(acquire_now(a, 0), 0); /* sent before the sentinels answered: parked, then sent */
    assert_true(holds(&master, "before", dlock_async_lock_owner(a)));
    ah_rec wr = {0};
    assert_int_equal(dlock_async_lock_acquire(w, 20000, 30000, ah_on_lock, &wr), 0); /* waits for a */

    /* refused (NOGOODSLAVE) until the sentinel has seen the replica */
    const char *fo[3] = {"SENTINEL", "FAILOVER", MASTER_NAME};
    char out[256] = "";
    int64_t t0 = dlock__now_ms();
    while (test_redis_cmd(&sentinels[0], out, sizeof(out), 3, fo) != 0 && dlock__now_ms() - t0 < 12000)
        ah_run_for(200);
    print_message("SENTINEL FAILOVER after %lld ms: %s\n", (long long)(dlock__now_ms() - t0), out);
    t0 = dlock__now_ms();
    while (!(moved && is_master(&replica)) && dlock__now_ms() - t0 < 15000) ah_run_for(100);
    print_message("failover seen by the client after %lld ms\n", (long long)(dlock__now_ms() - t0));
    assert_true(moved);
    assert_true(is_master(&replica));

    assert_int_equal(acquire_now(b, 5000), 0);
    assert_true(holds(&replica, "after", dlock_async_lock_owner(b))); /* the new master */
    /* a's hold came across by replication; its release there wakes w */
    assert_int_equal(wr.calls, 0);
    ah_rec ur = {0};
    assert_int_equal(dlock_async_lock_unlock(a, ah_on_lock, &ur), 0);
    ah_run_until(&ur.calls, 3000);
    assert_int_equal(ur.rc, 0);
    ah_run_until(&wr.calls, 5000);
    assert_int_equal(wr.calls, 1);
    assert_int_equal(wr.rc, 0);
    assert_true(holds(&replica, "before", dlock_async_lock_owner(w)));
    dlock_async_lock_free(a);
    dlock_async_lock_free(b);
    dlock_async_lock_free(w);
    dlock_async_client_free(c);
}

static void test_no_sentinel_answering_is_econn(void **state)
{
    (void)state;
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = "redis-sentinel://127.0.0.1:1,127.0.0.1:2/" MASTER_NAME;
    o.connect_timeout_ms = 500;
    dlock_async_client *c = NULL;
    assert_int_equal(dlock_async_client_new(&ah_loop, &o, &c), 0);
    dlock_async_lock *l = NULL;
    assert_int_equal(dlock_async_lock_new(c, "nobody", NULL, &l), 0);
    ah_rec r = {0};
    assert_int_equal(dlock_async_lock_acquire(l, 0, 1000, ah_on_lock, &r), 0);
    assert_int_equal(r.calls, 0); /* never inside the call */
    ah_run_until(&r.calls, 3000);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rc, DLOCK_ECONN);
    dlock_async_lock_free(l);
    dlock_async_client_free(c);
}

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    memset(sentinels, 0, sizeof(sentinels));
    if (test_redis_start(&master, NULL) || test_redis_start(&replica, NULL)) return -1;
    if (test_redis_replicate(&replica, &master)) return -1;
    for (int i = 0; i < 3; i++)
        if (test_sentinel_start(&sentinels[i], &master, MASTER_NAME, 2)) return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) test_server_stop(&sentinels[i]);
    test_server_stop(&replica);
    test_server_stop(&master);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_sentinel_answering_is_econn, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_the_master_is_found_and_a_failover_followed, ah_setup, ah_teardown),
    };
    return cmocka_run_group_tests_name(ah_name(), tests, group_setup, group_teardown);
}
