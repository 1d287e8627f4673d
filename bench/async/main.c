/* dlock-async-bench: figures of libdlock's asynchronous client on one
 * libevent loop thread (run_async_bench.sh runs it and its references).
 *   --scenario lag        --freeze-pid PID: after one warm cycle, SIGSTOPs
 *                         the freezing proxy the URL points at, measures a
 *                         1 ms repeating timer's lateness for 1 s with
 *                         nothing in flight (the idle reference), then
 *                         starts --acquires acquires (wait 3 s) and
 *                         measures it for 4 s (the acquires end by their
 *                         deadline meanwhile)
 *   --scenario throughput independent uncontended lock cycles (acquire,
 *                         unlock) on --inflight names at once
 *   --scenario blocking   the same cycles with the blocking API, one thread
 *   --scenario waiters    --waiters handles waiting on one name: memory per
 *                         waiter, acquisition order, handoff time in round
 *                         trips (one uncontended acquire = one round trip)
 * Prints "RESULT name=value" lines (run_async_bench.sh makes the SUMMARY
 * lines from them and its references). */
#include <event2/event.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlock/async.h>
#include <dlock/async_libevent.h>
#include <dlock/lock.h>

typedef struct cfg {
    const char *url, *scenario;
    int freeze_pid, acquires, inflight, waiters;
    int64_t duration_ms;
} cfg;

static struct event_base *base;
static dlock_async_client *client;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void result(const char *name, double v)
{
    printf("RESULT %s=%.3f\n", name, v);
    fflush(stdout);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t pct(int64_t *v, size_t n, double p)
{
    if (!n) return 0;
    qsort(v, n, sizeof(*v), cmp_i64);
    size_t i = (size_t)ceil(p * (double)n) - 1;
    return v[i < n ? i : n - 1];
}

static void wake_cb(evutil_socket_t fd, short what, void *ud)
{
    (void)fd;
    (void)what;
    (void)ud;
}

static struct event *wake;

/* Runs the loop until *flag or bound_ms; a timer at the bound wakes a
 * loop that has nothing else to do (the client's read events persist).
 * The timer counts from the loop's cached time, which may be earlier than
 * ours: it is added again, with what is left, whenever it has fired. */
static void run_until(volatile int *flag, int64_t bound_ms)
{
    if (!wake) wake = evtimer_new(base, wake_cb, NULL);
    int64_t t0 = now_us(), left;
    while (!*flag && (left = bound_ms * 1000 - (now_us() - t0)) > 0) {
        if (!evtimer_pending(wake, NULL)) {
            struct timeval tv = {(time_t)(left / 1000000), (suseconds_t)(left % 1000000) + 1000};
            evtimer_add(wake, &tv);
        }
        event_base_loop(base, EVLOOP_ONCE);
    }
    evtimer_del(wake);
}

static void run_for(int64_t ms)
{
    static int never;
    run_until(&never, ms);
}

/* ---- one acquire or unlock, waited for -------------------------------------------- */

static void on_one(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    int *r = ud;
    r[0] = 1;
    r[1] = rc;
}

static int acquire_wait(dlock_async_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    int r[2] = {0, 0};
    int rc = dlock_async_lock_acquire(l, wait_ms, lease_ms, on_one, r);
    if (rc) return rc;
    run_until(&r[0], wait_ms + 5000);
    return r[0] ? r[1] : DLOCK_ETIMEOUT;
}

static int unlock_wait(dlock_async_lock *l)
{
    int r[2] = {0, 0};
    int rc = dlock_async_lock_unlock(l, on_one, r);
    if (rc) return rc;
    run_until(&r[0], 5000);
    return r[0] ? r[1] : DLOCK_ETIMEOUT;
}

static dlock_async_lock *new_lock(const char *name)
{
    dlock_async_lock *l = NULL;
    if (dlock_async_lock_new(client, name, NULL, &l) != 0) {
        fprintf(stderr, "dlock-async-bench: lock %s\n", name);
        exit(1);
    }
    return l;
}

/* ---- lag: the loop with Redis frozen and acquires in flight -------------------------- */

typedef struct lag_state {
    struct event *tick;
    int64_t due_us;
    int64_t *lags;
    size_t n, cap;
    int done_acquires;
} lag_state;

static void lag_tick(evutil_socket_t fd, short what, void *ud)
{
    (void)fd;
    (void)what;
    lag_state *s = ud;
    int64_t now = now_us();
    if (s->n < s->cap) s->lags[s->n++] = now > s->due_us ? now - s->due_us : 0;
    s->due_us = now + 1000;
    struct timeval one = {0, 1000};
    evtimer_add(s->tick, &one);
}

static void lag_done(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    (void)rc;
    ((lag_state *)ud)->done_acquires++;
}

/* Runs the 1 ms tick for ms and returns the p99 lateness (us). */
static int64_t lag_phase(lag_state *s, int64_t ms, int64_t *max_out)
{
    s->n = 0;
    s->due_us = now_us() + 1000;
    struct timeval one = {0, 1000};
    evtimer_add(s->tick, &one);
    run_for(ms);
    evtimer_del(s->tick);
    *max_out = pct(s->lags, s->n, 1.0);
    return pct(s->lags, s->n, 0.99);
}

static int scen_lag(const cfg *c)
{
    dlock_async_lock *warm = new_lock("bench:lag:warm");
    if (acquire_wait(warm, 0, 10000) != 0 || unlock_wait(warm) != 0) return 1;
    if (c->freeze_pid <= 0 || kill(c->freeze_pid, SIGSTOP) != 0) return 1;
    lag_state s = {.cap = 100000};
    s.lags = calloc(s.cap, sizeof(*s.lags));
    dlock_async_lock **ls = calloc((size_t)c->acquires, sizeof(*ls));
    s.tick = evtimer_new(base, lag_tick, &s);
    int64_t idle_max, busy_max;
    int64_t idle = lag_phase(&s, 1000, &idle_max);
    char name[64];
    int in_flight = 0;
    for (int i = 0; i < c->acquires; i++) {
        snprintf(name, sizeof(name), "bench:lag:%d", i);
        ls[i] = new_lock(name);
        if (dlock_async_lock_acquire(ls[i], 3000, 0, lag_done, &s) == 0) in_flight++;
    }
    int64_t busy = lag_phase(&s, 4000, &busy_max);
    kill(c->freeze_pid, SIGCONT);
    printf("lag, Redis frozen: idle loop p99 %lld us (max %lld); %d acquires in flight (%d ended by their "
           "deadline): p99 %lld us (max %lld), %zu ticks\n", (long long)idle, (long long)idle_max, in_flight,
           s.done_acquires, (long long)busy, (long long)busy_max, s.n);
    result("lag_idle_p99_ms", (double)idle / 1000.0);
    result("lag_in_flight_p99_ms", (double)busy / 1000.0);
    result("lag_in_flight", in_flight);
    for (int i = 0; i < c->acquires; i++) dlock_async_lock_free(ls[i]);
    event_free(s.tick);
    free(ls);
    free(s.lags);
    dlock_async_lock_free(warm);
    return in_flight == c->acquires ? 0 : 1;
}

/* ---- throughput: independent cycles, inflight at once ---------------------------------- */

typedef struct slot {
    dlock_async_lock *l;
    long cycles, errors;
    const int64_t *end_us;
} slot;

static void tp_acquired(dlock_async_lock *l, int rc, void *ud);

static void tp_next(slot *s)
{
    if (now_us() < *s->end_us && dlock_async_lock_acquire(s->l, 0, 10000, tp_acquired, s) != 0) s->errors++;
}

static void tp_unlocked(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    slot *s = ud;
    if (rc) s->errors++;
    else s->cycles++;
    tp_next(s);
}

static void tp_acquired(dlock_async_lock *l, int rc, void *ud)
{
    slot *s = ud;
    if (rc || dlock_async_lock_unlock(l, tp_unlocked, s) != 0) {
        s->errors++;
        tp_next(s);
    }
}

static int scen_throughput(const cfg *c)
{
    slot *slots = calloc((size_t)c->inflight, sizeof(*slots));
    int64_t end = now_us() + c->duration_ms * 1000;
    char name[64];
    for (int i = 0; i < c->inflight; i++) {
        snprintf(name, sizeof(name), "bench:tp:%d", i);
        slots[i] = (slot){.l = new_lock(name), .end_us = &end};
    }
    int64_t t0 = now_us();
    for (int i = 0; i < c->inflight; i++) tp_next(&slots[i]);
    run_for(c->duration_ms + 200);
    double secs = (double)(now_us() - t0) / 1e6;
    long cycles = 0, errors = 0;
    for (int i = 0; i < c->inflight; i++) {
        cycles += slots[i].cycles;
        errors += slots[i].errors;
        dlock_async_lock_free(slots[i].l);
    }
    secs = secs > (double)c->duration_ms / 1000.0 ? (double)c->duration_ms / 1000.0 : secs;
    printf("throughput: %ld cycles, %ld errors, %d in flight, %.2f s\n", cycles, errors, c->inflight, secs);
    result("async_cycles_per_s", (double)cycles / secs);
    free(slots);
    return errors ? 1 : 0;
}

/* ---- blocking: the same cycles with the blocking API on one thread ------------------------- */

static int scen_blocking(const cfg *c)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = c->url;
    dlock_client *bc = NULL;
    dlock_lock *l = NULL;
    if (dlock_client_create(&o, &bc) != 0 || dlock_lock_new(bc, "bench:blocking", NULL, &l) != 0) return 1;
    long cycles = 0, errors = 0;
    uint64_t fence;
    int64_t t0 = now_us(), end = t0 + c->duration_ms * 1000;
    while (now_us() < end) {
        /* a fence asked for: the same script as the asynchronous acquire */
        if (dlock_lock_try_lock(l, 0, 10000, &fence) == 0 && dlock_lock_unlock(l) == 0) cycles++;
        else errors++;
    }
    double secs = (double)(now_us() - t0) / 1e6;
    printf("blocking: %ld cycles, %ld errors, one thread, %.2f s\n", cycles, errors, secs);
    result("blocking_cycles_per_s", (double)cycles / secs);
    dlock_lock_free(l);
    dlock_client_destroy(bc);
    return errors ? 1 : 0;
}

/* ---- waiters: many handles waiting on one name ------------------------------------------------ */

typedef struct waiter {
    dlock_async_lock *l;
    int idx;
    struct wstate *s;
} waiter;

typedef struct wstate {
    int next_expected, out_of_order, acquired, failed;
    int all_done; /* acquired + failed == n */
    int64_t unlock_sent_us;
    int64_t *handoff_us;
    int n;
} wstate;

static void w_unlocked(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    (void)rc;
    (void)ud;
}

static void w_acquired(dlock_async_lock *l, int rc, void *ud)
{
    waiter *w = ud;
    wstate *s = w->s;
    if (rc) {
        s->failed++;
        s->all_done = s->acquired + s->failed >= s->n;
        return;
    }
    int64_t now = now_us();
    if (s->acquired < s->n) s->handoff_us[s->acquired] = now - s->unlock_sent_us;
    s->acquired++;
    if (w->idx != s->next_expected) s->out_of_order++;
    s->next_expected = w->idx + 1;
    s->all_done = s->acquired + s->failed >= s->n;
    s->unlock_sent_us = now_us();
    dlock_async_lock_unlock(l, w_unlocked, NULL);
}

static long rss_kb(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    if (f) fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One round trip: the median (and *p99_out) of 1000 uncontended single
 * acquires. */
static int64_t round_trip_us(int64_t *p99_out)
{
    enum { N = 1000 };
    dlock_async_lock *l = new_lock("bench:rtt");
    int64_t v[N];
    for (int i = 0; i < N; i++) {
        int64_t t0 = now_us();
        acquire_wait(l, 0, 10000);
        v[i] = now_us() - t0;
        unlock_wait(l);
    }
    dlock_async_lock_free(l);
    *p99_out = pct(v, N, 0.99);
    return pct(v, N, 0.5);
}

static int scen_waiters(const cfg *c)
{
    int64_t rtt_p99 = 0, rtt = round_trip_us(&rtt_p99);
    dlock_async_lock *holder = new_lock("bench:waiters");
    if (acquire_wait(holder, 0, 60000) != 0) return 1;
    wstate s = {.n = c->waiters};
    s.handoff_us = calloc((size_t)c->waiters, sizeof(*s.handoff_us));
    waiter *ws = calloc((size_t)c->waiters, sizeof(*ws));
    long rss0 = rss_kb();
    for (int i = 0; i < c->waiters; i++) {
        ws[i] = (waiter){.l = new_lock("bench:waiters"), .idx = i, .s = &s};
        if (dlock_async_lock_acquire(ws[i].l, 120000, 10000, w_acquired, &ws[i]) != 0) s.failed++;
        if (i % 500 == 499) event_base_loop(base, EVLOOP_NONBLOCK); /* first tries answered in order */
    }
    run_for(2000); /* every first try answered: all queued */
    long rss1 = rss_kb();
    s.unlock_sent_us = now_us();
    int64_t t0 = now_us();
    unlock_wait(holder);
    run_until(&s.all_done, 120000);
    double secs = (double)(now_us() - t0) / 1e6;
    int64_t p50 = pct(s.handoff_us, (size_t)s.acquired, 0.5), p99 = pct(s.handoff_us, (size_t)s.acquired, 0.99);
    printf("waiters: %d waiting, %d acquired once each in %.2f s, %d out of FIFO order, %d failed; "
           "handoff p50 %lld us, p99 %lld us; one round trip %lld us; rss +%ld kB\n",
           c->waiters, s.acquired, secs, s.out_of_order, s.failed, (long long)p50, (long long)p99, (long long)rtt,
           rss1 - rss0);
    result("waiter_bytes", (double)(rss1 - rss0) * 1024.0 / c->waiters);
    result("waiters_out_of_order", s.out_of_order);
    result("handoff_p50_us", (double)p50);
    result("handoff_p99_us", (double)p99);
    result("round_trip_us", (double)rtt);
    result("round_trip_p99_us", (double)rtt_p99);
    for (int i = 0; i < c->waiters; i++) dlock_async_lock_free(ws[i].l);
    dlock_async_lock_free(holder);
    free(ws);
    free(s.handoff_us);
    return s.acquired == c->waiters ? 0 : 1;
}

static int parse(int argc, char **argv, cfg *c)
{
    *c = (cfg){.url = "redis://127.0.0.1:6379", .scenario = "throughput", .acquires = 1000, .inflight = 64,
               .waiters = 10000, .duration_ms = 2000};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--url") == 0) c->url = v;
        else if (strcmp(k, "--scenario") == 0) c->scenario = v;
        else if (strcmp(k, "--freeze-pid") == 0) c->freeze_pid = (int)strtol(v, NULL, 10);
        else if (strcmp(k, "--acquires") == 0) c->acquires = (int)strtol(v, NULL, 10);
        else if (strcmp(k, "--inflight") == 0) c->inflight = (int)strtol(v, NULL, 10);
        else if (strcmp(k, "--waiters") == 0) c->waiters = (int)strtol(v, NULL, 10);
        else if (strcmp(k, "--duration-ms") == 0) c->duration_ms = strtoll(v, NULL, 10);
        else return -1;
    }
    return c->acquires > 0 && c->inflight > 0 && c->waiters > 0 && c->duration_ms > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    cfg c;
    if (parse(argc, argv, &c) != 0) {
        fprintf(stderr, "usage: dlock-async-bench --url URL --scenario lag|throughput|blocking|waiters "
                        "[--freeze-pid PID] [--acquires N] [--inflight N] [--waiters N] [--duration-ms MS]\n");
        return 2;
    }
    if (strcmp(c.scenario, "blocking") == 0) return scen_blocking(&c);
    struct event_config *ec = event_config_new();
    event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER); /* the lag is measured in microseconds */
    base = event_base_new_with_config(ec);
    event_config_free(ec);
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = c.url;
    dlock_async_loop loop;
    dlock_async_libevent(&loop, base);
    if (dlock_async_client_new(&loop, &o, &client) != 0) return 1;
    int rc = strcmp(c.scenario, "lag") == 0          ? scen_lag(&c)
             : strcmp(c.scenario, "throughput") == 0 ? scen_throughput(&c)
             : strcmp(c.scenario, "waiters") == 0    ? scen_waiters(&c)
                                                     : 2;
    dlock_async_client_free(client);
    if (wake) event_free(wake);
    event_base_free(base);
    return rc;
}
