/* transfer.h: the mover of a sharded campaign's units between its buckets
 * (transfer.c). It owns its state (pulls under way, transfer ids, recovery
 * clock), sends through the wire (engine_wire.h), and never answers a
 * buyer itself: where a pull ends it calls the park (park.h), which
 * answers the parked purchases or puts them out again. Loop thread only. */
#ifndef SK_TRANSFER_H
#define SK_TRANSFER_H

#include <stdint.h>

#include "camp_table.h"
#include "engine_acks.h"
#include "engine_wire.h"
#include "park.h"

struct event_base;
typedef struct sk__xfer sk__xfer;

/* w: where transfer.lua and its WAITs go (connection 0) and the log;
 * acks: whether a half is acknowledged by a WAIT (NULL: never); camps:
 * the table whose sharded campaigns recovery walks (not owned); park: the
 * lanes' parked purchases (not owned); pause_ms: test hook, a delay
 * between take and give. 0 or DLOCK_ENOMEM. */
int sk__xfer_new(struct event_base *base, sk__wire *w, sk__acks *acks, sk__camp_table *camps, sk__park *park,
                 int64_t pause_ms, sk__xfer **out);
/* Lane l has parked purchases (or just drained: none): start moving units
 * into it unless a move into it is already under way. */
void sk__xfer_kick(sk__xfer *x, sk__lane *l);
/* At most once a second: finishes journal entries older than a few
 * seconds in every bucket of the sharded campaigns of the table (a crashed
 * or stalled mover's). */
void sk__xfer_recover(sk__xfer *x);
/* From now on nothing new is sent and no pull waits on a timer (pulls end
 * as their replies come in). */
void sk__xfer_stop(sk__xfer *x);
/* Frees (and the pulls left); once no reply is due any more. NULL ok. */
void sk__xfer_free(sk__xfer *x);
/* The mover's figures: all of sk_engine_xfer_stats but the waits (left 0:
 * the side that answers the parked purchases counts them). */
void sk__xfer_stats(const sk__xfer *x, sk_engine_xfer_stats *st);

#endif
