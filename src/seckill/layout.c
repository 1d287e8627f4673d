/* layout.c: a campaign's bucket layout from bucket 0's meta (layout.h). */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "sk_err.h"

int sk_layout_of_def(const char *id, int64_t shards, const char *bucket_tags, sk_buckets *out)
{
    if (shards <= 1) {
        sk_buckets_single(id, out);
        return 0;
    }
    if (shards > SK_MAX_SHARDS) return SK_EINVAL;
    return sk_buckets_parse(id, (int)shards, bucket_tags, out);
}

int sk_layout_of_fields(const char *id, const dlock__reply *shards, const dlock__reply *tags, sk_buckets *out)
{
    const char *ks = dlock__reply_kind(shards) == DLOCK__R_STRING ? dlock__reply_str(shards, NULL) : "1";
    const char *ts = dlock__reply_kind(tags) == DLOCK__R_STRING ? dlock__reply_str(tags, NULL) : "";
    char *end = NULL;
    long long k = strtoll(ks, &end, 10);
    return end == ks || *end ? SK_EINVAL : sk_layout_of_def(id, k, ts, out);
}

int sk_layout_read(dlock__conn *rc, const char *id, sk_buckets *out)
{
    char key[96];
    snprintf(key, sizeof(key), "{c:%s}:meta", id);
    const char *argv[] = {"HMGET", key, "stock", "shards", "bucket_tags"};
    dlock__reply *r = NULL;
    int rc_ = sk_err_from_common(dlock__conn_cmd(rc, 5, argv, NULL, &r));
    if (rc_) return rc_;
    int ret = 0;
    if (dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != 3) ret = DLOCK_ESERVER;
    else if (dlock__reply_kind(dlock__reply_at(r, 0)) != DLOCK__R_STRING) ret = SK_ENOTFOUND;
    else ret = sk_layout_of_fields(id, dlock__reply_at(r, 1), dlock__reply_at(r, 2), out);
    dlock__reply_free(r);
    return ret;
}
