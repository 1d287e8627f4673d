/* lib_target.h: the Redis a libdlock test runs against. By default one
 * private redis-server; with DLOCK_TEST_CLUSTER=1 in the environment (the
 * `cluster` CTest runs, tests/lib/CMakeLists.txt) a real Cluster of 3
 * masters + 3 replicas (tests/support/cluster_fixture.h) whose
 * redis-cluster:// URL the test_server carries, so every client a test
 * makes from srv->url routes by slot, and lt_cmd pokes behind the library
 * through a routing connection. Tests that must kill, restart or
 * reconfigure one server call LT_STANDALONE_ONLY first. Not thread-safe
 * (set up and torn down by the group fixture). */
#ifndef DLOCK_TEST_LIB_TARGET_H
#define DLOCK_TEST_LIB_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster_fixture.h"
#include "servers.h"

/* True when this run targets a Cluster (DLOCK_TEST_CLUSTER=1). */
bool lt_cluster(void);
/* The running cluster (valid between lt_start and lt_stop in cluster mode). */
extern test_cluster lt_cl;

/* Starts the target into srv: test_redis_start, or the cluster (srv->url
 * its redis-cluster:// URL, srv->port the first node's port, srv->pid 0:
 * never signal it, lt_stop stops every node). 0 or -1. */
int lt_start(test_server *srv);
void lt_stop(test_server *srv);

/* test_redis_cmd on the target: on a cluster through a routing connection
 * (keyed commands go to their slot's master; SCRIPT/FLUSHALL to every
 * master), else test_redis_cmd. Same contract. */
int lt_cmd(const test_server *srv, char *out, size_t outlen, int argc, const char **argv);

/* A keyless command (INFO, DEBUG, ...) to the server that holds key: on a
 * cluster the master of key's slot, else the one server. Same contract. */
int lt_cmd_at(const test_server *srv, const char *key, char *out, size_t outlen, int argc,
              const char **argv);

/* A command with an integer answer on every server of the target (each
 * node of a cluster, each on a fresh plain connection); *sum_out the sum
 * of the answers. 0, or -1 when one failed. */
int lt_cmd_each(const test_server *srv, long long *sum_out, int argc, const char **argv);

/* In a cmocka test: skip it on a cluster, saying why (it kills, restarts
 * or reconfigures a single server, or reads one server's state). */
#define LT_STANDALONE_ONLY(why)                                              \
    do {                                                                     \
        if (lt_cluster()) {                                                  \
            print_message("# skipped on a cluster: %s\n", why);             \
            skip();                                                          \
        }                                                                    \
    } while (0)

#endif
