/* async_harness.h: the event loop an async test runs on, libevent or libuv
 * (chosen at build time by ASYNC_LOOP_LIBUV), behind four calls, so one
 * test source runs on both adapters (include/dlock/async_libevent.h,
 * async_libuv.h). A 5 ms tick keeps every turn of the loop short, so
 * ah_run_until can check its condition and its bound. Loop thread only. */
#ifndef DLOCK_TEST_ASYNC_HARNESS_H
#define DLOCK_TEST_ASYNC_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "dlock/async.h"

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

#endif
