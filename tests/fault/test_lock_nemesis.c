/* test_lock_nemesis.c: the lock workload of the fault suite. Worker
 * processes increment a counter by read-then-write inside a dlock lock
 * (watchdog mode), against a storage that refuses operations carrying a
 * fencing token lower than one it has seen. A nemesis SIGSTOPs the current
 * holder past its lease, then SIGCONTs it. Pass: the counter equals the
 * number of accepted writes (no lost update), refused operations are
 * counted, tokens of accepted writes only increase, and holders that were
 * never paused never overlapped. Usage: test_lock_nemesis [seconds] [workers]
 * [nofence] (defaults 6 s, 3 workers: the CI run; `make fault` runs it
 * longer). "nofence" sends token 0 to the storage, i.e. no fencing: the
 * checker must then catch lost updates (CTest expects that run to fail).
 * DLOCK_NEMESIS_URL=URL locks through URL (e.g. etcd://...) instead of a
 * redis-server of its own; DLOCK_NEMESIS_LEASE_MS sets the lease (default
 * 500; etcd leases are whole seconds, so its runs use 1000). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock/dlock.h"
#include "dlock/lock.h"
#include "redis_io.h"
#include "servers.h"
#include "util.h"

#define MAX_WORKERS 16
#define MAX_EVENTS 20000
static int64_t lease_ms = 500;
static const char *lock_url;

typedef struct holding {
    int worker;
    uint64_t token;
    int64_t t_acq_us, t_rel_us;
    int outcome; /* 0 write accepted, 1 read refused, 2 write refused, 3 storage error */
} holding;

typedef struct shared {
    volatile int holding[MAX_WORKERS]; /* 1 while worker i holds the lock */
    volatile int stop;
    volatile int n_events;
    holding events[MAX_EVENTS];
    volatile int lost_callbacks;
} shared;

static shared *sh;
static test_server lock_srv, store_srv;
static char store_script[4096];
static int64_t run_seconds = 6;
static int n_workers = 3;
static int no_fence;

static int load_script(void)
{
    const char *src = getenv("DLOCK_SOURCE_DIR");
    char path[512];
    snprintf(path, sizeof(path), "%s/tests/fault/fenced_store.lua", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(store_script, 1, sizeof(store_script) - 1, f);
    fclose(f);
    store_script[n] = '\0';
    return n > 0 ? 0 : -1;
}

/* One storage operation; returns 1 accepted (value in *value), 0 refused, -1 error. */
static int store_op(dlock__conn *c, const char *op, uint64_t token, long long *value)
{
    char tok[24], val[24];
    snprintf(tok, sizeof(tok), "%llu", no_fence ? 0ULL : (unsigned long long)token);
    snprintf(val, sizeof(val), "%lld", value ? *value : 0);
    const char *argv[] = {"EVAL", store_script, "3", "counter", "highest", "accepted", op, tok, val};
    dlock__reply *r = NULL;
    if (dlock__conn_cmd(c, 9, argv, NULL, &r) != 0) return -1;
    int rc = -1;
    if (dlock__reply_count(r) == 2) {
        rc = (int)dlock__reply_int(dlock__reply_at(r, 0));
        if (rc == 1 && value && strcmp(op, "read") == 0) *value = dlock__reply_int(dlock__reply_at(r, 1));
    }
    dlock__reply_free(r);
    return rc;
}

static void on_lost(dlock_lock *lock, int reason, void *ud)
{
    (void)lock;
    (void)reason;
    (void)ud;
    __atomic_add_fetch(&sh->lost_callbacks, 1, __ATOMIC_SEQ_CST);
}

static void record(int worker, uint64_t token, int64_t acq, int outcome)
{
    int i = __atomic_fetch_add(&sh->n_events, 1, __ATOMIC_SEQ_CST);
    if (i < MAX_EVENTS)
        sh->events[i] = (holding){worker, token, acq, dlock__now_us(), outcome};
}

static int worker_main(void *arg)
{
    int w = (int)(intptr_t)arg;
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = lock_url;
    o.watchdog_timeout_ms = lease_ms;
    dlock_client *c = NULL;
    if (dlock_client_create(&o, &c) != 0) return 10;
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.on_lost = on_lost;
    dlock_lock *l = NULL;
    if (dlock_lock_new(c, "nemesis:counter", &lo, &l) != 0) return 11;
    dlock__url su = {.kind = DLOCK__URL_TCP, .host = "127.0.0.1", .port = store_srv.port};
    dlock__conn_opts co = {.connect_timeout_ms = 1000, .command_timeout_ms = 3000};
    dlock__conn *store = NULL;
    if (dlock__conn_open(&su, &co, &store, NULL, 0) != 0) return 12;
    while (!sh->stop) {
        uint64_t token = 0;
        if (dlock_lock_try_lock(l, 200, 0, &token) != 0) continue;
        int64_t acq = dlock__now_us();
        sh->holding[w] = 1;
        long long v = 0;
        int outcome;
        int rc = store_op(store, "read", token, &v);
        if (rc == 1) {
            dlock__sleep_ms((int64_t)dlock__random_below(15) + 5); /* the window a pause hits */
            v++;
            rc = store_op(store, "write", token, &v);
            outcome = rc == 1 ? 0 : rc == 0 ? 2 : 3;
        } else {
            outcome = rc == 0 ? 1 : 3;
        }
        sh->holding[w] = 0;
        record(w, token, acq, outcome);
        dlock_lock_unlock(l); /* DLOCK_ELOST after a pause: expected */
        dlock__sleep_ms((int64_t)dlock__random_below(5));
    }
    dlock_lock_free(l);
    dlock__conn_close(store);
    dlock_client_destroy(c);
    return 0;
}

typedef struct pause_iv {
    int worker;
    int64_t from_us, to_us;
} pause_iv;

static bool was_paused(const holding *h, const pause_iv *p, int np)
{
    for (int i = 0; i < np; i++)
        if (p[i].worker == h->worker && p[i].from_us < h->t_rel_us && p[i].to_us > h->t_acq_us) return true;
    return false;
}

/* With DLOCK_NEMESIS_HISTORY=FILE, writes the history: one line a holding
 * (worker, token, acquire and release in monotonic us, outcome, paused)
 * and one a pause, for reading after a failure. */
static void write_history(int n, const pause_iv *p, int np)
{
    const char *path = getenv("DLOCK_NEMESIS_HISTORY");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) return;
    static const char *const outcome[] = {"write-accepted", "read-refused", "write-refused", "storage-error"};
    fprintf(f, "# hold worker token acquire_us release_us outcome paused\n# pause worker from_us to_us\n");
    for (int i = 0; i < n; i++) {
        const holding *h = &sh->events[i];
        fprintf(f, "hold %d %llu %lld %lld %s %s\n", h->worker, (unsigned long long)h->token,
                (long long)h->t_acq_us, (long long)h->t_rel_us, outcome[h->outcome & 3],
                was_paused(h, p, np) ? "paused" : "-");
    }
    for (int i = 0; i < np; i++)
        fprintf(f, "pause %d %lld %lld\n", p[i].worker, (long long)p[i].from_us, (long long)p[i].to_us);
    fclose(f);
}

static int cmp_acq(const void *a, const void *b)
{
    const holding *x = a, *y = b;
    return x->t_acq_us < y->t_acq_us ? -1 : x->t_acq_us > y->t_acq_us;
}

int main(int argc, char **argv)
{
    if (argc > 1) run_seconds = strtol(argv[1], NULL, 10);
    if (argc > 2) n_workers = (int)strtol(argv[2], NULL, 10);
    if (argc > 3) no_fence = strcmp(argv[3], "nofence") == 0;
    if (run_seconds < 1 || n_workers < 2 || n_workers > MAX_WORKERS) {
        fprintf(stderr, "usage: test_lock_nemesis [seconds>=1] [workers 2..%d]\n", MAX_WORKERS);
        return 2;
    }
    if (load_script() != 0) {
        fprintf(stderr, "cannot read tests/fault/fenced_store.lua (set DLOCK_SOURCE_DIR)\n");
        return 2;
    }
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 2;
    lock_url = getenv("DLOCK_NEMESIS_URL");
    if (getenv("DLOCK_NEMESIS_LEASE_MS")) lease_ms = strtol(getenv("DLOCK_NEMESIS_LEASE_MS"), NULL, 10);
    if (!lock_url && test_redis_start(&lock_srv, NULL) != 0) return 2;
    if (!lock_url) lock_url = lock_srv.url;
    if (lease_ms < 30 || test_redis_start(&store_srv, NULL) != 0) return 2;
    pid_t pids[MAX_WORKERS];
    for (int i = 0; i < n_workers; i++) pids[i] = test_fork(worker_main, (void *)(intptr_t)i);

    /* nemesis: every ~1 s pause the current holder for 2.5 leases */
    static pause_iv pauses[1000];
    int np = 0;
    int64_t end = dlock__now_ms() + run_seconds * 1000;
    while (dlock__now_ms() < end && np < 1000) {
        dlock__sleep_ms(700 + (int64_t)dlock__random_below(400));
        int victim = -1;
        for (int tries = 0; tries < 200 && victim < 0; tries++) {
            for (int i = 0; i < n_workers; i++)
                if (sh->holding[i]) victim = i;
            if (victim < 0) dlock__sleep_ms(1);
        }
        if (victim < 0) continue;
        pauses[np].worker = victim;
        pauses[np].from_us = dlock__now_us();
        kill(pids[victim], SIGSTOP);
        dlock__sleep_ms(lease_ms * 5 / 2);
        kill(pids[victim], SIGCONT);
        pauses[np++].to_us = dlock__now_us();
    }
    sh->stop = 1;
    int failed = 0;
    for (int i = 0; i < n_workers; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "worker %d exited abnormally (status %d)\n", i, st);
            failed = 1;
        }
    }

    /* --- checks --- */
    int n = sh->n_events < MAX_EVENTS ? sh->n_events : MAX_EVENTS;
    long long accepted = 0, refused_read = 0, refused_write = 0, errors = 0;
    for (int i = 0; i < n; i++) {
        accepted += sh->events[i].outcome == 0;
        refused_read += sh->events[i].outcome == 1;
        refused_write += sh->events[i].outcome == 2;
        errors += sh->events[i].outcome == 3;
    }
    char counter[32] = "", llen[32] = "";
    const char *get[2] = {"GET", "counter"}, *len[2] = {"LLEN", "accepted"};
    test_redis_cmd(&store_srv, counter, sizeof(counter), 2, get);
    test_redis_cmd(&store_srv, llen, sizeof(llen), 2, len);
    long long final = strtoll(counter, NULL, 10);
    /* tokens of accepted writes, in acceptance order, must only increase */
    int increasing = 1;
    uint64_t prev = 0;
    for (long long i = 0; i < strtoll(llen, NULL, 10); i++) {
        char idx[24], tok[32] = "";
        snprintf(idx, sizeof(idx), "%lld", i);
        const char *li[3] = {"LINDEX", "accepted", idx};
        test_redis_cmd(&store_srv, tok, sizeof(tok), 3, li);
        uint64_t t = strtoull(tok, NULL, 10);
        if (t <= prev) increasing = 0;
        prev = t;
    }
    /* holders never paused must never overlap */
    qsort(sh->events, (size_t)n, sizeof(holding), cmp_acq);
    write_history(n, pauses, np);
    int overlaps = 0;
    for (int i = 0; i < n; i++) {
        if (was_paused(&sh->events[i], pauses, np)) continue;
        for (int j = i + 1; j < n && sh->events[j].t_acq_us < sh->events[i].t_rel_us; j++)
            if (!was_paused(&sh->events[j], pauses, np)) overlaps++;
    }
    printf("lock nemesis: %d workers, %lld s, %d pauses, %d holdings: %lld writes accepted, "
           "%lld reads refused, %lld writes refused, %lld storage errors, %d lost-lock callbacks\n",
           n_workers, (long long)run_seconds, np, n, accepted, refused_read, refused_write, errors,
           sh->lost_callbacks);
    printf("counter %lld (want %lld), accepted tokens increasing: %s, overlaps of unpaused holders: %d\n",
           final, accepted, increasing ? "yes" : "NO", overlaps);
    if (final != accepted) {
        printf("lost updates: %lld\n", accepted - final);
        failed = 1;
    }
    if (!increasing || overlaps || errors) failed = 1;
    if (np == 0 || accepted == 0) {
        fprintf(stderr, "the run exercised nothing (no pause or no write): not a pass\n");
        failed = 1;
    }
    if (refused_read + refused_write + sh->lost_callbacks == 0) {
        fprintf(stderr, "no pause was noticed by anyone: the nemesis did not bite\n");
        failed = 1;
    }
    test_server_stop(&lock_srv);
    test_server_stop(&store_srv);
    printf("%s\n", failed ? "FAIL" : "PASS");
    return failed;
}
