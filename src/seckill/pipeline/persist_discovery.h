/* persist_discovery.h: which streams a persistence worker follows. A
 * campaign is found in Redis (seckill:campaigns, announcements) or in the
 * database, and followed as one stream per bucket ({<tag_j>}:orders; one
 * for a K = 1 campaign or one not heated yet), its group created.
 * Invariant: a campaign is followed with all K of its streams or none of
 * them (a layout or group not ready yet is tried again at the next
 * discovery), K consecutive entries from its bucket 0 on, and once only.
 * Internal to the pipeline; one worker's thread. */
#ifndef SK_PERSIST_DISCOVERY_H
#define SK_PERSIST_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>

#include "announce.h"
#include "barrier.h"
#include "buckets.h"
#include "persist_ctx.h"

/* One stream followed: bucket j of campaign id (a campaign of K buckets
 * has K of them, each with its own group, dead letters and counters in
 * its bucket's slot; docs/seckill.md, "One hot campaign over many
 * masters"). */
typedef struct sk_pcamp {
    char id[65];
    int j;             /* bucket index; 0 for every K = 1 campaign */
    sk_buckets *lay;   /* the campaign's layout, shared by its K camps (owned by bucket 0's) */
    char key[128], dead[144], errs[144], stats[144];
    char cursor[32]; /* XAUTOCLAIM cursor */
    sk_barrier_run bar; /* the barrier after a change of master (barrier.h) */
    bool open;          /* no barrier due on the connected master */
} sk_pcamp;

/* The streams followed, bucket 0 of a campaign first, its others after it. */
typedef struct sk_pcamps {
    sk_pcamp *v;
    size_t n, cap;
} sk_pcamps;

/* Follows the option's campaign, or every campaign of seckill:campaigns
 * and of the database not followed yet. */
void sk__pcamps_discover(sk_pctx *w, sk_pcamps *cs);
/* Follows the campaigns announced since the last call (ann may be NULL). */
void sk__pcamps_take_announced(sk_pctx *w, sk_pcamps *cs, sk_announce *ann);
/* Forgets every stream (their layouts freed); the table stays usable. */
void sk__pcamps_clear(sk_pcamps *cs);
/* Clears and frees the table's memory. */
void sk__pcamps_free(sk_pcamps *cs);

#endif
