/* test_etcd_unit.c: the etcd backend's pieces that need no server: every
 * etcd URL form parses to the right fields and every malformed one is
 * refused with a reason; base64 round-trips and rejects garbage; answers
 * are read the way the gateway writes them (int64 as strings, defaults
 * omitted, snake_case or lowerCamelCase, stream results wrapped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base64.h"
#include "common_err.h"
#include "dlock/dlock.h"
#include "etcd_gw.h"
#include "etcd_url.h"

static void test_etcd_url_with_everything_parses(void **state)
{
    (void)state;
    dlock__etcd_url u;
    char err[128];
    assert_int_equal(dlock__etcd_url_parse("etcd://alice:s%40cret@h1:2381,[::1]:2382,h3/app/locks/", &u, err,
                                           sizeof(err)), 0);
    assert_false(u.tls);
    assert_string_equal(u.user, "alice");
    assert_string_equal(u.password, "s@cret");
    assert_int_equal(u.n_endpoints, 3);
    assert_string_equal(u.endpoints[0].host, "h1");
    assert_int_equal(u.endpoints[0].port, 2381);
    assert_string_equal(u.endpoints[1].host, "::1");
    assert_int_equal(u.endpoints[1].port, 2382);
    assert_int_equal(u.endpoints[2].port, DLOCK__ETCD_DEFAULT_PORT);
    assert_string_equal(u.prefix, "/app/locks");
    dlock__etcd_url_free(&u);
    assert_int_equal(dlock__etcd_url_parse("etcds://h:1?cacert=/ca.pem&cert=/c.pem&key=/k%20.pem", &u, err,
                                           sizeof(err)), 0);
    assert_true(u.tls);
    assert_string_equal(u.prefix, DLOCK__ETCD_DEFAULT_PREFIX);
    assert_string_equal(u.cacert, "/ca.pem");
    assert_string_equal(u.cert, "/c.pem");
    assert_string_equal(u.key, "/k .pem");
    dlock__etcd_url_free(&u);
    assert_true(dlock__etcd_url_is("etcd://x"));
    assert_true(dlock__etcd_url_is("etcds://x"));
    assert_false(dlock__etcd_url_is("redis://x"));
}

static void test_malformed_etcd_urls_are_refused_with_a_reason(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "etcd://",               "etcd://h:0",           "etcd://h:99999",   "etcd://h:1,,h:2",
        "etcd://h:1,",           "etcd://h:1/a//b",      "etcd://h:1?x=1",   "etcd://h:1?cacert=/ca",
        "etcds://h:1?bogus=1",   "etcds://h:1?cert=/c",  "etcds://h:1?key=", "etcds://h:1?cacert=a&cacert=b",
        "etcd://:pw@h:1",        "etcd://h 1:2",         "etcd://h:1/%zz",   "etcd://a::1:2",
        "http://h:1",            "etcd://h:1\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dlock__etcd_url u;
        char err[128] = "";
        int rc = dlock__etcd_url_parse(bad[i], &u, err, sizeof(err));
        if (rc != DLOCK__EURL) fail_msg("%s: got %d, want EURL", bad[i], rc);
        if (!err[0]) fail_msg("%s: no reason given", bad[i]);
    }
}

static void test_base64_round_trips_and_rejects_garbage(void **state)
{
    (void)state;
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char enc[16];
        unsigned char dec[16];
        size_t n = 0;
        assert_int_equal(dlock__b64_encode(in[i], strlen(in[i]), enc), strlen(want[i]));
        assert_string_equal(enc, want[i]);
        assert_int_equal(dlock__b64_decode(enc, strlen(enc), dec, &n), 0);
        assert_int_equal(n, strlen(in[i]));
        assert_memory_equal(dec, in[i], n);
    }
    unsigned char all[256], back[260];
    char enc[400];
    for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
    size_t n = dlock__b64_encode(all, 256, enc);
    assert_int_equal(dlock__b64_decode(enc, n, back, &n), 0);
    assert_int_equal(n, 256);
    assert_memory_equal(back, all, 256);
    static const char *const bad[] = {"Zg=", "Zg=a", "Z===", "Zm9v!A==", "Zh==", "Zm9=", "=AAA", "Zg==Zg=="};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (dlock__b64_decode(bad[i], strlen(bad[i]), back, &n) != DLOCK__EINVAL)
            fail_msg("%s: accepted", bad[i]);
    }
}

static void test_answers_are_read_as_the_gateway_writes_them(void **state)
{
    (void)state;
    const char *text = "{\"header\":{\"revision\":\"9007199254740993\"},\"responses\":[{\"response_range\":"
                       "{\"kvs\":[{\"key\":\"Zm9v\",\"createRevision\":\"42\"}]}}],\"count\":7,\"more\":true}";
    dlock__json_doc d;
    assert_int_equal(dlock__json_parse(text, strlen(text), &d, NULL, 0), 0);
    const dlock__json_val *root = &d.nodes[0];
    assert_int_equal(dlock__gw_int(&d, dlock__gw_get(&d, root, "header"), "revision"), 9007199254740993LL);
    assert_int_equal(dlock__gw_int(&d, root, "count"), 7);          /* a number works too */
    assert_int_equal(dlock__gw_int(&d, root, "compact_revision"), 0); /* omitted: the default */
    assert_false(dlock__gw_bool(&d, root, "succeeded"));              /* omitted false */
    assert_true(dlock__gw_bool(&d, root, "more"));
    const dlock__json_val *rr = dlock__gw_get(&d, dlock__gw_at(&d, root, "responses", 0), "response_range");
    const dlock__json_val *kv = dlock__gw_at(&d, rr, "kvs", 0);
    assert_int_equal(dlock__gw_int(&d, kv, "create_revision"), 42); /* lowerCamelCase accepted */
    char key[8];
    size_t n = 0;
    assert_int_equal(dlock__gw_b64(&d, kv, "key", key, sizeof(key), &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(key, "foo");
    assert_int_equal(dlock__gw_b64(&d, kv, "value", key, sizeof(key), &n), 0); /* omitted: "" */
    assert_int_equal(n, 0);
    assert_int_equal(dlock__gw_b64(&d, kv, "key", key, 2, &n), DLOCK_ESERVER); /* too long for out */
    assert_null(dlock__gw_at(&d, rr, "kvs", 1));
    dlock__json_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_etcd_url_with_everything_parses),
        cmocka_unit_test(test_malformed_etcd_urls_are_refused_with_a_reason),
        cmocka_unit_test(test_base64_round_trips_and_rejects_garbage),
        cmocka_unit_test(test_answers_are_read_as_the_gateway_writes_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
