/* test_resp_batch.c: purchase.lua's batch arguments as sk__rb_write (engine_wire.c) writes
 * them: exactly the bulk strings of the same arguments formatted one by
 * one (keys, then argv, in the script's order), the count of them, the
 * slot of the bucket's hash tag carried with them, and the bound holding
 * for the longest fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine_wire.h"
#include "slot.h"

/* The reference: each argument formatted on its own with snprintf. */
static size_t expect(char *out, size_t cap, const char *const *args, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, cap - len, "$%zu\r\n%s\r\n", strlen(args[i]), args[i]);
    return len;
}

static void test_a_batch_is_its_arguments_in_order_with_their_slot(void **state)
{
    (void)state;
    const int64_t limits[6] = {5, 1000, 3, 1000, 86400000, 604800000};
    const sk__rb_camp camp = {.prefix = "{c:cx}:", .k = 2, .limits = limits, .runid = "abc"};
    /* b1: both rate keys; b2: a key, sent again (no rate keys); b3: no address */
    const sk__rb_buyer b1 = {.user = "u1", .idem = "", .ip = "1.2.3.4", .order_id = 42, .qty = 1};
    const sk__rb_buyer b2 = {.user = "u2", .idem = "k9", .ip = "", .order_id = 7, .qty = 3, .resent = true};
    const sk__rb_buyer b3 = {.user = "u3", .idem = "k/1", .ip = "", .order_id = 8, .qty = 1};
    const sk__rb_buyer *const buyers[] = {&b1, &b2, &b3};
    char buf[4096];
    assert_true(sk__rb_bound(sizeof("{c:cx}:"), 3) <= sizeof(buf));
    sk__resp_args a;
    sk__rb_write(buf, &camp, buyers, 3, &a);
    const char *args[] = {
        "12", "{c:cx}:meta", "{c:cx}:stock", "{c:cx}:buyers", "{c:cx}:orders", "{c:cx}:order_status",
        "{c:cx}:rl:u:u1", "{c:cx}:rl:ip:1.2.3.4",
        "{c:cx}:idem:k9", "{c:cx}:iu:u2/k9",
        "{c:cx}:idem:k/1", "{c:cx}:iu:u3/k/1", "{c:cx}:rl:u:u3",
        "3", "5", "1000", "3", "1000", "86400000", "604800000", "abc", "2",
        "42", "u1", "1", "3",
        "7", "u2", "3", "0k9",
        "8", "u3", "1", "1k/1"};
    enum { NARGS = sizeof(args) / sizeof(args[0]) };
    char want[4096];
    size_t wn = expect(want, sizeof(want), args, NARGS);
    assert_true(a.resp >= buf && a.resp < buf + 64);
    assert_int_equal(a.nargs, NARGS);
    assert_int_equal(a.len, wn);
    assert_memory_equal(a.resp, want, wn);
    /* the literal start, for a reader: numkeys then the bucket's meta key */
    assert_memory_equal(a.resp, "$2\r\n12\r\n$11\r\n{c:cx}:meta\r\n", 25);
    assert_int_equal(a.slot, (int)dlock__key_slot("c:cx", 4));
    assert_int_equal(a.slot, (int)dlock__key_slot("{c:cx}:rl:ip:1.2.3.4", 20));
}

static void test_an_empty_batch_and_negative_numbers(void **state)
{
    (void)state;
    const int64_t limits[6] = {-1, INT64_MIN, 0, 0, 0, INT64_MAX};
    const sk__rb_camp camp = {.prefix = "{c:b:1}:", .k = 3, .limits = limits, .runid = ""};
    char buf[1024];
    sk__resp_args a;
    sk__rb_write(buf, &camp, NULL, 0, &a);
    const char *args[] = {"5", "{c:b:1}:meta", "{c:b:1}:stock", "{c:b:1}:buyers", "{c:b:1}:orders",
                          "{c:b:1}:order_status", "0", "-1", "-9223372036854775808", "0", "0", "0",
                          "9223372036854775807", "", "3"};
    char want[1024];
    size_t wn = expect(want, sizeof(want), args, 15);
    assert_int_equal(a.nargs, 15);
    assert_int_equal(a.len, wn);
    assert_memory_equal(a.resp, want, wn);
    assert_int_equal(a.slot, (int)dlock__key_slot("c:b:1", 5));
}

/* Every field at its longest stays within sk__rb_bound. */
static void test_the_bound_holds_for_the_longest_fields(void **state)
{
    (void)state;
    char prefix[40], user[65], idem[65], ip[64], run[41];
    memset(prefix, 't', sizeof(prefix) - 1), prefix[0] = '{', prefix[sizeof(prefix) - 3] = '}';
    prefix[sizeof(prefix) - 2] = ':', prefix[sizeof(prefix) - 1] = '\0';
    memset(user, 'u', 64), user[64] = '\0';
    memset(idem, 'k', 64), idem[64] = '\0';
    memset(ip, '9', 63), ip[63] = '\0';
    memset(run, 'r', 40), run[40] = '\0';
    /* rate limits on (every purchase has both rate keys), the rest at its widest */
    const int64_t limits[6] = {INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, INT64_MIN, INT64_MIN};
    const sk__rb_camp camp = {.prefix = prefix, .k = INT32_MIN, .limits = limits, .runid = run};
    enum { N = 64 };
    sk__rb_buyer b[N];
    const sk__rb_buyer *bp[N];
    for (int i = 0; i < N; i++) {
        b[i] = (sk__rb_buyer){.user = user, .idem = idem, .ip = ip, .order_id = UINT64_MAX, .qty = INT64_MIN};
        bp[i] = &b[i];
    }
    size_t bound = sk__rb_bound(sizeof(prefix), N);
    char *buf = malloc(bound);
    assert_non_null(buf);
    sk__resp_args a;
    sk__rb_write(buf, &camp, bp, N, &a);
    assert_true((size_t)(a.resp - buf) + a.len <= bound);
    assert_int_equal(a.nargs, 1 + 5 + 4 * N + 9 + 4 * N);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_batch_is_its_arguments_in_order_with_their_slot),
        cmocka_unit_test(test_an_empty_batch_and_negative_numbers),
        cmocka_unit_test(test_the_bound_holds_for_the_longest_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
