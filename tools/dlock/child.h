/* child.h: dlock's process side: one self-pipe that carries signals, the
 * lock-lost notice and the "acquired" notice to the main thread, and the
 * loop that runs COMMAND in its own process group, forwards signals to it,
 * and stops it when the lock is lost. Invariant: the lock is released by
 * the caller only after cli_child_run returned, i.e. after COMMAND exited.
 */
#ifndef DLOCK_TOOLS_CHILD_H
#define DLOCK_TOOLS_CHILD_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "lockface.h"

/* Events written to the self-pipe besides signal numbers (all < 128). */
enum {
    CLI_EV_ACQUIRED = 250, /* the acquiring thread finished */
    CLI_EV_LOST = 251,     /* the library reported the lock lost */
};

/* Creates the self-pipe and installs handlers for SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGUSR1, SIGUSR2 and SIGCHLD. 0 or -1 (errno set). */
int cli_events_init(void);

/* Posts an event; async-signal-safe and callable from any thread. */
void cli_events_post(unsigned char ev);

/* Waits up to timeout_ms (-1: forever) for the next event; returns the
 * event byte (a signal number or CLI_EV_*), or 0 on timeout. */
int cli_events_next(int64_t timeout_ms);

typedef struct cli_child_result {
    int status;          /* exit code to report for COMMAND (0..255) */
    bool lost;           /* the lock was lost (or its lease ran out) while it ran */
    bool stopped_by_us;  /* dlock sent the lost-lock signal(s) */
} cli_child_result;

/* Runs COMMAND (o->cmd, or /bin/sh -c o->shell_cmd) and waits for it,
 * forwarding signals and applying o->on_lost when lk is lost (posted
 * CLI_EV_LOST, or polled for kinds without a callback). lease_deadline_ms is the
 * monotonic time the lease runs out in fixed-lease mode (0: watchdog
 * mode). Returns 0 with *res filled, or an exit code (126/127/71) when
 * COMMAND could not be started (message already printed). */
int cli_child_run(const cli_options *o, cli_lock *lk, int64_t lease_deadline_ms,
                  cli_child_result *res);

/* Monotonic clock in milliseconds. */
int64_t cli_now_ms(void);

#endif
