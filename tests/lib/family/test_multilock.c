/* test_multilock.c: all-or-nothing multi-lock against a real redis-server:
 * one-slot names go through one atomic script, cross-slot names through
 * ordered acquisition with rollback (never a partial hold), interop with a
 * reentrant dlock_lock on one of the names (its unlock wakes the multi-lock
 * waiter), no deadlock between multi-locks naming the same keys in
 * different orders, watchdog renewal, a kill -9'd holder's names coming
 * back within the lease, cancel and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/lock.h"
#include "dlock/multilock.h"
#include "fam_support.h"
#include "util.h"


static dlock_multilock *multi(dlock_client *c, const char *const *names, size_t n)
{
    dlock_multilock *ml = NULL;
    assert_int_equal(dlock_multilock_new(c, names, n, &ml), 0);
    return ml;
}

static long long exists(const char *name)
{
    char key[256];
    const char *ex[2] = {"EXISTS", fam_key(name, key, sizeof(key))};
    return fam_int(&fam_srv, 2, ex);
}

/* The hold count of a handle, which must be answered. */
static int64_t ml_count(dlock_multilock *ml)
{
    int64_t n = -1;
    assert_int_equal(dlock_multilock_hold_count(ml, &n), 0);
    return n;
}

/* Hold count is the server's answer, as for every object: one name deleted
 * behind the handle's back makes it 0 at once. */
static void test_hold_count_is_the_servers(void **state)
{
    (void)state;
    const char *xy[2] = {"{cnt}:x", "{cnt}:y"};
    dlock_multilock *m = multi(fam_cli, xy, 2);
    assert_int_equal(dlock_multilock_lock(m, 0, 60000), 0);
    assert_int_equal(ml_count(m), 1);
    char key[256];
    const char *del[2] = {"DEL", fam_key("{cnt}:y", key, sizeof(key))};
    assert_int_equal(fam_int(&fam_srv, 2, del), 1);
    assert_int_equal(ml_count(m), 0);
    assert_int_equal(dlock_multilock_hold_count(NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_unlock(m), DLOCK_ELOST);
    dlock_multilock_free(m);
}

static void test_same_slot_names_are_taken_atomically(void **state)
{
    (void)state;
    const char *ab[2] = {"{order:1}:a", "{order:1}:b"}, *bc[2] = {"{order:1}:c", "{order:1}:b"};
    dlock_multilock *m1 = multi(fam_cli, ab, 2), *m2 = multi(fam_cli, bc, 2);
    assert_true(dlock_multilock_is_atomic(m1));
    assert_int_equal(dlock_multilock_lock(m1, 0, 0), 0);
    assert_int_equal(dlock_multilock_lock(m1, 0, 0), 0); /* re-entry */
    assert_int_equal(ml_count(m1), 2);
    assert_int_equal(dlock_multilock_lock(m2, 0, 0), DLOCK_EBUSY);
    assert_int_equal(exists("{order:1}:c"), 0); /* nothing taken */
    assert_int_equal(dlock_multilock_unlock(m1), 0);
    assert_int_equal(dlock_multilock_lock(m2, 0, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_multilock_unlock(m1), 0);
    assert_int_equal(exists("{order:1}:a"), 0);
    assert_int_equal(dlock_multilock_lock(m2, 0, 0), 0);
    assert_int_equal(dlock_multilock_unlock(m2), 0);
    assert_int_equal(dlock_multilock_unlock(m2), DLOCK_ENOTHELD);
    dlock_multilock_free(m1);
    dlock_multilock_free(m2);
}

typedef struct ml_arg {
    dlock_multilock *ml;
    int64_t wait_ms;
    int rc;
    int64_t at_ms;
} ml_arg;

static void *lock_thread(void *p)
{
    ml_arg *a = p;
    a->rc = dlock_multilock_lock(a->ml, a->wait_ms, 0);
    a->at_ms = dlock__now_ms();
    return NULL;
}

static void test_cross_slot_names_roll_back_and_wait_for_a_reentrant_lock(void **state)
{
    (void)state;
    /* tags {a} {b} {c}: three different Cluster slots whatever the prefix */
    const char *names[3] = {"{a}acct:1", "{b}acct:2", "{c}acct:3"};
    dlock_multilock *ml = multi(fam_cli, names, 3);
    assert_false(dlock_multilock_is_atomic(ml));
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = DLOCK_LOCK_REENTRANT;
    dlock_lock *other = NULL;
    assert_int_equal(dlock_lock_new(fam_cli, "{b}acct:2", &lo, &other), 0);
    assert_int_equal(dlock_lock_try_lock(other, 0, 0, NULL), 0);
    assert_int_equal(dlock_multilock_lock(ml, 0, 0), DLOCK_EBUSY);
    assert_int_equal(exists("{a}acct:1"), 0); /* rolled back */
    assert_int_equal(exists("{c}acct:3"), 0);
    ml_arg a = {ml, 5000, 1, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, lock_thread, &a), 0);
    dlock__sleep_ms(150);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_unlock(other), 0);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    print_message("multi-lock woke %lld ms after the reentrant unlock\n", (long long)(a.at_ms - t0));
    assert_true(a.at_ms - t0 < FAM_SLACK_MS);
    /* and the reentrant lock now sees the name taken */
    assert_int_equal(dlock_lock_try_lock(other, 0, 0, NULL), DLOCK_EBUSY);
    assert_int_equal(dlock_multilock_unlock(ml), 0);
    for (int i = 0; i < 3; i++) assert_int_equal(exists(names[i]), 0);
    dlock_lock_free(other);
    dlock_multilock_free(ml);
}

typedef struct dl_arg {
    const char *const *names;
    atomic_int *inside, *bad;
    int rc;
} dl_arg;

static void *order_thread(void *p)
{
    dl_arg *a = p;
    dlock_multilock *ml = NULL;
    a->rc = dlock_multilock_new(fam_cli, a->names, 3, &ml);
    for (int i = 0; i < 15 && a->rc == 0; i++) {
        a->rc = dlock_multilock_lock(ml, 5000, 0);
        if (a->rc) break;
        if (atomic_fetch_add(a->inside, 1) != 0) atomic_fetch_add(a->bad, 1);
        dlock__sleep_ms(2);
        atomic_fetch_sub(a->inside, 1);
        a->rc = dlock_multilock_unlock(ml);
    }
    dlock_multilock_free(ml);
    return NULL;
}

static void test_opposite_name_orders_do_not_deadlock(void **state)
{
    (void)state;
    static const char *fwd[3] = {"{a}x:1", "{b}x:2", "{c}x:3"};
    static const char *rev[3] = {"{c}x:3", "{b}x:2", "{a}x:1"};
    atomic_int inside = 0, bad = 0;
    dl_arg a[4] = {{fwd, &inside, &bad, 0}, {rev, &inside, &bad, 0},
                   {fwd, &inside, &bad, 0}, {rev, &inside, &bad, 0}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, order_thread, &a[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, 0);
    }
    assert_int_equal(atomic_load(&bad), 0);
}

static void test_watchdog_keeps_all_names(void **state)
{
    (void)state;
    const char *names[2] = {"wd:a", "wd:b"};
    dlock_multilock *m1 = multi(fam_cli, names, 2), *m2 = multi(fam_cli, names, 2);
    assert_int_equal(dlock_multilock_lock(m1, 0, 0), 0);
    dlock__sleep_ms(2200); /* > 2 leases of 900 ms */
    assert_int_equal(dlock_multilock_lock(m2, 0, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_multilock_unlock(m1), 0);
    assert_int_equal(dlock_multilock_lock(m2, 0, 300), 0);
    assert_int_equal(dlock_multilock_unlock(m2), 0);
    /* a fixed lease is not renewed */
    assert_int_equal(dlock_multilock_lock(m1, 0, 200), 0);
    assert_int_equal(dlock_multilock_lock(m2, 1000, 0), 0);
    assert_int_equal(dlock_multilock_unlock(m1), DLOCK_ELOST);
    assert_int_equal(dlock_multilock_unlock(m2), 0);
    dlock_multilock_free(m1);
    dlock_multilock_free(m2);
}

static atomic_int ml_lost_calls;

static void on_ml_lost(dlock_multilock *ml, int reason, void *ud)
{
    assert_int_equal(reason, DLOCK_ELOST);
    assert_int_equal(dlock_multilock_validity_ms(ml), 0);
    atomic_fetch_add((atomic_int *)ud, 1);
}

/* The validity rule (dlock.h) for a multi-lock: a fixed lease's validity
 * counts down from the send time and ends without a callback; in watchdog
 * mode a frozen server (SIGSTOP) makes the deadline thread declare the
 * loss within a lease of the cut, with validity 0 from then on. */
static void test_validity_ends_at_the_deadline_even_with_the_server_frozen(void **state)
{
    (void)state;
    LT_STANDALONE_ONLY("freezes the one server");
    const char *names[2] = {"val:a", "val:b"};
    dlock_client *c = fam_client(&fam_srv, 900);
    dlock_multilock *ml = multi(c, names, 2);
    atomic_store(&ml_lost_calls, 0);
    dlock_multilock_set_on_lost(ml, on_ml_lost, &ml_lost_calls);
    assert_int_equal(dlock_multilock_lock(ml, 0, 300), 0);
    int64_t v = dlock_multilock_validity_ms(ml);
    assert_true(v > 0 && v <= 300 - 3 - 2);
    dlock__sleep_ms(v + 20);
    assert_int_equal(dlock_multilock_validity_ms(ml), 0);
    assert_int_equal(atomic_load(&ml_lost_calls), 0); /* a fixed lease just ends */
    assert_int_equal(dlock_multilock_unlock(ml), DLOCK_ELOST);

    assert_int_equal(dlock_multilock_lock(ml, 1000, 0), 0);
    int64_t took = fam_frozen_until_called(&fam_srv, &ml_lost_calls, 900 + FAM_SLACK_MS);
    assert_int_equal(atomic_load(&ml_lost_calls), 1);
    assert_true(took <= 900 + FAM_SLACK_MS);
    assert_int_equal(dlock_multilock_unlock(ml), DLOCK_ELOST);
    dlock_multilock_free(ml);
    dlock_client_destroy(c);
}

static int dying_holder(const test_server *srv_, const char *arg)
{
    (void)arg;
    dlock_client *c = fam_client(srv_, 0);
    const char *names[2] = {"crash:a", "crash:b"};
    dlock_multilock *ml = NULL;
    if (!c || dlock_multilock_new(c, names, 2, &ml) || dlock_multilock_lock(ml, 0, 0)) return 2;
    const char *set[3] = {"SET", "ml:held", "1"};
    lt_cmd(srv_, NULL, 0, 3, set);
    for (;;) dlock__sleep_ms(1000);
}

static void test_killed_holder_names_return_within_the_lease(void **state)
{
    (void)state;
    pid_t pid = fam_spawn("dying_holder", &fam_srv, NULL);
    assert_true(pid > 0);
    const char *get[2] = {"GET", "ml:held"};
    int64_t t0 = dlock__now_ms();
    while (fam_int(&fam_srv, 2, get) != 1 && dlock__now_ms() - t0 < 5000) dlock__sleep_ms(10);
    assert_int_equal(fam_int(&fam_srv, 2, get), 1);
    dlock__sleep_ms(1000);
    const char *names[2] = {"crash:b", "crash:a"};
    dlock_multilock *ml = multi(fam_cli, names, 2);
    assert_int_equal(dlock_multilock_lock(ml, 0, 0), DLOCK_EBUSY);
    fam_kill_child(pid);
    int64_t killed = dlock__now_ms();
    assert_int_equal(dlock_multilock_lock(ml, 5000, 0), 0);
    int64_t took = dlock__now_ms() - killed;
    print_message("killed holder's names back after %lld ms (lease 900)\n", (long long)took);
    assert_true(took <= 900 + FAM_SLACK_MS);
    assert_int_equal(dlock_multilock_unlock(ml), 0);
    dlock_multilock_free(ml);
}

static void test_cancel_wakes_a_waiting_lock(void **state)
{
    (void)state;
    const char *names[2] = {"cancel:a", "cancel:b"};
    dlock_multilock *m1 = multi(fam_cli, names, 2), *m2 = multi(fam_cli, names, 2);
    assert_int_equal(dlock_multilock_lock(m1, 0, 0), 0);
    ml_arg a = {m2, DLOCK_WAIT_FOREVER, 1, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, lock_thread, &a), 0);
    dlock__sleep_ms(100);
    int64_t t0 = dlock__now_ms();
    dlock_multilock_cancel(m2);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    assert_true(a.at_ms - t0 < FAM_SLACK_MS);
    int64_t t1 = dlock__now_ms();
    assert_int_equal(dlock_multilock_lock(m2, 100, 0), DLOCK_ETIMEOUT);
    assert_true(dlock__now_ms() - t1 >= 95);
    assert_int_equal(dlock_multilock_unlock(m1), 0);
    dlock_multilock_free(m1);
    dlock_multilock_free(m2);
}

static void test_bad_input_is_refused(void **state)
{
    (void)state;
    dlock_multilock *ml = NULL;
    const char *dup[2] = {"d", "d"}, *empty[2] = {"d", ""}, *one[1] = {"d"};
    assert_int_equal(dlock_multilock_new(fam_cli, dup, 2, &ml), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_new(fam_cli, empty, 2, &ml), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_new(fam_cli, one, 0, &ml), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_new(fam_cli, one, DLOCK_MULTILOCK_MAX + 1, &ml), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_new(fam_cli, NULL, 1, &ml), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_new(NULL, one, 1, &ml), DLOCK_EINVAL);
    assert_null(ml);
    ml = multi(fam_cli, one, 1);
    assert_int_equal(dlock_multilock_lock(ml, 0, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_lock(ml, -4, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_multilock_unlock(ml), DLOCK_ENOTHELD);
    dlock_multilock_free(ml);
    dlock_multilock_free(NULL);
}

static const fam_role roles[] = {{"dying_holder", dying_holder}, {NULL, NULL}};

int main(int argc, char **argv)
{
    fam_child_dispatch(argc, argv, roles);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_slot_names_are_taken_atomically),
        cmocka_unit_test(test_hold_count_is_the_servers),
        cmocka_unit_test(test_cross_slot_names_roll_back_and_wait_for_a_reentrant_lock),
        cmocka_unit_test(test_opposite_name_orders_do_not_deadlock),
        cmocka_unit_test(test_watchdog_keeps_all_names),
        cmocka_unit_test(test_validity_ends_at_the_deadline_even_with_the_server_frozen),
        cmocka_unit_test(test_killed_holder_names_return_within_the_lease),
        cmocka_unit_test(test_cancel_wakes_a_waiting_lock),
        cmocka_unit_test(test_bad_input_is_refused),
    };
    return cmocka_run_group_tests(tests, fam_setup, fam_teardown);
}
