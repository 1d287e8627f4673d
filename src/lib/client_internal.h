/* client_internal.h: what every libdlock object (locks, semaphores, rate
 * limiter, latch, RedLock) uses from the client: keys, scripts, commands
 * with retry, pub/sub waiting, the watchdog and metrics. Internal only:
 * never installed, never included by programs outside src/lib and tests.
 *
 * Contract shared by all objects (see docs/locks.md):
 * - Every Redis call goes through dlock__client_cmd/eval: a pooled
 *   connection, reconnect + retry with backoff on ECONN (nothing sent);
 *   EUNKNOWN is returned as is, never retried blindly.
 * - Scripts are dlock__script values (name + embedded source); eval uses
 *   EVALSHA and falls back to loading the script on NOSCRIPT.
 * - Waiting uses the client's single subscriber connection: subscribe to a
 *   channel first, then try, then sleep on the waiter; never busy-poll.
 */
#ifndef DLOCK_LIB_CLIENT_INTERNAL_H
#define DLOCK_LIB_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"
#include "redis_io.h"

/* ---- keys ------------------------------------------------------------ */

#define DLOCK__NAME_MAX 1024 /* longest lock/object name accepted */

/* Validates a user-supplied object name: non-NULL, 1..DLOCK__NAME_MAX
 * bytes (no NUL inside by construction). 0 or DLOCK_EINVAL. */
int dlock__check_name(const char *name);

/* Writes prefix + name into out (NUL-terminated). 0 or EINVAL if it does
 * not fit. */
int dlock__client_key(const dlock_client *c, const char *name, char *out, size_t outlen);

/* The hash-tag rule for companion keys (fence counter, queues, ...): if key
 * already contains a hash tag "{...}" the companion is key + suffix, else
 * "{" key "}" + suffix, so both land in the same Cluster slot. */
int dlock__companion_key(const char *key, const char *suffix, char *out, size_t outlen);

/* ---- scripts --------------------------------------------------------- */

typedef struct dlock__script {
    const char *name;          /* for logs: "lock_acquire" */
    const unsigned char *src;  /* embedded .lua source (NUL-terminated) */
} dlock__script;

/* EVALSHA (SHA-1 of src, computed once) with nkeys KEYS and nargs ARGV;
 * on NOSCRIPT loads the script and retries once. Returns 0 with *out (may
 * be an ERROR reply from the script), or a transport code as
 * dlock__client_cmd. */
int dlock__client_eval(dlock_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                       int nargs, const char *const *args, dlock__reply **out);

/* One command on a pooled connection with reconnect/retry on ECONN. */
int dlock__client_cmd(dlock_client *c, int argc, const char **argv, const size_t *lens,
                      dlock__reply **out);

/* ---- waiting (pub/sub) ----------------------------------------------- */

typedef struct dlock__waiter dlock__waiter;

/* Subscribes (through the client's subscriber connection) to channel and
 * returns a waiter that counts messages published there from now on. */
int dlock__wait_begin(dlock_client *c, const char *channel, dlock__waiter **out);
/* Sleeps until a message arrived on the channel since the last call, the
 * timeout passed, or dlock__wait_cancel. Returns 0 (message), ETIMEOUT,
 * ECANCELED or ECLOSED. A subscriber reconnect counts as a message (the
 * caller re-checks), so a lost publish never strands a waiter. */
int dlock__wait(dlock__waiter *w, int64_t timeout_ms);
/* Wakes dlock__wait with ECANCELED; safe from any thread. */
void dlock__wait_cancel(dlock__waiter *w);
void dlock__wait_end(dlock__waiter *w);

/* ---- watchdog -------------------------------------------------------- */

/* An object registered with the watchdog is renewed every
 * watchdog_timeout/3. renew() returns 0 (renewed), DLOCK_ELOST (the server
 * says it is gone: the watchdog calls lost() and drops it) or another code
 * (transient: retried; when no renewal succeeded for a full lease, lost()
 * is called with DLOCK_ELOST). Callbacks run on the watchdog thread. */
typedef struct dlock__renewable {
    int (*renew)(struct dlock__renewable *r, int64_t lease_ms);
    void (*lost)(struct dlock__renewable *r, int reason);
    int64_t last_ok_ms;   /* monotonic time of the last successful renewal */
    struct dlock__renewable *next; /* owned by the watchdog */
} dlock__renewable;

int dlock__watchdog_add(dlock_client *c, dlock__renewable *r);
/* Returns after any renew() in progress on r has finished. */
void dlock__watchdog_remove(dlock_client *c, dlock__renewable *r);
int64_t dlock__client_watchdog_ms(const dlock_client *c);

/* ---- metrics and logging --------------------------------------------- */

typedef enum dlock__fail_reason {
    DLOCK__FAIL_TIMEOUT = 0,
    DLOCK__FAIL_BUSY = 1,
    DLOCK__FAIL_ERROR = 2,
} dlock__fail_reason;

/* rc is the acquire result: 0 counts a success, EBUSY/ETIMEOUT/other a
 * failure with that reason. */
void dlock__metrics_acquire(dlock_client *c, int rc);
void dlock__metrics_hold(dlock_client *c, int64_t held_ms);
void dlock__metrics_renew(dlock_client *c, bool ok);
void dlock__metrics_lost(dlock_client *c);

void dlock__log(const dlock_client *c, dlock_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Options the client was created with (strings valid for its lifetime). */
const dlock_client_options *dlock__client_options(const dlock_client *c);

#endif
