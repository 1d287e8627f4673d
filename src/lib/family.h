/* family.h: private helpers shared by the lock family (lock, fair lock,
 * read-write lock, semaphore/permits, latch, rate limiter, multi-lock, and
 * RedLock's waits): owner ids,
 * companion keys, script calls answering {code, value}, cancellation and the
 * subscribe-then-try wait loop. Invariant: a wait never busy-polls; it sleeps
 * on a pub/sub channel, capped by a hint the server gave.
 */
#ifndef DLOCK_LIB_FAMILY_H
#define DLOCK_LIB_FAMILY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "client_internal.h"

/* Longest key we build: prefix + name + companion suffixes. */
#define DLOCK__KEY_MAX (2 * DLOCK__NAME_MAX + 512)
/* "<client id 32 hex>:<16 hex>" + NUL */
#define DLOCK__FAM_OWNER_LEN 50

/* Writes a fresh owner id for a handle: "<client id>:<16 random hex>". */
int dlock__fam_owner(const dlock_client *c, char out[DLOCK__FAM_OWNER_LEN]);

/* key = client key of name; companion i = dlock__companion_key(key,
 * suffixes[i]). out must hold 1 + n buffers of DLOCK__KEY_MAX bytes. */
int dlock__fam_keys(const dlock_client *c, const char *name, int n, const char *const *suffixes,
                    char (*out)[DLOCK__KEY_MAX]);

/* Runs script s and decodes its reply: an integer reply gives *code_out and
 * *val_out = 0; an array {code, value[, value2]} gives code, value (and
 * value2 if val2_out is not NULL). An ERROR reply or an unexpected shape is
 * DLOCK_ESERVER (logged). Transport codes as dlock__client_eval. */
int dlock__fam_eval(dlock_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                    int nargs, const char *const *args, long long *code_out, long long *val_out,
                    long long *val2_out);

/* A watchdog renewal: runs s with KEYS keys and ARGV {owner, lease_ms} and
 * decodes its reply as dlock__fam_eval does (*code_out: the script's
 * answer, e.g. 1 renewed). Codes as dlock__fam_eval. */
int dlock__fam_renew(dlock_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                     const char *owner, int64_t lease_ms, long long *code_out);

/* *count_out = the count field owner has in the {owner: count} hash at
 * key, as the server says now (0 when there is no such field, or key is
 * not a hash). 0, or a transport code / DLOCK_ESERVER. */
int dlock__fam_hcount(dlock_client *c, const char *key, const char *owner, int64_t *count_out);

/* ---- cancellation ------------------------------------------------------ */

typedef struct dlock__wnode {
    dlock__waiter *w;
    struct dlock__wnode *next;
} dlock__wnode;

/* Per-handle cancellation: cancel() bumps gen and wakes every wait that is
 * in progress on the handle (pub/sub waiters and plain sleeps). A wait that
 * starts after the cancel is not affected (it records gen when it starts),
 * except that a cancel while no wait is in progress makes the next wait on
 * the handle return DLOCK_ECANCELED (so a cancel racing the start of a wait
 * is never lost). */
typedef struct dlock__waitctl {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t gen;
    bool cancel_next;
    int active; /* waits in progress */
    dlock__wnode *head;
} dlock__waitctl;

int dlock__waitctl_init(dlock__waitctl *ctl);
void dlock__waitctl_destroy(dlock__waitctl *ctl);
void dlock__waitctl_cancel(dlock__waitctl *ctl);
/* Starts a wait: returns the generation to compare against (and consumes a
 * pending cancel_next by returning a generation that is already stale). */
uint64_t dlock__waitctl_start(dlock__waitctl *ctl);
void dlock__waitctl_end(dlock__waitctl *ctl);
bool dlock__waitctl_canceled(dlock__waitctl *ctl, uint64_t gen);
/* For a call that does not wait (e.g. a re-entry): true, and the pending
 * cancel is consumed, when a cancel came while no wait was in progress. */
bool dlock__waitctl_take_pending(dlock__waitctl *ctl);
/* Sleeps up to ms on the handle's condition; 0 or DLOCK_ECANCELED. */
int dlock__waitctl_sleep(dlock__waitctl *ctl, uint64_t gen, int64_t ms);

/* ---- the wait loop ----------------------------------------------------- */

/* One attempt: returns 1 acquired, 0 busy (set *hint_ms: the server's bound
 * on how long the obstacle lasts, or -1 unknown), or a negative code. */
typedef int (*dlock__try_fn)(void *ctx, int64_t *hint_ms);
/* Channel to sleep on after a busy attempt (may change between attempts,
 * e.g. a multi-lock waits on the key that was busy), and whether it is
 * sharded (dlock__client_sharded). */
typedef const char *(*dlock__chan_fn)(void *ctx, bool *sharded_out);

typedef struct dlock__wait_spec {
    dlock_client *c;
    dlock__waitctl *ctl;
    dlock__try_fn attempt;
    dlock__chan_fn channel; /* NULL: plain sleeps (no pub/sub) */
    void *ctx;
    int64_t wait_ms;     /* 0: one attempt (EBUSY); DLOCK_WAIT_FOREVER: no bound */
    int64_t max_nap_ms;  /* recheck at least this often (lost publishes, heartbeats) */
    /* > 0: the recheck interval starts here and doubles after each nap that
     * no message ended, up to max_nap_ms (a lock whose foreign holders may
     * not publish); 0: always max_nap_ms. */
    int64_t min_nap_ms;
    /* Subscribe wake-one (dlock__wait_begin_one): a release admits one
     * waiter of this process, not the herd. */
    bool wake_one;
} dlock__wait_spec;

/* Try; if busy, subscribe, try again, then sleep on the channel (capped by
 * the hint, the remaining wait and max_nap_ms) and repeat. Returns 0
 * (acquired), DLOCK_EBUSY (wait_ms == 0), DLOCK_ETIMEOUT, DLOCK_ECANCELED,
 * DLOCK_ECLOSED, or the attempt's error. */
int dlock__fam_wait(const dlock__wait_spec *spec);

/* Holding (watchdog + held registry) is the one hold state machine of
 * hold.h. */

/* Writes v in decimal into buf (NUL-terminated); returns buf-ready 0. */
int dlock__fam_fmt_i64(char *buf, size_t len, int64_t v);

/* The rate limiter's options (ratelimit.h) checked and written as its
 * script's arguments: the emission interval in microseconds and the
 * burst; the blocking and the asynchronous limiter share them. 0 or
 * DLOCK_EINVAL. */
struct dlock_ratelimit_options;
int dlock__ratelimit_params(const struct dlock_ratelimit_options *opts, char interval[40], char burst[24],
                            int64_t *burst_n_out);

#endif
