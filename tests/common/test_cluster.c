/* test_cluster.c: the sync router on a real 3-master + 3-replica Redis
 * Cluster: keys reach the master of their slot on every node, MOVED after a
 * slot moves (map refreshed), ASK during a hand-driven migration (map kept),
 * TRYAGAIN retried within its bound, CROSSSLOT refused with nothing sent,
 * pipelines across nodes, SCRIPT LOAD on every master, a command sent to a
 * stopped node is not resent, and a killed master's replica is followed.
 * The failover test runs last: it leaves one master without a replica. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_fixture.h"
#include "common_err.h"
#include "redis_io.h"
#include "slot.h"
#include "util.h"

static test_cluster cl;
static int m[3];          /* the three masters' node indexes */
static char tag[3][16];   /* a hash tag served by each master */
static unsigned tslot[3]; /* its slot */

static int setup(void **state)
{
    (void)state;
    if (test_cluster_start(&cl, 3, 1) != 0 || test_cluster_three_tags(&cl, m, tag, tslot) != 0) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_cluster_stop(&cl);
    return 0;
}

static dlock__conn *open_router(int64_t command_timeout_ms)
{
    dlock__url u;
    char err[256] = "";
    assert_int_equal(dlock__url_parse(cl.url, &u, err, sizeof(err)), 0);
    dlock__conn_opts o = {.connect_timeout_ms = 500, .command_timeout_ms = command_timeout_ms};
    dlock__conn *c = NULL;
    int rc = dlock__conn_open(&u, &o, &c, err, sizeof(err));
    if (rc) print_message("open: %s\n", err);
    assert_int_equal(rc, 0);
    assert_true(dlock__conn_is_cluster(c));
    dlock__url_free(&u);
    return c;
}

/* Runs argv through c; returns the reply's text (static buffer) or NULL. */
static const char *run(dlock__conn *c, int argc, const char **argv, int *rc_out)
{
    static char out[512];
    dlock__reply *r = NULL;
    int rc = dlock__conn_cmd(c, argc, argv, NULL, &r);
    if (rc_out) *rc_out = rc;
    if (rc) return NULL;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER)
        snprintf(out, sizeof(out), "%lld", dlock__reply_int(r));
    else
        snprintf(out, sizeof(out), "%s", dlock__reply_str(r, NULL));
    dlock__reply_free(r);
    return out;
}

static void key(char *buf, size_t len, int k, const char *name)
{
    snprintf(buf, len, "{%s}%s%s", tag[k], test_prefix(), name);
}

/* The count of error replies of one kind (MOVED, ASK, TRYAGAIN) node i sent.
 * Server: Redis 7.0 and Valkey 8.0 (both passes), which keep errorstats
 * alike (docs/compatibility.md). */
static long errorstat(int i, const char *kind)
{
    char info[8192], want[64];
    const char *argv[2] = {"INFO", "errorstats"};
    if (test_cluster_cmd(&cl, i, info, sizeof(info), 2, argv) != 0) return -1;
    snprintf(want, sizeof(want), "errorstat_%s:count=", kind);
    const char *p = strstr(info, want);
    return p ? strtol(p + strlen(want), NULL, 10) : 0;
}

static void test_keys_route_to_the_master_of_their_slot_on_all_three(void **state)
{
    (void)state;
    dlock__conn *c = open_router(2000);
    for (int k = 0; k < 3; k++) {
        char kk[128], ks[16], got[64] = "";
        key(kk, sizeof(kk), k, "route");
        const char *set[3] = {"SET", kk, tag[k]};
        assert_string_equal(run(c, 3, set, NULL), "OK");
        /* the server agrees on the slot, and the key lives on that master */
        const char *slot[3] = {"CLUSTER", "KEYSLOT", kk};
        assert_int_equal(test_cluster_cmd(&cl, m[k], ks, sizeof(ks), 3, slot), 0);
        assert_int_equal(strtol(ks, NULL, 10), (long)dlock__key_slot(kk, strlen(kk)));
        assert_int_equal(test_cluster_master_of_slot(&cl, tslot[k]), m[k]);
        const char *get[2] = {"GET", kk};
        assert_int_equal(test_cluster_cmd(&cl, m[k], got, sizeof(got), 2, get), 0);
        assert_string_equal(got, tag[k]);
        assert_string_equal(run(c, 2, get, NULL), tag[k]);
    }
    dlock__conn_close(c);
}

static void test_keys_in_two_slots_are_refused_locally_with_nothing_sent(void **state)
{
    (void)state;
    dlock__conn *c = open_router(2000);
    char a[128], b[128];
    key(a, sizeof(a), 0, "xa");
    key(b, sizeof(b), 1, "xb");
    const char *mset[5] = {"MSET", a, "1", b, "1"};
    int rc = 0;
    assert_null(run(c, 5, mset, &rc));
    assert_int_equal(rc, DLOCK__ECROSSSLOT);
    assert_non_null(strstr(dlock__conn_errstr(c), "different cluster slots"));
    const char *eval[6] = {"EVAL", "redis.call('SET', KEYS[1], 1) redis.call('SET', KEYS[2], 1)", "2", a, b};
    assert_null(run(c, 5, eval, &rc));
    assert_int_equal(rc, DLOCK__ECROSSSLOT);
    /* nothing reached the owners: neither key exists */
    char n[16];
    const char *e1[2] = {"EXISTS", a}, *e2[2] = {"EXISTS", b};
    assert_int_equal(test_cluster_cmd(&cl, m[0], n, sizeof(n), 2, e1), 0);
    assert_string_equal(n, "0");
    assert_int_equal(test_cluster_cmd(&cl, m[1], n, sizeof(n), 2, e2), 0);
    assert_string_equal(n, "0");
    dlock__conn_close(c);
}

static void test_moved_after_a_slot_moves_is_followed_and_the_map_refreshed(void **state)
{
    (void)state;
    dlock__conn *c = open_router(2000);
    char kk[128];
    key(kk, sizeof(kk), 0, "moved");
    const char *set[3] = {"SET", kk, "v1"}, *get[2] = {"GET", kk};
    assert_string_equal(run(c, 3, set, NULL), "OK");
    assert_int_equal(test_cluster_move_slot(&cl, tslot[0], m[1]), 0);
    long moved0 = errorstat(m[0], "MOVED");
    assert_string_equal(run(c, 2, get, NULL), "v1"); /* MOVED, then served by the new owner */
    assert_int_equal(errorstat(m[0], "MOVED"), moved0 + 1);
    dlock__sleep_ms(150); /* past the refresh gap */
    for (int i = 0; i < 10; i++)
        assert_string_equal(run(c, 2, get, NULL), "v1");
    assert_int_equal(errorstat(m[0], "MOVED"), moved0 + 1); /* the map knows: no more MOVED */
    char got[16] = "";
    assert_int_equal(test_cluster_cmd(&cl, m[1], got, sizeof(got), 2, get), 0);
    assert_string_equal(got, "v1");
    /* back home, for the other tests */
    assert_int_equal(test_cluster_move_slot(&cl, tslot[0], m[0]), 0);
    assert_string_equal(run(c, 2, get, NULL), "v1");
    dlock__conn_close(c);
}

static void test_ask_during_a_migration_serves_the_moved_key_and_keeps_the_map(void **state)
{
    (void)state;
    dlock__conn *c = open_router(2000);
    char moved[128], stays[128];
    key(moved, sizeof(moved), 2, "ask-moved");
    key(stays, sizeof(stays), 2, "ask-stays");
    const char *s1[3] = {"SET", moved, "m"}, *s2[3] = {"SET", stays, "s"};
    assert_string_equal(run(c, 3, s1, NULL), "OK");
    assert_string_equal(run(c, 3, s2, NULL), "OK");
    int src = m[2], dst = m[0];
    assert_int_equal(test_cluster_begin_migration(&cl, tslot[2], src, dst), 0);
    assert_int_equal(test_cluster_migrate_key(&cl, src, dst, moved), 0);
    long ask0 = errorstat(src, "ASK"), moved_dst0 = errorstat(dst, "MOVED");
    const char *gm[2] = {"GET", moved}, *gs[2] = {"GET", stays};
    for (int i = 0; i < 3; i++) {
        assert_string_equal(run(c, 2, gm, NULL), "m"); /* ASK -> ASKING + GET on dst */
        assert_string_equal(run(c, 2, gs, NULL), "s"); /* still served by src */
    }
    /* every GET of the moved key met ASK (the map still says src), and dst
     * never had to send a MOVED back (nothing was sent to it unasked) */
    assert_int_equal(errorstat(src, "ASK"), ask0 + 3);
    assert_int_equal(errorstat(dst, "MOVED"), moved_dst0);
    assert_int_equal(test_cluster_end_migration(&cl, tslot[2], src, dst), 0);
    assert_int_equal(test_cluster_move_slot(&cl, tslot[2], src), 0);
    assert_string_equal(run(c, 2, gm, NULL), "m");
    dlock__conn_close(c);
}

typedef struct finisher {
    unsigned slot;
    int from, to;
    int64_t after_ms;
} finisher;

static void *finish_migration(void *arg)
{
    finisher *f = arg;
    dlock__sleep_ms(f->after_ms);
    test_cluster_end_migration(&cl, f->slot, f->from, f->to);
    return NULL;
}

static void test_tryagain_for_a_multi_key_command_is_retried_within_its_bound(void **state)
{
    (void)state;
    dlock__conn *c = open_router(2000);
    char a[128], b[128];
    key(a, sizeof(a), 1, "try-a");
    key(b, sizeof(b), 1, "try-b");
    const char *mset[5] = {"MSET", a, "A", b, "B"}, *mget[3] = {"MGET", a, b};
    assert_string_equal(run(c, 5, mset, NULL), "OK");
    int src = m[1], dst = m[2];
    assert_int_equal(test_cluster_begin_migration(&cl, tslot[1], src, dst), 0);
    assert_int_equal(test_cluster_migrate_key(&cl, src, dst, a), 0);
    /* half the keys moved: TRYAGAIN until the bound (8 retries, 455 ms) */
    long t0c = errorstat(src, "TRYAGAIN");
    int64_t t0 = dlock__now_ms();
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(c, 3, mget, NULL, &r), 0);
    int64_t took = dlock__now_ms() - t0;
    assert_true(dlock__reply_is_error(r, "TRYAGAIN"));
    dlock__reply_free(r);
    assert_int_equal(errorstat(src, "TRYAGAIN"), t0c + 9);
    assert_true(took >= 400 && took < 2000);
    /* the migration ends while the client retries: the command succeeds */
    pthread_t th;
    finisher f = {.slot = tslot[1], .from = src, .to = dst, .after_ms = 100};
    assert_int_equal(pthread_create(&th, NULL, finish_migration, &f), 0);
    dlock__sleep_ms(30);
    r = NULL;
    assert_int_equal(dlock__conn_cmd(c, 3, mget, NULL, &r), 0);
    pthread_join(th, NULL);
    assert_int_equal(dlock__reply_kind(r), DLOCK__R_ARRAY);
    assert_string_equal(dlock__reply_str(dlock__reply_at(r, 0), NULL), "A");
    assert_string_equal(dlock__reply_str(dlock__reply_at(r, 1), NULL), "B");
    dlock__reply_free(r);
    assert_int_equal(test_cluster_move_slot(&cl, tslot[1], src), 0);
    dlock__conn_close(c);
}

static void test_a_pipeline_spanning_nodes_keeps_its_order(void **state)
{
    (void)state;
    dlock__conn *c = open_router(2000);
    char k[3][128], v[3][8];
    const char *sets[3][3], *gets[3][2];
    const char *multi[1] = {"MULTI"}, *exec[1] = {"EXEC"}, *incr[2], *wait[3] = {"WAIT", "1", "1000"};
    const char *const *argvs[13];
    int argcs[13], n = 0;
    for (int i = 0; i < 3; i++) {
        key(k[i], sizeof(k[i]), i, "pipe");
        snprintf(v[i], sizeof(v[i]), "v%d", i);
        sets[i][0] = "SET", sets[i][1] = k[i], sets[i][2] = v[i];
        gets[i][0] = "GET", gets[i][1] = k[i];
    }
    for (int i = 0; i < 3; i++)
        argvs[n] = sets[i], argcs[n++] = 3;
    for (int i = 2; i >= 0; i--)
        argvs[n] = gets[i], argcs[n++] = 2;
    incr[0] = "INCR", incr[1] = k[1];
    argvs[n] = multi, argcs[n++] = 1; /* a transaction on node 1 */
    argvs[n] = incr, argcs[n++] = 2;
    argvs[n] = exec, argcs[n++] = 1;
    argvs[n] = wait, argcs[n++] = 3; /* WAIT on the transaction's node */
    dlock__reply *rs[13] = {0};
    assert_int_equal(dlock__conn_pipeline(c, (size_t)n, argcs, argvs, NULL, rs), 0);
    for (int i = 0; i < 3; i++)
        assert_string_equal(dlock__reply_str(rs[i], NULL), "OK");
    for (int i = 0; i < 3; i++)
        assert_string_equal(dlock__reply_str(rs[3 + i], NULL), v[2 - i]);
    assert_string_equal(dlock__reply_str(rs[6], NULL), "OK");
    assert_string_equal(dlock__reply_str(rs[7], NULL), "QUEUED");
    assert_int_equal(dlock__reply_kind(rs[8]), DLOCK__R_ARRAY);
    assert_true(dlock__reply_is_error(dlock__reply_at(rs[8], 0), "ERR")); /* INCR of "v1" */
    assert_int_equal(dlock__reply_int(rs[9]), 1);                         /* m[1]'s replica acknowledged */
    for (int i = 0; i < n; i++)
        dlock__reply_free(rs[i]);
    dlock__conn_close(c);
}

static void test_script_load_reaches_every_master_then_evalsha_works_on_each(void **state)
{
    (void)state;
    dlock__conn *c = open_router(2000);
    const char *load[3] = {"SCRIPT", "LOAD", "return KEYS[1] .. ARGV[1]"};
    char sha[64];
    snprintf(sha, sizeof(sha), "%s", run(c, 3, load, NULL));
    assert_int_equal(strlen(sha), 40);
    for (int k = 0; k < 3; k++) {
        char got[160] = "";
        /* each master has it cached: EVALSHA straight on that node works */
        char kk[128];
        key(kk, sizeof(kk), k, "sha");
        const char *evalsha[5] = {"EVALSHA", sha, "1", kk, "!"};
        char want[160];
        snprintf(want, sizeof(want), "%s!", kk);
        assert_int_equal(test_cluster_cmd(&cl, m[k], got, sizeof(got), 5, evalsha), 0);
        assert_string_equal(got, want);
        assert_string_equal(run(c, 5, evalsha, NULL), want);
    }
    dlock__conn_close(c);
}

static void test_wait_and_info_go_to_the_node_of_the_last_write(void **state)
{
    (void)state;
    dlock__conn *c = open_router(2000);
    for (int k = 0; k < 3; k++) {
        char kk[128], want[32];
        key(kk, sizeof(kk), k, "wait");
        const char *set[3] = {"SET", kk, "x"}, *wait[3] = {"WAIT", "1", "1000"},
                   *info[2] = {"INFO", "server"};
        assert_string_equal(run(c, 3, set, NULL), "OK");
        assert_string_equal(run(c, 3, wait, NULL), "1");
        snprintf(want, sizeof(want), "tcp_port:%d", cl.node[m[k]].port);
        assert_non_null(strstr(run(c, 2, info, NULL), want));
    }
    dlock__conn_close(c);
}

static void test_a_command_sent_to_a_stopped_node_is_not_resent(void **state)
{
    (void)state;
    dlock__conn *c = open_router(200);
    char kk[128], got[16] = "";
    key(kk, sizeof(kk), 0, "once");
    const char *incr[2] = {"INCR", kk}, *get[2] = {"GET", kk};
    const char *del[2] = {"DEL", kk};
    run(c, 2, del, NULL);
    test_cluster_pause(&cl, m[0], true);
    int rc = 0;
    assert_null(run(c, 2, incr, &rc));
    test_cluster_pause(&cl, m[0], false);
    assert_int_equal(rc, DLOCK__EUNKNOWN);
    dlock__sleep_ms(100);
    assert_int_equal(test_cluster_cmd(&cl, m[0], got, sizeof(got), 2, get), 0);
    assert_string_equal(got, "1");                  /* ran once: the bytes sent before the stop */
    assert_string_equal(run(c, 2, get, NULL), "1"); /* and the connection recovers */
    dlock__conn_close(c);
}

static void test_master_of_key_names_the_node_and_keeps_credentials(void **state)
{
    (void)state;
    dlock__conn *c = open_router(2000);
    for (int k = 0; k < 3; k++) {
        char kk[128];
        key(kk, sizeof(kk), k, "sub");
        dlock__url u;
        assert_int_equal(dlock__conn_master_of_key(c, kk, strlen(kk), &u), 0);
        assert_int_equal(u.kind, DLOCK__URL_TCP);
        assert_int_equal(u.port, cl.node[m[k]].port);
        dlock__url_free(&u);
    }
    unsigned slots[8];
    assert_int_equal(dlock__conn_cluster_slots(c, slots, 8), 3);
    const char *sub[2] = {"SUBSCRIBE", "x"}, *sel[2] = {"SELECT", "1"};
    int rc = 0;
    assert_null(run(c, 2, sub, &rc));
    assert_int_equal(rc, DLOCK__EINVAL);
    assert_null(run(c, 2, sel, &rc));
    assert_int_equal(rc, DLOCK__EINVAL);
    dlock__conn_close(c);
}

static void test_a_killed_master_is_replaced_and_the_client_follows(void **state)
{
    (void)state;
    dlock__conn *c = open_router(500);
    char kk[128];
    key(kk, sizeof(kk), 2, "failover");
    const char *set[3] = {"SET", kk, "before"}, *set2[3] = {"SET", kk, "after"};
    assert_string_equal(run(c, 3, set, NULL), "OK");
    const char *wait[3] = {"WAIT", "1", "1000"};
    assert_string_equal(run(c, 3, wait, NULL), "1");
    test_cluster_kill(&cl, m[2]);
    int64_t t0 = dlock__now_ms(), ok_at = -1;
    while (dlock__now_ms() - t0 < 20000) {
        const char *r = run(c, 3, set2, NULL);
        if (r && strcmp(r, "OK") == 0) {
            ok_at = dlock__now_ms();
            break;
        }
        dlock__sleep_ms(50);
    }
    assert_true(ok_at > 0);
    print_message("failover followed in %lld ms\n", (long long)(ok_at - t0));
    assert_true(ok_at - t0 < 15000);
    int promoted = test_cluster_wait_failover(&cl, m[2], 10000);
    assert_true(promoted >= 0);
    char got[16] = "";
    const char *get[2] = {"GET", kk};
    assert_int_equal(test_cluster_cmd(&cl, promoted, got, sizeof(got), 2, get), 0);
    assert_string_equal(got, "after");
    dlock__conn_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_route_to_the_master_of_their_slot_on_all_three),
        cmocka_unit_test(test_keys_in_two_slots_are_refused_locally_with_nothing_sent),
        cmocka_unit_test(test_moved_after_a_slot_moves_is_followed_and_the_map_refreshed),
        cmocka_unit_test(test_ask_during_a_migration_serves_the_moved_key_and_keeps_the_map),
        cmocka_unit_test(test_tryagain_for_a_multi_key_command_is_retried_within_its_bound),
        cmocka_unit_test(test_a_pipeline_spanning_nodes_keeps_its_order),
        cmocka_unit_test(test_script_load_reaches_every_master_then_evalsha_works_on_each),
        cmocka_unit_test(test_wait_and_info_go_to_the_node_of_the_last_write),
        cmocka_unit_test(test_a_command_sent_to_a_stopped_node_is_not_resent),
        cmocka_unit_test(test_master_of_key_names_the_node_and_keeps_credentials),
        cmocka_unit_test(test_a_killed_master_is_replaced_and_the_client_follows),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
