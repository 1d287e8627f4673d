/* scen_lock.c: lock scenarios of dlock-bench.
 * uncontended[_reentrant]: one thread, try_lock(0) + unlock cycles; p50/p99
 *   are cycle latencies. Limit: two trivial script round trips per cycle
 *   (what one acquire + one release script cost at best); on an etcd URL
 *   three trivial write txns (lease grant, create txn, revoke).
 * contended[_reentrant]: --threads workers over --procs processes on one
 *   lock, waiting without bound; p50/p99 are handoff latencies (from the
 *   holder calling unlock to another worker holding the lock, on the
 *   shared CLOCK_MONOTONIC); the note gives them in round trips and the
 *   per-worker spread of cycles. Same limit as above.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "dlock/lock.h"

#define MAX_WORKERS 256
#define MAX_HANDOFFS 400000

static dlock_lock *new_lock(dlock_client *c, const char *name, dlock_lock_kind kind)
{
    dlock_lock_options o;
    dlock_lock_options_init(&o);
    o.kind = kind;
    dlock_lock *l = NULL;
    return dlock_lock_new(c, name, &o, &l) == 0 ? l : NULL;
}

/* Alternates 50 ms slices of lock cycles and of limit cycles (two trivial
 * script round trips) on one client, so both see the same machine load. */
static int uncontended(const bench_ctx *ctx, bench_result *out, dlock_lock_kind kind)
{
    dlock_client *c = bench_client(ctx);
    if (!c) return DLOCK_ECONN;
    dlock_lock *l = new_lock(c, kind == DLOCK_LOCK_SIMPLE ? "uncontended" : "uncontended_re", kind);
    bench_samples s = {0}, rtt = {0};
    int rc = bench_trivial_eval(c); /* loads the script, seeds the guard key */
    int trips = bench_cycle_trips(ctx); /* 2 on Redis, 3 on etcd */
    int64_t lock_ns = 0, limit_ns = 0, slice = 50000000LL;
    long cycles = 0, limit_cycles = 0;
    while (rc == 0 && lock_ns < ctx->duration_ms * 1000000LL) {
        int64_t t0 = bench_now_ns(), now = t0;
        while (rc == 0 && now - t0 < slice) {
            rc = dlock_lock_try_lock(l, 0, 10000, NULL);
            if (rc == 0) rc = dlock_lock_unlock(l);
            int64_t t = bench_now_ns();
            bench_samples_add(&s, t - now);
            now = t;
            cycles++;
        }
        lock_ns += now - t0;
        t0 = now;
        while (rc == 0 && now - t0 < slice) {
            for (int k = 0; rc == 0 && k < trips; k++) rc = bench_trivial_eval(c);
            int64_t t = bench_now_ns();
            bench_samples_add(&rtt, (t - now) / trips);
            now = t;
            limit_cycles++;
        }
        limit_ns += now - t0;
    }
    dlock_lock_free(l);
    dlock_client_destroy(c);
    out->ops_per_s = (double)cycles * 1e9 / (double)lock_ns;
    out->limit_ops_per_s = (double)limit_cycles * 1e9 / (double)limit_ns;
    out->p50_us = bench_samples_pct_us(&s, 0.5);
    out->p99_us = bench_samples_pct_us(&s, 0.99);
    snprintf(out->note, sizeof(out->note),
             "interleaved 50 ms slices; limit cycle p50 %.1f us p99 %.1f us (%d trivial round trips)",
             trips * bench_samples_pct_us(&rtt, 0.5), trips * bench_samples_pct_us(&rtt, 0.99), trips);
    bench_samples_free(&s);
    bench_samples_free(&rtt);
    return rc;
}

static int run_uncontended(const bench_ctx *ctx, bench_result *out)
{
    return uncontended(ctx, out, DLOCK_LOCK_SIMPLE);
}

static int run_uncontended_re(const bench_ctx *ctx, bench_result *out)
{
    return uncontended(ctx, out, DLOCK_LOCK_REENTRANT);
}

/* ---- contended ---------------------------------------------------------- */

typedef struct shared {
    _Atomic int64_t last_release_ns;
    _Atomic int last_worker;
    _Atomic int errors;
    _Atomic size_t n_handoffs;
    int64_t start_ns, end_ns;
    long cycles[MAX_WORKERS];
    int64_t handoffs[MAX_HANDOFFS];
} shared;

typedef struct worker {
    shared *sh;
    dlock_client *c;
    dlock_lock_kind kind;
    int id;
} worker;

static void *contend(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    dlock_lock *l = new_lock(w->c, "contended", w->kind);
    if (!l) {
        atomic_fetch_add(&sh->errors, 1);
        return NULL;
    }
    while (bench_now_ns() < sh->start_ns) usleep(1000);
    long cycles = 0;
    while (bench_now_ns() < sh->end_ns) {
        if (dlock_lock_try_lock(l, 2000, 10000, NULL) != 0) continue; /* timeout: try again */
        int64_t got = bench_now_ns();
        int prev = atomic_load(&sh->last_worker);
        int64_t rel = atomic_load(&sh->last_release_ns);
        if (prev != w->id && rel > 0) {
            size_t i = atomic_fetch_add(&sh->n_handoffs, 1);
            if (i < MAX_HANDOFFS) sh->handoffs[i] = got - rel;
        }
        atomic_store(&sh->last_worker, w->id);
        atomic_store(&sh->last_release_ns, bench_now_ns());
        if (dlock_lock_unlock(l) != 0) atomic_fetch_add(&sh->errors, 1);
        cycles++;
    }
    sh->cycles[w->id] = cycles;
    dlock_lock_free(l);
    return NULL;
}

static int contend_process(const bench_ctx *ctx, shared *sh, dlock_lock_kind kind, int first, int n)
{
    dlock_client *c = bench_client(ctx);
    if (!c) return 1;
    pthread_t t[MAX_WORKERS];
    worker w[MAX_WORKERS];
    for (int i = 0; i < n; i++) {
        w[i] = (worker){.sh = sh, .c = c, .kind = kind, .id = first + i};
        pthread_create(&t[i], NULL, contend, &w[i]);
    }
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    dlock_client_destroy(c);
    return 0;
}

static int contended(const bench_ctx *ctx, bench_result *out, dlock_lock_kind kind)
{
    int nw = ctx->threads > MAX_WORKERS ? MAX_WORKERS : ctx->threads;
    int procs = ctx->procs < 1 ? 1 : ctx->procs > nw ? nw : ctx->procs;
    shared *sh = mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return DLOCK_ENOMEM;
    memset(sh, 0, sizeof(*sh));
    sh->start_ns = bench_now_ns() + 500000000LL;
    sh->end_ns = sh->start_ns + ctx->duration_ms * 1000000LL;
    pid_t pids[16];
    int first = 0;
    fflush(NULL);
    for (int p = 0; p < procs; p++) {
        int n = nw / procs + (p < nw % procs ? 1 : 0);
        pids[p] = fork();
        if (pids[p] == 0) _exit(contend_process(ctx, sh, kind, first, n));
        first += n;
    }
    int bad = 0;
    for (int p = 0; p < procs; p++) {
        int st = 0;
        if (pids[p] < 0 || waitpid(pids[p], &st, 0) != pids[p] || !WIFEXITED(st) || WEXITSTATUS(st)) bad = 1;
    }
    double rtt = 0;
    double limit = bench_measure_limit(ctx, bench_cycle_trips(ctx), &rtt);
    long total = 0, mn = -1, mx = 0;
    for (int i = 0; i < nw; i++) {
        total += sh->cycles[i];
        if (mn < 0 || sh->cycles[i] < mn) mn = sh->cycles[i];
        if (sh->cycles[i] > mx) mx = sh->cycles[i];
    }
    size_t nh = atomic_load(&sh->n_handoffs);
    bench_samples s = {.v = sh->handoffs, .n = nh < MAX_HANDOFFS ? nh : MAX_HANDOFFS, .cap = 0};
    out->ops_per_s = (double)total * 1000.0 / (double)ctx->duration_ms;
    out->limit_ops_per_s = limit;
    out->p50_us = bench_samples_pct_us(&s, 0.5);
    out->p99_us = bench_samples_pct_us(&s, 0.99);
    snprintf(out->note, sizeof(out->note),
             "%d workers / %d procs; handoffs %zu; handoff p50 %.1f p99 %.1f round trips (eval rtt p50 "
             "%.1f us); per-worker cycles min %ld max %ld; errors %d",
             nw, procs, nh, rtt > 0 ? out->p50_us / rtt : 0, rtt > 0 ? out->p99_us / rtt : 0, rtt, mn, mx,
             atomic_load(&sh->errors));
    int errors = atomic_load(&sh->errors);
    munmap(sh, sizeof(shared));
    return bad || errors ? DLOCK_EIO : 0;
}

static int run_contended(const bench_ctx *ctx, bench_result *out)
{
    return contended(ctx, out, DLOCK_LOCK_SIMPLE);
}

static int run_contended_re(const bench_ctx *ctx, bench_result *out)
{
    return contended(ctx, out, DLOCK_LOCK_REENTRANT);
}

const bench_scenario bench_scenario_uncontended = {
    "uncontended", "simple lock, 1 thread, try_lock+unlock cycles (p50/p99: cycle)", run_uncontended};
const bench_scenario bench_scenario_uncontended_re = {
    "uncontended_re", "reentrant lock, 1 thread, cycles (p50/p99: cycle)", run_uncontended_re};
const bench_scenario bench_scenario_contended = {
    "contended", "simple lock, N threads / P procs (p50/p99: handoff)", run_contended};
const bench_scenario bench_scenario_contended_re = {
    "contended_re", "reentrant lock, N threads / P procs (p50/p99: handoff)", run_contended_re};
