/* bench.h: dlock-bench's scenario interface and shared measuring helpers.
 *
 * Adding a scenario: create bench/dlock-bench/scen_<name>.c defining
 *     const bench_scenario bench_scenario_<name> = {"<name>", "help", run};
 * (one or more per file; every `bench_scenario_*` symbol defined in a
 * scen_*.c file is registered). CMake scans scen_*.c for the pattern
 * `const bench_scenario bench_scenario_<id>` and generates the table, so no
 * other file changes. Scenarios run in table order, sorted by file name.
 * A scenario fills a bench_result: its throughput, the limit measured in
 * the same run on the same connection type (bench_measure_limit), and a
 * latency pair in microseconds whose meaning its help states.
 */
#ifndef DLOCK_BENCH_H
#define DLOCK_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"

typedef struct bench_ctx {
    const char *url;
    const char *prefix;   /* unique per run: keys are prefix + name */
    int threads;          /* total worker threads for contended scenarios */
    int procs;            /* processes they are spread over */
    int64_t duration_ms;  /* measuring time per phase */
} bench_ctx;

typedef struct bench_result {
    double ops_per_s;
    double limit_ops_per_s;
    double p50_us, p99_us;
    char note[512];       /* printed as a "# " line after the row */
} bench_result;

typedef struct bench_scenario {
    const char *name;
    const char *help;
    int (*run)(const bench_ctx *ctx, bench_result *out); /* 0 or dlock_err */
} bench_scenario;

/* A client for ctx (watchdog 30 s, quiet log). NULL on failure (printed). */
dlock_client *bench_client(const bench_ctx *ctx);

/* The limit: cycles/s of `evals_per_cycle` trivial round trips
 * (bench_trivial_eval) on one thread through the same client API; also the
 * median round trip in *rtt_us_out (may be NULL). */
double bench_measure_limit(const bench_ctx *ctx, int evals_per_cycle, double *rtt_us_out);

/* One trivial round trip through c's public API, the unit the limits are
 * made of: dlock_fence_guard with a fixed token (on Redis one small EVALSHA,
 * GET + SET; on etcd one write txn of one small key). 0 or a dlock_err. */
int bench_trivial_eval(dlock_client *c);
/* Round trips one lock cycle costs at best: 2 on Redis (acquire and
 * release scripts), 3 on etcd (lease grant, create txn, lease revoke). */
int bench_cycle_trips(const bench_ctx *ctx);

/* Latency samples: append, then percentiles (sorts in place). */
typedef struct bench_samples {
    int64_t *v;  /* nanoseconds */
    size_t n, cap;
} bench_samples;
void bench_samples_add(bench_samples *s, int64_t ns);
double bench_samples_pct_us(bench_samples *s, double q);
void bench_samples_free(bench_samples *s);

int64_t bench_now_ns(void);

#endif
