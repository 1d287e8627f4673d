/* camp_table.h: the purchase side's per-campaign state (queued purchases,
 * batches in flight, the local sold-out flag), in a hash table by campaign
 * id. Knows nothing of Redis or of the engine: the coalescer owns one.
 * Not thread-safe: used from the engine's loop only. */
#ifndef SK_CAMP_TABLE_H
#define SK_CAMP_TABLE_H

#include <stdbool.h>
#include <stdint.h>

struct event;
struct sk__coalescer;
typedef struct sk__preq sk__preq;

typedef struct sk__camp {
    struct sk__coalescer *co; /* owner (for the linger timer) */
    char id[65];
    char prefix[80];       /* "{c:<id>}:" */
    struct sk__camp *next; /* hash chain */
    bool soldout;          /* local flag: answer sold-out without Redis */
    bool polling;          /* a stock GET for the flag is in flight */
    sk__preq **pending;    /* queued, not yet sent (room for max_batch) */
    int npending;
    int inflight;          /* script calls in flight */
    struct event *linger;
    bool linger_armed;
    bool unknown;          /* last answer was "not found": dropped when idle */
} sk__camp;

#define SK__CAMP_BUCKETS 256

typedef struct sk__camp_table {
    sk__camp *buckets[SK__CAMP_BUCKETS];
    int max_batch; /* size of each entry's pending array */
    struct sk__coalescer *owner; /* copied into each new entry */
} sk__camp_table;

/* The entry of id; with create, a new one (NULL on allocation failure). */
sk__camp *sk__camp_find(sk__camp_table *t, const char *id, bool create);
/* Unlinks c (it must be idle) and frees it. */
void sk__camp_drop(sk__camp_table *t, sk__camp *c);
/* Calls fn for every entry; fn must not add or drop entries. */
void sk__camp_each(sk__camp_table *t, void (*fn)(sk__camp *c, void *ud), void *ud);
/* Frees every entry (their queues must be empty). */
void sk__camp_table_clear(sk__camp_table *t);

#endif
