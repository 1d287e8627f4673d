/* test_cluster_async.c: the async router (a dlock__aconn on a
 * redis-cluster:// URL, one libevent loop) on a real 3-master + 3-replica
 * cluster: state up once the map is loaded, keys on all three masters,
 * MOVED and ASK followed (the map kept on ASK), TRYAGAIN bounded,
 * CROSSSLOT refused with the callback never run, SCRIPT LOAD on every
 * master, WAIT on the slot's master, a written command whose node
 * connection is killed is answered EUNKNOWN and never resent, and a killed
 * master's replica is followed. Each routing behaviour is one body run
 * two ways (struct way): a command of argv, and the same command written
 * as RESP with its slot (dlock__aconn_cmd_resp_slot), which reaches that
 * slot's master without being parsed back into arguments. Failover runs
 * last. */
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
#include "redis_async.h"
#include "resp_write.h"
#include "slot.h"
#include "util.h"

static test_cluster cl;
static int m[3];
static char tag[3][16];
static unsigned tslot[3];
static struct event_base *base;

typedef struct result {
    bool done;
    int err;
    int kind;
    char text[512];
    long long n;
    size_t count;
} result;

typedef struct conn_state {
    int ups, downs;
} conn_state;

static int setup(void **state)
{
    (void)state;
    if (test_cluster_start(&cl, 3, 1) != 0 || test_cluster_three_tags(&cl, m, tag, tslot) != 0) return -1;
    base = event_base_new();
    return base ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    test_cluster_stop(&cl);
    event_base_free(base);
    return 0;
}

static void on_state(dlock__aconn *ac, bool up, const char *why, void *priv)
{
    (void)ac;
    (void)why;
    conn_state *s = priv;
    if (up)
        s->ups++;
    else
        s->downs++;
}

static void on_reply(dlock__aconn *ac, dlock__reply *r, int err, void *priv)
{
    (void)ac;
    result *res = priv;
    res->done = true;
    res->err = err;
    res->kind = r ? (int)dlock__reply_kind(r) : 0;
    if (r && dlock__reply_kind(r) == DLOCK__R_INTEGER) res->n = dlock__reply_int(r);
    if (r) snprintf(res->text, sizeof(res->text), "%s", dlock__reply_str(r, NULL));
    if (r) res->count = dlock__reply_count(r);
}

/* Runs the loop until *done or budget_ms passed. */
static void run_until(const bool *done, int64_t budget_ms)
{
    int64_t deadline = dlock__now_ms() + budget_ms;
    struct timeval tick = {0, 10000};
    while (!*done && dlock__now_ms() < deadline) {
        event_base_loopexit(base, &tick);
        event_base_dispatch(base);
    }
}

static dlock__aconn *open_router(conn_state *st)
{
    dlock__url u;
    char err[256] = "";
    assert_int_equal(dlock__url_parse(cl.url, &u, err, sizeof(err)), 0);
    dlock__aconn *ac = NULL;
    int rc = dlock__aconn_open(base, &u, on_state, st, &ac, err, sizeof(err));
    if (rc) print_message("open: %s\n", err);
    assert_int_equal(rc, 0);
    dlock__url_free(&u);
    assert_true(dlock__aconn_is_cluster(ac));
    assert_int_equal(st->ups, 0); /* never inside open */
    bool up = false;
    for (int i = 0; i < 100 && !up; i++) {
        run_until(&up, 10);
        up = st->ups > 0;
    }
    assert_int_equal(st->ups, 1);
    assert_true(dlock__aconn_is_up(ac));
    return ac;
}

/* The two ways a caller sends a command, and every routing behaviour is
 * checked both ways by one body: as arguments (the router reads the key
 * to find the slot) or written as RESP with its slot
 * (dlock__aconn_cmd_resp_slot: the bytes are never parsed back). */
typedef struct way {
    bool resp;
    char letter; /* in key names: the two ways' tests share the cluster */
} way;
static way by_argv = {false, 'a'}, by_resp = {true, 'b'};

/* argv written in RESP into buf (room bytes), as a caller that writes
 * its commands itself does; its length. */
static size_t resp_of(char *buf, size_t room, int argc, const char **argv)
{
    size_t need = 1 + DLOCK__RESP_INT_MAX + 2;
    for (int i = 0; i < argc; i++)
        need += strlen(argv[i]) + DLOCK__RESP_BULK_OVERHEAD;
    assert_true(need <= room);
    char *p = dlock__resp_len(buf, '*', (size_t)argc);
    for (int i = 0; i < argc; i++)
        p = dlock__resp_bulk(p, argv[i], strlen(argv[i]));
    return (size_t)(p - buf);
}

/* Sends argv written as RESP with its slot (no callback wait: r). The
 * buffer is overwritten at once: the door must have copied it. */
static int send_at(dlock__aconn *ac, int slot, result *r, int argc, const char **argv)
{
    char buf[1024];
    size_t n = resp_of(buf, sizeof(buf), argc, argv);
    int rc = dlock__aconn_cmd_resp_slot(ac, slot, on_reply, r, buf, n);
    memset(buf, 'x', n);
    return rc;
}

/* Sends argv the way w; slot is its keys' slot (the RESP way names it). */
static int send_by(const way *w, dlock__aconn *ac, int slot, result *r, int argc, const char **argv)
{
    if (w->resp) return send_at(ac, slot, r, argc, argv);
    return dlock__aconn_cmd(ac, on_reply, r, argc, argv, NULL);
}

/* One command sent the way w, waited for (<= 5 s). */
static result cmd_by(const way *w, dlock__aconn *ac, int slot, int argc, const char **argv)
{
    result r = {0};
    int rc = send_by(w, ac, slot, &r, argc, argv);
    if (rc) {
        r.done = true;
        r.err = rc;
        return r;
    }
    run_until(&r.done, 5000);
    assert_true(r.done);
    return r;
}

/* One command as arguments, waited for (<= 5 s). */
static result cmd(dlock__aconn *ac, int argc, const char **argv) { return cmd_by(&by_argv, ac, -1, argc, argv); }

/* A key of master k's tag, in the name space of way w. */
static void key_by(const way *w, char *buf, size_t len, int k, const char *name)
{
    snprintf(buf, len, "{%s}%s%c%s", tag[k], test_prefix(), w->letter, name);
}

static void key(char *buf, size_t len, int k, const char *name) { key_by(&by_argv, buf, len, k, name); }

/* The RESP way's promise: the router never read the bytes back. */
static void never_parsed(const way *w, dlock__aconn *ac)
{
    if (w->resp) assert_int_equal(dlock__aconn_resp_parsed(ac), 0);
}

/* A server counter from INFO section. Only the errorstats counters are
 * read (errorstat_ASK/MOVED/TRYAGAIN), which Redis 7.0 and Valkey 8.0 keep
 * alike (both run in CI: docs/compatibility.md); behaviour that servers
 * count differently is observed by its effect instead. */
static long info_field(int i, const char *section, const char *field)
{
    char info[16384];
    const char *argv[2] = {"INFO", section};
    if (test_cluster_cmd(&cl, i, info, sizeof(info), 2, argv) != 0) return -1;
    const char *p = strstr(info, field);
    return p ? strtol(p + strlen(field), NULL, 10) : 0;
}

static void test_keys_reach_all_three_masters(void **state)
{
    const way *w = *state;
    conn_state st = {0};
    dlock__aconn *ac = open_router(&st);
    for (int k = 0; k < 3; k++) {
        char kk[128], got[64] = "", node[64], want[64];
        key_by(w, kk, sizeof(kk), k, "route");
        const char *set[3] = {"SET", kk, tag[k]}, *get[2] = {"GET", kk};
        assert_string_equal(cmd_by(w, ac, (int)tslot[k], 3, set).text, "OK");
        assert_int_equal(test_cluster_cmd(&cl, m[k], got, sizeof(got), 2, get), 0);
        assert_string_equal(got, tag[k]);
        assert_string_equal(cmd_by(w, ac, (int)tslot[k], 2, get).text, tag[k]);
        assert_int_equal(dlock__aconn_node_of_slot(ac, tslot[k], node, sizeof(node)), 0);
        snprintf(want, sizeof(want), "127.0.0.1:%d", cl.node[m[k]].port);
        assert_string_equal(node, want);
    }
    never_parsed(w, ac);
    dlock__aconn_close(ac);
}

/* The same bytes without a slot are parsed once each to find the key,
 * and still answered alike; a slot past the last is refused. */
static void test_resp_without_a_slot_is_parsed_once_and_a_bad_slot_refused(void **state)
{
    (void)state;
    conn_state st = {0};
    dlock__aconn *ac = open_router(&st);
    for (int k = 0; k < 3; k++) {
        char kk[128];
        key_by(&by_resp, kk, sizeof(kk), k, "route"); /* written by the RESP way above */
        const char *get[2] = {"GET", kk};
        assert_string_equal(cmd_by(&by_resp, ac, -1, 2, get).text, tag[k]);
    }
    assert_int_equal(dlock__aconn_resp_parsed(ac), 3);
    result r = {0};
    const char *ping[1] = {"PING"};
    assert_int_equal(send_at(ac, 16384, &r, 1, ping), DLOCK__EINVAL);
    dlock__aconn_close(ac);
    assert_false(r.done);
}

static void test_crossslot_is_refused_and_the_callback_never_runs(void **state)
{
    (void)state;
    conn_state st = {0};
    dlock__aconn *ac = open_router(&st);
    char a[128], b[128];
    key(a, sizeof(a), 0, "xa");
    key(b, sizeof(b), 1, "xb");
    const char *mset[5] = {"MSET", a, "1", b, "1"};
    result r = {0};
    assert_int_equal(dlock__aconn_cmd(ac, on_reply, &r, 5, mset, NULL), DLOCK__ECROSSSLOT);
    const char *sub[2] = {"SUBSCRIBE", "x"};
    assert_int_equal(dlock__aconn_cmd(ac, on_reply, &r, 2, sub, NULL), DLOCK__EINVAL);
    bool never = false;
    run_until(&never, 100);
    assert_false(r.done);
    dlock__aconn_close(ac);
    assert_false(r.done);
}

/* ASK during a migration: ASKING then the same command on the importing
 * node, the map kept (each read asks again), a key not yet migrated served
 * by the source; MOVED once the slot has moved: resent to the new master,
 * once (the map then knows). */
static void test_moved_and_ask_are_followed(void **state)
{
    const way *w = *state;
    conn_state st = {0};
    dlock__aconn *ac = open_router(&st);
    char k1[128], k2[128];
    key_by(w, k1, sizeof(k1), 0, "moved");
    key_by(w, k2, sizeof(k2), 0, "stays");
    const char *s1[3] = {"SET", k1, "v1"}, *s2[3] = {"SET", k2, "v2"}, *g1[2] = {"GET", k1},
               *g2[2] = {"GET", k2};
    int src = m[0], dst = m[1], slot = (int)tslot[0];
    assert_string_equal(cmd_by(w, ac, slot, 3, s1).text, "OK");
    assert_string_equal(cmd_by(w, ac, slot, 3, s2).text, "OK");
    /* ASK: one key migrated by hand, the other still on the source */
    assert_int_equal(test_cluster_begin_migration(&cl, tslot[0], src, dst), 0);
    assert_int_equal(test_cluster_migrate_key(&cl, src, dst, k1), 0);
    long ask0 = info_field(src, "errorstats", "errorstat_ASK:count="),
         mv0 = info_field(dst, "errorstats", "errorstat_MOVED:count=");
    for (int i = 0; i < 3; i++) {
        assert_string_equal(cmd_by(w, ac, slot, 2, g1).text, "v1");
        assert_string_equal(cmd_by(w, ac, slot, 2, g2).text, "v2");
    }
    assert_int_equal(info_field(src, "errorstats", "errorstat_ASK:count="), ask0 + 3); /* map kept */
    assert_int_equal(info_field(dst, "errorstats", "errorstat_MOVED:count="), mv0);
    /* MOVED: the migration ends; one MOVED, then the map knows */
    assert_int_equal(test_cluster_end_migration(&cl, tslot[0], src, dst), 0);
    long moved0 = info_field(src, "errorstats", "errorstat_MOVED:count=");
    assert_string_equal(cmd_by(w, ac, slot, 2, g2).text, "v2");
    assert_int_equal(info_field(src, "errorstats", "errorstat_MOVED:count="), moved0 + 1);
    bool never = false;
    run_until(&never, 150);
    for (int i = 0; i < 5; i++)
        assert_string_equal(cmd_by(w, ac, slot, 2, g1).text, "v1");
    assert_int_equal(info_field(src, "errorstats", "errorstat_MOVED:count="), moved0 + 1);
    never_parsed(w, ac);
    assert_int_equal(test_cluster_move_slot(&cl, tslot[0], src), 0);
    assert_string_equal(cmd_by(w, ac, slot, 2, g1).text, "v1");
    dlock__aconn_close(ac);
}

/* TRYAGAIN (keys of one slot split by a migration): retried on the timer
 * within the bound (9 sends), then the error is the answer. */
static void test_tryagain_is_retried_within_its_bound(void **state)
{
    const way *w = *state;
    conn_state st = {0};
    dlock__aconn *ac = open_router(&st);
    char a[128], b[128];
    key_by(w, a, sizeof(a), 1, "ta");
    key_by(w, b, sizeof(b), 1, "tb");
    const char *mset[5] = {"MSET", a, "A", b, "B"}, *mget[3] = {"MGET", a, b};
    int src = m[1], dst = m[2], slot = (int)tslot[1];
    assert_string_equal(cmd_by(w, ac, slot, 5, mset).text, "OK");
    assert_int_equal(test_cluster_begin_migration(&cl, tslot[1], src, dst), 0);
    assert_int_equal(test_cluster_migrate_key(&cl, src, dst, a), 0);
    long t0c = info_field(src, "errorstats", "errorstat_TRYAGAIN:count=");
    int64_t t0 = dlock__now_ms();
    result r = cmd_by(w, ac, slot, 3, mget);
    int64_t took = dlock__now_ms() - t0;
    assert_int_equal(r.kind, DLOCK__R_ERROR);
    assert_non_null(strstr(r.text, "TRYAGAIN"));
    assert_int_equal(info_field(src, "errorstats", "errorstat_TRYAGAIN:count="), t0c + 9);
    assert_true(took >= 400 && took < 2000);
    assert_int_equal(test_cluster_end_migration(&cl, tslot[1], src, dst), 0);
    r = cmd_by(w, ac, slot, 3, mget);
    assert_int_equal(r.kind, DLOCK__R_ARRAY);
    assert_int_equal(r.count, 2);
    never_parsed(w, ac);
    assert_int_equal(test_cluster_move_slot(&cl, tslot[1], src), 0);
    dlock__aconn_close(ac);
}

static void test_script_load_on_every_master_and_wait_on_a_slot(void **state)
{
    (void)state;
    conn_state st = {0};
    dlock__aconn *ac = open_router(&st);
    const char *load[3] = {"SCRIPT", "LOAD", "return redis.call('INCR', KEYS[1])"};
    result r = cmd(ac, 3, load);
    assert_int_equal(r.err, 0);
    assert_int_equal(strlen(r.text), 40);
    char sha[41];
    memcpy(sha, r.text, 40);
    sha[40] = '\0';
    for (int k = 0; k < 3; k++) {
        char kk[128], got[32] = "";
        key(kk, sizeof(kk), k, "sha");
        const char *evalsha[4] = {"EVALSHA", sha, "1", kk};
        assert_int_equal(test_cluster_cmd(&cl, m[k], got, sizeof(got), 4, evalsha), 0); /* cached there */
        r = cmd(ac, 4, evalsha);
        assert_int_equal(r.n, 2);
        const char *wait[3] = {"WAIT", "1", "1000"};
        result w = {0};
        assert_int_equal(dlock__aconn_cmd_slot(ac, tslot[k], on_reply, &w, 3, wait, NULL), 0);
        run_until(&w.done, 3000);
        assert_int_equal(w.n, 1);
    }
    dlock__aconn_close(ac);
}

static void test_a_written_command_on_a_killed_connection_is_not_resent(void **state)
{
    const way *w = *state;
    conn_state st = {0};
    dlock__aconn *ac = open_router(&st);
    char s[128];
    key_by(w, s, sizeof(s), 2, "stream");
    int slot = (int)tslot[2];
    const char *create[6] = {"XGROUP", "CREATE", s, "g", "$", "MKSTREAM"};
    assert_int_equal(cmd_by(w, ac, slot, 6, create).err, 0);
    /* a command that is surely written and pending: a blocked XREADGROUP */
    const char *xrg[9] = {"XREADGROUP", "GROUP", "g", "c", "BLOCK", "5000", "STREAMS", s, ">"};
    result r = {0};
    assert_int_equal(send_by(w, ac, slot, &r, 9, xrg), 0);
    bool never = false;
    run_until(&never, 300);
    assert_false(r.done);
    const char *kill4[4] = {"CLIENT", "KILL", "TYPE", "normal"};
    assert_int_equal(test_cluster_cmd(&cl, m[2], NULL, 0, 4, kill4), 0);
    run_until(&r.done, 3000);
    assert_true(r.done);
    assert_int_equal(r.err, DLOCK__EUNKNOWN);
    run_until(&never, 300); /* time for a resend, were there one */
    /* Observed by its effect, the same on every server: a resent XREADGROUP
     * would be blocked again and take the next entry as soon as it is
     * added (the server serves a blocked reader within the XADD), leaving
     * it pending for consumer c. Not resent: the entry waits undelivered. */
    const char *xadd[5] = {"XADD", s, "*", "f", "v"};
    assert_int_equal(test_cluster_cmd(&cl, m[2], NULL, 0, 5, xadd), 0);
    const char *xpending[6] = {"XPENDING", s, "g", "-", "+", "10"};
    result p = cmd_by(w, ac, slot, 6, xpending);
    assert_int_equal(p.kind, DLOCK__R_ARRAY);
    assert_int_equal(p.count, 0);
    assert_int_equal(r.err, DLOCK__EUNKNOWN); /* the callback ran once, with no reply */
    const char *xrg2[9] = {"XREADGROUP", "GROUP", "g", "c2", "COUNT", "10", "STREAMS", s, ">"};
    result got = cmd_by(w, ac, slot, 9, xrg2); /* the entry is still there for a new reader */
    assert_int_equal(got.kind, DLOCK__R_ARRAY);
    assert_int_equal(got.count, 1);
    /* the routing connection reopens that node on next use */
    const char *xlen[2] = {"XLEN", s};
    assert_int_equal(cmd_by(w, ac, slot, 2, xlen).err, 0);
    never_parsed(w, ac);
    assert_int_equal(st.downs, 0);
    dlock__aconn_close(ac);
}

typedef struct closer {
    dlock__aconn *ac;
    result r;
} closer;

static void close_in_callback(dlock__aconn *ac, dlock__reply *r, int err, void *priv)
{
    closer *c = priv;
    on_reply(ac, r, err, &c->r);
    dlock__aconn_close(c->ac);
}

/* The owner may close the routing connection from inside a reply callback
 * while other nodes still have commands pending (ASan checks the frees). */
static void test_closing_inside_a_callback_runs_every_pending_callback(void **state)
{
    (void)state;
    conn_state st = {0};
    dlock__aconn *ac = open_router(&st);
    char s[128], k[128];
    key(s, sizeof(s), 1, "cstream");
    key(k, sizeof(k), 0, "ck");
    const char *create[6] = {"XGROUP", "CREATE", s, "g", "$", "MKSTREAM"};
    assert_int_equal(cmd(ac, 6, create).err, 0);
    const char *xrg[9] = {"XREADGROUP", "GROUP", "g", "c", "BLOCK", "5000", "STREAMS", s, ">"};
    const char *get[2] = {"GET", k};
    result pending = {0};
    closer c = {.ac = ac};
    assert_int_equal(dlock__aconn_cmd(ac, on_reply, &pending, 9, xrg, NULL), 0);
    bool never = false;
    run_until(&never, 100);
    assert_int_equal(dlock__aconn_cmd(ac, close_in_callback, &c, 2, get, NULL), 0);
    run_until(&c.r.done, 3000);
    assert_true(c.r.done);
    assert_true(pending.done); /* run by the close, with no reply */
    assert_int_equal(pending.err, DLOCK__EUNKNOWN);
    run_until(&never, 50); /* the deferred frees */
}

static void test_a_killed_master_is_replaced_and_the_router_follows(void **state)
{
    (void)state;
    conn_state st = {0};
    dlock__aconn *ac = open_router(&st);
    char kk[128];
    key(kk, sizeof(kk), 2, "failover");
    const char *set[3] = {"SET", kk, "after"};
    assert_string_equal(cmd(ac, 3, set).text, "OK");
    test_cluster_kill(&cl, m[2]);
    int64_t t0 = dlock__now_ms(), ok_at = -1;
    while (dlock__now_ms() - t0 < 20000 && ok_at < 0) {
        result r = {0};
        if (dlock__aconn_cmd(ac, on_reply, &r, 3, set, NULL) == 0) run_until(&r.done, 2000);
        if (r.done && r.err == 0 && strcmp(r.text, "OK") == 0)
            ok_at = dlock__now_ms();
        else
            run_until(&r.done, 50); /* r.done stays: just a pause */
    }
    assert_true(ok_at > 0);
    print_message("async failover followed in %lld ms\n", (long long)(ok_at - t0));
    assert_true(ok_at - t0 < 15000);
    assert_int_equal(st.downs, 0);
    dlock__aconn_close(ac);
}

/* Both ways, by name: "<test> by argv" and "<test> by resp". */
#define BOTH_WAYS(f) {#f " by argv", f, NULL, NULL, &by_argv}, {#f " by resp", f, NULL, NULL, &by_resp}

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH_WAYS(test_keys_reach_all_three_masters),
        cmocka_unit_test(test_resp_without_a_slot_is_parsed_once_and_a_bad_slot_refused),
        cmocka_unit_test(test_crossslot_is_refused_and_the_callback_never_runs),
        BOTH_WAYS(test_moved_and_ask_are_followed),
        BOTH_WAYS(test_tryagain_is_retried_within_its_bound),
        cmocka_unit_test(test_script_load_on_every_master_and_wait_on_a_slot),
        BOTH_WAYS(test_a_written_command_on_a_killed_connection_is_not_resent),
        cmocka_unit_test(test_closing_inside_a_callback_runs_every_pending_callback),
        cmocka_unit_test(test_a_killed_master_is_replaced_and_the_router_follows),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
