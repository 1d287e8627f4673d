/* persist_opts.h: a persistence worker's options and figures, the types
 * its API (persist.h: sk_persist_opts_init, sk_persist_run) takes and
 * fills and every part of the worker reads or counts (persist_ctx.h), so
 * no part includes the scheduler's header to name them. Types only. */
#ifndef SK_PERSIST_OPTS_H
#define SK_PERSIST_OPTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

#endif
