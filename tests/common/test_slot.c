/* test_slot.c: CRC16 is the Cluster spec's XMODEM variant (its test vector)
 * and the hash-tag rule picks the part of a key the spec says it hashes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "slot.h"

static void test_crc16_matches_the_spec_test_vector(void **state)
{
    (void)state;
    assert_int_equal(dlock__crc16(0, "123456789", 9), 0x31C3);
    /* continuing from a partial CRC gives the same result */
    assert_int_equal(dlock__crc16(dlock__crc16(0, "1234", 4), "56789", 5), 0x31C3);
    assert_int_equal(dlock__crc16(0, "", 0), 0);
}

static void assert_hashed_part(const char *key, const char *want)
{
    size_t off = 99, len = 99;
    dlock__key_hashed_part(key, strlen(key), &off, &len);
    if (len != strlen(want) || memcmp(key + off, want, len) != 0)
        fail_msg("key \"%s\": hashed \"%.*s\", want \"%s\"", key, (int)len, key + off, want);
    assert_int_equal(dlock__key_slot(key, strlen(key)), dlock__crc16(0, want, strlen(want)) & 16383);
}

/* The spec's examples and the edge cases of "first '{', first '}' after". */
static void test_hash_tag_is_between_first_open_and_next_close(void **state)
{
    (void)state;
    assert_hashed_part("{user1000}.following", "user1000");
    assert_hashed_part("foo{}{bar}", "foo{}{bar}");  /* empty first tag: whole key */
    assert_hashed_part("foo{{bar}}zap", "{bar");
    assert_hashed_part("foo{bar}{zap}", "bar");
    assert_hashed_part("a}b", "a}b");
    assert_hashed_part("}", "}");
    assert_hashed_part("x{}y", "x{}y");
    assert_hashed_part("{}{x}", "{}{x}");
    assert_hashed_part("}{x}", "x");
    assert_hashed_part("a{b", "a{b");
    assert_hashed_part("{", "{");
    assert_hashed_part("plain", "plain");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_matches_the_spec_test_vector),
        cmocka_unit_test(test_hash_tag_is_between_first_open_and_next_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
