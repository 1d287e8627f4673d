/* layout.h: reading a campaign's bucket layout from Redis on a blocking
 * connection (the persister, the barrier, reconcile, the admin tool). The
 * layout is bucket 0's meta fields shards + bucket_tags (buckets.h); a meta
 * without them is the one-bucket layout every K = 1 campaign has. Not
 * thread-safe per connection. */
#ifndef SK_LAYOUT_H
#define SK_LAYOUT_H

#include "buckets.h"
#include "redis_io.h"

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

#endif
