/* test_engine_acks.c: the acknowledgement plan (engine_acks.h) on a fake
 * port and clock: the plan from the server facts and replica-acks; the
 * replicas in sync follow the INFO replication probe every 250 ms; a WAIT
 * that came back short lowers the count at once, so the next batch sends
 * no WAIT (202 at once); a standalone server without replicas follows
 * CONFIG GET appendfsync; on a Cluster each master known short has its
 * own entry, probed on its own slot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/dlock.h"
#include "engine_acks.h"
#include "part_fake.h"
#include "slot.h"

static part_fake f;
static sk__server srv;
static sk__acks a;

static int slot_of(const char *key) { return (int)dlock__key_slot(key, strlen(key)); }

static void ignore(const dlock__reply *r, int err, void *priv);

/* A batch's WAIT for keys of key's slot asking for replicas, as its
 * sender makes it: 1 skipped (pending at once), 0 sent to the master
 * sk__acks_wait_slot names. */
static int batch_wait(const char *key, int replicas)
{
    int to = -2;
    if (sk__acks_wait_slot(&a, slot_of(key), replicas, &to)) return 1;
    return sk__wire_wait(&f.wire, 0, to, replicas, 100, ignore, NULL);
}

/* A server with `replicas` connected, in_sync of them in sync. */
static void start(int replica_acks, bool failover, int replicas, int in_sync)
{
    pf_init(&f);
    sk__server_init(&srv, &f.wire);
    srv.replicas = replicas;
    srv.in_sync = in_sync;
    srv.listed = replicas;
    sk__acks_init(&a, &f.wire, &srv, replica_acks, 100, failover);
    sk__acks_connected(&a);
}

static int plan(int *n)
{
    int64_t t = 0;
    int p = sk__acks_plan(&a, n, &t);
    assert_int_equal(t, 100);
    return p;
}

static void ignore(const dlock__reply *r, int err, void *priv)
{
    (void)r;
    (void)err;
    (void)priv;
}

static void reply_replication(int online, int lagging)
{
    char text[600], buf[800];
    size_t len = (size_t)snprintf(text, sizeof(text), "# Replication\r\nrole:master\r\n");
    for (int i = 0; i < online + lagging; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "slave%d:ip=127.0.0.1,port=%d,state=online,offset=9,lag=%d\r\n", i, 7001 + i,
                                i < online ? 0 : 9);
    pf_reply(&f, pf_bulk(buf, sizeof(buf), text));
}

static void test_the_plan_follows_the_server_facts(void **state)
{
    (void)state;
    int n;
    start(-1, false, 2, 2);
    assert_int_equal(plan(&n), SK__ACK_WAIT);
    assert_int_equal(n, 2); /* the default: every replica the master reports */
    assert_int_equal(pf_logged(&f, "2 replica(s) connected, 2 in sync: 201 after WAIT"), 1);
    start(1, false, 2, 2);
    assert_int_equal(plan(&n), SK__ACK_WAIT);
    assert_int_equal(n, 1);
    start(-1, true, 0, 0); /* behind Sentinel the master's disk is no acknowledgement */
    assert_int_equal(plan(&n), SK__ACK_WAIT);
    assert_int_equal(n, 1);
    start(-1, false, 0, 0);
    assert_int_equal(plan(&n), SK__ACK_NONE);
    srv.aof_yes = srv.fsync_always = true;
    assert_int_equal(plan(&n), SK__ACK_REPLY);
    srv.cluster = true; /* a failover would abandon the master's disk */
    assert_int_equal(plan(&n), SK__ACK_NONE);
}

static void test_replicas_in_sync_follow_the_info_replication_probe(void **state)
{
    (void)state;
    start(1, false, 1, 1);
    assert_int_equal(sk__acks_known(&a), 1);
    assert_int_equal(batch_wait("{c:1}", 1), 0);
    assert_string_equal(pf_cmd_at(&f, 0)->argv[0], "WAIT");
    pf_reply(&f, ":1\r\n");
    f.now_ms += 250;
    sk__acks_tick(&a);
    const pf_cmd *c = pf_cmd_at(&f, 1);
    assert_string_equal(c->argv[0], "INFO");
    assert_string_equal(c->argv[1], "replication");
    assert_int_equal(c->slot, -1);
    f.now_ms += 250;
    sk__acks_tick(&a); /* one probe at a time */
    assert_int_equal(f.sent, 2);
    reply_replication(0, 1); /* its replica lags: none in sync */
    assert_int_equal(sk__acks_known(&a), 0);
    assert_int_equal(pf_logged(&f, "0 of 1 replica(s) in sync (INFO replication)"), 1);
    assert_int_equal(batch_wait("{c:1}", 1), 1); /* no WAIT: 202 at once */
    assert_int_equal(f.sent, 2);
    assert_false(sk__acks_master_alone(&a, slot_of("{c:1}"))); /* it still lists a replica */
    sk__acks_tick(&a); /* 500 ms since the last probe was sent: the next goes now */
    assert_int_equal(f.sent, 3);
    reply_replication(0, 1);
    assert_int_equal(pf_logged(&f, "0 of 1 replica(s)"), 1); /* still short: not news */
    f.now_ms += 249;
    sk__acks_tick(&a);
    assert_int_equal(f.sent, 3); /* 250 ms after the last probe was sent, not sooner */
    f.now_ms += 1;
    sk__acks_tick(&a);
    assert_int_equal(f.sent, 4);
    reply_replication(1, 0);
    assert_int_equal(sk__acks_known(&a), 1);
    assert_int_equal(pf_logged(&f, "in sync again"), 1);
    assert_int_equal(batch_wait("{c:1}", 1), 0);
}

static void test_a_short_wait_lowers_the_count_at_once(void **state)
{
    (void)state;
    start(2, false, 2, 2);
    assert_int_equal(batch_wait("{c:1}", 2), 0);
    sk__acks_wait_answered(&a, -1, 2, 1); /* one replica acknowledged */
    assert_int_equal(sk__acks_known(&a), 1);
    assert_int_equal(pf_logged(&f, "1 of 2 replica(s) in sync (WAIT's answer)"), 1);
    assert_int_equal(batch_wait("{c:1}", 2), 1);
    assert_int_equal(batch_wait("{c:1}", 1), 0); /* asking for 1 still WAITs */
    sk__acks_wait_answered(&a, -1, 2, 2); /* a full answer raises it */
    assert_int_equal(sk__acks_known(&a), 2);
}

static void test_a_master_listing_no_replica_is_alone(void **state)
{
    (void)state;
    start(1, true, 0, 0);
    assert_true(sk__acks_master_alone(&a, slot_of("{c:1}")));
    srv.listed = -1; /* unknown: not alone */
    start(1, true, 0, 0);
    a.nodes[0].listed = -1;
    assert_false(sk__acks_master_alone(&a, slot_of("{c:1}")));
}

static void test_a_standalone_server_follows_appendfsync(void **state)
{
    (void)state;
    int n;
    start(-1, false, 0, 0);
    assert_int_equal(plan(&n), SK__ACK_NONE);
    f.now_ms += 250;
    sk__acks_tick(&a);
    const pf_cmd *c = pf_cmd_at(&f, 0);
    assert_string_equal(c->argv[0], "CONFIG");
    assert_string_equal(c->argv[2], "append*");
    pf_reply(&f, "*4\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n");
    assert_int_equal(plan(&n), SK__ACK_REPLY);
    assert_int_equal(pf_logged(&f, "persistence changed: appendfsync always"), 1);
    f.now_ms += 250;
    sk__acks_tick(&a);
    pf_reply(&f, "*4\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n");
    assert_int_equal(plan(&n), SK__ACK_NONE);
    assert_int_equal(pf_logged(&f, "persistence changed: no acknowledgement"), 1);
    /* refused (ACL): asked no more on this connection */
    f.now_ms += 250;
    sk__acks_tick(&a);
    pf_reply(&f, "-NOPERM no permissions\r\n");
    f.now_ms += 1000;
    sk__acks_tick(&a);
    assert_int_equal(f.sent, 3);
    sk__acks_reset(&a); /* a new connection asks again */
    f.now_ms += 250;
    sk__acks_tick(&a);
    assert_int_equal(f.sent, 4);
}

static void test_nothing_is_probed_while_muted(void **state)
{
    (void)state;
    start(1, false, 1, 1);
    f.muted = true;
    f.now_ms += 1000;
    sk__acks_tick(&a);
    assert_int_equal(f.sent, 0);
}

static void test_each_cluster_master_known_short_has_its_entry(void **state)
{
    (void)state;
    start(1, true, 1, 1);
    srv.cluster = true;
    const char *k1 = "{c:1}", *k2 = "{c:2}"; /* on the two masters of the fake */
    int s1 = (int)dlock__key_slot(k1, strlen(k1)), s2 = (int)dlock__key_slot(k2, strlen(k2));
    assert_true((s1 < 8192) != (s2 < 8192));
    assert_int_equal(sk__acks_known(&a), -1); /* no master known yet: WAIT is sent */
    assert_int_equal(batch_wait(k1, 1), 0);
    assert_int_equal(pf_cmd_at(&f, 0)->slot, s1); /* to the slot's master */
    pf_reply(&f, ":0\r\n");
    sk__acks_wait_answered(&a, s1, 1, 0); /* what the engine's reply path reports of it */
    assert_int_equal(sk__acks_known(&a), 0);
    assert_int_equal(batch_wait(k1, 1), 1); /* that master: 202 at once */
    assert_int_equal(batch_wait(k2, 1), 0); /* the other still WAITs */
    pf_reply(&f, ":1\r\n");
    sk__acks_wait_answered(&a, s2, 1, 1); /* a full answer makes no entry */
    f.now_ms += 250;
    sk__acks_tick(&a);
    const pf_cmd *c = pf_cmd_at(&f, 2);
    assert_string_equal(c->argv[0], "INFO");
    assert_int_equal(c->slot, s1); /* only the master known short, on its slot */
    assert_int_equal(f.sent, 3);
    reply_replication(1, 0);
    assert_int_equal(sk__acks_known(&a), 1);
    assert_int_equal(batch_wait(k1, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_plan_follows_the_server_facts),
        cmocka_unit_test(test_replicas_in_sync_follow_the_info_replication_probe),
        cmocka_unit_test(test_a_short_wait_lowers_the_count_at_once),
        cmocka_unit_test(test_a_master_listing_no_replica_is_alone),
        cmocka_unit_test(test_a_standalone_server_follows_appendfsync),
        cmocka_unit_test(test_nothing_is_probed_while_muted),
        cmocka_unit_test(test_each_cluster_master_known_short_has_its_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
