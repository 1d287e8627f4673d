/* release.h: the Redis half of an order's lifecycle, each step once
 * however many workers and retries run it (lua/order_units.lua): a
 * cancellation gives units back (gate {c:<id>}:released), a
 * degraded-path order is mirrored (gate {c:<id>}:mirrored), a tentative
 * order refused at finalisation gives its buyer's units back (gate
 * {c:<id>}:dropped). Every key named {c:<id>} here is, for a campaign of K
 * buckets, the key of the order's bucket: its user's home bucket
 * (sk_home_bucket over the layout in bucket 0's meta, layout.h), the one
 * bucket that holds the buyer's record; K = 1 is exactly {c:<id>}.
 * Thread-safety: uses only the connection it is given. */
#ifndef SK_RELEASE_H
#define SK_RELEASE_H

#include "db.h"
#include "redis_io.h"
#include "script.h"

/* For a cancelled order: units back to {c:<id>}:stock and
 * the buyer's quota once (gate {c:<id>}:released), "restock" published.
 * Returns 1 (released now), 0 (already released) or a negative code. */
int sk_release_order(dlock__conn *rc, const sk_order_row *row, const char *status);

/* For a degraded-path order: its units join the buyer in
 * {c:<id>}:buyers, once (gate {c:<id>}:mirrored); a tentative (pending)
 * order sold a reserve unit and leaves {c:<id>}:stock alone, an older
 * persisted one also takes its units out of the stock.
 * 1 (now), 0 (already) or a negative code. */
int sk_mirror_order(dlock__conn *rc, const sk_order_row *row);

/* For a tentative order refused at finalisation: its units leave the
 * buyer in {c:<id>}:buyers once (gate {c:<id>}:dropped). 1, 0 or a code. */
int sk_drop_order(dlock__conn *rc, const sk_order_row *row);

/* Runs s (dlock__script_call: EVALSHA, EVAL on NOSCRIPT; routed by its
 * keys on a Cluster). 0 with *reply_out (caller frees; may be an error
 * reply) or the transport code mapped by sk_err_from_common. For the
 * pipeline's scripts. */
int sk__eval_script(dlock__conn *rc, const dlock__script *s, int nkeys, const char **keys, int nargs,
                    const char **args, dlock__reply **reply_out);

#endif
