/* orderid.h: 64-bit, time-ordered order ids (snowflake layout): 41 bits of
 * ms since 2026-01-01T00:00:00Z, 10 bits of worker id, 12 bits of sequence.
 * A generator never issues the same id twice and never runs backwards: it
 * uses max(last_ms, now_ms) and borrows the next ms when a ms's 4096 ids
 * are used up. Uniqueness across instances comes from the leased worker id.
 * Not thread-safe: one generator per event loop. */
#ifndef SK_ORDERID_H
#define SK_ORDERID_H

#include <stdint.h>

#define SK_ORDERID_EPOCH_MS INT64_C(1767225600000) /* 2026-01-01T00:00:00Z */
#define SK_ORDERID_WORKER_BITS 10
#define SK_ORDERID_SEQ_BITS 12
#define SK_ORDERID_MAX_WORKER ((1 << SK_ORDERID_WORKER_BITS) - 1)

typedef struct sk_orderid_gen {
    int worker;      /* 0..1023, or -1: no lease, no ids */
    int64_t last_ms; /* ms since the epoch of the last id */
    uint32_t seq;
} sk_orderid_gen;

void sk_orderid_init(sk_orderid_gen *g, int worker);
/* Next id for wall-clock time wall_ms (unix ms). Returns 0 with *id_out,
 * or SK_EUNAVAIL when the generator has no worker id, SK_EINVAL when the
 * clock is before the epoch or past the 41-bit range. */
int sk_orderid_next(sk_orderid_gen *g, int64_t wall_ms, uint64_t *id_out);

/* Splits an id into unix ms, worker and sequence (for tools and tests). */
void sk_orderid_decode(uint64_t id, int64_t *unix_ms_out, int *worker_out, int *seq_out);

#endif
