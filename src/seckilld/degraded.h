/* degraded.h: seckilld's degraded mode: when Redis has been unreachable for
 * after_ms, purchases are decided by the database (sk_db_purchase_direct)
 * on a worker thread with its own sk_db handle and a bounded queue; the
 * loop switches back to Redis only after Redis has been healthy for
 * recover_ms AND the database holds no path=db order not yet mirrored into
 * Redis (checked with new purchases held, so none slips in between).
 * Thread-safety: every function is called from the loop's thread only. */
#ifndef SK_DEGRADED_H
#define SK_DEGRADED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct event_base;
typedef struct sk_degraded sk_degraded;

typedef struct sk_degraded_opts {
    int64_t after_ms;     /* Redis unreachable this long -> degraded (default 1000) */
    int64_t recover_ms;   /* Redis healthy this long -> try to switch back (default 2000) */
    int max_inflight;     /* database-path purchases queued or running; beyond: 503 (default 64) */
    sk_log_fn log;        /* NULL: silent */
    void *log_ud;
} sk_degraded_opts;

void sk_degraded_opts_init(sk_degraded_opts *o);

/* Opens its own database handle on db_url and starts the worker thread and
 * the mode timer. 0, SK_EINVAL / SK_EDB (err says why) or DLOCK_ENOMEM. */
int sk_degraded_new(struct event_base *base, sk_engine *engine, const char *db_url,
                    const sk_degraded_opts *opts, sk_degraded **out, char *err, size_t errlen);
/* Stops the thread; purchases not yet decided are answered SK_EUNAVAIL
 * (decided ones get their real answer). NULL ok. */
void sk_degraded_free(sk_degraded *d);

/* True while purchases must take the database path (degraded, or switching
 * back). */
bool sk_degraded_active(const sk_degraded *d);

/* A purchase on the database path (call only when sk_degraded_active).
 * Returns 0 (cb runs later, from the loop, with a result as the engine's,
 * answered from the same outcome table: 0, SK_ESOLDOUT (the campaign has no
 * unit left), SK_ERESERVE (the reserve cannot cover it while units remain
 * outside it; remaining: the reserve's units left), SK_ELIMIT (value -1: holding unknown),
 * SK_ENOTSTARTED, SK_EENDED, SK_ENOTFOUND, SK_EINVAL (bad quantity, value
 * the limit), SK_EUNAVAIL), or answers at once
 * without calling cb: SK_ESOLDOUT (campaign known sold out while degraded:
 * the sold-out cache of soldout.h), SK_ERESERVE (its reserve known empty),
 * SK_EQUEUEFULL (max_inflight queued:
 * its throttle), SK_EUNAVAIL (no order-id lease),
 * SK_EINVAL, DLOCK_ENOMEM.
 * Purchases with an Idempotency-Key are not taken here (the caller answers
 * 503: the database keeps no keys, see docs/seckill.md). ip is used only
 * when the purchase is handed to the engine after switching back. */
int sk_degraded_purchase(sk_degraded *d, const char *campaign, const char *user, int64_t qty,
                         const char *ip, sk_purchase_cb cb, void *arg);

typedef struct sk_degraded_stats {
    int mode;                  /* 0 redis, 1 degraded (also while switching back) */
    uint64_t entered;          /* switches to degraded */
    uint64_t outcomes[SK_STAT_OUTCOMES]; /* database-path decisions, by sk_outcome_id */
    uint64_t throttled;        /* refused at once: queue full */
    uint64_t soldout_local;    /* answered from the local sold-out flag */
    size_t queued;             /* queued or running now */
} sk_degraded_stats;
void sk_degraded_get_stats(const sk_degraded *d, sk_degraded_stats *out);

#endif
