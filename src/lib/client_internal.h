/* client_internal.h: what every libdlock object (locks, semaphores, rate
 * limiter, latch, RedLock) uses from the client: keys, scripts, commands
 * with retry, pub/sub waiting, the watchdog and metrics. Internal only:
 * never installed, never included by programs outside src/lib and tests.
 *
 * Contract shared by all objects (see docs/locks.md):
 * - Every Redis call goes through dlock__client_cmd/eval: a pooled
 *   connection, reconnect + retry with backoff on ECONN (nothing sent);
 *   EUNKNOWN is returned as is, never retried blindly.
 * - Scripts are dlock__script values (name, embedded source, SHA-1 from
 *   the build); eval uses EVALSHA and falls back to EVAL on NOSCRIPT.
 * - Waiting uses the client's subscriber (one connection per master it
 *   needs): subscribe to a channel first, then try, then sleep on the
 *   waiter; never busy-poll. Scripts publish with the command they get in
 *   ARGV (dlock__pub_cmd), so sharded pub/sub is used on a Cluster.
 */
#ifndef DLOCK_LIB_CLIENT_INTERNAL_H
#define DLOCK_LIB_CLIENT_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"
#include "redis_io.h"

/* ---- errors ---------------------------------------------------------- */

/* The edge between the layers: maps a code from src/common (dlock__err,
 * common_err.h) to the dlock_err with the same meaning. Every result of a
 * dlock__conn_* / dlock__url_* / dlock__random_* / sentinel call passes
 * through here before libdlock compares it or returns it. */
int dlock__err_from_common(int rc);

/* ---- keys ------------------------------------------------------------ */

#define DLOCK__NAME_MAX DLOCK_NAME_MAX /* longest lock/object name accepted */

/* Validates a user-supplied object name: non-NULL, 1..DLOCK__NAME_MAX
 * bytes (no NUL inside by construction). 0 or DLOCK_EINVAL. */
int dlock__check_name(const char *name);
/* The same, and a refused name is explained through c's log hook (WARN),
 * with its length and the maximum; what names the object ("lock"). */
int dlock__client_check_name(const dlock_client *c, const char *what, const char *name);

/* Writes prefix + name into out (NUL-terminated). 0 or EINVAL if it does
 * not fit. */
int dlock__client_key(const dlock_client *c, const char *name, char *out, size_t outlen);

/* The rule for companion keys (fence counter, queues, ...): each lands in
 * key's Cluster slot (slot.h: a tag is the non-empty text between the
 * first '{' and the first '}' after it; a key without one hashes whole):
 * 1. key has a tag: key + suffix (same first '{', same '}' after it);
 * 2. no tag and no '}': "{" key "}" + suffix (the tag is all of key);
 * 3. no tag but a '}' (no tag can hold key: "a}b", "x{}y", "{}{x}"):
 *    key + "#" + n + suffix, untagged like key, with the smallest decimal
 *    n that gives key's slot (cost: ~16384 CRC16 tries, once per handle).
 * Case 3 keys have no tag and case 1 and 2 keys have one, so they never
 * meet; within case 3 the digits before the suffix (which has no digits or
 * braces, else EINVAL) give n and key back. Cases 1 and 2 meet only for
 * names "x" and "{x}" (the layout since the first release, kept).
 * 0, or EINVAL when out is too small. */
int dlock__companion_key(const char *key, const char *suffix, char *out, size_t outlen);

/* ---- scripts --------------------------------------------------------- */

/* dlock__script (src/common/script.h): name, source and SHA-1, all fixed
 * at build time, one per lua/<name>.lua as dlock__script_<name>. */
#include "script.h"

/* EVALSHA with nkeys KEYS and nargs ARGV;
 * on NOSCRIPT loads the script and retries once. Returns 0 with *out (may
 * be an ERROR reply from the script), or a transport code as
 * dlock__client_cmd. */
int dlock__client_eval(dlock_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                       int nargs, const char *const *args, dlock__reply **out);

/* One command on a pooled connection with reconnect/retry on ECONN. */
int dlock__client_cmd(dlock_client *c, int argc, const char **argv, const size_t *lens,
                      dlock__reply **out);

/* n commands pipelined on one pooled connection: one round trip, with
 * dlock__client_cmd's retry rules; replies_out[n] (all NULL on error). */
int dlock__client_cmds(dlock_client *c, size_t n, const int *argcs, const char *const *const *argvs,
                       dlock__reply **replies_out);

/* Like dlock__client_eval, and if replicas > 0 `WAIT replicas timeout_ms`
 * pipelined with the script on the same connection (one round trip; WAIT
 * only counts that connection's writes; its answer is used only when the
 * script's reply is not an error). *acked_out = replicas that
 * acknowledged (replicas when replicas == 0). A failed WAIT leaves *out
 * set and returns the WAIT's code. */
int dlock__client_eval_wait(dlock_client *c, const dlock__script *s, int nkeys,
                            const char *const *keys, int nargs, const char *const *args,
                            int replicas, int64_t timeout_ms, dlock__reply **out, int *acked_out);

/* The SHA-1 (40 hex digits + NUL) of s (s->sha; kept for its callers). */
const char *dlock__script_sha(dlock_client *c, const dlock__script *s);

/* ---- waiting (pub/sub) ----------------------------------------------- */

typedef struct dlock__waiter dlock__waiter;

/* Whether channel, the unlock/wake channel of key, uses sharded pub/sub
 * (Redis 7.0: SSUBSCRIBE on the master that owns the channel's slot, and
 * SPUBLISH from the script, which stays on that shard): true when the
 * client's server is a Cluster node and channel hashes to key's slot (a
 * script may only publish on a shard channel of its own slot). Otherwise
 * plain PUBLISH/SUBSCRIBE, which a Cluster broadcasts to every node. A
 * pure function of (cluster, key, channel), so every publisher and
 * subscriber of a channel agrees. */
bool dlock__client_sharded(const dlock_client *c, const char *key, const char *channel);
/* The publish command a script gets in ARGV: "SPUBLISH" or "PUBLISH". */
const char *dlock__pub_cmd(bool sharded);

/* Subscribes (through the client's subscriber) to channel (sharded as
 * dlock__client_sharded said) and returns a waiter that counts messages
 * published there from now on. */
int dlock__wait_begin(dlock_client *c, const char *channel, bool sharded, dlock__waiter **out);
/* Same, but wake-one: each message wakes only the longest-waiting
 * wake-one waiter of this process on channel (a message handed to a waiter
 * that ends without consuming it passes to the next). Broadcast waiters
 * on the same channel still see every message. Used by locks, where one
 * release admits one waiter. */
int dlock__wait_begin_one(dlock_client *c, const char *channel, bool sharded, dlock__waiter **out);
/* Sleeps until a message arrived on the channel since the last call, the
 * timeout passed, or dlock__wait_cancel. Returns 0 (message), ETIMEOUT,
 * ECANCELED or ECLOSED. A subscriber reconnect counts as a message (the
 * caller re-checks), so a lost publish never strands a waiter. */
int dlock__wait(dlock__waiter *w, int64_t timeout_ms);
/* Called by a releaser right after its release (which publishes on
 * channel) succeeded: hands the wake to a wake-one waiter of this process
 * at once instead of after the message's round trip through the server;
 * the message itself, when it arrives, is then not handed out again. */
void dlock__wait_notify_local(dlock_client *c, const char *channel);
/* Wakes dlock__wait with ECANCELED; safe from any thread. */
void dlock__wait_cancel(dlock__waiter *w);
void dlock__wait_end(dlock__waiter *w);

/* ---- watchdog and validity deadlines --------------------------------- */

/* The validity rule (docs/locks.md, "When a hold ends"): a hold acquired
 * or renewed by a command sent at sent_ms with lease lease_ms is believed
 * until sent_ms + lease_ms - drift, where drift = lease_ms * drift_ppm /
 * 10^6 + drift_ms (the client's dlock_client_set_clock_drift; default 1 %
 * + 2 ms): the server starts the lease after it received the command, so
 * as long as the two clocks' rates differ by less than the drift, the
 * holder stops believing before the server lets anyone else in. */
int64_t dlock__client_valid_until(const dlock_client *c, int64_t sent_ms, int64_t lease_ms);
/* The same rule with the drift given (the asynchronous client's, which
 * has no dlock_client): one formula for both halves. */
int64_t dlock__valid_until_rule(int64_t sent_ms, int64_t lease_ms, int64_t drift_ppm, int64_t drift_ms);

/* An object registered with the watchdog is renewed every
 * watchdog_timeout/3 by the watchdog's renewal thread. renew() returns 0
 * (renewed), DLOCK_ELOST (the server says it is gone: lost() is called and
 * the object dropped) or another code (transient: retried). A success
 * moves valid_until_ms forward (dlock__client_valid_until from the round's
 * send time). Independently, the watchdog's deadline thread, which never
 * does I/O, calls lost() at valid_until_ms when no renewal moved it: a
 * frozen server or network ends the belief on time, whatever the renewal
 * thread is blocked on. Every renewal attempt's I/O is bounded by the
 * remaining validity (dlock__pool_io_deadline). lost() runs on either
 * watchdog thread, exactly once per registration. The watchdog counts
 * lock_watchdog_renew_total / _fail_total and, when it calls lost(),
 * lock_lost_total: objects must not count those again. */
struct dlock__renew_cmd;
typedef struct dlock__renewable {
    int (*renew)(struct dlock__renewable *r, int64_t lease_ms);
    void (*lost)(struct dlock__renewable *r, int reason); /* reason: DLOCK_ELOST */
    /* Optional: "lock orders (simple)" for the loss log line. */
    void (*describe)(struct dlock__renewable *r, char *buf, size_t len);
    /* monotonic send time of the last successful acquire or renewal */
    int64_t last_ok_ms;
    /* Until when the holder may believe it holds (dlock__client_valid_until
     * of the last success); read without a lock by is_held and friends. */
    _Atomic int64_t valid_until_ms;
    struct dlock__renewable *next; /* owned by the watchdog */
    /* Optional batching (NULL: renew() is called). prepare() fills cmd with
     * the owner-checked renewal script call; the watchdog pipelines the due
     * renewals of all objects on one connection and passes each reply to
     * finish(), which returns what renew() would. On a transport error or
     * NOSCRIPT the watchdog falls back to renew() for that round. */
    int (*prepare)(struct dlock__renewable *r, int64_t lease_ms, struct dlock__renew_cmd *cmd);
    int (*finish)(struct dlock__renewable *r, const dlock__reply *reply);
    int64_t last_try_ms;  /* owned by the watchdog */
    bool removed;         /* owned by the watchdog */
    bool renewing;        /* in the renewal thread's current round */
    bool in_lost;         /* its lost() runs on the deadline thread */
} dlock__renewable;

#define DLOCK__RENEW_MAXARGS 4
typedef struct dlock__renew_cmd {
    const dlock__script *script;
    int nkeys;
    const char *keys[DLOCK__RENEW_MAXARGS];
    int nargs;
    const char *args[DLOCK__RENEW_MAXARGS];
    char num[32]; /* scratch for a numeric argument (e.g. the lease) */
} dlock__renew_cmd;

/* Registers r (its valid_until_ms and last_ok_ms already set). */
int dlock__watchdog_add(dlock_client *c, dlock__renewable *r);
/* Unregisters r; returns after any renewal or loss callback in progress
 * on r has finished (except on the watchdog thread running it, e.g. an
 * unlock inside a lost callback), so r is never touched again. */
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
/* The same, given the options' log hook and level (for parts that have no
 * client, e.g. the pool). */
void dlock__log_opts(const dlock_client_options *o, dlock_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void dlock__vlog_opts(const dlock_client_options *o, dlock_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Held-object registry: objects register (while they hold something, or
 * for their whole life), so dlock_client_destroy can report (WARN) what is
 * still held. describe writes e.g. "lock orders:42 (simple)" into buf, or
 * "" when nothing is held (then nothing is reported). */
typedef struct dlock__held {
    void (*describe)(const struct dlock__held *h, char *buf, size_t len);
    /* Optional: called at destroy after describe (threads already stopped),
     * so the object forgets the client and can still be freed later. */
    void (*orphan)(struct dlock__held *h);
    struct dlock__held *prev, *next; /* owned by the client */
} dlock__held;
void dlock__held_add(dlock_client *c, dlock__held *h);
void dlock__held_remove(dlock_client *c, dlock__held *h);

/* The "<client id>:<thread id>" owner string of the calling thread. */
void dlock__thread_owner(const dlock_client *c, char *out, size_t outlen);

/* Options the client was created with (strings valid for its lifetime). */
const dlock_client_options *dlock__client_options(const dlock_client *c);

/* Redisson's unlock channel of lock key: "redisson_lock__channel:{key}", or
 * "redisson_lock__channel:key" when key already contains '{' (Redisson's
 * prefixName does not wrap a name twice). malloc'd; NULL on ENOMEM. */
char *dlock__redisson_channel(const char *key);
/* The same rule with another prefix (the simple lock's
 * "dlock_lock__channel:"): prefix + "{" key "}", or prefix + key when key
 * contains '{' (so a tagged key's channel shares its tag and slot). */
char *dlock__lock_channel(const char *prefix, const char *key);

#endif
