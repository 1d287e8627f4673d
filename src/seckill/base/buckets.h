/* buckets.h: a campaign's stock sharded over K buckets (docs/seckill.md,
 * "One hot campaign over many masters"). Bucket j has its own hash tag, so
 * its keys ({<tag>}:meta, :stock, :buyers, :orders, ...) live in one
 * Cluster slot of their own; bucket 0's tag is "c:<id>", the tag every
 * K = 1 campaign has always had. A user's purchases are all decided in
 * the user's home bucket (a stable hash of the user id), so the per-user
 * limit stays exact. Pure functions over plain structs: thread-safe. */
#ifndef SK_BUCKETS_H
#define SK_BUCKETS_H

#include <stdbool.h>
#include <stddef.h>

#define SK_MAX_SHARDS 64
/* "c:" + 64-byte id + "/<j>.<salt>" + NUL fits */
#define SK_BUCKET_TAG_MAX 80

typedef struct sk_buckets {
    int k; /* 1..SK_MAX_SHARDS */
    char tag[SK_MAX_SHARDS][SK_BUCKET_TAG_MAX];
} sk_buckets;

/* The one-bucket layout of campaign id (tag "c:<id>"): every campaign's
 * layout until its meta says otherwise. */
void sk_buckets_single(const char *id, sk_buckets *out);

/* The home bucket of user among k: FNV-1a (32 bit) of its bytes mod k. */
int sk_home_bucket(const char *user, int k);

/* Master of a slot, as "host:port" in buf: 0, or an error (unserved). */
typedef int (*sk_node_of_slot_fn)(void *ud, unsigned slot, char *buf, size_t len);

/* Chooses the tags of k buckets of campaign id. Bucket 0 is "c:<id>"; the
 * others are "c:<id>/<j>.<salt>" with the smallest salt whose slot the
 * master k-th in turn after bucket 0's serves (the masters in the order of
 * their first slot), so K buckets spread over min(K, masters) masters.
 * node_of NULL (one server): salt 0 for every bucket. A later reshard may
 * move any bucket: placement is only a starting point, never relied on.
 * 0 or SK_EINVAL (k out of range, bad id). */
int sk_buckets_place(const char *id, int k, sk_node_of_slot_fn node_of, void *ud, sk_buckets *out);

/* The tags as the meta field bucket_tags keeps them: comma-separated, in
 * bucket order. Returns the length written (truncated output is refused
 * by the parse), or 0 when len is too small. */
size_t sk_buckets_format(const sk_buckets *b, char *buf, size_t len);

/* Reads a bucket_tags field of campaign id with k buckets. Every tag must
 * be the one sk_buckets_place would write for its position (bucket 0
 * exactly "c:<id>", bucket j "c:<id>/<j>.<digits>"), so a corrupted meta
 * can never make a program touch keys outside the campaign. 0 or
 * SK_EINVAL. */
int sk_buckets_parse(const char *id, int k, const char *list, sk_buckets *out);

/* "{<tag>}:<part>" of bucket j into buf (NUL-terminated, truncated to len). */
void sk_bucket_key(const sk_buckets *b, int j, const char *part, char *buf, size_t len);

#endif
