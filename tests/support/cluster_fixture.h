/* cluster_fixture.h: a real Redis Cluster for tests: N masters with R
 * replicas each (redis-server --cluster-enabled yes, each in its own temp
 * dir on free 127.0.0.1 ports, joined by redis-cli --cluster create), and
 * the helpers the routing tests need: which node serves a slot, kill -9 a
 * node and wait for its replica's promotion, move a slot by hand (whole or
 * step by step, so an ASK window is deterministic). Every node is stopped by
 * the PID this fixture started (servers.c). Not thread-safe. */
#ifndef DLOCK_TEST_CLUSTER_FIXTURE_H
#define DLOCK_TEST_CLUSTER_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "servers.h"

#define TEST_CLUSTER_MAX 12

typedef struct test_cluster {
    test_server node[TEST_CLUSTER_MAX];
    bool master[TEST_CLUSTER_MAX]; /* role at the last test_cluster_roles */
    char id[TEST_CLUSTER_MAX][48]; /* CLUSTER MYID */
    int n;
    char url[1024]; /* redis-cluster://127.0.0.1:p0,127.0.0.1:p1 */
} test_cluster;

/* Starts masters * (1 + replicas) nodes, creates the cluster (slots split
 * evenly by redis-cli), waits (<= 30 s) for cluster_state:ok on every node
 * and for every replica's link. 0 or -1 (message on stderr, all stopped). */
int test_cluster_start(test_cluster *c, int masters, int replicas);
/* Stops every node still running (SIGTERM, then SIGKILL) by PID. */
void test_cluster_stop(test_cluster *c);

/* Re-reads every live node's ROLE into c->master. */
void test_cluster_roles(test_cluster *c);
/* Index of the node serving slot (by CLUSTER NODES of a live master), -1. */
int test_cluster_master_of_slot(test_cluster *c, unsigned slot);
/* A master index other than i (the first), -1. */
int test_cluster_other_master(test_cluster *c, int i);
/* A slot served by master i whose keys are written as "{tag}..." with the
 * returned tag (tag_out >= 16 bytes): a hash tag that lands on node i. */
int test_cluster_tag_on(test_cluster *c, int i, char *tag_out, size_t len);
/* The first three masters' node indexes in m, a hash tag of each in tag
 * and its slot in slot (test_cluster_tag_on). 0, or -1 with fewer than
 * three masters or a tag not found. */
int test_cluster_three_tags(test_cluster *c, int m[3], char tag[3][16], unsigned slot[3]);

/* kill -9 node i (by PID). */
void test_cluster_kill(test_cluster *c, int i);
/* SIGSTOP / SIGCONT node i. */
void test_cluster_pause(test_cluster *c, int i, bool paused);
/* After master i died: waits (<= budget_ms) until one of its replicas is
 * a master and every live node says cluster_state:ok; its index, or -1. */
int test_cluster_wait_failover(test_cluster *c, int dead, int64_t budget_ms);

/* Hand-driven migration of slot from node `from` to node `to`:
 * begin: SETSLOT IMPORTING on to, MIGRATING on from;
 * migrate_key: MIGRATE one key from -> to;
 * end: moves whatever keys are left, then SETSLOT NODE on every master.
 * move_slot does all three. Each 0 or -1. */
int test_cluster_begin_migration(test_cluster *c, unsigned slot, int from, int to);
int test_cluster_migrate_key(test_cluster *c, int from, int to, const char *key);
int test_cluster_end_migration(test_cluster *c, unsigned slot, int from, int to);
int test_cluster_move_slot(test_cluster *c, unsigned slot, int to);

/* A command on node i (fresh plain connection); scalar replies as text in
 * out (may be NULL). 0, or -1 on a transport or error reply. */
int test_cluster_cmd(test_cluster *c, int i, char *out, size_t outlen, int argc, const char **argv);
/* Node index serving the port, -1. */
int test_cluster_node_of_port(const test_cluster *c, int port);

#endif
