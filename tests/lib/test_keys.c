/* test_keys.c: every companion key of every lock-family object lands in the
 * Cluster slot of its lock key, for adversarial names (stray '}', empty
 * tags, nested braces) and prefixes, and distinct keys get distinct
 * companions. Slots are computed with src/common's CRC16 (whose spec test
 * vector tests/common/test_slot.c checks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_internal.h"
#include "family.h"
#include "slot.h"

/* The suffixes lock.c, redlock.c, fairlock.c, latch.c, rwlock.c and
 * semaphore.c pass to dlock__companion_key. */
static const char *const k_suffixes[] = {":fence", ":fair:q", ":fair:qt", ":fair:wake:", ":latch:ch",
                                         ":rw:w", ":rw:r", ":rw:rn", ":rw:ww", ":rw:ch", ":sem",
                                         ":sem:exp", ":sem:cnt", ":sem:ch"};
#define N_SUFFIXES (sizeof(k_suffixes) / sizeof(k_suffixes[0]))

static const char *const k_adversarial[] = {
    "a}b", "}", "x{}y", "{}{x}", "{", "{}", "}{", "}{x}", "{{x}}", "{x}}", "a{b", "a{b}c", "{a}b}",
    "x{y{z}}", "}}}}", "{{{{", "{}}", "a}b#12:fence", "%", "#", "#0", "7}", "plain", "orders:42",
    "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "a}b{", "a}b{c", "a}b{}", "\xff}\x01"};

static unsigned slot_of(const char *k)
{
    return dlock__key_slot(k, strlen(k));
}

static void assert_companions_share_the_slot(const char *key)
{
    for (size_t i = 0; i < N_SUFFIXES; i++) {
        char out[DLOCK__KEY_MAX];
        assert_int_equal(dlock__companion_key(key, k_suffixes[i], out, sizeof(out)), 0);
        if (slot_of(out) != slot_of(key))
            fail_msg("key \"%s\" (slot %u): companion \"%s\" is in slot %u", key, slot_of(key), out,
                     slot_of(out));
    }
}

static void test_companions_of_adversarial_names_share_the_lock_slot(void **state)
{
    (void)state;
    static const char *const prefixes[] = {"", "app:", "p}", "{t}", "{", "{}"};
    char key[256];
    for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++)
        for (size_t i = 0; i < sizeof(k_adversarial) / sizeof(k_adversarial[0]); i++) {
            snprintf(key, sizeof(key), "%s%s", prefixes[p], k_adversarial[i]);
            assert_companions_share_the_slot(key);
        }
}

/* The issue's example: "a}b" is in slot 7866, and "{a}b}:fence" (the old
 * companion) was not. */
static void test_the_reported_name_keeps_its_fence_in_slot_7866(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(slot_of("a}b"), 7866);
    assert_int_equal(slot_of("{a}b}:fence"), 15495);
    assert_int_equal(dlock__companion_key("a}b", ":fence", out, sizeof(out)), 0);
    assert_int_equal(slot_of(out), 7866);
    /* the layouts of names a tag can hold are unchanged */
    assert_int_equal(dlock__companion_key("orders:42", ":fence", out, sizeof(out)), 0);
    assert_string_equal(out, "{orders:42}:fence");
    assert_int_equal(dlock__companion_key("{c:1}:lock", ":fence", out, sizeof(out)), 0);
    assert_string_equal(out, "{c:1}:lock:fence");
}

/* Random keys over a brace-heavy alphabet: slots always match, and two
 * different keys never share a companion (except "x" and "{x}", the
 * documented old overlap of rules 1 and 2). */
static void test_random_brace_keys_share_slots_and_never_collide(void **state)
{
    (void)state;
    enum { N = 150 };
    static const char alphabet[] = "{}ab#:0%";
    static char keys[N][12], comps[N][DLOCK__KEY_MAX / 16];
    srand(12345);
    for (int i = 0; i < N; i++) {
        int len = 1 + rand() % 10;
        for (int j = 0; j < len; j++) keys[i][j] = alphabet[rand() % (int)(sizeof(alphabet) - 1)];
        keys[i][len] = '\0';
        assert_companions_share_the_slot(keys[i]);
        assert_int_equal(dlock__companion_key(keys[i], ":rw:w", comps[i], sizeof(comps[i])), 0);
    }
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) {
            if (strcmp(keys[i], keys[j]) == 0 || strcmp(comps[i], comps[j]) != 0) continue;
            char wrapped[32];
            snprintf(wrapped, sizeof(wrapped), "{%.11s}", keys[i]);
            bool overlap = strcmp(wrapped, keys[j]) == 0;
            snprintf(wrapped, sizeof(wrapped), "{%.11s}", keys[j]);
            overlap = overlap || strcmp(wrapped, keys[i]) == 0;
            if (!overlap) fail_msg("keys \"%s\" and \"%s\" share companion \"%s\"", keys[i], keys[j], comps[i]);
        }
}

static void test_companion_that_does_not_fit_is_refused(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(dlock__companion_key("a}b", ":fence", out, sizeof(out)), DLOCK_EINVAL);
    assert_int_equal(dlock__companion_key("abc", ":fence", out, sizeof(out)), DLOCK_EINVAL);
    char big[64];
    assert_int_equal(dlock__companion_key("abc", ":x1", big, sizeof(big)), DLOCK_EINVAL); /* digit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_companions_of_adversarial_names_share_the_lock_slot),
        cmocka_unit_test(test_the_reported_name_keeps_its_fence_in_slot_7866),
        cmocka_unit_test(test_random_brace_keys_share_slots_and_never_collide),
        cmocka_unit_test(test_companion_that_does_not_fit_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
