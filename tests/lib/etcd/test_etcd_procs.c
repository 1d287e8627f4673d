/* test_etcd_procs.c: etcd lock safety with real processes and real
 * faults, against one etcd member: exclusion of 4 threads in each of 2
 * processes (no client in the parent while it forks); a holder SIGSTOPped past its lease
 * loses the lock to another process and, resumed, is told (callback,
 * is_held false, ELOST) and its fenced write is refused; a holder killed
 * with -9 is replaced once its lease expires, within TTL + a bound; etcd
 * frozen (SIGSTOP) past the lease: keepalives fail for a whole lease and
 * the holder is told it lost the lock (callback, metrics, ELOST). */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd_support.h"
#include "servers.h"
#include "util.h"

#define WATCHDOG_MS 1000 /* etcd lease TTL 1 s, keepalive every 333 ms */

static test_etcd etcd;

static int setup(void **state)
{
    (void)state;
    test_prefix();
    return test_etcd_start(&etcd, 1);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_stop(&etcd);
    return 0;
}

/* ---- exclusion: 4 threads x 2 processes, non-atomic increments ------------- */

#define THREADS 4
#define ROUNDS 25

static volatile long *shared_counter;

static void *mx_worker(void *arg)
{
    dlock_client *c = arg;
    dlock_lock *l = es_lock(c, "mx", NULL, NULL);
    long errors = 0;
    for (int i = 0; i < ROUNDS; i++) {
        if (dlock_lock_try_lock(l, 20000, 0, NULL) != 0) {
            errors++;
            continue;
        }
        /* a read and a separate write (atomic only so TSan, which cannot see
         * the distributed lock, does not flag them): not an atomic increment */
        long v = __atomic_load_n(shared_counter, __ATOMIC_RELAXED);
        dlock__sleep_ms(1); /* widen the window a second holder would hit */
        __atomic_store_n(shared_counter, v + 1, __ATOMIC_RELAXED);
        if (dlock_lock_unlock(l) != 0) errors++;
    }
    dlock_lock_free(l);
    return (void *)errors;
}

static int mx_process(void *arg)
{
    (void)arg;
    dlock_client *c = es_client(etcd.url, 3000);
    if (!c) return 2;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, mx_worker, c);
    long errors = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        errors += (long)r;
    }
    dlock_client_destroy(c);
    return errors ? 1 : 0;
}

static void test_mutual_exclusion_across_threads_and_processes(void **state)
{
    (void)state;
    shared_counter = mmap(NULL, sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(shared_counter != MAP_FAILED);
    *shared_counter = 0;
    pid_t p1 = test_fork(mx_process, NULL), p2 = test_fork(mx_process, NULL);
    assert_int_equal(test_exit_code(p1), 0);
    assert_int_equal(test_exit_code(p2), 0);
    assert_int_equal(*shared_counter, 2 * THREADS * ROUNDS);
    munmap((void *)shared_counter, sizeof(long));
}

/* ---- SIGSTOP past the lease -------------------------------------------------- */

typedef struct stop_report {
    uint64_t fence;
    int lost_calls, held_after, guard_rc, unlock_rc;
} stop_report;

static int child_lost;

static void on_lost(dlock_lock *l, int reason, void *ud)
{
    (void)l;
    (void)ud;
    if (reason == DLOCK_ELOST) __atomic_add_fetch(&child_lost, 1, __ATOMIC_SEQ_CST);
}

typedef struct pipes {
    int up[2], down[2]; /* child -> parent, parent -> child */
} pipes;

static int stopped_holder(void *arg)
{
    pipes *p = arg;
    stop_report rep = {0};
    dlock_client *c = es_client(etcd.url, WATCHDOG_MS);
    dlock_lock *l = c ? es_lock(c, "stopped", on_lost, NULL) : NULL;
    if (!l || dlock_lock_try_lock(l, 0, 0, &rep.fence) != 0) return 2;
    if (write(p->up[1], &rep, sizeof(rep)) != sizeof(rep)) return 3;
    char go;
    if (read(p->down[0], &go, 1) != 1) return 4; /* blocks; we are stopped and resumed meanwhile */
    dlock__sleep_ms(WATCHDOG_MS);                /* the watchdog's next keepalive runs */
    rep.lost_calls = __atomic_load_n(&child_lost, __ATOMIC_SEQ_CST);
    rep.held_after = dlock_lock_is_held(l);
    rep.guard_rc = dlock_fence_guard(c, "stopped-res", rep.fence, NULL); /* the stale write */
    rep.unlock_rc = dlock_lock_unlock(l);
    if (write(p->up[1], &rep, sizeof(rep)) != sizeof(rep)) return 5;
    dlock_lock_free(l);
    dlock_client_destroy(c);
    return 0;
}

static void test_sigstopped_holder_learns_it_lost_the_lock(void **state)
{
    (void)state;
    pipes p;
    assert_int_equal(pipe(p.up), 0);
    assert_int_equal(pipe(p.down), 0);
    pid_t pid = test_fork(stopped_holder, &p);
    stop_report rep;
    assert_int_equal(read(p.up[0], &rep, sizeof(rep)), sizeof(rep));
    assert_int_equal(kill(pid, SIGSTOP), 0);
    dlock_client *c = es_client(etcd.url, WATCHDOG_MS);
    assert_non_null(c);
    dlock_lock *l = es_lock(c, "stopped", NULL, NULL);
    uint64_t fence = 0;
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_try_lock(l, 10000, 0, &fence), 0); /* once etcd expired its lease */
    assert_true(dlock__now_ms() - t0 < 3000);
    assert_true(fence > rep.fence);
    assert_int_equal(dlock_fence_guard(c, "stopped-res", fence, NULL), 0); /* the new holder writes */
    assert_int_equal(kill(pid, SIGCONT), 0);
    assert_int_equal(write(p.down[1], "g", 1), 1);
    assert_int_equal(read(p.up[0], &rep, sizeof(rep)), sizeof(rep));
    assert_int_equal(test_exit_code(pid), 0);
    assert_int_equal(rep.lost_calls, 1);
    assert_false(rep.held_after);
    assert_int_equal(rep.guard_rc, DLOCK_ESTALE);
    assert_int_equal(rep.unlock_rc, DLOCK_ELOST);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    for (int i = 0; i < 2; i++) {
        close(p.up[i]);
        close(p.down[i]);
    }
}

/* ---- kill -9 of the holder ------------------------------------------------------ */

static int hold_forever(void *arg)
{
    int fd = *(int *)arg;
    dlock_client *c = es_client(etcd.url, WATCHDOG_MS);
    dlock_lock *l = c ? es_lock(c, "kill9", NULL, NULL) : NULL;
    char ok = l && dlock_lock_try_lock(l, 0, 0, NULL) == 0 ? 'y' : 'n';
    if (write(fd, &ok, 1) != 1) return 3;
    for (;;) pause();
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
    int64_t at_ms;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_try_lock(w->l, 15000, 0, NULL);
    __atomic_store_n(&w->at_ms, dlock__now_ms(), __ATOMIC_SEQ_CST);
    return NULL;
}

static void test_kill9_holder_is_replaced_within_its_lease(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = test_fork(hold_forever, &p[1]);
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    assert_int_equal(ok, 'y');
    dlock_client *c = es_client(etcd.url, WATCHDOG_MS);
    assert_non_null(c);
    waiter w = {.l = es_lock(c, "kill9", NULL, NULL)};
    pthread_t t;
    pthread_create(&t, NULL, wait_for_it, &w);
    dlock__sleep_ms(1500); /* the holder keeps it alive meanwhile */
    bool locked = false;
    assert_int_equal(dlock_lock_is_locked(w.l, &locked), 0);
    assert_true(locked);
    assert_int_equal(__atomic_load_n(&w.at_ms, __ATOMIC_SEQ_CST), 0);
    int64_t killed = dlock__now_ms();
    kill(pid, SIGKILL);
    test_exit_code(pid);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    /* TTL 1 s from the last keepalive, etcd's 500 ms expiry sweep, + slack */
    int64_t took = w.at_ms - killed;
    assert_true(took < 1000 + 500 + 1000);
    assert_int_equal(dlock_lock_unlock(w.l), 0);
    dlock_lock_free(w.l);
    dlock_client_destroy(c);
    close(p[0]);
    close(p[1]);
}

/* ---- etcd frozen past the lease: keepalives fail for a whole TTL --------- */

static int frozen_lost;

static void on_frozen_lost(dlock_lock *l, int reason, void *ud)
{
    (void)l;
    (void)ud;
    if (reason == DLOCK_ELOST) __atomic_add_fetch(&frozen_lost, 1, __ATOMIC_SEQ_CST);
}

static void test_keepalives_failing_for_a_whole_lease_mark_the_lock_lost(void **state)
{
    (void)state;
    dlock_client *c = es_client(etcd.url, WATCHDOG_MS);
    assert_non_null(c);
    dlock_lock *l = es_lock(c, "frozen", on_frozen_lost, NULL);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    es_log_clear();
    test_etcd_pause(&etcd, 0, true); /* every keepalive now times out */
    int64_t t0 = dlock__now_ms(), deadline = t0 + 8000;
    while (__atomic_load_n(&frozen_lost, __ATOMIC_SEQ_CST) == 0 && dlock__now_ms() < deadline) dlock__sleep_ms(20);
    int64_t took = dlock__now_ms() - t0;
    test_etcd_pause(&etcd, 0, false);
    assert_int_equal(frozen_lost, 1);
    assert_true(took >= WATCHDOG_MS * 2 / 3); /* not before the lease could have run out */
    assert_true(took < WATCHDOG_MS + 1500);   /* nor long after: keepalives give up at its end */
    assert_false(dlock_lock_is_held(l));
    /* the keepalive in flight is bounded by the same deadline the loss was
     * declared at: it fails at that instant too, on the renewal thread,
     * maybe just after the lost callback ran */
    for (int i = 0; i < 100 && es_metric(c, "lock_watchdog_renew_fail_total") < 1; i++) dlock__sleep_ms(10);
    assert_true(es_metric(c, "lock_watchdog_renew_fail_total") >= 1);
    assert_int_equal(es_metric(c, "lock_lost_total"), 1);
    assert_true(es_log_contains("no renewal succeeded before its validity deadline: lost"));
    assert_true(es_log_contains("lock frozen")); /* the line names the object */
    assert_int_equal(dlock_lock_unlock(l), DLOCK_ELOST);
    dlock_lock_free(l);
    dlock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutual_exclusion_across_threads_and_processes),
        cmocka_unit_test(test_sigstopped_holder_learns_it_lost_the_lock),
        cmocka_unit_test(test_kill9_holder_is_replaced_within_its_lease),
        cmocka_unit_test(test_keepalives_failing_for_a_whole_lease_mark_the_lock_lost),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
