/* cluster-bench: what the Cluster router costs. One key; N sync commands
 * (GET, SET or EVALSHA of a one-key script) through a redis-cluster://
 * routing connection, then the same N through a plain redis:// connection
 * to the master that owns the key (found through the router), alternating,
 * --runs times; prints every run, the medians (operations per second) and
 * the router's overhead, in throughput and in this process's CPU time a
 * command (less noisy on a shared machine). Needs a cluster you started yourself (e.g.
 * tests/support/cluster.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "redis_io.h"
#include "util.h"

#define MAX_RUNS 51

typedef struct bench {
    const char *url, *mode, *key;
    long ops, runs;
} bench;

static const char *usage =
    "usage: cluster-bench --url redis-cluster://h:p[,h:p...] [--mode get|set|evalsha]\n"
    "                     [--ops N] [--runs N] [--key KEY]\n"
    "  --url URL    the cluster (required)\n"
    "  --mode M     get (default), set or evalsha (a one-key script)\n"
    "  --ops N      commands a run (default 20000)\n"
    "  --runs N     runs of each connection, alternating (default 5, at most 51)\n"
    "  --key KEY    the key (default bench:{cluster}k)\n"
    "  --help       this text\n";

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, bench *b)
{
    *b = (bench){.mode = "get", .key = "bench:{cluster}k", .ops = 20000, .runs = 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        int bad = !v;
        if (!bad && strcmp(a, "--url") == 0)
            b->url = v;
        else if (!bad && strcmp(a, "--mode") == 0)
            b->mode = v;
        else if (!bad && strcmp(a, "--key") == 0)
            b->key = v;
        else if (!bad && strcmp(a, "--ops") == 0)
            bad = parse_long(v, 1, 100000000, &b->ops);
        else if (!bad && strcmp(a, "--runs") == 0)
            bad = parse_long(v, 1, MAX_RUNS, &b->runs);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "cluster-bench: bad or unknown option '%s' (see --help)\n", a);
            return -1;
        }
        i++;
    }
    if (!b->url) fprintf(stderr, "cluster-bench: --url is required (see --help)\n");
    if (strcmp(b->mode, "get") && strcmp(b->mode, "set") && strcmp(b->mode, "evalsha")) {
        fprintf(stderr, "cluster-bench: --mode must be get, set or evalsha\n");
        return -1;
    }
    return b->url ? 0 : -1;
}

static dlock__conn *open_url(const dlock__url *u)
{
    dlock__conn_opts o = {.connect_timeout_ms = 1000, .command_timeout_ms = 2000};
    dlock__conn *c = NULL;
    char err[256] = "";
    if (dlock__conn_open(u, &o, &c, err, sizeof(err)) != 0) fprintf(stderr, "cluster-bench: %s\n", err);
    return c;
}

static int one(dlock__conn *c, int argc, const char **argv)
{
    dlock__reply *r = NULL;
    int rc = dlock__conn_cmd(c, argc, argv, NULL, &r);
    if (rc == 0 && dlock__reply_kind(r) == DLOCK__R_ERROR) {
        fprintf(stderr, "cluster-bench: %s\n", dlock__reply_str(r, NULL));
        rc = -1;
    }
    dlock__reply_free(r);
    return rc;
}

static int64_t cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

/* Operations per second of b->ops commands argv on c (< 0 on an error),
 * and the CPU microseconds a command in *cpu_out. */
static double run(const bench *b, dlock__conn *c, int argc, const char **argv, double *cpu_out)
{
    int64_t t0 = dlock__now_us(), c0 = cpu_us();
    for (long i = 0; i < b->ops; i++)
        if (one(c, argc, argv) != 0) return -1;
    int64_t us = dlock__now_us() - t0;
    *cpu_out = (double)(cpu_us() - c0) / (double)b->ops;
    return (double)b->ops * 1e6 / (double)(us > 0 ? us : 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The command of --mode; an EVALSHA script is loaded on both paths. */
static int command(const bench *b, dlock__conn *routed, dlock__conn *direct, const char **argv, char *sha)
{
    const char *src = "return redis.call('GET', KEYS[1])";
    const char *load[3] = {"SCRIPT", "LOAD", src}, *set[3] = {"SET", b->key, "v"};
    if (one(routed, 3, set) != 0) return -1;
    if (strcmp(b->mode, "evalsha") == 0) {
        dlock__reply *r = NULL;
        if (dlock__conn_cmd(routed, 3, load, NULL, &r) != 0 || dlock__reply_kind(r) != DLOCK__R_STRING)
            return dlock__reply_free(r), -1;
        snprintf(sha, 41, "%s", dlock__reply_str(r, NULL));
        dlock__reply_free(r);
        if (one(direct, 3, load) != 0) return -1;
        argv[0] = "EVALSHA", argv[1] = sha, argv[2] = "1", argv[3] = b->key;
        return 4;
    }
    argv[0] = strcmp(b->mode, "get") == 0 ? "GET" : "SET";
    argv[1] = b->key;
    argv[2] = "v";
    return strcmp(b->mode, "get") == 0 ? 2 : 3;
}

int main(int argc, char **argv)
{
    bench b;
    if (parse_args(argc, argv, &b) != 0) return 2;
    dlock__url u, owner;
    char err[256] = "";
    if (dlock__url_parse(b.url, &u, err, sizeof(err)) != 0 || u.kind != DLOCK__URL_CLUSTER) {
        fprintf(stderr, "cluster-bench: --url: %s\n", err[0] ? err : "not a redis-cluster:// URL");
        return 2;
    }
    dlock__conn *routed = open_url(&u), *direct = NULL;
    if (routed && dlock__conn_master_of_key(routed, b.key, strlen(b.key), &owner) == 0) {
        direct = open_url(&owner);
        printf("key %s: master %s:%d, %s, %ld ops a run\n", b.key, owner.host, owner.port, b.mode, b.ops);
        dlock__url_free(&owner);
    }
    const char *cmd[4];
    char sha[41];
    int n = routed && direct ? command(&b, routed, direct, cmd, sha) : -1;
    double r[MAX_RUNS], d[MAX_RUNS], rcpu[MAX_RUNS], dcpu[MAX_RUNS];
    int rc = n > 0 ? 0 : 1;
    for (long i = 0; rc == 0 && i < b.runs; i++) {
        d[i] = run(&b, direct, n, cmd, &dcpu[i]);
        r[i] = run(&b, routed, n, cmd, &rcpu[i]);
        if (d[i] < 0 || r[i] < 0)
            rc = 1;
        else
            printf("run %ld: direct %.0f ops/s (%.2f us CPU/op), routed %.0f ops/s (%.2f us CPU/op)\n", i + 1,
                   d[i], dcpu[i], r[i], rcpu[i]);
    }
    if (rc == 0) {
        double md = median(d, b.runs), mr = median(r, b.runs);
        double cd = median(dcpu, b.runs), cr = median(rcpu, b.runs);
        printf("median: direct %.0f ops/s, routed %.0f ops/s (%.1f %% fewer); client CPU %.2f vs %.2f "
               "us/op (+%.2f us)\n",
               md, mr, (md - mr) / md * 100.0, cd, cr, cr - cd);
    }
    dlock__conn_close(routed);
    dlock__conn_close(direct);
    dlock__url_free(&u);
    return rc;
}
