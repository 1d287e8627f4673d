/* relay.h: one coalescer per process. seckilld --threads N runs N loops,
 * each with its own engine; the purchases of every loop are decided by
 * one of them, the serving loop's, so that they share its batches. A
 * batch's script call costs Redis nearly as much for 10 purchases as for
 * 20, so loops that each batched alone made Redis pay more per purchase
 * the more loops there were (docs/BENCHMARKS.md, "one coalescer").
 *
 * Another loop hands a purchase in through its door: a message goes to
 * the serving loop's queue, the serving loop gives it to its engine, and
 * the answer comes back on the door's queue. Each queue is a FIFO under
 * the relay's one mutex with an eventfd that is written only when the
 * queue had nothing waiting, so a busy loop pays one wake-up per batch,
 * not one per purchase. Answers keep their order per door.
 *
 * Lifetimes: the relay outlives every loop (made before they start, freed
 * after they have all returned). Until a loop serves, and once it has
 * stopped serving, sk_relay_purchase returns SK_EUNAVAIL at once and the
 * caller decides on its own engine. A door that leaves answers what it
 * still waits for: DLOCK_EUNKNOWN for a purchase the serving engine took
 * (it may have been decided), SK_EUNAVAIL for one it did not take yet (it
 * will not be sent). Stopping to serve answers what was not taken with
 * SK_EUNAVAIL; sk_engine_free answers the rest, as it does for its own.
 *
 * Threads: new and free on any thread while no loop uses the relay;
 * serve, unserve and sk_relay_pending on the serving loop's thread; a
 * door's calls on its own loop's thread. Callback rule as in engine.h. */
#ifndef SK_RELAY_H
#define SK_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct event_base;

typedef struct sk_relay sk_relay;
typedef struct sk_relay_door sk_relay_door;

/* 0 or DLOCK_ENOMEM. */
int sk_relay_new(sk_relay **out);
/* Every loop has left (doors freed, serving stopped). NULL is a no-op. */
void sk_relay_free(sk_relay *r);

/* Decides the purchases handed in by doors on e, on base's loop. At most
 * one loop serves at a time. 0, SK_EINVAL (one already serves) or
 * DLOCK_ENOMEM / DLOCK_EIO (no wake-up event). */
int sk_relay_serve(sk_relay *r, struct event_base *base, sk_engine *e);
/* Before e is freed: stops taking purchases (new ones get SK_EUNAVAIL at
 * once) and answers the ones not yet taken with SK_EUNAVAIL. */
void sk_relay_unserve(sk_relay *r);
/* Purchases handed in and not yet answered (the serving loop's drain
 * waits for them). */
size_t sk_relay_pending(sk_relay *r);

/* A door on base's loop. 0, DLOCK_ENOMEM or DLOCK_EIO. */
int sk_relay_door_new(sk_relay *r, struct event_base *base, sk_relay_door **out);
/* Answers what the door still waits for (see above) and frees it. NULL
 * is a no-op. */
void sk_relay_door_free(sk_relay_door *d);
/* Purchases sent through d and not yet answered. */
size_t sk_relay_door_pending(const sk_relay_door *d);

/* Hands a purchase (as sk_engine_purchase; the strings are copied) to the
 * serving loop. 0: cb runs once, later, on d's loop. SK_EUNAVAIL: no loop
 * serves (decide it elsewhere); DLOCK_ENOMEM. cb never runs on an error. */
int sk_relay_purchase(sk_relay_door *d, const char *campaign, const char *user, int64_t qty,
                      const char *idem, const char *ip, sk_purchase_cb cb, void *arg);

#endif
