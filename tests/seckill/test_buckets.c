/* test_buckets.c: the bucket layout of a sharded campaign (buckets.h):
 * placement spreads buckets over the masters a slot map names, the stored
 * tag list reads back and refuses anything but the tags placement writes,
 * and the home-bucket hash is stable and covers every bucket; every key
 * name comes from the one key writer (layout.h) in the stored format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "buckets.h"
#include "layout.h"
#include "slot.h"

/* Three masters splitting the slots as redis-cli --cluster create does. */
static int three_masters(void *ud, unsigned slot, char *buf, size_t len)
{
    (void)ud;
    snprintf(buf, len, "127.0.0.1:%d", slot < 5461 ? 7000 : slot < 10923 ? 7001 : 7002);
    return 0;
}

static int node_index(const char *tag)
{
    char node[32];
    three_masters(NULL, dlock__key_slot(tag, strlen(tag)), node, sizeof(node));
    return node[strlen(node) - 1] - '0';
}

static void test_place_spreads_buckets_over_every_master(void **state)
{
    (void)state;
    sk_buckets b;
    assert_int_equal(sk_buckets_place("hot", 6, three_masters, NULL, &b), 0);
    assert_string_equal(b.tag[0], "c:hot");
    int per[3] = {0};
    for (int j = 0; j < 6; j++) per[node_index(b.tag[j])]++;
    assert_int_equal(per[0], 2);
    assert_int_equal(per[1], 2);
    assert_int_equal(per[2], 2);
    /* consecutive buckets on different masters */
    for (int j = 1; j < 6; j++) assert_int_not_equal(node_index(b.tag[j]), node_index(b.tag[j - 1]));
}

static void test_place_without_a_map_uses_salt_zero(void **state)
{
    (void)state;
    sk_buckets b;
    assert_int_equal(sk_buckets_place("x", 3, NULL, NULL, &b), 0);
    assert_string_equal(b.tag[1], "c:x/1.0");
    assert_string_equal(b.tag[2], "c:x/2.0");
    assert_int_not_equal(sk_buckets_place("x", 0, NULL, NULL, &b), 0);
    assert_int_not_equal(sk_buckets_place("x", SK_MAX_SHARDS + 1, NULL, NULL, &b), 0);
    assert_int_not_equal(sk_buckets_place("bad id", 2, NULL, NULL, &b), 0);
}

static void test_tags_round_trip_through_the_meta_field(void **state)
{
    (void)state;
    sk_buckets b, r;
    char id[65];
    memset(id, 'a', 64);
    id[64] = '\0';
    assert_int_equal(sk_buckets_place(id, SK_MAX_SHARDS, three_masters, NULL, &b), 0);
    char list[SK_MAX_SHARDS * SK_BUCKET_TAG_MAX];
    assert_true(sk_buckets_format(&b, list, sizeof(list)) > 0);
    assert_int_equal(sk_buckets_parse(id, SK_MAX_SHARDS, list, &r), 0);
    for (int j = 0; j < SK_MAX_SHARDS; j++) assert_string_equal(r.tag[j], b.tag[j]);
    assert_int_equal(sk_buckets_format(&b, list, 10), 0);
}

static void test_parse_refuses_tags_placement_never_writes(void **state)
{
    (void)state;
    sk_buckets r;
    const char *bad[] = {"c:y,c:x/1.0", "c:x,c:x/2.0", "c:x,c:x/1.", "c:x,c:x/1.01", "c:x,c:x/1.123456",
                         "c:x,c:x/1.0,", "c:x", "c:x,c:x/1.0x", "c:x,{c:x}/1.0", "c:x,c:x/1.0,c:x/2.0", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = sk_buckets_parse("x", 2, bad[i], &r);
        if (rc == 0) fail_msg("accepted \"%s\"", bad[i]);
    }
    assert_int_equal(sk_buckets_parse("x", 2, "c:x,c:x/1.4711", &r), 0);
    assert_int_equal(sk_buckets_parse("x", 1, "c:x", &r), 0);
    assert_int_not_equal(sk_buckets_parse("x", 2, NULL, &r), 0);
}

static void test_home_bucket_is_stable_and_covers_every_bucket(void **state)
{
    (void)state;
    assert_int_equal(sk_home_bucket("anyone", 1), 0);
    /* FNV-1a 32 of "a" is 0xe40c292c: pinned, the stored format depends on it */
    assert_int_equal(sk_home_bucket("a", 1000), (int)(0xe40c292cu % 1000));
    int seen[6] = {0};
    char u[16];
    for (int i = 0; i < 6000; i++) {
        snprintf(u, sizeof(u), "u%d", i);
        int h = sk_home_bucket(u, 6);
        assert_true(h >= 0 && h < 6);
        seen[h]++;
    }
    for (int j = 0; j < 6; j++) assert_true(seen[j] > 800 && seen[j] < 1200);
}

static void test_keys_are_named_in_the_stored_format(void **state)
{
    (void)state;
    char k[32], b[32];
    sk_campaign_key("sale-1", "meta", k, sizeof(k));
    assert_string_equal(k, "{c:sale-1}:meta");
    sk_tag_key("c:sale-1/2.7", "order:42", k, sizeof(k));
    assert_string_equal(k, "{c:sale-1/2.7}:order:42");
    sk_tag_key("c:x", "", k, sizeof(k)); /* the prefix of every key of the bucket */
    assert_string_equal(k, "{c:x}:");
    sk_buckets one;
    sk_buckets_single("sale-1", &one); /* bucket 0's key is the campaign's key */
    sk_bucket_key(&one, 0, "stock", b, sizeof(b));
    sk_campaign_key("sale-1", "stock", k, sizeof(k));
    assert_string_equal(k, b);
    sk_campaign_key("a-long-campaign-id", "order_status", k, 12); /* truncated, terminated */
    assert_string_equal(k, "{c:a-long-c");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_place_spreads_buckets_over_every_master),
        cmocka_unit_test(test_place_without_a_map_uses_salt_zero),
        cmocka_unit_test(test_tags_round_trip_through_the_meta_field),
        cmocka_unit_test(test_parse_refuses_tags_placement_never_writes),
        cmocka_unit_test(test_home_bucket_is_stable_and_covers_every_bucket),
        cmocka_unit_test(test_keys_are_named_in_the_stored_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
