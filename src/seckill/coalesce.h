/* coalesce.h: the purchase coalescer, owner of the purchase flow.
 * Concurrent purchases of a campaign are queued and sent as one
 * purchase.lua call. It reaches Redis only through the wire
 * (engine_wire.h) and reads the engine's facts from its parts (lease,
 * acknowledgements, server), calling down only: the engine owns one and
 * calls it; nothing calls back into the engine.
 * Not thread-safe: used from the engine's loop only. */
#ifndef SK_COALESCE_H
#define SK_COALESCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "engine_acks.h"
#include "engine_lease.h"
#include "engine_server.h"
#include "engine_wire.h"

struct event_base;
typedef struct sk__coalescer sk__coalescer;

/* What the coalescer works with, all the engine's: it sends through the
 * wire and reads the facts from the parts as values when it needs them
 * (ready, the run id, the acknowledgement plan, the next order id); none
 * of them calls it back. */
typedef struct sk__co_deps {
    sk__wire *w;
    sk__lease *lease;      /* order ids; ready only while it is valid */
    sk__acks *acks;        /* the plan of each batch, its WAIT, a master alone */
    const sk__server *srv; /* ready once probed; run id; Cluster mode */
} sk__co_deps;

/* o: max_batch, linger_us, the rate limits and TTLs. 0 or DLOCK_ENOMEM. */
int sk__coalescer_new(struct event_base *base, const sk_engine_opts *o, const sk__co_deps *deps,
                      sk__coalescer **out);
/* Connection 0 is up, the server probed and the order-id lease held:
 * purchases are taken (sk_engine_ready). */
bool sk__coalescer_ready(const sk__coalescer *co);
/* Fails every purchase still queued with err (batches in flight are
 * answered by their reply); from now on nothing new is sent. */
void sk__coalescer_fail_all(sk__coalescer *co, int err);
/* Frees; call after sk__coalescer_fail_all and once no reply is due. NULL ok. */
void sk__coalescer_free(sk__coalescer *co);

/* sk_engine_purchase's contract (engine.h). */
int sk__coalescer_purchase(sk__coalescer *co, const char *campaign, const char *user, int64_t qty,
                           const char *idem, const char *ip, sk_purchase_cb cb, void *arg);
/* Re-checks the stock of locally sold-out campaigns (call periodically). */
void sk__coalescer_poll_soldout(sk__coalescer *co);
/* The campaign got new stock (re-heat): forget its sold-out flag. */
void sk__coalescer_restocked(sk__coalescer *co, const char *campaign);
/* Purchases queued or in flight. */
size_t sk__coalescer_pending(const sk__coalescer *co);
/* Adds the purchase figures (outcomes, batches, soldout_local) to st. */
void sk__coalescer_stats(const sk__coalescer *co, sk_engine_stats *st);

#endif
