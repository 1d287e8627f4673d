/* test_latch.c: the countdown latch against a real redis-server: counting,
 * re-arming refused while armed, awaiters woken by pub/sub when the count
 * reaches zero, timeout, cancel, delete, and a latch armed with an expiry
 * by a process that is kill -9'd before counting down opens by itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/latch.h"
#include "fam_support.h"
#include "util.h"


static dlock_latch *latch(const char *name)
{
    dlock_latch *l = NULL;
    assert_int_equal(dlock_latch_new(fam_cli, name, &l), 0);
    return l;
}

static void test_counts_down_to_open(void **state)
{
    (void)state;
    dlock_latch *l = latch("latch:basic");
    int64_t n = -1;
    assert_int_equal(dlock_latch_await(l, 0), 0); /* never armed: open */
    bool armed = false;
    assert_int_equal(dlock_latch_try_set_count(l, 3, 0, &armed), 0);
    assert_true(armed);
    assert_int_equal(dlock_latch_try_set_count(l, 5, 0, &armed), 0);
    assert_false(armed); /* armed already: unchanged */
    assert_int_equal(dlock_latch_get_count(l, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(dlock_latch_await(l, 0), DLOCK_EBUSY);
    for (int64_t want = 2; want >= 0; want--) {
        assert_int_equal(dlock_latch_count_down(l, &n), 0);
        assert_int_equal(n, want);
    }
    assert_int_equal(dlock_latch_await(l, 0), 0);
    assert_int_equal(dlock_latch_count_down(l, &n), 0); /* open: no change */
    assert_int_equal(n, 0);
    assert_int_equal(dlock_latch_get_count(l, &n), 0);
    assert_int_equal(n, 0);
    dlock_latch_free(l);
}

typedef struct aw_arg {
    dlock_latch *l;
    int64_t wait_ms;
    int rc;
    int64_t at_ms;
} aw_arg;

static void *awaiter(void *p)
{
    aw_arg *a = p;
    a->rc = dlock_latch_await(a->l, a->wait_ms);
    a->at_ms = dlock__now_ms();
    return NULL;
}

static void test_awaiters_wake_when_the_count_reaches_zero(void **state)
{
    (void)state;
    dlock_latch *l = latch("latch:wake"), *l2 = latch("latch:wake");
    assert_int_equal(dlock_latch_try_set_count(l, 2, 0, NULL), 0);
    aw_arg a[2] = {{l, 5000, 1, 0}, {l2, 5000, 1, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, awaiter, &a[i]), 0);
    dlock__sleep_ms(150);
    assert_int_equal(dlock_latch_count_down(l, NULL), 0);
    dlock__sleep_ms(50);
    int64_t opened = dlock__now_ms();
    assert_int_equal(dlock_latch_count_down(l2, NULL), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, 0);
        assert_true(a[i].at_ms - opened < FAM_SLACK_MS); /* a publish, not a 5 s poll */
    }
    dlock_latch_free(l);
    dlock_latch_free(l2);
}

static void test_await_times_out_and_cancel_wakes_it(void **state)
{
    (void)state;
    dlock_latch *l = latch("latch:timeout");
    assert_int_equal(dlock_latch_try_set_count(l, 1, 0, NULL), 0);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_latch_await(l, 120), DLOCK_ETIMEOUT);
    int64_t took = dlock__now_ms() - t0;
    assert_true(took >= 115 && took < 120 + FAM_SLACK_MS);
    aw_arg a = {l, DLOCK_WAIT_FOREVER, 1, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, awaiter, &a), 0);
    dlock__sleep_ms(100);
    t0 = dlock__now_ms();
    dlock_latch_cancel(l);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    assert_true(a.at_ms - t0 < FAM_SLACK_MS);
    bool existed = false;
    assert_int_equal(dlock_latch_delete(l, &existed), 0);
    assert_true(existed);
    assert_int_equal(dlock_latch_await(l, 0), 0);
    dlock_latch_free(l);
}

static void test_delete_opens_and_wakes(void **state)
{
    (void)state;
    dlock_latch *l = latch("latch:delete");
    assert_int_equal(dlock_latch_try_set_count(l, 10, 0, NULL), 0);
    aw_arg a = {l, 5000, 1, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, awaiter, &a), 0);
    dlock__sleep_ms(100);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_latch_delete(l, NULL), 0);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    assert_true(a.at_ms - t0 < FAM_SLACK_MS);
    dlock_latch_free(l);
}

static int arming_worker(const test_server *srv_, const char *arg)
{
    (void)arg;
    dlock_client *c = fam_client(srv_, 0);
    dlock_latch *l = NULL;
    if (!c || dlock_latch_new(c, "latch:crash", &l)) return 2;
    bool armed = false;
    if (dlock_latch_try_set_count(l, 1, 600, &armed) || !armed) return 3;
    for (;;) dlock__sleep_ms(1000); /* killed before counting down */
}

static void test_latch_armed_by_a_killed_worker_opens_on_its_expiry(void **state)
{
    (void)state;
    pid_t pid = fam_spawn("arming_worker", &fam_srv, NULL);
    assert_true(pid > 0);
    dlock_latch *l = latch("latch:crash");
    int64_t n = 0, t0 = dlock__now_ms();
    while (n == 0 && dlock__now_ms() - t0 < 5000) {
        assert_int_equal(dlock_latch_get_count(l, &n), 0);
        if (n == 0) dlock__sleep_ms(5);
    }
    assert_int_equal(n, 1);
    fam_kill_child(pid);
    int64_t killed = dlock__now_ms();
    assert_int_equal(dlock_latch_await(l, 5000), 0);
    int64_t took = dlock__now_ms() - killed;
    print_message("latch of a killed worker opened after %lld ms (expiry 600)\n", (long long)took);
    assert_true(took <= 600 + FAM_SLACK_MS);
    dlock_latch_free(l);
}

static void test_bad_input_is_refused(void **state)
{
    (void)state;
    dlock_latch *l = NULL;
    assert_int_equal(dlock_latch_new(fam_cli, "", &l), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_new(NULL, "x", &l), DLOCK_EINVAL);
    assert_null(l);
    l = latch("latch:bad");
    assert_int_equal(dlock_latch_try_set_count(l, 0, 0, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_try_set_count(l, 1, -1, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_await(l, -9), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_get_count(l, NULL), DLOCK_EINVAL);
    int64_t n = -1;
    assert_int_equal(dlock_latch_get_count(l, &n), 0);
    assert_int_equal(n, 0);
    dlock_latch_free(l);
    dlock_latch_free(NULL);
}

static const fam_role roles[] = {{"arming_worker", arming_worker}, {NULL, NULL}};

int main(int argc, char **argv)
{
    fam_child_dispatch(argc, argv, roles);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_down_to_open),
        cmocka_unit_test(test_awaiters_wake_when_the_count_reaches_zero),
        cmocka_unit_test(test_await_times_out_and_cancel_wakes_it),
        cmocka_unit_test(test_delete_opens_and_wakes),
        cmocka_unit_test(test_latch_armed_by_a_killed_worker_opens_on_its_expiry),
        cmocka_unit_test(test_bad_input_is_refused),
    };
    return cmocka_run_group_tests(tests, fam_setup, fam_teardown);
}
