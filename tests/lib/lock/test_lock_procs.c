/* test_lock_procs.c: lock safety with real processes and real faults:
 * mutual exclusion of 8 threads in each of 2 processes (both kinds), a
 * holder killed with -9, a holder SIGSTOPped past its lease (lost-lock
 * callback, ELOST, fenced write rejected), a Redis restart while a waiter
 * waits, CLIENT KILL of the subscriber connection, and replica safety
 * (WAIT) with a paused replica. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "client_internal.h"
#include "lock_support.h"
#include "util.h"

static test_server srv;

static int setup(void **state)
{
    (void)state;
    test_prefix(); /* fixed before forking, so children share it */
    return lt_start(&srv);
}

static int teardown(void **state)
{
    (void)state;
    lt_stop(&srv);
    return 0;
}

/* ---- mutual exclusion: 8 threads x 2 processes, non-atomic increments ---- */

#define THREADS 8
#define ROUNDS 40

typedef struct mx_arg {
    dlock_client *c;
    dlock_lock_kind kind;
    int errors;
} mx_arg;

static void *mx_worker(void *arg)
{
    mx_arg *a = arg;
    dlock_lock *l = ls_lock(a->c, "mx", a->kind);
    const char *key = ls_key("mx:counter");
    for (int i = 0; i < ROUNDS; i++) {
        if (dlock_lock_try_lock(l, 10000, 0, NULL) != 0) {
            a->errors++;
            continue;
        }
        const char *get[2] = {"GET", key};
        dlock__reply *r = NULL;
        long long v = 0;
        if (dlock__client_cmd(a->c, 2, get, NULL, &r) == 0 && dlock__reply_kind(r) == DLOCK__R_STRING)
            v = strtoll(dlock__reply_str(r, NULL), NULL, 10);
        dlock__reply_free(r);
        char buf[32];
        snprintf(buf, sizeof(buf), "%lld", v + 1);
        const char *set[3] = {"SET", key, buf};
        if (dlock__client_cmd(a->c, 3, set, NULL, &r) != 0) a->errors++;
        dlock__reply_free(r);
        if (dlock_lock_unlock(l) != 0) a->errors++;
    }
    dlock_lock_free(l);
    return NULL;
}

static int mx_process(void *arg)
{
    dlock_lock_kind kind = *(dlock_lock_kind *)arg;
    dlock_client *c = ls_client(&srv, 1000);
    if (!c) return 2;
    pthread_t t[THREADS];
    mx_arg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (mx_arg){.c = c, .kind = kind};
        pthread_create(&t[i], NULL, mx_worker, &a[i]);
    }
    int errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        errors += a[i].errors;
    }
    dlock_client_destroy(c);
    return errors ? 1 : 0;
}

static void test_mutual_exclusion_across_threads_and_processes(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        dlock_lock_kind kind = k ? DLOCK_LOCK_REENTRANT : DLOCK_LOCK_SIMPLE;
        const char *set[3] = {"SET", ls_key("mx:counter"), "0"};
        assert_int_equal(lt_cmd(&srv, NULL, 0, 3, set), 0);
        pid_t p1 = test_fork(mx_process, &kind);
        pid_t p2 = test_fork(mx_process, &kind);
        assert_int_equal(test_exit_code(p1), 0);
        assert_int_equal(test_exit_code(p2), 0);
        char out[32] = "";
        const char *get[2] = {"GET", ls_key("mx:counter")};
        assert_int_equal(lt_cmd(&srv, out, sizeof(out), 2, get), 0);
        assert_int_equal(strtoll(out, NULL, 10), 2 * THREADS * ROUNDS);
    }
}

/* ---- kill -9 of a holder ------------------------------------------------ */

static int hold_forever(void *arg)
{
    int fd = *(int *)arg;
    dlock_client *c = ls_client(&srv, 600);
    dlock_lock *l = c ? ls_lock(c, "kill9", DLOCK_LOCK_REENTRANT) : NULL;
    char ok = l && dlock_lock_try_lock(l, 0, 0, NULL) == 0 ? 'y' : 'n';
    if (write(fd, &ok, 1) != 1) return 3;
    for (;;) pause();
}

static void test_kill9_holder_is_replaced_within_lease(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = test_fork(hold_forever, &p[1]);
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    assert_int_equal(ok, 'y');
    dlock__sleep_ms(700); /* the watchdog renewed at least once */
    dlock_client *c = ls_client(&srv, 600);
    dlock_lock *l = ls_lock(c, "kill9", DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), DLOCK_EBUSY);
    kill(pid, SIGKILL);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(test_exit_code(pid), 128 + SIGKILL);
    assert_int_equal(dlock_lock_try_lock(l, 3000, 0, NULL), 0);
    int64_t took = dlock__now_ms() - t0;
    if (took > 600 + 400) fail_msg("took %lld ms after kill -9 (lease 600 ms)", (long long)took);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    close(p[0]);
    close(p[1]);
}

/* ---- SIGSTOP past the lease ---------------------------------------------- */

static atomic_int lost_calls;

static void on_lost(dlock_lock *l, int reason, void *ud)
{
    (void)l;
    (void)ud;
    if (reason == DLOCK_ELOST) lost_calls++;
}

typedef struct stop_arg {
    int to_parent, from_parent;
} stop_arg;

/* Holds "stopped" in watchdog mode, reports its fence, waits for "go"
 * (sent after SIGCONT), then checks what it was told. Exit code bits:
 * 1 no callback, 2 still is_held, 4 fenced write accepted, 8 unlock not ELOST. */
static int stopped_holder(void *arg)
{
    stop_arg *a = arg;
    dlock_client *c = ls_client(&srv, 600);
    if (!c) return 64;
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.on_lost = on_lost;
    dlock_lock *l = NULL;
    uint64_t fence = 0;
    if (dlock_lock_new(c, "stop1", &lo, &l) != 0 || dlock_lock_try_lock(l, 0, 0, &fence) != 0) return 65;
    if (write(a->to_parent, &fence, sizeof(fence)) != sizeof(fence)) return 66;
    char go;
    if (read(a->from_parent, &go, 1) != 1) return 67;
    for (int i = 0; i < 100 && !lost_calls; i++) dlock__sleep_ms(20);
    int bits = 0;
    if (!lost_calls) bits |= 1;
    if (dlock_lock_is_held(l)) bits |= 2;
    if (dlock_fence_guard(c, "stop1:store", fence, NULL) != DLOCK_ESTALE) bits |= 4;
    if (dlock_lock_unlock(l) != DLOCK_ELOST) bits |= 8;
    char *m = NULL;
    if (dlock_metrics_render(c, &m) != 0 || !strstr(m, "lock_lost_total 1\n")) bits |= 16;
    dlock_free(m);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    return bits;
}

static void test_sigstopped_holder_learns_it_lost_the_lock(void **state)
{
    (void)state;
    int up[2], down[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    stop_arg a = {.to_parent = up[1], .from_parent = down[0]};
    pid_t pid = test_fork(stopped_holder, &a);
    uint64_t old_fence = 0;
    assert_int_equal(read(up[0], &old_fence, sizeof(old_fence)), sizeof(old_fence));
    kill(pid, SIGSTOP);
    dlock_client *c = ls_client(&srv, 600);
    dlock_lock *l = ls_lock(c, "stop1", DLOCK_LOCK_SIMPLE);
    uint64_t fence = 0;
    assert_int_equal(dlock_lock_try_lock(l, 3000, 5000, &fence), 0); /* after its lease ran out */
    assert_true(fence > old_fence);
    assert_int_equal(dlock_fence_guard(c, "stop1:store", fence, NULL), 0); /* new holder writes */
    kill(pid, SIGCONT);
    char go = 'g';
    assert_int_equal(write(down[1], &go, 1), 1);
    assert_int_equal(test_exit_code(pid), 0);
    assert_true(dlock_lock_is_held(l)); /* the resumed holder did not disturb us */
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    close(up[0]);
    close(up[1]);
    close(down[0]);
    close(down[1]);
}

/* ---- Redis restart while a waiter waits ---------------------------------- */

typedef struct waiter_arg {
    dlock_lock *l;
    int rc;
    int64_t done_ms;
} waiter_arg;

static void *wait_for_lock(void *arg)
{
    waiter_arg *w = arg;
    w->rc = dlock_lock_try_lock(w->l, 8000, 0, NULL);
    w->done_ms = dlock__now_ms();
    return NULL;
}

static void test_redis_restart_while_a_waiter_waits(void **state)
{
    (void)state;
    LT_STANDALONE_ONLY("restarts its one server");
    dlock_client *holder = ls_client(&srv, 600);
    dlock_client *c = ls_client(&srv, 600);
    dlock_lock *h = ls_lock(holder, "restart1", DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(h, 0, 20000, NULL), 0); /* 20 s lease */
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = DLOCK_LOCK_REENTRANT;
    lo.owner_id = "restart-waiter"; /* unlocked from this thread below */
    waiter_arg w = {0};
    assert_int_equal(dlock_lock_new(c, "restart1", &lo, &w.l), 0);
    pthread_t t;
    pthread_create(&t, NULL, wait_for_lock, &w);
    dlock__sleep_ms(300);
    test_server_kill(&srv); /* `save ""`: the restarted server is empty */
    assert_int_equal(test_redis_restart(&srv, NULL), 0);
    int64_t up = dlock__now_ms();
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    assert_true(w.done_ms - up < 3000); /* the reconnect woke it, not the 20 s lease */
    assert_int_equal(dlock_lock_unlock(w.l), 0);
    assert_int_equal(dlock_lock_unlock(h), DLOCK_ELOST);
    dlock_lock_free(w.l);
    dlock_lock_free(h);
    dlock_client_destroy(c);
    dlock_client_destroy(holder);
}

/* ---- CLIENT KILL of the subscriber ------------------------------------ */

static void test_subscriber_killed_waiters_wake_by_ttl_then_by_message(void **state)
{
    (void)state;
    dlock_client *c = ls_client(&srv, 600);
    dlock_lock *h = ls_lock(c, "kill1", DLOCK_LOCK_REENTRANT);
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = DLOCK_LOCK_REENTRANT;
    lo.owner_id = "other-owner";
    waiter_arg w = {0};
    assert_int_equal(dlock_lock_new(c, "kill1", &lo, &w.l), 0);
    assert_int_equal(dlock_lock_try_lock(h, 0, 800, NULL), 0); /* never unlocked in time */
    pthread_t t;
    int64_t t0 = dlock__now_ms();
    pthread_create(&t, NULL, wait_for_lock, &w);
    dlock__sleep_ms(100);
    const char *kill_ps[4] = {"CLIENT", "KILL", "TYPE", "pubsub"};
    long long killed = 0; /* on a cluster: on every node (the one of kill1's slot among them) */
    assert_int_equal(lt_cmd_each(&srv, &killed, 4, kill_ps), 0);
    assert_true(killed >= 1);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0); /* woke by the TTL */
    assert_true(w.done_ms - t0 >= 600);
    assert_int_equal(dlock_lock_unlock(h), DLOCK_ELOST);
    assert_int_equal(dlock_lock_unlock(w.l), 0);
    /* the subscriber reconnected: a release wakes the next waiter at once */
    assert_int_equal(dlock_lock_try_lock(h, 0, 5000, NULL), 0);
    pthread_create(&t, NULL, wait_for_lock, &w);
    dlock__sleep_ms(850); /* between rechecks: only the message wakes it soon */
    int64_t released = dlock__now_ms();
    assert_int_equal(dlock_lock_unlock(h), 0);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    if (w.done_ms - released >= 400) fail_msg("woken %lld ms after the unlock", (long long)(w.done_ms - released));
    assert_int_equal(dlock_lock_unlock(w.l), 0);
    dlock_lock_free(w.l);
    dlock_lock_free(h);
    dlock_client_destroy(c);
}

/* ---- replica safety ------------------------------------------------------ */

static void test_too_few_replica_acks_releases_and_reports(void **state)
{
    (void)state;
    LT_STANDALONE_ONLY("pauses a replica of its one server");
    test_server rep;
    assert_int_equal(test_redis_start(&rep, NULL), 0);
    assert_int_equal(test_redis_replicate(&rep, &srv), 0);
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.wait_replicas = 1;
    o.wait_replicas_timeout_ms = 1000; /* generous: sanitizer builds are slow */
    dlock_client *c = ls_client_opts(&srv, &o);
    assert_non_null(c);
    dlock_lock *l = ls_lock(c, "repl1", DLOCK_LOCK_SIMPLE);
    assert_int_equal(dlock_lock_try_lock(l, 0, 2000, NULL), 0); /* replica acked */
    assert_int_equal(dlock_lock_unlock(l), 0);
    test_server_pause(&rep, true);
    assert_int_equal(dlock_lock_try_lock(l, 0, 2000, NULL), DLOCK_ENOTREPL);
    assert_false(dlock_lock_is_held(l));
    assert_false(ls_exists(&srv, ls_key("repl1"))); /* released again */
    test_server_pause(&rep, false);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    test_server_stop(&rep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutual_exclusion_across_threads_and_processes),
        cmocka_unit_test(test_kill9_holder_is_replaced_within_lease),
        cmocka_unit_test(test_sigstopped_holder_learns_it_lost_the_lock),
        cmocka_unit_test(test_redis_restart_while_a_waiter_waits),
        cmocka_unit_test(test_subscriber_killed_waiters_wake_by_ttl_then_by_message),
        cmocka_unit_test(test_too_few_replica_acks_releases_and_reports),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
