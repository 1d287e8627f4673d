/* events.h: dlock's self-pipe: signals, the lock-lost notice and the
 * "acquired" notice reach the main thread as one byte each, in order.
 * Posting is async-signal-safe and works from any thread; reading is for
 * the main thread only.
 */
#ifndef DLOCK_TOOLS_EVENTS_H
#define DLOCK_TOOLS_EVENTS_H

#include <stdint.h>

/* Events written to the self-pipe besides signal numbers (all < 128). */
enum {
    CLI_EV_ACQUIRED = 250, /* the acquiring thread finished */
    CLI_EV_LOST = 251,     /* the library reported the lock lost */
};

/* Creates the self-pipe and installs handlers for SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGUSR1, SIGUSR2 and SIGCHLD (a signal ignored on entry stays
 * ignored). 0 or -1 (errno set). */
int cli_events_init(void);

/* Posts an event; async-signal-safe and callable from any thread. */
void cli_events_post(unsigned char ev);

/* Waits up to timeout_ms (-1: forever) for the next event; returns the
 * event byte (a signal number or CLI_EV_*), or 0 on timeout. */
int cli_events_next(int64_t timeout_ms);

/* In a forked child: the default action back for every signal
 * cli_events_init caught. */
void cli_events_restore_defaults(void);

/* Monotonic clock in milliseconds. */
int64_t cli_now_ms(void);

#endif
