/* locking.c: `dlock NAME -- COMMAND`: connect, acquire (interruptible by
 * SIGINT/SIGTERM/SIGHUP/SIGQUIT), run COMMAND, release after it exited.
 * The acquire runs on a helper thread so the main thread can cancel it when
 * a signal arrives; everything else happens on the main thread.
 * Invariant: the lock is released only after COMMAND exited; every outcome
 * maps to one documented exit code.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "cli.h"
#include "events.h"
#include "lockface.h"

typedef struct acquire_job {
    cli_lock *lk;
    int64_t wait_ms;
    int64_t lease_ms;
    uint64_t fence;
    bool has_fence;
    int rc;
} acquire_job;

static void *acquire_main(void *arg)
{
    acquire_job *j = arg;
    j->rc = cli_lock_acquire(j->lk, j->wait_ms, j->lease_ms, &j->fence, &j->has_fence);
    cli_events_post(CLI_EV_ACQUIRED);
    return NULL;
}

static bool is_stop_signal(int ev)
{
    return ev == SIGINT || ev == SIGTERM || ev == SIGHUP || ev == SIGQUIT;
}

/* Acquires on a helper thread; a stop signal cancels the wait. Returns the
 * library code; *sig_out = the stop signal that arrived (0: none). */
static int acquire_interruptibly(cli_lock *lk, acquire_job *j, int *sig_out)
{
    pthread_t t;
    *sig_out = 0;
    if (pthread_create(&t, NULL, acquire_main, j) != 0) {
        acquire_main(j); /* cannot be interrupted then, but still works */
        (void)cli_events_next(0);
        return j->rc;
    }
    for (;;) {
        int ev = cli_events_next(-1);
        if (ev == CLI_EV_ACQUIRED) break;
        if (is_stop_signal(ev) && !*sig_out) {
            *sig_out = ev;
            cli_lock_cancel(lk);
        }
    }
    pthread_join(t, NULL);
    return j->rc;
}

static int report_acquire_failure(const cli_options *o, cli_lock *lk, int rc)
{
    switch (rc) {
    case DLOCK_EBUSY:
        cli_verbose(o, "lock '%s' is held by someone else", o->name);
        return o->conflict_code;
    case DLOCK_ETIMEOUT:
        cli_verbose(o, "gave up waiting for lock '%s'", o->name);
        return o->conflict_code;
    case DLOCK_EINVAL:
        if (o->kind != CLI_KIND_SEMAPHORE) return cli_fail(lk, rc, "cannot acquire lock");
        return cli_sem_mismatch(o);
    default:
        return cli_fail(lk, rc, "cannot acquire lock");
    }
}

/* Exports DLOCK_NAME, DLOCK_FENCE, DLOCK_LEASE_MS and DLOCK_KILL_GRACE_MS
 * for COMMAND (dlock(1), ENVIRONMENT), in COMMAND's environment only. */
static int export_env(const cli_options *o, const acquire_job *j)
{
    char fence[32], lease[32], grace[32];
    snprintf(lease, sizeof(lease), "%lld", (long long)cli_lease_ms(o));
    snprintf(grace, sizeof(grace), "%lld", (long long)o->kill_grace_ms);
    snprintf(fence, sizeof(fence), "%" PRIu64, j->fence);
    if (cli_child_setenv("DLOCK_NAME", o->name) != 0 ||
        cli_child_setenv("DLOCK_LEASE_MS", lease) != 0 ||
        cli_child_setenv("DLOCK_KILL_GRACE_MS", grace) != 0)
        return -1;
    return cli_child_setenv("DLOCK_FENCE", j->has_fence ? fence : NULL);
}

/* The final exit code from COMMAND's result and the release outcome. */
static int finish(const cli_options *o, cli_lock *lk, const cli_child_result *res)
{
    bool lost = res->lost;
    int rc = cli_lock_release(lk);
    if (rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER || rc == DLOCK_ENOTHELD) {
        if (!lost)
            cli_err("lock '%s' was no longer held when COMMAND exited (it expired or was "
                    "taken): COMMAND may have run partly without it", o->name);
        lost = true;
    } else if (rc != 0) {
        cli_err("could not release lock '%s' (%s): it expires on its lease", o->name,
                dlock_strerror(rc));
    } else {
        cli_verbose(o, "released lock '%s'", o->name);
    }
    if (lost && o->on_lost != CLI_ON_LOST_IGNORE) return CLI_EXIT_LOST;
    return res->status;
}

static void post_lost(void *ud)
{
    (void)ud;
    cli_events_post(CLI_EV_LOST);
}

int cli_cmd_run(const cli_options *o)
{
    cli_child_snapshot_fds();
    if (cli_events_init() != 0) {
        cli_err("cannot set up signal handling");
        return CLI_EXIT_OSERR;
    }
    cli_lock *lk = NULL;
    int code = cli_lock_open(o, post_lost, NULL, &lk);
    if (code != 0) return code;

    acquire_job j = {.lk = lk, .wait_ms = o->wait_ms, .lease_ms = o->lease_ms};
    int sig = 0;
    if (o->wait_ms < 0) cli_verbose(o, "acquiring lock '%s' (no time limit)", o->name);
    else cli_verbose(o, "acquiring lock '%s' (waiting up to %.3f s)", o->name,
                     (double)o->wait_ms / 1000.0);
    int rc = acquire_interruptibly(lk, &j, &sig);
    if (rc == 0 && sig) {
        cli_lock_release(lk); /* acquired just as the signal came */
    }
    if (sig) {
        cli_verbose(o, "interrupted by signal %d while waiting for the lock", sig);
        cli_lock_close(lk);
        return 128 + sig;
    }
    if (rc != 0) {
        code = report_acquire_failure(o, lk, rc);
        cli_lock_close(lk);
        return code;
    }
    if (j.has_fence) cli_verbose(o, "acquired lock '%s', fence %" PRIu64, o->name, j.fence);
    else cli_verbose(o, "acquired lock '%s'", o->name);

    if (export_env(o, &j) != 0) {
        cli_err("cannot set the environment for COMMAND");
        cli_lock_release(lk);
        cli_lock_close(lk);
        return CLI_EXIT_OSERR;
    }
    cli_child_result res;
    code = cli_child_run(o, lk, &res);
    if (code != 0) {
        cli_lock_release(lk);
    } else {
        code = finish(o, lk, &res);
    }
    cli_lock_close(lk);
    return code;
}
