/* persist_stream.h: the stream consumer of a persistence worker: reads a
 * stream's entries for group seckill-persist (its own pending ones, ones
 * reclaimed from dead consumers, new ones), applies them to the database
 * in one transaction per batch, acknowledges and dead-letters.
 * Invariant: an entry is XACKed only after the transaction that recorded
 * it committed (or when it is gone or dead-lettered); after
 * max_deliveries failed deliveries it moves to its bucket's orders:dead
 * with the error; nothing is read while the database is down.
 * Internal to the pipeline; one worker's thread. */
#ifndef SK_PERSIST_STREAM_H
#define SK_PERSIST_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "announce.h"
#include "db.h"
#include "persist_ctx.h"
#include "persist_discovery.h"

typedef struct sk_pstream {
    sk_pctx *w;          /* the worker's shared part (not owned) */
    sk_pcamps *camps;    /* the streams followed, discovery's table (not owned) */
    sk_announce *ann;    /* NULL, or the waiter a blocking read lets unblock it (not owned) */
    struct sk_pentry *buf; /* o->batch parsed entries */
    int *results;        /* o->batch results */
    sk_order_in *ins;    /* o->batch orders */
    size_t block_turn;   /* on a Cluster: the stream the next idle round blocks on */
    bool db_down;        /* the database is unreachable: read nothing (deliveries would count) */
    int64_t next_own_ms; /* own pending entries that failed are retried from then on */
} sk_pstream;

/* Sets s up for w (o->batch entries) on the table camps. 0 or
 * DLOCK_ENOMEM (then sk__pstream_free still frees what was taken). */
int sk__pstream_init(sk_pstream *s, sk_pctx *w, sk_pcamps *camps);
void sk__pstream_free(sk_pstream *s);

/* Each returns 0 or a code, *n_out entries handled. */
/* This consumer's own pending entries of stream c (XREADGROUP ... 0):
 * delivered before, so delivery counts matter. */
int sk__pstream_own(sk_pstream *s, const sk_pcamp *c, int *n_out);
/* Entries of stream c idle > claim_idle_ms on any consumer (XAUTOCLAIM). */
int sk__pstream_reclaim(sk_pstream *s, sk_pcamp *c, int *n_out);
/* New entries of every stream of the table; with block, waits up to
 * block_ms (unless announcements wait; on a Cluster a short turn on one
 * stream) for the first. */
int sk__pstream_read_new(sk_pstream *s, bool block, int *n_out);

#endif
