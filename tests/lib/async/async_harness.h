/* async_harness.h: the event loop an async test runs on, libevent or libuv
 * (chosen at build time by ASYNC_LOOP_LIBUV), behind four calls, so one
 * test source runs on both adapters (include/dlock/async_libevent.h,
 * async_libuv.h). A 5 ms tick keeps every turn of the loop short, so
 * ah_run_until can check its condition and its bound. Below it, what every
 * async test shares: cmocka setup/teardown, client options, recording
 * callbacks and the "start it and run the loop until it answered" calls
 * (a failed cmocka assertion inside them fails the running test). Loop
 * thread only. */
#ifndef DLOCK_TEST_ASYNC_HARNESS_H
#define DLOCK_TEST_ASYNC_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "dlock/async.h"
#include "dlock/dlock.h"
#include "dlock/lock.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"

/* The loop table of the test's loop (valid between ah_init and ah_fini). */
extern dlock_async_loop ah_loop;
void ah_init(void);
/* Runs the loop until *flag becomes non-zero or bound_ms passed; returns
 * the ms it ran. */
int64_t ah_run_until(const volatile int *flag, int64_t bound_ms);
/* Runs the loop for ms. */
void ah_run_for(int64_t ms);
/* Closes what is left (libuv: the closing handles) and the loop. */
void ah_fini(void);
/* The freezing proxy (tests/support/dl_freeze_proxy, in $DLOCK_BUILD_DIR)
 * in front of 127.0.0.1:target_port: returns its port; its pid is
 * *pid_out (freeze it with SIGSTOP). One at a time. ah_proxy_stop stops
 * it (no-op when none runs); ah_fini does too, so a test an assertion
 * left early leaves no process behind. Fatal on failure. */
int ah_proxy_start(int target_port, int *pid_out);
void ah_proxy_stop(void);
/* "libevent" or "libuv". */
const char *ah_name(void);

/* ---- shared by the tests ---------------------------------------------------------- */

#define AH_SLACK_MS 400    /* loaded 2-core CI under sanitizers */
#define AH_WATCHDOG_MS 900 /* leases about 1 s */

/* cmocka per-test setup (ah_init) and teardown (the proxy, ah_fini). */
int ah_setup(void **state);
int ah_teardown(void **state);
/* o for url: the test's key prefix, watchdog AH_WATCHDOG_MS, the given
 * command timeout, a 1 s connect timeout. */
void ah_client_options(dlock_client_options *o, const char *url, int64_t command_timeout_ms);
/* An async client on the test loop with o (creation must succeed). */
dlock_async_client *ah_client(const dlock_client_options *o);
/* A blocking client on url (key prefix and watchdog as above). */
dlock_client *ah_blocking_client(const char *url);

/* What a callback brought: how often it ran, its last code, when, and
 * the how-many-th completion it was among all recorded (ah_completions). */
typedef struct ah_rec {
    int calls, rc;
    int64_t at_ms;
    int order;
} ah_rec;
extern int ah_completions;
/* Recording callbacks: ud is an ah_rec. */
void ah_on_lock(dlock_async_lock *l, int rc, void *ud);
void ah_on_rw(dlock_async_rwlock *rw, int rc, void *ud);
void ah_on_sem(dlock_async_semaphore *s, int rc, void *ud);
/* Runs the loop until r's callback ran (at most bound_ms), asserts it ran
 * once and returns its code. */
int ah_wait_rec(ah_rec *r, int64_t bound_ms);
/* Start the operation and run the loop until it answered: its code (or
 * the start's, when the start refused). */
int ah_acquire_now(dlock_async_lock *l, int64_t wait_ms, int64_t lease_ms);
int ah_unlock_now(dlock_async_lock *l);
int ah_rw_now(dlock_async_rwlock *rw, bool write, bool lock, int64_t wait_ms);
int ah_sem_now(dlock_async_semaphore *s, bool take, int64_t k, int64_t wait_ms);

/* A blocking release run later by a loop timer (one short blocking call,
 * asserted to succeed): bl unlocked, brw read-unlocked, bsem given 1
 * permit back, whichever are set; then at_ms and done are set. */
typedef struct ah_later {
    dlock_lock *bl;
    dlock_rwlock *brw;
    dlock_semaphore *bsem;
    void *timer;
    int64_t at_ms;
    int done;
} ah_later;
void ah_release_later(ah_later *u, int64_t ms);
/* Frees u's timer (run or not). */
void ah_later_free(ah_later *u);

#endif
