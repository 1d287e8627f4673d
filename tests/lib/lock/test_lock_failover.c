/* test_lock_failover.c: a lock acquired with wait_replicas = n has n
 * acknowledgements, so it survives the loss of its master; or the acquire
 * says it has not (DLOCK_ENOTREPL) and nothing is held. Real processes: a
 * master, a replica and 3 sentinels per test; the master dies by kill -9
 * right after the acquire returns, and the sentinels promote the replica.
 * The watchdog's renewals wait the same way: a renewal no replica has
 * does not move the holder's validity deadline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_internal.h"
#include "lock_support.h"
#include "util.h"

#define WAIT_TIMEOUT_MS 400

static test_server master, replica, sentinels[3];

static int setup(void **state)
{
    (void)state;
    memset(sentinels, 0, sizeof(sentinels));
    if (test_redis_start(&master, NULL) || test_redis_start(&replica, NULL)) return -1;
    if (test_redis_replicate(&replica, &master)) return -1;
    for (int i = 0; i < 3; i++)
        if (test_sentinel_start(&sentinels[i], &master, "lockmaster", 2)) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) test_server_stop(&sentinels[i]);
    test_server_pause(&replica, false);
    test_server_stop(&replica);
    test_server_stop(&master);
    return 0;
}

static dlock_client *replicated_client(int wait_replicas)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.wait_replicas = wait_replicas;
    o.wait_replicas_timeout_ms = WAIT_TIMEOUT_MS;
    o.command_timeout_ms = 2000;
    dlock_client *c = ls_client_opts(&master, &o);
    assert_non_null(c);
    return c;
}

static void get_on(const test_server *s, const char *key, char *out, size_t len)
{
    const char *argv[2] = {"GET", key};
    out[0] = '\0';
    assert_int_equal(test_redis_cmd(s, out, len, 2, argv), 0);
}

/* Waits (<= 30 s) until the sentinels made the replica a master. */
static void wait_for_promotion(void)
{
    const char *argv[2] = {"INFO", "replication"};
    char info[4096] = "";
    int64_t t0 = dlock__now_ms();
    while (dlock__now_ms() - t0 < 30000) {
        if (test_redis_cmd(&replica, info, sizeof(info), 2, argv) == 0 && strstr(info, "role:master")) {
            print_message("replica promoted %lld ms after the kill\n", (long long)(dlock__now_ms() - t0));
            return;
        }
        dlock__sleep_ms(100);
    }
    fail_msg("the replica was not promoted within 30 s");
}

static void test_acknowledged_lock_survives_the_masters_death(void **state)
{
    (void)state;
    dlock_client *c = replicated_client(1);
    dlock_lock *l = ls_lock(c, "survivor", DLOCK_LOCK_SIMPLE);
    uint64_t fence = 0;
    assert_int_equal(dlock_lock_try_lock(l, 0, 120000, &fence), 0);
    char token[DLOCK_OWNER_MAX + 1], fence_key[512], want_fence[24];
    snprintf(token, sizeof(token), "%s", dlock_lock_owner(l));
    assert_int_equal(dlock__companion_key(ls_key("survivor"), ":fence", fence_key, sizeof(fence_key)), 0);
    snprintf(want_fence, sizeof(want_fence), "%llu", (unsigned long long)fence);
    test_server_kill(&master); /* right after the acquire returned */

    wait_for_promotion();
    char got[512];
    get_on(&replica, ls_key("survivor"), got, sizeof(got));
    assert_string_equal(got, token); /* the promoted replica holds the lock, same token */
    get_on(&replica, fence_key, got, sizeof(got));
    assert_string_equal(got, want_fence); /* and the same fence */
    dlock_lock_free(l); /* still held: reported, left to expire */
    dlock_client_destroy(c);
}

static void test_unacknowledged_lock_is_refused_and_released(void **state)
{
    (void)state;
    dlock_client *c = replicated_client(1);
    dlock_lock *l = ls_lock(c, "refused", DLOCK_LOCK_SIMPLE);
    test_server_pause(&replica, true);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_try_lock(l, 0, 120000, NULL), DLOCK_ENOTREPL);
    int64_t took = dlock__now_ms() - t0;
    print_message("ENOTREPL after %lld ms (WAIT timeout %d ms)\n", (long long)took, WAIT_TIMEOUT_MS);
    assert_true(took >= WAIT_TIMEOUT_MS - 5);
    assert_true(took < WAIT_TIMEOUT_MS + 1000); /* one WAIT, then the release */
    assert_false(dlock_lock_is_held(l));
    assert_false(ls_exists(&master, ls_key("refused"))); /* nothing is left held */
    dlock_client *other = replicated_client(0);
    dlock_lock *l2 = ls_lock(other, "refused", DLOCK_LOCK_SIMPLE);
    assert_int_equal(dlock_lock_try_lock(l2, 0, 5000, NULL), 0); /* free for anyone */
    assert_int_equal(dlock_lock_unlock(l2), 0);
    dlock_lock_free(l2);
    dlock_client_destroy(other);
    /* a waiting acquire ends the same way, within its wait */
    t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_try_lock(l, 5000, 120000, NULL), DLOCK_ENOTREPL);
    assert_true(dlock__now_ms() - t0 < WAIT_TIMEOUT_MS + 1000);
    test_server_pause(&replica, false);
    dlock_lock_free(l);
    dlock_client_destroy(c);
}

/* With wait_replicas = 1 a renewal only the master has is not a good one:
 * with the replica frozen the master keeps taking the renewals, yet the
 * holder stops believing one lease after the last replicated renewal (a
 * promoted replica's copy of the key would expire then). */
static void test_unreplicated_renewals_do_not_extend_the_hold(void **state)
{
    (void)state;
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.wait_replicas = 1;
    o.wait_replicas_timeout_ms = 100;
    o.watchdog_timeout_ms = 1000;
    o.command_timeout_ms = 2000;
    dlock_client *c = ls_client_opts(&master, &o);
    assert_non_null(c);
    dlock_lock *l = ls_lock(c, "renewals", DLOCK_LOCK_SIMPLE);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0); /* watchdog mode */
    dlock__sleep_ms(700);                                   /* a replicated renewal went through */
    assert_true(dlock_lock_is_held(l));
    test_server_pause(&replica, true);
    int64_t t0 = dlock__now_ms();
    while (dlock_lock_is_held(l) && dlock__now_ms() - t0 < 5000) dlock__sleep_ms(10);
    int64_t took = dlock__now_ms() - t0;
    print_message("replica frozen: the holder stopped believing after %lld ms (lease 1000 ms)\n", (long long)took);
    assert_false(dlock_lock_is_held(l));
    assert_true(took <= 1000 + 200); /* by the lease after the last replicated renewal */
    assert_true(ls_exists(&master, ls_key("renewals"))); /* the master took the renewals */
    test_server_pause(&replica, false);
    dlock_lock_free(l);
    dlock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_acknowledged_lock_survives_the_masters_death, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unacknowledged_lock_is_refused_and_released, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreplicated_renewals_do_not_extend_the_hold, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
