/* torture_worker.c: one worker process of `dlock torture`. It increments
 * the fenced counter by read-then-write while holding the lock (watchdog
 * mode, lease --lease), passing its fencing token to the storage (0 with
 * --no-fence: no fencing), and records every holding in shared memory.
 * It never signals anyone; the torture process pauses it.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli.h"
#include "dlock/lock.h"
#include "lockface.h"
#include "torture.h"
#include "util.h"

static torture_shared *shm;

static void on_lost(dlock_lock *lock, int reason, void *ud)
{
    (void)lock;
    (void)reason;
    (void)ud;
    __atomic_add_fetch(&shm->lost_callbacks, 1, __ATOMIC_SEQ_CST);
}

static void record(int w, uint64_t token, int64_t try_us, int64_t acq_us, int outcome)
{
    int i = __atomic_fetch_add(&shm->n_holds, 1, __ATOMIC_SEQ_CST);
    if ((size_t)i < shm->cap) shm->holds[i] = (torture_hold){w, token, try_us, acq_us, dlock__now_us(), outcome};
}

static int worker_fail(int w, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int worker_fail(int w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(shm->worker_err[w], sizeof(shm->worker_err[w]), fmt, ap);
    va_end(ap);
    return code;
}

/* One holding: read, linger (the window a pause hits), write + 1. */
static int one_holding(dlock__conn *store, const torture_keys *k, uint64_t token, bool fenced)
{
    long long v = 0;
    int rc = torture_store_op(store, k, false, token, fenced, &v);
    if (rc != 1) return rc == 0 ? TORTURE_READ_REFUSED : TORTURE_STORE_ERROR;
    dlock__sleep_ms((int64_t)dlock__random_below(15) + 5);
    v++;
    rc = torture_store_op(store, k, true, token, fenced, &v);
    return rc == 1 ? TORTURE_WRITE_ACCEPTED : rc == 0 ? TORTURE_WRITE_REFUSED : TORTURE_STORE_ERROR;
}

static void loop(const torture_opts *o, const torture_keys *k, dlock_lock *l, dlock__conn *store, int w,
                 pid_t parent)
{
    while (!shm->stop && getppid() == parent) {
        uint64_t token = 0;
        int64_t try_us = dlock__now_us();
        if (dlock_lock_try_lock(l, 200, 0, &token) != 0) continue;
        int64_t acq = dlock__now_us();
        shm->holding[w] = 1;
        int outcome = one_holding(store, k, token, !o->no_fence);
        shm->holding[w] = 0;
        record(w, token, try_us, acq, outcome);
        dlock_lock_unlock(l); /* DLOCK_ELOST after a pause: expected */
        dlock__sleep_ms((int64_t)dlock__random_below(5));
    }
}

int torture_worker_main(const torture_opts *o, const torture_keys *k, torture_shared *sh, int w)
{
    shm = sh;
    pid_t parent = getppid();
    /* Interrupts are the torture process's to handle: it stops us. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* torture killed -9: no orphan keeps the lock */
#endif
    cli_options co = {.url = o->url, .prefix = o->prefix, .name = k->lock_name, .watchdog_ms = o->lease_ms,
                      .verbose = o->verbose};
    dlock_client *c = NULL;
    int code = cli_client_open(&co, &c);
    if (code != 0) return worker_fail(w, code, "cannot connect to the lock's deployment");
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.on_lost = on_lost;
    dlock_lock *l = NULL;
    dlock__conn *store = NULL;
    if (dlock_lock_new(c, k->lock_name, &lo, &l) != 0) code = worker_fail(w, CLI_EXIT_SOFTWARE, "lock handle");
    else code = torture_store_open(o->store_url, &store);
    if (code == 0) loop(o, k, l, store, w, parent);
    else if (!sh->worker_err[w][0]) worker_fail(w, code, "cannot connect to the storage");
    dlock_lock_free(l);
    dlock__conn_close(store);
    dlock_client_destroy(c);
    return code;
}
