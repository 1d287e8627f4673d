/* park.h: a purchase on the engine's purchase side (sk__preq), its one
 * answer, and the purchases parked on a lane until units arrive (park.c).
 * Below both the coalescer (coalesce.c: it takes, queues, sends and
 * decides purchases) and the mover (transfer.c: it calls this file where a
 * transfer ends), so both call it directly and neither calls the other
 * back. Invariant: a purchase is answered exactly once, here. Not
 * thread-safe: the engine's loop only. */
#ifndef SK_PARK_H
#define SK_PARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "camp_table.h"
#include "engine_types.h"

struct event;

/* One purchase from sk_engine_purchase until its answer. */
struct sk__preq {
    sk_purchase_cb cb;
    void *arg;
    int64_t qty;
    char user[65];
    char idem[65];
    char ip[64];
    uint64_t order_id;      /* 0 until the first send; kept when sent again */
    bool resent;            /* sent again after a transfer: rate limits not counted twice */
    int64_t parked_ms;      /* monotonic ms it first came back "short" (0: never) */
    bool confirmed;         /* a replay of an order the database holds: 201 without an acknowledgement */
    sk__lane *lane;         /* while parked or due to go again: its lane */
    struct sk__preq *next;  /* parked or sent-again FIFO */
    sk_purchase_result res; /* decided, waiting for the acknowledgement */
};

/* The purchases taken and not yet answered, what their answers were, and
 * the parked ones due to go out again. */
typedef struct sk__park {
    sk__camp_table *camps;   /* their campaigns; camps->closing: nothing goes out again */
    int64_t max_ms;          /* a parked purchase answers 503 after this (the engine's command timeout) */
    struct event *again_ev;  /* the coalescer's: it sends sk__park_next_again's purchases (coalesce.c) */
    sk__preq *again;         /* parked purchases to send again, FIFO over every lane */
    sk__preq **again_tail;
    size_t pending;          /* purchases queued, in flight, parked or due again */
    uint64_t outcomes[SK_STAT_OUTCOMES];
    uint64_t waits[SK_STAT_WAIT_BUCKETS]; /* parked purchases by wait until their answer */
    uint64_t wait_ms_sum;
    sk__preq *spare;         /* answered records kept for the next purchases */
    size_t nspare;
} sk__park;

/* again_ev: activated when a purchase is due to go out again. */
void sk__park_init(sk__park *pk, sk__camp_table *camps, int64_t max_ms, struct event *again_ev);
/* Frees the spare records (the engine's end). */
void sk__park_clear(sk__park *pk);
/* A zeroed record for a new purchase (NULL: out of memory): an answered
 * one when there is one, so a purchase allocates nothing here. */
sk__preq *sk__park_preq(sk__park *pk);
/* A purchase's final answer: counts the outcome (and a parked one's
 * wait), calls its callback, gives up its record. */
void sk__park_answer(sk__park *pk, sk__preq *q, const sk_purchase_result *res);
/* Parks q (answered "short") on l until units arrive. */
void sk__park_add(sk__lane *l, sk__preq *q);
/* Units the purchases parked on l need (0: nothing is parked). */
int64_t sk__park_need(const sk__lane *l);
/* Units arrived in l (or may have): every purchase parked there goes out again. */
void sk__park_arrived(sk__park *pk, sk__lane *l);
/* Proven empty: at one moment nothing of the campaign was anywhere but in
 * l, which held here units (<= 0: the campaign is sold out, its local flag
 * is set). Parked purchases that fit in here go out again, the others are
 * answered sold out. */
void sk__park_empty(sk__park *pk, sk__lane *l, int64_t here);
/* The pull into l goes round again: purchases parked longer than max_ms
 * give up (answered unavailable, not decided). */
void sk__park_expire(sk__park *pk, sk__lane *l);
/* The next purchase due to go out again (its lane is q->lane), NULL when none. */
sk__preq *sk__park_next_again(sk__park *pk);
/* Answers every purchase parked on l with err. */
void sk__park_fail(sk__park *pk, sk__lane *l, int err);

#endif
