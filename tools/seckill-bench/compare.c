/* compare.c: seckill-bench --mode compare. Four stock-deduction strategies,
 * each on a fresh campaign of the same Redis with the same buyers, in two
 * phases: throughput (ample stock, a new user per attempt, for --duration:
 * every decision deducts for real, so no sold-out shortcut inflates it) and
 * correctness (small stock, every user fires --repeat attempts at once).
 * Oversold and duplicates come from the answers each strategy gave, checked
 * against what Redis holds afterwards; unsafe variants are reported as
 * measured, never corrected.
 *   pessimistic   libdlock lock per campaign; GET / SISMEMBER / DECR / SADD
 *                 inside it, from --threads threads with their own connections
 *   optimistic    SISMEMBER, DECR, INCR back when negative, SADD (no lock)
 *   lua-single    sk_engine with max_batch = 1 (one script call a purchase)
 *   lua-coalesced sk_engine with its default max_batch (what seckilld runs)
 * --replica-acks / --replica-ack-timeout-ms set the lua strategies'
 * acknowledgement (WAIT behind each batch, docs/design/promise.md): run
 * once with 0 and once with 1 against a master with a replica to measure
 * what the promise costs; "pending" counts acceptances not acknowledged. */
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "compare.h"

#include "dlock/dlock.h"
#include "dlock/lock.h"
#include "engine.h"
#include "histogram.h"
#include "layout.h"
#include "options.h"
#include "redis_io.h"
#include "url.h"
#include "util.h"

enum { S_PESSIMISTIC, S_OPTIMISTIC, S_LUA_SINGLE, S_LUA_COALESCED, S_COUNT };
static const char *const strategy_names[S_COUNT] = {"pessimistic", "optimistic", "lua-single",
                                                     "lua-coalesced"};

typedef struct cmp_opts {
    const char *redis_url;
    dlock__url url;
    double duration_s;
    int threads, inflight, stock, users, repeat;
    int replica_acks;
    double ack_timeout_ms;
    bool csv, smoke, help;
    bool run[S_COUNT];
} cmp_opts;

/* What one strategy did in one phase. */
typedef struct cmp_stats {
    uint64_t decisions; /* accepted + refused (sold out, already bought) */
    uint64_t accepted, errors, soldout_local;
    uint64_t pending; /* lua-*: accepted but not acknowledged (202 in seckilld) */
    double elapsed_s;
    dlock__hist lat;
    double mean_batch;    /* lua-*: purchases per script call */
    long long stock_left; /* Redis, after the phase */
    uint64_t oversold, duplicates;
} cmp_stats;

/* The buyers of one phase; shared by all workers of a strategy. */
typedef struct cmp_work {
    char campaign[65];
    char stock_key[96], bought_key[96]; /* the hand-written strategies' keys */
    bool throughput;
    int64_t deadline_us;
    int n_users, repeat;
    atomic_uint_fast64_t next;
    atomic_int *user_acc; /* accepted per user (correctness phase) */
    const char *run_id;
} cmp_work;

/* Next attempt: writes the user name; false when the phase is over. In the
 * correctness phase a user's attempts are adjacent, so they run at once. */
static bool work_next(cmp_work *w, char *user, size_t n, int *uidx_out)
{
    if (w->throughput) {
        if (dlock__now_us() >= w->deadline_us) return false;
        uint64_t seq = atomic_fetch_add(&w->next, 1);
        snprintf(user, n, "t%s-%llu", w->run_id, (unsigned long long)seq);
        *uidx_out = -1;
        return true;
    }
    uint64_t i = atomic_fetch_add(&w->next, 1);
    if (i >= (uint64_t)w->n_users * (uint64_t)w->repeat) return false;
    *uidx_out = (int)(i / (uint64_t)w->repeat);
    snprintf(user, n, "u%s-%d", w->run_id, *uidx_out);
    return true;
}

/* ---- plain commands ---------------------------------------------------- */

static int cmd(dlock__conn *c, dlock__reply **r, int argc, const char **argv)
{
    size_t lens[16];
    for (int i = 0; i < argc && i < 16; i++) lens[i] = strlen(argv[i]);
    int rc = dlock__conn_cmd(c, argc, argv, lens, r);
    if (rc == 0 && dlock__reply_kind(*r) == DLOCK__R_ERROR) {
        dlock__reply_free(*r);
        *r = NULL;
        return DLOCK_ESERVER;
    }
    return rc;
}

/* Runs a command whose reply is an integer (or a nil / numeric string). */
static int cmd_int(dlock__conn *c, long long *v_out, int argc, const char **argv)
{
    dlock__reply *r = NULL;
    int rc = cmd(c, &r, argc, argv);
    if (rc) return rc;
    *v_out = 0;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER) *v_out = dlock__reply_int(r);
    else if (dlock__reply_kind(r) == DLOCK__R_STRING) *v_out = strtoll(dlock__reply_str(r, NULL), NULL, 10);
    dlock__reply_free(r);
    return 0;
}

static int cmd2(dlock__conn *c, const char *a, const char *b)
{
    long long v;
    const char *argv[] = {a, b};
    return cmd_int(c, &v, 2, argv);
}

/* ---- the hand-written strategies: threads, one connection each --------- */

typedef struct cmp_thread {
    pthread_t tid;
    int strategy;
    cmp_work *w;
    const cmp_opts *o;
    dlock_client *client;
    pthread_barrier_t *start;
    int err;
    cmp_stats st;
} cmp_thread;

/* One purchase: 1 accepted, 0 refused, < 0 error. A failed unlock (lock
 * lost while held) is counted in *errors but keeps the decision, so a sale
 * made under a lost lock still shows up in oversold/duplicates. */
static int decide_pessimistic(dlock__conn *c, dlock_lock *lock, const cmp_work *w, const char *user,
                              uint64_t *errors)
{
    int rc = dlock_lock_try_lock(lock, 10000, 10000, NULL);
    if (rc) return rc;
    long long stock = 0, member = 0, v = 0;
    const char *get[] = {"GET", w->stock_key};
    const char *ism[] = {"SISMEMBER", w->bought_key, user};
    const char *decr[] = {"DECR", w->stock_key};
    const char *sadd[] = {"SADD", w->bought_key, user};
    int res = cmd_int(c, &stock, 2, get);
    if (res == 0) res = cmd_int(c, &member, 3, ism);
    if (res == 0 && !member && stock >= 1) {
        res = cmd_int(c, &v, 2, decr);
        if (res == 0) res = cmd_int(c, &v, 3, sadd);
        if (res == 0) res = 1;
    }
    if (dlock_lock_unlock(lock) != 0) (*errors)++;
    return res;
}

static int decide_optimistic(dlock__conn *c, const cmp_work *w, const char *user)
{
    long long member = 0, left = 0, v = 0;
    const char *ism[] = {"SISMEMBER", w->bought_key, user};
    const char *decr[] = {"DECR", w->stock_key};
    const char *incr[] = {"INCR", w->stock_key};
    const char *sadd[] = {"SADD", w->bought_key, user};
    int rc = cmd_int(c, &member, 3, ism);
    if (rc || member) return rc ? rc : 0;
    if ((rc = cmd_int(c, &left, 2, decr)) != 0) return rc;
    if (left < 0) return (rc = cmd_int(c, &v, 2, incr)) != 0 ? rc : 0;
    return (rc = cmd_int(c, &v, 3, sadd)) != 0 ? rc : 1;
}

static void *thread_main(void *arg)
{
    cmp_thread *t = arg;
    dlock__conn *c = NULL;
    dlock_lock *lock = NULL;
    char err[256], lock_name[96], user[96];
    dlock__conn_opts co = {.connect_timeout_ms = 2000, .command_timeout_ms = 5000};
    t->err = dlock__conn_open(&t->o->url, &co, &c, err, sizeof(err));
    snprintf(lock_name, sizeof(lock_name), "cmp-lock:%s", t->w->campaign);
    if (t->err == 0 && t->strategy == S_PESSIMISTIC) t->err = dlock_lock_new(t->client, lock_name, NULL, &lock);
    pthread_barrier_wait(t->start); /* connected */
    pthread_barrier_wait(t->start); /* go */
    dlock__hist_reset(&t->st.lat);
    int uidx;
    while (t->err == 0 && work_next(t->w, user, sizeof(user), &uidx)) {
        int64_t t0 = dlock__now_us();
        int rc = t->strategy == S_PESSIMISTIC ? decide_pessimistic(c, lock, t->w, user, &t->st.errors)
                                              : decide_optimistic(c, t->w, user);
        if (rc < 0) {
            t->st.errors++;
            continue;
        }
        dlock__hist_record(&t->st.lat, (uint64_t)(dlock__now_us() - t0));
        t->st.decisions++;
        if (rc == 1) {
            t->st.accepted++;
            if (uidx >= 0) atomic_fetch_add(&t->w->user_acc[uidx], 1);
        }
    }
    dlock_lock_free(lock);
    dlock__conn_close(c);
    return NULL;
}

static int run_threads(const cmp_opts *o, int strategy, cmp_work *w, cmp_stats *st)
{
    dlock_client *client = NULL;
    if (strategy == S_PESSIMISTIC) {
        dlock_client_options co;
        dlock_client_options_init(&co);
        co.url = o->redis_url;
        co.pool_size = o->threads + 1;
        int rc = dlock_client_create(&co, &client);
        if (rc) {
            fprintf(stderr, "seckill-bench: libdlock client: %s\n", dlock_strerror(rc));
            return -1;
        }
    }
    cmp_thread *ts = calloc((size_t)o->threads, sizeof(*ts));
    pthread_barrier_t start;
    if (!ts || pthread_barrier_init(&start, NULL, (unsigned)o->threads + 1) != 0) {
        free(ts);
        dlock_client_destroy(client);
        return -1;
    }
    int started = 0, rc = 0;
    for (; started < o->threads; started++) {
        ts[started] = (cmp_thread){.strategy = strategy, .w = w, .o = o, .client = client, .start = &start};
        if (pthread_create(&ts[started].tid, NULL, thread_main, &ts[started]) != 0) break;
    }
    if (started < o->threads) { /* cannot happen in practice; do not deadlock the barrier */
        fputs("seckill-bench: cannot start threads\n", stderr);
        exit(2);
    }
    /* first wait: every worker is connected; the deadline is written before
     * the second, which orders it before the workers' reads */
    pthread_barrier_wait(&start);
    int64_t t0 = dlock__now_us();
    if (w->throughput) w->deadline_us = t0 + (int64_t)(o->duration_s * 1e6);
    pthread_barrier_wait(&start);
    dlock__hist_reset(&st->lat);
    for (int i = 0; i < started; i++) {
        pthread_join(ts[i].tid, NULL);
        if (ts[i].err && !rc) {
            fprintf(stderr, "seckill-bench: %s worker: %s\n", strategy_names[strategy], dlock_strerror(ts[i].err));
            rc = -1;
        }
        st->decisions += ts[i].st.decisions;
        st->accepted += ts[i].st.accepted;
        st->errors += ts[i].st.errors;
        dlock__hist_merge(&st->lat, &ts[i].st.lat);
    }
    st->elapsed_s = (double)(dlock__now_us() - t0) / 1e6;
    pthread_barrier_destroy(&start);
    free(ts);
    dlock_client_destroy(client);
    return rc;
}

/* ---- the Lua strategies: one sk_engine on one loop ---------------------- */

typedef struct eng_run eng_run;
typedef struct eng_slot {
    eng_run *r;
    int64_t t0_us;
    int uidx;
} eng_slot;

struct eng_run {
    struct event_base *base;
    sk_engine *e;
    cmp_work *w;
    cmp_stats *st;
    int outstanding;
    bool finished; /* outstanding reached 0 */
    bool closing;  /* sk_engine_free is failing what is left: do not re-issue */
    bool heated;
    int heat_err;
};

static void count_answer(eng_run *r, const eng_slot *s, int err, bool pending)
{
    if (err == 0) {
        r->st->accepted++;
        r->st->pending += pending;
        if (s->uidx >= 0) atomic_fetch_add(&r->w->user_acc[s->uidx], 1);
    } else if (err != SK_ESOLDOUT && err != SK_ELIMIT) {
        r->st->errors++;
        return;
    }
    r->st->decisions++;
    dlock__hist_record(&r->st->lat, (uint64_t)(dlock__now_us() - s->t0_us));
}

static void on_purchase(const sk_purchase_result *res, void *arg);

/* Keeps one purchase in flight on slot s, or retires the slot. */
static void issue(eng_slot *s)
{
    eng_run *r = s->r;
    char user[96];
    while (work_next(r->w, user, sizeof(user), &s->uidx)) {
        s->t0_us = dlock__now_us();
        int rc = sk_engine_purchase(r->e, r->w->campaign, user, 1, NULL, NULL, on_purchase, s);
        if (rc == 0) return;
        if (rc == SK_ESOLDOUT) r->st->soldout_local++;
        count_answer(r, s, rc, false);
    }
    if (--r->outstanding == 0) r->finished = true;
}

static void on_purchase(const sk_purchase_result *res, void *arg)
{
    eng_slot *s = arg;
    if (s->r->closing) return;
    count_answer(s->r, s, res->err, res->pending);
    issue(s);
}

static void on_heat(int err, const sk_campaign_info *info, void *arg)
{
    (void)info;
    eng_run *r = arg;
    r->heat_err = err;
    r->heated = true;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* Runs the loop until *flag is true (checked every few ms) or timeout_ms. */
static bool loop_until(struct event_base *base, const bool *flag, int64_t timeout_ms)
{
    struct event *tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    struct timeval tv = {0, 5000};
    if (!tick || event_add(tick, &tv) != 0) {
        if (tick) event_free(tick);
        return false;
    }
    int64_t end = dlock__now_ms() + timeout_ms;
    while (!*flag && dlock__now_ms() < end) event_base_loop(base, EVLOOP_ONCE);
    event_free(tick);
    return *flag;
}

/* Keeps o->inflight purchases in flight until the phase is over; the
 * slots go to *slots_out (freed by the caller after the engine). 0 or -1. */
static int drive(eng_run *r, const cmp_opts *o, int strategy, eng_slot **slots_out)
{
    cmp_stats *st = r->st;
    int n = o->inflight;
    eng_slot *slots = *slots_out = calloc((size_t)n, sizeof(*slots));
    if (!slots) return -1;
    dlock__hist_reset(&st->lat);
    int64_t t0 = dlock__now_us();
    if (r->w->throughput) r->w->deadline_us = t0 + (int64_t)(o->duration_s * 1e6);
    r->outstanding = n;
    for (int i = 0; i < n; i++) {
        slots[i].r = r;
        issue(&slots[i]);
    }
    loop_until(r->base, &r->finished, (int64_t)(o->duration_s * 1000) + 60000);
    st->elapsed_s = (double)(dlock__now_us() - t0) / 1e6;
    int rc = r->outstanding == 0 ? 0 : -1;
    if (rc) fprintf(stderr, "seckill-bench: %s: purchases still pending after 60 s\n", strategy_names[strategy]);
    sk_engine_stats es;
    sk_engine_get_stats(r->e, &es);
    uint64_t calls = 0;
    for (int i = 0; i < SK_STAT_BATCH_BUCKETS; i++) calls += es.batches[i];
    st->mean_batch = calls ? (double)es.batched_purchases / (double)calls : 0;
    return rc;
}

static int run_engine(const cmp_opts *o, int strategy, cmp_work *w, int stock, cmp_stats *st)
{
    eng_run r = {.w = w, .st = st};
    sk_engine_opts eo;
    sk_engine_opts_init(&eo);
    if (strategy == S_LUA_SINGLE) eo.max_batch = 1;
    eo.replica_acks = o->replica_acks;
    eo.replica_ack_timeout_ms = (int64_t)o->ack_timeout_ms;
    eo.order_ttl_ms = 120000; /* the statuses of the bench's orders go 2 min after its campaign ends */
    char err[256];
    r.base = event_base_new();
    if (!r.base || sk_engine_new(r.base, o->redis_url, &eo, &r.e, err, sizeof(err)) != 0) {
        fprintf(stderr, "seckill-bench: engine: %s\n", r.base ? err : "no event base");
        if (r.base) event_base_free(r.base);
        return -1;
    }
    int rc = -1;
    bool ready = false;
    eng_slot *slots = NULL;
    for (int64_t end = dlock__now_ms() + 5000; !ready && dlock__now_ms() < end;) {
        bool never = false;
        loop_until(r.base, &never, 10);
        ready = sk_engine_ready(r.e);
    }
    sk_campaign d = {.stock = stock, .per_user_limit = 1, .price_cents = 100};
    snprintf(d.id, sizeof(d.id), "%s", w->campaign);
    snprintf(d.title, sizeof(d.title), "seckill-bench compare");
    d.starts_at_ms = dlock__wall_ms() - 60000;
    d.ends_at_ms = dlock__wall_ms() + 3600 * 1000;
    if (!ready) {
        fputs("seckill-bench: engine not ready after 5 s (Redis down?)\n", stderr);
    } else if (sk_engine_campaign_heat(r.e, &d, SK_HEAT_FORCE, on_heat, &r) != 0 ||
               !loop_until(r.base, &r.heated, 5000) || r.heat_err != 0) {
        fprintf(stderr, "seckill-bench: pre-heating %s failed\n", w->campaign);
    } else {
        rc = drive(&r, o, strategy, &slots);
    }
    r.closing = true;
    sk_engine_free(r.e); /* may still call back into slots: freed after it */
    free(slots);
    event_base_free(r.base);
    return rc;
}

/* ---- phases ------------------------------------------------------------ */

static void keys_of(cmp_work *w)
{
    sk_campaign_key(w->campaign, "stock", w->stock_key, sizeof(w->stock_key));
    sk_campaign_key(w->campaign, "bought", w->bought_key, sizeof(w->bought_key));
}

/* Drops what a phase left in Redis (order hashes expire by themselves). */
static void cleanup(dlock__conn *c, const cmp_work *w)
{
    char k[128];
    const char *suffix[] = {"stock", "bought", "meta", "buyers", "orders"};
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        sk_campaign_key(w->campaign, suffix[i], k, sizeof(k));
        cmd2(c, "UNLINK", k);
    }
    long long v;
    const char *srem[] = {"SREM", "seckill:campaigns", w->campaign};
    cmd_int(c, &v, 3, srem);
}

static int run_phase(const cmp_opts *o, dlock__conn *admin, const char *run_id, int strategy,
                     bool throughput, cmp_stats *st)
{
    static cmp_work w;
    memset(&w, 0, sizeof(w));
    snprintf(w.campaign, sizeof(w.campaign), "cmp-%s-%s-%s", run_id, strategy_names[strategy],
             throughput ? "tp" : "ok");
    keys_of(&w);
    w.throughput = throughput;
    w.run_id = run_id;
    w.n_users = o->users;
    w.repeat = o->repeat;
    w.deadline_us = INT64_MAX; /* set when the workers start */
    atomic_init(&w.next, 0);
    int stock = throughput ? 1000000000 : o->stock;
    w.user_acc = calloc((size_t)o->users, sizeof(atomic_int));
    if (!w.user_acc) return -1;
    for (int i = 0; i < o->users; i++) atomic_init(&w.user_acc[i], 0);
    int rc;
    if (strategy == S_PESSIMISTIC || strategy == S_OPTIMISTIC) {
        char sv[16];
        snprintf(sv, sizeof(sv), "%d", stock);
        long long v;
        const char *set[] = {"SET", w.stock_key, sv};
        rc = cmd_int(admin, &v, 3, set);
        if (rc == 0) rc = run_threads(o, strategy, &w, st);
    } else {
        rc = run_engine(o, strategy, &w, stock, st);
    }
    long long left = 0;
    const char *get[] = {"GET", w.stock_key};
    if (rc == 0) rc = cmd_int(admin, &left, 2, get);
    st->stock_left = left;
    if (!throughput) {
        st->oversold = st->accepted > (uint64_t)stock ? st->accepted - (uint64_t)stock : 0;
        if (left < 0 && (uint64_t)-left > st->oversold) st->oversold = (uint64_t)-left;
        for (int i = 0; i < o->users; i++)
            if (atomic_load(&w.user_acc[i]) > 1) st->duplicates++;
    }
    cleanup(admin, &w);
    free(w.user_acc);
    return rc;
}

/* ---- output -------------------------------------------------------------- */

static double per_s(const cmp_stats *s)
{
    return s->elapsed_s > 0 ? (double)s->decisions / s->elapsed_s : 0;
}

static void print_csv(const cmp_opts *o, const cmp_stats tp[], const cmp_stats ok[])
{
    printf("strategy,decisions_per_s,p50_us,p99_us,oversold,duplicates,tp_decisions,tp_errors,"
           "tp_soldout_local,ok_attempts,ok_accepted,ok_stock,ok_stock_left,ok_errors,threads_or_inflight,tp_mean_batch,"
           "tp_pending\n");
    for (int s = 0; s < S_COUNT; s++) {
        if (!o->run[s]) continue;
        printf("%s,%.0f,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%d,%llu,%d,%lld,%llu,%d,%.1f,%llu\n", strategy_names[s],
               per_s(&tp[s]), (unsigned long long)dlock__hist_quantile(&tp[s].lat, 0.5),
               (unsigned long long)dlock__hist_quantile(&tp[s].lat, 0.99),
               (unsigned long long)ok[s].oversold, (unsigned long long)ok[s].duplicates,
               (unsigned long long)tp[s].decisions, (unsigned long long)tp[s].errors,
               (unsigned long long)tp[s].soldout_local, o->users * o->repeat,
               (unsigned long long)ok[s].accepted, o->stock, ok[s].stock_left,
               (unsigned long long)ok[s].errors, s <= S_OPTIMISTIC ? o->threads : o->inflight,
               tp[s].mean_batch, (unsigned long long)tp[s].pending);
    }
}

static void print_human(const cmp_opts *o, const cmp_stats tp[], const cmp_stats ok[])
{
    printf("throughput: %.1f s each, stock 1e9, a new user per attempt; pessimistic/optimistic: %d threads, "
           "lua: %d purchases in flight\n",
           o->duration_s, o->threads, o->inflight);
    printf("correctness: stock %d, limit 1, %d users x %d concurrent attempts\n", o->stock, o->users, o->repeat);
    printf("%-14s %12s %9s %9s %9s %10s %8s %8s %6s %8s\n", "strategy", "decisions/s", "p50_us", "p99_us",
           "oversold", "duplicates", "accepted", "errors", "batch", "pending");
    for (int s = 0; s < S_COUNT; s++) {
        if (!o->run[s]) continue;
        printf("%-14s %12.0f %9llu %9llu %9llu %10llu %8llu %8llu %6.1f %8llu\n", strategy_names[s], per_s(&tp[s]),
               (unsigned long long)dlock__hist_quantile(&tp[s].lat, 0.5),
               (unsigned long long)dlock__hist_quantile(&tp[s].lat, 0.99),
               (unsigned long long)ok[s].oversold, (unsigned long long)ok[s].duplicates,
               (unsigned long long)ok[s].accepted, (unsigned long long)(tp[s].errors + ok[s].errors),
               tp[s].mean_batch, (unsigned long long)(tp[s].pending + ok[s].pending));
    }
    if (o->run[S_OPTIMISTIC] && (ok[S_OPTIMISTIC].oversold || ok[S_OPTIMISTIC].duplicates))
        printf("optimistic is unsafe as commonly written: the bought-set check and the SADD "
               "are separate commands\n");
}

/* ---- options ------------------------------------------------------------- */

static int parse_strategies(void *base, const char *list, char *err, size_t errlen)
{
    cmp_opts *o = base;
    memset(o->run, 0, sizeof(o->run));
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int s = 0; s < S_COUNT; s++)
            if (strlen(strategy_names[s]) == n && strncmp(p, strategy_names[s], n) == 0) found = s;
        if (found < 0) {
            snprintf(err, errlen, "unknown strategy in '%s'", list);
            return -1;
        }
        o->run[found] = true;
        p += n;
        if (*p == ',') p++;
    }
    for (int s = 0; s < S_COUNT; s++)
        if (o->run[s]) return 0;
    snprintf(err, errlen, "--strategies names none");
    return -1;
}

static int check_mode(void *base, const char *v, char *err, size_t errlen)
{
    (void)base;
    if (strcmp(v, "compare") == 0) return 0;
    snprintf(err, errlen, "compare options with --mode '%s'", v);
    return -1;
}

#define OFF(f) offsetof(cmp_opts, f)

static const opt_spec specs[] = {
    {.name = "mode", .type = OPT_CALL, .call = check_mode, .arg = "compare", .help = "this mode"},
    {.name = "redis-url", .type = OPT_STR, .off = OFF(redis_url), .arg = "URL", .help = "the Redis (required)"},
    {.name = "duration", .type = OPT_SECONDS, .off = OFF(duration_s), .lo = 1, .hi = 3600000, .unit = OPT_UNIT_S,
     .arg = "DUR", .def = "3", .help = "throughput phase per strategy, up to 1h (default 3s;\na bare number is seconds)"},
    {.name = "threads", .type = OPT_INT, .off = OFF(threads), .lo = 1, .hi = 1000, .arg = "N", .def = "50",
     .help = "threads of pessimistic/optimistic, one connection each (default 50)"},
    {.name = "inflight", .type = OPT_INT, .off = OFF(inflight), .lo = 1, .hi = 100000, .arg = "N", .def = "128",
     .help = "purchases in flight on the engine (lua-*) (default 128)"},
    {.name = "stock", .type = OPT_INT, .off = OFF(stock), .lo = 0, .hi = 100000000, .arg = "N", .def = "100",
     .help = "correctness phase stock (default 100)"},
    {.name = "users", .type = OPT_INT, .off = OFF(users), .lo = 1, .hi = 10000000, .arg = "N", .def = "2000",
     .help = "correctness phase users (default 2000)"},
    {.name = "repeat", .type = OPT_INT, .off = OFF(repeat), .lo = 1, .hi = 1000, .arg = "N", .def = "4",
     .help = "concurrent attempts per user (default 4)"},
    {.name = "strategies", .type = OPT_CALL, .call = parse_strategies, .arg = "L",
     .def = "pessimistic,optimistic,lua-single,lua-coalesced",
     .help = "comma list of pessimistic,optimistic,lua-single,lua-coalesced\n(default all)"},
    {.name = "replica-acks", .type = OPT_INT, .off = OFF(replica_acks), .lo = -1, .hi = 1000, .arg = "N",
     .def = "-1", .help = "lua-*: replicas WAIT waits for behind each batch (-1: the master's\n"
                          "connected replicas; 0: no WAIT) (default -1)"},
    {.name = "replica-ack-timeout-ms", .type = OPT_NUMBER, .off = OFF(ack_timeout_ms), .lo = 1, .hi = 600000,
     .arg = "MS", .def = "100", .help = "lua-*: WAIT's timeout (default 100)"},
    {.name = "csv", .type = OPT_FLAG, .off = OFF(csv), .help = "CSV output"},
    {.name = "smoke", .type = OPT_FLAG, .off = OFF(smoke),
     .help = "tiny run for CI (0.3 s, 4 threads, 16 in flight, 40 users x 4, stock 10)"},
    {.name = "help", .short_name = 'h', .type = OPT_FLAG, .off = OFF(help), .help = "show this help"},
};

static void usage(FILE *f)
{
    fputs("usage: seckill-bench --mode compare --redis-url URL [options]\n", f);
    opt_print_help(f, specs, OPT_COUNT(specs));
    fputs("Exit status: 0 when lua-single and lua-coalesced oversold nothing, gave nobody more\n"
          "than the limit and had no errors, 1 otherwise, 2 on usage or setup errors.\n",
          f);
}

/* 0, 1 (--help printed) or -1 (usage error printed). */
static int parse(cmp_opts *o, int argc, char **argv)
{
    char err[256];
    if (opt_load(specs, OPT_COUNT(specs), argc, argv, o, NULL, err, sizeof(err))) {
        fprintf(stderr, "seckill-bench: %s (see --mode compare --help)\n", err);
        return -1;
    }
    if (o->help) {
        usage(stdout);
        return 1;
    }
    if (!o->redis_url) {
        fputs("seckill-bench: --mode compare needs --redis-url\n", stderr);
        return -1;
    }
    if (dlock__url_parse(o->redis_url, &o->url, err, sizeof(err)) != 0) {
        fprintf(stderr, "seckill-bench: bad --redis-url: %s\n", err);
        return -1;
    }
    if (o->smoke) {
        o->duration_s = 0.3;
        o->threads = 4;
        o->inflight = 16;
        o->users = 40;
        o->repeat = 4;
        o->stock = 10;
    }
    return 0;
}

int cmp_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mode=compare") == 0) return 1;
        if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "compare") == 0) return 1;
    }
    return 0;
}

int cmp_main(int argc, char **argv)
{
    static cmp_opts o;
    static cmp_stats tp[S_COUNT], ok[S_COUNT];
    int parsed = parse(&o, argc, argv);
    if (parsed != 0) return parsed > 0 ? 0 : 2;
    char run_id[9], err[256];
    if (dlock__random_hex(run_id, 4) != 0) return 2;
    dlock__conn *admin = NULL;
    dlock__conn_opts co = {.connect_timeout_ms = 2000, .command_timeout_ms = 10000};
    if (dlock__conn_open(&o.url, &co, &admin, err, sizeof(err)) != 0) {
        fprintf(stderr, "seckill-bench: cannot connect to Redis: %s\n", err);
        dlock__url_free(&o.url);
        return 2;
    }
    int rc = 0;
    for (int s = 0; s < S_COUNT && rc == 0; s++) {
        if (!o.run[s]) continue;
        if (!o.csv) fprintf(stderr, "compare: %s ...\n", strategy_names[s]);
        if (run_phase(&o, admin, run_id, s, true, &tp[s]) != 0 ||
            run_phase(&o, admin, run_id, s, false, &ok[s]) != 0)
            rc = 2;
    }
    dlock__conn_close(admin);
    dlock__url_free(&o.url);
    if (rc) return rc;
    if (o.csv) print_csv(&o, tp, ok);
    else print_human(&o, tp, ok);
    for (int s = S_LUA_SINGLE; s <= S_LUA_COALESCED; s++)
        if (o.run[s] && (ok[s].oversold || ok[s].duplicates || ok[s].errors)) rc = 1;
    return rc;
}
