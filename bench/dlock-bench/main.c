/* main.c: dlock-bench: runs the registered scenarios against --url and
 * prints one CSV row each: scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,
 * p99_us (notes follow as "# " lines). Exit 0, or 1 on a failed scenario,
 * 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

extern const bench_scenario *const bench_scenarios[];

static void usage(FILE *f)
{
    fprintf(f, "usage: dlock-bench --url URL [--csv] [--scenario NAME]... [--threads N]\n"
               "                   [--procs N] [--duration-ms MS]\n"
               "scenarios:\n");
    for (int i = 0; bench_scenarios[i]; i++)
        fprintf(f, "  %-14s %s\n", bench_scenarios[i]->name, bench_scenarios[i]->help);
}

static bool wanted(const char *name, char **only, int n_only)
{
    if (n_only == 0) return true;
    for (int i = 0; i < n_only; i++)
        if (strcmp(only[i], name) == 0) return true;
    return false;
}

static long num_arg(const char *s, long lo, long hi)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!end || *end || v < lo || v > hi) {
        fprintf(stderr, "dlock-bench: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "bench:%ld:", (long)getpid());
    bench_ctx ctx = {.url = NULL, .prefix = prefix, .threads = 8, .procs = 2, .duration_ms = 3000};
    char *only[32];
    int n_only = 0;
    bool csv = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(a, "--url") == 0 && has) ctx.url = argv[++i];
        else if (strcmp(a, "--csv") == 0) csv = true;
        else if (strcmp(a, "--scenario") == 0 && has && n_only < 32) only[n_only++] = argv[++i];
        else if (strcmp(a, "--threads") == 0 && has) ctx.threads = (int)num_arg(argv[++i], 1, 256);
        else if (strcmp(a, "--procs") == 0 && has) ctx.procs = (int)num_arg(argv[++i], 1, 16);
        else if (strcmp(a, "--duration-ms") == 0 && has) ctx.duration_ms = num_arg(argv[++i], 100, 600000);
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!ctx.url) {
        usage(stderr);
        return 2;
    }
    if (csv) printf("scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,p99_us\n");
    int failed = 0;
    for (int i = 0; bench_scenarios[i]; i++) {
        const bench_scenario *s = bench_scenarios[i];
        if (!wanted(s->name, only, n_only)) continue;
        bench_result r = {0};
        int rc = s->run(&ctx, &r);
        if (rc) {
            fprintf(stderr, "dlock-bench: %s: %s\n", s->name, dlock_strerror(rc));
            failed = 1;
            continue;
        }
        double ratio = r.limit_ops_per_s > 0 ? r.ops_per_s / r.limit_ops_per_s : 0;
        if (csv)
            printf("%s,%.0f,%.0f,%.3f,%.1f,%.1f\n", s->name, r.ops_per_s, r.limit_ops_per_s, ratio,
                   r.p50_us, r.p99_us);
        else
            printf("%-14s %10.0f ops/s  limit %10.0f  ratio %.3f  p50 %8.1f us  p99 %8.1f us\n", s->name,
                   r.ops_per_s, r.limit_ops_per_s, ratio, r.p50_us, r.p99_us);
        if (r.note[0]) printf("# %s: %s\n", s->name, r.note);
        fflush(stdout);
    }
    return failed;
}
