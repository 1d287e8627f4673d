/* logcap.h: a libdlock log hook for tests that keeps every message, so a
 * test can assert what the library reported. Thread-safe (the library logs
 * from its own threads); one buffer per test process. DLOCK_TEST_VERBOSE=1
 * also prints each message to stderr. */
#ifndef DLOCK_TEST_LOGCAP_H
#define DLOCK_TEST_LOGCAP_H

#include <stdbool.h>

#include "dlock/dlock.h"

/* The hook to put in dlock_client_options.log_fn (log_ud unused). */
void test_log_capture(dlock_log_level level, const char *msg, void *ud);
/* True if some message captured so far contains needle. */
bool test_log_contains(const char *needle);
/* Forgets every message captured so far. */
void test_log_clear(void);

#endif
