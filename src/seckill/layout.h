/* layout.h: a campaign's keys in Redis on a blocking connection (the
 * persister, the barrier, the reserve, reconcile, the admin tool): its
 * bucket layout, read from bucket 0's meta fields shards + bucket_tags
 * (buckets.h; a meta without them is the one-bucket layout every K = 1
 * campaign has), the backlog of a bucket's order stream for the pipeline's
 * consumer group, and the pipeline counters of a bucket. Every other file
 * names these keys through here (sk_campaign_key, sk_tag_key; a bucket's
 * by sk_bucket_key, buckets.h). Not thread-safe per connection. */
#ifndef SK_LAYOUT_H
#define SK_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "buckets.h"
#include "redis_io.h"

/* The consumer group of every order stream ({<tag_j>}:orders). */
#define SK_PERSIST_GROUP "seckill-persist"

/* "{c:<id>}:<part>" into buf (NUL-terminated, truncated to len): a key of
 * campaign id's bucket 0, the tag every one-bucket campaign's keys carry.
 * Pure: safe from any thread, on the async paths too. */
void sk_campaign_key(const char *id, const char *part, char *buf, size_t len);
/* "{<tag>}:<part>" into buf (truncated to len): a key of the bucket whose
 * hash tag is tag ("c:<id>" for bucket 0). part "" gives the prefix every
 * key of the bucket begins with. Pure. */
void sk_tag_key(const char *tag, const char *part, char *buf, size_t len);

/* Fills out with campaign id's layout. 0; SK_ENOTFOUND (no meta);
 * SK_EINVAL (fields present but not a layout sk_buckets_parse accepts);
 * or the connection's error. */
int sk_layout_read(dlock__conn *rc, const char *id, sk_buckets *out);

/* The layout named by bucket 0's meta fields shards and bucket_tags as an
 * HMGET answers them (nil: absent; no shards is the one-bucket layout).
 * The one reading of those fields, for the blocking and the async
 * callers. 0 or SK_EINVAL (not a layout sk_buckets_parse accepts). */
int sk_layout_of_fields(const char *id, const dlock__reply *shards, const dlock__reply *tags, sk_buckets *out);

/* The layout a definition names (shards + bucket_tags, as the database
 * keeps them). 0 or SK_EINVAL. */
int sk_layout_of_def(const char *id, int64_t shards, const char *bucket_tags, sk_buckets *out);

/* Backlog of one order stream key for group seckill-persist: entries
 * pending (delivered, not acknowledged) and lag (never delivered); both 0
 * when the stream does not exist yet. 0 or a code. */
int sk_stream_backlog(dlock__conn *rc, const char *key, int64_t *pending_out, int64_t *lag_out);

/* HINCRBY {c:<id>}:pipeline field n (the counters /metrics shows);
 * best effort, errors ignored; nothing sent when n is 0. */
void sk__pipeline_add(dlock__conn *rc, const char *campaign, const char *field, int64_t n);
/* The same on the counters hash key (a bucket's {<tag>}:pipeline). */
void sk__pipeline_add_key(dlock__conn *rc, const char *key, const char *field, int64_t n);

#endif
