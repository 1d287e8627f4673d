/* purchase.c: the purchase entry point (purchase.h). Invariant: every
 * purchase seckilld takes is checked here, once, against the one table
 * of limits (ids.h), and goes to exactly one of the two paths; the paths
 * keep the same check for their direct callers (tools, tests). */
#include "purchase.h"

#include <stddef.h>

#include "ids.h"
#include "sk_err.h"

/* On Redis: the process's one coalescer, or e's while no loop serves it. */
static int on_redis(sk_engine *e, sk_relay_door *relay, const sk_purchase_req *r, sk_purchase_cb cb, void *arg)
{
    if (relay) {
        int rc = sk_relay_purchase(relay, r->campaign, r->user, r->qty, r->idem, r->ip, cb, arg);
        if (rc != SK_EUNAVAIL) return rc;
    }
    return sk_engine_purchase(e, r->campaign, r->user, r->qty, r->idem, r->ip, cb, arg);
}

int sk_purchase(sk_engine *e, sk_relay_door *relay, sk_degraded *d, const sk_purchase_req *r,
                sk_purchase_cb cb, void *arg, const char **why_out)
{
    const char *why = sk_purchase_invalid(r->campaign, r->user, r->qty, r->idem);
    *why_out = why;
    if (why) return SK_EINVAL;
    if (!sk_degraded_active(d)) return on_redis(e, relay, r, cb, arg);
    /* the database keeps no Idempotency-Keys: never risk a second order */
    if (r->idem) return SK_EIDEMWAIT;
    return sk_degraded_purchase(d, r->campaign, r->user, r->qty, r->ip, cb, arg);
}
