/* release.c: the Redis half of an order's lifecycle: runs order_units.lua
 * by EVALSHA (loading it on NOSCRIPT), whose SADD on a gate set makes each
 * move happen once however many workers and retries run it: the give-back
 * of a cancelled order ({T}:released), the mirror of a degraded-path order
 * ({T}:mirrored) and the give-back of a tentative order refused at
 * finalisation ({T}:dropped). T is the tag of the order's bucket: the home
 * bucket of its user (buckets.h), "c:<id>" for every K = 1 campaign, so a
 * unit given back returns to the bucket whose buyer record holds it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "layout.h"
#include "release.h"
#include "sk_err.h"

extern const dlock__script sk_script_order_units; /* lua/order_units.lua */

int sk__eval_script(dlock__conn *rc, const dlock__script *s, int nkeys, const char **keys, int nargs,
                    const char **args, dlock__reply **reply_out)
{
    return sk_err_from_common(dlock__script_call(rc, s, nkeys, keys, nargs, args, reply_out, NULL));
}

/* The tag of row's bucket into tag (SK_BUCKET_TAG_MAX): its user's home
 * bucket among the campaign's K (read from bucket 0's meta at every call:
 * one HMGET, and releases are rare). A campaign without a meta (Redis lost
 * it) has the one-bucket layout. 0, SK_EINVAL (corrupt layout) or the
 * connection's error. */
static int order_bucket_tag(dlock__conn *rc, const sk_order_row *row, char *tag)
{
    sk_buckets b;
    int err = sk_layout_read(rc, row->campaign, &b);
    if (err == SK_ENOTFOUND) sk_buckets_single(row->campaign, &b);
    else if (err) return err;
    snprintf(tag, SK_BUCKET_TAG_MAX, "%s", b.tag[sk_home_bucket(row->user, b.k)]);
    return 0;
}

/* Runs order_units.lua for row in direction dir on the keys of its user's
 * home bucket; 1, 0 or a code. status: the final status of a give-back
 * ("back"), else NULL. */
static int move_units(dlock__conn *rc, const sk_order_row *row, const char *gate, const char *dir,
                      const char *status)
{
    char t[SK_BUCKET_TAG_MAX], k_gate[128], k_stock[128], k_buyers[128], k_order[160], k_events[128],
        k_status[128], oid[24], qty[24];
    int err = order_bucket_tag(rc, row, t);
    if (err) return err;
    snprintf(oid, sizeof(oid), "%" PRIu64, row->order_id);
    char order_part[32];
    snprintf(order_part, sizeof(order_part), "order:%s", oid);
    sk_tag_key(t, gate, k_gate, sizeof(k_gate));
    sk_tag_key(t, "stock", k_stock, sizeof(k_stock));
    sk_tag_key(t, "buyers", k_buyers, sizeof(k_buyers));
    sk_tag_key(t, order_part, k_order, sizeof(k_order));
    sk_tag_key(t, "events", k_events, sizeof(k_events));
    sk_tag_key(t, "order_status", k_status, sizeof(k_status));
    snprintf(qty, sizeof(qty), "%" PRId64, row->qty);
    const char *keys[6] = {k_gate, k_stock, k_buyers, k_order, k_events, k_status};
    const char *args[5] = {oid, row->user, qty, dir, status};
    dlock__reply *r = NULL;
    err = sk__eval_script(rc, &sk_script_order_units, status ? 6 : 3, keys, status ? 5 : 4, args, &r);
    if (err) return err;
    int out = dlock__reply_kind(r) == DLOCK__R_INTEGER ? (int)dlock__reply_int(r) : DLOCK_ESERVER;
    dlock__reply_free(r);
    return out;
}

int sk_release_order(dlock__conn *rc, const sk_order_row *row, const char *status)
{
    return move_units(rc, row, "released", "back", status ? status : "cancelled");
}

int sk_mirror_order(dlock__conn *rc, const sk_order_row *row)
{
    /* a tentative order sold a reserve unit; one persisted before the
     * reserve existed (schema 5) sold a unit of the shared stock */
    bool tentative = strcmp(row->status, "pending") == 0;
    return move_units(rc, row, "mirrored", tentative ? "hold" : "out", NULL);
}

int sk_drop_order(dlock__conn *rc, const sk_order_row *row) { return move_units(rc, row, "dropped", "drop", NULL); }
