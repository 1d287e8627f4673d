/* cluster_fixture.c: a real Redis Cluster for tests (see cluster_fixture.h).
 * Invariant: every node is a test_server started by servers.c (so tracked
 * by PID and stopped at exit even when a test fails), and the one helper
 * process (redis-cli --cluster create) is waited for by its PID, killed by
 * that PID if it overruns. The cluster bus port is chosen explicitly
 * (cluster-port) because port + 10000 may not exist for a high free port. */
#include "cluster_fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_io.h"
#include "slot.h"
#include "util.h"

static int node_reply(const test_cluster *c, int i, int argc, const char **argv, dlock__reply **r)
{
    dlock__url u = {.kind = DLOCK__URL_TCP, .host = "127.0.0.1", .port = c->node[i].port};
    dlock__conn_opts o = {.connect_timeout_ms = 500, .command_timeout_ms = 5000};
    dlock__conn *conn = NULL;
    *r = NULL;
    if (c->node[i].pid <= 0 || dlock__conn_open(&u, &o, &conn, NULL, 0) != 0) return -1;
    int rc = dlock__conn_cmd(conn, argc, argv, NULL, r);
    dlock__conn_close(conn);
    if (rc == 0 && dlock__reply_kind(*r) == DLOCK__R_ERROR) {
        fprintf(stderr, "cluster fixture: node %d %s: %s\n", c->node[i].port, argv[0],
                dlock__reply_str(*r, NULL));
        rc = -1;
    }
    if (rc) {
        dlock__reply_free(*r);
        *r = NULL;
    }
    return rc ? -1 : 0;
}

int test_cluster_cmd(test_cluster *c, int i, char *out, size_t outlen, int argc, const char **argv)
{
    dlock__reply *r;
    if (node_reply(c, i, argc, argv, &r) != 0) return -1;
    if (out && outlen) {
        if (dlock__reply_kind(r) == DLOCK__R_INTEGER)
            snprintf(out, outlen, "%lld", dlock__reply_int(r));
        else
            snprintf(out, outlen, "%s", dlock__reply_str(r, NULL));
    }
    dlock__reply_free(r);
    return 0;
}

int test_cluster_node_of_port(const test_cluster *c, int port)
{
    for (int i = 0; i < c->n; i++)
        if (c->node[i].port == port) return i;
    return -1;
}

static int start_node(test_cluster *c, int i)
{
    char bus[64];
    int bp = test_free_port();
    snprintf(bus, sizeof(bus), "cluster-port %d", bp);
    const char *extra[] = {"cluster-enabled yes",
                           "cluster-config-file nodes.conf",
                           "cluster-node-timeout 1000",
                           "cluster-replica-validity-factor 0",
                           bus,
                           NULL};
    if (test_redis_start(&c->node[i], extra) != 0) return -1;
    const char *myid[2] = {"CLUSTER", "MYID"};
    return test_cluster_cmd(c, i, c->id[i], sizeof(c->id[i]), 2, myid);
}

/* redis-cli --cluster create over every node; waited for by PID (<= 30 s). */
static int create_cluster(test_cluster *c, int replicas)
{
    char addrs[TEST_CLUSTER_MAX][32], reps[8], log[400];
    char *argv[TEST_CLUSTER_MAX + 8];
    int a = 0;
    argv[a++] = "redis-cli";
    argv[a++] = "--cluster";
    argv[a++] = "create";
    for (int i = 0; i < c->n; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%d", c->node[i].port);
        argv[a++] = addrs[i];
    }
    snprintf(reps, sizeof(reps), "%d", replicas);
    argv[a++] = "--cluster-replicas";
    argv[a++] = reps;
    argv[a++] = "--cluster-yes";
    argv[a] = NULL;
    snprintf(log, sizeof(log), "%s/cluster-create.log", c->node[0].dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
        execvp(argv[0], argv);
        _exit(127);
    }
    if (pid < 0) return -1;
    int st = 0;
    int64_t deadline = dlock__now_ms() + 30000;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (dlock__now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        dlock__sleep_ms(20);
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    fprintf(stderr, "cluster fixture: redis-cli --cluster create failed (log %s)\n", log);
    return -1;
}

void test_cluster_roles(test_cluster *c)
{
    for (int i = 0; i < c->n; i++) {
        const char *role[1] = {"ROLE"};
        dlock__reply *r;
        if (node_reply(c, i, 1, role, &r) != 0) continue;
        const dlock__reply *first = dlock__reply_at(r, 0);
        c->master[i] = first && strcmp(dlock__reply_str(first, NULL), "master") == 0;
        dlock__reply_free(r);
    }
}

static bool node_ok(test_cluster *c, int i)
{
    char info[4096];
    const char *ci[2] = {"CLUSTER", "INFO"}, *ir[2] = {"INFO", "replication"};
    if (test_cluster_cmd(c, i, info, sizeof(info), 2, ci) != 0 || !strstr(info, "cluster_state:ok"))
        return false;
    if (c->master[i]) return true;
    return test_cluster_cmd(c, i, info, sizeof(info), 2, ir) == 0 && strstr(info, "master_link_status:up");
}

/* Every live node: cluster_state:ok, replicas linked (<= budget_ms). */
static int wait_all_ok(test_cluster *c, int64_t budget_ms)
{
    int64_t deadline = dlock__now_ms() + budget_ms;
    while (dlock__now_ms() < deadline) {
        test_cluster_roles(c);
        bool all = true;
        for (int i = 0; i < c->n && all; i++)
            if (c->node[i].pid > 0 && !node_ok(c, i)) all = false;
        if (all) return 0;
        dlock__sleep_ms(50);
    }
    fprintf(stderr, "cluster fixture: cluster never became ok\n");
    return -1;
}

int test_cluster_start(test_cluster *c, int masters, int replicas)
{
    memset(c, 0, sizeof(*c));
    c->n = masters * (1 + replicas);
    if (masters < 3 || c->n > TEST_CLUSTER_MAX) return -1; /* redis-cli needs 3 masters */
    for (int i = 0; i < c->n; i++)
        if (start_node(c, i) != 0) goto fail;
    if (create_cluster(c, replicas) != 0 || wait_all_ok(c, 30000) != 0) goto fail;
    snprintf(c->url, sizeof(c->url), "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", c->node[0].port,
             c->node[1].port);
    return 0;
fail:
    test_cluster_stop(c);
    return -1;
}

void test_cluster_stop(test_cluster *c)
{
    for (int i = 0; i < c->n; i++) {
        if (c->node[i].pid > 0) test_server_pause(&c->node[i], false);
        if (c->node[i].pid > 0 || c->node[i].dir[0]) test_server_stop(&c->node[i]);
    }
}

/* ---- slots ------------------------------------------------------------- */

/* "start-end" / "slot" fields of one CLUSTER NODES line cover slot? */
static bool line_has_slot(const char *line, unsigned slot)
{
    int field = 0;
    for (const char *p = line; *p && *p != '\n'; field++) {
        const char *end = p + strcspn(p, " \n");
        if (field >= 8 && *p != '[') {
            char *e;
            long lo = strtol(p, &e, 10), hi = lo;
            if (*e == '-') hi = strtol(e + 1, NULL, 10);
            if ((long)slot >= lo && (long)slot <= hi) return true;
        }
        p = *end == ' ' ? end + 1 : end;
    }
    return false;
}

/* Port of a CLUSTER NODES line's master that holds slot (flags "master",
 * not "fail"), or -1. */
static int line_master_port(const char *l, unsigned slot)
{
    char addr[64] = "", flags[128] = "";
    if (sscanf(l, "%*s %63s %127s", addr, flags) != 2) return -1;
    if (!strstr(flags, "master") || strstr(flags, "fail") || !line_has_slot(l, slot)) return -1;
    const char *colon = strchr(addr, ':');
    return colon ? (int)strtol(colon + 1, NULL, 10) : -1;
}

int test_cluster_master_of_slot(test_cluster *c, unsigned slot)
{
    char nodes[16384];
    const char *cn[2] = {"CLUSTER", "NODES"};
    for (int i = 0; i < c->n; i++) {
        if (c->node[i].pid <= 0 || test_cluster_cmd(c, i, nodes, sizeof(nodes), 2, cn) != 0) continue;
        for (const char *l = nodes; *l;) {
            int port = line_master_port(l, slot);
            if (port > 0) return test_cluster_node_of_port(c, port);
            const char *nl = strchr(l, '\n');
            l = nl ? nl + 1 : l + strlen(l);
        }
        return -1;
    }
    return -1;
}

int test_cluster_other_master(test_cluster *c, int i)
{
    test_cluster_roles(c);
    for (int j = 0; j < c->n; j++)
        if (j != i && c->master[j] && c->node[j].pid > 0) return j;
    return -1;
}

int test_cluster_tag_on(test_cluster *c, int i, char *tag_out, size_t len)
{
    for (int k = 0; k < 100000; k++) {
        snprintf(tag_out, len, "n%d", k);
        unsigned slot = dlock__key_slot(tag_out, strlen(tag_out));
        if (test_cluster_master_of_slot(c, slot) == i) return (int)slot;
    }
    return -1;
}

int test_cluster_three_tags(test_cluster *c, int m[3], char tag[3][16], unsigned slot[3])
{
    int k = 0;
    for (int i = 0; i < c->n && k < 3; i++)
        if (c->master[i]) m[k++] = i;
    if (k < 3) return -1;
    for (k = 0; k < 3; k++) {
        int s = test_cluster_tag_on(c, m[k], tag[k], 16);
        if (s < 0) return -1;
        slot[k] = (unsigned)s;
    }
    return 0;
}

/* ---- failures ------------------------------------------------------------ */

void test_cluster_kill(test_cluster *c, int i)
{
    test_server_kill(&c->node[i]);
}

void test_cluster_pause(test_cluster *c, int i, bool paused)
{
    test_server_pause(&c->node[i], paused);
}

int test_cluster_wait_failover(test_cluster *c, int dead, int64_t budget_ms)
{
    int64_t deadline = dlock__now_ms() + budget_ms;
    while (dlock__now_ms() < deadline) {
        for (int i = 0; i < c->n; i++) {
            if (i == dead || c->node[i].pid <= 0) continue;
            const char *role[1] = {"ROLE"};
            dlock__reply *r;
            if (node_reply(c, i, 1, role, &r) != 0) continue;
            bool m = strcmp(dlock__reply_str(dlock__reply_at(r, 0), NULL), "master") == 0;
            dlock__reply_free(r);
            /* a promoted replica: a master now, and it was not one at the start */
            if (!m || c->master[i]) continue;
            if (wait_all_ok(c, deadline - dlock__now_ms()) == 0) return i;
        }
        dlock__sleep_ms(50);
    }
    return -1;
}

/* ---- migration ------------------------------------------------------------ */

static int setslot(test_cluster *c, int on, unsigned slot, const char *how, int whose)
{
    char s[16];
    snprintf(s, sizeof(s), "%u", slot);
    const char *argv[5] = {"CLUSTER", "SETSLOT", s, how, c->id[whose]};
    return test_cluster_cmd(c, on, NULL, 0, 5, argv);
}

int test_cluster_begin_migration(test_cluster *c, unsigned slot, int from, int to)
{
    if (setslot(c, to, slot, "IMPORTING", from) != 0) return -1;
    return setslot(c, from, slot, "MIGRATING", to);
}

int test_cluster_migrate_key(test_cluster *c, int from, int to, const char *key)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", c->node[to].port);
    const char *argv[6] = {"MIGRATE", "127.0.0.1", port, key, "0", "5000"};
    char out[64] = "";
    if (test_cluster_cmd(c, from, out, sizeof(out), 6, argv) != 0) return -1;
    return strcmp(out, "OK") == 0 || strcmp(out, "NOKEY") == 0 ? 0 : -1;
}

/* Moves every key still in slot on `from` to `to`, 100 at a time. */
static int migrate_rest(test_cluster *c, unsigned slot, int from, int to)
{
    char s[16];
    snprintf(s, sizeof(s), "%u", slot);
    for (int round = 0; round < 10000; round++) {
        const char *argv[4] = {"CLUSTER", "GETKEYSINSLOT", s, "100"};
        dlock__reply *r;
        if (node_reply(c, from, 4, argv, &r) != 0) return -1;
        size_t n = dlock__reply_count(r);
        int rc = 0;
        for (size_t k = 0; rc == 0 && k < n; k++)
            rc = test_cluster_migrate_key(c, from, to, dlock__reply_str(dlock__reply_at(r, k), NULL));
        dlock__reply_free(r);
        if (rc || n == 0) return rc;
    }
    return -1;
}

int test_cluster_end_migration(test_cluster *c, unsigned slot, int from, int to)
{
    if (migrate_rest(c, slot, from, to) != 0) return -1;
    /* The importing node first, then the old owner, then everyone else. */
    if (setslot(c, to, slot, "NODE", to) != 0 || setslot(c, from, slot, "NODE", to) != 0) return -1;
    test_cluster_roles(c);
    for (int i = 0; i < c->n; i++)
        if (i != to && i != from && c->master[i] && c->node[i].pid > 0) setslot(c, i, slot, "NODE", to);
    return 0;
}

int test_cluster_move_slot(test_cluster *c, unsigned slot, int to)
{
    int from = test_cluster_master_of_slot(c, slot);
    if (from < 0 || from == to) return -1;
    if (test_cluster_begin_migration(c, slot, from, to) != 0) return -1;
    return test_cluster_end_migration(c, slot, from, to);
}
