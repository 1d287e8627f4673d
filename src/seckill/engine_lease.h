/* engine_lease.h: the engine's part that holds the order-id worker lease
 * and issues order ids under it (why ids cannot collide: engine_lease.c).
 * Invariant: an id is issued only while the lease is valid on the part's
 * monotonic clock, checked at the moment of issue. It reaches Redis only
 * through the wire (the lease script: engine_wire.h), so a test drives it
 * on a fake wire and clock. Not thread-safe: the engine's loop only. */
#ifndef SK_ENGINE_LEASE_H
#define SK_ENGINE_LEASE_H

#include "engine_wire.h"
#include "orderid.h"

typedef struct sk__lease {
    sk__wire *w;       /* script (SK__LUA_LEASE), log; now_ms: validity; wall_ms: the ms of an id */
    char instance[33]; /* the holder's name in the lease key */
    int64_t lease_ms;  /* the lease's length (worker_lease_ms) */
    int n;             /* the worker id taken or tried */
    int tries;
    bool busy;         /* a lease command is in flight */
    bool held;
    uint64_t fence;    /* fencing token of the lease taken (0: none) */
    int64_t sent_ms;   /* monotonic send time of the take/renew in flight */
    uint64_t sent_fence; /* the fence it renews (0: a take) */
    int64_t ok_ms;     /* send time of the last successful take/renew */
    uint64_t lost;     /* leases given up or found taken */
    sk_orderid_gen gen;
} sk__lease;

/* A part holding nothing, that will try worker id first_worker first. */
void sk__lease_init(sk__lease *l, sk__wire *w, const char *instance,
                    int first_worker, int64_t lease_ms);
void sk__lease_step(sk__lease *l);                /* take or renew now (one in flight) */
/* Renews at 1/3 of the lease, gives it up at lease - margin; takes one
 * while none is held (only when connected). */
void sk__lease_tick(sk__lease *l, bool connected);
void sk__lease_disconnected(sk__lease *l);        /* the command in flight will not be answered */
bool sk__lease_valid(const sk__lease *l);         /* ids may be issued now */
int sk__lease_worker(const sk__lease *l);         /* the worker id while valid, else -1 */
/* The next order id: 0, SK_EUNAVAIL (no valid lease) or SK_EINVAL. */
int sk__lease_next_id(sk__lease *l, uint64_t *id_out);

#endif
