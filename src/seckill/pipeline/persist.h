/* persist.h: the persistence workers of the order pipeline: they move
 * accepted orders from each campaign's streams (one per bucket,
 * {<tag_j>}:orders, consumer group seckill-persist; {c:<id>}:orders for a
 * K = 1 campaign) into the database and run the barrier, the reserve pass
 * and the lifecycle sweep (lifecycle.h) between batches. Parts:
 * persist_discovery.h, persist_stream.h, persist_backlog.h (the backlog
 * query, declared through this header too).
 * Invariant: an entry is XACKed only after the transaction that recorded
 * it committed; an entry pending on a dead consumer is reclaimed after
 * claim_idle_ms; after max_deliveries failed deliveries it moves to
 * {c:<id>}:orders:dead with the error. Nothing accepted is lost.
 * Thread-safety: sk_persist_run owns its connections; run one per thread. */
#ifndef SK_PERSIST_H
#define SK_PERSIST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "layout.h" /* SK_PERSIST_GROUP, sk_stream_backlog */
#include "persist_backlog.h"
#include "redis_io.h"

typedef struct sk_persist_opts {
    const char *redis_url;    /* required */
    const char *database_url; /* required */
    const char *consumer;     /* NULL: "<host>-<pid>-<random>" */
    const char *campaign;     /* NULL: every campaign (Redis set + DB) */
    int batch;                /* entries per transaction (default 1000) */
    int64_t block_ms;         /* XREADGROUP BLOCK (default 500) */
    int64_t claim_idle_ms;    /* reclaim entries idle this long (default 30000) */
    int max_deliveries;       /* then dead-letter (default 5) */
    int64_t pay_timeout_ms;   /* cancel unpaid orders after this (default 15 min; <= 0: never) */
    int64_t sweep_interval_ms;/* how often to look for unpaid orders (default 1000) */
    bool drain;               /* return once every stream is drained */
    atomic_int *stop;         /* set non-zero to make sk_persist_run return (may be NULL) */
    void (*log)(const char *line, void *ud); /* NULL: silent */
    void *log_ud;
} sk_persist_opts;

typedef struct sk_persist_stats {
    int64_t persisted, rejected, duplicates, dead_lettered;
    int64_t batches, reclaimed, db_errors, redis_errors;
    int64_t cancelled, released;
    int64_t stale;                 /* refused: stale timeline (an old master's order) */
    int64_t confirmed, lost;       /* tentative orders finalised */
    int64_t handbacks;             /* reserve handbacks applied */
    int64_t barriers, barrier_ms;  /* barriers run, and the last one's duration */
} sk_persist_stats;

void sk_persist_opts_init(sk_persist_opts *o);

/* Runs a worker until *stop (or, with drain, until every stream is
 * drained). Returns 0, SK_EINVAL (bad options/url), SK_EDB / a dlock code
 * when the database / Redis cannot be opened at start. Later failures are
 * retried with back-off, counted in stats_out (may be NULL). */
int sk_persist_run(const sk_persist_opts *o, sk_persist_stats *stats_out, char *err, size_t errlen);

/* Whether the server behind rc is a Cluster node (INFO cluster,
 * cluster_enabled:1): then one command may name keys of one slot only. */
bool sk_persist_is_cluster(dlock__conn *rc);

#endif
