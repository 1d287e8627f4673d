/* reserve.c: finalisation of tentative database-path orders and the
 * reserve handback, the pipeline's half of docs/design/promise.md.
 * Invariants: a tentative order is finalised only at an instant after its
 * mirror (redis_mirrored = 1 is set after order_units.lua ran) when the
 * campaign's group has nothing pending and no lag, so every Redis-path
 * order decided before the mirror is already in user_totals; a refused
 * one's Redis buyer total goes back once ({c:<id>}:dropped); a handback
 * is recorded in the database before Redis applies it, once per id
 * ({c:<id>}:handbacks), and a pass finishes one a crash left half done. */
#include "reserve.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "persist.h"
#include "release.h"
#include "sk_err.h"

extern const unsigned char sk_lua_reserve_handback[];

void sk__pipeline_add(dlock__conn *rc, const char *campaign, const char *field, int64_t n)
{
    if (n == 0) return;
    char key[96], num[24];
    snprintf(key, sizeof(key), "{c:%s}:pipeline", campaign);
    snprintf(num, sizeof(num), "%" PRId64, n);
    const char *argv[] = {"HINCRBY", key, field, num};
    dlock__reply *r = NULL;
    if (dlock__conn_cmd(rc, 4, argv, NULL, &r) == 0) dlock__reply_free(r);
}

/* Gives back the Redis buyer total of a refused tentative order, then
 * marks it done (redis_released). 0 or a negative code. */
static int drop_and_mark(sk_db *db, dlock__conn *rc, const sk_order_row *row)
{
    int r = sk_drop_order(rc, row);
    if (r < 0) return r;
    return sk_db_order_mark_released(db, row->order_id);
}

/* 1 when campaign's stream is drained now, 0 when not, < 0 on error. */
static int drained_now(dlock__conn *rc, const char *campaign)
{
    int64_t pending = 0, lag = 0;
    int err = sk_persist_backlog(rc, campaign, &pending, &lag);
    if (err) return err;
    return pending == 0 && lag == 0;
}

static int finalise_rows(sk_db *db, dlock__conn *rc, const sk_db_rows *l, sk_reserve_stats *st)
{
    char drained_camp[65] = "";
    int drained = 0, rc_out = 0;
    for (int i = 0; i < l->n; i++) {
        const sk_order_row *row = &l->v[i];
        if (strcmp(drained_camp, row->campaign) != 0) { /* rows come by order id: ask once per run */
            drained = drained_now(rc, row->campaign);
            snprintf(drained_camp, sizeof(drained_camp), "%s", row->campaign);
        }
        if (drained < 0) return drained;
        if (!drained) continue;
        int res = 0, r = sk_db_order_finalise(db, row->order_id, &res);
        if (r) return r;
        if (res == SK_APPLY_PERSISTED) {
            if (st) st->confirmed++;
            sk__pipeline_add(rc, row->campaign, "confirmed", 1);
        } else if (res == SK_APPLY_REJECTED) {
            if (st) st->lost++;
            sk__pipeline_add(rc, row->campaign, "lost", 1);
            r = drop_and_mark(db, rc, row);
            if (r < 0) rc_out = r; /* the drop pass below retries it */
        }
    }
    return rc_out;
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
    snprintf(k_set, sizeof(k_set), "{c:%s}:handbacks", campaign);
    snprintf(k_stock, sizeof(k_stock), "{c:%s}:stock", campaign);
    snprintf(k_events, sizeof(k_events), "{c:%s}:events", campaign);
    snprintf(units, sizeof(units), "%" PRId64, hb->units);
    const char *keys[3] = {k_set, k_stock, k_events};
    const char *args[2] = {hb->id, units};
    dlock__reply *r = NULL;
    int err = sk__eval_script(rc, (const char *)sk_lua_reserve_handback, 3, keys, 2, args, &r);
    if (err) return err;
    int out = dlock__reply_kind(r) == DLOCK__R_INTEGER ? (int)dlock__reply_int(r) : DLOCK_ESERVER;
    dlock__reply_free(r);
    return out;
}

/* Redis sold out: {c:<id>}:stock present and <= 0. 1, 0 or a code. */
static int redis_sold_out(dlock__conn *rc, const char *campaign)
{
    char key[96];
    snprintf(key, sizeof(key), "{c:%s}:stock", campaign);
    const char *argv[] = {"GET", key};
    dlock__reply *r = NULL;
    int err = dlock__conn_cmd(rc, 2, argv, NULL, &r);
    if (err) return err;
    int out = dlock__reply_kind(r) == DLOCK__R_STRING && strtoll(dlock__reply_str(r, NULL), NULL, 10) <= 0;
    dlock__reply_free(r);
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
