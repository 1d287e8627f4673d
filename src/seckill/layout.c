/* layout.c: a campaign's keys (layout.h): its bucket layout from bucket
 * 0's meta, a stream's backlog for the pipeline's group, the pipeline
 * counters, and the one writer of a key's name. Invariant: reads and best-effort counter writes only; of the
 * engine it calls only the bucket arithmetic (buckets.c) and the error
 * mapping (sk_err.c), so every pipeline file may call it. */
#include "layout.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "sk_err.h"

void sk_campaign_key(const char *id, const char *part, char *buf, size_t len)
{
    snprintf(buf, len, "{c:%s}:%s", id, part);
}

void sk_tag_key(const char *tag, const char *part, char *buf, size_t len)
{
    snprintf(buf, len, "{%s}:%s", tag, part);
}

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
    sk_campaign_key(id, "meta", key, sizeof(key));
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

void sk__pipeline_add(dlock__conn *rc, const char *campaign, const char *field, int64_t n)
{
    char key[96];
    sk_campaign_key(campaign, "pipeline", key, sizeof(key));
    sk__pipeline_add_key(rc, key, field, n);
}

void sk__pipeline_add_key(dlock__conn *rc, const char *key, const char *field, int64_t n)
{
    if (n == 0) return;
    char num[24];
    snprintf(num, sizeof(num), "%" PRId64, n);
    const char *argv[] = {"HINCRBY", key, field, num};
    dlock__reply *r = NULL;
    if (dlock__conn_cmd(rc, 4, argv, NULL, &r) == 0) dlock__reply_free(r);
}

static const char *rstr(const dlock__reply *r)
{
    if (!r) return "";
    dlock__reply_type t = dlock__reply_kind(r);
    return (t == DLOCK__R_STRING || t == DLOCK__R_STATUS) ? dlock__reply_str(r, NULL) : "";
}

static int64_t rint64(const dlock__reply *r)
{
    if (!r) return 0;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER) return dlock__reply_int(r);
    char *end = NULL;
    const char *s = rstr(r);
    long long v = strtoll(s, &end, 10);
    return end && end != s && *end == '\0' ? (int64_t)v : -1;
}

int sk_stream_backlog(dlock__conn *rc, const char *key, int64_t *pending_out, int64_t *lag_out)
{
    *pending_out = 0;
    *lag_out = 0;
    const char *argv[] = {"XINFO", "GROUPS", key};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(rc, 3, argv, NULL, &r));
    if (err) return err;
    if (dlock__reply_kind(r) == DLOCK__R_ERROR) { /* no stream yet */
        dlock__reply_free(r);
        return 0;
    }
    char last[32] = "";
    bool found = false, have_lag = false;
    for (size_t g = 0; g < dlock__reply_count(r); g++) {
        const dlock__reply *grp = dlock__reply_at(r, g);
        const char *name = NULL;
        for (size_t i = 0; i + 1 < dlock__reply_count(grp); i += 2)
            if (strcmp(rstr(dlock__reply_at(grp, i)), "name") == 0) name = rstr(dlock__reply_at(grp, i + 1));
        if (!name || strcmp(name, SK_PERSIST_GROUP) != 0) continue;
        found = true;
        for (size_t i = 0; i + 1 < dlock__reply_count(grp); i += 2) {
            const char *k = rstr(dlock__reply_at(grp, i));
            const dlock__reply *v = dlock__reply_at(grp, i + 1);
            if (strcmp(k, "pending") == 0) *pending_out = rint64(v);
            if (strcmp(k, "last-delivered-id") == 0) snprintf(last, sizeof(last), "%s", rstr(v));
            if (strcmp(k, "lag") == 0 && dlock__reply_kind(v) == DLOCK__R_INTEGER) {
                *lag_out = dlock__reply_int(v);
                have_lag = true;
            }
        }
    }
    dlock__reply_free(r);
    if (have_lag) return 0;
    /* lag: entries after last-delivered-id (exact, also when XINFO's lag is nil) */
    char from[40];
    snprintf(from, sizeof(from), "(%s", found ? last : "0-0");
    if (!found) snprintf(from, sizeof(from), "-");
    const char *xr[] = {"XRANGE", key, from, "+", "COUNT", "1000000"};
    const char *xl[] = {"XLEN", key};
    r = NULL;
    err = sk_err_from_common(found ? dlock__conn_cmd(rc, 6, xr, NULL, &r)
                                   : dlock__conn_cmd(rc, 2, xl, NULL, &r));
    if (err) return err;
    *lag_out = dlock__reply_kind(r) == DLOCK__R_ARRAY ? (int64_t)dlock__reply_count(r) : dlock__reply_int(r);
    dlock__reply_free(r);
    return 0;
}
