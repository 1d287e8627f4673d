/* util.c: dlock-bench helpers: clients, the same-run limit (trivial round
 * trips through the same public client API), latency samples. Uses
 * libdlock through include/dlock only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "dlock/lock.h"

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

dlock_client *bench_client(const bench_ctx *ctx)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = ctx->url;
    o.key_prefix = ctx->prefix;
    dlock_client *c = NULL;
    int rc = dlock_client_create(&o, &c);
    if (rc) fprintf(stderr, "dlock-bench: %s: %s\n", ctx->url, dlock_strerror(rc));
    return c;
}

/* The limit's unit is one dlock_fence_guard call with the same token
 * each time (accepted, so the guard key is written again): on Redis one
 * small EVALSHA (GET + SET), on etcd one write txn of one small key (a lock
 * cycle there is lease grant, create txn and lease revoke). Public API
 * only, through the same client, pool and connection type as the
 * scenarios. */
int bench_cycle_trips(const bench_ctx *ctx)
{
    return strncmp(ctx->url, "etcd://", 7) == 0 || strncmp(ctx->url, "etcds://", 8) == 0 ? 3 : 2;
}

int bench_trivial_eval(dlock_client *c)
{
    return dlock_fence_guard(c, "bench:limit", 1, NULL);
}

double bench_measure_limit(const bench_ctx *ctx, int evals_per_cycle, double *rtt_us_out)
{
    dlock_client *c = bench_client(ctx);
    if (!c) return 0;
    bench_samples s = {0};
    bench_trivial_eval(c); /* loads the script, seeds the guard key */
    int64_t t0 = bench_now_ns(), end = t0 + ctx->duration_ms * 1000000LL;
    long cycles = 0;
    int64_t now = t0;
    while (now < end) {
        for (int i = 0; i < evals_per_cycle; i++) {
            int64_t a = bench_now_ns();
            bench_trivial_eval(c);
            bench_samples_add(&s, bench_now_ns() - a);
        }
        cycles++;
        now = bench_now_ns();
    }
    if (rtt_us_out) *rtt_us_out = bench_samples_pct_us(&s, 0.5);
    bench_samples_free(&s);
    dlock_client_destroy(c);
    return (double)cycles * 1e9 / (double)(now - t0);
}

void bench_samples_add(bench_samples *s, int64_t ns)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        int64_t *v = realloc(s->v, cap * sizeof(*v));
        if (!v) return;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = ns;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

double bench_samples_pct_us(bench_samples *s, double q)
{
    if (s->n == 0) return 0;
    qsort(s->v, s->n, sizeof(*s->v), cmp_i64);
    size_t i = (size_t)(q * (double)s->n);
    if (i >= s->n) i = s->n - 1;
    return (double)s->v[i] / 1000.0;
}

void bench_samples_free(bench_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}
