/* transfer.h: the mover of a sharded campaign's units between its buckets
 * (transfer.c). It owns its state (pulls under way, transfer ids, recovery
 * clock), sends through the wire (engine_wire.h), and never answers a buyer: it
 * reports events, and the coalescer answers or re-sends its parked
 * purchases. Loop thread only. */
#ifndef SK_TRANSFER_H
#define SK_TRANSFER_H

#include <stdint.h>

#include "camp_table.h"
#include "engine_acks.h"
#include "engine_wire.h"

struct event_base;
typedef struct sk__xfer sk__xfer;

/* What the mover reports about lane l (the owner of its parked purchases
 * acts on it; every callback may queue or answer those purchases). */
typedef struct sk__xfer_events {
    void *ud;
    /* Units the purchases parked on l need (0: nothing is parked). */
    int64_t (*need)(void *ud, sk__lane *l);
    /* Units arrived in l (or may have): send its parked purchases again. */
    void (*arrived)(void *ud, sk__lane *l);
    /* Proven empty: at one moment nothing of the campaign was anywhere but
     * in l, which held here units (<= 0: the campaign is sold out). Parked
     * purchases that fit in here go again, the others are sold out. */
    void (*empty)(void *ud, sk__lane *l, int64_t here);
    /* The pull into l goes round again: purchases parked longer than their
     * deadline give up (answered unavailable, not decided). */
    void (*expire)(void *ud, sk__lane *l);
    /* A transfer call of c came back or a pull ended: c may be idle. */
    void (*settled)(void *ud, sk__camp *c);
} sk__xfer_events;

/* w: where transfer.lua and its WAITs go (connection 0) and the log;
 * acks: whether a half is acknowledged by a WAIT (NULL: never); camps:
 * the table whose sharded campaigns recovery walks (not owned); pause_ms:
 * test hook, a delay between take and give. 0 or DLOCK_ENOMEM. */
int sk__xfer_new(struct event_base *base, sk__wire *w, sk__acks *acks, sk__camp_table *camps,
                 const sk__xfer_events *ev, int64_t pause_ms, sk__xfer **out);
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
