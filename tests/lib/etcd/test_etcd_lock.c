/* test_etcd_lock.c: the public lock API on an etcd:// client, against one
 * real etcd member started for this binary: the revision is the fencing
 * token, waiters served in revision order, timeouts and cancel leave the queue, explicit leases
 * expire, the watchdog (lease keepalive) keeps a lock, force unlock tells
 * the holder, the fence guard, status, metrics, and what is refused. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlock/semaphore.h"
#include "etcd_support.h"
#include "servers.h"
#include "util.h"

static test_etcd etcd;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    if (test_etcd_start(&etcd, 1) != 0) return -1;
    cl = es_client(etcd.url, 3000);
    return cl ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_destroy(cl);
    test_etcd_stop(&etcd);
    return 0;
}

/* ---- basics ---------------------------------------------------------------- */

static void test_acquire_release_and_the_revision_is_the_fence(void **state)
{
    (void)state;
    dlock_lock *a = es_lock(cl, "basic", NULL, NULL), *b = es_lock(cl, "basic", NULL, NULL);
    uint64_t f1 = 0, f2 = 0, fb = 0;
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, &f1), 0);
    assert_true(f1 > 0);
    assert_int_equal(dlock_lock_fence(a), f1);
    assert_true(dlock_lock_is_held(a));
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, NULL), DLOCK_EALREADY);
    assert_int_equal(dlock_lock_try_lock(b, 0, 0, &fb), DLOCK_EBUSY);
    assert_int_equal(fb, 0);
    assert_int_equal(es_contenders(&etcd, a), 1); /* the refused contender left the queue */
    bool mine = false, locked = false;
    assert_int_equal(dlock_lock_is_held_by_me(a, &mine), 0);
    assert_true(mine);
    assert_int_equal(dlock_lock_is_held_by_me(b, &mine), 0);
    assert_false(mine);
    assert_int_equal(dlock_lock_is_locked(b, &locked), 0);
    assert_true(locked);
    assert_int_equal(strlen(dlock_lock_owner(a)), 16); /* the lease id in hex */
    assert_int_equal(dlock_lock_unlock(a), 0);
    assert_false(dlock_lock_is_held(a));
    assert_int_equal(dlock_lock_unlock(a), DLOCK_ENOTHELD);
    assert_int_equal(dlock_lock_try_lock(b, 0, 0, &f2), 0);
    assert_true(f2 > f1); /* revisions only grow */
    assert_int_equal(dlock_lock_unlock(b), 0);
    assert_int_equal(dlock_lock_is_locked(b, &locked), 0);
    assert_false(locked);
    assert_int_equal(es_contenders(&etcd, a), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void test_status_shows_holder_ttl_and_revision(void **state)
{
    (void)state;
    dlock_lock *a = es_lock(cl, "status", NULL, NULL);
    dlock_lock_status st;
    assert_int_equal(dlock_lock_status_get(cl, "status", &st), 0);
    assert_false(st.locked);
    assert_int_equal(st.ttl_ms, -2);
    uint64_t f = 0;
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, &f), 0);
    assert_int_equal(dlock_lock_status_get(cl, "status", &st), 0);
    assert_true(st.locked);
    assert_string_equal(st.holder, dlock_lock_owner(a));
    assert_int_equal(st.last_fence, f);
    assert_true(st.ttl_ms > 0 && st.ttl_ms <= 3000);
    int64_t ttl = 0;
    assert_int_equal(dlock_lock_remaining_ttl(a, &ttl), 0);
    assert_true(ttl > 0 && ttl <= 3000);
    assert_int_equal(dlock_lock_unlock(a), 0);
    assert_int_equal(dlock_lock_remaining_ttl(a, &ttl), 0);
    assert_int_equal(ttl, -2);
    dlock_lock_free(a);
}

/* ---- waiting ------------------------------------------------------------------ */

#define WAITERS 4

typedef struct fifo {
    pthread_mutex_t mu;
    int order[WAITERS];
    int n;
} fifo;
static fifo served = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};

typedef struct waiter_arg {
    int index;
    int rc;
} waiter_arg;

static void *fifo_waiter(void *arg)
{
    waiter_arg *w = arg;
    dlock_lock *l = es_lock(cl, "fifo", NULL, NULL);
    w->rc = dlock_lock_try_lock(l, 15000, 0, NULL);
    if (w->rc == 0) {
        pthread_mutex_lock(&served.mu);
        served.order[served.n++] = w->index;
        pthread_mutex_unlock(&served.mu);
        dlock__sleep_ms(30);
        dlock_lock_unlock(l);
    }
    dlock_lock_free(l);
    return NULL;
}

static void test_waiters_are_served_in_revision_order(void **state)
{
    (void)state;
    dlock_lock *h = es_lock(cl, "fifo", NULL, NULL);
    assert_int_equal(dlock_lock_try_lock(h, 0, 0, NULL), 0);
    pthread_t t[WAITERS];
    waiter_arg a[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        a[i] = (waiter_arg){.index = i};
        pthread_create(&t[i], NULL, fifo_waiter, &a[i]);
        /* the next waiter starts only once this one is queued */
        int64_t deadline = dlock__now_ms() + 5000;
        while (es_contenders(&etcd, h) < i + 2 && dlock__now_ms() < deadline) dlock__sleep_ms(5);
        assert_int_equal(es_contenders(&etcd, h), i + 2);
    }
    assert_int_equal(dlock_lock_unlock(h), 0);
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(a[i].rc, 0);
    }
    assert_int_equal(served.n, WAITERS);
    for (int i = 0; i < WAITERS; i++) assert_int_equal(served.order[i], i);
    dlock_lock_free(h);
}

static void test_wait_times_out_and_leaves_the_queue(void **state)
{
    (void)state;
    dlock_lock *h = es_lock(cl, "timeout", NULL, NULL), *w = es_lock(cl, "timeout", NULL, NULL);
    assert_int_equal(dlock_lock_try_lock(h, 0, 0, NULL), 0);
    long long fails = es_metric(cl, "lock_acquire_fail_total{reason=\"timeout\"}");
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_try_lock(w, 300, 0, NULL), DLOCK_ETIMEOUT);
    int64_t took = dlock__now_ms() - t0;
    assert_true(took >= 300 && took < 1500);
    assert_int_equal(es_contenders(&etcd, h), 1);
    assert_int_equal(es_metric(cl, "lock_acquire_fail_total{reason=\"timeout\"}"), fails + 1);
    assert_int_equal(dlock_lock_unlock(h), 0);
    dlock_lock_free(h);
    dlock_lock_free(w);
}

typedef struct cancel_arg {
    dlock_lock *l;
    int rc;
    int64_t took_ms;
} cancel_arg;

static void *wait_forever(void *arg)
{
    cancel_arg *a = arg;
    int64_t t0 = dlock__now_ms();
    a->rc = dlock_lock_try_lock(a->l, DLOCK_WAIT_FOREVER, 0, NULL);
    a->took_ms = dlock__now_ms() - t0;
    return NULL;
}

static void test_cancel_from_another_thread(void **state)
{
    (void)state;
    dlock_lock *h = es_lock(cl, "cancel", NULL, NULL);
    cancel_arg a = {.l = es_lock(cl, "cancel", NULL, NULL)};
    assert_int_equal(dlock_lock_try_lock(h, 0, 0, NULL), 0);
    pthread_t t;
    pthread_create(&t, NULL, wait_forever, &a);
    dlock__sleep_ms(300);
    dlock_lock_cancel(a.l);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    assert_true(a.took_ms < 1300);
    assert_int_equal(es_contenders(&etcd, h), 1);
    assert_int_equal(dlock_lock_try_lock(a.l, 0, 0, NULL), DLOCK_EBUSY); /* the cancel was used up */
    assert_int_equal(dlock_lock_unlock(h), 0);
    dlock_lock_free(h);
    dlock_lock_free(a.l);
}

/* ---- leases, watchdog, loss ---------------------------------------------------- */

static void test_explicit_lease_expires_and_unlock_says_lost(void **state)
{
    (void)state;
    dlock_lock *a = es_lock(cl, "lease", NULL, NULL), *b = es_lock(cl, "lease", NULL, NULL);
    long long lost = es_metric(cl, "lock_lost_total");
    assert_int_equal(dlock_lock_try_lock(a, 0, 1000, NULL), 0);
    assert_true(dlock_lock_is_held(a));
    dlock__sleep_ms(1050);
    assert_false(dlock_lock_is_held(a)); /* local view: the lease has passed */
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_try_lock(b, 5000, 0, NULL), 0); /* etcd expired a's lease */
    assert_true(dlock__now_ms() - t0 < 2500);
    assert_int_equal(dlock_lock_unlock(a), DLOCK_ELOST);
    assert_int_equal(es_metric(cl, "lock_lost_total"), lost + 1);
    assert_int_equal(dlock_lock_unlock(b), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void test_watchdog_keeps_lock_past_three_timeouts(void **state)
{
    (void)state;
    dlock_client *c = es_client(etcd.url, 1000);
    assert_non_null(c);
    dlock_lock *a = es_lock(c, "watchdog", NULL, NULL), *b = es_lock(cl, "watchdog", NULL, NULL);
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, NULL), 0);
    dlock__sleep_ms(3500);
    bool mine = false;
    assert_true(dlock_lock_is_held(a));
    assert_int_equal(dlock_lock_is_held_by_me(a, &mine), 0);
    assert_true(mine);
    assert_int_equal(dlock_lock_try_lock(b, 0, 0, NULL), DLOCK_EBUSY);
    assert_true(es_metric(c, "lock_watchdog_renew_total") >= 6);
    assert_int_equal(es_metric(c, "lock_watchdog_renew_fail_total"), 0);
    assert_int_equal(dlock_lock_unlock(a), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_destroy(c);
}

static int lost_calls;

static void count_lost(dlock_lock *l, int reason, void *ud)
{
    (void)l;
    (void)ud;
    if (reason == DLOCK_ELOST) __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
}

static void test_force_unlock_tells_the_holder_it_lost(void **state)
{
    (void)state;
    dlock_client *c = es_client(etcd.url, 900);
    assert_non_null(c);
    dlock_lock *a = es_lock(c, "force", count_lost, NULL), *b = es_lock(cl, "force", NULL, NULL);
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, NULL), 0);
    es_log_clear();
    bool removed = false;
    assert_int_equal(dlock_force_unlock(cl, "force", DLOCK_LOCK_SIMPLE, &removed), 0);
    assert_true(removed);
    assert_true(es_log_contains("audit: force_unlock force"));
    assert_int_equal(dlock_lock_try_lock(b, 0, 0, NULL), 0); /* free at once */
    int64_t deadline = dlock__now_ms() + 2000;
    while (__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST) == 0 && dlock__now_ms() < deadline) dlock__sleep_ms(10);
    assert_int_equal(lost_calls, 1); /* the next keepalive found the lease gone */
    assert_false(dlock_lock_is_held(a));
    assert_int_equal(es_metric(c, "lock_lost_total"), 1);
    assert_int_equal(dlock_lock_unlock(a), DLOCK_ELOST);
    assert_int_equal(dlock_force_unlock(cl, "nosuch", DLOCK_LOCK_SIMPLE, &removed), 0);
    assert_false(removed);
    assert_int_equal(dlock_lock_unlock(b), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_destroy(c);
}

/* ---- fencing ---------------------------------------------------------------------- */

static void test_fence_guard_rejects_stale_tokens(void **state)
{
    (void)state;
    uint64_t hi = 0;
    assert_int_equal(dlock_fence_guard(cl, "res", 10, &hi), 0);
    assert_int_equal(hi, 10);
    assert_int_equal(dlock_fence_guard(cl, "res", 5, &hi), DLOCK_ESTALE);
    assert_int_equal(hi, 10);
    assert_int_equal(dlock_fence_guard(cl, "res", 10, &hi), 0); /* the same holder writes again */
    assert_int_equal(dlock_fence_guard(cl, "res", 11, &hi), 0);
    assert_int_equal(hi, 11);
    /* numeric, not textual: 9 < 10, and 2^63 + 1 > 2^63 */
    assert_int_equal(dlock_fence_guard(cl, "res", 9, NULL), DLOCK_ESTALE);
    assert_int_equal(dlock_fence_guard(cl, "big", (1ULL << 63), NULL), 0);
    assert_int_equal(dlock_fence_guard(cl, "big", (1ULL << 63) + 1, NULL), 0);
    assert_int_equal(dlock_fence_guard(cl, "big", (1ULL << 63), &hi), DLOCK_ESTALE);
    assert_int_equal(hi, (1ULL << 63) + 1);
    assert_int_equal(dlock_fence_guard(cl, "res", 0, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_fence_guard(cl, "", 1, NULL), DLOCK_EINVAL);
    /* real tokens: a later holder's write shuts out an earlier holder's */
    dlock_lock *a = es_lock(cl, "fenced", NULL, NULL);
    uint64_t t1 = 0, t2 = 0;
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, &t1), 0);
    assert_int_equal(dlock_lock_unlock(a), 0);
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, &t2), 0);
    assert_int_equal(dlock_fence_guard(cl, "fenced-res", t2, NULL), 0);
    assert_int_equal(dlock_fence_guard(cl, "fenced-res", t1, NULL), DLOCK_ESTALE);
    assert_int_equal(dlock_lock_unlock(a), 0);
    dlock_lock_free(a);
}

/* ---- what the etcd backend refuses, metrics, destroy ------------------------------ */

static void test_redis_only_features_say_not_supported(void **state)
{
    (void)state;
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = DLOCK_LOCK_REENTRANT;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(cl, "re", &lo, &l), DLOCK_ENOTSUP);
    assert_null(l);
    dlock_lock_options_init(&lo);
    lo.owner_id = "me";
    assert_int_equal(dlock_lock_new(cl, "re", &lo, &l), DLOCK_ENOTSUP);
    assert_int_equal(dlock_lock_new(cl, "", NULL, &l), DLOCK_EINVAL);
    l = es_lock(cl, "ext", NULL, NULL);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    assert_int_equal(dlock_lock_extend(l, 5000), DLOCK_ENOTSUP);
    assert_int_equal(dlock_lock_try_lock(l, 0, -1, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
    /* Redis-only objects on an etcd client fail cleanly, sending nothing */
    dlock_semaphore_options so;
    dlock_semaphore_options_init(&so);
    so.permits = 2;
    dlock_semaphore *s = NULL;
    int rc = dlock_semaphore_new(cl, "sem", &so, &s);
    if (rc == 0) rc = dlock_semaphore_acquire(s, 1, 0);
    assert_int_equal(rc, DLOCK_ENOTSUP);
    dlock_semaphore_free(s);
}

static void test_metrics_use_the_alert_rule_names(void **state)
{
    (void)state;
    dlock_client *c = es_client(etcd.url, 3000);
    assert_non_null(c);
    dlock_lock *a = es_lock(c, "metrics", NULL, NULL), *b = es_lock(c, "metrics", NULL, NULL);
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, NULL), 0);
    assert_int_equal(dlock_lock_try_lock(b, 0, 0, NULL), DLOCK_EBUSY);
    dlock__sleep_ms(20);
    assert_int_equal(dlock_lock_unlock(a), 0);
    assert_int_equal(es_metric(c, "lock_acquire_total"), 2);
    assert_int_equal(es_metric(c, "lock_acquire_fail_total{reason=\"busy\"}"), 1);
    assert_int_equal(es_metric(c, "lock_hold_seconds_count"), 1);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_destroy(c);
}

static void test_client_destroy_reports_held_locks(void **state)
{
    (void)state;
    dlock_client *c = es_client(etcd.url, 3000);
    assert_non_null(c);
    dlock_lock *a = es_lock(c, "destroy", NULL, NULL);
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, NULL), 0);
    es_log_clear();
    dlock_client_destroy(c);
    assert_true(es_log_contains("lock destroy (etcd) is held: not released"));
    dlock_lock_free(a); /* after the client: only frees memory */
}

/* A held etcd lock's handle may be freed after its client is destroyed
 * (the destroy reported it), or before (then nothing is left to report);
 * under ASan either order must not touch freed memory. */
static void test_handle_freed_before_or_after_its_client(void **state)
{
    (void)state;
    dlock_client *c = es_client(etcd.url, 3000);
    assert_non_null(c);
    dlock_lock *l = es_lock(c, "order-after", NULL, NULL);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    dlock_client_destroy(c);
    dlock_lock_free(l);
    c = es_client(etcd.url, 3000);
    assert_non_null(c);
    l = es_lock(c, "order-before", NULL, NULL);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    dlock_lock_free(l);
    dlock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_release_and_the_revision_is_the_fence),
        cmocka_unit_test(test_status_shows_holder_ttl_and_revision),
        cmocka_unit_test(test_waiters_are_served_in_revision_order),
        cmocka_unit_test(test_wait_times_out_and_leaves_the_queue),
        cmocka_unit_test(test_cancel_from_another_thread),
        cmocka_unit_test(test_explicit_lease_expires_and_unlock_says_lost),
        cmocka_unit_test(test_watchdog_keeps_lock_past_three_timeouts),
        cmocka_unit_test(test_force_unlock_tells_the_holder_it_lost),
        cmocka_unit_test(test_fence_guard_rejects_stale_tokens),
        cmocka_unit_test(test_redis_only_features_say_not_supported),
        cmocka_unit_test(test_metrics_use_the_alert_rule_names),
        cmocka_unit_test(test_client_destroy_reports_held_locks),
        cmocka_unit_test(test_handle_freed_before_or_after_its_client),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
