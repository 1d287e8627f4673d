/* test_engine_server.c: what the engine learns about the server at a
 * connect (engine_server.h), on a fake port: the four probes (sent as the
 * engine sends them), the run id, Cluster mode, replicas and persistence
 * read from their replies; the facts are complete (sk__server_read says
 * so once) only when every reply is in, also when the connection goes
 * mid-way; a refused CONFIG GET means "not durable" and is logged once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/dlock.h"
#include "engine_server.h"
#include "part_fake.h"

#define RUNID "0123456789abcdef0123456789abcdef01234567"

static part_fake f;
static sk__server s;
static int done_calls; /* sk__server_read said "complete" */
static int probe_ids[SK__PROBES];

static void on_probe(const dlock__reply *r, int err, void *priv)
{
    if (sk__server_read(&s, *(const int *)priv, r, err)) done_calls++;
}

/* What the engine does at a connect (engine.c, probe_server). */
static void probe(void)
{
    sk__server_forget(&s);
    for (int i = 0; i < SK__PROBES; i++) {
        const char **argv = NULL;
        int argc = sk__server_probe_argv(i, &argv);
        probe_ids[i] = i;
        if (sk__wire_cmd(&f.wire, 0, -1, argc, argv, on_probe, &probe_ids[i]) == 0) s.due++;
    }
}

static int setup(void **state)
{
    (void)state;
    pf_init(&f);
    done_calls = 0;
    sk__server_init(&s, &f.wire);
    return 0;
}

static void reply_text(const char *text)
{
    char buf[1024];
    pf_reply(&f, pf_bulk(buf, sizeof(buf), text));
}

/* Answers the four probes of a connect, in the order they were sent. */
static void answer_probes(const char *cluster_enabled, const char *fsync)
{
    char cl[64], cfg[160];
    reply_text("# Server\r\nredis_version:7.2.4\r\nrun_id:" RUNID "\r\ntcp_port:7000\r\n");
    reply_text("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"
               "slave0:ip=127.0.0.1,port=7001,state=online,offset=90,lag=0\r\n"
               "slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n");
    snprintf(cl, sizeof(cl), "# Cluster\r\ncluster_enabled:%s\r\n", cluster_enabled);
    reply_text(cl);
    snprintf(cfg, sizeof(cfg), "*4\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$11\r\nappendfsync\r\n$%zu\r\n%s\r\n",
             strlen(fsync), fsync);
    pf_reply(&f, cfg);
}

static void test_facts_are_learned_from_the_probe_replies(void **state)
{
    (void)state;
    probe();
    assert_int_equal(f.sent, 4);
    assert_int_equal(s.due, 4);
    const char *want[4][3] = {{"INFO", "server"}, {"INFO", "replication"}, {"INFO", "cluster"},
                              {"CONFIG", "GET", "append*"}};
    for (int i = 0; i < 4; i++) {
        const pf_cmd *c = pf_cmd_at(&f, i);
        assert_int_equal(c->slot, -1);
        for (int j = 0; j < c->argc; j++) assert_string_equal(c->argv[j], want[i][j]);
    }
    reply_text("# Server\r\nrun_id:" RUNID "\r\n");
    reply_text("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"
               "slave0:ip=127.0.0.1,port=7001,state=online,offset=90,lag=0\r\n"
               "slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n");
    reply_text("# Cluster\r\ncluster_enabled:0\r\n");
    assert_int_equal(done_calls, 0); /* not before the last reply */
    assert_int_equal(s.due, 1);
    pf_reply(&f, "*4\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n");
    assert_int_equal(done_calls, 1);
    assert_int_equal(s.due, 0);
    assert_string_equal(s.runid, RUNID);
    assert_string_equal(sk__server_script_runid(&s), RUNID);
    assert_false(s.cluster);
    assert_int_equal(s.replicas, 2);
    assert_int_equal(s.in_sync, 1);
    assert_int_equal(s.listed, 2);
    assert_true(s.aof_yes);
    assert_true(s.fsync_always);
    assert_int_equal(f.nlogs, 0);
}

static void test_on_a_cluster_the_scripts_get_no_run_id(void **state)
{
    (void)state;
    probe();
    answer_probes("1", "everysec");
    assert_true(s.cluster);
    assert_string_equal(s.runid, RUNID);
    assert_string_equal(sk__server_script_runid(&s), "");
    assert_true(s.aof_yes);
    assert_false(s.fsync_always);
}

static void test_a_new_connection_forgets_the_last_ones_facts(void **state)
{
    (void)state;
    probe();
    answer_probes("1", "always");
    probe();
    assert_string_equal(s.runid, "");
    assert_false(s.cluster);
    assert_false(s.aof_yes);
    assert_int_equal(s.in_sync, -1);
    assert_int_equal(s.due, 4);
}

static void test_a_connection_lost_mid_probe_completes_without_facts(void **state)
{
    (void)state;
    probe();
    reply_text("# Server\r\nrun_id:" RUNID "\r\n");
    for (int i = 0; i < 3; i++) pf_fail(&f, DLOCK_EUNKNOWN);
    assert_int_equal(done_calls, 1);
    assert_int_equal(s.in_sync, -1); /* unknown, not 0 */
    assert_false(s.aof_yes);
    assert_int_equal(f.nlogs, 0); /* the next connection probes again: not news */
}

static void test_no_run_id_is_logged(void **state)
{
    (void)state;
    probe();
    reply_text("# Server\r\nredis_version:7.2.4\r\n");
    assert_int_equal(pf_logged(&f, "INFO server gave no run_id"), 1);
}

static void test_a_refused_config_is_not_durable_and_logged_once(void **state)
{
    (void)state;
    for (int round = 0; round < 2; round++) {
        probe();
        reply_text("# Server\r\nrun_id:" RUNID "\r\n");
        reply_text("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n");
        reply_text("# Cluster\r\ncluster_enabled:0\r\n");
        pf_reply(&f, "-NOPERM this user has no permissions to run the 'config|get' command\r\n");
        assert_true(s.config_refused);
        assert_false(s.aof_yes || s.fsync_always);
    }
    assert_int_equal(pf_logged(&f, "CONFIG GET refused"), 1);
}

static void test_muted_probes_log_nothing(void **state)
{
    (void)state;
    f.muted = true; /* the credentials were refused: every reply is NOAUTH */
    probe();
    for (int i = 0; i < 4; i++) pf_reply(&f, "-NOAUTH Authentication required.\r\n");
    assert_int_equal(done_calls, 1);
    assert_int_equal(f.nlogs, 0);
}

static void test_nothing_sent_while_down(void **state)
{
    (void)state;
    f.down = true;
    probe();
    assert_int_equal(s.due, 0);
    assert_int_equal(done_calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_facts_are_learned_from_the_probe_replies, setup),
        cmocka_unit_test_setup(test_on_a_cluster_the_scripts_get_no_run_id, setup),
        cmocka_unit_test_setup(test_a_new_connection_forgets_the_last_ones_facts, setup),
        cmocka_unit_test_setup(test_a_connection_lost_mid_probe_completes_without_facts, setup),
        cmocka_unit_test_setup(test_no_run_id_is_logged, setup),
        cmocka_unit_test_setup(test_a_refused_config_is_not_durable_and_logged_once, setup),
        cmocka_unit_test_setup(test_muted_probes_log_nothing, setup),
        cmocka_unit_test_setup(test_nothing_sent_while_down, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
