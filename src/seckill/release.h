/* release.h: the Redis half of an order's lifecycle, each step once
 * however many workers and retries run it (lua/order_units.lua): a
 * cancellation gives units back (gate {c:<id>}:released) and a
 * degraded-path order takes them out (gate {c:<id>}:mirrored).
 * Thread-safety: uses only the connection it is given. */
#ifndef SK_RELEASE_H
#define SK_RELEASE_H

#include "db.h"
#include "redis_io.h"

/* For a cancelled order: units back to {c:<id>}:stock and
 * the buyer's quota once (gate {c:<id>}:released), "restock" published.
 * Returns 1 (released now), 0 (already released) or a negative code. */
int sk_release_order(dlock__conn *rc, const sk_order_row *row, const char *status);

/* For a degraded-path order: its units leave
 * {c:<id>}:stock and join the buyer in {c:<id>}:buyers, once (gate
 * {c:<id>}:mirrored). 1 (now), 0 (already) or a negative code. */
int sk_mirror_order(dlock__conn *rc, const sk_order_row *row);

#endif
