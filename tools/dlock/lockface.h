/* lockface.h: the lock kinds dlock offers (simple, reentrant, fair, read,
 * write, semaphore) behind one small face, plus connecting to Redis and
 * turning library errors into one stderr line and a documented exit code.
 * Only libdlock's public headers are used.
 */
#ifndef DLOCK_TOOLS_LOCKFACE_H
#define DLOCK_TOOLS_LOCKFACE_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "dlock/dlock.h"

typedef struct cli_lock cli_lock;

/* Connects (o->url, o->prefix, o->watchdog_ms). Returns 0 and *client_out,
 * or an exit code after printing why. */
int cli_client_open(const cli_options *o, dlock_client **client_out);

/* Called (on one of the library's watchdog threads) when the lock is lost. */
typedef void (*cli_lost_fn)(void *ud);

/* Connects and makes a handle of kind o->kind for o->name; lost (may be
 * NULL) is called when the library reports the lock lost, for kinds with a
 * lost-lock callback (the others: cli_lock_poll_lost). 0 or an exit code. */
int cli_lock_open(const cli_options *o, cli_lost_fn lost, void *lost_ud, cli_lock **lk_out);
/* Library codes (0, DLOCK_EBUSY, DLOCK_ETIMEOUT, ...). *has_fence_out is
 * false for kinds without fencing tokens. */
int cli_lock_acquire(cli_lock *lk, int64_t wait_ms, int64_t lease_ms, uint64_t *fence_out,
                     bool *has_fence_out);
void cli_lock_cancel(cli_lock *lk); /* any thread */
int cli_lock_release(cli_lock *lk);
/* Milliseconds before the hold's validity deadline (libdlock's rule, the
 * same for every kind); 0 when not held or lost. Every kind also posts
 * its loss through the lost callback given to cli_lock_open. */
int64_t cli_lock_validity_ms(cli_lock *lk);
void cli_lock_close(cli_lock *lk); /* frees the handle and the client */

/* Maps a library code to an exit code. */
int cli_exit_code(int rc);
/* Prints "dlock: WHAT 'NAME': <reason>" (with the server and the
 * library's last logged detail where that helps) and returns cli_exit_code. */
int cli_fail_name(const cli_options *o, int rc, const char *what);
int cli_fail(cli_lock *lk, int rc, const char *what);
/* Prints why --semaphore N does not match the N the semaphore is recorded
 * with (read from the library's last logged line) and how to fix it;
 * returns CLI_EXIT_USAGE. */
int cli_sem_mismatch(const cli_options *o);

/* Writes url with any password replaced by "***" into out. */
void cli_redact_url(const char *url, char *out, size_t outlen);

#endif
