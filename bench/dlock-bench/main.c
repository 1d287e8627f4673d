/* main.c: dlock-bench: runs the registered scenarios against --url and
 * prints one CSV row each: scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,
 * p99_us (notes follow as "# " lines). Exit 0, or 1 on a failed scenario,
 * 2 on bad usage. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "options.h"

extern const bench_scenario *const bench_scenarios[];

typedef struct args {
    bench_ctx ctx;
    const char *only[32];
    int n_only;
    bool csv, help;
} args;

static int add_scenario(void *base, const char *v, char *err, size_t errlen)
{
    args *a = base;
    return opt_append(a->only, &a->n_only, 32, v, "at most 32 --scenario options", err, errlen);
}

static const opt_spec specs[] = {
    {.name = "url", .type = OPT_STR, .off = offsetof(args, ctx.url), .arg = "URL", .help = "the server, a libdlock URL: redis://HOST:PORT or another form\nof libdlock(3), URLS (required)"},
    {.name = "csv", .type = OPT_FLAG, .off = offsetof(args, csv), .help = "CSV rows"},
    {.name = "scenario", .type = OPT_CALL, .call = add_scenario, .arg = "NAME",
     .help = "run only this scenario (repeat for more; default all)"},
    {.name = "threads", .type = OPT_INT, .off = offsetof(args, ctx.threads), .lo = 1, .hi = 256, .arg = "N",
     .def = "8", .help = "worker threads of the contended scenarios (default 8)"},
    {.name = "procs", .type = OPT_INT, .off = offsetof(args, ctx.procs), .lo = 1, .hi = 16, .arg = "N",
     .def = "2", .help = "processes they are spread over (default 2)"},
    {.name = "duration-ms", .type = OPT_DURATION, .off = offsetof(args, ctx.duration_ms), .lo = 100,
     .hi = 600000, .unit = OPT_UNIT_MS, .arg = "DUR", .def = "3000",
     .help = "measuring time per phase, 100ms..10m (default 3s; a bare number is ms)"},
    {.name = "help", .short_name = 'h', .type = OPT_FLAG, .off = offsetof(args, help), .help = "show this help"},
};

static void usage(FILE *f)
{
    fputs("usage: dlock-bench --url URL [options]\n", f);
    opt_print_help(f, specs, OPT_COUNT(specs));
    fputs("scenarios:\n", f);
    for (int i = 0; bench_scenarios[i]; i++)
        fprintf(f, "  %-14s %s\n", bench_scenarios[i]->name, bench_scenarios[i]->help);
}

static bool wanted(const char *name, const char *const *only, int n_only)
{
    if (n_only == 0) return true;
    for (int i = 0; i < n_only; i++)
        if (strcmp(only[i], name) == 0) return true;
    return false;
}

/* 0, 1 (--help printed) or 2 (usage error printed). */
static int parse(args *a, int argc, char **argv)
{
    char err[256];
    if (opt_load(specs, OPT_COUNT(specs), argc, argv, a, NULL, err, sizeof(err))) {
        fprintf(stderr, "dlock-bench: %s\n", err);
        usage(stderr);
        return 2;
    }
    if (a->help) {
        usage(stdout);
        return 1;
    }
    if (!a->ctx.url) {
        usage(stderr);
        return 2;
    }
    return 0;
}

static int run_one(const bench_ctx *ctx, const bench_scenario *s, bool csv)
{
    bench_result r = {0};
    int rc = s->run(ctx, &r);
    if (rc) {
        fprintf(stderr, "dlock-bench: %s: %s\n", s->name, dlock_strerror(rc));
        return 1;
    }
    double ratio = r.limit_ops_per_s > 0 ? r.ops_per_s / r.limit_ops_per_s : 0;
    if (csv)
        printf("%s,%.0f,%.0f,%.3f,%.1f,%.1f\n", s->name, r.ops_per_s, r.limit_ops_per_s, ratio, r.p50_us,
               r.p99_us);
    else
        printf("%-14s %10.0f ops/s  limit %10.0f  ratio %.3f  p50 %8.1f us  p99 %8.1f us\n", s->name,
               r.ops_per_s, r.limit_ops_per_s, ratio, r.p50_us, r.p99_us);
    if (r.note[0]) printf("# %s: %s\n", s->name, r.note);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "bench:%ld:", (long)getpid());
    args a = {.ctx = {.prefix = prefix}};
    int rc = parse(&a, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    if (a.csv) printf("scenario,ops_per_s,limit_ops_per_s,ratio,p50_us,p99_us\n");
    int failed = 0;
    for (int i = 0; bench_scenarios[i]; i++)
        if (wanted(bench_scenarios[i]->name, a.only, a.n_only)) failed |= run_one(&a.ctx, bench_scenarios[i], a.csv);
    return failed;
}
