/* test_conn.c: the connection layer against a real redis-server started by
 * the test: auth (password and ACL user), db selection, unix sockets,
 * connect errors within the timeout, recovery after CLIENT KILL, and a
 * slow reply reported as "outcome unknown" instead of a hang. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common_err.h"
#include "redis_io.h"
#include "servers.h"
#include "util.h"

static test_server srv;
static char sock_dir[64];
static char sock_path[300];

static int setup(void **state)
{
    (void)state;
    static char unixsocket[320];
    snprintf(sock_dir, sizeof(sock_dir), "/tmp/dlock-sock-XXXXXX");
    if (!mkdtemp(sock_dir)) return -1;
    snprintf(sock_path, sizeof(sock_path), "%s/r.sock", sock_dir);
    snprintf(unixsocket, sizeof(unixsocket), "unixsocket %s", sock_path);
    const char *extra[] = {"requirepass hunter2", "user alice on >wonderland ~* &* +@all",
                           "user guest on nopass ~* &* +@all", unixsocket, "unixsocketperm 700", NULL};
    return test_redis_start(&srv, extra);
}

static int teardown(void **state)
{
    (void)state;
    test_server_stop(&srv);
    unlink(sock_path);
    rmdir(sock_dir);
    return 0;
}

static const dlock__conn_opts opts = {.connect_timeout_ms = 500, .command_timeout_ms = 300};

static int open_url(const char *url, dlock__conn **c, char *err, size_t errlen)
{
    dlock__url u;
    int rc = dlock__url_parse(url, &u, err, errlen);
    if (rc) return rc;
    rc = dlock__conn_open(&u, &opts, c, err, errlen);
    dlock__url_free(&u);
    return rc;
}

static long long incr(dlock__conn *c, const char *key, int *rc_out)
{
    const char *argv[2] = {"INCR", key};
    dlock__reply *r = NULL;
    *rc_out = dlock__conn_cmd(c, 2, argv, NULL, &r);
    long long v = r ? dlock__reply_int(r) : -1;
    dlock__reply_free(r);
    return v;
}

static void test_password_and_acl_user_authenticate(void **state)
{
    (void)state;
    char url[256], err[256];
    dlock__conn *c = NULL;
    snprintf(url, sizeof(url), "redis://:hunter2@127.0.0.1:%d/2", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), 0);
    int rc;
    assert_int_equal(incr(c, "conn:a", &rc), 1);
    dlock__conn_close(c);
    snprintf(url, sizeof(url), "redis://alice:wonder%%6Cand@127.0.0.1:%d/2", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), 0);
    assert_int_equal(incr(c, "conn:a", &rc), 2); /* same db 2 */
    dlock__conn_close(c);
}

static void test_wrong_password_or_user_is_an_auth_error(void **state)
{
    (void)state;
    char url[256], err[256];
    dlock__conn *c = NULL;
    snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), DLOCK__EAUTH);
    assert_null(c);
    snprintf(url, sizeof(url), "redis://mallory:wonderland@127.0.0.1:%d", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), DLOCK__EAUTH);
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d/1", srv.port); /* no password */
    assert_int_equal(open_url(url, &c, err, sizeof(err)), DLOCK__EAUTH);
}

static void assert_whoami(dlock__conn *c, const char *want)
{
    const char *argv[2] = {"ACL", "WHOAMI"};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(c, 2, argv, NULL, &r), 0);
    assert_string_equal(dlock__reply_str(r, NULL), want);
    dlock__reply_free(r);
}

/* redis://user@host is a user without a password (AUTH user ""), never the
 * user name sent as a password. */
static void test_bare_user_is_a_user_without_password(void **state)
{
    (void)state;
    char url[256], err[256];
    dlock__conn *c = NULL;
    snprintf(url, sizeof(url), "redis://guest@127.0.0.1:%d", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), 0); /* nopass user */
    assert_whoami(c, "guest");
    dlock__conn_close(c);
    c = NULL;
    snprintf(url, sizeof(url), "redis://hunter2@127.0.0.1:%d", srv.port); /* no user hunter2 */
    assert_int_equal(open_url(url, &c, err, sizeof(err)), DLOCK__EAUTH);
    assert_null(c);
    snprintf(url, sizeof(url), "redis://alice@127.0.0.1:%d", srv.port); /* alice needs a password */
    assert_int_equal(open_url(url, &c, err, sizeof(err)), DLOCK__EAUTH);
    snprintf(url, sizeof(url), "redis://:hunter2@127.0.0.1:%d", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), 0);
    assert_whoami(c, "default");
    dlock__conn_close(c);
}

static void test_unix_socket_with_db(void **state)
{
    (void)state;
    char url[400], err[256];
    dlock__conn *c = NULL;
    snprintf(url, sizeof(url), "unix://%s?db=2", sock_path);
    /* unix:// carries no credentials: AUTH is refused -> EAUTH on first use */
    assert_int_equal(open_url(url, &c, err, sizeof(err)), DLOCK__EAUTH);
}

static void test_bad_db_index_is_a_server_error(void **state)
{
    (void)state;
    char url[256], err[256];
    dlock__conn *c = NULL;
    snprintf(url, sizeof(url), "redis://:hunter2@127.0.0.1:%d/999", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), DLOCK__ESERVER);
    assert_non_null(strstr(err, "SELECT"));
}

static void test_stopped_server_fails_within_connect_timeout(void **state)
{
    (void)state;
    char url[256], err[256];
    dlock__conn *c = NULL;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", test_free_port());
    int64_t t0 = dlock__now_ms();
    assert_int_equal(open_url(url, &c, err, sizeof(err)), DLOCK__ECONN);
    assert_true(dlock__now_ms() - t0 <= opts.connect_timeout_ms + 200);
    /* An unroutable address exercises the timeout itself (TEST-NET-1). */
    t0 = dlock__now_ms();
    int rc = open_url("redis://192.0.2.1:6390", &c, err, sizeof(err));
    assert_int_equal(rc, DLOCK__ECONN);
    assert_true(dlock__now_ms() - t0 <= opts.connect_timeout_ms + 300);
}

static void test_client_kill_is_recovered_by_reconnect(void **state)
{
    (void)state;
    char url[256], err[256], id[32];
    dlock__conn *c = NULL;
    snprintf(url, sizeof(url), "redis://:hunter2@127.0.0.1:%d/3", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), 0);
    const char *cid[2] = {"CLIENT", "ID"};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(c, 2, cid, NULL, &r), 0);
    snprintf(id, sizeof(id), "%lld", dlock__reply_int(r));
    dlock__reply_free(r);
    /* Kill it from a second connection, then use the first one again. */
    dlock__conn *admin = NULL;
    assert_int_equal(open_url(url, &admin, err, sizeof(err)), 0);
    const char *kill[4] = {"CLIENT", "KILL", "ID", id};
    assert_int_equal(dlock__conn_cmd(admin, 4, kill, NULL, &r), 0);
    assert_int_equal(dlock__reply_int(r), 1);
    dlock__reply_free(r);
    dlock__sleep_ms(50);
    int rc;
    assert_int_equal(incr(c, "conn:k", &rc), 1);
    assert_int_equal(rc, 0);
    assert_true(dlock__conn_is_open(c));
    dlock__conn_close(admin);
    dlock__conn_close(c);
}

static void test_slow_reply_is_outcome_unknown_not_a_hang(void **state)
{
    (void)state;
    char url[256], err[256];
    dlock__conn *c = NULL;
    snprintf(url, sizeof(url), "redis://:hunter2@127.0.0.1:%d/4", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), 0);
    const char *sleep[3] = {"DEBUG", "SLEEP", "1"};
    dlock__reply *r = NULL;
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock__conn_cmd(c, 3, sleep, NULL, &r), DLOCK__EUNKNOWN);
    int64_t took = dlock__now_ms() - t0;
    assert_true(took >= opts.command_timeout_ms - 20 && took < 900);
    assert_null(r);
    assert_false(dlock__conn_is_open(c));
    dlock__sleep_ms(800); /* server is still asleep on our behalf */
    int rc;
    assert_int_equal(incr(c, "conn:s", &rc), 1); /* reopened transparently */
    dlock__conn_close(c);
}

static void test_pipeline_returns_replies_in_order(void **state)
{
    (void)state;
    char url[256], err[256];
    dlock__conn *c = NULL;
    snprintf(url, sizeof(url), "redis://:hunter2@127.0.0.1:%d/5", srv.port);
    assert_int_equal(open_url(url, &c, err, sizeof(err)), 0);
    const char *a[2] = {"INCR", "p"}, *b[3] = {"INCRBY", "p", "10"}, *g[2] = {"GET", "p"};
    const char *const *argvs[3] = {a, b, g};
    int argcs[3] = {2, 3, 2};
    dlock__reply *rs[3];
    assert_int_equal(dlock__conn_pipeline(c, 3, argcs, argvs, NULL, rs), 0);
    assert_int_equal(dlock__reply_int(rs[0]), 1);
    assert_int_equal(dlock__reply_int(rs[1]), 11);
    assert_string_equal(dlock__reply_str(rs[2], NULL), "11");
    for (int i = 0; i < 3; i++) dlock__reply_free(rs[i]);
    dlock__conn_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_password_and_acl_user_authenticate),
        cmocka_unit_test(test_wrong_password_or_user_is_an_auth_error),
        cmocka_unit_test(test_bare_user_is_a_user_without_password),
        cmocka_unit_test(test_unix_socket_with_db),
        cmocka_unit_test(test_bad_db_index_is_a_server_error),
        cmocka_unit_test(test_stopped_server_fails_within_connect_timeout),
        cmocka_unit_test(test_client_kill_is_recovered_by_reconnect),
        cmocka_unit_test(test_slow_reply_is_outcome_unknown_not_a_hang),
        cmocka_unit_test(test_pipeline_returns_replies_in_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
