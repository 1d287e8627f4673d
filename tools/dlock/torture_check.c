/* torture_check.c: the history checker of `dlock torture`. From the
 * holdings the workers recorded, the pauses the nemesis made and what the
 * storage holds at the end, it finds the three violations a lock must not
 * allow: two holders that were never paused holding at once, updates of
 * the counter lost, accepted writes out of token order. A run with none of
 * them proves something only if it exercised the lock (pauses made and
 * noticed, writes accepted, no worker or storage failure).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockface.h"
#include "torture.h"

/* From the acquire request on: a worker stopped after the server granted
 * the lock but before it saw the reply holds a lease that ran out. */
static bool was_paused(const torture_hold *h, const torture_pause *p, size_t np)
{
    for (size_t i = 0; i < np; i++)
        if (p[i].worker == h->worker && p[i].from_us < h->rel_us && p[i].to_us > h->try_us) return true;
    return false;
}

static int cmp_acq(const void *a, const void *b)
{
    const torture_hold *x = a, *y = b;
    return x->acq_us < y->acq_us ? -1 : x->acq_us > y->acq_us;
}

/* Pairs of holdings, neither paused, whose intervals overlap (sorted). */
static size_t count_overlaps(const torture_hold *h, size_t n, const torture_pause *p, size_t np)
{
    size_t overlaps = 0;
    for (size_t i = 0; i < n; i++) {
        if (was_paused(&h[i], p, np)) continue;
        for (size_t j = i + 1; j < n && h[j].acq_us < h[i].rel_us; j++)
            if (!was_paused(&h[j], p, np)) overlaps++;
    }
    return overlaps;
}

static void reason(torture_verdict *v, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reason(torture_verdict *v, int code, const char *fmt, ...)
{
    /* UNSAFE outranks INCONCLUSIVE outranks SAFE */
    if (code == TORTURE_EXIT_UNSAFE || v->code == TORTURE_EXIT_SAFE) v->code = code;
    if (v->n_reasons >= (int)(sizeof(v->reasons) / sizeof(v->reasons[0]))) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->reasons[v->n_reasons++], sizeof(v->reasons[0]), fmt, ap);
    va_end(ap);
}

static void tally(const torture_shared *sh, torture_verdict *v)
{
    for (size_t i = 0; i < v->holds; i++) {
        int oc = sh->holds[i].outcome;
        v->accepted_events += oc == TORTURE_WRITE_ACCEPTED;
        v->refused_reads += oc == TORTURE_READ_REFUSED;
        v->refused_writes += oc == TORTURE_WRITE_REFUSED;
        v->store_errors += oc == TORTURE_STORE_ERROR;
    }
}

/* What makes a run without violations prove nothing. */
static void check_exercised(const torture_opts *o, torture_verdict *v)
{
    if (v->failed_workers) reason(v, TORTURE_EXIT_INCONCLUSIVE, "%d worker(s) failed", v->failed_workers);
    if (v->store_errors) reason(v, TORTURE_EXIT_INCONCLUSIVE, "%zu storage errors", v->store_errors);
    if (v->truncated) reason(v, TORTURE_EXIT_INCONCLUSIVE, "history full: holdings after the first %zu not checked", v->holds);
    if (v->pauses == 0 || v->store.n_accepted == 0)
        reason(v, TORTURE_EXIT_INCONCLUSIVE, "the run exercised nothing (%zu pauses, %zu writes accepted)",
               v->pauses, v->store.n_accepted);
    else if (o->pause_ms > o->lease_ms && v->refused_reads + v->refused_writes + (size_t)v->lost_callbacks == 0)
        reason(v, TORTURE_EXIT_INCONCLUSIVE, "pauses longer than the lease were never noticed "
                                             "(no refused write, no lost lock)");
}

void torture_judge(const torture_opts *o, torture_shared *sh, const torture_pause *p, size_t np,
                   const torture_store_state *st, int failed_workers, torture_verdict *v)
{
    memset(v, 0, sizeof(*v));
    size_t n = (size_t)__atomic_load_n(&sh->n_holds, __ATOMIC_SEQ_CST);
    v->truncated = n > sh->cap;
    v->holds = v->truncated ? sh->cap : n;
    v->pauses = np;
    v->store = *st;
    v->failed_workers = failed_workers;
    v->lost_callbacks = __atomic_load_n(&sh->lost_callbacks, __ATOMIC_SEQ_CST);
    qsort(sh->holds, v->holds, sizeof(torture_hold), cmp_acq);
    tally(sh, v);
    v->overlaps = count_overlaps(sh->holds, v->holds, p, np);
    v->lost_updates = (long long)st->n_accepted - st->counter;
    v->code = TORTURE_EXIT_SAFE;
    if (v->overlaps) reason(v, TORTURE_EXIT_UNSAFE, "overlaps of unpaused holders: %zu", v->overlaps);
    if (v->lost_updates)
        reason(v, TORTURE_EXIT_UNSAFE, "lost updates: %lld (counter %lld, writes accepted %zu)", v->lost_updates,
               st->counter, st->n_accepted);
    if (st->out_of_order)
        reason(v, TORTURE_EXIT_UNSAFE, "accepted writes out of token order: %zu", st->out_of_order);
    check_exercised(o, v);
}

int torture_write_history(const char *path, const torture_opts *o, const torture_shared *sh,
                          const torture_pause *p, size_t np)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    static const char *const outcome[] = {"write-accepted", "read-refused", "write-refused", "storage-error"};
    size_t n = (size_t)sh->n_holds < sh->cap ? (size_t)sh->n_holds : sh->cap;
    fprintf(f, "# dlock torture: %d workers, lease %" PRId64 " ms, pause %" PRId64 " ms, fencing %s\n"
               "# hold WORKER TOKEN TRY_US ACQUIRE_US RELEASE_US OUTCOME PAUSED\n# pause WORKER FROM_US TO_US\n",
            o->workers, o->lease_ms, o->pause_ms, o->no_fence ? "off" : "on");
    for (size_t i = 0; i < n; i++) {
        const torture_hold *h = &sh->holds[i];
        fprintf(f, "hold %d %" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64 " %s %s\n", h->worker, h->token, h->try_us,
                h->acq_us, h->rel_us, outcome[h->outcome & 3], was_paused(h, p, np) ? "paused" : "-");
    }
    for (size_t i = 0; i < np; i++)
        fprintf(f, "pause %d %" PRId64 " %" PRId64 "\n", p[i].worker, p[i].from_us, p[i].to_us);
    return fclose(f) == 0 ? 0 : -1;
}

static const char *verdict_name(int code)
{
    return code == TORTURE_EXIT_SAFE ? "SAFE" : code == TORTURE_EXIT_UNSAFE ? "UNSAFE" : "INCONCLUSIVE";
}

static void print_text(FILE *f, const torture_opts *o, const torture_keys *k, const torture_verdict *v)
{
    char url[1024];
    cli_redact_url(o->url, url, sizeof(url));
    fprintf(f, "dlock torture: %s, lock '%s', %d workers, %" PRId64 " ms, lease %" PRId64 " ms, pause %" PRId64
               " ms, fencing %s\n", url, k->lock, o->workers, o->duration_ms, o->lease_ms, o->pause_ms,
            o->no_fence ? "off" : "on");
    fprintf(f, "pauses: %zu; holdings: %zu; writes accepted: %zu; reads refused: %zu; writes refused: %zu; "
               "storage errors: %zu; lost-lock callbacks: %d\n", v->pauses, v->holds, v->store.n_accepted,
            v->refused_reads, v->refused_writes, v->store_errors, v->lost_callbacks);
    fprintf(f, "counter: %lld (want %zu); lost updates: %lld; accepted tokens out of order: %zu; "
               "overlaps of unpaused holders: %zu\n", v->store.counter, v->store.n_accepted, v->lost_updates,
            v->store.out_of_order, v->overlaps);
    for (int i = 0; i < v->n_reasons; i++) fprintf(f, "  %s\n", v->reasons[i]);
    fprintf(f, "verdict: %s\n", verdict_name(v->code));
}

/* A JSON string without escapes needed: reasons are our own ASCII text. */
static void print_json(FILE *f, const torture_opts *o, const torture_verdict *v)
{
    fprintf(f, "{\"verdict\":\"%s\",\"exit\":%d,\"workers\":%d,\"duration_ms\":%" PRId64 ",\"lease_ms\":%" PRId64
               ",\"pause_ms\":%" PRId64 ",\"fencing\":%s,", verdict_name(v->code), v->code, o->workers,
            o->duration_ms, o->lease_ms, o->pause_ms, o->no_fence ? "false" : "true");
    fprintf(f, "\"pauses\":%zu,\"holdings\":%zu,\"writes_accepted\":%zu,\"reads_refused\":%zu,"
               "\"writes_refused\":%zu,\"storage_errors\":%zu,\"lost_callbacks\":%d,\"failed_workers\":%d,",
            v->pauses, v->holds, v->store.n_accepted, v->refused_reads, v->refused_writes, v->store_errors,
            v->lost_callbacks, v->failed_workers);
    fprintf(f, "\"counter\":%lld,\"lost_updates\":%lld,\"tokens_out_of_order\":%zu,\"overlaps\":%zu,\"reasons\":[",
            v->store.counter, v->lost_updates, v->store.out_of_order, v->overlaps);
    for (int i = 0; i < v->n_reasons; i++) fprintf(f, "%s\"%s\"", i ? "," : "", v->reasons[i]);
    fprintf(f, "]}\n");
}

void torture_print(FILE *f, const torture_opts *o, const torture_keys *k, const torture_verdict *v)
{
    if (o->json) print_json(f, o, v);
    else print_text(f, o, k, v);
}
