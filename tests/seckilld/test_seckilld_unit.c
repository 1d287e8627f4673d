/* test_seckilld_unit.c: the front end's pieces that need no server: RFC 3339
 * times as the HTTP API reads and writes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http.h"
#include "sk_err.h"

static void test_rfc3339_times_parse_and_format(void **state)
{
    (void)state;
    int64_t ms;
    const char *s = "2026-12-01T10:00:00+08:00";
    assert_int_equal(sk_http_parse_time(s, strlen(s), &ms), 0);
    assert_int_equal(ms, INT64_C(1796090400000));
    s = "2026-12-01T02:00:00.250Z";
    assert_int_equal(sk_http_parse_time(s, strlen(s), &ms), 0);
    assert_int_equal(ms, INT64_C(1796090400250));
    char out[40];
    sk_http_format_time(ms, out);
    assert_string_equal(out, "2026-12-01T02:00:00.250Z");
    sk_http_format_time(INT64_C(1767225600000), out);
    assert_string_equal(out, "2026-01-01T00:00:00Z");
    s = "2024-02-29T23:59:59-00:30";
    assert_int_equal(sk_http_parse_time(s, strlen(s), &ms), 0);
    sk_http_format_time(ms, out);
    assert_string_equal(out, "2024-03-01T00:29:59Z");
    static const char *const bad[] = {"2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-12-01",
                                      "2026-12-01T10:00:00", "2026-12-01T10:00:00+8:00",
                                      "2026-12-01T24:00:00Z", "2026-12-01T10:00:00Zx", "x026-12-01T10:00:00Z"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sk_http_parse_time(bad[i], strlen(bad[i]), &ms), SK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc3339_times_parse_and_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
