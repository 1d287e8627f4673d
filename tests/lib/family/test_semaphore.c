/* test_semaphore.c: the bounded owner-tracked semaphore and expirable
 * permits against a real redis-server: the N bound, release above what is
 * held refused with DLOCK_ENOTHELD, waits woken by pub/sub, timeout, cancel,
 * watchdog renewal past several leases, a kill -9'd holder's permits coming
 * back within its lease, permit expiry/extension, and never more than N
 * holders across 2 processes x 8 threads (counted in Redis). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_internal.h"
#include "dlock/semaphore.h"
#include "fam_support.h"
#include "util.h"


static dlock_semaphore *sem(dlock_client *c, const char *name, int64_t n, int64_t lease)
{
    dlock_semaphore_options o;
    dlock_semaphore_options_init(&o);
    o.permits = n;
    o.lease_ms = lease;
    dlock_semaphore *s = NULL;
    assert_int_equal(dlock_semaphore_new(c, name, &o, &s), 0);
    return s;
}

static int64_t available(dlock_semaphore *s)
{
    int64_t n = -1;
    assert_int_equal(dlock_semaphore_available(s, &n), 0);
    return n;
}

static void test_permits_are_bounded_by_n(void **state)
{
    (void)state;
    dlock_semaphore *a = sem(fam_cli, "sem:basic", 3, 0), *b = sem(fam_cli, "sem:basic", 3, 0);
    assert_int_equal(available(a), 3);
    assert_int_equal(dlock_semaphore_acquire(a, 2, 0), 0);
    assert_int_equal(dlock_semaphore_acquire(b, 2, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_semaphore_acquire(b, 1, 0), 0);
    assert_int_equal(available(a), 0);
    assert_int_equal(dlock_semaphore_held(a), 2);
    assert_int_equal(dlock_semaphore_release(a, 2), 0);
    assert_int_equal(available(a), 2);
    assert_int_equal(dlock_semaphore_release(b, 1), 0);
    assert_int_equal(available(a), 3);
    dlock_semaphore_free(a);
    dlock_semaphore_free(b);
}

static void test_release_above_what_is_held_is_refused(void **state)
{
    (void)state;
    dlock_semaphore *a = sem(fam_cli, "sem:limit", 2, 0);
    assert_int_equal(dlock_semaphore_release(a, 1), DLOCK_ENOTHELD); /* holds none */
    assert_int_equal(dlock_semaphore_acquire(a, 1, 0), 0);
    assert_int_equal(dlock_semaphore_release(a, 2), DLOCK_ENOTHELD);
    assert_int_equal(available(a), 1);
    /* a permit id nobody holds cannot be "released" into the pool */
    assert_int_equal(dlock_permits_release(a, "0123456789abcdef0123456789abcdef"), DLOCK_ENOTHELD);
    assert_int_equal(available(a), 1);
    assert_int_equal(dlock_semaphore_release(a, 1), 0);
    assert_int_equal(dlock_semaphore_release(a, 1), DLOCK_ENOTHELD);
    assert_int_equal(available(a), 2);
    char key[128];
    const char *used[3] = {"HGET", key, "used"};
    snprintf(key, sizeof(key), "{%ssem:limit}:sem", fam_prefix());
    assert_int_equal(fam_int(&fam_srv, 3, used), 0);
    dlock_semaphore_free(a);
}

static void test_bad_input_is_refused(void **state)
{
    (void)state;
    dlock_semaphore_options o;
    dlock_semaphore_options_init(&o);
    dlock_semaphore *s = NULL;
    o.permits = 0;
    assert_int_equal(dlock_semaphore_new(fam_cli, "sem:bad", &o, &s), DLOCK_EINVAL);
    o.permits = 2;
    o.lease_ms = -1;
    assert_int_equal(dlock_semaphore_new(fam_cli, "sem:bad", &o, &s), DLOCK_EINVAL);
    o.lease_ms = 0;
    assert_int_equal(dlock_semaphore_new(fam_cli, "", &o, &s), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_new(NULL, "x", &o, &s), DLOCK_EINVAL);
    assert_null(s);
    s = sem(fam_cli, "sem:bad", 2, 0);
    assert_int_equal(dlock_semaphore_acquire(s, 0, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_acquire(s, 3, 0), DLOCK_ELIMIT);
    assert_int_equal(dlock_semaphore_acquire(s, 1, -7), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_acquire(s, 1, 0), 0);
    /* the same name with another N is refused, nothing changes */
    dlock_semaphore *other = sem(fam_cli, "sem:bad", 5, 0);
    assert_int_equal(dlock_semaphore_acquire(other, 1, 0), DLOCK_EINVAL);
    assert_int_equal(available(s), 1);
    char id[DLOCK_PERMIT_ID_LEN];
    assert_int_equal(dlock_permits_acquire(s, 0, 0, id), DLOCK_EINVAL);
    assert_int_equal(dlock_permits_release(s, "not-a-permit"), DLOCK_EINVAL);
    assert_int_equal(dlock_permits_extend(s, NULL, 100), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_release(s, 1), 0);
    dlock_semaphore_free(other);
    dlock_semaphore_free(s);
    dlock_semaphore_free(NULL);
}

typedef struct acq_arg {
    dlock_semaphore *s;
    int64_t k, wait_ms;
    int rc;
    int64_t took_ms;
} acq_arg;

static void *acquire_thread(void *p)
{
    acq_arg *a = p;
    int64_t t0 = dlock__now_ms();
    a->rc = dlock_semaphore_acquire(a->s, a->k, a->wait_ms);
    a->took_ms = dlock__now_ms() - t0;
    return NULL;
}

static void test_release_wakes_a_waiter_and_waits_time_out(void **state)
{
    (void)state;
    dlock_semaphore *a = sem(fam_cli, "sem:wake", 2, 0), *b = sem(fam_cli, "sem:wake", 2, 0);
    assert_int_equal(dlock_semaphore_acquire(a, 2, 0), 0);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_semaphore_acquire(b, 1, 120), DLOCK_ETIMEOUT);
    int64_t took = dlock__now_ms() - t0;
    assert_true(took >= 115 && took < 120 + FAM_SLACK_MS);
    acq_arg w = {b, 2, 5000, 1, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, acquire_thread, &w), 0);
    dlock__sleep_ms(200);
    assert_int_equal(dlock_semaphore_release(a, 2), 0);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, 0);
    /* woken by the publish, not by a poll: well under the 2 s nap */
    assert_true(w.took_ms >= 190 && w.took_ms < 200 + FAM_SLACK_MS);
    assert_int_equal(dlock_semaphore_release(b, 2), 0);
    dlock_semaphore_free(a);
    dlock_semaphore_free(b);
}

static void test_cancel_wakes_a_waiting_acquire(void **state)
{
    (void)state;
    dlock_semaphore *a = sem(fam_cli, "sem:cancel", 1, 0), *b = sem(fam_cli, "sem:cancel", 1, 0);
    assert_int_equal(dlock_semaphore_acquire(a, 1, 0), 0);
    acq_arg w = {b, 1, -1, 1, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, acquire_thread, &w), 0);
    dlock__sleep_ms(150);
    dlock_semaphore_cancel(b);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_true(w.took_ms < 150 + FAM_SLACK_MS);
    assert_int_equal(dlock_semaphore_held(b), 0);
    assert_int_equal(dlock_semaphore_release(a, 1), 0);
    dlock_semaphore_free(a);
    dlock_semaphore_free(b);
}

static void test_watchdog_keeps_permits_past_several_leases(void **state)
{
    (void)state;
    /* the client's watchdog lease is 900 ms */
    dlock_semaphore *a = sem(fam_cli, "sem:wd", 1, 0), *b = sem(fam_cli, "sem:wd", 1, 0);
    assert_int_equal(dlock_semaphore_acquire(a, 1, 0), 0);
    dlock__sleep_ms(2500);
    assert_int_equal(dlock_semaphore_acquire(b, 1, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_semaphore_held(a), 1);
    assert_int_equal(dlock_semaphore_release(a, 1), 0);
    assert_int_equal(dlock_semaphore_acquire(b, 1, 0), 0);
    assert_int_equal(dlock_semaphore_release(b, 1), 0);
    dlock_semaphore_free(a);
    dlock_semaphore_free(b);
}

static void test_fixed_lease_permits_expire_and_release_reports_lost(void **state)
{
    (void)state;
    dlock_semaphore *a = sem(fam_cli, "sem:lease", 1, 200), *b = sem(fam_cli, "sem:lease", 1, 0);
    assert_int_equal(dlock_semaphore_acquire(a, 1, 0), 0);
    assert_int_equal(dlock_semaphore_acquire(b, 1, 1000), 0); /* after a's lease */
    assert_int_equal(dlock_semaphore_release(a, 1), DLOCK_ELOST);
    assert_int_equal(dlock_semaphore_held(a), 0);
    assert_int_equal(available(b), 0); /* a's late release gave nothing back */
    assert_int_equal(dlock_semaphore_release(b, 1), 0);
    dlock_semaphore_free(a);
    dlock_semaphore_free(b);
}

static void test_watchdog_detects_lost_permits_and_the_handle_recovers(void **state)
{
    (void)state;
    dlock_semaphore *s = sem(fam_cli, "sem:lost", 2, 0);
    assert_int_equal(dlock_semaphore_acquire(s, 2, 0), 0);
    char key[256];
    snprintf(key, sizeof(key), "{%ssem:lost}:sem:exp", fam_prefix());
    const char *del[2] = {"DEL", key};
    assert_int_equal(fam_int(&fam_srv, 2, del), 1); /* the holder record vanishes */
    dlock__sleep_ms(700);
    assert_int_equal(dlock_semaphore_held(s), 0); /* the watchdog noticed */
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_ELOST);
    assert_int_equal(dlock_semaphore_release(s, 1), DLOCK_ENOTHELD);
    /* the record was deleted behind the library's back, so the pool's
     * "used" count is stale: an admin resets the semaphore */
    char k1[256], k2[256];
    snprintf(k1, sizeof(k1), "{%ssem:lost}:sem", fam_prefix());
    snprintf(k2, sizeof(k2), "{%ssem:lost}:sem:cnt", fam_prefix());
    const char *reset[3] = {"DEL", k1, k2};
    assert_int_equal(fam_int(&fam_srv, 3, reset), 2);
    assert_int_equal(dlock_semaphore_acquire(s, 1, 0), 0);
    dlock__sleep_ms(1200); /* renewed again */
    assert_int_equal(available(s), 1);
    assert_int_equal(dlock_semaphore_release(s, 1), 0);
    dlock_semaphore_free(s);
}

static int crashing_holder(const test_server *srv_, const char *arg)
{
    (void)arg;
    dlock_client *c = fam_client(srv_, 0);
    if (!c) return 2;
    dlock_semaphore_options o;
    dlock_semaphore_options_init(&o);
    o.permits = 2;
    dlock_semaphore *s = NULL;
    if (dlock_semaphore_new(c, "sem:crash", &o, &s) || dlock_semaphore_acquire(s, 2, 0)) return 3;
    const char *set[3] = {"SET", "sem:crash-held", "1"};
    lt_cmd(srv_, NULL, 0, 3, set);
    for (;;) dlock__sleep_ms(1000); /* killed here, watchdog renewing */
}

static void test_killed_holder_permits_come_back_within_its_lease(void **state)
{
    (void)state;
    pid_t pid = fam_spawn("crashing_holder", &fam_srv, NULL);
    assert_true(pid > 0);
    const char *get[2] = {"GET", "sem:crash-held"};
    int64_t t0 = dlock__now_ms();
    while (fam_int(&fam_srv, 2, get) != 1 && dlock__now_ms() - t0 < 5000) dlock__sleep_ms(10);
    assert_int_equal(fam_int(&fam_srv, 2, get), 1);
    dlock__sleep_ms(1200); /* the child's watchdog renewed past one lease */
    dlock_semaphore *s = sem(fam_cli, "sem:crash", 2, 0);
    assert_int_equal(dlock_semaphore_acquire(s, 1, 0), DLOCK_EBUSY);
    fam_kill_child(pid);
    int64_t killed = dlock__now_ms();
    assert_int_equal(dlock_semaphore_acquire(s, 2, 5000), 0);
    int64_t took = dlock__now_ms() - killed;
    print_message("permits of the killed holder came back after %lld ms (lease 900)\n",
                  (long long)took);
    assert_true(took <= 900 + FAM_SLACK_MS);
    assert_int_equal(dlock_semaphore_release(s, 2), 0);
    dlock_semaphore_free(s);
}

static void test_expirable_permits_expire_unless_extended(void **state)
{
    (void)state;
    dlock_semaphore *s = sem(fam_cli, "sem:permits", 2, 0);
    char p1[DLOCK_PERMIT_ID_LEN], p2[DLOCK_PERMIT_ID_LEN], p3[DLOCK_PERMIT_ID_LEN];
    assert_int_equal(dlock_permits_acquire(s, 300, 0, p1), 0);
    assert_int_equal(dlock_permits_acquire(s, 300, 0, p2), 0);
    assert_string_not_equal(p1, p2);
    assert_int_equal(dlock_permits_acquire(s, 300, 0, p3), DLOCK_EBUSY);
    assert_int_equal(dlock_permits_extend(s, p1, 1500), 0);
    dlock__sleep_ms(450); /* p2 expired, p1 extended */
    assert_int_equal(available(s), 1);
    assert_int_equal(dlock_permits_extend(s, p2, 1000), DLOCK_ENOTHELD);
    assert_int_equal(dlock_permits_release(s, p2), DLOCK_ENOTHELD);
    /* a waiter is woken by p2's expiry (hint), not only by releases */
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_permits_acquire(s, 1000, 2000, p3), 0);
    assert_true(dlock__now_ms() - t0 < FAM_SLACK_MS);
    assert_int_equal(available(s), 0);
    assert_int_equal(dlock_permits_release(s, p1), 0);
    assert_int_equal(dlock_permits_release(s, p1), DLOCK_ENOTHELD);
    /* any handle knowing the id may release it */
    dlock_semaphore *other = sem(fam_cli, "sem:permits", 2, 0);
    assert_int_equal(dlock_permits_release(other, p3), 0);
    assert_int_equal(available(s), 2);
    dlock_semaphore_free(other);
    dlock_semaphore_free(s);
}

/* ---- N holders at most, 2 processes x 8 threads ---------------------- */

#define SEM_N 3
#define THREADS 8
#define RUN_MS 1500

typedef struct stress_arg {
    dlock_client *c;
    int64_t end_ms;
    long rounds;
    long violations;
    int rc;
} stress_arg;

static long long cmd_int(dlock_client *c, int argc, const char **argv)
{
    dlock__reply *r = NULL;
    long long v = LLONG_MIN;
    if (dlock__client_cmd(c, argc, argv, NULL, &r) == 0 && dlock__reply_kind(r) == DLOCK__R_INTEGER)
        v = dlock__reply_int(r);
    dlock__reply_free(r);
    return v;
}

static void *stress_thread(void *p)
{
    stress_arg *a = p;
    dlock_semaphore_options o;
    dlock_semaphore_options_init(&o);
    o.permits = SEM_N;
    dlock_semaphore *s = NULL;
    a->rc = dlock_semaphore_new(a->c, "sem:stress", &o, &s);
    const char *incr[2] = {"INCR", "sem:stress:inside"}, *decr[2] = {"DECR", "sem:stress:inside"};
    while (a->rc == 0 && dlock__now_ms() < a->end_ms) {
        int rc = dlock_semaphore_acquire(s, 1, 3000);
        if (rc == DLOCK_ETIMEOUT) continue; /* unfair, so possible under load: not a fault */
        if (rc) {
            a->rc = rc;
            break;
        }
        if (cmd_int(a->c, 2, incr) > SEM_N) a->violations++;
        dlock__sleep_ms(1);
        cmd_int(a->c, 2, decr);
        a->rc = dlock_semaphore_release(s, 1);
        a->rounds++;
    }
    dlock_semaphore_free(s);
    return NULL;
}

/* 8 threads on one client; returns rounds, or -1 on a failure/violation. */
static long stress(const test_server *s, int64_t end_ms, long *violations_out)
{
    dlock_client *c = fam_client(s, 0);
    if (!c) return -1;
    stress_arg a[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (stress_arg){.c = c, .end_ms = end_ms};
        pthread_create(&th[i], NULL, stress_thread, &a[i]);
    }
    long rounds = 0, bad = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        if (a[i].rc) bad = -1000000;
        rounds += a[i].rounds;
        bad += a[i].violations;
    }
    dlock_client_destroy(c);
    *violations_out = bad;
    return rounds;
}

static int stress_child(const test_server *srv_, const char *arg)
{
    int64_t end = strtoll(arg, NULL, 10);
    long v = 0;
    long rounds = stress(srv_, end, &v);
    return rounds > 0 && v == 0 ? 0 : 1;
}

static void test_never_more_than_n_holders_across_processes(void **state)
{
    (void)state;
    int64_t end = dlock__now_ms() + RUN_MS;
    char end_s[32];
    snprintf(end_s, sizeof(end_s), "%lld", (long long)end);
    pid_t pid = fam_spawn("stress_child", &fam_srv, end_s);
    assert_true(pid > 0);
    long v = 0;
    long rounds = stress(&fam_srv, end, &v);
    int child = fam_wait_child(pid);
    print_message("%ld rounds in this process, %ld violations\n", rounds, v);
    assert_int_equal(v, 0);
    assert_true(rounds > 0);
    assert_int_equal(child, 0);
    const char *get[2] = {"GET", "sem:stress:inside"};
    assert_int_equal(fam_int(&fam_srv, 2, get), 0);
    char key[128];
    snprintf(key, sizeof(key), "{%ssem:stress}:sem", fam_prefix());
    const char *used[3] = {"HGET", key, "used"};
    assert_int_equal(fam_int(&fam_srv, 3, used), 0);
}

static const fam_role roles[] = {{"crashing_holder", crashing_holder}, {"stress_child", stress_child}, {NULL, NULL}};

int main(int argc, char **argv)
{
    fam_child_dispatch(argc, argv, roles);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permits_are_bounded_by_n),
        cmocka_unit_test(test_release_above_what_is_held_is_refused),
        cmocka_unit_test(test_bad_input_is_refused),
        cmocka_unit_test(test_release_wakes_a_waiter_and_waits_time_out),
        cmocka_unit_test(test_cancel_wakes_a_waiting_acquire),
        cmocka_unit_test(test_watchdog_keeps_permits_past_several_leases),
        cmocka_unit_test(test_fixed_lease_permits_expire_and_release_reports_lost),
        cmocka_unit_test(test_watchdog_detects_lost_permits_and_the_handle_recovers),
        cmocka_unit_test(test_killed_holder_permits_come_back_within_its_lease),
        cmocka_unit_test(test_expirable_permits_expire_unless_extended),
        cmocka_unit_test(test_never_more_than_n_holders_across_processes),
    };
    return cmocka_run_group_tests(tests, fam_setup, fam_teardown);
}
