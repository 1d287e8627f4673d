/* child.h: dlock's process side: the loop that runs COMMAND in its own
 * process group, forwards signals to it (events.h), and stops it when the
 * lock is lost. Invariant: the lock is released by
 * the caller only after cli_child_run returned, i.e. after COMMAND exited.
 */
#ifndef DLOCK_TOOLS_CHILD_H
#define DLOCK_TOOLS_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli.h"
#include "lockface.h"

/* Records the descriptors dlock was started with (COMMAND inherits those,
 * not the library's sockets). Call before connecting to Redis. */
void cli_child_snapshot_fds(void);

/* COMMAND's environment: dlock's own, with NAME set to value (value NULL:
 * NAME removed). The change goes into a private copy that only COMMAND
 * sees: dlock never changes its own environment once the library's threads
 * run, since a thread reading it (getenv in a resolver, a preloaded
 * library) while it is rewritten reads freed memory. Main thread only.
 * Returns 0, or -1 when out of memory. */
int cli_child_setenv(const char *name, const char *value);

typedef struct cli_child_result {
    int status;          /* exit code to report for COMMAND (0..255) */
    bool lost;           /* the lock was lost (or its lease ran out) while it ran */
    bool stopped_by_us;  /* dlock sent the lost-lock signal(s) */
} cli_child_result;

/* Runs COMMAND (o->cmd, or /bin/sh -c o->shell_cmd) and waits for it,
 * forwarding signals. COMMAND must be gone before the lock's validity
 * deadline (cli_lock_validity_ms): when no more than kill-grace + margin
 * (cli_kill_margin_ms) of it is left - a lease running out, renewals
 * failing, a loss posted as CLI_EV_LOST - o->on_lost is applied: SIGTERM
 * now and SIGKILL at the deadline less the margin (term), SIGKILL now
 * (kill), or a warning (ignore). Returns 0 with *res filled, or an exit
 * code (126/127/71) when COMMAND could not be started (message printed). */
int cli_child_run(const cli_options *o, cli_lock *lk, cli_child_result *res);

/* Starts COMMAND as cli_child_run does (own process group, dlock's
 * descriptors only, SIGTERM when dlock dies) but without the terminal,
 * for `dlock --standby`, which supervises it itself. Returns its pid, or
 * minus an exit code (126/127/71) after printing why. */
pid_t cli_child_start(const cli_options *o);

#endif
