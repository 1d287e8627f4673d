/* test_fairlock.c: the fair (FIFO) lock against a real redis-server:
 * reentrancy, 8 waiters queued in a known order acquire in that order, a
 * release wakes only the head waiter (one publish, on its channel), a
 * kill -9'd waiter is purged and the next one proceeds within the waiter
 * deadline, a kill -9'd holder's lock comes back within its lease, and
 * timeout / cancel leave the queue. */
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

#include "dlock/fairlock.h"
#include "fam_support.h"
#include "redis_io.h"
#include "util.h"


static dlock_fairlock *fair(dlock_client *c, const char *name, int64_t ttl)
{
    dlock_fairlock_options o;
    dlock_fairlock_options_init(&o);
    if (ttl > 0) o.waiter_ttl_ms = ttl;
    dlock_fairlock *fl = NULL;
    assert_int_equal(dlock_fairlock_new(c, name, &o, &fl), 0);
    return fl;
}

static long long queue_len(const char *name)
{
    char key[256];
    snprintf(key, sizeof(key), "{%s%s}:fair:q", fam_prefix(), name);
    const char *llen[2] = {"LLEN", key};
    return fam_int(&fam_srv, 2, llen);
}

static void wait_queue_len(const char *name, long long n)
{
    int64_t t0 = dlock__now_ms();
    while (queue_len(name) != n && dlock__now_ms() - t0 < 5000) dlock__sleep_ms(5);
    assert_int_equal(queue_len(name), n);
}

/* The hold count of a handle, which must be answered. */
static int64_t fl_count(dlock_fairlock *fl)
{
    int64_t n = -1;
    assert_int_equal(dlock_fairlock_hold_count(fl, &n), 0);
    return n;
}

/* Hold count is the server's answer, as for every object: a lock deleted
 * behind the handle's back counts 0 at once, before any watchdog round. */
static void test_hold_count_is_the_servers(void **state)
{
    (void)state;
    dlock_fairlock *fl = fair(fam_cli, "fl:count", 0);
    assert_int_equal(dlock_fairlock_lock(fl, 0, 60000), 0);
    assert_int_equal(fl_count(fl), 1);
    char key[256];
    const char *del[2] = {"DEL", fam_key("fl:count", key, sizeof(key))};
    assert_int_equal(fam_int(&fam_srv, 2, del), 1);
    assert_int_equal(fl_count(fl), 0);
    assert_int_equal(dlock_fairlock_hold_count(NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_fairlock_unlock(fl), DLOCK_ELOST);
    dlock_fairlock_free(fl);
}

static void test_reentrant_and_exclusive(void **state)
{
    (void)state;
    dlock_fairlock *a = fair(fam_cli, "fl:basic", 0), *b = fair(fam_cli, "fl:basic", 0);
    assert_int_equal(dlock_fairlock_lock(a, 0, 0), 0);
    assert_int_equal(dlock_fairlock_lock(a, 0, 0), 0);
    assert_int_equal(fl_count(a), 2);
    assert_int_equal(dlock_fairlock_lock(b, 0, 0), DLOCK_EBUSY);
    assert_int_equal(queue_len("fl:basic"), 0); /* a one-shot try never queues */
    assert_int_equal(dlock_fairlock_unlock(a), 0);
    assert_int_equal(dlock_fairlock_lock(b, 0, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_fairlock_unlock(a), 0);
    assert_int_equal(dlock_fairlock_unlock(a), DLOCK_ENOTHELD);
    assert_int_equal(dlock_fairlock_lock(b, 0, 500), 0);
    assert_int_equal(dlock_fairlock_unlock(b), 0);
    dlock_fairlock_free(a);
    dlock_fairlock_free(b);
}

/* ---- FIFO order ---------------------------------------------------------- */

typedef struct q_arg {
    int id;
    atomic_int *next_slot;
    int slot;
    int rc;
} q_arg;

static void *queued_waiter(void *p)
{
    q_arg *a = p;
    dlock_fairlock *fl = fair(fam_cli, "fl:fifo", 0);
    a->rc = dlock_fairlock_lock(fl, 10000, 0);
    if (a->rc == 0) {
        a->slot = atomic_fetch_add(a->next_slot, 1);
        dlock__sleep_ms(10);
        a->rc = dlock_fairlock_unlock(fl);
    }
    dlock_fairlock_free(fl);
    return NULL;
}

static void test_eight_waiters_acquire_in_queue_order(void **state)
{
    (void)state;
    dlock_fairlock *holder = fair(fam_cli, "fl:fifo", 0);
    assert_int_equal(dlock_fairlock_lock(holder, 0, 0), 0);
    atomic_int next = 0;
    q_arg a[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (q_arg){i, &next, -1, 1};
        assert_int_equal(pthread_create(&th[i], NULL, queued_waiter, &a[i]), 0);
        wait_queue_len("fl:fifo", i + 1); /* i is queued before i+1 starts */
    }
    assert_int_equal(dlock_fairlock_unlock(holder), 0);
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, 0);
    }
    for (int i = 0; i < 8; i++) assert_int_equal(a[i].slot, i);
    assert_int_equal(queue_len("fl:fifo"), 0);
    dlock_fairlock_free(holder);
}

/* ---- wake-one -------------------------------------------------------------- */

static void *lock_and_release(void *p)
{
    q_arg *a = p;
    dlock_fairlock *fl = fair(fam_cli, "fl:wake", 0);
    a->rc = dlock_fairlock_lock(fl, 10000, 0);
    if (a->rc == 0) {
        a->slot = atomic_fetch_add(a->next_slot, 1);
        dlock__sleep_ms(100);
        a->rc = dlock_fairlock_unlock(fl);
    }
    dlock_fairlock_free(fl);
    return NULL;
}

static void test_release_wakes_only_the_head_waiter(void **state)
{
    (void)state;
    LT_STANDALONE_ONLY("PSUBSCRIBE on one server sees only plain messages");
    dlock__url u = {.kind = DLOCK__URL_TCP, .host = "127.0.0.1", .port = fam_srv.port};
    dlock__conn_opts co = {.connect_timeout_ms = 500, .command_timeout_ms = 1000};
    dlock__conn *sub = NULL;
    assert_int_equal(dlock__conn_open(&u, &co, &sub, NULL, 0), 0);
    char pattern[256];
    snprintf(pattern, sizeof(pattern), "{%sfl:wake}:fair:wake:*", fam_prefix());
    const char *psub[2] = {"PSUBSCRIBE", pattern};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(sub, 2, psub, NULL, &r), 0);
    dlock__reply_free(r);

    dlock_fairlock *holder = fair(fam_cli, "fl:wake", 0);
    assert_int_equal(dlock_fairlock_lock(holder, 0, 0), 0);
    atomic_int next = 0;
    q_arg a[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        a[i] = (q_arg){i, &next, -1, 1};
        assert_int_equal(pthread_create(&th[i], NULL, lock_and_release, &a[i]), 0);
        wait_queue_len("fl:wake", i + 1);
    }
    assert_int_equal(dlock_fairlock_unlock(holder), 0);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    /* 3 waiters, 3 releases that had a waiter left: 3 messages, each on
     * the channel of exactly one waiter (none broadcast to the herd) */
    int messages = 0;
    char seen[3][128];
    while (dlock__conn_read_push(sub, 200, &r) == 0) {
        size_t n = dlock__reply_count(r);
        if (n == 4) {
            const char *ch = dlock__reply_str(dlock__reply_at(r, 2), NULL);
            if (messages < 3) snprintf(seen[messages], sizeof(seen[0]), "%s", ch);
            messages++;
        }
        dlock__reply_free(r);
    }
    dlock__conn_close(sub);
    print_message("%d wake messages for 3 queued waiters\n", messages);
    assert_int_equal(messages, 3);
    assert_string_not_equal(seen[0], seen[1]);
    assert_string_not_equal(seen[1], seen[2]);
    for (int i = 0; i < 3; i++) assert_int_equal(a[i].slot, i);
    dlock_fairlock_free(holder);
}

/* ---- dead waiters and dead holders ------------------------------------------ */

static int dying_waiter(const test_server *srv_, const char *arg)
{
    (void)arg;
    dlock_client *c = fam_client(srv_, 0);
    if (!c) return 2;
    dlock_fairlock_options o;
    dlock_fairlock_options_init(&o);
    o.waiter_ttl_ms = 600;
    dlock_fairlock *fl = NULL;
    if (dlock_fairlock_new(c, "fl:deadwaiter", &o, &fl)) return 3;
    dlock_fairlock_lock(fl, DLOCK_WAIT_FOREVER, 0); /* killed while queued */
    return 4;
}

typedef struct timed_arg {
    dlock_fairlock *fl;
    int64_t got_ms;
    int rc;
} timed_arg;

static void *timed_lock(void *p)
{
    timed_arg *a = p;
    a->rc = dlock_fairlock_lock(a->fl, 10000, 0);
    a->got_ms = dlock__now_ms();
    if (a->rc == 0) a->rc = dlock_fairlock_unlock(a->fl);
    return NULL;
}

static void test_killed_waiter_is_purged_and_the_next_proceeds(void **state)
{
    (void)state;
    dlock_fairlock *holder = fair(fam_cli, "fl:deadwaiter", 600);
    assert_int_equal(dlock_fairlock_lock(holder, 0, 0), 0);
    pid_t pid = fam_spawn("dying_waiter", &fam_srv, NULL);
    assert_true(pid > 0);
    wait_queue_len("fl:deadwaiter", 1);
    timed_arg w = {fair(fam_cli, "fl:deadwaiter", 600), 0, 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, timed_lock, &w), 0);
    wait_queue_len("fl:deadwaiter", 2);
    fam_kill_child(pid); /* the head of the queue dies */
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_fairlock_unlock(holder), 0);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, 0);
    int64_t took = w.got_ms - t0;
    print_message("next waiter got the lock %lld ms after the release (dead head, ttl 600)\n",
                  (long long)took);
    assert_true(took <= 600 + FAM_SLACK_MS);
    assert_int_equal(queue_len("fl:deadwaiter"), 0);
    dlock_fairlock_free(w.fl);
    dlock_fairlock_free(holder);
}

static int dying_holder(const test_server *srv_, const char *arg)
{
    (void)arg;
    dlock_client *c = fam_client(srv_, 0);
    if (!c) return 2;
    dlock_fairlock *fl = NULL;
    if (dlock_fairlock_new(c, "fl:deadholder", NULL, &fl) || dlock_fairlock_lock(fl, 0, 0)) return 3;
    const char *set[3] = {"SET", "fl:held", "1"};
    lt_cmd(srv_, NULL, 0, 3, set);
    for (;;) dlock__sleep_ms(1000);
}

static void test_killed_holder_lock_returns_within_its_lease(void **state)
{
    (void)state;
    pid_t pid = fam_spawn("dying_holder", &fam_srv, NULL);
    assert_true(pid > 0);
    const char *get[2] = {"GET", "fl:held"};
    int64_t t0 = dlock__now_ms();
    while (fam_int(&fam_srv, 2, get) != 1 && dlock__now_ms() - t0 < 5000) dlock__sleep_ms(10);
    assert_int_equal(fam_int(&fam_srv, 2, get), 1);
    dlock__sleep_ms(1000); /* watchdog renewed it past one lease */
    dlock_fairlock *fl = fair(fam_cli, "fl:deadholder", 0);
    assert_int_equal(dlock_fairlock_lock(fl, 0, 0), DLOCK_EBUSY);
    fam_kill_child(pid);
    int64_t killed = dlock__now_ms();
    assert_int_equal(dlock_fairlock_lock(fl, 5000, 0), 0);
    int64_t took = dlock__now_ms() - killed;
    print_message("killed holder's fair lock back after %lld ms (lease 900)\n", (long long)took);
    assert_true(took <= 900 + FAM_SLACK_MS);
    assert_int_equal(dlock_fairlock_unlock(fl), 0);
    dlock_fairlock_free(fl);
}

/* ---- timeout and cancel ---------------------------------------------------- */

static void test_timeout_and_cancel_leave_the_queue(void **state)
{
    (void)state;
    dlock_fairlock *holder = fair(fam_cli, "fl:leave", 0), *w = fair(fam_cli, "fl:leave", 0);
    assert_int_equal(dlock_fairlock_lock(holder, 0, 0), 0);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_fairlock_lock(w, 150, 0), DLOCK_ETIMEOUT);
    int64_t took = dlock__now_ms() - t0;
    assert_true(took >= 145 && took < 150 + FAM_SLACK_MS);
    assert_int_equal(queue_len("fl:leave"), 0);
    timed_arg a = {w, 0, 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, timed_lock, &a), 0);
    wait_queue_len("fl:leave", 1);
    t0 = dlock__now_ms();
    dlock_fairlock_cancel(w);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    assert_true(a.got_ms - t0 < FAM_SLACK_MS);
    assert_int_equal(queue_len("fl:leave"), 0);
    assert_int_equal(dlock_fairlock_unlock(holder), 0);
    dlock_fairlock_free(holder);
    dlock_fairlock_free(w);
}

static void test_watchdog_detects_a_deleted_lock_and_the_handle_recovers(void **state)
{
    (void)state;
    dlock_fairlock *fl = fair(fam_cli, "fl:lost", 0);
    assert_int_equal(dlock_fairlock_lock(fl, 0, 0), 0);
    char key[256];
    const char *del[2] = {"DEL", fam_key("fl:lost", key, sizeof(key))};
    assert_int_equal(fam_int(&fam_srv, 2, del), 1);
    dlock__sleep_ms(700);
    assert_int_equal(dlock_fairlock_unlock(fl), DLOCK_ELOST);
    assert_int_equal(fl_count(fl), 0);
    assert_int_equal(dlock_fairlock_lock(fl, 0, 0), 0);
    dlock__sleep_ms(1200);
    assert_int_equal(dlock_fairlock_unlock(fl), 0);
    dlock_fairlock_free(fl);
}

static atomic_int fl_lost_calls;
static atomic_llong fl_lost_validity;

static void on_fl_lost(dlock_fairlock *fl, int reason, void *ud)
{
    assert_int_equal(reason, DLOCK_ELOST);
    assert_ptr_equal(ud, &fl_lost_calls);
    atomic_store(&fl_lost_validity, dlock_fairlock_validity_ms(fl));
    atomic_fetch_add(&fl_lost_calls, 1);
}

/* The validity rule (dlock.h): with Redis frozen (SIGSTOP: sockets open,
 * nothing answers) the loss is declared at the deadline - send time of the
 * last good renewal + lease - drift - by the watchdog's deadline thread,
 * not when some blocked renewal returns; validity counts down to it. */
static void test_frozen_server_loss_is_declared_at_the_validity_deadline(void **state)
{
    (void)state;
    LT_STANDALONE_ONLY("freezes the one server");
    dlock_client *c = fam_client(&fam_srv, 900);
    dlock_fairlock *fl = fair(c, "fl:frozen", 0);
    atomic_store(&fl_lost_calls, 0);
    dlock_fairlock_set_on_lost(fl, on_fl_lost, &fl_lost_calls);
    assert_int_equal(dlock_fairlock_validity_ms(fl), 0);
    assert_int_equal(dlock_fairlock_lock(fl, 0, 0), 0);
    int64_t v = dlock_fairlock_validity_ms(fl);
    assert_true(v > 0 && v <= 900 - 9 - 2); /* lease less 1 % + 2 ms */
    dlock__sleep_ms(1000); /* renewals keep it valid past one lease */
    assert_true(dlock_fairlock_validity_ms(fl) > 0);
    int64_t took = fam_frozen_until_called(&fam_srv, &fl_lost_calls, 900 + FAM_SLACK_MS);
    assert_int_equal(atomic_load(&fl_lost_calls), 1);
    assert_true(took <= 900 + FAM_SLACK_MS); /* at most one lease after the cut */
    assert_int_equal(atomic_load(&fl_lost_validity), 0);
    assert_int_equal(dlock_fairlock_validity_ms(fl), 0);
    assert_int_equal(dlock_fairlock_unlock(fl), DLOCK_ELOST);
    dlock_fairlock_free(fl);
    dlock_client_destroy(c);
}

static void test_bad_input_is_refused(void **state)
{
    (void)state;
    dlock_fairlock_options o;
    dlock_fairlock_options_init(&o);
    o.waiter_ttl_ms = 5;
    dlock_fairlock *fl = NULL;
    assert_int_equal(dlock_fairlock_new(fam_cli, "x", &o, &fl), DLOCK_EINVAL);
    assert_int_equal(dlock_fairlock_new(fam_cli, "", NULL, &fl), DLOCK_EINVAL);
    assert_int_equal(dlock_fairlock_new(NULL, "x", NULL, &fl), DLOCK_EINVAL);
    assert_null(fl);
    fl = fair(fam_cli, "fl:bad", 0);
    assert_int_equal(dlock_fairlock_lock(fl, 0, -1), DLOCK_EINVAL);
    assert_int_equal(dlock_fairlock_lock(fl, -2, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_fairlock_unlock(fl), DLOCK_ENOTHELD);
    assert_int_equal(dlock_fairlock_unlock(NULL), DLOCK_EINVAL);
    dlock_fairlock_free(fl);
    dlock_fairlock_free(NULL);
}

static const fam_role roles[] = {{"dying_waiter", dying_waiter}, {"dying_holder", dying_holder}, {NULL, NULL}};

int main(int argc, char **argv)
{
    fam_child_dispatch(argc, argv, roles);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentrant_and_exclusive),
        cmocka_unit_test(test_hold_count_is_the_servers),
        cmocka_unit_test(test_eight_waiters_acquire_in_queue_order),
        cmocka_unit_test(test_release_wakes_only_the_head_waiter),
        cmocka_unit_test(test_killed_waiter_is_purged_and_the_next_proceeds),
        cmocka_unit_test(test_killed_holder_lock_returns_within_its_lease),
        cmocka_unit_test(test_timeout_and_cancel_leave_the_queue),
        cmocka_unit_test(test_watchdog_detects_a_deleted_lock_and_the_handle_recovers),
        cmocka_unit_test(test_frozen_server_loss_is_declared_at_the_validity_deadline),
        cmocka_unit_test(test_bad_input_is_refused),
    };
    return cmocka_run_group_tests(tests, fam_setup, fam_teardown);
}
