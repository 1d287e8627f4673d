/* test_errors.c: libdlock's edge to the common layer: every code src/common
 * can return becomes the dlock_err of the same meaning (and value), so no
 * behaviour changed when common got its own codes; anything else is EIO. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client_internal.h"
#include "common_err.h"

static void test_every_common_code_maps_to_the_dlock_code_of_the_same_meaning(void **state)
{
    (void)state;
    static const struct {
        int common, lib;
    } pairs[] = {
        {DLOCK__OK, DLOCK_OK},           {DLOCK__EINVAL, DLOCK_EINVAL},
        {DLOCK__EURL, DLOCK_EURL},       {DLOCK__ETLS, DLOCK_ETLS},
        {DLOCK__EAUTH, DLOCK_EAUTH},     {DLOCK__ECONN, DLOCK_ECONN},
        {DLOCK__ETIMEOUT, DLOCK_ETIMEOUT}, {DLOCK__EIO, DLOCK_EIO},
        {DLOCK__ESERVER, DLOCK_ESERVER}, {DLOCK__EUNKNOWN, DLOCK_EUNKNOWN},
        {DLOCK__ENOMEM, DLOCK_ENOMEM},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        assert_int_equal(dlock__err_from_common(pairs[i].common), pairs[i].lib);
        assert_int_equal(pairs[i].common, pairs[i].lib); /* values kept: logs and exit codes stay */
    }
}

/* A cross-slot refusal is a key-layout error of the caller, nothing sent. */
static void test_crossslot_maps_to_einval(void **state)
{
    (void)state;
    assert_int_equal(dlock__err_from_common(DLOCK__ECROSSSLOT), DLOCK_EINVAL);
}

static void test_a_code_common_never_returns_maps_to_eio(void **state)
{
    (void)state;
    assert_int_equal(dlock__err_from_common(-11), DLOCK_EIO);
    assert_int_equal(dlock__err_from_common(1), DLOCK_EIO);
}

/* Every internal code (the common layer's whole list) maps to a dlock_err
 * that dlock_strerror names. */
static void test_every_common_code_maps_to_a_named_dlock_code(void **state)
{
    (void)state;
    size_t n = 0;
    const int *codes = dlock__err_codes(&n);
    for (size_t i = 0; i < n; i++) {
        const char *msg = dlock_strerror(dlock__err_from_common(codes[i]));
        assert_null(strstr(msg, "unknown error"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_common_code_maps_to_the_dlock_code_of_the_same_meaning),
        cmocka_unit_test(test_a_code_common_never_returns_maps_to_eio),
        cmocka_unit_test(test_crossslot_maps_to_einval),
        cmocka_unit_test(test_every_common_code_maps_to_a_named_dlock_code),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
