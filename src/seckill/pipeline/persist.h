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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "layout.h" /* SK_PERSIST_GROUP, sk_stream_backlog */
#include "persist_backlog.h"
#include "persist_opts.h" /* sk_persist_opts, sk_persist_stats */
#include "redis_io.h"

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
