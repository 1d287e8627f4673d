/* test_script.c: the script object (script.h) on real servers: the SHA-1
 * fixed at build time is the one Redis computes; after the server's
 * script cache is emptied a call still runs its script exactly once
 * (EVALSHA answered NOSCRIPT, then EVAL), on the sync and the async door
 * and for a call whose arguments come written as RESP;
 * on a Cluster a call goes to the master of its keys' slot (one written as
 * RESP with its slot is never parsed back there) and keys in two
 * slots are refused before anything is sent; calls larger than any stack
 * buffer work; bad counts are refused. Also where the routers read the
 * slot map from (CLUSTER SLOTS first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "cluster_fixture.h"
#include "common_err.h"
#include "resp_write.h"
#include "script.h"
#include "servers.h"
#include "slot.h"
#include "util.h"

extern const dlock__script dlock__script_lock_renew; /* generated from src/lib/lua/lock_renew.lua */

/* SHA-1s of the sources (printf '%s' SRC | sha1sum). */
static const dlock__script incr = {"t_incr", "return redis.call('INCR', KEYS[1])", 34,
                                   "61636018f4e6b5817b89791bbed242f93fa089e3"};
static const dlock__script nargs = {"t_nargs", "return #ARGV", 12,
                                    "2341fb02e46697ddb0c727ff293bd612557191a5"};

static test_server srv;
static test_cluster cl;
static struct event_base *base;

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&srv, NULL) != 0) return -1;
    if (test_cluster_start(&cl, 3, 0) != 0) return -1;
    base = event_base_new();
    return base ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    test_server_stop(&srv);
    test_cluster_stop(&cl);
    event_base_free(base);
    return 0;
}

static dlock__conn *open_url(const char *text)
{
    dlock__url u;
    char err[256];
    assert_int_equal(dlock__url_parse(text, &u, err, sizeof(err)), 0);
    dlock__conn_opts o = {.connect_timeout_ms = 1000, .command_timeout_ms = 2000};
    dlock__conn *c = NULL;
    assert_int_equal(dlock__conn_open(&u, &o, &c, err, sizeof(err)), 0);
    dlock__url_free(&u);
    return c;
}

static void flush_scripts(dlock__conn *c)
{
    const char *argv[2] = {"SCRIPT", "FLUSH"};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(c, 2, argv, NULL, &r), 0);
    dlock__reply_free(r);
}

/* INCR of key through the script: the counter's new value. */
static long long call_incr(dlock__conn *c, const char *key, bool *reloaded)
{
    const char *keys[1] = {key};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__script_call(c, &incr, 1, keys, 0, NULL, &r, reloaded), 0);
    assert_int_equal(dlock__reply_kind(r), DLOCK__R_INTEGER);
    long long v = dlock__reply_int(r);
    dlock__reply_free(r);
    return v;
}

static void test_the_build_time_sha_is_the_one_redis_computes(void **state)
{
    (void)state;
    dlock__conn *c = open_url(srv.url);
    const char *argv[3] = {"SCRIPT", "LOAD", dlock__script_lock_renew.src};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(c, 3, argv, NULL, &r), 0);
    assert_string_equal(dlock__reply_str(r, NULL), dlock__script_lock_renew.sha);
    assert_int_equal(strlen(dlock__script_lock_renew.src), dlock__script_lock_renew.len);
    dlock__reply_free(r);
    dlock__conn_close(c);
}

static void test_after_script_flush_a_sync_call_runs_once(void **state)
{
    (void)state;
    dlock__conn *c = open_url(srv.url);
    char key[64];
    snprintf(key, sizeof(key), "%sscript:sync", test_prefix());
    flush_scripts(c);
    bool reloaded = false;
    assert_int_equal(call_incr(c, key, &reloaded), 1); /* NOSCRIPT, then EVAL: once */
    assert_true(reloaded);
    assert_int_equal(call_incr(c, key, &reloaded), 2); /* cached now: EVALSHA */
    assert_false(reloaded);
    dlock__conn_close(c);
}

typedef struct aresult {
    bool done;
    int err;
    long long n;
} aresult;

static void on_reply(dlock__aconn *ac, dlock__reply *r, int err, void *priv)
{
    (void)ac;
    aresult *res = priv;
    res->done = true;
    res->err = err;
    res->n = r && dlock__reply_kind(r) == DLOCK__R_INTEGER ? dlock__reply_int(r) : -1;
}

static void on_state(dlock__aconn *ac, bool up, const char *why, void *priv)
{
    (void)ac, (void)up, (void)why, (void)priv;
}

static void run_until(const bool *done)
{
    int64_t deadline = dlock__now_ms() + 5000;
    struct timeval tick = {0, 10000};
    while (!*done && dlock__now_ms() < deadline) {
        event_base_loopexit(base, &tick);
        event_base_dispatch(base);
    }
}

static long long acall_incr(dlock__aconn *ac, const char *key)
{
    const char *keys[1] = {key};
    aresult res = {0};
    assert_int_equal(dlock__script_acall(ac, &incr, 1, keys, 0, NULL, on_reply, &res), 0);
    run_until(&res.done);
    assert_true(res.done);
    assert_int_equal(res.err, 0);
    return res.n;
}

static dlock__aconn *aopen_url(const char *text)
{
    dlock__url u;
    char err[256];
    assert_int_equal(dlock__url_parse(text, &u, err, sizeof(err)), 0);
    dlock__aconn *ac = NULL;
    assert_int_equal(dlock__aconn_open(base, &u, on_state, NULL, &ac, err, sizeof(err)), 0);
    dlock__url_free(&u);
    return ac;
}

static void test_after_script_flush_an_async_call_runs_once(void **state)
{
    (void)state;
    dlock__conn *c = open_url(srv.url);
    dlock__aconn *ac = aopen_url(srv.url);
    char key[64];
    snprintf(key, sizeof(key), "%sscript:async", test_prefix());
    flush_scripts(c);
    assert_int_equal(acall_incr(ac, key), 1);
    assert_int_equal(acall_incr(ac, key), 2);
    flush_scripts(c);
    assert_int_equal(acall_incr(ac, key), 3);
    dlock__aconn_close(ac);
    dlock__conn_close(c);
}

/* A call whose arguments come written as RESP: EVALSHA; on NOSCRIPT the
 * caller asks dlock__script_rcall_retry and sends it again (EVAL), once. */
typedef struct rres {
    dlock__script_rcall *rc;
    bool done;
    int sends;
    long long n;
} rres;

static void on_rcall(dlock__aconn *ac, dlock__reply *r, int err, void *priv)
{
    rres *res = priv;
    if (!err && dlock__script_rcall_retry(res->rc, r)) {
        res->sends++;
        assert_int_equal(dlock__script_rcall_send(ac, res->rc, on_rcall, res), 0);
        return;
    }
    res->done = true;
    res->n = !err && r && dlock__reply_kind(r) == DLOCK__R_INTEGER ? dlock__reply_int(r) : -1;
}

/* slot: the key's slot as the writer knows it, or -1 (found by parsing). */
static long long rcall_incr(dlock__aconn *ac, const char *key, int slot, bool *evaled)
{
    char buf[DLOCK__SCRIPT_HEAD_ROOM + 128];
    char *args = buf + DLOCK__SCRIPT_HEAD_ROOM;
    char *p = dlock__resp_bulk(args, "1", 1);
    p = dlock__resp_bulk(p, key, strlen(key));
    dlock__script_rcall rc = {.s = &incr, .nargs = 2, .slot = slot, .args = args, .len = (size_t)(p - args)};
    rres res = {.rc = &rc, .sends = 1};
    assert_int_equal(dlock__script_rcall_send(ac, &rc, on_rcall, &res), 0);
    run_until(&res.done);
    assert_true(res.done);
    assert_int_equal(res.sends, rc.by_source ? 2 : 1);
    *evaled = rc.by_source;
    return res.n;
}

static void test_after_script_flush_a_call_written_as_resp_runs_once(void **state)
{
    (void)state;
    dlock__conn *c = open_url(srv.url);
    dlock__aconn *ac = aopen_url(srv.url);
    char key[64];
    snprintf(key, sizeof(key), "%sscript:resp", test_prefix());
    bool evaled = false;
    flush_scripts(c);
    assert_int_equal(rcall_incr(ac, key, -1, &evaled), 1);
    assert_true(evaled);
    assert_int_equal(rcall_incr(ac, key, -1, &evaled), 2);
    assert_false(evaled);
    /* never a second EVAL: a NOSCRIPT to EVAL is the answer */
    dlock__reply *noscript = NULL;
    const char wire[] = "-NOSCRIPT No matching script.\r\n";
    assert_int_equal(dlock__reply_parse(wire, sizeof(wire) - 1, &noscript), 0);
    dlock__script_rcall rc = {.s = &incr};
    assert_true(dlock__script_rcall_retry(&rc, noscript));
    assert_false(dlock__script_rcall_retry(&rc, noscript));
    dlock__reply_free(noscript);
    dlock__aconn_close(ac);
    dlock__conn_close(c);
}

/* The value of key read from node i directly (not through the router). */
static long long node_get(int i, const char *key)
{
    char out[64] = "";
    const char *argv[2] = {"GET", key};
    if (test_cluster_cmd(&cl, i, out, sizeof(out), 2, argv) != 0) return -1;
    return out[0] ? strtoll(out, NULL, 10) : 0;
}

static void test_on_a_cluster_a_call_runs_on_its_keys_master(void **state)
{
    (void)state;
    dlock__conn *c = open_url(cl.url);
    dlock__aconn *ac = aopen_url(cl.url);
    flush_scripts(c); /* every master */
    for (int i = 0; i < cl.n; i++) {
        char tag[16], key[96];
        assert_true(test_cluster_tag_on(&cl, i, tag, sizeof(tag)) >= 0);
        snprintf(key, sizeof(key), "{%s}%sscript", tag, test_prefix());
        bool reloaded = false;
        assert_int_equal(call_incr(c, key, &reloaded), 1);
        assert_true(reloaded);
        assert_int_equal(acall_incr(ac, key), 2);
        assert_int_equal(node_get(i, key), 2);
    }
    dlock__aconn_close(ac);
    dlock__conn_close(c);
}

/* A call written as RESP with its slot goes to that slot's master as
 * written: the router never reads it back (its parse count stays), also
 * for the EVAL after NOSCRIPT; without a slot it is parsed to find it. */
static void test_on_a_cluster_a_call_written_as_resp_with_its_slot_is_never_parsed(void **state)
{
    (void)state;
    dlock__conn *c = open_url(cl.url);
    dlock__aconn *ac = aopen_url(cl.url);
    for (int i = 0; i < cl.n; i++) {
        char tag[16], key[96];
        assert_true(test_cluster_tag_on(&cl, i, tag, sizeof(tag)) >= 0);
        snprintf(key, sizeof(key), "{%s}%sscript:rslot", tag, test_prefix());
        int slot = (int)dlock__key_slot(key, strlen(key));
        flush_scripts(c); /* every master */
        uint64_t parsed = dlock__aconn_resp_parsed(ac);
        bool evaled = false;
        assert_int_equal(rcall_incr(ac, key, slot, &evaled), 1);
        assert_true(evaled); /* NOSCRIPT, then EVAL */
        assert_int_equal(rcall_incr(ac, key, slot, &evaled), 2);
        assert_false(evaled);
        assert_int_equal(node_get(i, key), 2);
        assert_int_equal(dlock__aconn_resp_parsed(ac), parsed);
        assert_int_equal(rcall_incr(ac, key, -1, &evaled), 3);
        assert_int_equal(dlock__aconn_resp_parsed(ac), parsed + 1);
    }
    dlock__aconn_close(ac);
    dlock__conn_close(c);
}

static void test_keys_in_two_slots_are_refused_before_sending(void **state)
{
    (void)state;
    dlock__conn *c = open_url(cl.url);
    dlock__aconn *ac = aopen_url(cl.url);
    const char *keys[2] = {"{a}x", "{b}y"};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__script_call(c, &incr, 2, keys, 0, NULL, &r, NULL), DLOCK__ECROSSSLOT);
    assert_null(r);
    aresult res = {0};
    assert_int_equal(dlock__script_acall(ac, &incr, 2, keys, 0, NULL, on_reply, &res), DLOCK__ECROSSSLOT);
    assert_false(res.done);
    dlock__aconn_close(ac);
    dlock__conn_close(c);
}

static void test_a_call_with_many_arguments_and_bad_counts(void **state)
{
    (void)state;
    dlock__conn *c = open_url(srv.url);
    dlock__aconn *ac = aopen_url(srv.url);
    enum { N = 1000 };
    const char **args = calloc(N, sizeof(*args));
    assert_non_null(args);
    for (int i = 0; i < N; i++)
        args[i] = "v";
    dlock__reply *r = NULL;
    assert_int_equal(dlock__script_call(c, &nargs, 0, NULL, N, args, &r, NULL), 0);
    assert_int_equal(dlock__reply_int(r), N);
    dlock__reply_free(r);
    aresult res = {0};
    assert_int_equal(dlock__script_acall(ac, &nargs, 0, NULL, N, args, on_reply, &res), 0);
    run_until(&res.done);
    assert_int_equal(res.n, N);
    assert_int_equal(dlock__script_call(c, &nargs, -1, NULL, 0, NULL, &r, NULL), DLOCK__EINVAL);
    assert_int_equal(dlock__script_acall(ac, &nargs, 0, NULL, -2, NULL, on_reply, &res), DLOCK__EINVAL);
    free(args);
    dlock__aconn_close(ac);
    dlock__conn_close(c);
}

/* Calls of "cluster|<sub>" every node has counted since CONFIG RESETSTAT.
 * Server: Redis 7.0 (this test is not in the Valkey pass; Valkey 8.0 names
 * subcommand counters the same way, docs/compatibility.md). */
static long long map_calls(const char *sub)
{
    long long total = 0;
    char needle[64];
    snprintf(needle, sizeof(needle), "cmdstat_cluster|%s:calls=", sub);
    for (int i = 0; i < cl.n; i++) {
        char out[8192] = "";
        const char *argv[2] = {"INFO", "commandstats"};
        assert_int_equal(test_cluster_cmd(&cl, i, out, sizeof(out), 2, argv), 0);
        const char *p = strstr(out, needle);
        if (p) total += strtoll(p + strlen(needle), NULL, 10);
    }
    return total;
}

/* Both routers read the slot map from CLUSTER SLOTS (on Redis 7.x CLUSTER
 * SHARDS reports stale roles after failovers) and never need SHARDS on a
 * server that answers SLOTS. */
static void test_both_routers_read_the_map_from_cluster_slots(void **state)
{
    (void)state;
    for (int i = 0; i < cl.n; i++) {
        const char *argv[2] = {"CONFIG", "RESETSTAT"};
        assert_int_equal(test_cluster_cmd(&cl, i, NULL, 0, 2, argv), 0);
    }
    dlock__conn *c = open_url(cl.url);
    dlock__aconn *ac = aopen_url(cl.url);
    assert_true(map_calls("slots") >= 2);
    assert_int_equal(map_calls("shards"), 0);
    dlock__aconn_close(ac);
    dlock__conn_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_build_time_sha_is_the_one_redis_computes),
        cmocka_unit_test(test_after_script_flush_a_sync_call_runs_once),
        cmocka_unit_test(test_after_script_flush_an_async_call_runs_once),
        cmocka_unit_test(test_after_script_flush_a_call_written_as_resp_runs_once),
        cmocka_unit_test(test_on_a_cluster_a_call_runs_on_its_keys_master),
        cmocka_unit_test(test_on_a_cluster_a_call_written_as_resp_with_its_slot_is_never_parsed),
        cmocka_unit_test(test_keys_in_two_slots_are_refused_before_sending),
        cmocka_unit_test(test_a_call_with_many_arguments_and_bad_counts),
        cmocka_unit_test(test_both_routers_read_the_map_from_cluster_slots),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
