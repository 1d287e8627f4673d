/* test_engine_health.c: what the engine tells /healthz about Redis
 * (engine_health.h) on a fake port and clock: a refused credential is
 * reported until the first good reply of a new connection clears it,
 * refused writes are probed every 500 ms until a write succeeds, and each
 * state change is logged once, not once per command. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/dlock.h"
#include "engine_health.h"
#include "part_fake.h"

static part_fake f;
static sk__health h;
static dlock__url url;

static int setup(void **state)
{
    (void)state;
    pf_init(&f);
    char err[128];
    assert_int_equal(dlock__url_parse("redis://shop:secret@127.0.0.1:7777", &url, err, sizeof(err)), 0);
    sk__health_init(&h, &f.wire, &url, "inst1", 2000);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock__url_free(&url);
    return 0;
}

static sk_redis_health state_of(bool connected, const char **why)
{
    return sk__health_state(&h, connected, why);
}

static void test_refused_credentials_clear_on_the_first_good_reply(void **state)
{
    (void)state;
    const char *why;
    sk__health_up(&h);
    assert_int_equal(state_of(true, &why), SK_REDIS_OK);
    /* every command says NOAUTH; the AUTH's own answer is the reason */
    assert_true(sk__health_error(&h, "NOAUTH Authentication required.", "AUTH refused: WRONGPASS invalid pair"));
    assert_true(sk__health_error(&h, "NOAUTH Authentication required.", "AUTH refused: WRONGPASS invalid pair"));
    assert_int_equal(state_of(true, &why), SK_REDIS_AUTH_REFUSED);
    assert_non_null(strstr(why, "user 'shop'"));
    assert_non_null(strstr(why, "WRONGPASS invalid pair"));
    assert_null(strstr(why, "secret"));
    assert_int_equal(pf_logged(&f, "redis auth refused"), 1); /* once, not per command */
    assert_true(sk__health_tick(&h, true));                   /* the connection must go */
    sk__health_down(&h, "AUTH refused: WRONGPASS invalid pair", true, "redis connection dropped", "x");
    assert_int_equal(state_of(false, &why), SK_REDIS_AUTH_REFUSED); /* still, while reconnecting */
    sk__health_up(&h);
    assert_false(sk__health_tick(&h, true));
    /* a good reply on a connection whose AUTH was refused proves nothing */
    assert_false(sk__health_good(&h, true));
    assert_int_equal(state_of(true, &why), SK_REDIS_AUTH_REFUSED);
    /* the first good reply clears it, and says so once */
    assert_true(sk__health_good(&h, false));
    assert_int_equal(state_of(true, &why), SK_REDIS_OK);
    assert_int_equal(pf_logged(&f, "accepts the credentials again"), 1);
    assert_false(sk__health_good(&h, false)); /* proven already: not news */
    assert_int_equal(pf_logged(&f, "redis connected"), 1);
}

static void test_down_says_why_until_a_connection_is_proven(void **state)
{
    (void)state;
    const char *why;
    assert_int_equal(state_of(false, &why), SK_REDIS_DOWN);
    assert_string_equal(why, "connecting to redis");
    sk__health_down(&h, NULL, false, "redis", "Connection refused");
    assert_int_equal(state_of(false, &why), SK_REDIS_DOWN);
    assert_string_equal(why, "redis: Connection refused");
    sk__health_up(&h);
    assert_true(sk__health_good(&h, false));
    sk__health_down(&h, NULL, false, "redis connection lost", "reset");
    assert_int_equal(state_of(false, &why), SK_REDIS_DOWN);
    assert_string_equal(why, "redis connection lost: reset");
}

static void test_refused_writes_are_probed_until_a_write_succeeds(void **state)
{
    (void)state;
    const char *why;
    sk__health_up(&h);
    assert_true(sk__health_good(&h, false));
    assert_false(sk__health_error(&h, "OOM command not allowed when used memory > 'maxmemory'.", NULL));
    assert_false(sk__health_error(&h, "OOM command not allowed when used memory > 'maxmemory'.", NULL));
    assert_int_equal(state_of(true, &why), SK_REDIS_WRITES_REFUSED);
    assert_non_null(strstr(why, "redis refuses writes: OOM"));
    assert_int_equal(pf_logged(&f, "redis refuses writes"), 1);
    f.now_ms += 499;
    assert_false(sk__health_tick(&h, true));
    assert_int_equal(f.sent, 0); /* not yet */
    f.now_ms += 1;
    assert_false(sk__health_tick(&h, true));
    const pf_cmd *c = pf_cmd_at(&f, 0);
    assert_int_equal(c->argc, 5);
    assert_string_equal(c->argv[0], "SET");
    assert_string_equal(c->argv[1], "seckill:health:inst1");
    assert_string_equal(c->argv[4], "5000");
    f.now_ms += 600;
    sk__health_tick(&h, true);
    assert_int_equal(f.sent, 1); /* one probe at a time */
    pf_reply(&f, "-OOM command not allowed\r\n");
    assert_int_equal(state_of(true, &why), SK_REDIS_WRITES_REFUSED);
    sk__health_tick(&h, true);
    assert_int_equal(f.sent, 2);
    pf_reply(&f, "+OK\r\n");
    assert_int_equal(state_of(true, &why), SK_REDIS_OK);
    assert_int_equal(pf_logged(&f, "accepts writes again"), 1);
    f.now_ms += 1000;
    sk__health_tick(&h, true);
    assert_int_equal(f.sent, 2); /* nothing to probe any more */
}

static void test_a_scripts_wrapped_refusal_is_a_refusal(void **state)
{
    (void)state;
    assert_false(sk__health_error(&h, "ERR Error running script (call to f_1): @user_script:1: -READONLY "
                                      "You can't write against a read only replica.", NULL));
    assert_int_equal(state_of(true, NULL), SK_REDIS_WRITES_REFUSED);
}

static void test_other_errors_change_nothing(void **state)
{
    (void)state;
    assert_false(sk__health_error(&h, "ERR wrong number of arguments", NULL));
    assert_false(sk__health_error(&h, "OOMPH not a code", NULL));
    assert_int_equal(state_of(true, NULL), SK_REDIS_OK);
    assert_int_equal(f.nlogs, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_refused_credentials_clear_on_the_first_good_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_down_says_why_until_a_connection_is_proven, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_writes_are_probed_until_a_write_succeeds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_scripts_wrapped_refusal_is_a_refusal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_errors_change_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
