/* lock_support.h: helpers shared by the libdlock lock tests: a client on a
 * test server with short timeouts, a log hook that keeps messages for
 * assertions, and small Redis probes. Used by one test process at a time. */
#ifndef DLOCK_TEST_LOCK_SUPPORT_H
#define DLOCK_TEST_LOCK_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "dlock/dlock.h"
#include "dlock/lock.h"
#include "lib_target.h"
#include "servers.h"

/* Group fixture of the single-server lock tests: a private redis-server
 * (or the test cluster, lib_target.h) in ls_srv and an ls_client(&ls_srv,
 * 600) in ls_cl. */
extern test_server ls_srv;
extern dlock_client *ls_cl;
int ls_setup(void **state);
int ls_teardown(void **state);

/* Client on srv with watchdog_ms (0: default 600), the test prefix and the
 * capturing log hook. Returns NULL on failure (message on stderr). */
dlock_client *ls_client(const test_server *srv, int64_t watchdog_ms);
/* Same with the options passed through (url and log hook filled in). */
dlock_client *ls_client_opts(const test_server *srv, dlock_client_options *o);

/* True if some log line so far contains needle. */
bool ls_log_contains(const char *needle);
void ls_log_clear(void);

/* Handle on name; aborts the test on failure. */
dlock_lock *ls_lock(dlock_client *c, const char *name, dlock_lock_kind kind);

/* Full key for name as the client builds it (prefix + name). */
const char *ls_key(const char *name);

/* Exists / pttl of a key, read behind the library. */
bool ls_exists(const test_server *srv, const char *key);

#endif
