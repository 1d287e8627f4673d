/* campaign_def.h: a flash-sale campaign's definition, the one type the
 * engine (Redis) and the database (system of record) both use, so a
 * campaign passes between them without copying field by field. */
#ifndef SK_CAMPAIGN_DEF_H
#define SK_CAMPAIGN_DEF_H

#include <stdint.h>

#include "buckets.h"

typedef struct sk_campaign {
    char id[65];       /* 1-64 of [A-Za-z0-9_-] */
    char title[257];
    int64_t stock;     /* its own (promotional) stock */
    int64_t per_user_limit;
    int64_t starts_at_ms, ends_at_ms; /* [starts, ends), unix ms, checked on the Redis clock */
    int64_t price_cents;
    int64_t db_reserve; /* units carved out for the database path (0..stock); Redis gets stock - db_reserve */
    int64_t shards;     /* buckets the Redis stock is split over (1..SK_MAX_SHARDS; 0 read as 1) */
    /* their tags, as the meta field bucket_tags keeps them (buckets.h);
     * chosen at creation, never changed; "" for shards <= 1 */
    char bucket_tags[SK_MAX_SHARDS * SK_BUCKET_TAG_MAX];
} sk_campaign;

#endif
