/* test_redlock.c: RedLock with 3 independent redis-servers started by the
 * test: quorum grants, validity, parallel requests (a frozen node costs one
 * command timeout, not one per node), one node down still works, two down
 * fails fast with DLOCK_ENOQUORUM, extension needs a quorum, a killed
 * holder's lock comes back after its lease, fencing tokens grow, threads
 * exclude each other, and the restart-without-persistence hazard: an
 * immediate restart breaks mutual exclusion (shown), the delayed-restart
 * rule keeps it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "dlock/redlock.h"
#include "fam_support.h"
#include "logcap.h"
#include "util.h"

#define N 3
static test_server srv[N];

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) {
        if (test_redis_start(&srv[i], NULL) != 0) return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) test_server_stop(&srv[i]);
    return 0;
}

static dlock_redlock *group_timeout(int64_t command_timeout_ms)
{
    const char *u[N] = {srv[0].url, srv[1].url, srv[2].url};
    dlock_redlock_options o;
    dlock_redlock_options_init(&o);
    if (command_timeout_ms > 0) o.command_timeout_ms = command_timeout_ms;
    o.urls = u;
    o.n_urls = N;
    o.key_prefix = test_prefix();
    o.retry_delay_ms = 20;
    dlock_redlock *rl = NULL;
    assert_int_equal(dlock_redlock_new(&o, &rl), 0);
    return rl;
}

static dlock_redlock *group(void)
{
    return group_timeout(0);
}

static void ensure_up(int i)
{
    if (srv[i].pid > 0) return;
    assert_int_equal(test_redis_restart(&srv[i], NULL), 0);
}

static void test_quorum_grants_and_excludes(void **state)
{
    (void)state;
    dlock_redlock *rl = group();
    dlock_redlock_hold *h = NULL, *h2 = NULL;
    assert_int_equal(dlock_redlock_lock(rl, "rl:basic", 1000, 0, &h), 0);
    assert_int_equal(dlock_redlock_nodes_held(h), 3);
    int64_t v = dlock_redlock_validity_ms(h);
    assert_true(v > 1000 - 12 - FAM_SLACK_MS && v <= 1000 - 12); /* lease - elapsed - drift (10 + 2) */
    uint64_t f1 = dlock_redlock_fence(h);
    assert_true(f1 >= 1);
    assert_int_equal(dlock_redlock_lock(rl, "rl:basic", 1000, 0, &h2), DLOCK_EBUSY);
    assert_null(h2);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_redlock_lock(rl, "rl:basic", 1000, 150, &h2), DLOCK_ETIMEOUT);
    assert_true(dlock__now_ms() - t0 < 150 + FAM_SLACK_MS);
    assert_int_equal(dlock_redlock_unlock(h), 0);
    /* gone from every node */
    char key[128];
    for (int i = 0; i < N; i++) {
        const char *ex[2] = {"EXISTS", fam_key("rl:basic", key, sizeof(key))};
        assert_int_equal(fam_int(&srv[i], 2, ex), 0);
    }
    assert_int_equal(dlock_redlock_lock(rl, "rl:basic", 1000, 0, &h2), 0);
    assert_true(dlock_redlock_fence(h2) > f1);
    assert_int_equal(dlock_redlock_unlock(h2), 0);
    dlock_redlock_free(rl);
}

/* RedLock is over independent masters: a Cluster (or Sentinel) URL among
 * the members is refused with EURL and a log line that says why, and
 * nothing is created. */
static void test_cluster_member_url_is_refused(void **state)
{
    (void)state;
    dlock_redlock_options o;
    dlock_redlock_options_init(&o);
    const char *u[3] = {srv[0].url, "redis-cluster://127.0.0.1:7000,127.0.0.1:7001", srv[2].url};
    o.urls = u;
    o.n_urls = 3;
    o.log_fn = test_log_capture;
    test_log_clear();
    dlock_redlock *rl = NULL;
    assert_int_equal(dlock_redlock_new(&o, &rl), DLOCK_EURL);
    assert_null(rl);
    if (!test_log_contains("member 2 is a Cluster URL"))
        fail_msg("no log line explains the refusal of the cluster member");
    assert_true(test_log_contains("RedLock across clusters is not supported"));
}

static void test_bad_input_is_refused(void **state)
{
    (void)state;
    dlock_redlock_options o;
    dlock_redlock_options_init(&o);
    dlock_redlock *rl = NULL;
    assert_int_equal(dlock_redlock_new(&o, &rl), DLOCK_EINVAL); /* no urls */
    const char *bad[2] = {"redis://127.0.0.1:1", "nonsense://x"};
    o.urls = bad;
    o.n_urls = 2;
    assert_int_equal(dlock_redlock_new(&o, &rl), DLOCK_EURL);
    const char *sent[1] = {"redis-sentinel://127.0.0.1:26379/m"};
    o.urls = sent;
    o.n_urls = 1;
    assert_int_equal(dlock_redlock_new(&o, &rl), DLOCK_EURL);
    o.urls = bad;
    o.n_urls = 1;
    o.drift_factor = 0.7;
    assert_int_equal(dlock_redlock_new(&o, &rl), DLOCK_EINVAL);
    assert_null(rl);
    rl = group();
    dlock_redlock_hold *h = NULL;
    assert_int_equal(dlock_redlock_lock(rl, "", 1000, 0, &h), DLOCK_EINVAL);
    assert_int_equal(dlock_redlock_lock(rl, "x", 5, 0, &h), DLOCK_EINVAL);
    assert_int_equal(dlock_redlock_lock(rl, "x", 1000, -5, &h), DLOCK_EINVAL);
    assert_int_equal(dlock_redlock_unlock(NULL), 0); /* a destructor: NULL is a no-op */
    assert_int_equal(dlock_redlock_extend(NULL, 100), DLOCK_EINVAL);
    dlock_redlock_free(rl);
    dlock_redlock_free(NULL);
}

static void test_one_node_down_still_locks(void **state)
{
    (void)state;
    test_server_kill(&srv[1]);
    dlock_redlock *rl = group();
    dlock_redlock_hold *h = NULL;
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_redlock_lock(rl, "rl:one-down", 1000, 0, &h), 0);
    assert_true(dlock__now_ms() - t0 < FAM_SLACK_MS);
    assert_int_equal(dlock_redlock_nodes_held(h), 2);
    assert_int_equal(dlock_redlock_extend(h, 1000), 0);
    assert_int_equal(dlock_redlock_unlock(h), 0);
    dlock_redlock_free(rl);
    ensure_up(1);
}

static void test_two_nodes_down_fail_fast_with_enoquorum(void **state)
{
    (void)state;
    test_server_kill(&srv[0]);
    test_server_kill(&srv[2]);
    dlock_redlock *rl = group();
    dlock_redlock_hold *h = NULL;
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_redlock_lock(rl, "rl:two-down", 1000, 0, &h), DLOCK_ENOQUORUM);
    assert_true(dlock__now_ms() - t0 < FAM_SLACK_MS);
    t0 = dlock__now_ms();
    assert_int_equal(dlock_redlock_lock(rl, "rl:two-down", 1000, 400, &h), DLOCK_ENOQUORUM);
    int64_t took = dlock__now_ms() - t0;
    assert_true(took < 400 + FAM_SLACK_MS); /* bounded by wait_ms + one attempt */
    assert_null(h);
    /* the surviving node was released: nothing is left behind */
    char key[128];
    const char *ex[2] = {"EXISTS", fam_key("rl:two-down", key, sizeof(key))};
    assert_int_equal(fam_int(&srv[1], 2, ex), 0);
    dlock_redlock_free(rl);
    ensure_up(0);
    ensure_up(2);
}

static void test_extension_needs_a_quorum(void **state)
{
    (void)state;
    dlock_redlock *rl = group();
    dlock_redlock_hold *h = NULL;
    assert_int_equal(dlock_redlock_lock(rl, "rl:extend", 500, 0, &h), 0);
    assert_int_equal(dlock_redlock_extend(h, 2000), 0);
    assert_true(dlock_redlock_validity_ms(h) > 1500);
    test_server_kill(&srv[0]);
    test_server_kill(&srv[1]);
    int64_t before = dlock_redlock_validity_ms(h);
    assert_int_equal(dlock_redlock_extend(h, 5000), DLOCK_ENOQUORUM);
    assert_true(dlock_redlock_validity_ms(h) <= before); /* not extended */
    ensure_up(0);
    ensure_up(1);
    /* restarted empty: only node 2 still has our token -> lost */
    assert_int_equal(dlock_redlock_extend(h, 1000), DLOCK_ELOST);
    assert_int_equal(dlock_redlock_unlock(h), DLOCK_ELOST);
    dlock_redlock_free(rl);
}

static void test_frozen_node_costs_one_timeout_not_one_per_node(void **state)
{
    (void)state;
    dlock_redlock *rl = group_timeout(300);
    dlock_redlock_hold *h = NULL;
    /* warm the connections, then freeze two nodes: requests run in
     * parallel, so each round (acquire, then release) costs one command
     * timeout, not one per frozen node */
    assert_int_equal(dlock_redlock_lock(rl, "rl:frozen-warm", 1000, 0, &h), 0);
    assert_int_equal(dlock_redlock_unlock(h), 0);
    test_server_pause(&srv[0], true);
    test_server_pause(&srv[2], true);
    int64_t t0 = dlock__now_ms();
    int rc = dlock_redlock_lock(rl, "rl:frozen", 1000, 0, &h);
    int64_t took = dlock__now_ms() - t0;
    test_server_pause(&srv[0], false);
    test_server_pause(&srv[2], false);
    dlock_redlock_free(rl);
    print_message("attempt with 2 frozen nodes took %lld ms (2 rounds x 300 ms timeout)\n",
                  (long long)took);
    assert_int_equal(rc, DLOCK_ENOQUORUM);
    /* parallel: 2 x 300 ms; serial requests would need 2 x 2 x 300 ms */
    assert_true(took >= 580 && took < 1100);
}

typedef struct rl_wait_arg {
    dlock_redlock *rl;
    int rc;
    int64_t at_ms;
} rl_wait_arg;

static void *lock_forever(void *p)
{
    rl_wait_arg *a = p;
    dlock_redlock_hold *h = NULL;
    a->rc = dlock_redlock_lock(a->rl, "rl:cancel", 1000, DLOCK_WAIT_FOREVER, &h);
    a->at_ms = dlock__now_ms();
    if (h) dlock_redlock_unlock(h);
    return NULL;
}

static void test_cancel_wakes_a_waiting_lock(void **state)
{
    (void)state;
    dlock_redlock *rl = group();
    dlock_redlock_hold *h = NULL;
    assert_int_equal(dlock_redlock_lock(rl, "rl:cancel", 5000, 0, &h), 0);
    rl_wait_arg a = {rl, 1, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, lock_forever, &a), 0);
    dlock__sleep_ms(150);
    int64_t t0 = dlock__now_ms();
    dlock_redlock_cancel(rl);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    assert_true(a.at_ms - t0 < FAM_SLACK_MS);
    assert_int_equal(dlock_redlock_unlock(h), 0);
    dlock_redlock_free(rl);
}

static int crashing_holder(void *arg)
{
    (void)arg;
    dlock_redlock *rl = group();
    dlock_redlock_hold *h = NULL;
    if (dlock_redlock_lock(rl, "rl:crash", 600, 0, &h) != 0) return 2;
    const char *set[3] = {"SET", "rl:crash-held", "1"};
    test_redis_cmd(&srv[0], NULL, 0, 3, set);
    for (;;) dlock__sleep_ms(1000); /* killed here, holding the lock */
}

static void test_killed_holder_lock_returns_within_its_lease(void **state)
{
    (void)state;
    pid_t pid = test_fork(crashing_holder, NULL);
    assert_true(pid > 0);
    const char *get[2] = {"GET", "rl:crash-held"};
    int64_t t0 = dlock__now_ms();
    while (fam_int(&srv[0], 2, get) != 1 && dlock__now_ms() - t0 < 5000) dlock__sleep_ms(10);
    assert_int_equal(fam_int(&srv[0], 2, get), 1);
    fam_kill_child(pid);
    int64_t killed = dlock__now_ms();
    dlock_redlock *rl = group();
    dlock_redlock_hold *h = NULL;
    assert_int_equal(dlock_redlock_lock(rl, "rl:crash", 600, 0, &h), DLOCK_EBUSY);
    assert_int_equal(dlock_redlock_lock(rl, "rl:crash", 600, 3000, &h), 0);
    int64_t took = dlock__now_ms() - killed;
    print_message("lock of the killed holder came back after %lld ms (lease 600)\n",
                  (long long)took);
    assert_true(took <= 600 + FAM_SLACK_MS);
    assert_int_equal(dlock_redlock_unlock(h), 0);
    dlock_redlock_free(rl);
}

static void test_fencing_tokens_grow_across_holds_with_a_node_down(void **state)
{
    (void)state;
    dlock_redlock *rl = group();
    uint64_t last = 0;
    for (int i = 0; i < 6; i++) {
        if (i == 2) test_server_kill(&srv[2]);
        if (i == 4) {
            ensure_up(2); /* restarted empty: its counter starts again at 0 */
            test_server_kill(&srv[0]);
        }
        dlock_redlock_hold *h = NULL;
        assert_int_equal(dlock_redlock_lock(rl, "rl:fence", 1000, 500, &h), 0);
        uint64_t f = dlock_redlock_fence(h);
        assert_true(f > last); /* node 1 was in every quorum */
        last = f;
        assert_int_equal(dlock_redlock_unlock(h), 0);
    }
    ensure_up(0);
    dlock_redlock_free(rl);
}

typedef struct excl_arg {
    dlock_redlock *rl;
    atomic_int *inside;
    atomic_int *violations;
    int done;
} excl_arg;

static void *contender(void *p)
{
    excl_arg *a = p;
    for (int i = 0; i < 15; i++) {
        dlock_redlock_hold *h = NULL;
        if (dlock_redlock_lock(a->rl, "rl:excl", 2000, 5000, &h) != 0) continue;
        if (atomic_fetch_add(a->inside, 1) != 0) atomic_fetch_add(a->violations, 1);
        dlock__sleep_ms(2);
        atomic_fetch_sub(a->inside, 1);
        if (dlock_redlock_unlock(h) == 0) a->done++;
    }
    return NULL;
}

static void test_threads_exclude_each_other(void **state)
{
    (void)state;
    dlock_redlock *rl = group();
    atomic_int inside = 0, violations = 0;
    excl_arg a[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (excl_arg){rl, &inside, &violations, 0};
        assert_int_equal(pthread_create(&th[i], NULL, contender, &a[i]), 0);
    }
    int done = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        done += a[i].done;
    }
    assert_int_equal(atomic_load(&violations), 0);
    assert_true(done >= 40); /* most attempts got through */
    dlock_redlock_free(rl);
}

/* Threads of this process now (entries of /proc/self/task). */
static int thread_count(void)
{
    char line[64];
    FILE *f = fopen("/proc/self/status", "r");
    int n = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "Threads:", 8) == 0) n = (int)strtol(line + 8, NULL, 10);
    if (f) fclose(f);
    return n;
}

/* The thread count once it has come down to want, or after 2 s: a joined
 * thread's task leaves /proc a moment after pthread_join returns (the
 * kernel clears the joiner's tid word before it releases the task). */
static int thread_count_settled(int want)
{
    int n = thread_count();
    for (int i = 0; i < 200 && n != want; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        n = thread_count();
    }
    return n;
}

typedef struct sampler {
    atomic_bool stop;
    atomic_int max;
} sampler;

static void *sample_threads(void *p)
{
    sampler *s = p;
    while (!atomic_load(&s->stop)) {
        int n = thread_count();
        if (n > atomic_load(&s->max)) atomic_store(&s->max, n);
    }
    return NULL;
}

/* The group's requests run on workers it keeps: however many operations,
 * the process never has more threads than right after the group was made
 * (one worker per node), and freeing the group ends them. */
static void test_operations_start_no_thread(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) ensure_up(i);
    int before = thread_count();
    dlock_redlock *rl = group();
    sampler s = {.max = 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, sample_threads, &s), 0);
    int with_group = thread_count(); /* before + workers + the sampler */
    for (int i = 0; i < 30; i++) {
        dlock_redlock_hold *h = NULL;
        assert_int_equal(dlock_redlock_lock(rl, "threads", 2000, 0, &h), 0);
        assert_int_equal(dlock_redlock_extend(h, 2000), 0);
        assert_int_equal(dlock_redlock_unlock(h), 0);
    }
    atomic_store(&s.stop, true);
    pthread_join(th, NULL);
    printf("threads: %d before, %d with the group and the sampler, at most %d during 30 lock cycles\n", before,
           with_group, atomic_load(&s.max));
    assert_true(atomic_load(&s.max) <= with_group);
    dlock_redlock_free(rl);
    assert_int_equal(thread_count_settled(before), before);
}

/* The hazard the delayed-restart rule exists for: holder 1 has nodes 0+1
 * (node 2 down); node 0 restarts empty and node 2 comes back; holder 2 now
 * gets nodes 0+2, a quorum, while holder 1 still believes it holds. */
static void test_immediate_restart_without_persistence_breaks_exclusion(void **state)
{
    (void)state;
    dlock_redlock *rl = group();
    test_server_kill(&srv[2]);
    dlock_redlock_hold *h1 = NULL, *h2 = NULL;
    assert_int_equal(dlock_redlock_lock(rl, "rl:restart", 3000, 0, &h1), 0);
    assert_int_equal(dlock_redlock_nodes_held(h1), 2);
    test_server_kill(&srv[0]);
    ensure_up(0); /* immediately, no persistence: the key is gone */
    ensure_up(2);
    assert_int_equal(dlock_redlock_lock(rl, "rl:restart", 3000, 0, &h2), 0);
    assert_true(dlock_redlock_validity_ms(h1) > 0); /* both "hold" it now */
    print_message("hazard shown: two holders at once (validity %lld and %lld ms)\n",
                  (long long)dlock_redlock_validity_ms(h1),
                  (long long)dlock_redlock_validity_ms(h2));
    dlock_redlock_unlock(h2);
    dlock_redlock_unlock(h1);
    dlock_redlock_free(rl);
}

static void test_delayed_restart_rule_keeps_exclusion(void **state)
{
    (void)state;
    dlock_redlock *rl = group();
    test_server_kill(&srv[2]);
    dlock_redlock_hold *h1 = NULL, *h2 = NULL;
    const int64_t lease = 700;
    assert_int_equal(dlock_redlock_lock(rl, "rl:delayed", lease, 0, &h1), 0);
    test_server_kill(&srv[0]);
    ensure_up(2);
    /* node 0 stays down until holder 1's validity has ended (the rule:
     * down for at least one lease). Until then nobody gets a quorum; once
     * node 1's key expires, nodes 1 + 2 may legitimately grant it. */
    bool got = false;
    while (!got && dlock_redlock_validity_ms(h1) > -300) {
        int rc = dlock_redlock_lock(rl, "rl:delayed", lease, 0, &h2);
        if (rc == 0) {
            got = true;
            assert_true(dlock_redlock_validity_ms(h1) <= 0); /* never an overlap */
        } else {
            dlock__sleep_ms(20);
        }
    }
    ensure_up(0); /* restarted empty, but after holder 1's claim ended */
    if (!got) assert_int_equal(dlock_redlock_lock(rl, "rl:delayed", lease, 500, &h2), 0);
    assert_true(dlock_redlock_validity_ms(h1) <= 0);
    assert_int_equal(dlock_redlock_unlock(h2), 0);
    dlock_redlock_unlock(h1);
    dlock_redlock_free(rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quorum_grants_and_excludes),
        cmocka_unit_test(test_bad_input_is_refused),
        cmocka_unit_test(test_cluster_member_url_is_refused),
        cmocka_unit_test(test_one_node_down_still_locks),
        cmocka_unit_test(test_two_nodes_down_fail_fast_with_enoquorum),
        cmocka_unit_test(test_extension_needs_a_quorum),
        cmocka_unit_test(test_frozen_node_costs_one_timeout_not_one_per_node),
        cmocka_unit_test(test_cancel_wakes_a_waiting_lock),
        cmocka_unit_test(test_killed_holder_lock_returns_within_its_lease),
        cmocka_unit_test(test_fencing_tokens_grow_across_holds_with_a_node_down),
        cmocka_unit_test(test_threads_exclude_each_other),
        cmocka_unit_test(test_operations_start_no_thread),
        cmocka_unit_test(test_immediate_restart_without_persistence_breaks_exclusion),
        cmocka_unit_test(test_delayed_restart_rule_keeps_exclusion),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
