/* test_async_cluster.c: the asynchronous client on a redis-cluster:// URL
 * (dlock/async.h), on libevent and on libuv, against a real 3-master
 * Cluster: locks, fencing and re-entry on several masters (the first
 * request waits for the map); a blocking and an asynchronous holder of one
 * name excluding and waking each other through sharded pub/sub; the
 * read-write lock, the semaphore and the rate limiter; MOVED followed after
 * a held lock's slot moved (renewal, unlock, a waiter subscribed again
 * where the slot now lives); ASK followed in a hand-driven migration; a
 * frozen master's requests ending EUNKNOWN at their deadline while another
 * master serves; freeing the client with requests in flight; no node
 * answering (ECONN at the deadline); a master killed and its replica
 * promoted (last: the Cluster has a replica per master for it). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "async_harness.h"
#include "cluster_fixture.h"
#include "dlock/async.h"
#include "dlock/lock.h"
#include "dlock/ratelimit.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"
#include "util.h"

static test_cluster cl;
static int m[3];
static char tag[3][16];
static unsigned tslot[3];

static int surfaced; /* redirects that reached an object as an error reply */

static void on_log(dlock_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    if (strstr(msg, ": MOVED ") || strstr(msg, ": ASK ")) surfaced++;
    print_message("log: %s\n", msg);
}

static dlock_async_client *client_with(int64_t command_timeout_ms)
{
    dlock_client_options o;
    ah_client_options(&o, cl.url, command_timeout_ms);
    o.retry_delay_ms = 100;
    o.log_fn = on_log;
    o.log_level = DLOCK_LOG_WARN;
    return ah_client(&o);
}

/* "{tag of master k}what": a name whose keys live on master m[k]. */
static const char *name_on(char *buf, size_t len, int k, const char *what)
{
    snprintf(buf, len, "{%s}%s", tag[k], what);
    return buf;
}

static dlock_async_lock *lock_on(dlock_async_client *c, int k, const char *what, dlock_lock_kind kind)
{
    char name[64];
    dlock_async_lock_options o;
    dlock_async_lock_options_init(&o);
    o.kind = kind;
    dlock_async_lock *l = NULL;
    assert_int_equal(dlock_async_lock_new(c, name_on(name, sizeof(name), k, what), &o, &l), 0);
    return l;
}

static long info_field(int i, const char *section, const char *field)
{
    char info[16384] = "";
    const char *argv[2] = {"INFO", section};
    if (test_cluster_cmd(&cl, i, info, sizeof(info), 2, argv) != 0) return -1;
    const char *p = strstr(info, field);
    return p ? strtol(p + strlen(field), NULL, 10) : 0;
}

/* Sharded channels subscribed on node i. */
static long shard_channels(int i)
{
    return info_field(i, "stats", "pubsubshard_channels:");
}

/* The value of key K (the lock's) on node i, "" when absent there. */
static void get_on(int i, const char *key, char *out, size_t len)
{
    const char *argv[2] = {"GET", key};
    out[0] = '\0';
    if (test_cluster_cmd(&cl, i, out, len, 2, argv) != 0) out[0] = '\0';
}

/* ---- locks ---------------------------------------------------------------------------- */

static void test_locks_fence_and_reentry_on_several_masters(void **state)
{
    (void)state;
    dlock_async_client *c = client_with(2000);
    dlock_async_lock *a = lock_on(c, 0, "a", DLOCK_LOCK_SIMPLE), *b = lock_on(c, 1, "b", DLOCK_LOCK_SIMPLE);
    assert_int_equal(ah_acquire_now(a, 0, 5000), 0); /* made before the map was known: parked, then sent */
    assert_int_equal(ah_acquire_now(b, 0, 5000), 0);
    char got[128];
    get_on(m[0], dlock_async_lock_key(a), got, sizeof(got));
    assert_string_equal(got, dlock_async_lock_owner(a));
    get_on(m[1], dlock_async_lock_key(b), got, sizeof(got));
    assert_string_equal(got, dlock_async_lock_owner(b));
    uint64_t f1 = dlock_async_lock_fence(a);
    assert_true(f1 > 0);
    assert_int_equal(ah_unlock_now(a), 0);
    assert_int_equal(ah_acquire_now(a, 0, 5000), 0);
    assert_true(dlock_async_lock_fence(a) > f1);
    assert_int_equal(ah_unlock_now(a), 0);
    assert_int_equal(ah_unlock_now(b), 0);
    /* reentrant, on the third master */
    dlock_async_lock *r = lock_on(c, 2, "r", DLOCK_LOCK_REENTRANT);
    assert_int_equal(ah_acquire_now(r, 0, 0), 0);
    assert_int_equal(ah_acquire_now(r, 0, 0), 0);
    assert_int_equal(ah_unlock_now(r), 0);
    assert_true(dlock_async_lock_is_held(r)); /* one hold left */
    assert_int_equal(ah_unlock_now(r), 0);
    assert_false(dlock_async_lock_is_held(r));
    ah_rec x = {0};
    assert_int_equal(dlock_async_lock_unlock(r, ah_on_lock, &x), DLOCK_ENOTHELD);
    dlock_async_lock_free(a);
    dlock_async_lock_free(b);
    dlock_async_lock_free(r);
    dlock_async_client_free(c);
}

/* ---- blocking and asynchronous holders of one name ------------------------------------------ */

static void test_blocking_and_async_holders_exclude_and_wake_each_other(void **state)
{
    (void)state;
    char name[64];
    name_on(name, sizeof(name), 1, "mixed");
    dlock_client *bc = ah_blocking_client(cl.url);
    dlock_lock_options bo;
    dlock_lock_options_init(&bo);
    bo.kind = DLOCK_LOCK_REENTRANT;
    bo.owner_id = "blocking-holder";
    dlock_lock *bl = NULL;
    assert_int_equal(dlock_lock_new(bc, name, &bo, &bl), 0);
    assert_int_equal(dlock_lock_try_lock(bl, 0, 30000, NULL), 0);

    dlock_async_client *c = client_with(2000);
    dlock_async_lock *l = lock_on(c, 1, "mixed", DLOCK_LOCK_REENTRANT);
    long subs0 = shard_channels(m[1]);
    ah_rec r = {0};
    assert_int_equal(dlock_async_lock_acquire(l, 10000, 0, ah_on_lock, &r), 0);
    /* released after 2 s: a waiter that only polled would sleep on its
     * growing recheck interval (50 ms doubling to 5 s) well past that */
    ah_later u = {.bl = bl};
    ah_release_later(&u, 2000);
    ah_run_for(1000);
    assert_int_equal(shard_channels(m[1]), subs0 + 1); /* SSUBSCRIBEd on the channel's master */
    ah_run_until(&u.done, 3000);
    assert_int_equal(r.calls, 0); /* excluded while the blocking handle held it */
    ah_run_until(&r.calls, 3000);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rc, 0);
    assert_true(r.at_ms - u.at_ms < 500 + AH_SLACK_MS); /* woken by the SPUBLISH, not a recheck */
    assert_int_equal(dlock_lock_try_lock(bl, 0, 30000, NULL), DLOCK_EBUSY);
    assert_int_equal(ah_unlock_now(l), 0);
    assert_int_equal(dlock_lock_try_lock(bl, 0, 30000, NULL), 0); /* and the other way round */
    assert_int_equal(ah_acquire_now(l, 0, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_lock_unlock(bl), 0);
    ah_later_free(&u);
    dlock_async_lock_free(l);
    dlock_async_client_free(c);
    dlock_lock_free(bl);
    dlock_client_destroy(bc);
}

/* ---- the read-write lock, the semaphore, the rate limiter ------------------------------------ */

static void on_rl(dlock_async_ratelimit *rl, int rc, const dlock_ratelimit_result *res, void *ud)
{
    (void)rl;
    ah_on_lock(NULL, rc == 0 && !res->allowed ? DLOCK_EBUSY : rc, ud);
}

#define RUN(call)                                                                                            \
    do {                                                                                                     \
        ah_rec r_ = {0};                                                                                        \
        void *ud = &r_;                                                                                      \
        assert_int_equal((call), 0);                                                                         \
        ah_run_until(&r_.calls, 5000);                                                                       \
        assert_int_equal(r_.calls, 1);                                                                       \
        assert_int_equal(r_.rc, 0);                                                                          \
    } while (0)

static void test_rwlock_semaphore_and_rate_limiter_on_a_cluster(void **state)
{
    (void)state;
    dlock_async_client *c = client_with(2000);
    char n0[64], n1[64], n2[64];
    dlock_async_rwlock *rw = NULL;
    dlock_async_semaphore *sem = NULL;
    dlock_async_ratelimit *rl = NULL;
    assert_int_equal(dlock_async_rwlock_new(c, name_on(n0, sizeof(n0), 0, "rw"), NULL, &rw), 0);
    dlock_semaphore_options so;
    dlock_semaphore_options_init(&so);
    so.permits = 2;
    assert_int_equal(dlock_async_semaphore_new(c, name_on(n1, sizeof(n1), 1, "sem"), &so, &sem), 0);
    assert_int_equal(dlock_async_ratelimit_new(c, name_on(n2, sizeof(n2), 2, "rl"), NULL, &rl), 0);
    RUN(dlock_async_rwlock_write_lock(rw, 0, ah_on_rw, ud));
    RUN(dlock_async_rwlock_write_unlock(rw, ah_on_rw, ud));
    RUN(dlock_async_semaphore_acquire(sem, 2, 0, ah_on_sem, ud));
    assert_int_equal(dlock_async_semaphore_held(sem), 2);
    RUN(dlock_async_semaphore_release(sem, 2, ah_on_sem, ud));
    RUN(dlock_async_ratelimit_try_acquire(rl, "user", 1, on_rl, ud));
    dlock_async_rwlock_free(rw);
    dlock_async_semaphore_free(sem);
    dlock_async_ratelimit_free(rl);
    dlock_async_client_free(c);
}

/* ---- redirects ------------------------------------------------------------------------------- */

static void test_moved_is_followed_by_renewal_unlock_and_waiter(void **state)
{
    (void)state;
    int src = m[2], dst = m[0];
    dlock_async_client *c = client_with(2000), *c2 = client_with(2000);
    dlock_async_lock *h = lock_on(c, 2, "moves", DLOCK_LOCK_REENTRANT);
    dlock_async_lock *w = lock_on(c2, 2, "moves", DLOCK_LOCK_REENTRANT);
    assert_int_equal(ah_acquire_now(h, 0, 0), 0); /* watchdog: renewed every 300 ms */
    long subs_src = shard_channels(src), subs_dst = shard_channels(dst);
    ah_rec wr = {0};
    assert_int_equal(dlock_async_lock_acquire(w, 20000, 0, ah_on_lock, &wr), 0);
    int64_t t0 = dlock__now_ms();
    while (shard_channels(src) != subs_src + 1 && dlock__now_ms() - t0 < 3000) ah_run_for(50);
    assert_int_equal(shard_channels(src), subs_src + 1);

    long moved0 = info_field(src, "errorstats", "errorstat_MOVED:count=");
    surfaced = 0;
    assert_int_equal(test_cluster_move_slot(&cl, tslot[2], dst), 0);
    ah_run_for(3 * AH_WATCHDOG_MS); /* renewals meet MOVED and follow it */
    assert_true(info_field(src, "errorstats", "errorstat_MOVED:count=") > moved0);
    assert_int_equal(surfaced, 0); /* each was resent where MOVED said, none failed */
    assert_true(dlock_async_lock_is_held(h));
    assert_true(dlock_async_lock_validity_ms(h) > 0);
    assert_int_equal(wr.calls, 0);
    /* the server dropped the waiter's sharded subscription (sunsubscribe):
     * it subscribes again on the slot's new master */
    t0 = dlock__now_ms();
    while (shard_channels(dst) != subs_dst + 1 && dlock__now_ms() - t0 < 3000) ah_run_for(50);
    assert_int_equal(shard_channels(dst), subs_dst + 1);
    assert_int_equal(shard_channels(src), subs_src);
    ah_run_for(300);
    int64_t t_unlock = dlock__now_ms();
    assert_int_equal(ah_unlock_now(h), 0); /* on the new master */
    ah_run_until(&wr.calls, 3000);
    assert_int_equal(wr.calls, 1);
    assert_int_equal(wr.rc, 0);
    assert_true(wr.at_ms - t_unlock < 500 + AH_SLACK_MS); /* woken by the SPUBLISH on the new master */
    assert_int_equal(ah_unlock_now(w), 0);
    assert_int_equal(surfaced, 0);
    dlock_async_lock_free(h);
    dlock_async_lock_free(w);
    dlock_async_client_free(c);
    dlock_async_client_free(c2);
    assert_int_equal(test_cluster_move_slot(&cl, tslot[2], src), 0); /* as the other tests expect */
}

static void test_ask_is_followed_in_a_migration_window(void **state)
{
    (void)state;
    int src = m[1], dst = m[2];
    dlock_async_client *c = client_with(2000);
    dlock_async_lock *h = lock_on(c, 1, "asked", DLOCK_LOCK_SIMPLE);
    dlock_async_lock *o = lock_on(c, 1, "asked", DLOCK_LOCK_SIMPLE);
    assert_int_equal(ah_acquire_now(h, 0, 10000), 0);
    char fence_key[256];
    snprintf(fence_key, sizeof(fence_key), "%s:fence", dlock_async_lock_key(h));
    assert_int_equal(test_cluster_begin_migration(&cl, tslot[1], src, dst), 0);
    assert_int_equal(test_cluster_migrate_key(&cl, src, dst, dlock_async_lock_key(h)), 0);
    assert_int_equal(test_cluster_migrate_key(&cl, src, dst, fence_key), 0);
    long ask0 = info_field(src, "errorstats", "errorstat_ASK:count=");
    surfaced = 0;
    /* the keys are on the importing node: the source answers ASK, the
     * command goes there with ASKING and finds the hold */
    assert_int_equal(ah_acquire_now(o, 0, 10000), DLOCK_EBUSY);
    assert_true(info_field(src, "errorstats", "errorstat_ASK:count=") > ask0);
    assert_int_equal(ah_unlock_now(h), 0); /* asked too */
    /* (a new acquire now meets TRYAGAIN: its keys are split, the fence
     * key on the importing node, the lock key nowhere) */
    assert_int_equal(test_cluster_end_migration(&cl, tslot[1], src, dst), 0);
    assert_int_equal(ah_acquire_now(o, 0, 10000), 0); /* MOVED: on its new master */
    assert_int_equal(ah_unlock_now(o), 0);
    assert_int_equal(surfaced, 0);
    dlock_async_lock_free(h);
    dlock_async_lock_free(o);
    dlock_async_client_free(c);
    assert_int_equal(test_cluster_move_slot(&cl, tslot[1], src), 0);
}

/* ---- failures and lifetimes --------------------------------------------------------------------- */

static void set_node_timeout(const char *ms)
{
    const char *argv[4] = {"CONFIG", "SET", "cluster-node-timeout", ms};
    for (int i = 0; i < cl.n; i++) assert_int_equal(test_cluster_cmd(&cl, i, NULL, 0, 4, argv), 0);
}

static void test_a_frozen_master_ends_its_requests_at_their_deadline(void **state)
{
    (void)state;
    dlock_async_client *c = client_with(800);
    dlock_async_lock *a = lock_on(c, 0, "frozen", DLOCK_LOCK_SIMPLE);
    dlock_async_lock *b = lock_on(c, 1, "alive", DLOCK_LOCK_SIMPLE);
    assert_int_equal(ah_acquire_now(a, 0, 5000), 0);
    assert_int_equal(ah_acquire_now(b, 0, 0), 0); /* watchdog on the other master */
    assert_int_equal(ah_unlock_now(a), 0);
    set_node_timeout("20000"); /* no FAIL (and CLUSTERDOWN) while one is stopped */
    test_cluster_pause(&cl, m[0], true);
    ah_rec r = {0};
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_async_lock_acquire(a, 0, 5000, ah_on_lock, &r), 0);
    ah_run_until(&r.calls, 800 + 3000);
    int64_t took = dlock__now_ms() - t0;
    test_cluster_pause(&cl, m[0], false);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rc, DLOCK_EUNKNOWN); /* sent, no answer by the deadline */
    assert_true(took >= 700 && took < 800 + 2000);
    assert_true(dlock_async_lock_is_held(b)); /* renewed meanwhile on its master */
    assert_int_equal(ah_unlock_now(b), 0);
    assert_int_equal(ah_acquire_now(b, 0, 5000), 0);
    assert_int_equal(ah_unlock_now(b), 0);
    assert_int_equal(ah_acquire_now(a, 0, 5000), 0); /* the thawed master answers again */
    assert_int_equal(ah_unlock_now(a), 0);
    set_node_timeout("1000");
    dlock_async_lock_free(a);
    dlock_async_lock_free(b);
    dlock_async_client_free(c);
}

static void test_freeing_the_client_ends_requests_on_several_masters(void **state)
{
    (void)state;
    for (int round = 0; round < 2; round++) { /* 0: before the map is known; 1: once it is */
        dlock_async_client *c = client_with(2000);
        dlock_async_lock *l[3];
        ah_rec r[3] = {{0}};
        for (int k = 0; k < 3; k++) l[k] = lock_on(c, k, "freed", DLOCK_LOCK_SIMPLE);
        if (round == 1) {
            assert_int_equal(ah_acquire_now(l[0], 0, 5000), 0);
            assert_int_equal(ah_unlock_now(l[0]), 0);
        }
        for (int k = 0; k < 3; k++) assert_int_equal(dlock_async_lock_acquire(l[k], 5000, 5000, ah_on_lock, &r[k]), 0);
        dlock_async_client_free(c);
        for (int k = 0; k < 3; k++) {
            assert_int_equal(r[k].calls, 1);
            assert_int_equal(r[k].rc, DLOCK_ECLOSED);
        }
        ah_run_for(200);
        for (int k = 0; k < 3; k++) {
            assert_int_equal(r[k].calls, 1); /* exactly once */
            dlock_async_lock_free(l[k]);
        }
    }
}

/* Last: master m[0] is killed; its replica takes over. */
static void test_a_failover_is_followed(void **state)
{
    (void)state;
    dlock_async_client *c = client_with(1000), *c2 = client_with(1000);
    dlock_async_lock *h = lock_on(c, 0, "failover", DLOCK_LOCK_REENTRANT);
    dlock_async_lock *w = lock_on(c2, 0, "failover", DLOCK_LOCK_REENTRANT);
    assert_int_equal(ah_acquire_now(h, 0, 30000), 0); /* a fixed lease: the hold outlives the failover */
    ah_rec wr = {0};
    assert_int_equal(dlock_async_lock_acquire(w, 20000, 0, ah_on_lock, &wr), 0);
    ah_run_for(500); /* the hold reaches the replica meanwhile */
    test_cluster_kill(&cl, m[0]);
    int promoted = test_cluster_wait_failover(&cl, m[0], 15000); /* the loop stands still meanwhile */
    assert_true(promoted >= 0);
    long subs0 = shard_channels(promoted);
    ah_run_for(500); /* the connections to the dead master close; the map is asked again */
    if (wr.calls) { /* its try went out on the dead master's connection: unknown, as documented */
        assert_int_equal(wr.rc, DLOCK_EUNKNOWN);
        print_message("the waiter's try was in flight on the dead master: EUNKNOWN; waits again\n");
        wr = (ah_rec){0};
        assert_int_equal(dlock_async_lock_acquire(w, 20000, 0, ah_on_lock, &wr), 0);
    }
    int64_t t0 = dlock__now_ms(); /* the waiter subscribes again, on the promoted replica */
    while (shard_channels(promoted) != subs0 + 1 && dlock__now_ms() - t0 < 3000) ah_run_for(50);
    assert_int_equal(shard_channels(promoted), subs0 + 1);
    /* a new name on the dead master's slot: sent where the refreshed map
     * says */
    dlock_async_lock *n = lock_on(c, 0, "after-failover", DLOCK_LOCK_SIMPLE);
    assert_int_equal(ah_acquire_now(n, 0, 5000), 0);
    char got[128];
    get_on(promoted, dlock_async_lock_key(n), got, sizeof(got));
    assert_string_equal(got, dlock_async_lock_owner(n));
    assert_int_equal(ah_unlock_now(n), 0);
    /* the hold came across by replication; its release there wakes the
     * waiter through its new subscription */
    assert_int_equal(wr.calls, 0);
    int64_t t_unlock = dlock__now_ms();
    assert_int_equal(ah_unlock_now(h), 0);
    ah_run_until(&wr.calls, 3000);
    assert_int_equal(wr.calls, 1);
    assert_int_equal(wr.rc, 0);
    assert_true(wr.at_ms - t_unlock < 500 + AH_SLACK_MS); /* woken by the SPUBLISH, not a recheck */
    assert_int_equal(ah_unlock_now(w), 0);
    dlock_async_lock_free(n);
    dlock_async_lock_free(h);
    dlock_async_lock_free(w);
    dlock_async_client_free(c);
    dlock_async_client_free(c2);
}

static void test_no_node_answering_is_econn_at_the_deadline(void **state)
{
    (void)state;
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = "redis-cluster://127.0.0.1:1,127.0.0.1:2";
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 1000;
    dlock_async_client *c = NULL;
    assert_int_equal(dlock_async_client_new(&ah_loop, &o, &c), 0); /* nothing blocked on the seeds */
    dlock_async_lock *l = NULL;
    assert_int_equal(dlock_async_lock_new(c, "nobody", NULL, &l), 0);
    ah_rec r = {0};
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_async_lock_acquire(l, 0, 1000, ah_on_lock, &r), 0);
    assert_int_equal(r.calls, 0); /* never inside the call */
    ah_run_until(&r.calls, 3000);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rc, DLOCK_ECONN); /* parked for the map, never sent */
    assert_true(r.at_ms - t0 >= 900);
    dlock_async_lock_free(l);
    dlock_async_client_free(c);
}

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    if (test_cluster_start(&cl, 3, 1) != 0) return -1;
    return test_cluster_three_tags(&cl, m, tag, tslot);
}

static int group_teardown(void **state)
{
    (void)state;
    test_cluster_stop(&cl);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_node_answering_is_econn_at_the_deadline, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_locks_fence_and_reentry_on_several_masters, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_blocking_and_async_holders_exclude_and_wake_each_other, ah_setup,
                                        ah_teardown),
        cmocka_unit_test_setup_teardown(test_rwlock_semaphore_and_rate_limiter_on_a_cluster, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_moved_is_followed_by_renewal_unlock_and_waiter, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_ask_is_followed_in_a_migration_window, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_freeing_the_client_ends_requests_on_several_masters, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_a_frozen_master_ends_its_requests_at_their_deadline, ah_setup, ah_teardown),
        cmocka_unit_test_setup_teardown(test_a_failover_is_followed, ah_setup, ah_teardown),
    };
    return cmocka_run_group_tests_name(ah_name(), tests, group_setup, group_teardown);
}
