/* test_rwlock.c: the read-write lock against a real redis-server: readers
 * overlap (measured), a writer excludes readers and writers (also under
 * threads), downgrade works, upgrade is refused with DLOCK_EUPGRADE, a
 * writer is not starved by a stream of overlapping readers (and would be
 * without the writer intent), timeout and cancel, and a kill -9'd writer
 * or reader gives the lock back within its lease. */
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

#include "dlock/rwlock.h"
#include "fam_support.h"
#include "util.h"


static dlock_rwlock *rwl(const char *name, int64_t intent_ms)
{
    dlock_rwlock_options o;
    dlock_rwlock_options_init(&o);
    if (intent_ms >= 0) o.writer_intent_ms = intent_ms;
    dlock_rwlock *rw = NULL;
    assert_int_equal(dlock_rwlock_new(fam_cli, name, &o, &rw), 0);
    return rw;
}

/* ---- readers overlap ---------------------------------------------------- */

typedef struct rd_arg {
    const char *name;
    atomic_int *inside;
    atomic_int *max_inside;
    int rc;
} rd_arg;

static void *reader(void *p)
{
    rd_arg *a = p;
    dlock_rwlock *rw = rwl(a->name, -1);
    a->rc = dlock_rwlock_read_lock(rw, 2000);
    if (a->rc == 0) {
        int now = atomic_fetch_add(a->inside, 1) + 1;
        int prev = atomic_load(a->max_inside);
        while (now > prev && !atomic_compare_exchange_weak(a->max_inside, &prev, now)) {}
        dlock__sleep_ms(200);
        atomic_fetch_sub(a->inside, 1);
        a->rc = dlock_rwlock_read_unlock(rw);
    }
    dlock_rwlock_free(rw);
    return NULL;
}

static void test_readers_overlap(void **state)
{
    (void)state;
    atomic_int inside = 0, max_inside = 0;
    rd_arg a[4];
    pthread_t th[4];
    int64_t t0 = dlock__now_ms();
    for (int i = 0; i < 4; i++) {
        a[i] = (rd_arg){"rw:overlap", &inside, &max_inside, 1};
        assert_int_equal(pthread_create(&th[i], NULL, reader, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, 0);
    }
    int64_t took = dlock__now_ms() - t0;
    print_message("4 readers x 200 ms took %lld ms, up to %d at once\n", (long long)took,
                  atomic_load(&max_inside));
    assert_true(atomic_load(&max_inside) >= 2);
    assert_true(took < 800); /* serialised they would need 800 ms */
}

/* ---- writers exclude ---------------------------------------------------- */

static void test_writer_excludes_readers_and_writers(void **state)
{
    (void)state;
    dlock_rwlock *w = rwl("rw:excl", -1), *w2 = rwl("rw:excl", -1), *r = rwl("rw:excl", -1);
    assert_int_equal(dlock_rwlock_write_lock(w, 0), 0);
    assert_int_equal(dlock_rwlock_write_lock(w, 0), 0); /* re-entry */
    assert_int_equal(dlock_rwlock_write_count(w), 2);
    assert_int_equal(dlock_rwlock_read_lock(r, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_rwlock_write_lock(w2, 0), DLOCK_EBUSY);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_rwlock_read_lock(r, 100), DLOCK_ETIMEOUT);
    assert_true(dlock__now_ms() - t0 >= 95);
    assert_int_equal(dlock_rwlock_write_unlock(w), 0);
    assert_int_equal(dlock_rwlock_read_lock(r, 0), DLOCK_EBUSY); /* one level left */
    assert_int_equal(dlock_rwlock_write_unlock(w), 0);
    assert_int_equal(dlock_rwlock_write_unlock(w), DLOCK_ENOTHELD);
    assert_int_equal(dlock_rwlock_read_lock(r, 0), 0);
    assert_int_equal(dlock_rwlock_write_lock(w2, 0), DLOCK_EBUSY); /* readers exclude writers */
    assert_int_equal(dlock_rwlock_read_unlock(r), 0);
    assert_int_equal(dlock_rwlock_write_lock(w2, 0), 0);
    assert_int_equal(dlock_rwlock_write_unlock(w2), 0);
    dlock_rwlock_free(w);
    dlock_rwlock_free(w2);
    dlock_rwlock_free(r);
}

typedef struct mix_arg {
    bool writer;
    atomic_int *readers, *writers, *bad;
    int rounds;
    int rc;
} mix_arg;

static void *mixed(void *p)
{
    mix_arg *a = p;
    dlock_rwlock *rw = rwl("rw:mixed", -1);
    for (int i = 0; i < 12 && a->rc == 0; i++) {
        a->rc = a->writer ? dlock_rwlock_write_lock(rw, 5000) : dlock_rwlock_read_lock(rw, 5000);
        if (a->rc) break;
        if (a->writer) {
            if (atomic_fetch_add(a->writers, 1) != 0 || atomic_load(a->readers) != 0)
                atomic_fetch_add(a->bad, 1);
            dlock__sleep_ms(3);
            atomic_fetch_sub(a->writers, 1);
            a->rc = dlock_rwlock_write_unlock(rw);
        } else {
            atomic_fetch_add(a->readers, 1);
            if (atomic_load(a->writers) != 0) atomic_fetch_add(a->bad, 1);
            dlock__sleep_ms(3);
            atomic_fetch_sub(a->readers, 1);
            a->rc = dlock_rwlock_read_unlock(rw);
        }
        a->rounds++;
    }
    dlock_rwlock_free(rw);
    return NULL;
}

static void test_writers_exclude_everyone_under_threads(void **state)
{
    (void)state;
    atomic_int readers = 0, writers = 0, bad = 0;
    mix_arg a[6];
    pthread_t th[6];
    for (int i = 0; i < 6; i++) {
        a[i] = (mix_arg){i < 2, &readers, &writers, &bad, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, mixed, &a[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, 0);
        assert_int_equal(a[i].rounds, 12);
    }
    assert_int_equal(atomic_load(&bad), 0);
}

/* ---- downgrade / upgrade ------------------------------------------------ */

static void test_writer_downgrades_to_reader(void **state)
{
    (void)state;
    dlock_rwlock *w = rwl("rw:down", -1), *r = rwl("rw:down", -1), *w2 = rwl("rw:down", -1);
    assert_int_equal(dlock_rwlock_write_lock(w, 0), 0);
    assert_int_equal(dlock_rwlock_read_lock(w, 0), 0); /* writer may read */
    assert_int_equal(dlock_rwlock_read_lock(r, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_rwlock_write_unlock(w), 0); /* now only a reader */
    assert_int_equal(dlock_rwlock_read_count(w), 1);
    assert_int_equal(dlock_rwlock_read_lock(r, 0), 0);
    assert_int_equal(dlock_rwlock_write_lock(w2, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_rwlock_read_unlock(w), 0);
    assert_int_equal(dlock_rwlock_read_unlock(r), 0);
    assert_int_equal(dlock_rwlock_write_lock(w2, 0), 0);
    assert_int_equal(dlock_rwlock_write_unlock(w2), 0);
    dlock_rwlock_free(w);
    dlock_rwlock_free(r);
    dlock_rwlock_free(w2);
}

static void test_upgrade_is_refused_not_deadlocked(void **state)
{
    (void)state;
    dlock_rwlock *a = rwl("rw:up", -1), *b = rwl("rw:up", -1);
    assert_int_equal(dlock_rwlock_read_lock(a, 0), 0);
    assert_int_equal(dlock_rwlock_read_lock(b, 0), 0);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_rwlock_write_lock(a, 5000), DLOCK_EUPGRADE);
    assert_int_equal(dlock_rwlock_write_lock(b, DLOCK_WAIT_FOREVER), DLOCK_EUPGRADE);
    assert_true(dlock__now_ms() - t0 < FAM_SLACK_MS); /* at once, not after 5 s */
    assert_int_equal(dlock_rwlock_write_count(a), 0);
    assert_int_equal(dlock_rwlock_read_count(a), 1); /* nothing changed */
    assert_int_equal(dlock_rwlock_read_unlock(b), 0);
    assert_int_equal(dlock_rwlock_read_unlock(a), 0);
    assert_int_equal(dlock_rwlock_write_lock(a, 0), 0);
    assert_int_equal(dlock_rwlock_write_unlock(a), 0);
    dlock_rwlock_free(a);
    dlock_rwlock_free(b);
}

/* ---- writer starvation -------------------------------------------------- */

/* A relay of readers that never leaves the lock without one, whatever the
 * scheduling: a reader lets go only once a newer reader holds the lock, or
 * once a waiting writer's intent is on the server (from then on no new
 * reader may enter, so the readers drain). No timing is assumed. */
typedef struct relay {
    const char *name;
    char intent_key[256]; /* {key}:rw:ww, the waiting writers */
    atomic_int seq;       /* read acquisitions so far */
    atomic_bool stop;
} relay;

typedef struct relay_arg {
    relay *r;
    int rc;
} relay_arg;

static bool writer_intent_on_server(const relay *r)
{
    const char *zcard[2] = {"ZCARD", r->intent_key};
    return fam_int(&fam_srv, 2, zcard) > 0;
}

static void *read_relay(void *p)
{
    relay_arg *a = p;
    relay *r = a->r;
    dlock_rwlock *rw = rwl(r->name, -1);
    while (!atomic_load(&r->stop)) {
        int rc = dlock_rwlock_read_lock(rw, 3000);
        if (rc) {
            a->rc = rc;
            break;
        }
        int mine = atomic_fetch_add(&r->seq, 1) + 1;
        while (atomic_load(&r->seq) == mine && !atomic_load(&r->stop) && !writer_intent_on_server(r))
            dlock__sleep_ms(2);
        dlock_rwlock_read_unlock(rw);
    }
    dlock_rwlock_free(rw);
    return NULL;
}

static int64_t writer_wait_behind_readers(const char *name, int64_t intent_ms, int *rc_out)
{
    relay r = {.name = name};
    snprintf(r.intent_key, sizeof(r.intent_key), "{%s%s}:rw:ww", fam_prefix(), name);
    relay_arg a[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (relay_arg){&r, 0};
        assert_int_equal(pthread_create(&th[i], NULL, read_relay, &a[i]), 0);
    }
    int64_t t0 = dlock__now_ms(); /* the relay is running: readers have handed over */
    while (atomic_load(&r.seq) < 8 && dlock__now_ms() - t0 < 5000) dlock__sleep_ms(1);
    assert_true(atomic_load(&r.seq) >= 8);
    dlock_rwlock *w = rwl(name, intent_ms);
    t0 = dlock__now_ms();
    *rc_out = dlock_rwlock_write_lock(w, 900);
    int64_t took = dlock__now_ms() - t0;
    if (*rc_out == 0) dlock_rwlock_write_unlock(w);
    atomic_store(&r.stop, true);
    dlock_rwlock_free(w);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].rc, 0);
    }
    return took;
}

static void test_writer_is_not_starved_by_a_stream_of_readers(void **state)
{
    (void)state;
    int rc;
    int64_t took = writer_wait_behind_readers("rw:starve", -1, &rc);
    print_message("writer behind a reader stream got the lock after %lld ms\n", (long long)took);
    assert_int_equal(rc, 0);
    assert_true(took < 300 + FAM_SLACK_MS); /* the readers holding drain, no new ones enter */
    /* the same relay with the intent switched off: never a moment without a reader */
    took = writer_wait_behind_readers("rw:starve-off", 0, &rc);
    print_message("without writer intent: rc %d after %lld ms\n", rc, (long long)took);
    assert_int_equal(rc, DLOCK_ETIMEOUT);
}

/* ---- cancel and crashes -------------------------------------------------- */

typedef struct wl_arg {
    dlock_rwlock *rw;
    int rc;
} wl_arg;

static void *write_forever(void *p)
{
    wl_arg *a = p;
    a->rc = dlock_rwlock_write_lock(a->rw, DLOCK_WAIT_FOREVER);
    return NULL;
}

static void test_cancel_wakes_a_waiting_writer_and_withdraws_its_intent(void **state)
{
    (void)state;
    dlock_rwlock *r = rwl("rw:cancel", -1), *w = rwl("rw:cancel", -1), *r2 = rwl("rw:cancel", -1);
    assert_int_equal(dlock_rwlock_read_lock(r, 0), 0);
    wl_arg a = {w, 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, write_forever, &a), 0);
    char intent_key[256];
    snprintf(intent_key, sizeof(intent_key), "{%srw:cancel}:rw:ww", fam_prefix());
    const char *zcard[2] = {"ZCARD", intent_key};
    int64_t t_wait = dlock__now_ms(); /* the writer is waiting: its intent is on the server */
    while (fam_int(&fam_srv, 2, zcard) != 1 && dlock__now_ms() - t_wait < 5000) dlock__sleep_ms(2);
    assert_int_equal(fam_int(&fam_srv, 2, zcard), 1);
    assert_int_equal(dlock_rwlock_read_lock(r2, 0), DLOCK_EBUSY); /* intent holds readers */
    int64_t t0 = dlock__now_ms();
    dlock_rwlock_cancel(w);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    assert_true(dlock__now_ms() - t0 < FAM_SLACK_MS);
    assert_int_equal(dlock_rwlock_read_lock(r2, 0), 0); /* intent withdrawn */
    assert_int_equal(dlock_rwlock_read_unlock(r2), 0);
    assert_int_equal(dlock_rwlock_read_unlock(r), 0);
    dlock_rwlock_free(r);
    dlock_rwlock_free(w);
    dlock_rwlock_free(r2);
}

static int crashing_holder(const test_server *srv_, const char *arg)
{
    bool write = strcmp(arg, "w") == 0;
    dlock_client *c = fam_client(srv_, 0);
    if (!c) return 2;
    dlock_rwlock *rw = NULL;
    if (dlock_rwlock_new(c, "rw:crash", NULL, &rw)) return 3;
    int rc = write ? dlock_rwlock_write_lock(rw, 0) : dlock_rwlock_read_lock(rw, 0);
    if (rc) return 4;
    const char *set[3] = {"SET", "rw:crash-held", "1"};
    lt_cmd(srv_, NULL, 0, 3, set);
    for (;;) dlock__sleep_ms(1000);
}

static void crash_case(bool write)
{
    const char *del[2] = {"DEL", "rw:crash-held"};
    lt_cmd(&fam_srv, NULL, 0, 2, del);
    pid_t pid = fam_spawn("crashing_holder", &fam_srv, write ? "w" : "r");
    assert_true(pid > 0);
    const char *get[2] = {"GET", "rw:crash-held"};
    int64_t t0 = dlock__now_ms();
    while (fam_int(&fam_srv, 2, get) != 1 && dlock__now_ms() - t0 < 5000) dlock__sleep_ms(10);
    assert_int_equal(fam_int(&fam_srv, 2, get), 1);
    dlock__sleep_ms(1000); /* renewed past one lease (900 ms) */
    dlock_rwlock *w = rwl("rw:crash", -1);
    assert_int_equal(dlock_rwlock_write_lock(w, 0), DLOCK_EBUSY);
    fam_kill_child(pid);
    int64_t killed = dlock__now_ms();
    assert_int_equal(dlock_rwlock_write_lock(w, 5000), 0);
    int64_t took = dlock__now_ms() - killed;
    print_message("killed %s: lock back after %lld ms (lease 900)\n", write ? "writer" : "reader",
                  (long long)took);
    assert_true(took <= 900 + FAM_SLACK_MS);
    assert_int_equal(dlock_rwlock_write_unlock(w), 0);
    dlock_rwlock_free(w);
}

static void test_killed_writer_or_reader_returns_the_lock_within_its_lease(void **state)
{
    (void)state;
    crash_case(true);
    crash_case(false);
}

static void test_watchdog_detects_a_deleted_lock_and_the_handle_recovers(void **state)
{
    (void)state;
    dlock_rwlock *w = rwl("rw:lost", -1);
    assert_int_equal(dlock_rwlock_write_lock(w, 0), 0);
    char key[256];
    snprintf(key, sizeof(key), "{%srw:lost}:rw:w", fam_prefix());
    const char *del[2] = {"DEL", key};
    assert_int_equal(fam_int(&fam_srv, 2, del), 1); /* an admin deletes it */
    dlock__sleep_ms(700); /* > one renewal period (300 ms) */
    assert_int_equal(dlock_rwlock_write_unlock(w), DLOCK_ELOST);
    assert_int_equal(dlock_rwlock_write_count(w), 0);
    assert_int_equal(dlock_rwlock_write_lock(w, 0), 0); /* usable again */
    dlock__sleep_ms(1200);                              /* and renewed again */
    assert_int_equal(dlock_rwlock_write_unlock(w), 0);
    dlock_rwlock_free(w);
}

static void test_bad_input_is_refused(void **state)
{
    (void)state;
    dlock_rwlock *rw = NULL;
    dlock_rwlock_options o;
    dlock_rwlock_options_init(&o);
    o.lease_ms = -1;
    assert_int_equal(dlock_rwlock_new(fam_cli, "x", &o, &rw), DLOCK_EINVAL);
    assert_int_equal(dlock_rwlock_new(fam_cli, "", NULL, &rw), DLOCK_EINVAL);
    assert_int_equal(dlock_rwlock_new(NULL, "x", NULL, &rw), DLOCK_EINVAL);
    assert_null(rw);
    rw = rwl("rw:bad", -1);
    assert_int_equal(dlock_rwlock_read_unlock(rw), DLOCK_ENOTHELD);
    assert_int_equal(dlock_rwlock_write_unlock(rw), DLOCK_ENOTHELD);
    assert_int_equal(dlock_rwlock_read_lock(rw, -3), DLOCK_EINVAL);
    assert_int_equal(dlock_rwlock_read_lock(NULL, 0), DLOCK_EINVAL);
    dlock_rwlock_free(rw);
    dlock_rwlock_free(NULL);
}

static const fam_role roles[] = {{"crashing_holder", crashing_holder}, {NULL, NULL}};

int main(int argc, char **argv)
{
    fam_child_dispatch(argc, argv, roles);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readers_overlap),
        cmocka_unit_test(test_writer_excludes_readers_and_writers),
        cmocka_unit_test(test_writers_exclude_everyone_under_threads),
        cmocka_unit_test(test_writer_downgrades_to_reader),
        cmocka_unit_test(test_upgrade_is_refused_not_deadlocked),
        cmocka_unit_test(test_writer_is_not_starved_by_a_stream_of_readers),
        cmocka_unit_test(test_cancel_wakes_a_waiting_writer_and_withdraws_its_intent),
        cmocka_unit_test(test_killed_writer_or_reader_returns_the_lock_within_its_lease),
        cmocka_unit_test(test_watchdog_detects_a_deleted_lock_and_the_handle_recovers),
        cmocka_unit_test(test_bad_input_is_refused),
    };
    return cmocka_run_group_tests(tests, fam_setup, fam_teardown);
}
