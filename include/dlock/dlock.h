/* dlock.h: libdlock's core API: error codes, logging hook and the client.
 *
 * Thread-safety: a dlock_client is safe to use from any number of threads at
 * once. Everything else states its own rule where it is declared.
 * Ownership: strings passed in are copied; buffers returned to the caller
 * are released with dlock_free().
 * Errors: every function returns 0 (DLOCK_OK) or a negative dlock_err code;
 * dlock_strerror() names it. The library never prints, exits or aborts: it
 * reports through the log hook installed in the client options.
 *
 * Contracts shared by every object (each header refers here):
 * - Destructors accept NULL: every *_free, dlock_client_destroy, dlock_free
 *   and dlock_redlock_unlock (which frees its hold) do nothing with NULL.
 * - Handles and their client: a handle (lock, fair lock, read-write lock,
 *   semaphore, multi-lock, latch, rate limiter) may be freed before or
 *   after its client is destroyed, whatever it holds. dlock_client_destroy
 *   reports (WARN) every object still held, of every kind, and leaves it
 *   to expire on its lease; a handle freed afterwards only frees memory.
 *   Every other call on a handle needs its client alive.
 * - "You do not hold this" is DLOCK_ENOTHELD, for every object: unlocking
 *   a lock, a side of a read-write lock, a fair lock or a multi-lock this
 *   handle does not hold, releasing more semaphore permits than the handle
 *   holds, releasing or extending a permit id that is not live. DLOCK_ELOST
 *   means something else: this handle did hold it and lost it (expired or
 *   taken) since.
 * - Hold count (dlock_lock_hold_count, dlock_fairlock_hold_count,
 *   dlock_multilock_hold_count): int f(handle, int64_t *count_out), asking
 *   the server how many times this handle's owner holds the object now
 *   (0: not held). The server's answer, not a local counter, because a
 *   lease can end or an admin can delete the lock before the handle
 *   notices; a count that can be wrong would not be worth having.
 * - Option structs (dlock_*_options) begin with a size field that
 *   dlock_*_options_init sets: always fill them with their *_options_init,
 *   then override fields. A later 1.x release may append fields; the
 *   library reads only the fields the caller's size covers (the rest keep
 *   their defaults), so a program built against an older 1.x keeps working.
 *   A size smaller than 1.0's, or bytes past the fields this library knows
 *   that are not zero, are DLOCK_EINVAL.
 * - Result structs the caller declares (dlock_lock_status,
 *   dlock_ratelimit_result) are frozen for 1.x: a new field would come
 *   with a new function, never by growing them.
 */
#ifndef DLOCK_DLOCK_H
#define DLOCK_DLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(DLOCK_STATIC)
#define DLOCK_API
#else
#define DLOCK_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version (semver; README "Versions"): 1.x keeps the API
 * and ABI of 1.0 (soname libdlock.so.1, symbol version DLOCK_1.0). */
#define DLOCK_VERSION "1.1.0"
#define DLOCK_VERSION_MAJOR 1
#define DLOCK_VERSION_MINOR 1
#define DLOCK_VERSION_PATCH 0

/* Error codes. "Not applied" and "outcome unknown" are kept apart: a call
 * that returns DLOCK_EUNKNOWN sent a command whose effect may or may not
 * have happened (the connection failed or timed out after sending). For a
 * lock, resolve it with dlock_lock_is_held_by_me(); for other objects the
 * header says how. Every other error means nothing changed on the server. */
typedef enum dlock_err {
    DLOCK_OK = 0,
    DLOCK_EINVAL = -1,    /* invalid argument (bad name, option, NULL) */
    DLOCK_EURL = -2,      /* malformed or unknown URL */
    DLOCK_ETLS = -3,      /* TLS to Redis asked for (rediss://): not available in process; see the URL list */
    DLOCK_EAUTH = -4,     /* AUTH refused: wrong password or ACL user */
    DLOCK_ECONN = -5,     /* could not connect (refused, unreachable, connect timeout) */
    DLOCK_ETIMEOUT = -6,  /* a bounded wait ran out (e.g. lock wait_ms) */
    DLOCK_EIO = -7,       /* I/O error before anything was sent */
    DLOCK_ESERVER = -8,   /* the server answered with an error, or bad protocol */
    DLOCK_EUNKNOWN = -9,  /* sent, then lost/timed out: outcome unknown */
    DLOCK_ENOMEM = -10,   /* out of memory */
    DLOCK_EBUSY = -11,    /* held by another owner (no wait requested) */
    DLOCK_ENOTOWNER = -12,/* release/extend by someone who is not the owner */
    DLOCK_ELOST = -13,    /* the lock was lost (expired or taken) while held */
    DLOCK_ENOTREPL = -14, /* acquired, but too few replicas acknowledged: released */
    DLOCK_ECANCELED = -15,/* a wait was cancelled from another thread */
    DLOCK_EALREADY = -16, /* this (non-reentrant) handle already holds the lock */
    DLOCK_ENOTHELD = -17, /* you do not hold this: the handle holds no such lock, permits or permit */
    DLOCK_EUPGRADE = -18, /* read->write upgrade refused (would deadlock) */
    DLOCK_ENOQUORUM = -19,/* RedLock: fewer than a quorum of nodes agreed */
    DLOCK_ELIMIT = -20,   /* a bound would be exceeded (e.g. permits above N) */
    DLOCK_ECLOSED = -21,  /* the client is being destroyed */
    DLOCK_ESTALE = -22,   /* fencing: a token older than one already seen */
    DLOCK_ENOTSUP = -23,  /* not supported by the client's backend (e.g. a Redis-only object on etcd) */
} dlock_err;

/* "Transport codes", as the headers say in their Returns lists: the codes
 * any call that talks to Redis may return because of the connection or the
 * server rather than the object: DLOCK_ECONN and DLOCK_EAUTH (could not
 * (re)connect: nothing was sent), DLOCK_EUNKNOWN (sent, reply lost: outcome
 * unknown), DLOCK_ESERVER (the server answered an error), DLOCK_EIO (I/O
 * error before anything was sent), DLOCK_ENOMEM, and DLOCK_ECLOSED (the
 * client is being destroyed). Only DLOCK_EUNKNOWN leaves the outcome open. */

/* Pass as wait_ms to wait without bound (until acquired, cancelled or, for
 * a latch, opened). The one definition for every object's wait_ms. */
#define DLOCK_WAIT_FOREVER ((int64_t)-1)

/* Longest object name (lock, semaphore, ... name, fence-guard resource)
 * accepted, in bytes. A longer or empty name is DLOCK_EINVAL, and the log
 * hook (WARN) says the length and this maximum. */
#define DLOCK_NAME_MAX 1024

/* Short English description of a dlock_err; never NULL. */
DLOCK_API const char *dlock_strerror(int err);

/* Releases memory the library returned to the caller. NULL is a no-op. */
DLOCK_API void dlock_free(void *p);

/* Logging hook. The library calls it (from any of its threads) instead of
 * printing. msg is valid only during the call. */
typedef enum dlock_log_level {
    DLOCK_LOG_DEBUG = 0,
    DLOCK_LOG_INFO = 1,
    DLOCK_LOG_WARN = 2,
    DLOCK_LOG_ERROR = 3,
} dlock_log_level;
typedef void (*dlock_log_fn)(dlock_log_level level, const char *msg, void *ud);

typedef struct dlock_client dlock_client;

/* Client options. Fill with dlock_client_options_init(), then override. */
typedef struct dlock_client_options {
    size_t size; /* set by dlock_client_options_init (dlock.h, "Contracts"); do not change */
    /* Every URL the library accepts:
     * - redis://[user[:password]@]host[:port][/db] (user and password may
     *   be percent-encoded): one Redis server;
     * - unix:///path/to.sock[?db=N]: one Redis server on a Unix socket;
     * - redis-sentinel://[user:pass@]host:port[,host:port...]/master[?db=N]:
     *   the master that Sentinel names, followed across failovers;
     * - redis-cluster://[user:pass@]host:port[,host:port...]: a Redis
     *   Cluster, routed by slot (database 0 only);
     * - etcd:// and etcds:// (below): etcd v3.
     * Credentials follow the Redis URI convention (as redis-py reads it):
     * ":pass@" is a password alone (AUTH pass), "user:pass@" an ACL user
     * (AUTH user pass), and a bare "user@" a user without a password
     * (AUTH user "", which only a `nopass` user accepts); no "@": no AUTH.
     * etcd v3 (locks only, see docs/locks.md "Redis or etcd"):
     * etcd://[user:password@]host:port[,host:port...][/prefix] (port
     * default 2379, prefix default /dlock; endpoints tried in order) and
     * etcds://...[?cacert=FILE&cert=FILE&key=FILE] (HTTPS).
     * TLS: etcds:// talks HTTPS to etcd (server checked against cacert,
     * client certificate optional). To Redis the library speaks plain text
     * only: rediss:// is refused with DLOCK_ETLS, nothing is sent; reach a
     * TLS-only Redis through a local TLS tunnel (docs/ops/tls.md).
     * Any other scheme is DLOCK_EURL.
     * Default "redis://127.0.0.1:6379". */
    const char *url;
    int64_t connect_timeout_ms;  /* default 2000 */
    int64_t command_timeout_ms;  /* default 2000; a reply later than this is EUNKNOWN */
    int64_t watchdog_timeout_ms; /* lease in watchdog mode, default 30000; renewed every third */
    int retry_attempts;          /* reconnect attempts per call on connection errors, default 3 */
    int64_t retry_delay_ms;      /* base delay between attempts (doubling, +-50% jitter), default 50 */
    const char *key_prefix;      /* prepended to every key, default "" */
    int pool_size;               /* max pooled command connections, default 8 */
    int wait_replicas;           /* after acquiring: WAIT for this many replicas; 0 = off (default) */
    int64_t wait_replicas_timeout_ms; /* WAIT timeout, default 100 */
    dlock_log_fn log_fn;         /* NULL: discard log messages */
    void *log_ud;
    dlock_log_level log_level;   /* minimum level passed to log_fn, default INFO */
} dlock_client_options;

DLOCK_API void dlock_client_options_init(dlock_client_options *opts);

/* Creates a client: parses the URL, connects once to check it (so a bad
 * URL, wrong password or unreachable server is reported here), loads the
 * scripts and starts the subscriber and watchdog threads. An etcd URL
 * authenticates (with a user), reads once and starts only the watchdog
 * thread (lease keepalives); a gateway answering garbage is ESERVER.
 * Returns 0 and *client_out, or EINVAL/EURL/ETLS/EAUTH/ECONN/ESERVER/ENOMEM. */
DLOCK_API int dlock_client_create(const dlock_client_options *opts, dlock_client **client_out);

/* Stops the client's threads and closes its connections. Locks still held
 * are not released silently: each is reported through the log hook (WARN)
 * and left to expire on its lease. NULL is a no-op. Not to be called while
 * other threads still use the client. */
DLOCK_API void dlock_client_destroy(dlock_client *client);

/* The validity rule (docs/locks.md, "When a hold ends"). Every hold of
 * every object (lock, fair, read-write, semaphore, multi-lock, the etcd
 * lock) has a validity deadline on this process's monotonic clock: the
 * moment the command that acquired or last renewed it was *sent*, plus the
 * lease, minus a drift allowance of lease * drift_ppm / 10^6 + drift_ms.
 * From that moment on the handle no longer believes it holds (is_held is
 * false, hold counts are 0, *_validity_ms is 0), whatever the network or
 * the server is doing, and in watchdog mode the loss is declared then (log
 * line, lock_lost_total, the object's lost callback) by a timer that never
 * waits for I/O. The server lets another holder in no earlier than the
 * lease after it *received* that command; so as long as this machine's
 * clock runs no more than drift_ppm / 10^6 slower than the server's
 * (NTP keeps real clocks within 500 ppm), and drift_ms covers the
 * millisecond rounding of both clocks (the timestamp is taken before the
 * send, so the time until the send only adds margin), a holder stops
 * believing before anyone else can hold. A pause of this process itself (GC, SIGSTOP, swap)
 * is not covered: code that acts after it may act late; fencing tokens
 * (lock.h) are the answer for that case. */
#define DLOCK_DRIFT_PPM_DEFAULT 10000 /* 1 % of the lease */
#define DLOCK_DRIFT_MS_DEFAULT 2

/* Sets the drift allowance of the validity rule above for holds acquired
 * or renewed from now on: drift_ppm in 0..500000 (parts per million of
 * the lease), drift_ms in 0..60000. Any thread. Returns 0 or
 * DLOCK_EINVAL (NULL client, a value out of range: nothing changed).
 * Since 1.1. */
DLOCK_API int dlock_client_set_clock_drift(dlock_client *client, int64_t drift_ppm, int64_t drift_ms);

/* The client's random 128-bit id as 32 lowercase hex digits + NUL. */
DLOCK_API const char *dlock_client_id(const dlock_client *client);

/* Renders the client's metrics in Prometheus text format into a new
 * NUL-terminated buffer (free with dlock_free). Names: lock_acquire_total,
 * lock_acquire_fail_total{reason}, lock_hold_seconds{quantile},
 * lock_watchdog_renew_total, lock_watchdog_renew_fail_total,
 * lock_lost_total. Returns 0 or ENOMEM. */
DLOCK_API int dlock_metrics_render(dlock_client *client, char **text_out);

#ifdef __cplusplus
}
#endif
#endif
