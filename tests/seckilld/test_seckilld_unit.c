/* test_seckilld_unit.c: the front end's pieces that need no server: RFC 3339
 * times as the HTTP API reads and writes them, the client address behind
 * trusted proxies (hostile header values), public order ids and signed
 * identities on a fixed clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "auth.h"
#include "client_addr.h"
#include "hmac_key.h"
#include "http.h"
#include "order_ref.h"
#include "sk_err.h"

static void test_rfc3339_times_parse_and_format(void **state)
{
    (void)state;
    int64_t ms;
    const char *s = "2026-12-01T10:00:00+08:00";
    assert_int_equal(sk_http_parse_time(s, strlen(s), &ms), 0);
    assert_int_equal(ms, INT64_C(1796090400000));
    s = "2026-12-01T02:00:00.250Z";
    assert_int_equal(sk_http_parse_time(s, strlen(s), &ms), 0);
    assert_int_equal(ms, INT64_C(1796090400250));
    char out[40];
    sk_http_format_time(ms, out);
    assert_string_equal(out, "2026-12-01T02:00:00.250Z");
    sk_http_format_time(INT64_C(1767225600000), out);
    assert_string_equal(out, "2026-01-01T00:00:00Z");
    s = "2024-02-29T23:59:59-00:30";
    assert_int_equal(sk_http_parse_time(s, strlen(s), &ms), 0);
    sk_http_format_time(ms, out);
    assert_string_equal(out, "2024-03-01T00:29:59Z");
    static const char *const bad[] = {"2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-12-01",
                                      "2026-12-01T10:00:00", "2026-12-01T10:00:00+8:00",
                                      "2026-12-01T24:00:00Z", "2026-12-01T10:00:00Zx", "x026-12-01T10:00:00Z"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sk_http_parse_time(bad[i], strlen(bad[i]), &ms), SK_EINVAL);
    /* only instants RFC 3339 writes back (years 0000-9999, UTC) */
    s = "9999-12-31T23:59:59.999Z";
    assert_int_equal(sk_http_parse_time(s, strlen(s), &ms), 0);
    assert_int_equal(ms, SK_HTTP_TIME_MAX_MS);
    sk_http_format_time(ms, out);
    assert_string_equal(out, s);
    s = "0000-01-01T00:00:00Z";
    assert_int_equal(sk_http_parse_time(s, strlen(s), &ms), 0);
    assert_int_equal(ms, SK_HTTP_TIME_MIN_MS);
    static const char *const beyond[] = {"9999-12-31T23:00:00-02:00", "0000-01-01T00:30:00+01:00"};
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(sk_http_parse_time(beyond[i], strlen(beyond[i]), &ms), SK_EINVAL);
}

typedef struct addr_case {
    const char *peer, *xff, *fwd;
    int rc;
    const char *want;
} addr_case;

static void test_client_address_behind_trusted_proxies(void **state)
{
    (void)state;
    sk_trusted t;
    char err[128], out[SK_ADDR_MAX];
    assert_int_equal(sk_trusted_parse("10.0.0.0/8, 192.0.2.1,2001:db8::/32", &t, err, sizeof(err)), 0);
    assert_int_equal(t.n, 3);
    static const char *const bad_lists[] = {"10.0.0.0/33", "10.0.0.0/", "x", "1.2.3.4/8x", "::/129", "10.0.0.0/-1"};
    for (size_t i = 0; i < sizeof(bad_lists) / sizeof(bad_lists[0]); i++)
        assert_int_equal(sk_trusted_parse(bad_lists[i], &(sk_trusted){0}, err, sizeof(err)), -1);
    static const addr_case cases[] = {
        {"203.0.113.9", "1.1.1.1", NULL, 0, "203.0.113.9"},           /* untrusted peer: itself */
        {"203.0.113.9", "not-an-ip", NULL, 0, "203.0.113.9"},         /* ...not even read */
        {"10.1.1.1", NULL, NULL, 0, "10.1.1.1"},                      /* trusted, no header */
        {"10.1.1.1", "6.6.6.6, 198.51.100.7", NULL, 0, "198.51.100.7"}, /* rightmost untrusted */
        {"10.1.1.1", "198.51.100.7, 10.2.2.2, 192.0.2.1", NULL, 0, "198.51.100.7"},
        {"10.1.1.1", "10.3.3.3, 10.2.2.2", NULL, 0, "10.3.3.3"},     /* all trusted: leftmost */
        {"10.1.1.1", " 2001:DB9::1 ", NULL, 0, "2001:db9::1"},       /* canonical text */
        {"10.1.1.1", NULL, "for=198.51.100.8;proto=https", 0, "198.51.100.8"},
        {"10.1.1.1", NULL, "for=\"[2001:db9::2]:443\", for=10.9.9.9", 0, "2001:db9::2"},
        {"10.1.1.1", NULL, "For=198.51.100.8:8080", 0, "198.51.100.8"},
        {"10.1.1.1", "not-an-ip", NULL, -1, NULL},
        {"10.1.1.1", "{c:xf1}", NULL, -1, NULL},
        {"10.1.1.1", "a:b:c", NULL, -1, NULL},
        {"10.1.1.1", "1.2.3.4, ", NULL, -1, NULL},
        {"10.1.1.1", ",", NULL, -1, NULL},
        {"10.1.1.1", "", NULL, -1, NULL},
        {"10.1.1.1", "1.2.3.4:80", NULL, -1, NULL},
        {"10.1.1.1", "1.2.3.4 5.6.7.8", NULL, -1, NULL},
        {"10.1.1.1", "01.2.3.4", NULL, -1, NULL},
        {"10.1.1.1", "1.2.3.4\t", NULL, 0, "1.2.3.4"},
        {"10.1.1.1", "999.1.1.1", NULL, -1, NULL},
        {"10.1.1.1", "[::1]", NULL, -1, NULL},
        {"10.1.1.1", "::ffff:1.2.3.4", NULL, 0, "1.2.3.4"},             /* mapped IPv4 is IPv4 */
        {"::ffff:10.1.1.1", "198.51.100.7", NULL, 0, "198.51.100.7"}, /* trusted through a v6 socket */
        {"10.1.1.1", "198.51.100.7, ::ffff:10.2.2.2", NULL, 0, "198.51.100.7"},
        {"10.1.1.1", NULL, "for=\"[::ffff:198.51.100.9]\"", 0, "198.51.100.9"},
        {"::ffff:203.0.113.9", "1.1.1.1", NULL, 0, "::ffff:203.0.113.9"}, /* untrusted: as seen */
        {"10.1.1.1", NULL, "for=unknown", -1, NULL},
        {"10.1.1.1", NULL, "for=_hidden", -1, NULL},
        {"10.1.1.1", NULL, "proto=http", -1, NULL},
        {"10.1.1.1", NULL, "for=1.2.3.4;for=5.6.7.8", -1, NULL},
        {"10.1.1.1", NULL, "for=\"[::1\"", -1, NULL},
        {"10.1.1.1", NULL, "for=[::1]x", -1, NULL},
        {"10.1.1.1", NULL, "for=\"\"", -1, NULL},
        {"10.1.1.1", NULL, "for=::1", -1, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const addr_case *c = &cases[i];
        const char *x[1] = {c->xff}, *f[1] = {c->fwd};
        int rc = sk_client_addr(&t, c->peer, x, c->xff ? 1 : 0, f, c->fwd ? 1 : 0, out);
        if (rc != c->rc || (c->want && strcmp(out, c->want) != 0))
            fail_msg("case %zu (%s | %s): rc %d out %s, want %d %s", i, c->xff ? c->xff : "-",
                     c->fwd ? c->fwd : "-", rc, out, c->rc, c->want ? c->want : "-");
    }
    /* several header lines are one list, read from the right */
    const char *two[2] = {"6.6.6.6", "198.51.100.7, 10.2.2.2"};
    assert_int_equal(sk_client_addr(&t, "10.1.1.1", two, 2, NULL, 0, out), 0);
    assert_string_equal(out, "198.51.100.7");
    /* a mapped range is the IPv4 range; a shorter one stays IPv6 */
    sk_trusted m;
    assert_int_equal(sk_trusted_parse("::ffff:10.0.0.0/104", &m, err, sizeof(err)), 0);
    assert_true(sk_trusted_has(&m, "10.4.4.4"));
    assert_true(sk_trusted_has(&m, "::ffff:10.4.4.4"));
    assert_false(sk_trusted_has(&m, "11.4.4.4"));
    assert_int_equal(sk_trusted_parse("::/0", &m, err, sizeof(err)), 0);
    assert_false(sk_trusted_has(&m, "10.4.4.4"));
}

/* Per-address limits: one IPv6 client holds a network (default /64), and
 * an IPv4 client seen through an IPv6 socket (::ffff:a.b.c.d) is that
 * IPv4 client. */
static void test_ipv6_clients_count_per_network_and_mapped_ipv4_as_ipv4(void **state)
{
    (void)state;
    static const struct {
        const char *ip;
        int bits;
        const char *key;
    } cases[] = {
        {"::ffff:192.0.2.7", 64, "192.0.2.7"},
        {"::FFFF:192.0.2.7", 128, "192.0.2.7"},
        {"::ffff:c000:207", 48, "192.0.2.7"},
        {"192.0.2.7", 64, "192.0.2.7"},
        {"2001:db8:1:2:aaaa:bbbb:cccc:dddd", 64, "2001:db8:1:2::/64"},
        {"2001:db8:1:2::1", 64, "2001:db8:1:2::/64"},
        {"2001:DB8:1:2:0:0:0:ffff", 64, "2001:db8:1:2::/64"},
        {"2001:db8:1:2:3:4:5:6", 56, "2001:db8:1::/56"},
        {"2001:db8:1:2ff:3:4:5:6", 57, "2001:db8:1:280::/57"},
        {"2001:db8:1:2:3:4:5:6", 1, "::/1"},
        {"ffff:db8:1:2:3:4:5:6", 1, "8000::/1"},
        {"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6"},
        {"2001:0db8:0000:0000:0000:0000:0000:0001", 128, "2001:db8::1"},
        {"::1", 64, "::/64"},
        {"::1", 128, "::1"},
        {"unix", 64, "unix"},
        {"", 64, ""},
        {"not an address", 64, "not an address"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[SK_ADDR_MAX];
        memset(out, 'x', sizeof(out));
        sk_addr_group(cases[i].ip, cases[i].bits, out);
        if (strcmp(out, cases[i].key) != 0) fail_msg("%s /%d: '%s', want '%s'", cases[i].ip, cases[i].bits, out,
                                                     cases[i].key);
    }
    /* two hosts of one /64 are one client; of two /64s, two */
    char a[SK_ADDR_MAX], b[SK_ADDR_MAX], c[SK_ADDR_MAX];
    sk_addr_group("2001:db8:0:1::a", SK_IPV6_PREFIX_DEFAULT, a);
    sk_addr_group("2001:db8:0:1:ffff::b", SK_IPV6_PREFIX_DEFAULT, b);
    sk_addr_group("2001:db8:0:2::a", SK_IPV6_PREFIX_DEFAULT, c);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    /* the longest text there is still fits, NUL-terminated */
    char longest[] = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    sk_addr_group(longest, 127, a);
    assert_string_equal(a, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127");
    char huge[200];
    memset(huge, '1', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    sk_addr_group(huge, 64, a);
    assert_int_equal(strlen(a), SK_ADDR_MAX - 1);
}

static void test_public_order_ids_carry_a_tag_only_the_key_makes(void **state)
{
    (void)state;
    unsigned char r1[SK_ORDER_KEY_LEN], r2[SK_ORDER_KEY_LEN];
    sk_order_key_derive("one", r1);
    sk_order_key_derive("two", r2);
    sk_order_key k1, k2, whole;
    sk_order_key_set(&k1, r1);
    sk_order_key_set(&k2, r2);
    char ref[SK_ORDER_REF_MAX];
    uint64_t id = 0;
    bool ok = false;
    /* the tag is HMAC-SHA256(key, "order\n" + id, big-endian), as ids
     * handed out before (and by other instances) were made */
    sk_order_ref_format(&k1, 121380752888725504ull, ref);
    assert_string_equal(ref, "121380752888725504-3836e3f6cd684d74");
    sk_order_ref_format(&k1, 1, ref); /* the keyed states are reused, not consumed */
    assert_string_equal(ref, "1-9e998f2c05add444");
    /* a key without its keyed states (out of memory) gives the same tags */
    sk_order_key_set(&whole, r1);
    EVP_MD_CTX_free(whole.mac.work);
    whole.mac.work = NULL;
    sk_order_ref_format(&whole, 121380752888725504ull, ref);
    assert_string_equal(ref, "121380752888725504-3836e3f6cd684d74");
    sk_order_key_clear(&whole);
    assert_true(sk_order_ref_parse(&k1, ref, &id, &ok));
    assert_true(ok);
    assert_true(id == 121380752888725504ull);
    assert_true(sk_order_ref_parse(&k2, ref, &id, &ok));
    assert_false(ok); /* another deployment's key */
    assert_true(sk_order_ref_parse(&k1, "121380752888725504", &id, &ok));
    assert_false(ok); /* a bare id is never a buyer's */
    static const char *const bad[] = {"", "-", "1-", "-0123456789abcdef", "1-0123456789abcde", "1-0123456789abcdefa",
                                      "1-0123456789abcdeg", "18446744073709551616", "1x", "+1", "1-0123456789abcdef-"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (sk_order_ref_parse(&k1, bad[i], &id, &ok)) fail_msg("'%s' read as an order id", bad[i]);
    sk_order_key_clear(&k1);
    sk_order_key_clear(&k2);
}

/* A reused key's MAC is HMAC()'s, for keys shorter than, as long as and
 * longer than a block (hashed first), on every use. */
static void test_hmac_key_gives_what_hmac_gives(void **state)
{
    (void)state;
    unsigned char key[100], want[EVP_MAX_MD_SIZE], got[SK_HMAC_LEN];
    for (size_t i = 0; i < sizeof(key); i++) key[i] = (unsigned char)(i * 7 + 1);
    static const size_t lens[] = {0, 3, 32, 64, 65, 100};
    static const char *const msgs[] = {"", "alice\n1700000000", "a message longer than one block of SHA-256, "
                                                                "so that its hash takes more than one block"};
    for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
        sk_hmac_key k;
        assert_int_equal(sk_hmac_key_set(&k, key, lens[l]), 0);
        for (int round = 0; round < 2; round++)
            for (size_t m = 0; m < sizeof(msgs) / sizeof(msgs[0]); m++) {
                unsigned int wl = 0;
                HMAC(EVP_sha256(), key, (int)lens[l], (const unsigned char *)msgs[m], strlen(msgs[m]), want, &wl);
                sk_hmac_sha256(&k, msgs[m], strlen(msgs[m]), got);
                if (wl != SK_HMAC_LEN || memcmp(want, got, SK_HMAC_LEN) != 0)
                    fail_msg("key of %zu bytes, message %zu, round %d: not HMAC()'s", lens[l], m, round);
            }
        sk_hmac_key_clear(&k);
    }
}

/* A signature's expiry on a fixed clock: accepted up to exp + the
 * leeway, expired one second later; with either active secret. */
static void test_signatures_expire_after_the_leeway_with_either_secret(void **state)
{
    (void)state;
    sk_auth a;
    assert_int_equal(sk_auth_init(&a, "", "new", "old", false), 0);
    char sig[SK_SIG_MAX], bound[65];
    const int64_t exp = 1800000000;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(sk_auth_sign(k ? "old" : "new", "alice", exp, NULL, sig, sizeof(sig)), 0);
        assert_int_equal(sk_auth_check_sig(&a, "alice", sig, "c1", exp, bound), SK_SIG_OK);
        assert_string_equal(bound, "");
        assert_int_equal(sk_auth_check_sig(&a, "alice", sig, "c1", exp + SK_SIG_SKEW_S, bound), SK_SIG_OK);
        assert_int_equal(sk_auth_check_sig(&a, "alice", sig, "c1", exp + SK_SIG_SKEW_S + 1, bound), SK_SIG_EXPIRED);
        assert_int_equal(sk_auth_check_sig(&a, "bob", sig, "c1", exp, bound), SK_SIG_BAD);
    }
    assert_int_equal(sk_auth_sign("other", "alice", exp, NULL, sig, sizeof(sig)), 0);
    assert_int_equal(sk_auth_check_sig(&a, "alice", sig, NULL, exp, bound), SK_SIG_BAD);
    /* an expired signature of the wrong secret is "bad", not "expired" */
    assert_int_equal(sk_auth_check_sig(&a, "alice", sig, NULL, exp + 1000, bound), SK_SIG_BAD);
    assert_int_equal(sk_auth_check_sig(&a, "alice", NULL, NULL, exp, bound), SK_SIG_MISSING);
    /* exp is a time like any other, within years 0000-9999 */
    assert_int_equal(sk_auth_sign("new", "alice", SK_SIG_EXP_MAX_S, NULL, sig, sizeof(sig)), 0);
    assert_int_equal(sk_auth_check_sig(&a, "alice", sig, NULL, exp, bound), SK_SIG_OK);
    assert_int_equal(sk_auth_sign("new", "alice", SK_SIG_EXP_MAX_S + 1, NULL, sig, sizeof(sig)), 0);
    assert_int_equal(sk_auth_check_sig(&a, "alice", sig, NULL, exp, bound), SK_SIG_MALFORMED);
    sk_auth_free(&a);
}

static void test_signatures_bound_to_a_campaign_and_the_legacy_form(void **state)
{
    (void)state;
    sk_auth a;
    assert_int_equal(sk_auth_init(&a, "", "new", NULL, false), 0);
    char sig[SK_SIG_MAX], bound[65];
    const int64_t exp = 1800000000;
    assert_int_equal(sk_auth_sign("new", "alice", exp, "c1", sig, sizeof(sig)), 0);
    assert_non_null(strstr(sig, ";c=c1"));
    assert_int_equal(sk_auth_check_sig(&a, "alice", sig, "c1", exp, bound), SK_SIG_OK);
    assert_string_equal(bound, "c1");
    assert_int_equal(sk_auth_check_sig(&a, "alice", sig, "c2", exp, bound), SK_SIG_CAMPAIGN);
    assert_int_equal(sk_auth_check_sig(&a, "alice", sig, NULL, exp, bound), SK_SIG_OK); /* order routes */
    assert_string_equal(bound, "c1");
    /* the binding is signed: moved to another campaign, the MAC fails */
    char moved[SK_SIG_MAX];
    snprintf(moved, sizeof(moved), "%.*sc2", (int)(strlen(sig) - 2), sig);
    assert_int_equal(sk_auth_check_sig(&a, "alice", moved, "c2", exp, bound), SK_SIG_BAD);
    static const char *const malformed[] = {"", "v1=", "v1=00;exp=1",
                                            "v1=0000000000000000000000000000000000000000000000000000000000000000",
                                            "v1=0000000000000000000000000000000000000000000000000000000000000000;exp=",
                                            "v1=0000000000000000000000000000000000000000000000000000000000000000;exp=0001",
                                            "v1=0000000000000000000000000000000000000000000000000000000000000000;exp=1;c=",
                                            "v1=0000000000000000000000000000000000000000000000000000000000000000;exp=1;c=a b"};
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++)
        assert_int_equal(sk_auth_check_sig(&a, "alice", malformed[i], NULL, exp, bound), SK_SIG_MALFORMED);
    /* the old form: refused unless the legacy switch is on */
    const char *old = "0000000000000000000000000000000000000000000000000000000000000000";
    assert_int_equal(sk_auth_check_sig(&a, "alice", old, NULL, exp, bound), SK_SIG_LEGACY);
    sk_auth_free(&a);
    assert_int_equal(sk_auth_init(&a, "", "new", NULL, true), 0);
    assert_int_equal(sk_auth_check_sig(&a, "alice", old, NULL, exp, bound), SK_SIG_BAD);
    /* HMAC-SHA256("new", "alice"), as Python's hmac module makes it; either case */
    const char *legacy = "36d54ee9a13dac5b29db963b482370650e07a16510b12a083c2822a75d481e29";
    assert_int_equal(sk_auth_check_sig(&a, "alice", legacy, NULL, exp, bound), SK_SIG_OK);
    assert_int_equal(sk_auth_check_sig(&a, "alice", "36D54EE9A13DAC5B29DB963B482370650E07A16510B12A083C2822A75D481E29",
                                       NULL, exp, bound),
                     SK_SIG_OK);
    assert_int_equal(sk_auth_check_sig(&a, "bob", legacy, NULL, exp, bound), SK_SIG_BAD);
    sk_auth_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc3339_times_parse_and_format),
        cmocka_unit_test(test_client_address_behind_trusted_proxies),
        cmocka_unit_test(test_ipv6_clients_count_per_network_and_mapped_ipv4_as_ipv4),
        cmocka_unit_test(test_public_order_ids_carry_a_tag_only_the_key_makes),
        cmocka_unit_test(test_hmac_key_gives_what_hmac_gives),
        cmocka_unit_test(test_signatures_expire_after_the_leeway_with_either_secret),
        cmocka_unit_test(test_signatures_bound_to_a_campaign_and_the_legacy_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
