/* test_async.c: the asynchronous client and lock (dlock/async.h) on a real
 * redis-server, built twice: on libevent (test_async_libevent) and on
 * libuv (test_async_libuv). Acquire, fence, unlock; busy, re-entry, the
 * wait's deadline; a blocking holder and an async holder excluding and
 * waking each other; cancel; freeing a handle or the client with
 * operations in flight (each callback once, ECLOSED); the loss callback at
 * the validity deadline while the server is cut off by the freezing proxy;
 * FIFO among one client's waiters, each handoff one release and one try
 * (counted by the server); the rate limiter sharing buckets with
 * the blocking one. Leases are short (about 1 s). */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "async_harness.h"
#include "dlock/async.h"
#include "dlock/lock.h"
#include "dlock/ratelimit.h"
#include "servers.h"
#include "util.h"

static test_server srv;

static dlock_async_client *client_on(const char *url)
{
    dlock_client_options o;
    ah_client_options(&o, url, 1000);
    return ah_client(&o);
}

static dlock_async_lock *lock_on(dlock_async_client *c, const char *name, dlock_lock_kind kind, const char *owner)
{
    dlock_async_lock_options lo;
    dlock_async_lock_options_init(&lo);
    lo.kind = kind;
    lo.owner_id = owner;
    dlock_async_lock *l = NULL;
    assert_int_equal(dlock_async_lock_new(c, name, &lo, &l), 0);
    return l;
}

/* Acquires and runs the loop until the callback; returns its rc. */

static void redis_get(const char *name, char *out, size_t len)
{
    char key[256];
    snprintf(key, sizeof(key), "%s%s", test_prefix(), name);
    const char *argv[2] = {"GET", key};
    out[0] = '\0';
    test_redis_cmd(&srv, out, len, 2, argv);
}

/* ---- the basics ------------------------------------------------------------------ */

static void test_acquire_gives_a_fence_and_unlock_deletes_the_key(void **state)
{
    (void)state;
    dlock_async_client *c = client_on(srv.url);
    dlock_async_lock *l = lock_on(c, "basic", DLOCK_LOCK_SIMPLE, NULL);
    assert_int_equal(ah_acquire_now(l, 0, 0), 0);
    assert_true(dlock_async_lock_is_held(l));
    assert_true(dlock_async_lock_fence(l) > 0);
    assert_true(dlock_async_lock_validity_ms(l) > 0);
    char v[128];
    redis_get("basic", v, sizeof(v));
    assert_string_equal(v, dlock_async_lock_owner(l)); /* the blocking layout: K = token */
    uint64_t f1 = dlock_async_lock_fence(l);
    assert_int_equal(dlock_async_lock_acquire(l, 0, 0, ah_on_lock, NULL), DLOCK_EALREADY);
    assert_int_equal(ah_unlock_now(l), 0);
    assert_false(dlock_async_lock_is_held(l));
    redis_get("basic", v, sizeof(v));
    assert_string_equal(v, "");
    assert_int_equal(dlock_async_lock_unlock(l, ah_on_lock, NULL), DLOCK_ENOTHELD);
    assert_int_equal(ah_acquire_now(l, 0, 5000), 0);
    assert_true(dlock_async_lock_fence(l) > f1);
    assert_int_equal(ah_unlock_now(l), 0);
    dlock_async_lock_free(l);
    dlock_async_client_free(c);
}

static void test_busy_reentry_and_the_wait_deadline(void **state)
{
    (void)state;
    dlock_async_client *c = client_on(srv.url);
    dlock_async_lock *a = lock_on(c, "busy", DLOCK_LOCK_REENTRANT, "req-1");
    dlock_async_lock *a2 = lock_on(c, "busy", DLOCK_LOCK_REENTRANT, "req-1");
    dlock_async_lock *b = lock_on(c, "busy", DLOCK_LOCK_REENTRANT, "req-2");
    assert_int_equal(ah_acquire_now(a, 0, 0), 0);
    assert_int_equal(ah_acquire_now(a, 0, 0), 0); /* re-entry on the handle */
    assert_int_equal(ah_acquire_now(a2, 0, 0), 0); /* the same owner value: one holder */
    assert_int_equal(ah_acquire_now(b, 0, 0), DLOCK_EBUSY);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(ah_acquire_now(b, 300, 0), DLOCK_ETIMEOUT);
    int64_t took = dlock__now_ms() - t0;
    assert_true(took >= 290 && took < 300 + AH_SLACK_MS);
    assert_int_equal(ah_unlock_now(a2), 0);
    assert_int_equal(ah_unlock_now(a), 0);
    assert_true(dlock_async_lock_is_held(a)); /* one hold left */
    assert_int_equal(ah_unlock_now(a), 0);
    assert_false(dlock_async_lock_is_held(a));
    assert_int_equal(ah_acquire_now(b, 0, 0), 0);
    assert_int_equal(ah_unlock_now(b), 0);
    dlock_async_lock_free(a);
    dlock_async_lock_free(a2);
    dlock_async_lock_free(b);
    dlock_async_client_free(c);
}

static void test_bad_arguments_start_nothing(void **state)
{
    (void)state;
    dlock_async_client *c = NULL;
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = "etcd://127.0.0.1:1";
    assert_int_equal(dlock_async_client_new(&ah_loop, &o, &c), DLOCK_ENOTSUP);
    o.url = "bogus://x";
    assert_int_equal(dlock_async_client_new(&ah_loop, &o, &c), DLOCK_EURL);
    dlock_async_loop broken = ah_loop;
    broken.timer_new = NULL;
    o.url = srv.url;
    assert_int_equal(dlock_async_client_new(&broken, &o, &c), DLOCK_EINVAL);
    assert_null(c);
    c = client_on(srv.url);
    dlock_async_lock *l = NULL;
    assert_int_equal(dlock_async_lock_new(c, "", NULL, &l), DLOCK_EINVAL);
    assert_int_equal(dlock_async_lock_new(c, "x", NULL, &l), 0);
    assert_int_equal(dlock_async_lock_acquire(l, 0, -1, ah_on_lock, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_async_lock_acquire(l, 0, 0, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_async_lock_cancel(l), DLOCK_ENOTHELD);
    dlock_async_lock_free(l);
    dlock_async_client_free(c);
}

/* ---- blocking and asynchronous holders of one name -------------------------------------- */

static void test_a_blocking_release_wakes_an_async_waiter(void **state)
{
    (void)state;
    dlock_client *bc = ah_blocking_client(srv.url);
    dlock_lock_options bo;
    dlock_lock_options_init(&bo);
    bo.kind = DLOCK_LOCK_REENTRANT;
    bo.owner_id = "blocking-holder";
    dlock_lock *bl = NULL;
    assert_int_equal(dlock_lock_new(bc, "mixed", &bo, &bl), 0);
    assert_int_equal(dlock_lock_try_lock(bl, 0, 30000, NULL), 0);

    dlock_async_client *c = client_on(srv.url);
    dlock_async_lock *l = lock_on(c, "mixed", DLOCK_LOCK_REENTRANT, NULL);
    ah_rec r = {0};
    assert_int_equal(dlock_async_lock_acquire(l, 10000, 0, ah_on_lock, &r), 0);
    /* released after 2 s: a waiter that only polled would sleep on its
     * growing recheck interval (50 ms doubling to 5 s) well past that */
    ah_later u = {.bl = bl};
    ah_release_later(&u, 2000);
    ah_run_until(&u.done, 3000);
    assert_int_equal(r.calls, 0); /* excluded while the blocking handle held it */
    ah_run_until(&r.calls, 3000);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rc, 0);
    assert_true(r.at_ms - u.at_ms < 500 + AH_SLACK_MS); /* woken by the publish, not a recheck */
    bool locked = false;
    assert_int_equal(dlock_lock_try_lock(bl, 0, 30000, NULL), DLOCK_EBUSY);
    assert_int_equal(dlock_lock_is_locked(bl, &locked), 0);
    assert_true(locked);
    assert_int_equal(ah_unlock_now(l), 0);
    ah_later_free(&u);
    dlock_async_lock_free(l);
    dlock_async_client_free(c);
    dlock_lock_free(bl);
    dlock_client_destroy(bc);
}

typedef struct blocking_waiter {
    dlock_lock *bl;
    int rc;
    int64_t at_ms;
    volatile int done;
} blocking_waiter;

static void *wait_blocking(void *arg)
{
    blocking_waiter *w = arg;
    w->rc = dlock_lock_try_lock(w->bl, 8000, 0, NULL);
    w->at_ms = dlock__now_ms();
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void test_an_async_release_wakes_a_blocking_waiter(void **state)
{
    (void)state;
    dlock_async_client *c = client_on(srv.url);
    dlock_async_lock *l = lock_on(c, "mixed2", DLOCK_LOCK_SIMPLE, NULL);
    assert_int_equal(ah_acquire_now(l, 0, 0), 0);
    dlock_client *bc = ah_blocking_client(srv.url);
    blocking_waiter w = {0};
    assert_int_equal(dlock_lock_new(bc, "mixed2", NULL, &w.bl), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_blocking, &w), 0);
    ah_run_for(1500); /* the async watchdog renews meanwhile (lease 900 ms) */
    assert_int_equal(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST), 0);
    assert_true(dlock_async_lock_is_held(l));
    int64_t t_unlock = dlock__now_ms();
    assert_int_equal(ah_unlock_now(l), 0);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, 0);
    assert_true(w.at_ms >= t_unlock);
    assert_int_equal(ah_acquire_now(l, 0, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_lock_unlock(w.bl), 0);
    dlock_lock_free(w.bl);
    dlock_client_destroy(bc);
    dlock_async_lock_free(l);
    dlock_async_client_free(c);
}

/* ---- cancellation and lifetimes ----------------------------------------------------------- */

static void test_cancel_ends_a_wait_and_gives_back_a_late_grant(void **state)
{
    (void)state;
    dlock_async_client *c = client_on(srv.url);
    dlock_async_lock *h = lock_on(c, "cancel", DLOCK_LOCK_SIMPLE, NULL);
    dlock_async_lock *w = lock_on(c, "cancel", DLOCK_LOCK_SIMPLE, NULL);
    assert_int_equal(ah_acquire_now(h, 0, 0), 0);
    ah_rec r = {0};
    assert_int_equal(dlock_async_lock_acquire(w, DLOCK_WAIT_FOREVER, 0, ah_on_lock, &r), 0);
    ah_run_for(200);
    assert_int_equal(r.calls, 0);
    assert_int_equal(dlock_async_lock_cancel(w), 0);
    assert_int_equal(r.calls, 1); /* before cancel returned */
    assert_int_equal(r.rc, DLOCK_ECANCELED);
    assert_int_equal(ah_unlock_now(h), 0);
    ah_run_for(300);
    assert_int_equal(r.calls, 1);
    assert_false(dlock_async_lock_is_held(w));
    char v[128];
    redis_get("cancel", v, sizeof(v));
    assert_string_equal(v, "");
    /* cancelled while its first try is out: the server grants it, the
     * handle gives it back by itself */
    ah_rec r2 = {0};
    assert_int_equal(dlock_async_lock_acquire(w, 0, 10000, ah_on_lock, &r2), 0);
    assert_int_equal(dlock_async_lock_cancel(w), 0);
    assert_int_equal(r2.rc, DLOCK_ECANCELED);
    ah_run_for(300);
    redis_get("cancel", v, sizeof(v));
    assert_string_equal(v, "");
    assert_int_equal(r2.calls, 1);
    dlock_async_lock_free(h);
    dlock_async_lock_free(w);
    dlock_async_client_free(c);
}

static void test_freeing_the_client_ends_every_operation_once(void **state)
{
    (void)state;
    dlock_async_client *holder = client_on(srv.url);
    dlock_async_lock *h = lock_on(holder, "mid", DLOCK_LOCK_SIMPLE, NULL);
    assert_int_equal(ah_acquire_now(h, 0, 0), 0);
    dlock_async_client *c = client_on(srv.url);
    enum { N = 5 };
    dlock_async_lock *w[N + 1];
    ah_rec r[N + 1];
    memset(r, 0, sizeof(r));
    for (int i = 0; i < N; i++) {
        w[i] = lock_on(c, "mid", DLOCK_LOCK_SIMPLE, NULL);
        assert_int_equal(dlock_async_lock_acquire(w[i], DLOCK_WAIT_FOREVER, 0, ah_on_lock, &r[i]), 0);
    }
    ah_run_for(200); /* all waiting now */
    w[N] = lock_on(c, "mid-free", DLOCK_LOCK_SIMPLE, NULL);
    assert_int_equal(dlock_async_lock_acquire(w[N], 0, 5000, ah_on_lock, &r[N]), 0); /* its try is out */
    dlock_async_client_free(c);
    for (int i = 0; i <= N; i++) {
        assert_int_equal(r[i].calls, 1);
        assert_int_equal(r[i].rc, DLOCK_ECLOSED);
    }
    assert_int_equal(dlock_async_lock_acquire(w[0], 0, 0, ah_on_lock, &r[0]), DLOCK_ECLOSED);
    assert_int_equal(ah_unlock_now(h), 0);
    ah_run_for(300);
    for (int i = 0; i <= N; i++) {
        assert_int_equal(r[i].calls, 1); /* never again */
        dlock_async_lock_free(w[i]);
    }
    dlock_async_lock_free(h);
    dlock_async_client_free(holder);
}

typedef struct in_cb {
    dlock_async_client *c;
    dlock_async_lock *l;
    int calls;
    int rc;
} in_cb;

static void free_client_in_cb(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    in_cb *x = ud;
    x->calls++;
    x->rc = rc;
    dlock_async_client_free(x->c);
}

static void free_lock_in_cb(dlock_async_lock *l, int rc, void *ud)
{
    in_cb *x = ud;
    x->calls++;
    x->rc = rc;
    dlock_async_lock_free(l);
}

static void test_freeing_inside_a_callback(void **state)
{
    (void)state;
    dlock_async_client *c = client_on(srv.url);
    in_cb a = {.c = c};
    dlock_async_lock *l = lock_on(c, "incb", DLOCK_LOCK_SIMPLE, NULL);
    assert_int_equal(dlock_async_lock_acquire(l, 0, 0, free_lock_in_cb, &a), 0);
    ah_run_until(&a.calls, 3000);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.rc, 0); /* held and freed: it expires on its lease */
    dlock_async_lock *other = lock_on(c, "incb", DLOCK_LOCK_SIMPLE, NULL);
    ah_rec waiting = {0};
    assert_int_equal(dlock_async_lock_acquire(other, DLOCK_WAIT_FOREVER, 0, ah_on_lock, &waiting), 0);
    dlock_async_lock *l2 = lock_on(c, "incb2", DLOCK_LOCK_SIMPLE, NULL);
    in_cb b = {.c = c};
    assert_int_equal(dlock_async_lock_acquire(l2, 0, 0, free_client_in_cb, &b), 0);
    ah_run_until(&b.calls, 3000);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.rc, 0);
    assert_int_equal(waiting.calls, 1);
    assert_int_equal(waiting.rc, DLOCK_ECLOSED);
    ah_run_for(200);
    assert_int_equal(b.calls, 1);
    dlock_async_lock_free(other);
    dlock_async_lock_free(l2);
}

/* ---- the loss at the validity deadline ------------------------------------------------------ */

typedef struct lost_rec {
    int calls;
    int reason;
    int64_t at_ms;
    bool held_in_cb;
} lost_rec;

static void on_lost(dlock_async_lock *l, int reason, void *ud)
{
    lost_rec *x = ud;
    x->calls++;
    x->reason = reason;
    x->at_ms = dlock__now_ms();
    x->held_in_cb = dlock_async_lock_is_held(l);
}

static void test_the_loss_is_declared_at_the_deadline_when_the_server_is_cut_off(void **state)
{
    (void)state;
    int proxy_pid = 0;
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", ah_proxy_start(srv.port, &proxy_pid));
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = url;
    o.key_prefix = test_prefix();
    o.watchdog_timeout_ms = AH_WATCHDOG_MS;
    o.command_timeout_ms = 3000; /* later than the deadline: the loss must not wait for it */
    dlock_async_client *c = NULL;
    assert_int_equal(dlock_async_client_new(&ah_loop, &o, &c), 0);
    lost_rec lost = {0};
    dlock_async_lock_options lo;
    dlock_async_lock_options_init(&lo);
    lo.on_lost = on_lost;
    lo.on_lost_ud = &lost;
    dlock_async_lock *l = NULL;
    assert_int_equal(dlock_async_lock_new(c, "cut", &lo, &l), 0);
    int64_t t_before = dlock__now_ms();
    assert_int_equal(ah_acquire_now(l, 0, 0), 0);
    int64_t t_after = dlock__now_ms();
    assert_int_equal(kill(proxy_pid, SIGSTOP), 0);
    /* the rule of dlock.h with the default drift: 900 - 9 - 2 ms */
    int64_t lo_bound = t_before + AH_WATCHDOG_MS - 11, hi_bound = t_after + AH_WATCHDOG_MS - 11;
    ah_run_until(&lost.calls, 3000);
    assert_int_equal(lost.calls, 1);
    assert_int_equal(lost.reason, DLOCK_ELOST);
    assert_false(lost.held_in_cb);
    assert_true(lost.at_ms >= lo_bound);
    assert_true(lost.at_ms <= hi_bound + AH_SLACK_MS);
    assert_false(dlock_async_lock_is_held(l));
    assert_int_equal(dlock_async_lock_unlock(l, ah_on_lock, NULL), DLOCK_ELOST);
    ah_proxy_stop();
    dlock_async_lock_free(l);
    dlock_async_client_free(c);
}

/* ---- many waiters on one name ------------------------------------------------------------------ */

typedef struct fifo_w {
    dlock_async_lock *l;
    void *timer;
    int idx;
    int calls;
    int rc;
    int order;
} fifo_w;

static int fifo_done, fifo_order;

/* Scripts the server ran so far (EVALSHA and EVAL calls, INFO commandstats). */
static long long scripts_run(void)
{
    char info[16384];
    const char *argv[2] = {"INFO", "commandstats"};
    assert_int_equal(test_redis_cmd(&srv, info, sizeof(info), 2, argv), 0);
    long long n = 0;
    const char *names[2] = {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(info, names[i]);
        if (p) n += strtoll(p + strlen(names[i]), NULL, 10);
    }
    return n;
}

static void fifo_unlocked(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    (void)ud;
    assert_int_equal(rc, 0);
    fifo_done++;
}

static void fifo_unlock(void *arg)
{
    fifo_w *w = arg;
    assert_int_equal(dlock_async_lock_unlock(w->l, fifo_unlocked, NULL), 0);
}

/* Holds for 3 ms (long enough for the next head to have been answered
 * busy if it tried at once), then unlocks. */
static void fifo_acquired(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    fifo_w *w = ud;
    w->calls++;
    w->rc = rc;
    w->order = ++fifo_order;
    if (rc == 0) ah_loop.timer_start(w->timer, 3);
}

static void test_waiters_of_one_client_acquire_in_fifo_order(void **state)
{
    (void)state;
    enum { N = 20 };
    dlock_async_client *c = client_on(srv.url);
    dlock_async_lock *h = lock_on(c, "fifo", DLOCK_LOCK_SIMPLE, NULL);
    assert_int_equal(ah_acquire_now(h, 0, 0), 0);
    fifo_w w[N];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < N; i++) {
        w[i].l = lock_on(c, "fifo", DLOCK_LOCK_SIMPLE, NULL);
        w[i].timer = ah_loop.timer_new(ah_loop.ud, fifo_unlock, &w[i]);
        assert_int_equal(dlock_async_lock_acquire(w[i].l, 10000, 0, fifo_acquired, &w[i]), 0);
        ah_run_for(5); /* queued one after the other */
    }
    ah_run_for(100);
    fifo_order = fifo_done = 0;
    long long scripts0 = scripts_run();
    assert_int_equal(ah_unlock_now(h), 0);
    int64_t t0 = dlock__now_ms();
    while (fifo_done < N && dlock__now_ms() - t0 < 8000) ah_run_for(10);
    assert_int_equal(fifo_done, N);
    /* each handoff is the release and the next head's one try behind it:
     * no try by a new head while the one before it holds, none twice for
     * one release (a few spare for a message that comes before a reply) */
    long long scripts = scripts_run() - scripts0;
    assert_true(scripts >= 2 * N + 1);
    assert_true(scripts <= 2 * N + 1 + N / 4);
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].calls, 1);
        assert_int_equal(w[i].rc, 0);
        assert_int_equal(w[i].order, i + 1);
        ah_loop.timer_free(w[i].timer);
        dlock_async_lock_free(w[i].l);
    }
    dlock_async_lock_free(h);
    dlock_async_client_free(c);
}

static void test_an_unreachable_server_is_econn(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", test_free_port());
    dlock_async_client *c = client_on(url);
    dlock_async_lock *l = lock_on(c, "nobody", DLOCK_LOCK_SIMPLE, NULL);
    ah_rec r = {0};
    int rc = dlock_async_lock_acquire(l, 0, 0, ah_on_lock, &r);
    if (rc == 0) {
        ah_run_until(&r.calls, 3000);
        assert_int_equal(r.calls, 1);
        rc = r.rc;
    }
    assert_int_equal(rc, DLOCK_ECONN);
    dlock_async_lock_free(l);
    dlock_async_client_free(c);
}

/* ---- the rate limiter ------------------------------------------------------------------------- */

typedef struct rl_rec {
    int calls;
    int rc;
    dlock_ratelimit_result res;
} rl_rec;

static void on_rl(dlock_async_ratelimit *rl, int rc, const dlock_ratelimit_result *res, void *ud)
{
    (void)rl;
    rl_rec *r = ud;
    r->calls++;
    r->rc = rc;
    if (res) r->res = *res;
}

static int rl_try(dlock_async_ratelimit *rl, const char *subject, rl_rec *r)
{
    memset(r, 0, sizeof(*r));
    int rc = dlock_async_ratelimit_try_acquire(rl, subject, 1, on_rl, r);
    if (rc) return rc;
    ah_run_until(&r->calls, 3000);
    assert_int_equal(r->calls, 1);
    return r->rc;
}

static void test_the_async_limiter_shares_buckets_with_the_blocking_one(void **state)
{
    (void)state;
    dlock_ratelimit_options o;
    dlock_ratelimit_options_init(&o);
    o.rate = 3;
    o.period_ms = 30000;
    dlock_async_client *c = client_on(srv.url);
    dlock_async_ratelimit *arl = NULL;
    assert_int_equal(dlock_async_ratelimit_new(c, "api", &o, &arl), 0);
    dlock_client *bc = ah_blocking_client(srv.url);
    dlock_ratelimit *brl = NULL;
    assert_int_equal(dlock_ratelimit_new(bc, "api", &o, &brl), 0);
    rl_rec r;
    assert_int_equal(rl_try(arl, "u1", &r), 0);
    assert_true(r.res.allowed);
    assert_int_equal(r.res.remaining, 2);
    dlock_ratelimit_result br;
    assert_int_equal(dlock_ratelimit_try_acquire(brl, "u1", 1, &br), 0);
    assert_true(br.allowed);
    assert_int_equal(rl_try(arl, "u1", &r), 0);
    assert_true(r.res.allowed);
    assert_int_equal(rl_try(arl, "u1", &r), 0);
    assert_false(r.res.allowed); /* three taken, two of them here, one by the blocking limiter */
    assert_true(r.res.retry_after_ms > 0);
    assert_int_equal(dlock_async_ratelimit_try_acquire(arl, "u1", 4, on_rl, &r), DLOCK_ELIMIT);
    assert_int_equal(dlock_async_ratelimit_try_acquire(arl, "", 1, on_rl, &r), DLOCK_EINVAL);
    rl_rec inflight[3];
    memset(inflight, 0, sizeof(inflight));
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_async_ratelimit_try_acquire(arl, "u2", 1, on_rl, &inflight[i]), 0);
    dlock_async_ratelimit_free(arl); /* with three tries out */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(inflight[i].calls, 1);
        assert_int_equal(inflight[i].rc, DLOCK_ECANCELED);
    }
    ah_run_for(200);
    for (int i = 0; i < 3; i++) assert_int_equal(inflight[i].calls, 1);
    dlock_ratelimit_free(brl);
    dlock_client_destroy(bc);
    dlock_async_client_free(c);
}

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    return test_redis_start(&srv, NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    test_server_stop(&srv);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_acquire_gives_a_fence_and_unlock_deletes_the_key, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_busy_reentry_and_the_wait_deadline, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments_start_nothing, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_a_blocking_release_wakes_an_async_waiter, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_an_async_release_wakes_a_blocking_waiter, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_cancel_ends_a_wait_and_gives_back_a_late_grant, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_freeing_the_client_ends_every_operation_once, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_freeing_inside_a_callback, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_the_loss_is_declared_at_the_deadline_when_the_server_is_cut_off,
                                        ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_waiters_of_one_client_acquire_in_fifo_order, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_an_unreachable_server_is_econn, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_the_async_limiter_shares_buckets_with_the_blocking_one, ah_setup,
                                        ah_teardown),
    };
    return cmocka_run_group_tests_name(ah_name(), tests, group_setup, group_teardown);
}
