/* test_cluster_slots.c: on a real Cluster every object of the lock family
 * works under names no hash tag can hold, the server's CLUSTER KEYSLOT
 * agrees with our CRC16 for each key and its companions, and waiters are
 * woken through sharded pub/sub when their channel is in the lock's slot.
 * Two groups: a one-node cluster owning all 16384 slots, reached with a
 * plain redis:// URL (it enforces CROSSSLOT on every script's KEYS), and
 * 3 masters (tests/support/cluster_fixture.h) through a redis-cluster://
 * client, where a script touching a key or shard channel of a slot its
 * node does not serve is refused, so every key a script uses must be in
 * KEYS' slot. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client_internal.h"
#include "cluster_fixture.h"
#include "dlock/fairlock.h"
#include "dlock/latch.h"
#include "dlock/lock.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"
#include "servers.h"
#include "redis_io.h"
#include "slot.h"
#include "util.h"

static test_server g_node;     /* the one node, or the first of the 3 masters */
static test_cluster g_multi;   /* the 3-master group */
static bool g_is_multi;
static dlock_client *g_cl;

static const char *const k_names[] = {"a}b", "}", "x{}y", "{}{x}", "}{", "a{b", "{a}b}", "plain", "{t}x"};
#define N_NAMES (sizeof(k_names) / sizeof(k_names[0]))

static int make_client(void)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = g_node.url;
    o.key_prefix = test_prefix();
    int rc = dlock_client_create(&o, &g_cl);
    if (rc) fprintf(stderr, "dlock_client_create(%s): %s\n", g_node.url, dlock_strerror(rc));
    return rc ? -1 : 0;
}

static int setup(void **state)
{
    (void)state;
    static const char *const conf[] = {"cluster-enabled yes", "cluster-config-file nodes.conf", NULL};
    if (test_redis_start(&g_node, conf) != 0) return -1;
    const char *add[] = {"CLUSTER", "ADDSLOTSRANGE", "0", "16383"};
    if (test_redis_cmd(&g_node, NULL, 0, 4, add) != 0) return -1;
    char info[2048] = "";
    const char *ci[] = {"CLUSTER", "INFO"};
    for (int i = 0; i < 100 && !strstr(info, "cluster_state:ok"); i++) {
        usleep(50000);
        test_redis_cmd(&g_node, info, sizeof(info), 2, ci);
    }
    if (!strstr(info, "cluster_state:ok")) return -1;
    return make_client();
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_destroy(g_cl);
    test_server_stop(&g_node);
    return 0;
}

static int setup_multi(void **state)
{
    (void)state;
    if (test_cluster_start(&g_multi, 3, 0) != 0) return -1;
    g_is_multi = true;
    memset(&g_node, 0, sizeof(g_node));
    g_node.port = g_multi.node[0].port; /* CLUSTER KEYSLOT answers the same on every node */
    if (strlen(g_multi.url) >= sizeof(g_node.url)) return -1;
    memcpy(g_node.url, g_multi.url, strlen(g_multi.url) + 1);
    return make_client();
}

static int teardown_multi(void **state)
{
    (void)state;
    dlock_client_destroy(g_cl);
    test_cluster_stop(&g_multi);
    g_is_multi = false;
    return 0;
}

static unsigned server_slot(const char *key)
{
    char out[32] = "";
    const char *argv[] = {"CLUSTER", "KEYSLOT", key};
    assert_int_equal(test_redis_cmd(&g_node, out, sizeof(out), 3, argv), 0);
    return (unsigned)strtoul(out, NULL, 10);
}

static void test_server_keyslot_agrees_with_our_crc16(void **state)
{
    (void)state;
    static const char *const suffixes[] = {":fence", ":rw:w", ":sem:exp", ":fair:q"};
    for (size_t i = 0; i < N_NAMES; i++) {
        char key[256], comp[300];
        snprintf(key, sizeof(key), "%s%s", test_prefix(), k_names[i]);
        unsigned slot = server_slot(key);
        assert_int_equal(dlock__key_slot(key, strlen(key)), slot);
        for (size_t s = 0; s < sizeof(suffixes) / sizeof(suffixes[0]); s++) {
            assert_int_equal(dlock__companion_key(key, suffixes[s], comp, sizeof(comp)), 0);
            if (server_slot(comp) != slot) fail_msg("%s: companion %s is in another slot", key, comp);
        }
    }
}

static void test_simple_and_reentrant_locks_run_on_a_cluster_node(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_NAMES; i++)
        for (int kind = DLOCK_LOCK_SIMPLE; kind <= DLOCK_LOCK_REENTRANT; kind++) {
            dlock_lock_options lo;
            dlock_lock_options_init(&lo);
            lo.kind = (dlock_lock_kind)kind;
            dlock_lock *l = NULL;
            assert_int_equal(dlock_lock_new(g_cl, k_names[i], &lo, &l), 0);
            uint64_t fence = 0;
            int rc = dlock_lock_try_lock(l, 0, 5000, &fence);
            if (rc) fail_msg("lock %s (kind %d): %s", k_names[i], kind, dlock_strerror(rc));
            assert_true(fence > 0);
            dlock_lock_status st;
            assert_int_equal(dlock_lock_status_get(g_cl, k_names[i], &st), 0);
            assert_true(st.last_fence == fence);
            assert_int_equal(dlock_lock_unlock(l), 0);
            dlock_lock_free(l);
        }
}

static void test_family_objects_run_on_a_cluster_node(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_NAMES; i++) {
        const char *n = k_names[i];
        dlock_fairlock *fl = NULL;
        assert_int_equal(dlock_fairlock_new(g_cl, n, NULL, &fl), 0);
        int rc = dlock_fairlock_lock(fl, 0, 5000);
        if (rc) fail_msg("fair lock %s: %s", n, dlock_strerror(rc));
        assert_int_equal(dlock_fairlock_unlock(fl), 0);
        dlock_fairlock_free(fl);

        dlock_rwlock *rw = NULL;
        assert_int_equal(dlock_rwlock_new(g_cl, n, NULL, &rw), 0);
        rc = dlock_rwlock_write_lock(rw, 0);
        if (rc) fail_msg("rwlock %s: %s", n, dlock_strerror(rc));
        assert_int_equal(dlock_rwlock_write_unlock(rw), 0);
        assert_int_equal(dlock_rwlock_read_lock(rw, 0), 0);
        assert_int_equal(dlock_rwlock_read_unlock(rw), 0);
        dlock_rwlock_free(rw);

        dlock_semaphore *sem = NULL;
        assert_int_equal(dlock_semaphore_new(g_cl, n, NULL, &sem), 0);
        rc = dlock_semaphore_acquire(sem, 1, 0);
        if (rc) fail_msg("semaphore %s: %s", n, dlock_strerror(rc));
        assert_int_equal(dlock_semaphore_release(sem, 1), 0);
        dlock_semaphore_free(sem);

        dlock_latch *la = NULL;
        assert_int_equal(dlock_latch_new(g_cl, n, &la), 0);
        bool set = false;
        rc = dlock_latch_try_set_count(la, 1, 5000, &set);
        if (rc) fail_msg("latch %s: %s", n, dlock_strerror(rc));
        assert_int_equal(dlock_latch_count_down(la, NULL), 0);
        assert_int_equal(dlock_latch_await(la, 0), 0);
        dlock_latch_free(la);
    }
}

/* ---- waiting through sharded pub/sub ------------------------------------ */

typedef struct waiter_run {
    const char *name;
    dlock_lock_kind kind;
    int rc;
    int64_t acquired_ms;
} waiter_run;

static void *wait_for_lock(void *arg)
{
    waiter_run *w = arg;
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = g_node.url;
    o.key_prefix = test_prefix();
    dlock_client *c = NULL;
    w->rc = dlock_client_create(&o, &c);
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = w->kind;
    dlock_lock *l = NULL;
    if (w->rc == 0) w->rc = dlock_lock_new(c, w->name, &lo, &l);
    if (w->rc == 0) w->rc = dlock_lock_try_lock(l, 20000, 5000, NULL);
    w->acquired_ms = dlock__now_ms();
    if (w->rc == 0) dlock_lock_unlock(l);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    return NULL;
}

/* Subscribers of channel on the node: PUBSUB SHARDNUMSUB or NUMSUB. */
static long subscribers(const char *channel, bool sharded)
{
    const char *argv[3] = {"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB", channel};
    int port = g_node.port;
    if (g_is_multi) { /* the master of the channel's slot (a plain subscriber is there too) */
        int i = test_cluster_master_of_slot(&g_multi, dlock__key_slot(channel, strlen(channel)));
        port = i >= 0 ? g_multi.node[i].port : port;
    }
    dlock__url u = {.kind = DLOCK__URL_TCP, .host = "127.0.0.1", .port = port};
    dlock__conn_opts co = {.connect_timeout_ms = 1000, .command_timeout_ms = 2000};
    dlock__conn *conn = NULL;
    dlock__reply *r = NULL;
    long n = -1;
    if (dlock__conn_open(&u, &co, &conn, NULL, 0) == 0 && dlock__conn_cmd(conn, 3, argv, NULL, &r) == 0 &&
        dlock__reply_count(r) == 2)
        n = (long)dlock__reply_int(dlock__reply_at(r, 1));
    dlock__reply_free(r);
    dlock__conn_close(conn);
    return n;
}

/* A waiter on a Cluster node listens on its lock's channel with SSUBSCRIBE
 * when the channel is in the lock's slot ("plain", "{t}x") and with
 * SUBSCRIBE otherwise ("a}b": Redisson's channel "…{…a}b}" has the tag
 * "…a"); either way one release wakes it at once, long before its
 * recheck interval (the reentrant one grown past 1.5 s after 2 s of waiting) would. */
static void test_waiters_are_woken_through_sharded_pubsub(void **state)
{
    (void)state;
    static const struct { const char *name; bool sharded; } cases[] = {
        {"wake-plain", true}, {"{wt}x", true}, {"wake}b", false}};
    enum { N = 6 }; /* every case with both kinds, waiting at once (one 2 s wait in all) */
    dlock_lock *l[N];
    waiter_run w[N];
    pthread_t th[N];
    char name[N][64];
    for (int n = 0; n < N; n++) {
        int i = n / 2, kind = DLOCK_LOCK_SIMPLE + n % 2;
        /* one name per kind ("-r" keeps each case's hash-tag shape) */
        snprintf(name[n], sizeof(name[n]), "%s%s", cases[i].name, kind == DLOCK_LOCK_SIMPLE ? "" : "-r");
        dlock_lock_options lo;
        dlock_lock_options_init(&lo);
        lo.kind = (dlock_lock_kind)kind;
        assert_int_equal(dlock_lock_new(g_cl, name[n], &lo, &l[n]), 0);
        assert_int_equal(dlock_lock_try_lock(l[n], 0, 30000, NULL), 0);
        char key[512], chan[600];
        snprintf(key, sizeof(key), "%s%s", test_prefix(), name[n]);
        const char *pfx = kind == DLOCK_LOCK_SIMPLE ? "dlock_lock__channel:" : "redisson_lock__channel:";
        snprintf(chan, sizeof(chan), strchr(key, '{') ? "%s%s" : "%s{%s}", pfx, key);
        w[n] = (waiter_run){.name = name[n], .kind = (dlock_lock_kind)kind, .rc = -1};
        assert_int_equal(pthread_create(&th[n], NULL, wait_for_lock, &w[n]), 0);
        int64_t t0 = dlock__now_ms();
        while (subscribers(chan, cases[i].sharded) < 1 && dlock__now_ms() - t0 < 5000) usleep(20000);
        if (subscribers(chan, cases[i].sharded) < 1)
            fail_msg("%s: no %s subscriber on %s", name[n], cases[i].sharded ? "sharded" : "plain", chan);
        assert_int_equal(subscribers(chan, !cases[i].sharded), 0);
    }
    usleep(2000 * 1000);
    for (int n = 0; n < N; n++) {
        int64_t released = dlock__now_ms();
        assert_int_equal(dlock_lock_unlock(l[n]), 0);
        pthread_join(th[n], NULL);
        assert_int_equal(w[n].rc, 0);
        if (w[n].acquired_ms - released > 700)
            fail_msg("%s (kind %d): woken %lld ms after the release", w[n].name, (int)w[n].kind,
                     (long long)(w[n].acquired_ms - released));
        dlock_lock_free(l[n]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_keyslot_agrees_with_our_crc16),
        cmocka_unit_test(test_simple_and_reentrant_locks_run_on_a_cluster_node),
        cmocka_unit_test(test_family_objects_run_on_a_cluster_node),
        cmocka_unit_test(test_waiters_are_woken_through_sharded_pubsub),
    };
    int failed = cmocka_run_group_tests_name("one node, redis:// URL", tests, setup, teardown);
    failed += cmocka_run_group_tests_name("3 masters, redis-cluster:// URL", tests, setup_multi, teardown_multi);
    return failed;
}
