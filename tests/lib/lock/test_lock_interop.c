/* test_lock_interop.c: dlock's simple lock and redis-py's Lock (run by
 * /usr/bin/python3, redis 4.3.4) exclude each other on one key, in both
 * directions, against a real redis-server started by the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lock_support.h"
#include "util.h"


static FILE *peer(const char *mode, const char *name, int hold_ms)
{
    const char *src = getenv("DLOCK_SOURCE_DIR");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/lib/lock/redis_py_peer.py %s %d '%s' %d",
             src ? src : ".", mode, ls_srv.port, ls_key(name), hold_ms);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    return f;
}

static void read_line(FILE *f, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!fgets(buf, (int)len, f)) return;
    buf[strcspn(buf, "\n")] = '\0';
}

static void test_redis_py_lock_is_excluded_by_dlock(void **state)
{
    (void)state;
    dlock_lock *l = ls_lock(ls_cl, "interop1", DLOCK_LOCK_SIMPLE);
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, NULL), 0);
    char line[64];
    FILE *f = peer("try", "interop1", 0);
    read_line(f, line, sizeof(line));
    assert_int_equal(pclose(f), 0);
    assert_string_equal(line, "0"); /* redis-py cannot take it */
    assert_int_equal(dlock_lock_unlock(l), 0);
    f = peer("try", "interop1", 0);
    read_line(f, line, sizeof(line));
    assert_int_equal(pclose(f), 0);
    assert_string_equal(line, "1"); /* free again: redis-py takes and releases it */
    dlock_lock_free(l);
}

static void test_dlock_is_excluded_by_redis_py_lock(void **state)
{
    (void)state;
    dlock_lock *l = ls_lock(ls_cl, "interop2", DLOCK_LOCK_SIMPLE);
    char line[64];
    FILE *f = peer("hold", "interop2", 700);
    read_line(f, line, sizeof(line));
    assert_string_equal(line, "acquired");
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_try_lock(l, 0, 1000, NULL), DLOCK_EBUSY);
    /* redis-py does not publish on release: the waiter's recheck finds it */
    assert_int_equal(dlock_lock_try_lock(l, 4000, 1000, NULL), 0);
    int64_t waited = dlock__now_ms() - t0;
    read_line(f, line, sizeof(line));
    assert_string_equal(line, "released");
    assert_int_equal(pclose(f), 0);
    assert_true(waited >= 600 && waited < 2500);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_py_lock_is_excluded_by_dlock),
        cmocka_unit_test(test_dlock_is_excluded_by_redis_py_lock),
    };
    return cmocka_run_group_tests(tests, ls_setup, ls_teardown);
}
