/* test_url.c: every URL form dlock accepts parses to the right fields, and
 * every malformed one is refused with DLOCK__EURL (or ETLS) and a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common_err.h"
#include "url.h"

static void test_tcp_url_with_everything_parses(void **state)
{
    (void)state;
    dlock__url u;
    char err[128];
    assert_int_equal(dlock__url_parse("redis://alice:s%40cret@cache.example:7001/3", &u, err, sizeof(err)), 0);
    assert_int_equal(u.kind, DLOCK__URL_TCP);
    assert_string_equal(u.user, "alice");
    assert_string_equal(u.password, "s@cret");
    assert_string_equal(u.host, "cache.example");
    assert_int_equal(u.port, 7001);
    assert_int_equal(u.db, 3);
    dlock__url_free(&u);
}

static void test_defaults_and_password_only_forms(void **state)
{
    (void)state;
    dlock__url u;
    assert_int_equal(dlock__url_parse("redis://localhost", &u, NULL, 0), 0);
    assert_int_equal(u.port, 6379);
    assert_int_equal(u.db, 0);
    assert_null(u.user);
    assert_null(u.password);
    dlock__url_free(&u);
    assert_int_equal(dlock__url_parse("redis://:pw@h", &u, NULL, 0), 0);
    assert_null(u.user);
    assert_string_equal(u.password, "pw");
    dlock__url_free(&u);
    dlock__url_free(&u);
    assert_int_equal(dlock__url_parse("redis://[::1]:7000?db=2", &u, NULL, 0), 0);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 7000);
    assert_int_equal(u.db, 2);
    dlock__url_free(&u);
}

/* The Redis URI convention (as redis-py reads it): ":pass@" password only,
 * "user:pass@" ACL user, bare "user@" a user without a password. */
static void test_bare_user_is_a_user_name_not_a_password(void **state)
{
    (void)state;
    dlock__url u;
    const char *argv[3];
    assert_int_equal(dlock__url_parse("redis://bob@h/", &u, NULL, 0), 0);
    assert_string_equal(u.user, "bob");
    assert_null(u.password);
    assert_int_equal(dlock__url_auth_argv(&u, argv), 3);
    assert_string_equal(argv[1], "bob");
    assert_string_equal(argv[2], "");
    dlock__url_free(&u);
    assert_int_equal(dlock__url_parse("redis://b%40b:@h", &u, NULL, 0), 0); /* empty password */
    assert_string_equal(u.user, "b@b");
    assert_string_equal(u.password, "");
    assert_int_equal(dlock__url_auth_argv(&u, argv), 3);
    dlock__url_free(&u);
    assert_int_equal(dlock__url_parse("redis://:pw@h", &u, NULL, 0), 0);
    assert_int_equal(dlock__url_auth_argv(&u, argv), 2);
    assert_string_equal(argv[1], "pw");
    dlock__url_free(&u);
    assert_int_equal(dlock__url_parse("redis://alice:pw@h", &u, NULL, 0), 0);
    assert_int_equal(dlock__url_auth_argv(&u, argv), 3);
    assert_string_equal(argv[1], "alice");
    assert_string_equal(argv[2], "pw");
    dlock__url_free(&u);
    assert_int_equal(dlock__url_parse("redis://:@h", &u, NULL, 0), 0); /* nothing to send */
    assert_int_equal(dlock__url_auth_argv(&u, argv), 0);
    dlock__url_free(&u);
    assert_int_equal(dlock__url_parse("redis-sentinel://carol@s1:26379/m", &u, NULL, 0), 0);
    assert_string_equal(u.user, "carol");
    assert_null(u.password);
    dlock__url_free(&u);
}

static void test_unix_url_parses_path_and_db(void **state)
{
    (void)state;
    dlock__url u;
    assert_int_equal(dlock__url_parse("unix:///run/redis/r.sock?db=5", &u, NULL, 0), 0);
    assert_int_equal(u.kind, DLOCK__URL_UNIX);
    assert_string_equal(u.path, "/run/redis/r.sock");
    assert_int_equal(u.db, 5);
    dlock__url_free(&u);
}

static void test_sentinel_url_lists_every_sentinel(void **state)
{
    (void)state;
    dlock__url u;
    assert_int_equal(dlock__url_parse("redis-sentinel://u:p@a:1,b:2,c/mymaster?db=1", &u, NULL, 0), 0);
    assert_int_equal(u.kind, DLOCK__URL_SENTINEL);
    assert_int_equal(u.n_sentinels, 3);
    assert_string_equal(u.sentinels[1].host, "b");
    assert_int_equal(u.sentinels[1].port, 2);
    assert_int_equal(u.sentinels[2].port, 26379);
    assert_string_equal(u.master_name, "mymaster");
    assert_string_equal(u.password, "p");
    assert_int_equal(u.db, 1);
    dlock__url copy;
    assert_int_equal(dlock__url_copy(&u, &copy), 0);
    assert_string_equal(copy.sentinels[0].host, "a");
    dlock__url_free(&copy);
    dlock__url_free(&u);
}

static void test_cluster_url_lists_every_seed_and_keeps_credentials(void **state)
{
    (void)state;
    dlock__url u;
    char err[128] = "";
    assert_int_equal(dlock__url_parse("redis-cluster://al:p%40ss@a:7000,b,[::1]:7002", &u, err, sizeof(err)), 0);
    assert_int_equal(u.kind, DLOCK__URL_CLUSTER);
    assert_int_equal(u.n_seeds, 3);
    assert_string_equal(u.seeds[0].host, "a");
    assert_int_equal(u.seeds[0].port, 7000);
    assert_int_equal(u.seeds[1].port, 6379);
    assert_string_equal(u.seeds[2].host, "::1");
    assert_string_equal(u.user, "al");
    assert_string_equal(u.password, "p@ss");
    assert_int_equal(u.db, 0);
    dlock__url copy;
    assert_int_equal(dlock__url_copy(&u, &copy), 0);
    assert_int_equal(copy.n_seeds, 3);
    assert_string_equal(copy.seeds[2].host, "::1");
    char d[128];
    dlock__url_describe(&copy, d, sizeof(d));
    assert_string_equal(d, "cluster a:7000,...");
    dlock__url_free(&copy);
    dlock__url_free(&u);
    /* db 0 may be spelled out; any other db is refused: a Cluster has one */
    assert_int_equal(dlock__url_parse("redis-cluster://h:1/0", &u, NULL, 0), 0);
    dlock__url_free(&u);
    assert_int_equal(dlock__url_parse("redis-cluster://h:1?db=0", &u, NULL, 0), 0);
    dlock__url_free(&u);
    assert_int_equal(dlock__url_parse("redis-cluster://h:1/2", &u, err, sizeof(err)), DLOCK__EURL);
    assert_non_null(strstr(err, "only database 0"));
    assert_int_equal(dlock__url_parse("redis-cluster://h:1?db=3", &u, err, sizeof(err)), DLOCK__EURL);
    assert_non_null(strstr(err, "only database 0"));
}

static void test_tls_url_is_refused_with_its_own_code(void **state)
{
    (void)state;
    dlock__url u;
    char err[128];
    assert_int_equal(dlock__url_parse("rediss://h:6380", &u, err, sizeof(err)), DLOCK__ETLS);
    assert_non_null(strstr(err, "not available in this build"));
}

static void test_malformed_urls_are_refused(void **state)
{
    (void)state;
    static const char *bad[] = {
        "", "localhost:6379", "http://h", "redis://", "redis://:6379", "redis://h:0",
        "redis://h:65536", "redis://h:12x", "redis://h:-1", "redis://h/x", "redis://h/-1",
        "redis://h/99999999999", "redis://h?db=", "redis://h?foo=1", "redis://h:1:2",
        "redis://[::1", "redis://[::1]x", "redis://u:%zz@h", "redis://u:%4@h", "redis://u:%00@h",
        "redis://h h", "redis://h\t", "redis://ho$t", "unix://", "unix://rel.sock", "unix:///",
        "unix:///s?db=x", "redis-sentinel://h:1", "redis-sentinel://h:1/", "redis-sentinel://,/m",
        "redis-sentinel://h:1/m/x", "redis-sentinel://h:99999/m", "redis-cluster://",
        "redis-cluster://h:1,", "redis-cluster://,h:1", "redis-cluster://h:0", "redis-cluster://h:1/x",
        "redis-cluster://h:1?foo=1", "redis-cluster://h h:1", NULL};
    for (size_t i = 0; bad[i]; i++) {
        dlock__url u;
        char err[128] = "";
        int rc = dlock__url_parse(bad[i], &u, err, sizeof(err));
        if (rc != DLOCK__EURL) fail_msg("'%s' gave %d, want DLOCK__EURL", bad[i], rc);
        if (!err[0]) fail_msg("'%s' was refused without a reason", bad[i]);
    }
    dlock__url u;
    assert_int_equal(dlock__url_parse(NULL, &u, NULL, 0), DLOCK__EINVAL);
}

static void test_overlong_url_is_refused(void **state)
{
    (void)state;
    static char big[5000];
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "redis://", 8);
    dlock__url u;
    assert_int_equal(dlock__url_parse(big, &u, NULL, 0), DLOCK__EURL);
}

static void test_describe_never_shows_the_password(void **state)
{
    (void)state;
    dlock__url u;
    char d[128];
    assert_int_equal(dlock__url_parse("redis://u:topsecret@h:1/2", &u, NULL, 0), 0);
    dlock__url_describe(&u, d, sizeof(d));
    assert_null(strstr(d, "topsecret"));
    assert_string_equal(d, "h:1/2");
    dlock__url_free(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_url_with_everything_parses),
        cmocka_unit_test(test_defaults_and_password_only_forms),
        cmocka_unit_test(test_bare_user_is_a_user_name_not_a_password),
        cmocka_unit_test(test_unix_url_parses_path_and_db),
        cmocka_unit_test(test_sentinel_url_lists_every_sentinel),
        cmocka_unit_test(test_cluster_url_lists_every_seed_and_keeps_credentials),
        cmocka_unit_test(test_tls_url_is_refused_with_its_own_code),
        cmocka_unit_test(test_malformed_urls_are_refused),
        cmocka_unit_test(test_overlong_url_is_refused),
        cmocka_unit_test(test_describe_never_shows_the_password),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
