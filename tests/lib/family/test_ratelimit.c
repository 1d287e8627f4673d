/* test_ratelimit.c: the GCRA rate limiter against a real redis-server:
 * burst then refusal with an exact retry hint, per-subject buckets, bad
 * input, waiting acquire with timeout and cancel, the admitted rate of 4
 * concurrent clients (one of them in a process whose wall clock is skewed
 * by an hour) within 2 % of the configured 100/s over 2 s (10 s when built
 * as test_ratelimit_slow). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlock/ratelimit.h"
#include "fam_support.h"
#include "util.h"

#ifndef RL_WINDOW_MS
#define RL_WINDOW_MS 2000
#endif

/* ---- a fake wall clock ------------------------------------------------ *
 * These definitions interpose the libc ones for the whole test program
 * (libdlock is linked statically into it), so a process that sets
 * fake_offset_s sees its wall clock skewed. The monotonic clock is left
 * alone: timeouts must keep working. */
static _Atomic long fake_offset_s;

int clock_gettime(clockid_t id, struct timespec *ts)
{
    long rc = syscall(SYS_clock_gettime, id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += atomic_load_explicit(&fake_offset_s, memory_order_relaxed);
    return (int)rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    (void)tz;
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *t)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t) *t = ts.tv_sec;
    return ts.tv_sec;
}


static dlock_ratelimit *limiter(dlock_client *c, const char *name, int64_t rate, int64_t period,
                                int64_t burst)
{
    dlock_ratelimit_options o;
    dlock_ratelimit_options_init(&o);
    o.rate = rate;
    o.period_ms = period;
    o.burst = burst;
    dlock_ratelimit *rl = NULL;
    assert_int_equal(dlock_ratelimit_new(c, name, &o, &rl), 0);
    return rl;
}

static void test_burst_is_allowed_then_refused_with_exact_retry_hint(void **state)
{
    (void)state;
    dlock_ratelimit *rl = limiter(fam_cli, "rl:burst", 10, 1000, 5);
    dlock_ratelimit_result r;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(dlock_ratelimit_try_acquire(rl, "u1", 1, &r), 0);
        assert_true(r.allowed);
        assert_int_equal(r.remaining, 4 - i);
    }
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "u1", 1, &r), 0);
    assert_false(r.allowed);
    assert_true(r.retry_after_ms >= 1 && r.retry_after_ms <= 100);
    int64_t avail = -1;
    assert_int_equal(dlock_ratelimit_peek(rl, "u1", &avail, NULL), 0);
    assert_int_equal(avail, 0);
    dlock__sleep_ms(r.retry_after_ms + 2);
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "u1", 1, &r), 0);
    assert_true(r.allowed);
    /* the bucket key expires once full again: no memory kept for idle users */
    char key[256];
    const char *pttl[2] = {"PTTL", fam_key("rl:burst:u1", key, sizeof(key))};
    long long ttl = fam_int(&fam_srv, 2, pttl);
    assert_true(ttl > 0 && ttl <= 501);
    dlock_ratelimit_free(rl);
}

static void test_subjects_have_independent_buckets(void **state)
{
    (void)state;
    dlock_ratelimit *rl = limiter(fam_cli, "rl:subj", 1, 10000, 2);
    dlock_ratelimit_result r;
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "ip:10.0.0.1", 2, &r), 0);
    assert_true(r.allowed);
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "ip:10.0.0.1", 1, &r), 0);
    assert_false(r.allowed);
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "user:42", 1, &r), 0);
    assert_true(r.allowed);
    assert_int_equal(dlock_ratelimit_reset(rl, "ip:10.0.0.1"), 0);
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "ip:10.0.0.1", 2, &r), 0);
    assert_true(r.allowed);
    dlock_ratelimit_free(rl);
}

static void test_bad_input_is_refused_and_changes_nothing(void **state)
{
    (void)state;
    dlock_ratelimit_options o;
    dlock_ratelimit_options_init(&o);
    dlock_ratelimit *rl = NULL;
    assert_int_equal(dlock_ratelimit_new(NULL, "x", &o, &rl), DLOCK_EINVAL);
    assert_int_equal(dlock_ratelimit_new(fam_cli, "", &o, &rl), DLOCK_EINVAL);
    assert_int_equal(dlock_ratelimit_new(fam_cli, NULL, &o, &rl), DLOCK_EINVAL);
    o.rate = 0;
    assert_int_equal(dlock_ratelimit_new(fam_cli, "x", &o, &rl), DLOCK_EINVAL);
    o.rate = 2000000; /* interval below 1 us */
    assert_int_equal(dlock_ratelimit_new(fam_cli, "x", &o, &rl), DLOCK_EINVAL);
    o.rate = 10;
    o.burst = -1;
    assert_int_equal(dlock_ratelimit_new(fam_cli, "x", &o, &rl), DLOCK_EINVAL);
    assert_null(rl);
    rl = limiter(fam_cli, "rl:bad", 10, 1000, 3);
    dlock_ratelimit_result r;
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "u", 4, &r), DLOCK_ELIMIT);
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "u", 0, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "", 1, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_ratelimit_try_acquire(rl, NULL, 1, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "u", 1, NULL), DLOCK_EINVAL);
    int64_t avail = 0;
    assert_int_equal(dlock_ratelimit_peek(rl, "u", &avail, NULL), 0);
    assert_int_equal(avail, 3); /* nothing was taken */
    dlock_ratelimit_free(rl);
    dlock_ratelimit_free(NULL);
}

static void test_acquire_waits_for_a_token_or_times_out(void **state)
{
    (void)state;
    dlock_ratelimit *rl = limiter(fam_cli, "rl:wait", 10, 1000, 1);
    int64_t first = dlock__now_ms();
    assert_int_equal(dlock_ratelimit_acquire(rl, "u", 1, 0), 0);
    assert_int_equal(dlock_ratelimit_acquire(rl, "u", 1, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_ratelimit_acquire(rl, "u", 1, 1000), 0);
    int64_t took = dlock__now_ms() - first;
    assert_true(took >= 90 && took < 100 + FAM_SLACK_MS); /* one token per 100 ms */
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_ratelimit_acquire(rl, "u", 1, 30), DLOCK_ETIMEOUT);
    took = dlock__now_ms() - t0;
    assert_true(took >= 25 && took < 30 + FAM_SLACK_MS);
    dlock_ratelimit_free(rl);
}

typedef struct waiter_arg {
    dlock_ratelimit *rl;
    int rc;
} waiter_arg;

static void *wait_forever(void *p)
{
    waiter_arg *a = p;
    a->rc = dlock_ratelimit_acquire(a->rl, "u", 1, -1);
    return NULL;
}

static void test_cancel_wakes_a_waiting_acquire(void **state)
{
    (void)state;
    dlock_ratelimit *rl = limiter(fam_cli, "rl:cancel", 1, 60000, 1);
    assert_int_equal(dlock_ratelimit_acquire(rl, "u", 1, 0), 0);
    waiter_arg a = {rl, 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_forever, &a), 0);
    dlock__sleep_ms(150);
    int64_t t0 = dlock__now_ms();
    dlock_ratelimit_cancel(rl);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    assert_true(dlock__now_ms() - t0 < FAM_SLACK_MS);
    dlock_ratelimit_free(rl);
}

/* ---- admitted rate under concurrency --------------------------------- */

#define RATE 100
#define BURST 10

typedef struct hammer_arg {
    const test_server *s;
    int64_t start_ms; /* monotonic; all clients start together */
    long allowed;
    int rc;
} hammer_arg;

/* Takes tokens as fast as the hints allow until the window closes. */
static long hammer(dlock_client *c, int64_t start_ms, int *rc_out)
{
    dlock_ratelimit_options o;
    dlock_ratelimit_options_init(&o);
    o.rate = RATE;
    o.burst = BURST;
    dlock_ratelimit *rl = NULL;
    *rc_out = dlock_ratelimit_new(c, "rl:rate", &o, &rl);
    if (*rc_out) return 0;
    long allowed = 0;
    while (dlock__now_ms() < start_ms) dlock__sleep_ms(1);
    int64_t end = start_ms + RL_WINDOW_MS;
    while (dlock__now_ms() < end) {
        dlock_ratelimit_result r;
        int rc = dlock_ratelimit_try_acquire(rl, "api:/buy", 1, &r);
        if (rc) {
            *rc_out = rc;
            break;
        }
        if (r.allowed) {
            allowed++;
            continue;
        }
        int64_t left = end - dlock__now_ms();
        if (left > 0) dlock__sleep_ms(r.retry_after_ms < left ? r.retry_after_ms : left);
    }
    dlock_ratelimit_free(rl);
    return allowed;
}

static void *hammer_thread(void *p)
{
    hammer_arg *a = p;
    dlock_client *c = fam_client(a->s, 0);
    a->rc = c ? 0 : -1;
    if (c) a->allowed = hammer(c, a->start_ms, &a->rc);
    dlock_client_destroy(c);
    return NULL;
}

static int skewed_child(const test_server *srv_, const char *arg)
{
    int64_t start_ms = strtoll(arg, NULL, 10);
    time_t real = (time_t)(dlock__wall_ms() / 1000);
    fake_offset_s = 3600; /* this process' wall clock is an hour ahead */
    if (time(NULL) - real < 3590) return 3; /* the fake clock must be in force */
    dlock_client *c = fam_client(srv_, 0);
    if (!c) return 2;
    int rc = 0;
    long allowed = hammer(c, start_ms, &rc);
    dlock_client_destroy(c);
    if (rc) return 4;
    char n[32];
    snprintf(n, sizeof(n), "%ld", allowed);
    const char *set[3] = {"SET", "rl:child-allowed", n};
    return lt_cmd(srv_, NULL, 0, 3, set) == 0 ? 0 : 5;
}

static void test_four_clients_one_skewed_admit_the_configured_rate(void **state)
{
    (void)state;
    int64_t start = dlock__now_ms() + 400; /* time for clients to connect */
    char start_s[32];
    snprintf(start_s, sizeof(start_s), "%lld", (long long)start);
    pid_t pid = fam_spawn("skewed_child", &fam_srv, start_s);
    assert_true(pid > 0);
    hammer_arg a[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        a[i] = (hammer_arg){.s = &fam_srv, .start_ms = start};
        assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, &a[i]), 0);
    }
    long total = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, 0);
        total += a[i].allowed;
    }
    assert_int_equal(fam_wait_child(pid), 0);
    const char *get[2] = {"GET", "rl:child-allowed"};
    long long from_child = fam_int(&fam_srv, 2, get);
    assert_true(from_child > 0); /* the skewed client was admitted too */
    total += (long)from_child;
    /* A full bucket admits BURST at once, then RATE per second. */
    double expected = BURST + (double)RATE * RL_WINDOW_MS / 1000.0;
    double err = ((double)total - expected) / ((double)RATE * RL_WINDOW_MS / 1000.0);
    print_message("admitted %ld in %d ms (expected %.0f, error %.2f %%, skewed client %lld)\n",
                  total, RL_WINDOW_MS, expected, err * 100.0, from_child);
    assert_true(err <= 0.02 && err >= -0.02);
}

static void test_skewed_client_clock_does_not_refill_a_bucket(void **state)
{
    (void)state;
    dlock_ratelimit *rl = limiter(fam_cli, "rl:skew", 1, 60000, 1);
    dlock_ratelimit_result r;
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "u", 1, &r), 0);
    assert_true(r.allowed);
    /* An hour ahead: a limiter trusting the client's clock would see a full
     * bucket; ours asks the server, so the bucket is still empty. */
    fake_offset_s = 3600;
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "u", 1, &r), 0);
    fake_offset_s = -3600;
    dlock_ratelimit_result r2;
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "u", 1, &r2), 0);
    fake_offset_s = 0;
    assert_false(r.allowed);
    assert_false(r2.allowed);
    assert_true(r.retry_after_ms > 50000 && r.retry_after_ms <= 60000);
    dlock_ratelimit_free(rl);
}

static const fam_role roles[] = {{"skewed_child", skewed_child}, {NULL, NULL}};

int main(int argc, char **argv)
{
    fam_child_dispatch(argc, argv, roles);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_is_allowed_then_refused_with_exact_retry_hint),
        cmocka_unit_test(test_subjects_have_independent_buckets),
        cmocka_unit_test(test_bad_input_is_refused_and_changes_nothing),
        cmocka_unit_test(test_acquire_waits_for_a_token_or_times_out),
        cmocka_unit_test(test_cancel_wakes_a_waiting_acquire),
        cmocka_unit_test(test_skewed_client_clock_does_not_refill_a_bucket),
        cmocka_unit_test(test_four_clients_one_skewed_admit_the_configured_rate),
    };
    return cmocka_run_group_tests(tests, fam_setup, fam_teardown);
}
