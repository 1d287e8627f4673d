/* camp_table.h: the purchase side's per-campaign state (the local
 * sold-out flag, and per bucket of the campaign a lane: queued purchases,
 * batches in flight, purchases parked for a transfer), in a hash table by
 * campaign id. Knows nothing of Redis or of the engine: the coalescer owns
 * one. Not thread-safe: used from the engine's loop only. */
#ifndef SK_CAMP_TABLE_H
#define SK_CAMP_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "buckets.h"

struct event;
struct sk__coalescer;
typedef struct sk__preq sk__preq;

struct sk__camp;
struct sk__pull;

/* One bucket of a campaign on the purchase side. */
typedef struct sk__lane {
    struct sk__camp *camp;
    int j;                 /* bucket index */
    char prefix[SK_BUCKET_TAG_MAX + 4]; /* "{<tag>}:" */
    int slot;              /* the Cluster slot of its keys (of <tag>), hashed once here */
    sk__preq **pending;    /* queued, not yet sent (room for max_batch) */
    int npending;
    int inflight;          /* script calls in flight */
    int conn;              /* the data connection of the last one sent (coalesce.c keeps the lane's order) */
    struct event *linger;
    bool linger_armed;
    sk__preq *parked;      /* answered "short": waiting for a transfer (FIFO, park.h) */
    sk__preq **parked_tail;
    int again;             /* its parked purchases due to go out again (on the park's FIFO) */
    int64_t known;         /* the bucket's stock as last seen; INT64_MAX unknown */
    int64_t unacked_until_ms; /* a take here was not acknowledged: only probed until then */
    struct sk__pull *pull; /* the transfer into this lane in progress (transfer.c) */
} sk__lane;

typedef struct sk__camp {
    struct sk__coalescer *co; /* owner (for the linger timer) */
    char id[65];
    struct sk__camp *next; /* hash chain */
    bool soldout;          /* local flag: answer sold-out without Redis */
    int polling;           /* stock GETs for the flag in flight */
    bool unknown;          /* last answer was "not found": dropped when idle */
    bool loading;          /* the bucket layout is being read: nothing is sent */
    sk__preq *rerouted;    /* answered "reroute": waiting for the layout (FIFO) */
    sk__preq **rerouted_tail;
    int k;                 /* buckets purchases are routed over (1 until the layout is read) */
    int nlanes;            /* lanes allocated (>= k; a layout never shrinks them) */
    sk__lane *lanes[SK_MAX_SHARDS]; /* lanes[0] always exists */
    int busy;              /* transfer calls in flight for this campaign (transfer.c) */
} sk__camp;

#define SK__CAMP_CHAINS 256

typedef struct sk__camp_table {
    sk__camp *chains[SK__CAMP_CHAINS]; /* hash chains (not a campaign's stock buckets) */
    int max_batch; /* size of each entry's pending array */
    struct sk__coalescer *owner; /* copied into each new entry */
    bool closing;  /* the engine is being freed: no entry is dropped, nothing is sent again */
} sk__camp_table;

/* The entry of id; with create, a new one (NULL on allocation failure). */
sk__camp *sk__camp_find(sk__camp_table *t, const char *id, bool create);
/* Adds lanes up to k with the tags of b (lane 0 keeps its own). 0 or
 * DLOCK_ENOMEM (then nothing changed). */
int sk__camp_grow(sk__camp_table *t, sk__camp *c, const sk_buckets *b);
/* True when nothing of c is queued, in flight or parked. */
bool sk__camp_idle(const sk__camp *c);
/* Unlinks c (it must be idle) and frees it. */
void sk__camp_drop(sk__camp_table *t, sk__camp *c);
/* Something of c ended (a reply, a pull): drops c if it is idle and its
 * campaign was "not found", unless the table is closing. */
void sk__camp_settle(sk__camp_table *t, sk__camp *c);
/* Calls fn for every entry; fn must not add or drop entries. */
void sk__camp_each(sk__camp_table *t, void (*fn)(sk__camp *c, void *ud), void *ud);
/* Frees every entry (their queues must be empty). */
void sk__camp_table_clear(sk__camp_table *t);

#endif
