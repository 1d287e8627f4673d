/* lease_probe.c: the two processes of the lease-partition tests
 * (tests/fault/lease_partition.sh). Every line it prints carries a
 * CLOCK_MONOTONIC time in ms, a clock shared by every process of the machine
 * (network namespaces included), so the script compares the holder's and
 * the waiter's times directly.
 *
 *   lease_probe now
 *       prints the CLOCK_MONOTONIC time in ms (the script's own clock).
 *   lease_probe holder URL LEASE_MS OBJECTS BOUND_MS
 *       one client, watchdog_timeout_ms = LEASE_MS, acquires every object of
 *       OBJECTS (comma list of lock, reentrant, rwlock, semaphore) in
 *       watchdog mode and prints "<object> held <ms>" for each; then polls
 *       the local held state every 5 ms (dlock_lock_is_held,
 *       dlock_rwlock_write_count, dlock_semaphore_held) and prints
 *       "<object> stopped_believing <ms>" the first time it says "not
 *       held"; ends when all have, or BOUND_MS after the last acquire.
 *   lease_probe waiter URL OBJECTS BOUND_MS
 *       one client, one thread per object, each waiting at most BOUND_MS
 *       for the same name; prints "<object> acquired <ms>" (or
 *       "<object> not_acquired <ms> <error>").
 *
 * The holder also prints "<object> lost_callback <ms>" when the library
 * calls a lock's on_lost, and, where the library states validity deadlines
 * (dlock_*_validity_ms), checks them (lp_poll); the read-write lock and
 * the semaphore report their loss callbacks too. Library log lines go to stderr with the same clock. Exit 0, 1 on a failed
 * acquire, 2 on bad usage. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlock/dlock.h"
#include "dlock/lock.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"

enum { LP_LOCK, LP_REENTRANT, LP_RWLOCK, LP_SEMAPHORE, LP_KINDS };
static const char *const lp_kind_name[LP_KINDS] = {"lock", "reentrant", "rwlock", "semaphore"};

/* One object of either role: the handle of its kind. */
typedef struct lp_obj {
    int kind;
    dlock_lock *lock;
    dlock_rwlock *rw;
    dlock_semaphore *sem;
    bool reported; /* holder: stopped_believing printed */
    int64_t deadline_ms; /* holder: latest "held until" the library stated (INT64_MAX: none) */
    int64_t bound_ms; /* waiter: how long to wait */
    dlock_client *client;
} lp_obj;

static pthread_mutex_t lp_out_mu = PTHREAD_MUTEX_INITIALIZER;

static int64_t lp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One whole line per event, flushed at once: the script reads the file
 * while the process runs, and a killed process must not lose lines. */
static void lp_say_at(const char *object, const char *event, int64_t at_ms, const char *extra)
{
    pthread_mutex_lock(&lp_out_mu);
    printf("%s %s %lld%s%s\n", object, event, (long long)at_ms, extra ? " " : "", extra ? extra : "");
    fflush(stdout);
    pthread_mutex_unlock(&lp_out_mu);
}

static void lp_say(const char *object, const char *event, const char *extra)
{
    lp_say_at(object, event, lp_now_ms(), extra);
}

static void lp_log(dlock_log_level level, const char *msg, void *ud)
{
    (void)ud;
    fprintf(stderr, "[%lld] lib %d: %s\n", (long long)lp_now_ms(), (int)level, msg);
}

static void lp_on_lost(dlock_lock *lock, int reason, void *ud)
{
    (void)lock;
    (void)reason;
    lp_say(lp_kind_name[((lp_obj *)ud)->kind], "lost_callback", NULL);
}

static void lp_on_rw_lost(dlock_rwlock *rw, int reason, void *ud)
{
    (void)rw;
    lp_on_lost(NULL, reason, ud);
}

static void lp_on_sem_lost(dlock_semaphore *sem, int reason, void *ud)
{
    (void)sem;
    lp_on_lost(NULL, reason, ud);
}

static int lp_parse_ms(const char *s, int64_t *out)
{
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (!end || *end || v < 1 || v > 86400000LL) return -1;
    *out = v;
    return 0;
}

/* OBJECTS "lock,rwlock" -> objs[] in that order; count or -1. */
static int lp_parse_objects(const char *list, lp_obj *objs)
{
    int n = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        int k = -1;
        for (int i = 0; i < LP_KINDS; i++)
            if (strlen(lp_kind_name[i]) == len && strncmp(p, lp_kind_name[i], len) == 0) k = i;
        if (k < 0 || n == LP_KINDS) return -1;
        memset(&objs[n], 0, sizeof objs[n]);
        objs[n++].kind = k;
        p += len;
        if (*p == ',') p++;
    }
    return n > 0 ? n : -1;
}

static dlock_client *lp_client(const char *url, int64_t lease_ms)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = url;
    if (lease_ms > 0) o.watchdog_timeout_ms = lease_ms;
    o.log_fn = lp_log;
    o.log_level = DLOCK_LOG_INFO;
    dlock_client *c = NULL;
    int rc = dlock_client_create(&o, &c);
    if (rc != 0) fprintf(stderr, "lease_probe: client on %s: %s\n", url, dlock_strerror(rc));
    return rc == 0 ? c : NULL;
}

/* Creates the object's handle and takes it (watchdog mode), waiting at
 * most wait_ms. 0 or a dlock_err. */
static int lp_acquire(lp_obj *ob, dlock_client *c, int64_t wait_ms, bool with_on_lost)
{
    char name[64];
    snprintf(name, sizeof name, "lp:%s", lp_kind_name[ob->kind]);
    int rc;
    if (ob->kind == LP_LOCK || ob->kind == LP_REENTRANT) {
        dlock_lock_options lo;
        dlock_lock_options_init(&lo);
        lo.kind = ob->kind == LP_LOCK ? DLOCK_LOCK_SIMPLE : DLOCK_LOCK_REENTRANT;
        if (with_on_lost) {
            lo.on_lost = lp_on_lost;
            lo.on_lost_ud = ob;
        }
        rc = dlock_lock_new(c, name, &lo, &ob->lock);
        return rc ? rc : dlock_lock_try_lock(ob->lock, wait_ms, 0, NULL);
    }
    if (ob->kind == LP_RWLOCK) {
        rc = dlock_rwlock_new(c, name, NULL, &ob->rw);
        if (rc == 0 && with_on_lost) dlock_rwlock_set_on_lost(ob->rw, lp_on_rw_lost, ob);
        return rc ? rc : dlock_rwlock_write_lock(ob->rw, wait_ms);
    }
    rc = dlock_semaphore_new(c, name, NULL, &ob->sem);
    if (rc == 0 && with_on_lost) dlock_semaphore_set_on_lost(ob->sem, lp_on_sem_lost, ob);
    return rc ? rc : dlock_semaphore_acquire(ob->sem, 1, wait_ms);
}

/* The holder's local answer to "do I hold it", no server call. */
static bool lp_believes(const lp_obj *ob)
{
    if (ob->lock) return dlock_lock_is_held(ob->lock);
    if (ob->rw) return dlock_rwlock_write_count(ob->rw) > 0;
    return dlock_semaphore_held(ob->sem) > 0;
}

static int64_t lp_validity(const lp_obj *ob)
{
    if (ob->lock) return dlock_lock_validity_ms(ob->lock);
    if (ob->rw) return dlock_rwlock_validity_ms(ob->rw);
    return dlock_semaphore_validity_ms(ob->sem);
}

/* One poll of one object; prints stopped_believing the first time it reads
 * "not held". The time printed is when this poll saw it, or, where the
 * library states its validity, the deadline it stated while still held if
 * that is earlier: a poll delayed by a loaded machine must not count
 * against the library. That deadline is checked, not trusted: "held" read
 * past it is reported as held_past_validity, and "not held" with validity
 * left as validity_mismatch (the script fails on either). */
static void lp_poll(lp_obj *ob)
{
    const char *name = lp_kind_name[ob->kind];
    int64_t t0 = lp_now_ms(), v = lp_validity(ob);
    bool held = lp_believes(ob);
    int64_t t1 = lp_now_ms();
    if (held) {
        if (ob->deadline_ms != INT64_MAX && t0 > ob->deadline_ms + 5) lp_say_at(name, "held_past_validity", t0, NULL);
        if (v > 0) ob->deadline_ms = t1 + v;
        return;
    }
    lp_say_at(name, "stopped_believing", t1 < ob->deadline_ms ? t1 : ob->deadline_ms, NULL);
    ob->reported = true;
    v = lp_validity(ob);
    if (v > 0) {
        char extra[32];
        snprintf(extra, sizeof extra, "%lld", (long long)v);
        lp_say(name, "validity_mismatch", extra);
    }
}

static int lp_holder(const char *url, int64_t lease_ms, lp_obj *objs, int n, int64_t bound_ms)
{
    dlock_client *c = lp_client(url, lease_ms);
    if (!c) return 1;
    for (int i = 0; i < n; i++) {
        int rc = lp_acquire(&objs[i], c, 10000, true);
        if (rc != 0) {
            fprintf(stderr, "lease_probe: holder could not take %s: %s\n", lp_kind_name[objs[i].kind],
                    dlock_strerror(rc));
            return 1;
        }
        objs[i].deadline_ms = INT64_MAX;
        lp_say(lp_kind_name[objs[i].kind], "held", NULL);
    }
    int64_t end = lp_now_ms() + bound_ms;
    int left = n;
    while (left > 0 && lp_now_ms() < end) {
        for (int i = 0; i < n; i++) {
            if (objs[i].reported) continue;
            lp_poll(&objs[i]);
            left -= objs[i].reported;
        }
        usleep(5000);
    }
    lp_say("holder", "done", NULL);
    /* No teardown: destroying a client whose server is unreachable waits on
     * I/O; what this process measures ended above. */
    _exit(0);
}

static void *lp_wait_one(void *arg)
{
    lp_obj *ob = arg;
    int rc = lp_acquire(ob, ob->client, ob->bound_ms, false);
    if (rc == 0) {
        lp_say(lp_kind_name[ob->kind], "acquired", NULL);
        return NULL;
    }
    lp_say(lp_kind_name[ob->kind], "not_acquired", dlock_strerror(rc));
    return ob; /* non-NULL: failed */
}

static int lp_waiter(const char *url, lp_obj *objs, int n, int64_t bound_ms)
{
    dlock_client *c = lp_client(url, 0);
    if (!c) return 1;
    pthread_t th[LP_KINDS];
    int failed = 0;
    for (int i = 0; i < n; i++) {
        objs[i].client = c;
        objs[i].bound_ms = bound_ms;
        if (pthread_create(&th[i], NULL, lp_wait_one, &objs[i]) != 0) return 1;
    }
    for (int i = 0; i < n; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        failed |= r != NULL;
    }
    for (int i = 0; i < n; i++) {
        if (objs[i].lock) dlock_lock_unlock(objs[i].lock);
        if (objs[i].rw && dlock_rwlock_write_count(objs[i].rw) > 0) dlock_rwlock_write_unlock(objs[i].rw);
        if (objs[i].sem && dlock_semaphore_held(objs[i].sem) > 0) dlock_semaphore_release(objs[i].sem, 1);
        dlock_lock_free(objs[i].lock);
        dlock_rwlock_free(objs[i].rw);
        dlock_semaphore_free(objs[i].sem);
    }
    dlock_client_destroy(c);
    return failed ? 1 : 0;
}

static int lp_usage(void)
{
    fputs("usage: lease_probe now\n"
          "       lease_probe holder URL LEASE_MS OBJECTS BOUND_MS\n"
          "       lease_probe waiter URL OBJECTS BOUND_MS\n"
          "OBJECTS: comma list of lock, reentrant, rwlock, semaphore\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    lp_obj objs[LP_KINDS];
    int64_t lease = 0, bound = 0;
    int n;
    if (argc == 2 && strcmp(argv[1], "now") == 0) {
        printf("%lld\n", (long long)lp_now_ms());
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "holder") == 0) {
        n = lp_parse_objects(argv[4], objs);
        if (n < 0 || lp_parse_ms(argv[3], &lease) || lp_parse_ms(argv[5], &bound)) return lp_usage();
        return lp_holder(argv[2], lease, objs, n, bound);
    }
    if (argc == 5 && strcmp(argv[1], "waiter") == 0) {
        n = lp_parse_objects(argv[3], objs);
        if (n < 0 || lp_parse_ms(argv[4], &bound)) return lp_usage();
        return lp_waiter(argv[2], objs, n, bound);
    }
    return lp_usage();
}
