/* reconcile.c: Redis vs database for one campaign. Every check that fails
 * adds one line to rep->diffs; nothing is repaired here (the operator
 * decides). Checks: backlog drained, no dead letters, no broken promises
 * (a Redis-path order the guard refused for another reason than a stale
 * timeline), stock equal on both sides (Redis holds remaining minus the
 * database reserve), each side adds up (initial = remaining + sold +
 * reserve), per-user totals equal, every stream entry has an order row,
 * every cancellation released in Redis exactly once, every tentative
 * order mirrored and finalised. */
#include "reconcile.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "layout.h"
#include "rulebook.h"
#include "sk_err.h"

__attribute__((format(printf, 2, 3))) static void diff(sk_reconcile_report *rep, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    dlock__buf_append(&rep->diffs, line, strlen(line) + 1); /* NUL-separated */
    rep->ndiffs++;
}

static int redis_int(dlock__conn *rc, const char *c1, const char *key, const char *c3, int64_t *out, bool *nil)
{
    const char *argv[3] = {c1, key, c3};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(rc, c3 ? 3 : 2, argv, NULL, &r));
    if (err) return err;
    *out = 0;
    if (nil) *nil = dlock__reply_kind(r) == DLOCK__R_NIL;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER) *out = dlock__reply_int(r);
    else if (dlock__reply_kind(r) == DLOCK__R_STRING) *out = strtoll(dlock__reply_str(r, NULL), NULL, 10);
    dlock__reply_free(r);
    return 0;
}

typedef struct user_qty {
    char user[65];
    int64_t qty;
} user_qty;

typedef struct users {
    user_qty *v;
    size_t n, cap;
} users;

static void users_add(const char *user, int64_t qty, void *ud)
{
    users *u = ud;
    if (u->n == u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 256;
        user_qty *nv = realloc(u->v, cap * sizeof(*nv));
        if (!nv) return;
        u->v = nv;
        u->cap = cap;
    }
    snprintf(u->v[u->n].user, sizeof(u->v[u->n].user), "%s", user);
    u->v[u->n++].qty = qty;
}

static int cmp_user(const void *a, const void *b)
{
    return strcmp(((const user_qty *)a)->user, ((const user_qty *)b)->user);
}

/* Sorts u and sums the entries of one user (a user found in two buckets). */
static void users_sort_merge(users *u)
{
    if (u->n > 1) qsort(u->v, u->n, sizeof(*u->v), cmp_user);
    size_t w = 0;
    for (size_t i = 0; i < u->n; i++) {
        if (w > 0 && strcmp(u->v[w - 1].user, u->v[i].user) == 0) u->v[w - 1].qty += u->v[i].qty;
        else u->v[w++] = u->v[i];
    }
    u->n = w;
}

/* Reads bucket j's {T}:buyers into ru and the bucket's sums; a buyer whose
 * home bucket is another one is a difference (the per-user limit is exact
 * only while every buyer record is in its home bucket). */
static int read_buyers(dlock__conn *rc, const sk_buckets *b, int j, sk_reconcile_report *rep, users *ru,
                       size_t *misplaced)
{
    char key[128];
    sk_bucket_key(b, j, "buyers", key, sizeof(key));
    const char *argv[] = {"HGETALL", key};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(rc, 2, argv, NULL, &r));
    if (err) return err;
    sk_reconcile_bucket *bk = &rep->bucket[j];
    for (size_t i = 0; dlock__reply_kind(r) == DLOCK__R_ARRAY && i + 1 < dlock__reply_count(r); i += 2) {
        const char *user = dlock__reply_str(dlock__reply_at(r, i), NULL);
        int64_t q = strtoll(dlock__reply_str(dlock__reply_at(r, i + 1), NULL), NULL, 10);
        if (q <= 0) continue;
        users_add(user, q, ru);
        bk->buyer_units += q;
        bk->buyers++;
        int home = sk_home_bucket(user, b->k);
        if (home != j && (*misplaced)++ < 5)
            diff(rep, "bucket %d {%s}: user %s holds %" PRId64 " units but its home bucket is %d {%s}", j, b->tag[j],
                 user, q, home, b->tag[home]);
    }
    dlock__reply_free(r);
    return 0;
}

/* Compares the buyers of every bucket with user_totals; fills the sums. */
static int compare_buyers(sk_db *db, dlock__conn *rc, const sk_buckets *b, sk_reconcile_report *rep)
{
    users du = {0}, ru = {0};
    size_t misplaced = 0, i = 0, j = 0, shown = 0, total = 0;
    int err = sk_db_user_totals(db, rep->campaign, users_add, &du) ? SK_EDB : 0;
    for (int k = 0; k < b->k && !err; k++) err = read_buyers(rc, b, k, rep, &ru, &misplaced);
    if (misplaced > 5) diff(rep, "... %zu buyers are outside their home bucket in total", misplaced);
    users_sort_merge(&du);
    users_sort_merge(&ru);
    while (!err && (i < ru.n || j < du.n)) {
        int c = i == ru.n ? 1 : j == du.n ? -1 : strcmp(ru.v[i].user, du.v[j].user);
        int64_t rq = c <= 0 ? ru.v[i].qty : 0, dq = c >= 0 ? du.v[j].qty : 0;
        const char *name = c <= 0 ? ru.v[i].user : du.v[j].user;
        if (rq != dq && shown++ < 5) {
            int h = sk_home_bucket(name, b->k);
            if (b->k > 1)
                diff(rep, "user %s (home bucket %d {%s}) holds %" PRId64 " in Redis but %" PRId64 " in the database",
                     name, h, b->tag[h], rq, dq);
            else
                diff(rep, "user %s holds %" PRId64 " in Redis but %" PRId64 " in the database", name, rq, dq);
        }
        total += rq != dq;
        if (c <= 0) i++;
        if (c >= 0) j++;
    }
    if (total > 5) diff(rep, "... %zu users differ in total", total);
    free(du.v);
    free(ru.v);
    return err;
}

/* A journal value "<dst>\n<units>\n<ts_ms>" of a transfer leaving bucket
 * src of k: 0 with *dst, *units, *ts_ms, or -1 (malformed, or no other
 * bucket). */
static int parse_xfer(const char *v, int k, int src, int *dst, int64_t *units, int64_t *ts_ms)
{
    int64_t f[3];
    for (int i = 0; i < 3; i++) {
        if (*v < '0' || *v > '9') return -1;
        char *end = NULL;
        f[i] = strtoll(v, &end, 10);
        if (*end != (i < 2 ? '\n' : '\0')) return -1;
        v = end + (i < 2);
    }
    if (f[0] >= k || f[0] == src || f[1] <= 0) return -1;
    *dst = (int)f[0];
    *units = f[1];
    *ts_ms = f[2];
    return 0;
}

/* Bucket j's journal ({T}:xfer): each entry whose transfer id is not yet in
 * its destination's {T}:xin is in transit; a malformed one is a difference
 * (its units, if any, are counted nowhere). */
static int read_journal(dlock__conn *rc, const sk_buckets *b, int j, sk_reconcile_report *rep)
{
    char key[128], xin[128];
    sk_bucket_key(b, j, "xfer", key, sizeof(key));
    const char *argv[] = {"HGETALL", key};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(rc, 2, argv, NULL, &r));
    sk_reconcile_bucket *bk = &rep->bucket[j];
    for (size_t i = 0; !err && dlock__reply_kind(r) == DLOCK__R_ARRAY && i + 1 < dlock__reply_count(r); i += 2) {
        const char *xid = dlock__reply_str(dlock__reply_at(r, i), NULL), *v = dlock__reply_str(dlock__reply_at(r, i + 1), NULL);
        int dst = 0;
        int64_t units = 0, applied = 0, ts = 0;
        bk->xfer_entries++;
        if (parse_xfer(v, b->k, j, &dst, &units, &ts)) {
            char shown[48];
            snprintf(shown, sizeof(shown), "%s", v);
            for (char *p = shown; *p; p++)
                if (*p == '\n') *p = '|';
            diff(rep, "bucket %d {%s}: journal entry %.40s of %s is malformed or names no other bucket of %d "
                      "('%s'): its units are counted nowhere", j, b->tag[j], xid, key, b->k, shown);
            continue;
        }
        sk_bucket_key(b, dst, "xin", xin, sizeof(xin));
        const char *ism[] = {"SISMEMBER", xin, xid};
        dlock__reply *m = NULL;
        if ((err = sk_err_from_common(dlock__conn_cmd(rc, 3, ism, NULL, &m)))) break;
        if (dlock__reply_kind(m) == DLOCK__R_INTEGER) applied = dlock__reply_int(m);
        dlock__reply_free(m);
        if (!applied) {
            bk->transit_out_entries++;
            bk->transit_out_units += units;
            if (!bk->transit_oldest_ms || ts < bk->transit_oldest_ms) bk->transit_oldest_ms = ts;
        }
    }
    dlock__reply_free(r);
    return err;
}

/* Bucket j of K > 1 says so in its meta (shards K, bucket j). */
static int check_bucket_meta(dlock__conn *rc, const sk_buckets *b, int j, sk_reconcile_report *rep)
{
    char key[128];
    sk_bucket_key(b, j, "meta", key, sizeof(key));
    const char *argv[] = {"HMGET", key, "shards", "bucket"};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(rc, 4, argv, NULL, &r));
    if (err) return err;
    const char *f[2] = {"", ""};
    for (size_t i = 0; i < 2 && dlock__reply_kind(r) == DLOCK__R_ARRAY && i < dlock__reply_count(r); i++)
        if (dlock__reply_kind(dlock__reply_at(r, i)) == DLOCK__R_STRING) f[i] = dlock__reply_str(dlock__reply_at(r, i), NULL);
    char want_k[16], want_j[16];
    snprintf(want_k, sizeof(want_k), "%d", b->k);
    snprintf(want_j, sizeof(want_j), "%d", j);
    if (strcmp(f[0], want_k) != 0 || strcmp(f[1], want_j) != 0)
        diff(rep, "bucket %d {%s}: meta says shards '%s' bucket '%s', the layout of bucket 0 %d and %d", j, b->tag[j],
             f[0], f[1], b->k, j);
    dlock__reply_free(r);
    return 0;
}

/* One bucket's keys: stock, streams, gates. */
static int read_bucket(dlock__conn *rc, const sk_buckets *b, int j, sk_reconcile_report *rep)
{
    sk_reconcile_bucket *bk = &rep->bucket[j];
    char k[128];
    bool nil = false;
    int err;
    snprintf(bk->tag, sizeof(bk->tag), "%s", b->tag[j]);
    sk_bucket_key(b, j, "stock", k, sizeof(k));
    if ((err = redis_int(rc, "GET", k, NULL, &bk->stock, &nil))) return err;
    bk->present = !nil;
    sk_bucket_key(b, j, "orders", k, sizeof(k));
    if ((err = redis_int(rc, "XLEN", k, NULL, &bk->stream_len, NULL))) return err;
    sk_bucket_key(b, j, "orders:dead", k, sizeof(k));
    if ((err = redis_int(rc, "XLEN", k, NULL, &bk->dead, NULL))) return err;
    sk_bucket_key(b, j, "released", k, sizeof(k));
    if ((err = redis_int(rc, "SCARD", k, NULL, &bk->released, NULL))) return err;
    sk_bucket_key(b, j, "carried", k, sizeof(k));
    if ((err = redis_int(rc, "SCARD", k, NULL, &bk->carried, NULL))) return err;
    if (b->k > 1) {
        sk_bucket_key(b, j, "xin", k, sizeof(k));
        if ((err = redis_int(rc, "SCARD", k, NULL, &bk->xin, NULL))) return err;
        if ((err = read_journal(rc, b, j, rep)) || (err = check_bucket_meta(rc, b, j, rep))) return err;
    }
    sk_bucket_key(b, j, "orders", k, sizeof(k));
    return sk_stream_backlog(rc, k, &bk->pending, &bk->lag);
}

/* The campaign's layout; a meta whose layout is not valid is a difference
 * (then only bucket 0 is read), no meta the one-bucket layout. */
static int read_layout(dlock__conn *rc, sk_reconcile_report *rep, sk_buckets *b)
{
    int err = sk_layout_read(rc, rep->campaign, b);
    if (err == SK_EINVAL)
        diff(rep, "bucket 0's meta {c:%s}:meta has no valid bucket layout (shards, bucket_tags): only bucket 0 read",
             rep->campaign);
    if (err == SK_ENOTFOUND || err == SK_EINVAL) {
        sk_buckets_single(rep->campaign, b);
        err = 0;
    }
    rep->nbuckets = b->k;
    return err;
}

static int redis_side(dlock__conn *rc, const sk_buckets *b, sk_reconcile_report *rep)
{
    char k[112];
    int err;
    sk_campaign_key(rep->campaign, "meta", k, sizeof(k));
    if ((err = redis_int(rc, "HGET", k, "stock", &rep->r_initial, NULL))) return err;
    for (int j = 0; j < b->k; j++) {
        if ((err = read_bucket(rc, b, j, rep))) return err;
        const sk_reconcile_bucket *bk = &rep->bucket[j];
        rep->redis_present |= bk->present;
        rep->r_stock += bk->stock;
        rep->r_stream_len += bk->stream_len;
        rep->r_dead += bk->dead;
        rep->r_released += bk->released;
        rep->r_carried += bk->carried;
        rep->r_pending += bk->pending;
        rep->r_lag += bk->lag;
        rep->r_in_transit += bk->transit_out_units;
        rep->r_in_transit_entries += bk->transit_out_entries;
        if (bk->transit_oldest_ms && (!rep->r_transit_oldest_ms || bk->transit_oldest_ms < rep->r_transit_oldest_ms))
            rep->r_transit_oldest_ms = bk->transit_oldest_ms;
    }
    return 0;
}

/* K > 1: one line per bucket, so an operator sees where the units are. */
static void bucket_lines(sk_reconcile_report *rep)
{
    for (int j = 0; j < rep->nbuckets; j++) {
        const sk_reconcile_bucket *bk = &rep->bucket[j];
        diff(rep, "bucket %d {%s}: stock %" PRId64 ", %" PRId64 " units taken out in transit (%" PRId64
                  " transfers), buyers hold %" PRId64 ", stream %" PRId64 " entries (+%" PRId64 " carried), dead %" PRId64,
             j, bk->tag, bk->stock, bk->transit_out_units, bk->transit_out_entries, bk->buyer_units, bk->stream_len,
             bk->carried, bk->dead);
    }
}

/* Per-bucket checks of K > 1: each bucket heated, drained, no dead letters. */
static void bucket_checks(sk_reconcile_report *rep)
{
    for (int j = 0; j < rep->nbuckets && rep->nbuckets > 1; j++) {
        const sk_reconcile_bucket *bk = &rep->bucket[j];
        if (!bk->present && rep->redis_present) diff(rep, "bucket %d {%s}: no stock key in Redis", j, bk->tag);
        if (bk->stock < 0) diff(rep, "bucket %d {%s}: stock is negative (%" PRId64 ")", j, bk->tag, bk->stock);
        if (bk->pending || bk->lag)
            diff(rep, "bucket %d {%s}: stream not drained: %" PRId64 " pending, %" PRId64 " never delivered", j,
                 bk->tag, bk->pending, bk->lag);
        if (bk->dead)
            diff(rep, "bucket %d {%s}: %" PRId64 " entries in the dead-letter stream {%s}:orders:dead", j, bk->tag,
                 bk->dead, bk->tag);
    }
}

/* Stock and sums: both sides hold the same units; the Redis side's units
 * are its buckets' stock plus the units in transit between them. Returns
 * true when one of them failed (K > 1 then lists every bucket). */
static bool stock_checks(sk_reconcile_report *rep)
{
    const sk_db_campaign_stats *d = &rep->d;
    int n0 = rep->ndiffs;
    int64_t redis_share = d->remaining - d->reserve_remaining, left = rep->r_stock + rep->r_in_transit;
    int64_t orders_db = d->orders[0] + d->orders[1] + d->orders[2] + d->orders[3] + d->orders[4];
    if (rep->redis_present && left != redis_share && rep->nbuckets == 1)
        diff(rep, "remaining stock: Redis %" PRId64 ", database %" PRId64 " (remaining %" PRId64 " - reserve %" PRId64
                  ")", rep->r_stock, redis_share, d->remaining, d->reserve_remaining);
    else if (rep->redis_present && left != redis_share)
        diff(rep, "remaining stock: Redis %" PRId64 " in %d buckets + %" PRId64 " in transit = %" PRId64
                  ", database %" PRId64 " (remaining %" PRId64 " - reserve %" PRId64 "): %" PRId64 " units %s",
             rep->r_stock, rep->nbuckets, rep->r_in_transit, left, redis_share, d->remaining, d->reserve_remaining,
             left > redis_share ? left - redis_share : redis_share - left, left > redis_share ? "too many" : "missing");
    if (rep->redis_present && rep->r_initial != left + rep->r_buyer_units + d->reserve_remaining)
        diff(rep, "Redis does not add up: initial %" PRId64 " != remaining %" PRId64 " + bought %" PRId64
                  "%s + database reserve %" PRId64, rep->r_initial, left, rep->r_buyer_units,
             rep->r_in_transit ? " (in transit included)" : "", d->reserve_remaining);
    int64_t in_db = orders_db - d->db_path_orders;
    if (rep->r_stream_len + rep->r_carried != in_db + rep->r_dead)
        diff(rep, "stream has %" PRId64 " entries (+%" PRId64 " carried by a barrier) but the database has %" PRId64
                  " orders from it (+%" PRId64 " dead)",
             rep->r_stream_len, rep->r_carried, in_db, rep->r_dead);
    return rep->ndiffs > n0;
}

static void checks(sk_reconcile_report *rep)
{
    const sk_db_campaign_stats *d = &rep->d;
    int64_t counted = d->units[SK_ST_PERSISTED] + d->units[SK_ST_PAID];
    int64_t sold_db = counted + d->units[SK_ST_PENDING];
    bool k1 = rep->nbuckets == 1;
    if (!rep->redis_present) diff(rep, "campaign has no stock key in Redis (not pre-heated or lost)");
    if (k1 && (rep->r_pending || rep->r_lag))
        diff(rep, "stream not drained: %" PRId64 " pending, %" PRId64 " never delivered", rep->r_pending, rep->r_lag);
    if (k1 && rep->r_dead)
        diff(rep, "%" PRId64 " entries in the dead-letter stream {c:%s}:orders:dead", rep->r_dead, rep->campaign);
    bucket_checks(rep);
    if (d->broken_promises)
        diff(rep, "%" PRId64 " orders accepted by Redis (path redis) were rejected by the database guard: "
                  "broken promises", d->broken_promises);
    if (d->stock != d->remaining + sold_db)
        diff(rep, "database does not add up: stock %" PRId64 " != remaining %" PRId64 " + sold %" PRId64, d->stock,
             d->remaining, sold_db);
    if (d->user_total_units != counted)
        diff(rep, "database user totals %" PRId64 " != units sold %" PRId64, d->user_total_units, counted);
    if (d->orders[SK_ST_PENDING])
        diff(rep, "%" PRId64 " tentative (database-path) orders not yet finalised", d->orders[SK_ST_PENDING]);
    if (rep->r_initial != d->stock && rep->redis_present)
        diff(rep, "initial stock: Redis %" PRId64 ", database %" PRId64, rep->r_initial, d->stock);
    if (stock_checks(rep) && !k1) bucket_lines(rep);
    if (d->released_pending)
        diff(rep, "%" PRId64 " cancelled orders not yet given back in Redis", d->released_pending);
    if (d->mirror_pending)
        diff(rep, "%" PRId64 " degraded-path (db) orders not yet mirrored into Redis", d->mirror_pending);
    if (rep->r_released != d->released_done)
        diff(rep, "Redis released %" PRId64 " orders, the database cancelled and released %" PRId64,
             rep->r_released, d->released_done);
}

static void sum_buyers(sk_reconcile_report *rep)
{
    for (int j = 0; j < rep->nbuckets; j++) {
        rep->r_buyer_units += rep->bucket[j].buyer_units;
        rep->r_buyers += rep->bucket[j].buyers;
    }
}

/* Layout and every bucket's keys into rep (already reset, campaign set). */
static int redis_all(dlock__conn *rc, sk_reconcile_report *rep, sk_buckets *b)
{
    int err = read_layout(rc, rep, b);
    return err ? err : redis_side(rc, b, rep);
}

int sk_reconcile_redis(dlock__conn *rc, const char *campaign, sk_reconcile_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    if (!sk_valid_campaign_id(campaign)) return SK_EINVAL;
    snprintf(rep->campaign, sizeof(rep->campaign), "%s", campaign);
    sk_buckets b;
    users ru = {0};
    size_t misplaced = 0;
    int err = redis_all(rc, rep, &b);
    for (int j = 0; !err && j < b.k; j++) err = read_buyers(rc, &b, j, rep, &ru, &misplaced);
    free(ru.v);
    sum_buyers(rep);
    return err ? err : rep->diffs.oom ? DLOCK_ENOMEM : 0;
}

int sk_reconcile_campaign(sk_db *db, dlock__conn *rc, const char *campaign, sk_reconcile_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    if (!sk_valid_campaign_id(campaign)) return SK_EINVAL;
    snprintf(rep->campaign, sizeof(rep->campaign), "%s", campaign);
    int err = sk_db_campaign_stats_get(db, campaign, &rep->d);
    if (err) return err;
    sk_buckets b;
    if ((err = redis_all(rc, rep, &b))) return err;
    if ((err = compare_buyers(db, rc, &b, rep))) return err;
    sum_buyers(rep);
    checks(rep);
    return rep->diffs.oom ? DLOCK_ENOMEM : 0;
}

void sk_reconcile_report_free(sk_reconcile_report *rep) { dlock__buf_free(&rep->diffs); }

static void json_str(dlock__buf *o, const char *s)
{
    dlock__buf_append(o, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') dlock__buf_printf(o, "\\%c", c);
        else if (c < 0x20) dlock__buf_printf(o, "\\u%04x", c);
        else dlock__buf_append(o, s, 1);
    }
    dlock__buf_append(o, "\"", 1);
}

static void format_buckets_json(const sk_reconcile_report *rep, dlock__buf *o)
{
    dlock__buf_printf(o, ",\"shards\":%d,\"in_transit\":%" PRId64 ",\"in_transit_transfers\":%" PRId64 ",\"buckets\":[",
                      rep->nbuckets, rep->r_in_transit, rep->r_in_transit_entries);
    for (int j = 0; j < rep->nbuckets; j++) {
        const sk_reconcile_bucket *bk = &rep->bucket[j];
        dlock__buf_printf(o, "%s{\"bucket\":%d,\"tag\":", j ? "," : "", j);
        json_str(o, bk->tag);
        dlock__buf_printf(o, ",\"present\":%s,\"remaining\":%" PRId64 ",\"buyers\":%" PRId64 ",\"bought_units\":%" PRId64
                             ",\"stream_entries\":%" PRId64 ",\"pending\":%" PRId64 ",\"lag\":%" PRId64
                             ",\"dead_letters\":%" PRId64 ",\"released\":%" PRId64 ",\"journal_entries\":%" PRId64
                             ",\"in_transit_out\":%" PRId64 ",\"in_transit_out_transfers\":%" PRId64
                             ",\"transfers_in\":%" PRId64 "}",
                          bk->present ? "true" : "false", bk->stock, bk->buyers, bk->buyer_units, bk->stream_len,
                          bk->pending, bk->lag, bk->dead, bk->released, bk->xfer_entries, bk->transit_out_units,
                          bk->transit_out_entries, bk->xin);
    }
    dlock__buf_printf(o, "]");
}

static void format_json(const sk_reconcile_report *rep, dlock__buf *o)
{
    const sk_db_campaign_stats *d = &rep->d;
    const char *p = rep->diffs.data;
    dlock__buf_printf(o, "{\"campaign\":");
    json_str(o, rep->campaign);
    dlock__buf_printf(o, ",\"consistent\":%s,\"redis\":{\"present\":%s,\"initial\":%" PRId64
                         ",\"remaining\":%" PRId64 ",\"buyers\":%" PRId64 ",\"bought_units\":%" PRId64
                         ",\"stream_entries\":%" PRId64 ",\"pending\":%" PRId64 ",\"lag\":%" PRId64
                         ",\"dead_letters\":%" PRId64 ",\"released\":%" PRId64,
                      rep->ndiffs ? "false" : "true", rep->redis_present ? "true" : "false", rep->r_initial,
                      rep->r_stock, rep->r_buyers, rep->r_buyer_units, rep->r_stream_len, rep->r_pending,
                      rep->r_lag, rep->r_dead, rep->r_released);
    format_buckets_json(rep, o);
    dlock__buf_printf(o, "},\"database\":{\"stock\":%" PRId64 ",\"remaining\":%" PRId64
                         ",\"orders\":{\"persisted\":%" PRId64 ",\"paid\":%" PRId64 ",\"cancelled\":%" PRId64
                         ",\"rejected\":%" PRId64 "},\"units\":{\"persisted\":%" PRId64 ",\"paid\":%" PRId64
                         ",\"cancelled\":%" PRId64 ",\"rejected\":%" PRId64 "},\"user_total_units\":%" PRId64
                         ",\"release_pending\":%" PRId64 ",\"db_path_orders\":%" PRId64 ",\"pending\":%" PRId64
                         ",\"reserve_remaining\":%" PRId64 ",\"epoch\":%" PRId64 ",\"broken_promises\":%" PRId64
                         ",\"stale_timeline\":%" PRId64 ",\"finalised_lost\":%" PRId64 "}",
                      d->stock, d->remaining, d->orders[0], d->orders[1], d->orders[2], d->orders[3], d->units[0],
                      d->units[1], d->units[2], d->units[3], d->user_total_units, d->released_pending,
                      d->db_path_orders, d->orders[SK_ST_PENDING], d->reserve_remaining, d->epoch,
                      d->broken_promises, d->stale, d->finalised_lost);
    dlock__buf_printf(o, ",\"differences\":[");
    for (int i = 0; i < rep->ndiffs; i++, p += strlen(p) + 1) {
        if (i) dlock__buf_append(o, ",", 1);
        json_str(o, p);
    }
    dlock__buf_printf(o, "]}");
}

/* K > 1: the transit total and one line per bucket (text). */
static void format_buckets_text(const sk_reconcile_report *rep, dlock__buf *o)
{
    if (rep->nbuckets < 2) return;
    dlock__buf_printf(o, "  in transit: %" PRId64 " units in %" PRId64 " transfers between %d buckets\n",
                      rep->r_in_transit, rep->r_in_transit_entries, rep->nbuckets);
    for (int j = 0; j < rep->nbuckets; j++) {
        const sk_reconcile_bucket *bk = &rep->bucket[j];
        dlock__buf_printf(o, "  bucket %d {%s}: remaining %" PRId64 ", %" PRId64 " buyers (%" PRId64
                             " units), stream %" PRId64 " entries, pending %" PRId64 ", lag %" PRId64 ", dead %" PRId64
                             ", journal %" PRId64 " (%" PRId64 " units in transit out), %" PRId64 " transfers in\n",
                          j, bk->tag, bk->stock, bk->buyers, bk->buyer_units, bk->stream_len, bk->pending, bk->lag,
                          bk->dead, bk->xfer_entries, bk->transit_out_units, bk->xin);
    }
}

void sk_reconcile_format(const sk_reconcile_report *rep, bool json, dlock__buf *o)
{
    const sk_db_campaign_stats *d = &rep->d;
    const char *p = rep->diffs.data;
    if (json) {
        format_json(rep, o);
        return;
    }
    dlock__buf_printf(o, "campaign %s: %s\n", rep->campaign, rep->ndiffs ? "DIFFERENCES" : "consistent");
    dlock__buf_printf(o, "  redis:    remaining %" PRId64 " of %" PRId64 ", %" PRId64 " buyers (%" PRId64
                         " units), stream %" PRId64 " entries, pending %" PRId64 ", lag %" PRId64 ", dead %" PRId64
                         ", released %" PRId64 "\n",
                      rep->r_stock, rep->r_initial, rep->r_buyers, rep->r_buyer_units, rep->r_stream_len,
                      rep->r_pending, rep->r_lag, rep->r_dead, rep->r_released);
    format_buckets_text(rep, o);
    dlock__buf_printf(o, "  database: remaining %" PRId64 " of %" PRId64 " (reserve %" PRId64 "), epoch %" PRId64
                         ", orders persisted %" PRId64 " paid %" PRId64 " cancelled %" PRId64 " rejected %" PRId64
                         " (stale timeline %" PRId64 ", broken promises %" PRId64 ") pending %" PRId64 "\n",
                      d->remaining, d->stock, d->reserve_remaining, d->epoch, d->orders[0], d->orders[1], d->orders[2],
                      d->orders[3], d->stale, d->broken_promises, d->orders[4]);
    for (int i = 0; i < rep->ndiffs; i++, p += strlen(p) + 1) dlock__buf_printf(o, "  - %s\n", p);
}
