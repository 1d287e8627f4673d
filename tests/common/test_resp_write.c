/* test_resp_write.c: the RESP writers (resp_write.h) and the script
 * object's EVALSHA/EVAL head (script.h) write exactly the protocol's
 * bytes, and nothing past the end they return. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "resp_write.h"
#include "util.h"
#include "script.h"

/* Runs a writer on a buffer full of '#': the bytes written must be want,
 * and the byte after them untouched. */
#define CHECK(call, want)                                                      \
    do {                                                                       \
        char buf_[256];                                                        \
        memset(buf_, '#', sizeof(buf_));                                       \
        char *p = buf_;                                                        \
        char *end_ = (call);                                                   \
        assert_int_equal((size_t)(end_ - buf_), strlen(want));                 \
        assert_memory_equal(buf_, want, strlen(want));                         \
        assert_int_equal(*end_, '#');                                          \
    } while (0)

static void test_headers_and_bulk_strings(void **state)
{
    (void)state;
    CHECK(dlock__resp_len(p, '*', 0), "*0\r\n");
    CHECK(dlock__resp_len(p, '$', 1234567), "$1234567\r\n");
    CHECK(dlock__resp_bulk(p, "", 0), "$0\r\n\r\n");
    CHECK(dlock__resp_bulk(p, "a\r\nb", 4), "$4\r\na\r\nb\r\n");
    CHECK(dlock__resp_bulk3(p, "{t}:", 4, "order:", 6, "17", 2), "$12\r\n{t}:order:17\r\n");
    CHECK(dlock__resp_bulk3(p, "", 0, "x", 1, "", 0), "$1\r\nx\r\n");
}

static void test_integers(void **state)
{
    (void)state;
    CHECK(dlock__resp_bulk_i64(p, 0), "$1\r\n0\r\n");
    CHECK(dlock__resp_bulk_i64(p, -42), "$3\r\n-42\r\n");
    CHECK(dlock__resp_bulk_i64(p, INT64_MIN), "$20\r\n-9223372036854775808\r\n");
    CHECK(dlock__resp_bulk_i64(p, INT64_MAX), "$19\r\n9223372036854775807\r\n");
    CHECK(dlock__resp_bulk_u64(p, UINT64_MAX), "$20\r\n18446744073709551615\r\n");
    char num[24];
    char *d = dlock__digits(num + sizeof(num), 905);
    assert_int_equal(num + sizeof(num) - d, 3);
    assert_memory_equal(d, "905", 3);
}

static void test_the_script_head(void **state)
{
    (void)state;
    static const dlock__script s = {"t", "return 1", 8, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"};
    CHECK(dlock__script_resp_head(&s, false, 3, p),
          "*5\r\n$7\r\nEVALSHA\r\n$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n");
    CHECK(dlock__script_resp_head(&s, true, 0, p), "*2\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n");
    char room[DLOCK__SCRIPT_HEAD_ROOM];
    char *end = dlock__script_resp_head(&s, false, 1 << 30, room);
    assert_true(end - room <= DLOCK__SCRIPT_HEAD_ROOM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headers_and_bulk_strings),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_the_script_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
