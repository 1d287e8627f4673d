/* test_util.c: random ids are unique and well-formed, backoff stays within
 * its jitter band, every error code has its own message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/dlock.h"
#include "histogram.h"
#include "util.h"

static void test_random_hex_is_hex_and_unique(void **state)
{
    (void)state;
    char a[33], b[33];
    assert_int_equal(dlock__random_hex(a, 16), 0);
    assert_int_equal(dlock__random_hex(b, 16), 0);
    assert_int_equal(strlen(a), 32);
    assert_int_equal(strspn(a, "0123456789abcdef"), 32);
    assert_string_not_equal(a, b);
}

static void test_backoff_doubles_within_jitter_and_cap(void **state)
{
    (void)state;
    for (int i = 0; i < 200; i++) {
        int64_t d = dlock__backoff_ms(100, 2, 10000); /* nominal 400 */
        assert_in_range(d, 200, 600);
        int64_t capped = dlock__backoff_ms(100, 30, 1000);
        assert_in_range(capped, 500, 1500);
    }
}

/* The error codes, tied to the enum at compile time: a switch over
 * dlock_err with no default, with -Wswitch an error in this file, does not
 * compile while an enumerator is missing from it. */
#pragma GCC diagnostic error "-Wswitch"
static int is_error_code(int v)
{
    switch ((dlock_err)v) {
    case DLOCK_OK: case DLOCK_EINVAL: case DLOCK_EURL: case DLOCK_ETLS: case DLOCK_EAUTH:
    case DLOCK_ECONN: case DLOCK_ETIMEOUT: case DLOCK_EIO: case DLOCK_ESERVER:
    case DLOCK_EUNKNOWN: case DLOCK_ENOMEM: case DLOCK_EBUSY: case DLOCK_ENOTOWNER:
    case DLOCK_ELOST: case DLOCK_ENOTREPL: case DLOCK_ECANCELED: case DLOCK_EALREADY:
    case DLOCK_ENOTHELD: case DLOCK_EUPGRADE: case DLOCK_ENOQUORUM: case DLOCK_ELIMIT:
    case DLOCK_ECLOSED: case DLOCK_ESTALE: case DLOCK_ENOTSUP:
        return 1;
    }
    return 0;
}

/* Over a range far wider than the enum: every code has its own message,
 * and every other value is "unknown error code". */
static void test_every_error_code_has_a_distinct_message(void **state)
{
    (void)state;
    int codes = 0;
    for (int a = -1000; a <= 1000; a++) {
        if (!is_error_code(a)) {
            assert_string_equal(dlock_strerror(a), "unknown error code");
            continue;
        }
        codes++;
        assert_string_not_equal(dlock_strerror(a), "unknown error code");
        for (int b = a + 1; b <= 1000; b++)
            if (is_error_code(b)) assert_string_not_equal(dlock_strerror(a), dlock_strerror(b));
    }
    assert_int_equal(codes, 24);
}

static void test_buf_grows_and_formats(void **state)
{
    (void)state;
    dlock__buf b = {0};
    for (int i = 0; i < 1000; i++) dlock__buf_printf(&b, "%d,", i);
    assert_false(b.oom);
    assert_int_equal(strncmp(b.data, "0,1,2,", 6), 0);
    assert_int_equal(b.len, strlen(b.data));
    dlock__buf_free(&b);
}

static void test_histogram_quantiles_within_two_percent(void **state)
{
    (void)state;
    static dlock__hist h;
    dlock__hist_reset(&h);
    for (uint64_t v = 1; v <= 100000; v++) dlock__hist_record(&h, v);
    double qs[] = {0.5, 0.9, 0.99, 0.999};
    for (size_t i = 0; i < 4; i++) {
        double want = qs[i] * 100000, got = (double)dlock__hist_quantile(&h, qs[i]);
        assert_true(got >= want * 0.98 && got <= want * 1.02);
    }
    assert_int_equal(dlock__hist_quantile(&h, 1.0), 100000);
    assert_int_equal(dlock__hist_quantile(&h, 0.0), 1);
    assert_int_equal(dlock__hist_count_le(&h, 63), 63); /* exact below 64 us */
    static dlock__hist other;
    dlock__hist_reset(&other);
    dlock__hist_record(&other, 5000000);
    dlock__hist_merge(&h, &other);
    assert_int_equal(h.total, 100001);
    assert_int_equal(h.max_us, 5000000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_hex_is_hex_and_unique),
        cmocka_unit_test(test_backoff_doubles_within_jitter_and_cap),
        cmocka_unit_test(test_every_error_code_has_a_distinct_message),
        cmocka_unit_test(test_buf_grows_and_formats),
        cmocka_unit_test(test_histogram_quantiles_within_two_percent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
