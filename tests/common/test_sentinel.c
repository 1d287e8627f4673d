/* test_sentinel.c: a redis-sentinel:// connection follows a real failover:
 * 1 master + 1 replica + 3 sentinels; the master is killed with -9; after
 * the sentinels promote the replica, the same connection object reaches
 * the new master (and refuses to write to a node that is not a master). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common_err.h"
#include "redis_io.h"
#include "servers.h"
#include "util.h"

static test_server master, replica, sentinels[3];

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&master, NULL) || test_redis_start(&replica, NULL)) return -1;
    if (test_redis_replicate(&replica, &master)) return -1;
    for (int i = 0; i < 3; i++)
        if (test_sentinel_start(&sentinels[i], &master, "mymaster", 2)) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) test_server_stop(&sentinels[i]);
    test_server_stop(&replica);
    test_server_stop(&master);
    return 0;
}

static int set_key(dlock__conn *c, const char *v)
{
    const char *argv[3] = {"SET", "failover:k", v};
    dlock__reply *r = NULL;
    int rc = dlock__conn_cmd(c, 3, argv, NULL, &r);
    if (rc == 0 && dlock__reply_kind(r) == DLOCK__R_ERROR) rc = DLOCK__ESERVER;
    dlock__reply_free(r);
    return rc;
}

static void test_sentinel_url_follows_failover(void **state)
{
    (void)state;
    char url[256];
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/mymaster",
             sentinels[0].port, sentinels[1].port, sentinels[2].port);
    dlock__url u;
    assert_int_equal(dlock__url_parse(url, &u, NULL, 0), 0);
    dlock__conn_opts o = {.connect_timeout_ms = 500, .command_timeout_ms = 500};
    dlock__conn *c = NULL;
    assert_int_equal(dlock__conn_open(&u, &o, &c, NULL, 0), 0);
    assert_int_equal(set_key(c, "before"), 0);

    test_server_kill(&master);
    int64_t t0 = dlock__now_ms(), ok_at = -1;
    while (dlock__now_ms() - t0 < 30000) {
        if (set_key(c, "after") == 0) {
            ok_at = dlock__now_ms();
            break;
        }
        dlock__sleep_ms(100);
    }
    assert_true(ok_at > 0);
    /* the write landed on the promoted replica */
    char got[64] = "";
    const char *get[2] = {"GET", "failover:k"};
    assert_int_equal(test_redis_cmd(&replica, got, sizeof(got), 2, get), 0);
    assert_string_equal(got, "after");
    print_message("failover followed in %lld ms\n", (long long)(ok_at - t0));
    dlock__conn_close(c);
    dlock__url_free(&u);
}

static void test_unknown_master_name_is_a_connection_error(void **state)
{
    (void)state;
    char url[256], err[256] = "";
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d/nosuchmaster", sentinels[0].port);
    dlock__url u;
    assert_int_equal(dlock__url_parse(url, &u, NULL, 0), 0);
    dlock__conn_opts o = {.connect_timeout_ms = 500, .command_timeout_ms = 500};
    dlock__conn *c = NULL;
    assert_int_equal(dlock__conn_open(&u, &o, &c, err, sizeof(err)), DLOCK__ECONN);
    assert_non_null(strstr(err, "nosuchmaster"));
    dlock__url_free(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_master_name_is_a_connection_error),
        cmocka_unit_test(test_sentinel_url_follows_failover),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
