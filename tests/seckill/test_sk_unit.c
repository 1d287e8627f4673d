/* test_sk_unit.c: the flash-sale pieces that need no server: the strict
 * JSON parser (valid and invalid documents, keys read once by their bytes,
 * then thousands of randomly
 * mutated inputs that must parse or fail cleanly - run it under ASan),
 * JSON string escaping, order ids and identifiers (RFC 3339 times are the
 * front end's: tests/seckilld/test_seckilld_unit.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common_err.h"
#include "db.h"
#include "dlock/dlock.h"
#include "engine.h"
#include "engine_server.h"
#include "json.h"
#include "orderid.h"
#include "rulebook.h"
#include "script.h"
#include "sk_err.h"
#include "util.h"

static int parse(const char *s, dlock__json_doc *doc)
{
    char err[128];
    return dlock__json_parse(s, strlen(s), doc, err, sizeof(err));
}

static void test_json_accepts_valid_documents(void **state)
{
    (void)state;
    dlock__json_doc d;
    assert_int_equal(parse(" {\"quantity\": 2, \"a\":[1,-2.5e3,true,false,null,\"x\\u00e9\\ud83d\\ude00\"],\"o\":{}} ", &d), 0);
    const dlock__json_val *q = dlock__json_get(&d, &d.nodes[0], "quantity");
    assert_non_null(q);
    assert_true(q->is_int);
    assert_int_equal(q->i, 2);
    const dlock__json_val *a = dlock__json_get(&d, &d.nodes[0], "a");
    assert_int_equal(a->type, DLOCK__JSON_ARRAY);
    assert_int_equal(a->count, 6);
    const dlock__json_val *s = &d.nodes[a->first];
    for (int i = 0; i < 5; i++) s = &d.nodes[s->next];
    assert_int_equal(s->type, DLOCK__JSON_STRING);
    assert_string_equal(s->s, "x\xc3\xa9\xf0\x9f\x98\x80");
    assert_null(dlock__json_get(&d, &d.nodes[0], "missing"));
    dlock__json_free(&d);
    assert_int_equal(parse("9223372036854775807", &d), 0);
    assert_true(d.nodes[0].is_int);
    dlock__json_free(&d);
    assert_int_equal(parse("-9223372036854775808", &d), 0);
    assert_true(d.nodes[0].is_int);
    dlock__json_free(&d);
    assert_int_equal(parse("1.0", &d), 0);
    assert_false(d.nodes[0].is_int);
    dlock__json_free(&d);
    /* a long number is read whole (it was read as 0 past 63 bytes) */
    char longnum[128] = "0.";
    memset(longnum + 2, '0', 90);
    memcpy(longnum + 92, "15", 3);
    assert_int_equal(parse(longnum, &d), 0);
    assert_true(d.nodes[0].d > 1.4e-91 && d.nodes[0].d < 1.6e-91);
    dlock__json_free(&d);
    /* the same key never twice, by its decoded bytes; a NUL-free key kept */
    assert_int_equal(parse("{\"a/b\":1,\"\u00e9\":2,\"Quantity\":3,\"quantity\":4}", &d), 0);
    assert_non_null(dlock__json_get(&d, &d.nodes[0], "a/b"));
    assert_null(dlock__json_get(&d, &d.nodes[0], "quantit"));
    assert_int_equal(dlock__json_get(&d, &d.nodes[0], "quantity")->i, 4);
    dlock__json_free(&d);
}

/* One reading: a key is compared by its full decoded bytes, and a key holding
 * U+0000 is refused, so no reader can see "quantity" twice. */
static void test_json_keys_are_read_once_by_their_bytes(void **state)
{
    (void)state;
    static const struct {
        const char *in, *why;
    } bad[] = {
        {"{\"quantity\":1,\"quantity\\u0000\":3}", "key contains U+0000 at byte 14"},
        {"{\"id\":\"D6\",\"id\\u0000x\":\"zz\"}", "key contains U+0000 at byte 11"},
        {"{\"\\u0000\":1}", "key contains U+0000 at byte 1"},
        {"{\"quantity\":1,\"quant\\u0069ty\":3}", "duplicate key at byte 14"},
        {"{\"quantity\":1,\"\\u0071\\u0075\\u0061\\u006E\\u0074\\u0069\\u0074\\u0079\":3}",
         "duplicate key at byte 14"},
        {"{\"a/b\":1,\"a\\/b\":2}", "duplicate key at byte 9"},
        {"{\"\xc3\xa9\":1,\"\\u00e9\":2}", "duplicate key at byte 8"},
        {"{\"o\":{\"k\":1,\"\\u006b\":2}}", "duplicate key at byte 12"},
        {"9223372036854775808", "integer out of range (int64) at byte 0"},
        {"{\"quantity\":-9223372036854775809}", "integer out of range (int64) at byte 12"},
        {"[1e309]", "number out of range (double) at byte 1"},
        {"\xef\xbb\xbf{}", "byte-order mark at byte 0"},
        {"{\"quantity\":1}x", "trailing characters at byte 14"},
        {"\"\\ud800\"", "lone high surrogate at byte 7"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dlock__json_doc d;
        char err[128] = "";
        int rc = dlock__json_parse(bad[i].in, strlen(bad[i].in), &d, err, sizeof(err));
        if (rc != DLOCK__EINVAL) fail_msg("accepted #%zu: %s", i, bad[i].in);
        if (strcmp(err, bad[i].why) != 0) fail_msg("#%zu %s: said \"%s\", want \"%s\"", i, bad[i].in, err, bad[i].why);
    }
    dlock__json_doc d; /* a NUL in a value is kept (its readers check the length) */
    assert_int_equal(parse("{\"title\":\"a\\u0000b\"}", &d), 0);
    assert_int_equal(d.nodes[1].len, 3);
    dlock__json_free(&d);
}

static void test_json_rejects_invalid_documents(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "-", "1.", ".5",
        "1e", "+1", "tru", "nul", "\"abc", "\"a\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"",
        "\"\\ud800\\u0041\"", "{\"a\":1}{", "{\"a\":1,\"a\":2}", "[1 2]", "\"\x01\"",
        "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xff\"", "/*c*/1", "NaN",
        "[\"a\"]]", "{\"q\":1} x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dlock__json_doc d;
        char err[128] = "";
        int rc = dlock__json_parse(bad[i], strlen(bad[i]), &d, err, sizeof(err));
        if (rc != DLOCK__EINVAL) fail_msg("accepted invalid JSON #%zu: %s", i, bad[i]);
        assert_true(err[0] != '\0');
    }
    /* nesting limit: 32 containers open at once, not 33 */
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    dlock__json_doc d;
    assert_int_equal(dlock__json_parse(deep, sizeof(deep), &d, NULL, 0), DLOCK__EINVAL);
    memset(deep, '[', 32);
    memset(deep + 32, ']', 32);
    assert_int_equal(dlock__json_parse(deep, 64, &d, NULL, 0), 0);
    dlock__json_free(&d);
    memset(deep, '[', 33);
    memset(deep + 33, ']', 33);
    assert_int_equal(dlock__json_parse(deep, 66, &d, NULL, 0), DLOCK__EINVAL);
}

/* Randomized mutation fuzzing: flips, inserts, deletes and splices bytes
 * of valid seeds; every input must parse or fail with DLOCK__EINVAL without
 * memory errors (ASan) and, when it parses, re-parse of a canonical
 * string must hold. Deterministic seed for reproducibility. */
static uint64_t rng = 88172645463325252ull;
static uint64_t xorshift(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_json_survives_mutation_fuzzing(void **state)
{
    (void)state;
    static const char *const seeds[] = {
        "{\"quantity\":1}",
        ("{\"id\":\"c1\",\"title\":\"t\\n\\u4e2d\",\"stock\":100,\"per_user_limit\":1,"
         "\"starts_at\":\"2026-12-01T10:00:00+08:00\",\"ends_at\":1893427200000,\"price_cents\":990}"),
        "[[[[{\"a\":[1,2,{\"b\":null}]}]]]]", "\"\\ud83d\\ude00 \xe4\xb8\xad\"", "-0.5e-10"};
    static const char alphabet[] = "{}[]\":,\\ u0123456789abcdefEe+-.tfnrl\x80\xc3\xed\xf0\xff\x01";
    char buf[600];
    int parsed = 0, refused = 0;
    for (int iter = 0; iter < 20000; iter++) {
        const char *s = seeds[xorshift() % (sizeof(seeds) / sizeof(seeds[0]))];
        size_t n = strlen(s);
        memcpy(buf, s, n);
        int muts = 1 + (int)(xorshift() % 4);
        for (int m = 0; m < muts; m++) {
            size_t pos = n ? xorshift() % n : 0;
            switch (xorshift() % 4) {
            case 0: if (n) buf[pos] = alphabet[xorshift() % (sizeof(alphabet) - 1)]; break;
            case 1:
                if (n + 1 < sizeof(buf)) {
                    memmove(buf + pos + 1, buf + pos, n - pos);
                    buf[pos] = alphabet[xorshift() % (sizeof(alphabet) - 1)];
                    n++;
                }
                break;
            case 2:
                if (n) {
                    memmove(buf + pos, buf + pos + 1, n - pos - 1);
                    n--;
                }
                break;
            default: if (n) n = pos; break; /* truncate */
            }
        }
        /* exact-size heap copy so ASan catches any read past the end */
        char *in = malloc(n ? n : 1);
        assert_non_null(in);
        memcpy(in, buf, n);
        dlock__json_doc d;
        char err[128];
        int rc = dlock__json_parse(in, n, &d, err, sizeof(err));
        if (rc == 0) {
            parsed++;
            assert_true(d.n >= 1);
            dlock__json_free(&d);
        } else {
            assert_int_equal(rc, DLOCK__EINVAL);
            refused++;
        }
        free(in);
    }
    assert_true(parsed > 100);  /* the fuzzer reached both sides */
    assert_true(refused > 1000);
}

static void test_json_string_escaping_round_trips(void **state)
{
    (void)state;
    const char raw[] = "a\"b\\c\n\x01\x1f\xe4\xb8\xad";
    dlock__buf b = {0};
    dlock__json_put_str(&b, raw, sizeof(raw) - 1);
    assert_false(b.oom);
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\u000a\\u0001\\u001f\xe4\xb8\xad\"");
    dlock__json_doc d;
    assert_int_equal(dlock__json_parse(b.data, b.len, &d, NULL, 0), 0);
    assert_int_equal(d.nodes[0].len, sizeof(raw) - 1);
    assert_memory_equal(d.nodes[0].s, raw, sizeof(raw) - 1);
    dlock__json_free(&d);
    dlock__buf_free(&b);
}

static void test_order_ids_are_unique_ordered_and_decodable(void **state)
{
    (void)state;
    sk_orderid_gen g;
    sk_orderid_init(&g, -1);
    uint64_t id, prev = 0;
    assert_int_equal(sk_orderid_next(&g, INT64_C(1800000000000), &id), SK_EUNAVAIL);
    sk_orderid_init(&g, 1023);
    int64_t t = INT64_C(1800000000000);
    /* 10000 ids in one ms (borrows the following ms), then the clock steps back */
    for (int i = 0; i < 10000; i++) {
        assert_int_equal(sk_orderid_next(&g, t, &id), 0);
        assert_true(id > prev);
        prev = id;
    }
    assert_int_equal(sk_orderid_next(&g, t - 5000, &id), 0);
    assert_true(id > prev);
    int64_t ms;
    int w, seq;
    sk_orderid_decode(id, &ms, &w, &seq);
    assert_int_equal(w, 1023);
    assert_true(ms >= t && ms <= t + 3);
    /* another worker never collides */
    sk_orderid_gen g2;
    sk_orderid_init(&g2, 1022);
    uint64_t id2;
    assert_int_equal(sk_orderid_next(&g2, t, &id2), 0);
    sk_orderid_decode(id2, NULL, &w, NULL);
    assert_int_equal(w, 1022);
    assert_true(id2 != id);
    assert_true(id < (UINT64_C(1) << 63)); /* fits a signed 64-bit column */
}

static void test_identifier_validation(void **state)
{
    (void)state;
    assert_true(sk_valid_campaign_id("c1_A-9"));
    assert_false(sk_valid_campaign_id("c.1"));
    assert_false(sk_valid_campaign_id(""));
    assert_true(sk_valid_user_id("u:1.a_b-c"));
    assert_false(sk_valid_user_id("u 1"));
    /* one rule for every door: printable punctuation outside [_.:-] is refused */
    assert_false(sk_valid_user_id("u!1"));
    assert_false(sk_valid_user_id("u/1"));
    assert_false(sk_valid_user_id("u\xc3\xa9"));
    assert_false(sk_valid_user_id(NULL));
    assert_false(sk_valid_campaign_id("c:1"));
    char long_id[70];
    memset(long_id, 'a', 65);
    long_id[65] = '\0';
    assert_false(sk_valid_user_id(long_id));
    long_id[64] = '\0';
    assert_true(sk_valid_user_id(long_id));
    assert_true(sk_valid_idem_key("key-123/abc"));
    assert_false(sk_valid_idem_key("has space"));
    sk_campaign d = {.id = "c1", .stock = 1, .per_user_limit = 1, .starts_at_ms = 1, .ends_at_ms = 2};
    assert_int_equal(sk_campaign_check(&d, NULL, 0), 0);
    d.ends_at_ms = 1;
    assert_int_equal(sk_campaign_check(&d, NULL, 0), SK_EINVAL);
}

/* One table of limits: the purchase entry point's check names the rule a
 * purchase breaks, and every door that reads a quantity (the entry point,
 * the database's order check) draws the line at the same place. */
static void test_purchase_limits_are_one_table(void **state)
{
    (void)state;
    assert_null(sk_purchase_invalid("c1", "u1", 1, NULL));
    assert_null(sk_purchase_invalid("c1", "u1", SK_QTY_MAX, "key-1"));
    assert_string_equal(sk_purchase_invalid("c1", "u1", 0, NULL), "quantity must be a positive integer");
    assert_string_equal(sk_purchase_invalid("c1", "u1", SK_QTY_MAX + 1, NULL), "quantity must be a positive integer");
    assert_string_equal(sk_purchase_invalid("c1", "u1", 1, "has space"),
                        "Idempotency-Key must be " SK_IDEM_KEY_RULE);
    assert_non_null(sk_purchase_invalid("c.1", "u1", 1, NULL));
    assert_non_null(sk_purchase_invalid("c1", "u 1", 1, NULL));
    int64_t edge[] = {INT64_MIN, -1, 0, 1, SK_QTY_MAX, SK_QTY_MAX + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
        sk_order_in o = {.order_id = 1, .campaign = "c1", .user = "u1", .qty = edge[i], .path = "redis"};
        assert_int_equal(sk_purchase_invalid("c1", "u1", edge[i], NULL) == NULL, sk_db_order_invalid(&o) == NULL);
    }
    sk_campaign d = {.id = "c1", .stock = SK_STOCK_MAX, .per_user_limit = SK_PER_USER_MAX, .starts_at_ms = 1,
                     .ends_at_ms = 2};
    assert_int_equal(sk_campaign_check(&d, NULL, 0), 0);
    char msg[80];
    d.per_user_limit = SK_PER_USER_MAX + 1;
    assert_int_equal(sk_campaign_check(&d, msg, sizeof(msg)), SK_EINVAL);
    assert_string_equal(msg, "per_user_limit must be 1..1000000");
}

extern const dlock__script sk_script_purchase;

/* One outcome table: row i is outcome i, each script code and each error
 * names one row, and purchase.lua names its codes by the same labels. */
static void test_purchase_outcomes_are_one_table(void **state)
{
    (void)state;
    const char *lua = sk_script_purchase.src;
    for (int i = 0; i < SK_OUT_COUNT; i++) {
        const sk_outcome *o = sk_outcome_get(i);
        assert_non_null(o->label);
        assert_non_null(o->message);
        assert_true(o->http_status >= 200 && o->http_status <= 599);
        assert_true((o->error == NULL) == (o->http_status < 300));
        assert_int_equal(sk_outcome_of_err(o->err, i == SK_OUT_REPLAY), i);
        if (o->script_code >= 0) {
            char named[80];
            snprintf(named, sizeof(named), "%s = %d", o->label, o->script_code);
            if (!strstr(lua, named)) fail_msg("purchase.lua does not name code %d %s", o->script_code, o->label);
            assert_int_equal(sk_outcome_of_script(o->script_code), i);
        }
    }
    assert_int_equal(sk_outcome_of_script(99), SK_OUT_UNKNOWN);      /* script newer than the binary */
    assert_int_equal(sk_outcome_of_err(DLOCK_ECLOSED, false), SK_OUT_UNAVAILABLE); /* not decided */
    assert_int_equal(sk_outcome_get(SK_OUT_QUEUE_FULL)->err, SK_EQUEUEFULL);
    assert_int_equal(sk_outcome_get(SK_OUT_IDEM_CONFLICT)->err, SK_EIDEMPOTENCY);
    assert_int_equal(sk_outcome_get(-1)->http_status, 503);
    /* the reasons the guard stores: one text each, read back by id */
    int stored = 0;
    for (int i = 0; i < SK_OUT_ROWS; i++) {
        const sk_outcome *o = sk_outcome_get(i);
        assert_int_equal(sk_outcome_of_reason_code(i), o->stored ? i : -1);
        for (int j = 0; o->stored && j < i; j++)
            if (sk_outcome_get(j)->stored) assert_string_not_equal(sk_outcome_get(j)->stored, o->stored);
        stored += o->stored != NULL;
    }
    assert_int_equal(stored, 5); /* sold out, limit, unknown campaign, bad quantity, stale timeline */
    assert_int_equal(sk_outcome_of_reason_code(0), -1);
    assert_int_equal(sk_outcome_of_reason_code(SK_OUT_ROWS), -1);
}

/* The engine's edge to the common layer: every internal code maps to an
 * engine code of the same meaning, and every code an engine function can
 * hand on has a message (the cross-slot refusal printed "unknown error
 * code" before it was named). */
/* Every engine code, SK_EINVAL down to SK_E_LAST, has its own message. */
static void test_every_engine_code_is_named(void **state)
{
    (void)state;
    for (int err = SK_EINVAL; err >= SK_E_LAST; err--) {
        const char *m = sk_strerror(err);
        if (strstr(m, "unknown error")) fail_msg("sk_err %d has no message", err);
        for (int other = SK_EINVAL; other > err; other--) assert_string_not_equal(sk_strerror(other), m);
    }
}

static void test_every_common_code_is_mapped_and_named(void **state)
{
    (void)state;
    size_t n = 0;
    const int *codes = dlock__err_codes(&n);
    assert_true(n >= 12);
    for (size_t i = 0; i < n; i++) {
        assert_string_not_equal(dlock__strerror(codes[i]), "unknown error");
        assert_null(strstr(sk_strerror(codes[i]), "unknown error"));
        assert_null(strstr(sk_strerror(sk_err_from_common(codes[i])), "unknown error"));
    }
    assert_int_equal(sk_err_from_common(DLOCK__ECROSSSLOT), SK_EINVAL);
    assert_int_equal(sk_err_from_common(DLOCK__EUNKNOWN), DLOCK_EUNKNOWN);
    assert_int_equal(sk_err_from_common(DLOCK__ECONN), DLOCK_ECONN);
    assert_int_equal(sk_err_from_common(DLOCK__OK), SK_OK);
    assert_int_equal(sk_err_from_common(-99), DLOCK_EIO); /* not a common code */
}

/* The replicas an INFO replication text shows online and in sync (lag of
 * at most 2 s): the count that decides whether a batch's WAIT is sent. */
static void test_replicas_in_sync_are_online_with_a_recent_ack(void **state)
{
    (void)state;
    const char *info = "# Replication\r\nrole:master\r\nconnected_slaves:4\r\n"
                       "slave0:ip=127.0.0.1,port=7001,state=online,offset=90,lag=0\r\n"
                       "slave1:ip=127.0.0.1,port=7002,state=online,offset=80,lag=2\r\n"
                       "slave2:ip=127.0.0.1,port=7003,state=online,offset=10,lag=3\r\n"
                       "slave3:ip=127.0.0.1,port=7004,state=wait_bgsave,offset=0,lag=0\r\n"
                       "master_failover_state:no-failover\r\nmaster_repl_offset:90\r\n";
    int listed = -1;
    assert_int_equal(sk__info_replicas_in_sync(info, &listed), 2);
    assert_int_equal(listed, 4);
    assert_int_equal(sk__info_replicas_in_sync("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n", &listed), 0);
    assert_int_equal(listed, 0);
    assert_int_equal(sk__info_replicas_in_sync("role:slave\r\nslave_read_only:1\r\nslave_repl_offset:5\r\n", NULL), 0);
    assert_int_equal(sk__info_replicas_in_sync("", NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_engine_code_is_named),
        cmocka_unit_test(test_every_common_code_is_mapped_and_named),
        cmocka_unit_test(test_json_accepts_valid_documents),
        cmocka_unit_test(test_json_rejects_invalid_documents),
        cmocka_unit_test(test_json_keys_are_read_once_by_their_bytes),
        cmocka_unit_test(test_json_survives_mutation_fuzzing),
        cmocka_unit_test(test_json_string_escaping_round_trips),
        cmocka_unit_test(test_order_ids_are_unique_ordered_and_decodable),
        cmocka_unit_test(test_identifier_validation),
        cmocka_unit_test(test_purchase_limits_are_one_table),
        cmocka_unit_test(test_purchase_outcomes_are_one_table),
        cmocka_unit_test(test_replicas_in_sync_are_online_with_a_recent_ack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
