/* test_handles.c: every handle of every object type may be freed before or
 * after its client is destroyed, whatever it holds, and client destroy
 * reports (WARN) every object still held, of every kind. Each object type
 * is taken on a real redis-server (watchdog mode, so the watchdog is
 * involved), then (a) the client is destroyed and the handle freed, and
 * (b) the handle is freed and the client destroyed. Meant to run under
 * ASan: a handle that keeps using its freed client fails here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/fairlock.h"
#include "dlock/latch.h"
#include "dlock/lock.h"
#include "dlock/multilock.h"
#include "dlock/ratelimit.h"
#include "dlock/redlock.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"
#include "fam_support.h"

/* ---- a client whose WARN messages are kept ------------------------------ */

typedef struct logbook {
    char text[8192];
    size_t len;
} logbook;

static void keep_log(dlock_log_level level, const char *msg, void *ud)
{
    logbook *b = ud;
    if (level < DLOCK_LOG_WARN) return;
    int n = snprintf(b->text + b->len, sizeof(b->text) - b->len, "%s\n", msg);
    if (n > 0 && b->len + (size_t)n < sizeof(b->text)) b->len += (size_t)n;
}

static dlock_client *logged_client(logbook *b)
{
    memset(b, 0, sizeof(*b));
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = fam_srv.url;
    o.key_prefix = fam_prefix();
    o.watchdog_timeout_ms = 900;
    o.log_fn = keep_log;
    o.log_ud = b;
    o.log_level = DLOCK_LOG_WARN;
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_create(&o, &c), 0);
    return c;
}

/* ---- one object type: take it, and free it ----------------------------- */

typedef struct kind {
    const char *what;   /* expected in the destroy report; NULL: holds nothing */
    void *(*take)(dlock_client *c, const char *name);
    void (*release)(void *h);
} kind;

static void *take_lock(dlock_client *c, const char *name, dlock_lock_kind k)
{
    dlock_lock_options o;
    dlock_lock_options_init(&o);
    o.kind = k;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(c, name, &o, &l), 0);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    return l;
}
static void *take_simple(dlock_client *c, const char *n) { return take_lock(c, n, DLOCK_LOCK_SIMPLE); }
static void *take_reentrant(dlock_client *c, const char *n) { return take_lock(c, n, DLOCK_LOCK_REENTRANT); }
static void free_lock(void *h) { dlock_lock_free(h); }

static void *take_rw(dlock_client *c, const char *name, bool write)
{
    dlock_rwlock *rw = NULL;
    assert_int_equal(dlock_rwlock_new(c, name, NULL, &rw), 0);
    assert_int_equal(write ? dlock_rwlock_write_lock(rw, 0) : dlock_rwlock_read_lock(rw, 0), 0);
    return rw;
}
static void *take_read(dlock_client *c, const char *n) { return take_rw(c, n, false); }
static void *take_write(dlock_client *c, const char *n) { return take_rw(c, n, true); }
static void free_rw(void *h) { dlock_rwlock_free(h); }

static void *take_fair(dlock_client *c, const char *name)
{
    dlock_fairlock *fl = NULL;
    assert_int_equal(dlock_fairlock_new(c, name, NULL, &fl), 0);
    assert_int_equal(dlock_fairlock_lock(fl, 0, 0), 0);
    return fl;
}
static void free_fair(void *h) { dlock_fairlock_free(h); }

static void *take_sem(dlock_client *c, const char *name)
{
    dlock_semaphore_options o;
    dlock_semaphore_options_init(&o);
    o.permits = 3;
    dlock_semaphore *s = NULL;
    assert_int_equal(dlock_semaphore_new(c, name, &o, &s), 0);
    assert_int_equal(dlock_semaphore_acquire(s, 2, 0), 0);
    return s;
}
static void free_sem(void *h) { dlock_semaphore_free(h); }

static void *take_multi(dlock_client *c, const char *name)
{
    char a[128], b[128];
    snprintf(a, sizeof(a), "%s.a", name);
    snprintf(b, sizeof(b), "%s.b", name);
    const char *names[2] = {a, b};
    dlock_multilock *ml = NULL;
    assert_int_equal(dlock_multilock_new(c, names, 2, &ml), 0);
    assert_int_equal(dlock_multilock_lock(ml, 0, 0), 0);
    return ml;
}
static void free_multi(void *h) { dlock_multilock_free(h); }

static void *take_latch(dlock_client *c, const char *name)
{
    dlock_latch *l = NULL;
    assert_int_equal(dlock_latch_new(c, name, &l), 0);
    bool armed = false;
    assert_int_equal(dlock_latch_try_set_count(l, 2, 60000, &armed), 0);
    return l;
}
static void free_latch(void *h) { dlock_latch_free(h); }

static void *take_rate(dlock_client *c, const char *name)
{
    dlock_ratelimit *rl = NULL;
    assert_int_equal(dlock_ratelimit_new(c, name, NULL, &rl), 0);
    dlock_ratelimit_result r;
    assert_int_equal(dlock_ratelimit_try_acquire(rl, "u", 1, &r), 0);
    return rl;
}
static void free_rate(void *h) { dlock_ratelimit_free(h); }

static const kind kinds[] = {
    {"(simple)", take_simple, free_lock},
    {"(reentrant)", take_reentrant, free_lock},
    {"rwlock", take_read, free_rw},
    {"rwlock", take_write, free_rw},
    {"fair lock", take_fair, free_fair},
    {"semaphore", take_sem, free_sem},
    {"multi-lock", take_multi, free_multi},
    {NULL, take_latch, free_latch},
    {NULL, take_rate, free_rate},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* Each test takes fresh names: the holds of a test are not released (they
 * expire on their leases), so the next test must not meet them. */
static const char *name_of(const char *test, size_t i)
{
    static char buf[NKINDS][64];
    snprintf(buf[i], sizeof(buf[i]), "handles.%s.%zu", test, i);
    return buf[i];
}

/* ---- the two orders ------------------------------------------------------ */

static void test_free_after_the_client_is_destroyed(void **state)
{
    (void)state;
    const char *TEST = "after";
    for (size_t i = 0; i < NKINDS; i++) {
        logbook b;
        dlock_client *c = logged_client(&b);
        void *h = kinds[i].take(c, name_of(TEST, i));
        dlock_client_destroy(c);
        if (kinds[i].what && !strstr(b.text, kinds[i].what)) fail_msg("destroy did not report %s: %s", kinds[i].what, b.text);
        if (kinds[i].what && !strstr(b.text, "client destroyed while")) fail_msg("no held report: %s", b.text);
        size_t before = b.len;
        kinds[i].release(h); /* after the client: must not touch it (ASan) */
        assert_int_equal(b.len, before); /* and says nothing through the dead client */
    }
}

static void test_free_before_the_client_is_destroyed(void **state)
{
    (void)state;
    const char *TEST = "before";
    for (size_t i = 0; i < NKINDS; i++) {
        logbook b;
        dlock_client *c = logged_client(&b);
        void *h = kinds[i].take(c, name_of(TEST, i));
        kinds[i].release(h);
        if (kinds[i].what && !strstr(b.text, "freed while held")) fail_msg("free of a held %s said nothing: %s", kinds[i].what, b.text);
        size_t before = b.len;
        dlock_client_destroy(c); /* nothing left to report */
        assert_int_equal(b.len, before);
    }
}

/* Every kind at once on one client: the report names each of them. */
static void test_destroy_reports_every_held_object(void **state)
{
    (void)state;
    const char *TEST = "all";
    logbook b;
    dlock_client *c = logged_client(&b);
    void *h[NKINDS];
    for (size_t i = 0; i < NKINDS; i++) h[i] = kinds[i].take(c, name_of(TEST, i));
    dlock_client_destroy(c);
    for (size_t i = 0; i < NKINDS; i++)
        if (kinds[i].what && !strstr(b.text, kinds[i].what)) fail_msg("destroy did not report %s: %s", kinds[i].what, b.text);
    for (size_t i = 0; i < NKINDS; i++) kinds[i].release(h[i]);
}

/* Every destructor accepts NULL (dlock.h, "Contracts"). */
static void test_every_destructor_accepts_null(void **state)
{
    (void)state;
    dlock_free(NULL);
    dlock_client_destroy(NULL);
    dlock_lock_free(NULL);
    dlock_rwlock_free(NULL);
    dlock_fairlock_free(NULL);
    dlock_semaphore_free(NULL);
    dlock_multilock_free(NULL);
    dlock_latch_free(NULL);
    dlock_ratelimit_free(NULL);
    dlock_redlock_free(NULL);
    assert_int_equal(dlock_redlock_unlock(NULL), 0);
}

/* An option struct not made by its *_options_init (size 0) is refused. */
static void test_options_not_from_their_init_are_refused(void **state)
{
    (void)state;
    dlock_rwlock_options o = {0};
    dlock_rwlock *rw = NULL;
    assert_int_equal(dlock_rwlock_new(fam_cli, "handles.opts", &o, &rw), DLOCK_EINVAL);
    assert_null(rw);
    dlock_client_options co = {0};
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_create(&co, &c), DLOCK_EINVAL);
    assert_null(c);
}

int main(int argc, char **argv)
{
    fam_child_dispatch(argc, argv, (const fam_role[]){{NULL, NULL}});
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_after_the_client_is_destroyed),
        cmocka_unit_test(test_free_before_the_client_is_destroyed),
        cmocka_unit_test(test_destroy_reports_every_held_object),
        cmocka_unit_test(test_every_destructor_accepts_null),
        cmocka_unit_test(test_options_not_from_their_init_are_refused),
    };
    return cmocka_run_group_tests(tests, fam_setup, fam_teardown);
}
