/* etcd_support.h: helpers shared by the etcd backend tests: a client on an
 * etcd fixture with short timeouts, a log hook that keeps messages for
 * assertions, and a counter in shared memory for exclusion checks. */
#ifndef DLOCK_TEST_ETCD_SUPPORT_H
#define DLOCK_TEST_ETCD_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "dlock/dlock.h"
#include "dlock/lock.h"
#include "etcd_fixture.h"

/* Client on url with watchdog_ms (0: 3000), the test prefix and the
 * capturing log hook; NULL on failure (message on stderr). */
dlock_client *es_client(const char *url, int64_t watchdog_ms);
/* Same, returning the create code (client in *out). */
int es_client_rc(const char *url, int64_t watchdog_ms, dlock_client **out);

/* Handle on name with an optional lost callback; aborts on failure. */
dlock_lock *es_lock(dlock_client *c, const char *name, dlock_lost_fn on_lost, void *ud);

bool es_log_contains(const char *needle);
void es_log_clear(void);

/* Value of metric line `name` in the client's Prometheus text, -1 if absent. */
long long es_metric(dlock_client *c, const char *name);

/* Number of keys under the lock's range (holder + waiters), read behind the
 * library on member 0. -1 on error. */
int es_contenders(const test_etcd *e, const dlock_lock *l);

#endif
