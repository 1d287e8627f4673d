/* persist_backlog.h: how far the pipeline is behind on a campaign: the
 * entries of its streams pending in group seckill-persist (delivered, not
 * acknowledged) and not delivered yet (lag), summed over its buckets.
 * Invariant: read only (XINFO GROUPS, XRANGE/XLEN; layout.h), so anyone
 * may ask at any time (seckill drain, tests, the worker's drain mode).
 * Not thread-safe per connection. */
#ifndef SK_PERSIST_BACKLOG_H
#define SK_PERSIST_BACKLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "redis_io.h"

struct sk_pcamps;

/* Backlog of a campaign for group seckill-persist, summed over the
 * streams of its buckets ({<tag_j>}:orders; one for a K = 1 campaign, or
 * one not heated yet): entries pending (delivered, not acknowledged) and
 * lag (never delivered). 0 or a code (also when the layout cannot be
 * read). The same for one stream key: sk_stream_backlog (layout.h). */
int sk_persist_backlog(dlock__conn *rc, const char *campaign, int64_t *pending_out, int64_t *lag_out);

/* Whether every stream of the table has nothing pending and no lag now
 * (false also when one cannot be asked). Internal to the pipeline. */
bool sk__persist_drained(dlock__conn *rc, const struct sk_pcamps *cs);

#endif
