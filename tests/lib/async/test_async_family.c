/* test_async_family.c: the asynchronous read-write lock and semaphore
 * (dlock/async.h) on a real redis-server, built on libevent and on libuv
 * (test_async_family_libevent, _libuv): blocking and asynchronous holders
 * of one name exclude each other and a blocking release wakes an
 * asynchronous waiter (also after a read release that left a hold and
 * published nothing); upgrade refused; cancel (a writer's intent
 * withdrawn); freeing the client or a handle with operations in flight
 * (each callback once); the loss callbacks at the validity deadline while
 * the server is cut off by the freezing proxy; the loop thread cycling the
 * async lock and semaphore while another thread cycles blocking handles
 * of the same names (run under TSan in CI: label threaded). Leases are
 * short (about 1 s); the blocking calls made on the loop thread are short
 * ones. */
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

#include <cmocka.h>

#include "async_harness.h"
#include "dlock/async.h"
#include "dlock/lock.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"
#include "servers.h"
#include "util.h"

static test_server srv;

static dlock_async_client *client_on(const char *url, int64_t command_timeout_ms)
{
    dlock_client_options o;
    ah_client_options(&o, url, command_timeout_ms);
    return ah_client(&o);
}

static dlock_async_rwlock *rw_on(dlock_async_client *c, const char *name)
{
    dlock_async_rwlock *rw = NULL;
    assert_int_equal(dlock_async_rwlock_new(c, name, NULL, &rw), 0);
    return rw;
}

static dlock_async_semaphore *sem_on(dlock_async_client *c, const char *name, int64_t n)
{
    dlock_semaphore_options so;
    dlock_semaphore_options_init(&so);
    so.permits = n;
    dlock_async_semaphore *s = NULL;
    assert_int_equal(dlock_async_semaphore_new(c, name, &so, &s), 0);
    return s;
}

/* Runs the loop until r's callback ran; returns its rc. */

/* Starts a loop timer that releases u's blocking hold in ms. */

/* ---- the read-write lock ----------------------------------------------------------------------- */

static void test_rwlock_blocking_and_async_sides_exclude_and_wake(void **state)
{
    (void)state;
    dlock_client *bc = ah_blocking_client(srv.url);
    dlock_rwlock *brw = NULL;
    assert_int_equal(dlock_rwlock_new(bc, "rw", NULL, &brw), 0);
    assert_int_equal(dlock_rwlock_read_lock(brw, 0), 0);
    dlock_async_client *c = client_on(srv.url, 1000);
    dlock_async_rwlock *reader = rw_on(c, "rw"), *writer = rw_on(c, "rw");
    assert_int_equal(ah_rw_now(reader, false, true, 0), 0); /* readers share across the APIs */
    assert_int_equal(dlock_async_rwlock_read_count(reader), 1);
    assert_int_equal(ah_rw_now(writer, true, true, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_async_rwlock_write_lock(reader, 0, ah_on_rw, NULL), DLOCK_EUPGRADE);
    assert_int_equal(ah_rw_now(reader, false, false, 0), 0);
    ah_rec w = {0};
    assert_int_equal(dlock_async_rwlock_write_lock(writer, 8000, ah_on_rw, &w), 0);
    ah_later u = {.brw = brw};
    ah_release_later(&u, 1500);
    ah_run_until(&u.done, 3000);
    assert_int_equal(w.calls, 0); /* excluded while the blocking reader held */
    assert_int_equal(ah_wait_rec(&w, 3000), 0);
    assert_true(w.at_ms - u.at_ms < 500 + AH_SLACK_MS); /* woken by the release's publish */
    assert_int_equal(dlock_async_rwlock_write_count(writer), 1);
    assert_true(dlock_async_rwlock_validity_ms(writer) > 0);
    assert_int_equal(dlock_rwlock_read_lock(brw, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_rwlock_write_lock(brw, 0), DLOCK_EBUSY);
    assert_int_equal(ah_rw_now(writer, false, true, 0), 0); /* downgrade: read while writing */
    assert_int_equal(ah_rw_now(writer, true, false, 0), 0);
    assert_int_equal(dlock_rwlock_write_lock(brw, 0), DLOCK_EBUSY);
    assert_int_equal(ah_rw_now(writer, false, false, 0), 0);
    assert_int_equal(dlock_rwlock_write_lock(brw, 0), 0);
    assert_int_equal(ah_rw_now(reader, false, true, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_rwlock_write_unlock(brw), 0);
    assert_int_equal(ah_rw_now(reader, false, false, 0), DLOCK_ENOTHELD);
    ah_later_free(&u);
    dlock_async_rwlock_free(reader);
    dlock_async_rwlock_free(writer);
    dlock_async_client_free(c);
    dlock_rwlock_free(brw);
    dlock_client_destroy(bc);
}

static void test_rwlock_cancel_withdraws_the_writers_intent(void **state)
{
    (void)state;
    dlock_client *bc = ah_blocking_client(srv.url);
    dlock_rwlock *brw = NULL, *breader = NULL;
    assert_int_equal(dlock_rwlock_new(bc, "rwc", NULL, &brw), 0);
    assert_int_equal(dlock_rwlock_new(bc, "rwc", NULL, &breader), 0);
    assert_int_equal(dlock_rwlock_read_lock(brw, 0), 0);
    dlock_async_client *c = client_on(srv.url, 1000);
    dlock_async_rwlock *writer = rw_on(c, "rwc");
    ah_rec w = {0};
    assert_int_equal(dlock_async_rwlock_write_lock(writer, 10000, ah_on_rw, &w), 0);
    ah_run_for(300);
    /* the waiting writer's intent holds back a new reader */
    assert_int_equal(dlock_rwlock_read_lock(breader, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_async_rwlock_cancel(writer), 0);
    assert_int_equal(w.calls, 1); /* before cancel returned */
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_int_equal(dlock_async_rwlock_cancel(writer), DLOCK_ENOTHELD);
    ah_run_for(200); /* the withdrawal's round trip, well inside the 1 s intent */
    assert_int_equal(dlock_rwlock_read_lock(breader, 0), 0);
    assert_int_equal(dlock_rwlock_read_unlock(breader), 0);
    assert_int_equal(dlock_rwlock_read_unlock(brw), 0);
    assert_int_equal(w.calls, 1);
    dlock_async_rwlock_free(writer);
    dlock_async_client_free(c);
    dlock_rwlock_free(breader);
    dlock_rwlock_free(brw);
    dlock_client_destroy(bc);
}

/* A read release that leaves a hold publishes nothing: it must not make
 * the next message, from another holder's release, count as one already
 * handed out (the waiting writer would sleep until its recheck). */
static void test_a_partial_read_release_does_not_swallow_a_wakeup(void **state)
{
    (void)state;
    dlock_client *bc = ah_blocking_client(srv.url);
    dlock_rwlock *brw = NULL;
    assert_int_equal(dlock_rwlock_new(bc, "rws", NULL, &brw), 0);
    assert_int_equal(dlock_rwlock_read_lock(brw, 0), 0);
    dlock_async_client *c = client_on(srv.url, 1000);
    dlock_async_rwlock *reader = rw_on(c, "rws"), *writer = NULL;
    dlock_rwlock_options ro;
    dlock_rwlock_options_init(&ro);
    ro.writer_intent_ms = 60000; /* rechecks grow to 20 s: a late wakeup shows */
    assert_int_equal(dlock_async_rwlock_new(c, "rws", &ro, &writer), 0);
    assert_int_equal(ah_rw_now(reader, false, true, 0), 0);
    assert_int_equal(ah_rw_now(reader, false, true, 0), 0); /* read twice */
    ah_rec w = {0};
    assert_int_equal(dlock_async_rwlock_write_lock(writer, 20000, ah_on_rw, &w), 0);
    ah_run_for(3000); /* the writer's recheck interval has grown past 1.6 s */
    assert_int_equal(ah_rw_now(reader, false, false, 0), 0); /* one hold left: no publish */
    assert_int_equal(ah_rw_now(reader, false, false, 0), 0); /* the last: publishes */
    ah_run_for(100);
    assert_int_equal(w.calls, 0); /* the blocking reader still holds */
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_rwlock_read_unlock(brw), 0);
    assert_int_equal(ah_wait_rec(&w, 5000), 0);
    assert_true(w.at_ms - t0 < 200 + AH_SLACK_MS); /* woken by that release's message */
    assert_int_equal(ah_rw_now(writer, true, false, 0), 0);
    dlock_async_rwlock_free(reader);
    dlock_async_rwlock_free(writer);
    dlock_async_client_free(c);
    dlock_rwlock_free(brw);
    dlock_client_destroy(bc);
}

/* ---- the semaphore ------------------------------------------------------------------------------- */

static void test_semaphore_permits_are_shared_with_blocking_holders(void **state)
{
    (void)state;
    dlock_client *bc = ah_blocking_client(srv.url);
    dlock_semaphore_options so;
    dlock_semaphore_options_init(&so);
    so.permits = 2;
    dlock_semaphore *bsem = NULL;
    assert_int_equal(dlock_semaphore_new(bc, "sem", &so, &bsem), 0);
    assert_int_equal(dlock_semaphore_acquire(bsem, 1, 0), 0);
    dlock_async_client *c = client_on(srv.url, 1000);
    dlock_async_semaphore *a = sem_on(c, "sem", 2), *b = sem_on(c, "sem", 2), *odd = sem_on(c, "sem", 3);
    assert_int_equal(ah_sem_now(a, true, 1, 0), 0);
    assert_int_equal(dlock_async_semaphore_held(a), 1);
    assert_int_equal(ah_sem_now(b, true, 1, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_semaphore_acquire(bsem, 1, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_async_semaphore_acquire(b, 3, 0, ah_on_sem, NULL), DLOCK_ELIMIT);
    assert_int_equal(ah_sem_now(odd, true, 1, 0), DLOCK_EINVAL); /* recorded with N = 2 */
    ah_rec r = {0};
    assert_int_equal(dlock_async_semaphore_acquire(b, 1, 8000, ah_on_sem, &r), 0);
    ah_later u = {.bsem = bsem};
    ah_release_later(&u, 1500);
    ah_run_until(&u.done, 3000);
    assert_int_equal(r.calls, 0);
    assert_int_equal(ah_wait_rec(&r, 3000), 0);
    assert_true(r.at_ms - u.at_ms < 500 + AH_SLACK_MS);
    assert_int_equal(dlock_semaphore_acquire(bsem, 1, 0), DLOCK_EBUSY);
    assert_int_equal(ah_sem_now(a, false, 2, 0), DLOCK_ENOTHELD);
    assert_int_equal(ah_sem_now(a, false, 1, 0), 0);
    assert_int_equal(dlock_semaphore_acquire(bsem, 1, 0), 0);
    assert_int_equal(dlock_semaphore_release(bsem, 1), 0);
    assert_int_equal(ah_sem_now(b, false, 1, 0), 0);
    ah_later_free(&u);
    dlock_async_semaphore_free(a);
    dlock_async_semaphore_free(b);
    dlock_async_semaphore_free(odd);
    dlock_async_client_free(c);
    dlock_semaphore_free(bsem);
    dlock_client_destroy(bc);
}

/* ---- lifetimes ----------------------------------------------------------------------------------------- */

static void test_freeing_ends_every_pending_operation_once(void **state)
{
    (void)state;
    dlock_async_client *c = client_on(srv.url, 1000);
    dlock_async_rwlock *w1 = rw_on(c, "free-rw"), *w2 = rw_on(c, "free-rw"), *w3 = rw_on(c, "free-rw");
    dlock_async_semaphore *s1 = sem_on(c, "free-sem", 1), *s2 = sem_on(c, "free-sem", 1);
    dlock_async_semaphore *s3 = sem_on(c, "free-sem", 1);
    assert_int_equal(ah_rw_now(w1, true, true, 0), 0);
    assert_int_equal(ah_sem_now(s1, true, 1, 0), 0);
    ah_rec r2 = {0}, r3 = {0}, q2 = {0}, q3 = {0};
    assert_int_equal(dlock_async_rwlock_write_lock(w2, 10000, ah_on_rw, &r2), 0);
    assert_int_equal(dlock_async_rwlock_read_lock(w3, 10000, ah_on_rw, &r3), 0);
    assert_int_equal(dlock_async_semaphore_acquire(s2, 1, 10000, ah_on_sem, &q2), 0);
    assert_int_equal(dlock_async_semaphore_acquire(s3, 1, 10000, ah_on_sem, &q3), 0);
    ah_run_for(200);
    dlock_async_rwlock_free(w3); /* a handle: ECANCELED before the free returns */
    dlock_async_semaphore_free(s3);
    assert_int_equal(r3.calls, 1);
    assert_int_equal(r3.rc, DLOCK_ECANCELED);
    assert_int_equal(q3.calls, 1);
    assert_int_equal(q3.rc, DLOCK_ECANCELED);
    dlock_async_client_free(c); /* the client: ECLOSED, once each */
    assert_int_equal(r2.calls, 1);
    assert_int_equal(r2.rc, DLOCK_ECLOSED);
    assert_int_equal(q2.calls, 1);
    assert_int_equal(q2.rc, DLOCK_ECLOSED);
    assert_int_equal(dlock_async_rwlock_write_unlock(w1, ah_on_rw, NULL), DLOCK_ECLOSED);
    assert_int_equal(dlock_async_semaphore_release(s1, 1, ah_on_sem, NULL), DLOCK_ECLOSED);
    assert_int_equal(dlock_async_rwlock_write_count(w1), 0);
    ah_run_for(100);
    assert_int_equal(r2.calls + q2.calls + r3.calls + q3.calls, 4);
    dlock_async_rwlock_free(w1);
    dlock_async_rwlock_free(w2);
    dlock_async_semaphore_free(s1);
    dlock_async_semaphore_free(s2);
}

/* ---- the loss at the validity deadline ------------------------------------------------------------------ */

typedef struct lost_rec {
    int calls, reason;
    int64_t at_ms;
    int64_t count_in_cb;
} lost_rec;

static void rw_lost(dlock_async_rwlock *rw, int reason, void *ud)
{
    lost_rec *x = ud;
    x->calls++;
    x->reason = reason;
    x->at_ms = dlock__now_ms();
    x->count_in_cb = dlock_async_rwlock_write_count(rw) + dlock_async_rwlock_read_count(rw);
}

static void sem_lost(dlock_async_semaphore *s, int reason, void *ud)
{
    lost_rec *x = ud;
    x->calls++;
    x->reason = reason;
    x->at_ms = dlock__now_ms();
    x->count_in_cb = dlock_async_semaphore_held(s);
}

static void test_the_losses_are_declared_at_the_deadline_when_the_server_is_cut_off(void **state)
{
    (void)state;
    int proxy_pid = 0;
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", ah_proxy_start(srv.port, &proxy_pid));
    /* replies may be later than the deadline: the loss must not wait for them */
    dlock_async_client *c = client_on(url, 3000);
    dlock_async_rwlock *rw = rw_on(c, "cut-rw");
    dlock_async_semaphore *s = sem_on(c, "cut-sem", 3);
    lost_rec lr = {0}, ls = {0};
    dlock_async_rwlock_set_on_lost(rw, rw_lost, &lr);
    dlock_async_semaphore_set_on_lost(s, sem_lost, &ls);
    int64_t t_before = dlock__now_ms();
    assert_int_equal(ah_rw_now(rw, true, true, 0), 0);
    assert_int_equal(ah_sem_now(s, true, 2, 0), 0);
    int64_t t_after = dlock__now_ms();
    assert_int_equal(kill(proxy_pid, SIGSTOP), 0);
    /* the rule of dlock.h with the default drift: 900 - 9 - 2 ms */
    int64_t lo_bound = t_before + AH_WATCHDOG_MS - 11, hi_bound = t_after + AH_WATCHDOG_MS - 11;
    ah_run_until(&ls.calls, 3000);
    ah_run_until(&lr.calls, 1000);
    assert_int_equal(lr.calls, 1);
    assert_int_equal(ls.calls, 1);
    assert_int_equal(lr.reason, DLOCK_ELOST);
    assert_int_equal(ls.reason, DLOCK_ELOST);
    assert_int_equal(lr.count_in_cb, 0);
    assert_int_equal(ls.count_in_cb, 0);
    assert_true(lr.at_ms >= lo_bound && lr.at_ms <= hi_bound + AH_SLACK_MS);
    assert_true(ls.at_ms >= lo_bound && ls.at_ms <= hi_bound + AH_SLACK_MS);
    assert_int_equal(dlock_async_rwlock_write_unlock(rw, ah_on_rw, NULL), DLOCK_ELOST);
    assert_int_equal(dlock_async_semaphore_release(s, 1, ah_on_sem, NULL), DLOCK_ELOST);
    ah_proxy_stop();
    dlock_async_rwlock_free(rw);
    dlock_async_semaphore_free(s);
    dlock_async_client_free(c);
}

/* ---- the loop thread beside a blocking thread ------------------------------------------------------------- */

#define RACE_MS 1500

typedef struct race {
    atomic_int in_lock, in_sem; /* holders of each name in this process now */
    atomic_int overlaps;   /* times a holder found another inside */
    atomic_long blocking_cycles;
    long async_cycles;
    int64_t end_ms;
    int async_errors, done;
    dlock_async_lock *l;
    dlock_async_semaphore *s;
    void *hold_timer; /* the async holder's stay inside */
    bool holding_sem;
} race;

/* A holder comes in: it must find nobody else of this process inside;
 * it stays in for a round trip (blocking) or a loop timer (async). */
static void come_in(race *r, atomic_int *inside)
{
    if (atomic_fetch_add(inside, 1) != 0) atomic_fetch_add(&r->overlaps, 1);
}

static void *blocking_cycles(void *arg)
{
    race *r = arg;
    dlock_client *bc = ah_blocking_client(srv.url);
    dlock_lock *bl = NULL;
    dlock_semaphore *bs = NULL;
    dlock_semaphore_options so;
    dlock_semaphore_options_init(&so);
    so.permits = 1;
    if (dlock_lock_new(bc, "race", NULL, &bl) != 0 || dlock_semaphore_new(bc, "race-sem", &so, &bs) != 0) abort();
    while (dlock__now_ms() < r->end_ms) {
        bool locked = false;
        if (dlock_lock_try_lock(bl, 2000, 5000, NULL) == 0) {
            come_in(r, &r->in_lock);
            if (dlock_lock_is_locked(bl, &locked) != 0 || !locked) atomic_fetch_add(&r->overlaps, 1);
            atomic_fetch_sub(&r->in_lock, 1);
            dlock_lock_unlock(bl);
            atomic_fetch_add(&r->blocking_cycles, 1);
        }
        int64_t avail = -1;
        if (dlock_semaphore_acquire(bs, 1, 2000) == 0) {
            come_in(r, &r->in_sem);
            if (dlock_semaphore_available(bs, &avail) != 0 || avail != 0) atomic_fetch_add(&r->overlaps, 1);
            atomic_fetch_sub(&r->in_sem, 1);
            dlock_semaphore_release(bs, 1);
        }
    }
    dlock_semaphore_free(bs);
    dlock_lock_free(bl);
    dlock_client_destroy(bc);
    return NULL;
}

static void race_next(race *r);

static void race_sem_released(dlock_async_semaphore *s, int rc, void *ud)
{
    (void)s;
    race *r = ud;
    if (rc) r->async_errors++;
    r->async_cycles++;
    race_next(r);
}

static void race_unlocked(dlock_async_lock *l, int rc, void *ud);

/* The async holder's stay is over: out, then the release. */
static void race_leave(void *arg)
{
    race *r = arg;
    if (r->holding_sem) {
        atomic_fetch_sub(&r->in_sem, 1);
        if (dlock_async_semaphore_release(r->s, 1, race_sem_released, r) == 0) return;
        r->async_errors++;
        race_next(r);
        return;
    }
    atomic_fetch_sub(&r->in_lock, 1);
    if (dlock_async_lock_unlock(r->l, race_unlocked, r) == 0) return;
    r->async_errors++;
    race_unlocked(r->l, 0, r);
}

static void race_sem_taken(dlock_async_semaphore *s, int rc, void *ud)
{
    (void)s;
    race *r = ud;
    if (rc) {
        race_next(r);
        return;
    }
    come_in(r, &r->in_sem);
    r->holding_sem = true;
    ah_loop.timer_start(r->hold_timer, 1);
}

static void race_unlocked(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    race *r = ud;
    if (rc) r->async_errors++;
    if (dlock_async_semaphore_acquire(r->s, 1, 2000, race_sem_taken, r) != 0) r->done = 1;
}

static void race_locked(dlock_async_lock *l, int rc, void *ud)
{
    race *r = ud;
    if (rc) {
        race_unlocked(l, 0, r);
        return;
    }
    come_in(r, &r->in_lock);
    r->holding_sem = false;
    ah_loop.timer_start(r->hold_timer, 1);
}

static void race_next(race *r)
{
    if (dlock__now_ms() >= r->end_ms || dlock_async_lock_acquire(r->l, 2000, 5000, race_locked, r) != 0) r->done = 1;
}

static void test_the_loop_and_a_blocking_thread_exclude_each_other(void **state)
{
    (void)state;
    dlock_async_client *c = client_on(srv.url, 3000);
    race r = {.end_ms = dlock__now_ms() + RACE_MS};
    assert_int_equal(dlock_async_lock_new(c, "race", NULL, &r.l), 0);
    r.s = sem_on(c, "race-sem", 1);
    r.hold_timer = ah_loop.timer_new(ah_loop.ud, race_leave, &r);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, blocking_cycles, &r), 0);
    race_next(&r);
    ah_run_until(&r.done, RACE_MS + 6000);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(r.done, 1);
    assert_int_equal(atomic_load(&r.overlaps), 0);
    assert_int_equal(r.async_errors, 0);
    assert_true(r.async_cycles > 0);
    assert_true(atomic_load(&r.blocking_cycles) > 0);
    ah_loop.timer_free(r.hold_timer);
    dlock_async_lock_free(r.l);
    dlock_async_semaphore_free(r.s);
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
        cmocka_unit_test_setup_teardown(test_rwlock_blocking_and_async_sides_exclude_and_wake, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_rwlock_cancel_withdraws_the_writers_intent, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_a_partial_read_release_does_not_swallow_a_wakeup, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_semaphore_permits_are_shared_with_blocking_holders, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_freeing_ends_every_pending_operation_once, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_the_losses_are_declared_at_the_deadline_when_the_server_is_cut_off,
                                        ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_the_loop_and_a_blocking_thread_exclude_each_other, ah_setup, ah_teardown),
    };
    return cmocka_run_group_tests_name(ah_name(), tests, group_setup, group_teardown);
}
