/* reserve.c: finalisation of tentative database-path orders and the
 * reserve handback, the pipeline's half of docs/design/promise.md.
 * Invariants: a tentative order is finalised only at an instant after its
 * mirror (redis_mirrored = 1 is set after order_units.lua ran) when the
 * campaign's group has nothing pending and no lag, so every Redis-path
 * order decided before the mirror is already in user_totals; a refused
 * one's Redis buyer total goes back once ({c:<id>}:dropped); a handback
 * is recorded in the database before Redis applies it, once per id
 * ({c:<id>}:handbacks), and a pass finishes one a crash left half done.
 * A campaign of K > 1 buckets: a tentative order waits for its user's
 * home bucket's stream only; the handback waits until every bucket is
 * empty with no transfer in flight, and goes to bucket 0. */
#include "reserve.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "layout.h"
#include "release.h"
#include "sk_err.h"

extern const dlock__script sk_script_reserve_handback; /* lua/reserve_handback.lua */

/* Gives back the Redis buyer total of a refused tentative order, then
 * marks it done (redis_released). 0 or a negative code. */
static int drop_and_mark(sk_db *db, dlock__conn *rc, const sk_order_row *row)
{
    int r = sk_drop_order(rc, row);
    if (r < 0) return r;
    return sk_db_order_mark_released(db, row->order_id);
}

/* 1 when the stream of bucket j is drained now, 0 when not, < 0 on error. */
static int drained_now(dlock__conn *rc, const sk_buckets *lay, int j)
{
    char key[128];
    sk_bucket_key(lay, j, "orders", key, sizeof(key));
    int64_t pending = 0, lag = 0;
    int err = sk_stream_backlog(rc, key, &pending, &lag);
    if (err) return err;
    return pending == 0 && lag == 0;
}

/* What finalise_rows knows of the campaign it is on: its layout and, per
 * bucket, whether that bucket's stream was drained (-2: not asked yet). */
typedef struct fin_camp {
    char id[65];
    sk_buckets lay;
    int drained[SK_MAX_SHARDS];
} fin_camp;

/* Whether row's home bucket was drained at one instant after its mirror
 * (asked once per bucket and pass; rows come by order id): every Redis
 * path order of its user decided before the mirror went to that bucket's
 * stream (buckets.h: a user buys only in the home bucket). 1, 0, < 0. */
static int row_drained(dlock__conn *rc, fin_camp *fc, const sk_order_row *row)
{
    if (strcmp(fc->id, row->campaign) != 0) {
        int err = sk_layout_read(rc, row->campaign, &fc->lay);
        if (err == SK_ENOTFOUND) sk_buckets_single(row->campaign, &fc->lay), err = 0;
        if (err) return err;
        snprintf(fc->id, sizeof(fc->id), "%s", row->campaign);
        for (int j = 0; j < SK_MAX_SHARDS; j++) fc->drained[j] = -2;
    }
    int j = sk_home_bucket(row->user, fc->lay.k);
    if (fc->drained[j] == -2) fc->drained[j] = drained_now(rc, &fc->lay, j);
    return fc->drained[j];
}

static int finalise_rows(sk_db *db, dlock__conn *rc, const sk_db_rows *l, sk_reserve_stats *st)
{
    fin_camp *fc = calloc(1, sizeof(*fc));
    if (!fc) return DLOCK_ENOMEM;
    int rc_out = 0, drop_err = 0;
    for (int i = 0; i < l->n && rc_out == 0; i++) {
        const sk_order_row *row = &l->v[i];
        int drained = row_drained(rc, fc, row);
        if (drained < 0) rc_out = drained;
        if (drained <= 0) continue;
        int res = 0, r = sk_db_order_finalise(db, row->order_id, &res);
        if (r) {
            rc_out = r;
            continue;
        }
        if (res == SK_APPLY_PERSISTED) {
            if (st) st->confirmed++;
            sk__pipeline_add(rc, row->campaign, "confirmed", 1);
        } else if (res == SK_APPLY_REJECTED) {
            if (st) st->lost++;
            sk__pipeline_add(rc, row->campaign, "lost", 1);
            r = drop_and_mark(db, rc, row);
            if (r < 0) drop_err = r; /* the drop pass below retries it */
        }
    }
    free(fc);
    return rc_out ? rc_out : drop_err;
}

int sk_reserve_finalise(sk_db *db, dlock__conn *rc, const char *campaign, int max, sk_reserve_stats *st)
{
    if (max <= 0) max = 256;
    sk_db_rows l = {calloc((size_t)max, sizeof(sk_order_row)), 0, max};
    if (!l.v) return DLOCK_ENOMEM;
    int found = sk_db_orders_finalise_pending(db, campaign, max, sk_db_rows_add, &l);
    int rc_out = found < 0 ? found : finalise_rows(db, rc, &l, st);
    l.n = 0;
    found = sk_db_orders_drop_pending(db, campaign, max, sk_db_rows_add, &l);
    if (found < 0) rc_out = found;
    for (int i = 0; i < l.n; i++) {
        int r = drop_and_mark(db, rc, &l.v[i]);
        if (r < 0) {
            rc_out = r;
            break;
        }
    }
    free(l.v);
    return rc_out;
}

int sk_reserve_handback_apply(dlock__conn *rc, const char *campaign, const sk_db_handback *hb)
{
    if (!hb->id[0] || hb->units <= 0) return 0;
    char k_set[96], k_stock[96], k_events[96], units[24];
    sk_campaign_key(campaign, "handbacks", k_set, sizeof(k_set));
    sk_campaign_key(campaign, "stock", k_stock, sizeof(k_stock));
    sk_campaign_key(campaign, "events", k_events, sizeof(k_events));
    snprintf(units, sizeof(units), "%" PRId64, hb->units);
    const char *keys[3] = {k_set, k_stock, k_events};
    const char *args[2] = {hb->id, units};
    dlock__reply *r = NULL;
    int err = sk__eval_script(rc, &sk_script_reserve_handback, 3, keys, 2, args, &r);
    if (err) return err;
    int out = dlock__reply_kind(r) == DLOCK__R_INTEGER ? (int)dlock__reply_int(r) : DLOCK_ESERVER;
    dlock__reply_free(r);
    return out;
}

/* Redis sold out, one bucket: {c:<id>}:stock present and <= 0. 1, 0 or a code. */
static int one_sold_out(dlock__conn *rc, const char *campaign)
{
    char key[96];
    sk_campaign_key(campaign, "stock", key, sizeof(key));
    const char *argv[] = {"GET", key};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(rc, 2, argv, NULL, &r));
    if (err) return err;
    int out = dlock__reply_kind(r) == DLOCK__R_STRING && strtoll(dlock__reply_str(r, NULL), NULL, 10) <= 0;
    dlock__reply_free(r);
    return out;
}

/* One look at every bucket (GET stock, HLEN xfer, SCARD xin, pipelined:
 * on a Cluster each goes to its bucket's master). Fills xin_out; 1 when
 * every stock is present and <= 0 and no transfer journal has an entry,
 * 0 when not, or a code. */
static int probe_buckets(dlock__conn *rc, const sk_buckets *lay, int64_t *xin_out)
{
    int n = 3 * lay->k, out = 1;
    char (*keys)[128] = calloc((size_t)n, sizeof(*keys));
    const char **argvs = calloc((size_t)n * 2, sizeof(*argvs));
    const char *const **vv = calloc((size_t)n, sizeof(*vv));
    int *argcs = calloc((size_t)n, sizeof(*argcs));
    dlock__reply **rs = calloc((size_t)n, sizeof(*rs));
    static const char *const cmds[3] = {"GET", "HLEN", "SCARD"}, *const parts[3] = {"stock", "xfer", "xin"};
    int err = keys && argvs && vv && argcs && rs ? 0 : DLOCK_ENOMEM;
    for (int i = 0; !err && i < n; i++) {
        sk_bucket_key(lay, i / 3, parts[i % 3], keys[i], sizeof(keys[i]));
        argvs[2 * i] = cmds[i % 3];
        argvs[2 * i + 1] = keys[i];
        vv[i] = argvs + 2 * i;
        argcs[i] = 2;
    }
    if (!err) err = sk_err_from_common(dlock__conn_pipeline(rc, (size_t)n, argcs, vv, NULL, rs));
    for (int i = 0; !err && i < n; i++) {
        dlock__reply_type t = dlock__reply_kind(rs[i]);
        if (t == DLOCK__R_ERROR) err = DLOCK_ESERVER;
        else if (i % 3 == 0) out &= t == DLOCK__R_STRING && strtoll(dlock__reply_str(rs[i], NULL), NULL, 10) <= 0;
        else if (i % 3 == 1) out &= dlock__reply_int(rs[i]) == 0;
        else xin_out[i / 3] = dlock__reply_int(rs[i]);
    }
    for (int i = 0; rs && i < n; i++) dlock__reply_free(rs[i]);
    free(keys);
    free(argvs);
    free((void *)vv);
    free(argcs);
    free(rs);
    return err ? err : out;
}

/* Redis sold out. K = 1: the bucket's stock <= 0. K > 1: two looks in a
 * row agree that every bucket's stock is <= 0, no transfer journal holds
 * an entry and no bucket received a transfer in between (its {T}:xin did
 * not grow): the reads of one look are not one instant, but a transfer
 * that moved units between them shows in one of the three. 1, 0 or a code. */
static int redis_sold_out(dlock__conn *rc, const char *campaign)
{
    sk_buckets *lay = malloc(sizeof(*lay));
    int64_t *xin = calloc(2 * SK_MAX_SHARDS, sizeof(*xin));
    int out = lay && xin ? sk_layout_read(rc, campaign, lay) : DLOCK_ENOMEM;
    if (out == SK_ENOTFOUND) out = 0; /* no meta: nothing sold out in Redis */
    else if (out == 0 && lay->k == 1) out = one_sold_out(rc, campaign);
    else if (out == 0) {
        out = probe_buckets(rc, lay, xin);
        if (out == 1) out = probe_buckets(rc, lay, xin + SK_MAX_SHARDS);
        if (out == 1 && memcmp(xin, xin + SK_MAX_SHARDS, (size_t)lay->k * sizeof(*xin)) != 0) out = 0;
    }
    free(lay);
    free(xin);
    return out;
}

int sk_reserve_handback(sk_db *db, dlock__conn *rc, const char *campaign, sk_reserve_stats *st)
{
    sk_db_handback hb;
    int r = sk_db_handback_get(db, campaign, &hb);
    if (r) return r;
    if (hb.id[0] && hb.done) return 0;
    if (!hb.id[0] && hb.reserve_remaining <= 0) return 0; /* nothing to hand back: no transaction */
    if (!hb.id[0]) {
        r = redis_sold_out(rc, campaign);
        if (r <= 0) return r;
        r = sk_db_handback_begin(db, campaign, &hb);
        if (r <= 0) return r;
    }
    r = sk_reserve_handback_apply(rc, campaign, &hb); /* a crash before this: the next pass */
    if (r < 0) return r;
    if (sk_db_handback_mark_done(db, campaign)) return SK_EDB;
    if (r == 1) {
        if (st) st->handbacks++;
        sk__pipeline_add(rc, campaign, "handbacks", 1);
    }
    return r;
}
