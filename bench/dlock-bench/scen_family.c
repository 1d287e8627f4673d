/* scen_family.c: lock-family scenarios of dlock-bench, one thread each,
 * uncontended cycles; p50/p99 are cycle latencies. Limit: the same number
 * of trivial script round trips per cycle as the cycle's scripts
 * (measured in the same run): rate_limit 1, semaphore / rwlock_read /
 * fair_lock / multi_lock3 (one slot) 2, latch (arm + count down) 2.
 * RedLock needs several independent servers and is not benchmarked here.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "dlock/fairlock.h"
#include "dlock/latch.h"
#include "dlock/multilock.h"
#include "dlock/ratelimit.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"

/* One cycle on obj; 0 or a dlock_err. */
typedef int (*cycle_fn)(void *obj);

static int measure(const bench_ctx *ctx, bench_result *out, void *obj, cycle_fn cycle,
                   int evals_per_cycle, const char *what)
{
    bench_samples s = {0};
    int rc = cycle(obj); /* warm-up: loads the scripts */
    int64_t t0 = bench_now_ns(), end = t0 + ctx->duration_ms * 1000000LL, now = t0;
    long cycles = 0;
    while (rc == 0 && now < end) {
        rc = cycle(obj);
        int64_t t = bench_now_ns();
        bench_samples_add(&s, t - now);
        now = t;
        cycles++;
    }
    double rtt = 0;
    out->ops_per_s = (double)cycles * 1e9 / (double)(now - t0);
    out->limit_ops_per_s = bench_measure_limit(ctx, evals_per_cycle, &rtt);
    out->p50_us = bench_samples_pct_us(&s, 0.5);
    out->p99_us = bench_samples_pct_us(&s, 0.99);
    snprintf(out->note, sizeof(out->note), "%s; limit = %d trivial scripts per cycle (rtt p50 %.1f us)",
             what, evals_per_cycle, rtt);
    bench_samples_free(&s);
    return rc;
}

static int rl_cycle(void *obj)
{
    dlock_ratelimit_result r;
    return dlock_ratelimit_try_acquire(obj, "bench-user", 1, &r);
}

static int run_rate_limit(const bench_ctx *ctx, bench_result *out)
{
    dlock_client *c = bench_client(ctx);
    if (!c) return DLOCK_ECONN;
    dlock_ratelimit_options o;
    dlock_ratelimit_options_init(&o);
    o.rate = 1000000; /* 1 per us: never the bottleneck, every call decides */
    dlock_ratelimit *rl = NULL;
    int rc = dlock_ratelimit_new(c, "bench:rl", &o, &rl);
    if (rc == 0) rc = measure(ctx, out, rl, rl_cycle, 1, "try_acquire(1) per cycle");
    dlock_ratelimit_free(rl);
    dlock_client_destroy(c);
    return rc;
}

static int sem_cycle(void *obj)
{
    int rc = dlock_semaphore_acquire(obj, 1, 0);
    return rc ? rc : dlock_semaphore_release(obj, 1);
}

static int run_semaphore(const bench_ctx *ctx, bench_result *out)
{
    dlock_client *c = bench_client(ctx);
    if (!c) return DLOCK_ECONN;
    dlock_semaphore_options o;
    dlock_semaphore_options_init(&o);
    o.permits = 10;
    o.lease_ms = 10000;
    dlock_semaphore *s = NULL;
    int rc = dlock_semaphore_new(c, "bench:sem", &o, &s);
    if (rc == 0) rc = measure(ctx, out, s, sem_cycle, 2, "acquire(1) + release(1)");
    dlock_semaphore_free(s);
    dlock_client_destroy(c);
    return rc;
}

static int rw_cycle(void *obj)
{
    int rc = dlock_rwlock_read_lock(obj, 0);
    return rc ? rc : dlock_rwlock_read_unlock(obj);
}

static int run_rwlock_read(const bench_ctx *ctx, bench_result *out)
{
    dlock_client *c = bench_client(ctx);
    if (!c) return DLOCK_ECONN;
    dlock_rwlock_options o;
    dlock_rwlock_options_init(&o);
    o.lease_ms = 10000;
    dlock_rwlock *rw = NULL;
    int rc = dlock_rwlock_new(c, "bench:rw", &o, &rw);
    if (rc == 0) rc = measure(ctx, out, rw, rw_cycle, 2, "read_lock + read_unlock");
    dlock_rwlock_free(rw);
    dlock_client_destroy(c);
    return rc;
}

static int fair_cycle(void *obj)
{
    int rc = dlock_fairlock_lock(obj, 0, 10000);
    return rc ? rc : dlock_fairlock_unlock(obj);
}

static int run_fair_lock(const bench_ctx *ctx, bench_result *out)
{
    dlock_client *c = bench_client(ctx);
    if (!c) return DLOCK_ECONN;
    dlock_fairlock *fl = NULL;
    int rc = dlock_fairlock_new(c, "bench:fair", NULL, &fl);
    if (rc == 0) rc = measure(ctx, out, fl, fair_cycle, 2, "lock + unlock, empty queue");
    dlock_fairlock_free(fl);
    dlock_client_destroy(c);
    return rc;
}

static int multi_cycle(void *obj)
{
    int rc = dlock_multilock_lock(obj, 0, 10000);
    return rc ? rc : dlock_multilock_unlock(obj);
}

static int run_multi_lock3(const bench_ctx *ctx, bench_result *out)
{
    dlock_client *c = bench_client(ctx);
    if (!c) return DLOCK_ECONN;
    const char *names[3] = {"{bench:m}:a", "{bench:m}:b", "{bench:m}:c"};
    dlock_multilock *ml = NULL;
    int rc = dlock_multilock_new(c, names, 3, &ml);
    if (rc == 0) rc = measure(ctx, out, ml, multi_cycle, 2, "3 names, one slot: lock + unlock");
    dlock_multilock_free(ml);
    dlock_client_destroy(c);
    return rc;
}

static int latch_cycle(void *obj)
{
    int rc = dlock_latch_try_set_count(obj, 1, 0, NULL);
    return rc ? rc : dlock_latch_count_down(obj, NULL);
}

static int run_latch(const bench_ctx *ctx, bench_result *out)
{
    dlock_client *c = bench_client(ctx);
    if (!c) return DLOCK_ECONN;
    dlock_latch *l = NULL;
    int rc = dlock_latch_new(c, "bench:latch", &l);
    if (rc == 0) rc = measure(ctx, out, l, latch_cycle, 2, "arm(1) + count_down");
    dlock_latch_free(l);
    dlock_client_destroy(c);
    return rc;
}

const bench_scenario bench_scenario_rate_limit = {"rate_limit", "GCRA try_acquire, one subject", run_rate_limit};
const bench_scenario bench_scenario_semaphore = {"semaphore", "acquire(1)+release(1)", run_semaphore};
const bench_scenario bench_scenario_rwlock_read = {"rwlock_read", "read lock+unlock", run_rwlock_read};
const bench_scenario bench_scenario_fair_lock = {"fair_lock", "fair lock+unlock, no waiters", run_fair_lock};
const bench_scenario bench_scenario_multi_lock3 = {"multi_lock3", "3-name one-slot multi-lock", run_multi_lock3};
const bench_scenario bench_scenario_latch = {"latch", "arm + count down", run_latch};
