/* soldout.h: the local sold-out cache and the throttle of a purchase path,
 * one implementation for the Redis path (coalesce.c) and the database path
 * (seckilld/degraded.c). Invariant: the cache only ever answers a purchase
 * without an Idempotency-Key (a keyed one may replay an earlier acceptance)
 * and is only a cache: clearing it lets the authority decide again; the
 * throttle refuses before anything is queued, so a refusal decided nothing.
 * Loop thread only (no locking). */
#ifndef SK_SOLDOUT_H
#define SK_SOLDOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Campaigns known sold out (a path without a campaign table keeps its
 * flags here; the coalescer keeps them on its campaigns). */
typedef struct sk_soldout {
    char (*ids)[65];
    size_t n, cap;
} sk_soldout;

bool sk_soldout_has(const sk_soldout *s, const char *campaign);
/* Flags campaign (an allocation failure leaves it unflagged: only a cache). */
void sk_soldout_mark(sk_soldout *s, const char *campaign);
/* Forgets every flag (the authority changed: mode switch, re-heat). */
void sk_soldout_reset(sk_soldout *s);
void sk_soldout_free(sk_soldout *s);

/* The answer before a purchase is queued. flagged: its campaign is known
 * sold out; keyed: it carries an Idempotency-Key. SK_ESOLDOUT (counted in
 * *hits and outcomes[SK_OUT_SOLD_OUT]) or 0: decide it. */
int sk_soldout_answer(bool flagged, bool keyed, uint64_t *hits, uint64_t *outcomes);
/* The throttle: 0 when one more may wait (waiting < limit), otherwise
 * SK_EQUEUEFULL, counted in *refused (NULL: not counted). */
int sk_throttle_admit(size_t waiting, size_t limit, uint64_t *refused);

#endif
