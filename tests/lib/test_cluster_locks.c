/* test_cluster_locks.c: locks on a real 3-master + 3-replica Cluster
 * (tests/support/cluster_fixture.h) through a redis-cluster:// client,
 * where the cluster moves under them: a held lock whose slot migrates
 * (MOVED) is still renewed and released on its new master; a waiter
 * subscribed (SSUBSCRIBE) on a slot that moves, or whose master is killed
 * -9 and replaced by its replica, is woken by the next release within a
 * bound; wait_replicas = 1 counts the replica of the master that took the
 * write, not another node's. */
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

#include "cluster_fixture.h"
#include "dlock/lock.h"
#include "redis_io.h"
#include "servers.h"
#include "slot.h"
#include "util.h"

static test_cluster g_cl;

static int setup(void **state)
{
    (void)state;
    test_prefix();
    return test_cluster_start(&g_cl, 3, 1);
}

static int teardown(void **state)
{
    (void)state;
    test_cluster_stop(&g_cl);
    return 0;
}

static dlock_client *client(int wait_replicas, int64_t watchdog_ms)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = g_cl.url;
    o.key_prefix = test_prefix();
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 1000;
    o.retry_attempts = 10;
    o.retry_delay_ms = 50;
    o.watchdog_timeout_ms = watchdog_ms;
    o.wait_replicas = wait_replicas;
    o.wait_replicas_timeout_ms = 300;
    dlock_client *c = NULL;
    int rc = dlock_client_create(&o, &c);
    if (rc) fail_msg("dlock_client_create(%s): %s", g_cl.url, dlock_strerror(rc));
    return c;
}

static dlock_lock *lock_on(dlock_client *c, const char *name, dlock_lock_kind kind)
{
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = kind;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(c, name, &lo, &l), 0);
    return l;
}

/* A lock name "{tag}suffix" whose slot master i serves; *slot_out its slot. */
static void name_on(int i, const char *suffix, char *out, size_t len, unsigned *slot_out)
{
    char tag[32];
    int slot = test_cluster_tag_on(&g_cl, i, tag, sizeof(tag));
    assert_true(slot >= 0);
    snprintf(out, len, "{%s}%s", tag, suffix);
    char key[300];
    snprintf(key, sizeof(key), "%s%s", test_prefix(), out);
    /* the prefix comes first, but the tag is the key's first {...} */
    assert_int_equal(dlock__key_slot(key, strlen(key)), (unsigned)slot);
    *slot_out = (unsigned)slot;
}

static long long node_int(int i, int argc, const char **argv)
{
    char out[64] = "";
    if (test_cluster_cmd(&g_cl, i, out, sizeof(out), argc, argv) != 0) return -100;
    return strtoll(out, NULL, 10);
}

/* Sharded subscribers of channel on node i (PUBSUB SHARDNUMSUB). */
static long shard_subscribers(int i, const char *channel)
{
    const char *argv[3] = {"PUBSUB", "SHARDNUMSUB", channel};
    dlock__url u = {.kind = DLOCK__URL_TCP, .host = "127.0.0.1", .port = g_cl.node[i].port};
    dlock__conn_opts co = {.connect_timeout_ms = 500, .command_timeout_ms = 1000};
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

static bool wait_shard_subscriber(int i, const char *channel, int64_t budget_ms)
{
    int64_t t0 = dlock__now_ms();
    while (dlock__now_ms() - t0 < budget_ms) {
        if (shard_subscribers(i, channel) >= 1) return true;
        dlock__sleep_ms(20);
    }
    return false;
}

static void redisson_channel(const char *name, char *out, size_t len)
{
    snprintf(out, len, "redisson_lock__channel:%s%s", test_prefix(), name); /* the key has a '{' */
}

/* ---- a held lock whose slot moves ------------------------------------- */

static void test_held_lock_is_renewed_and_released_after_its_slot_moves(void **state)
{
    (void)state;
    dlock_client *c = client(0, 600);
    for (int kind = DLOCK_LOCK_SIMPLE; kind <= DLOCK_LOCK_REENTRANT; kind++) {
        char name[64];
        unsigned slot;
        name_on(0, kind == DLOCK_LOCK_SIMPLE ? "moved-s" : "moved-r", name, sizeof(name), &slot);
        dlock_lock *l = lock_on(c, name, (dlock_lock_kind)kind);
        uint64_t fence = 0;
        assert_int_equal(dlock_lock_try_lock(l, 0, 0, &fence), 0); /* watchdog: renewed every 200 ms */
        int from = test_cluster_master_of_slot(&g_cl, slot);
        int to = test_cluster_other_master(&g_cl, from);
        assert_int_equal(test_cluster_move_slot(&g_cl, slot, to), 0);
        dlock__sleep_ms(1500); /* 2.5 leases: only renewals on the new master keep it */
        assert_true(dlock_lock_is_held(l));
        char key[300];
        snprintf(key, sizeof(key), "%s%s", test_prefix(), name);
        const char *pttl[2] = {"PTTL", key};
        long long ttl = node_int(to, 2, pttl);
        if (ttl <= 0) fail_msg("%s: PTTL on the new master is %lld", name, ttl);
        dlock_lock_status st;
        assert_int_equal(dlock_lock_status_get(c, name, &st), 0);
        assert_true(st.locked && st.last_fence == fence); /* the fence key moved with it */
        assert_int_equal(dlock_lock_unlock(l), 0);
        const char *ex[2] = {"EXISTS", key};
        assert_int_equal(node_int(to, 2, ex), 0);
        dlock_lock_free(l);
    }
    dlock_client_destroy(c);
}

/* ---- waiters across a slot move and a failover ------------------------ */

typedef struct waiter {
    const char *name;
    int rc;
    int64_t acquired_ms;
} waiter;

static void *wait_for(void *arg)
{
    waiter *w = arg;
    dlock_client *c = client(0, 5000);
    dlock_lock *l = lock_on(c, w->name, DLOCK_LOCK_REENTRANT);
    w->rc = dlock_lock_try_lock(l, 30000, 5000, NULL);
    w->acquired_ms = dlock__now_ms();
    if (w->rc == 0) dlock_lock_unlock(l);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    return NULL;
}

/* The reentrant recheck interval has grown past 1.6 s after 2 s of
 * waiting, so a wake within 700 ms of the release is the message's. */
#define WAKE_BOUND_MS 700

static void test_waiter_follows_its_slot_to_another_master(void **state)
{
    (void)state;
    dlock_client *c = client(0, 5000);
    char name[64], chan[400];
    unsigned slot;
    name_on(1, "wake-move", name, sizeof(name), &slot);
    redisson_channel(name, chan, sizeof(chan));
    dlock_lock *l = lock_on(c, name, DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(l, 0, 30000, NULL), 0);
    waiter w = {.name = name, .rc = -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_for, &w), 0);
    int from = test_cluster_master_of_slot(&g_cl, slot);
    if (!wait_shard_subscriber(from, chan, 5000)) fail_msg("no sharded subscriber of %s on node %d", chan, from);
    int to = test_cluster_other_master(&g_cl, from);
    assert_int_equal(test_cluster_move_slot(&g_cl, slot, to), 0);
    /* the old master drops the subscription (sunsubscribe); it is made again on the new one */
    if (!wait_shard_subscriber(to, chan, 5000)) fail_msg("waiter did not resubscribe %s on node %d", chan, to);
    dlock__sleep_ms(2000);
    int64_t released = dlock__now_ms();
    assert_int_equal(dlock_lock_unlock(l), 0);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, 0);
    if (w.acquired_ms - released > WAKE_BOUND_MS)
        fail_msg("woken %lld ms after the release", (long long)(w.acquired_ms - released));
    dlock_lock_free(l);
    dlock_client_destroy(c);
}

static void test_waiter_follows_a_failover_of_its_master(void **state)
{
    (void)state;
    dlock_client *c = client(0, 5000);
    char name[64], chan[400];
    unsigned slot;
    name_on(2, "wake-failover", name, sizeof(name), &slot);
    redisson_channel(name, chan, sizeof(chan));
    dlock_lock *l = lock_on(c, name, DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(l, 0, 60000, NULL), 0);
    waiter w = {.name = name, .rc = -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_for, &w), 0);
    int dead = test_cluster_master_of_slot(&g_cl, slot);
    if (!wait_shard_subscriber(dead, chan, 5000)) fail_msg("no sharded subscriber of %s", chan);
    dlock__sleep_ms(200); /* the hold reached the replica (no WAIT here) */
    test_cluster_kill(&g_cl, dead);
    int64_t killed = dlock__now_ms();
    int promoted = test_cluster_wait_failover(&g_cl, dead, 15000);
    assert_true(promoted >= 0);
    int64_t failed_over = dlock__now_ms();
    if (!wait_shard_subscriber(promoted, chan, 5000))
        fail_msg("waiter did not resubscribe %s on the promoted replica", chan);
    int64_t resubscribed = dlock__now_ms();
    print_message("failover %lld ms, waiter resubscribed %lld ms after it\n", (long long)(failed_over - killed),
                  (long long)(resubscribed - failed_over));
    dlock__sleep_ms(2000);
    int64_t released = dlock__now_ms();
    int rc = dlock_lock_unlock(l); /* 0, or ELOST if the hold did not reach the replica */
    pthread_join(th, NULL);
    assert_int_equal(w.rc, 0);
    if (rc == 0 && w.acquired_ms - released > WAKE_BOUND_MS)
        fail_msg("woken %lld ms after the release", (long long)(w.acquired_ms - released));
    dlock_lock_free(l);
    dlock_client_destroy(c);
}

/* ---- WAIT goes to the master that took the write ------------------------ */

/* The replica of master i (by its INFO replication), -1. */
static int replica_of(int i)
{
    char info[2048] = "";
    const char *argv[2] = {"INFO", "replication"};
    if (test_cluster_cmd(&g_cl, i, info, sizeof(info), 2, argv) != 0) return -1;
    const char *p = strstr(info, "slave0:");
    const char *port = p ? strstr(p, "port=") : NULL;
    return port ? test_cluster_node_of_port(&g_cl, (int)strtol(port + 5, NULL, 10)) : -1;
}

static void test_wait_replicas_counts_the_replica_of_the_right_master(void **state)
{
    (void)state;
    test_cluster_roles(&g_cl);
    int masters[3], n = 0;
    for (int i = 0; i < g_cl.n && n < 3; i++)
        if (g_cl.master[i]) masters[n++] = i;
    assert_int_equal(n, 3);
    int rep = replica_of(masters[1]);
    assert_true(rep >= 0);
    dlock_client *c = client(1, 5000);
    test_cluster_pause(&g_cl, rep, true); /* master 1's replica stops acknowledging */
    for (int m = 0; m < 3; m++) {
        char name[64], tag[32];
        assert_true(test_cluster_tag_on(&g_cl, masters[m], tag, sizeof(tag)) >= 0);
        snprintf(name, sizeof(name), "{%s}acked", tag);
        dlock_lock *l = lock_on(c, name, DLOCK_LOCK_SIMPLE);
        int rc = dlock_lock_try_lock(l, 0, 10000, NULL);
        if (m == 1 && rc != DLOCK_ENOTREPL)
            fail_msg("lock on the master whose replica is paused: %s, not ENOTREPL", dlock_strerror(rc));
        if (m != 1 && rc != 0) fail_msg("lock on master %d: %s", masters[m], dlock_strerror(rc));
        if (rc == 0) assert_int_equal(dlock_lock_unlock(l), 0);
        dlock_lock_free(l);
    }
    test_cluster_pause(&g_cl, rep, false);
    dlock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_lock_is_renewed_and_released_after_its_slot_moves),
        cmocka_unit_test(test_waiter_follows_its_slot_to_another_master),
        cmocka_unit_test(test_wait_replicas_counts_the_replica_of_the_right_master),
        cmocka_unit_test(test_waiter_follows_a_failover_of_its_master),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
