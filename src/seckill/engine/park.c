/* park.c: purchases parked on a lane while the mover (transfer.c) pulls
 * units into it, and the one answer of every purchase. Design: the mover
 * reports the end of a pull by calling this file (arrived, proven empty,
 * going round again); the coalescer, which sends purchases and reads
 * their replies, kicks the mover. A purchase answered here (sold out, or
 * parked past max_ms: 503) needs only its callback and the figures, so
 * the answer lives here and the coalescer answers through it too. A
 * purchase that goes out again needs the coalescer's queue and batches,
 * which sit above the mover: calling them from here would close a circle
 * (coalescer -> mover -> park -> coalescer). So it is put on the "again"
 * FIFO and the coalescer's again_ev is made active: the coalescer sends
 * the FIFO from the loop, and before any new purchase, so a parked
 * purchase is not overtaken by a newer one. While the table is closing
 * (the engine is freed) nothing goes out again: such a purchase is
 * answered unavailable, as a send then would be. */
#include "park.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "dlock/dlock.h"
#include "rulebook.h"
#include "sk_err.h"
#include "util.h"

const int64_t sk_wait_bucket_le_ms[SK_STAT_WAIT_BUCKETS] = {1, 2, 5, 10, 50, 100, 1000, INT64_MAX};

void sk__park_init(sk__park *pk, sk__camp_table *camps, int64_t max_ms, struct event *again_ev)
{
    *pk = (sk__park){.camps = camps, .max_ms = max_ms, .again_ev = again_ev};
    pk->again_tail = &pk->again;
}

/* Answered records kept: one loop's purchases in flight rarely pass it. */
#define SPARE_MAX 1024

void sk__park_clear(sk__park *pk)
{
    while (pk->spare) {
        sk__preq *q = pk->spare;
        pk->spare = q->next;
        free(q);
    }
    pk->nspare = 0;
}

sk__preq *sk__park_preq(sk__park *pk)
{
    sk__preq *q = pk->spare;
    if (!q) return calloc(1, sizeof(*q));
    pk->spare = q->next;
    pk->nspare--;
    memset(q, 0, sizeof(*q));
    return q;
}

void sk__park_answer(sk__park *pk, sk__preq *q, const sk_purchase_result *res)
{
    if (q->parked_ms) {
        int64_t w = dlock__now_ms() - q->parked_ms;
        int k = 0;
        while (k < SK_STAT_WAIT_BUCKETS - 1 && w > sk_wait_bucket_le_ms[k]) k++;
        pk->waits[k]++;
        pk->wait_ms_sum += (uint64_t)(w > 0 ? w : 0);
    }
    pk->outcomes[sk_outcome_of_err(res->err, res->replay)]++;
    q->cb(res, q->arg);
    pk->pending--;
    if (pk->nspare >= SPARE_MAX) {
        free(q);
        return;
    }
    q->next = pk->spare;
    pk->spare = q;
    pk->nspare++;
}

/* A parked purchase's answer without a decision (err), or sold out. */
static void answer_err(sk__park *pk, sk__preq *q, int err, int64_t remaining)
{
    sk_purchase_result res = {.err = err, .qty = q->qty, .order_id = q->order_id, .remaining = remaining};
    sk__park_answer(pk, q, &res);
}

void sk__park_add(sk__lane *l, sk__preq *q)
{
    q->resent = true;
    q->next = NULL;
    q->lane = l;
    if (!q->parked_ms) q->parked_ms = dlock__now_ms();
    *l->parked_tail = q;
    l->parked_tail = &q->next;
}

static sk__preq *take_parked(sk__lane *l)
{
    sk__preq *q = l->parked;
    l->parked = NULL;
    l->parked_tail = &l->parked;
    return q;
}

int64_t sk__park_need(const sk__lane *l)
{
    int64_t need = 0;
    for (const sk__preq *q = l->parked; q; q = q->next) need += q->qty;
    return need;
}

/* q goes out again: onto the FIFO the coalescer sends from the loop. */
static void send_again(sk__park *pk, sk__lane *l, sk__preq *q)
{
    if (pk->camps->closing) {
        answer_err(pk, q, SK_EUNAVAIL, 0);
        return;
    }
    q->next = NULL;
    q->lane = l;
    l->again++;
    *pk->again_tail = q;
    pk->again_tail = &q->next;
    event_active(pk->again_ev, EV_TIMEOUT, 0);
}

sk__preq *sk__park_next_again(sk__park *pk)
{
    sk__preq *q = pk->again;
    if (!q) return NULL;
    pk->again = q->next;
    if (!pk->again) pk->again_tail = &pk->again;
    q->next = NULL;
    q->lane->again--;
    return q;
}

void sk__park_arrived(sk__park *pk, sk__lane *l)
{
    sk__preq *q = take_parked(l);
    while (q) {
        sk__preq *next = q->next;
        send_again(pk, l, q);
        q = next;
    }
}

/* An empty l sets the local flag: decide_one (coalesce.c) then answers a
 * short bucket sold out at once, until any bucket has stock. */
void sk__park_empty(sk__park *pk, sk__lane *l, int64_t here)
{
    if (here <= 0) l->camp->soldout = true;
    sk__preq *q = take_parked(l);
    while (q) {
        sk__preq *next = q->next;
        if (q->qty <= here) send_again(pk, l, q);
        else answer_err(pk, q, SK_ESOLDOUT, here > 0 ? here : 0);
        q = next;
    }
}

void sk__park_expire(sk__park *pk, sk__lane *l)
{
    int64_t now = dlock__now_ms();
    sk__preq *q = take_parked(l);
    while (q) {
        sk__preq *next = q->next;
        if (now - q->parked_ms >= pk->max_ms) {
            answer_err(pk, q, SK_EUNAVAIL, 0);
        } else {
            q->next = NULL;
            *l->parked_tail = q;
            l->parked_tail = &q->next;
        }
        q = next;
    }
}

void sk__park_fail(sk__park *pk, sk__lane *l, int err)
{
    sk__preq *q = take_parked(l);
    while (q) {
        sk__preq *next = q->next;
        answer_err(pk, q, err, 0);
        q = next;
    }
}
