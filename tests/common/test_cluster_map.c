/* test_cluster_map.c: the pure half of the cluster router, without a
 * server: CLUSTER SHARDS / SLOTS replies parse into the right slot map and
 * hostile ones are refused (and never crash: a mutation fuzz loop under
 * ASan), MOVED/ASK replies parse strictly, and every command form dlock
 * sends is routed by the right keys (CROSSSLOT and unknown commands are
 * refused before anything could be sent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_map.h"
#include "common_err.h"
#include "redis_io.h"
#include "slot.h"
#include "util.h"

/* ---- a tiny RESP writer ---------------------------------------------------- */

static void arr(dlock__buf *b, int n)
{
    dlock__buf_printf(b, "*%d\r\n", n);
}
static void num(dlock__buf *b, long long n)
{
    dlock__buf_printf(b, ":%lld\r\n", n);
}
static void bulk(dlock__buf *b, const char *s)
{
    dlock__buf_printf(b, "$%zu\r\n%s\r\n", strlen(s), s);
}

static void shard_node(dlock__buf *b, const char *ip, const char *endpoint, int port, const char *role,
                       const char *health)
{
    arr(b, 14);
    bulk(b, "id"), bulk(b, "0123456789abcdef");
    bulk(b, "port"), num(b, port);
    bulk(b, "ip"), bulk(b, ip);
    bulk(b, "endpoint"), bulk(b, endpoint);
    bulk(b, "role"), bulk(b, role);
    bulk(b, "replication-offset"), num(b, 42);
    bulk(b, "health"), bulk(b, health);
}

/* Three shards: 0-5460 on :7000, 5461-10922 on :7001 (its master failed,
 * the promoted one online), 10923-16383 plus 100-100 again on :7002 with
 * an unknown endpoint "?" (the node that answered). */
static void three_shards(dlock__buf *b)
{
    arr(b, 3);
    arr(b, 4), bulk(b, "slots"), arr(b, 2), num(b, 0), num(b, 5460);
    bulk(b, "nodes"), arr(b, 2);
    shard_node(b, "127.0.0.1", "127.0.0.1", 7000, "master", "online");
    shard_node(b, "127.0.0.1", "127.0.0.1", 7100, "replica", "online");
    arr(b, 4), bulk(b, "slots"), arr(b, 2), num(b, 5461), num(b, 10922);
    bulk(b, "nodes"), arr(b, 2);
    shard_node(b, "127.0.0.1", "127.0.0.1", 7101, "master", "failed");
    shard_node(b, "127.0.0.1", "127.0.0.1", 7001, "master", "online");
    arr(b, 4), bulk(b, "slots"), arr(b, 2), num(b, 10923), num(b, 16383);
    bulk(b, "nodes"), arr(b, 1);
    shard_node(b, "", "?", 7002, "master", "online");
}

static dlock__reply *parse(const dlock__buf *b)
{
    dlock__reply *r = NULL;
    assert_int_equal(dlock__reply_parse(b->data, b->len, &r), 0);
    return r;
}

static const char *owner(const dlock__cmap *m, unsigned slot, int *port)
{
    uint16_t i = m->owner[slot];
    if (i == DLOCK__CMAP_NONE) return NULL;
    *port = m->nodes[i].port;
    return m->nodes[i].host;
}

static void test_shards_reply_maps_every_slot_to_its_online_master(void **state)
{
    (void)state;
    dlock__buf b = {0};
    three_shards(&b);
    dlock__reply *r = parse(&b);
    dlock__cmap m;
    char err[200] = "";
    assert_int_equal(dlock__cmap_from_shards(r, "10.0.0.9", &m, err, sizeof(err)), 0);
    int port = 0;
    assert_string_equal(owner(&m, 0, &port), "127.0.0.1");
    assert_int_equal(port, 7000);
    owner(&m, 5460, &port), assert_int_equal(port, 7000);
    owner(&m, 5461, &port), assert_int_equal(port, 7001);     /* online master wins */
    assert_string_equal(owner(&m, 16383, &port), "10.0.0.9"); /* "?" = who answered */
    assert_int_equal(port, 7002);
    assert_int_equal(m.n_nodes, 3);
    dlock__cmap_free(&m);
    dlock__reply_free(r);
    dlock__buf_free(&b);
}

static void test_slots_reply_maps_ranges_and_empty_ip_means_the_asked_node(void **state)
{
    (void)state;
    dlock__buf b = {0};
    arr(&b, 2);
    arr(&b, 4), num(&b, 0), num(&b, 8191);
    arr(&b, 3), bulk(&b, "127.0.0.1"), num(&b, 7000), bulk(&b, "id0");
    arr(&b, 3), bulk(&b, "127.0.0.1"), num(&b, 7100), bulk(&b, "id1");
    arr(&b, 3), num(&b, 8192), num(&b, 16383);
    arr(&b, 2), bulk(&b, ""), num(&b, 7001);
    dlock__reply *r = parse(&b);
    dlock__cmap m;
    assert_int_equal(dlock__cmap_from_slots(r, "h9", &m, NULL, 0), 0);
    int port = 0;
    owner(&m, 8191, &port), assert_int_equal(port, 7000);
    assert_string_equal(owner(&m, 8192, &port), "h9");
    assert_int_equal(port, 7001);
    dlock__cmap_free(&m);
    dlock__reply_free(r);
    dlock__buf_free(&b);
}

/* One hostile SLOTS entry per case: every one is refused, with a reason. */
static void test_hostile_map_replies_are_refused(void **state)
{
    (void)state;
    static const char *cases[] = {
        ":1\r\n",                                               /* not an array */
        "*0\r\n",                                               /* no slots at all */
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",  /* slot out of range */
        "*1\r\n*3\r\n:-1\r\n:5\r\n*2\r\n$1\r\nh\r\n:1\r\n",     /* negative slot */
        "*1\r\n*3\r\n:9\r\n:5\r\n*2\r\n$1\r\nh\r\n:1\r\n",      /* start > end */
        "*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\nh\r\n:0\r\n",      /* port 0 */
        "*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\nh\r\n:70000\r\n",  /* port too big */
        "*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$3\r\na b\r\n:1\r\n",    /* space in host */
        "*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n:7\r\n:1\r\n",           /* host not a string */
        "*1\r\n*3\r\n:0\r\n:5\r\n:7\r\n",                       /* master not an array */
        "*1\r\n*2\r\n:0\r\n:5\r\n",                             /* no master */
        "*1\r\n:5\r\n",                                         /* entry not an array */
        "*1\r\n*3\r\n$1\r\nx\r\n:5\r\n*2\r\n$1\r\nh\r\n:1\r\n", /* slot not a number */
        "*1\r\n*3\r\n:0\r\n:5\r\n*1\r\n$1\r\nh\r\n",            /* no port */
        NULL};
    for (int i = 0; cases[i]; i++) {
        dlock__reply *r = NULL;
        assert_int_equal(dlock__reply_parse(cases[i], strlen(cases[i]), &r), 0);
        dlock__cmap m;
        char err[200] = "";
        assert_int_equal(dlock__cmap_from_slots(r, "h", &m, err, sizeof(err)), DLOCK__ESERVER);
        assert_true(err[0] != '\0');
        assert_int_equal(dlock__cmap_from_shards(r, "h", &m, NULL, 0), DLOCK__ESERVER);
        dlock__reply_free(r);
    }
    /* a host longer than any real one */
    dlock__buf b = {0};
    char host[400];
    memset(host, 'a', sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    arr(&b, 1), arr(&b, 3), num(&b, 0), num(&b, 1), arr(&b, 2), bulk(&b, host), num(&b, 1);
    dlock__reply *r = parse(&b);
    dlock__cmap m;
    assert_int_equal(dlock__cmap_from_slots(r, "h", &m, NULL, 0), DLOCK__ESERVER);
    dlock__reply_free(r);
    dlock__buf_free(&b);
}

/* Random byte flips and truncations of a real-shaped reply: whatever the
 * RESP reader accepts, the map parsers must refuse or accept without a
 * crash or leak (ASan/LSan in CI), and an accepted map is consistent. */
static void test_mutated_map_replies_never_crash(void **state)
{
    (void)state;
    dlock__buf b = {0};
    three_shards(&b);
    char *work = malloc(b.len);
    assert_non_null(work);
    srand(12345);
    for (int it = 0; it < 3000; it++) {
        memcpy(work, b.data, b.len);
        size_t n = it % 7 == 0 ? (size_t)rand() % b.len : b.len;
        for (int f = 0; f < 1 + it % 4; f++)
            work[(size_t)rand() % b.len] = (char)(rand() & 0xff);
        dlock__reply *r = NULL;
        if (dlock__reply_parse(work, n, &r) != 0) continue;
        dlock__cmap m;
        if (dlock__cmap_from_shards(r, "h", &m, NULL, 0) == 0) {
            for (size_t s = 0; s < DLOCK__SLOTS; s++)
                assert_true(m.owner[s] == DLOCK__CMAP_NONE || m.owner[s] < m.n_nodes);
            dlock__cmap_free(&m);
        }
        if (dlock__cmap_from_slots(r, "h", &m, NULL, 0) == 0) dlock__cmap_free(&m);
        dlock__redirect rd;
        (void)dlock__redirect_parse(r, &rd);
        dlock__reply_free(r);
    }
    free(work);
    dlock__buf_free(&b);
}

static bool redirect(const char *text, dlock__redirect *rd)
{
    dlock__buf b = {0};
    dlock__buf_printf(&b, "-%s\r\n", text);
    dlock__reply *r = parse(&b);
    bool ok = dlock__redirect_parse(r, rd);
    dlock__reply_free(r);
    dlock__buf_free(&b);
    return ok;
}

static void test_redirects_parse_strictly(void **state)
{
    (void)state;
    dlock__redirect rd;
    assert_true(redirect("MOVED 3999 127.0.0.1:6381", &rd));
    assert_int_equal(rd.kind, DLOCK__REDIR_MOVED);
    assert_int_equal(rd.slot, 3999);
    assert_string_equal(rd.host, "127.0.0.1");
    assert_int_equal(rd.port, 6381);
    assert_true(redirect("ASK 16383 ::1:7000", &rd));
    assert_int_equal(rd.kind, DLOCK__REDIR_ASK);
    assert_string_equal(rd.host, "::1");
    assert_true(redirect("MOVED 1 :6380", &rd)); /* empty host: the node that answered */
    assert_string_equal(rd.host, "");
    static const char *bad[] = {"MOVED 16384 h:1",
                                "MOVED 1 h",
                                "MOVED 1 h:0",
                                "MOVED 1 h:99999",
                                "MOVED x h:1",
                                "MOVED  h:1",
                                "MOVED 1 h:1x",
                                "ASK",
                                "MOVED",
                                "MOVEDX 1 h:1",
                                "TRYAGAIN Multiple keys",
                                "ERR MOVED 1 h:1",
                                NULL};
    for (int i = 0; bad[i]; i++)
        assert_false(redirect(bad[i], &rd));
    dlock__reply *r = NULL;
    assert_int_equal(dlock__reply_parse("+MOVED 1 h:1\r\n", 14, &r), 0);
    assert_false(dlock__redirect_parse(r, &rd)); /* a status, not an error */
    dlock__reply_free(r);
}

static int route(const char *line, dlock__route *rt)
{
    const char *argv[32];
    static char copy[512];
    snprintf(copy, sizeof(copy), "%s", line);
    int argc = 0;
    for (char *t = copy; *t && argc < 32;) {
        argv[argc++] = t;
        char *sp = strchr(t, ' ');
        if (!sp) break;
        *sp = '\0';
        t = sp + 1;
    }
    char err[256] = "";
    int rc = dlock__route_cmd(argc, argv, NULL, rt, err, sizeof(err));
    if (rc) assert_true(err[0] != '\0');
    return rc;
}

static unsigned slot_of(const char *k)
{
    return dlock__key_slot(k, strlen(k));
}

static void expect_slot(const char *line, const char *key)
{
    dlock__route rt;
    assert_int_equal(route(line, &rt), 0);
    assert_int_equal(rt.kind, DLOCK__ROUTE_SLOT);
    assert_int_equal(rt.slot, slot_of(key));
}

static void expect(const char *line, int rc, dlock__route_kind kind)
{
    dlock__route rt;
    assert_int_equal(route(line, &rt), rc);
    if (rc == 0) assert_int_equal(rt.kind, kind);
}

static void test_commands_route_by_their_keys(void **state)
{
    (void)state;
    expect_slot("GET user:1", "user:1");
    expect_slot("get {user:1}.x", "user:1");
    expect_slot("SET a 1 PX 100", "a");
    expect_slot("HINCRBY {c}stock n 1", "c");
    expect_slot("EVALSHA 0123 2 {l}a {l}b arg1 arg2", "l");
    expect_slot("EVAL return 1 {l}a x", "l"); /* numkeys "1" splits off the script word */
    expect_slot("FCALL f 1 k", "k");
    expect_slot("MSET {t}a 1 {t}b 2", "t");
    expect_slot("DEL {t}a {t}b {t}c", "t");
    expect_slot("XREADGROUP GROUP g c COUNT 10 BLOCK 0 STREAMS {s}1 {s}2 > >", "s");
    expect_slot("XREADGROUP GROUP STREAMS STREAMS STREAMS k >", "k"); /* group/consumer named STREAMS */
    expect_slot("XREAD COUNT 1 STREAMS k 0", "k");
    expect_slot("XGROUP CREATE s g 0 MKSTREAM", "s");
    expect_slot("XINFO GROUPS s", "s");
    expect_slot("XAUTOCLAIM s g c 100 0", "s");
    expect("EVALSHA 0123 0", 0, DLOCK__ROUTE_CURRENT);
    expect("XGROUP HELP", 0, DLOCK__ROUTE_CURRENT);
    expect("WAIT 1 100", 0, DLOCK__ROUTE_CURRENT);
    expect("INFO replication", 0, DLOCK__ROUTE_CURRENT);
    expect("PING", 0, DLOCK__ROUTE_CURRENT);
    expect("SCRIPT LOAD x", 0, DLOCK__ROUTE_ALL);
    expect("FUNCTION FLUSH", 0, DLOCK__ROUTE_ALL);
    expect("MULTI", 0, DLOCK__ROUTE_MULTI);
    expect_slot("evalsha_ro 0123 1 k", "k"); /* any case, names with '_' */
    expect_slot("zremrangebyscore z 0 1", "z");
    expect_slot("Xautoclaim s g c 1 0", "s");
    expect("acl whoami", 0, DLOCK__ROUTE_CURRENT); /* the table's first name */
    expect("watch {a}x", 0, DLOCK__ROUTE_SLOT);
    expect("EXEC", 0, DLOCK__ROUTE_EXEC);
}

static void test_unroutable_commands_are_refused(void **state)
{
    (void)state;
    expect("MSET {a}x 1 {b}y 2", DLOCK__ECROSSSLOT, 0);
    expect("EVALSHA 0123 2 a b", slot_of("a") == slot_of("b") ? 0 : DLOCK__ECROSSSLOT, DLOCK__ROUTE_SLOT);
    expect("XREADGROUP GROUP g c STREAMS a b > >", DLOCK__ECROSSSLOT, 0);
    expect("EVALSHA 0123 3 a", DLOCK__EINVAL, 0);  /* numkeys beyond argc */
    expect("EVALSHA 0123 -1 a", DLOCK__EINVAL, 0); /* negative */
    expect("EVALSHA 0123 x a", DLOCK__EINVAL, 0);
    expect("EVALSHA 0123 99999999999 a", DLOCK__EINVAL, 0);
    expect("EVALSHA 0123", DLOCK__EINVAL, 0);
    expect("XREADGROUP GROUP g c COUNT 1", DLOCK__EINVAL, 0); /* no STREAMS */
    expect("XREAD STREAMS a b c", DLOCK__EINVAL, 0);          /* odd key/id list */
    expect("GET", DLOCK__EINVAL, 0);
    expect("SUBSCRIBE ch", DLOCK__EINVAL, 0);
    expect("SELECT 1", DLOCK__EINVAL, 0);
    expect("SCAN 0", DLOCK__EINVAL, 0);
    expect("NOSUCHCOMMAND k", DLOCK__EINVAL, 0);
    dlock__route rt;
    assert_int_equal(dlock__route_cmd(0, NULL, NULL, &rt, NULL, 0), DLOCK__EINVAL);
    /* a command name with a NUL or a suffix is not the shorter command */
    const char *nul[2] = {"GET\0X", "k"};
    size_t nul_lens[2] = {5, 1};
    assert_int_equal(dlock__route_cmd(2, nul, nul_lens, &rt, NULL, 0), DLOCK__EINVAL);
    expect("GETX k", DLOCK__EINVAL, 0);
    expect("GE k", DLOCK__EINVAL, 0);
    /* binary keys with lens: a NUL inside the key is part of it */
    const char *argv[2] = {"GET", "a\0{b}"};
    size_t lens[2] = {3, 5};
    assert_int_equal(dlock__route_cmd(2, argv, lens, &rt, NULL, 0), 0);
    assert_int_equal(rt.slot, dlock__key_slot("b", 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shards_reply_maps_every_slot_to_its_online_master),
        cmocka_unit_test(test_slots_reply_maps_ranges_and_empty_ip_means_the_asked_node),
        cmocka_unit_test(test_hostile_map_replies_are_refused),
        cmocka_unit_test(test_mutated_map_replies_never_crash),
        cmocka_unit_test(test_redirects_parse_strictly),
        cmocka_unit_test(test_commands_route_by_their_keys),
        cmocka_unit_test(test_unroutable_commands_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
