/* purchase.h: the one entry point of a purchase: checks the request once
 * (ids.h's table of limits) and hands it to the path that decides
 * purchases now: Redis (sk_engine_purchase, the coalescer) or, while
 * Redis is away, the database (sk_degraded_purchase). Both answer with the
 * same sk_purchase_result, read from the one outcome table (outcome.h).
 * Thread-safety: the loop's thread of e and d only. */
#ifndef SK_PURCHASE_H
#define SK_PURCHASE_H

#include <stdint.h>

#include "degraded.h"
#include "engine.h"
#include "relay.h"

/* What a buyer asks: qty units of campaign as user; idem the
 * Idempotency-Key (NULL: none); ip the client's address for the rate
 * limit (NULL or "": none). */
typedef struct sk_purchase_req {
    const char *campaign;
    const char *user;
    int64_t qty;
    const char *idem;
    const char *ip;
} sk_purchase_req;

/* Decides r on Redis, or on the database path while d is active (d NULL:
 * Redis only). On Redis, through relay when it is not NULL (the process's
 * one coalescer, relay.h; e's own while no loop serves it), else on e. Returns 0 when cb will run (later, from the loop), or an
 * answer now, cb never called: SK_EINVAL with *why_out set (r breaks a
 * rule of ids.h), SK_EIDEMWAIT (a keyed purchase while the database
 * decides: it keeps no Idempotency-Keys, so none risks a second order), or
 * what sk_engine_purchase / sk_degraded_purchase return at once. */
int sk_purchase(sk_engine *e, sk_relay_door *relay, sk_degraded *d, const sk_purchase_req *r,
                sk_purchase_cb cb, void *arg, const char **why_out);

#endif
