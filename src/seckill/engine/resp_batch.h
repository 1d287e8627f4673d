/* resp_batch.h: purchase.lua's arguments for one batch (numkeys, the
 * bucket's 5 keys and per purchase only the keys it uses: its
 * Idempotency-Key's two names, the rate-limit keys it counts; then the
 * campaign's 9 argv and 4 per purchase), written as RESP bulk strings (src/common/resp_write.h) with
 * the slot of their keys fixed where the keys are chosen, so the send path
 * neither formats nor parses them again. Pure: thread-safe. */
#ifndef SK_RESP_BATCH_H
#define SK_RESP_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A script call's arguments after the sha, written: nargs bulk strings in
 * resp[0..len), all keys in one slot (-1: no key). */
typedef struct sk__resp_args {
    const char *resp;
    size_t len;
    int nargs;
    int slot;
} sk__resp_args;

/* One purchase of the batch (strings NUL-terminated; idem, ip may be ""). */
typedef struct sk__rb_buyer {
    const char *user, *idem, *ip;
    uint64_t order_id;
    int64_t qty;
    bool resent; /* sent again after a transfer: its rate limits are not counted twice */
} sk__rb_buyer;

/* The batch's campaign-wide part. */
typedef struct sk__rb_camp {
    const char *prefix;   /* the bucket's key prefix "{<tag>}:" (at most prefix_max bytes) */
    int k;                /* buckets of the campaign */
    const int64_t *limits; /* 6: user rate, window; ip rate, window; idem ttl; order status ttl */
    const char *runid;    /* at most 40 bytes */
} sk__rb_camp;

/* Bytes a batch of n purchases takes at most (prefix up to prefix_max;
 * user, idem up to 64 bytes, ip up to 63). */
size_t sk__rb_bound(size_t prefix_max, int n);

/* Writes the batch of buyers b[0..n) of c into buf (sk__rb_bound bytes)
 * and describes it in *out (resp = buf). */
void sk__rb_write(char *buf, const sk__rb_camp *c, const sk__rb_buyer *const *b, int n, sk__resp_args *out);

#endif
