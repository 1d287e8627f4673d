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
#include "ids.h"
#include "persist.h"
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
    int err = dlock__conn_cmd(rc, c3 ? 3 : 2, argv, NULL, &r);
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

/* Compares {c:<id>}:buyers with user_totals; fills buyer sums. */
static int compare_buyers(sk_db *db, dlock__conn *rc, sk_reconcile_report *rep)
{
    users du = {0}, ru = {0};
    if (sk_db_user_totals(db, rep->campaign, users_add, &du)) {
        free(du.v);
        return SK_EDB;
    }
    char key[96];
    snprintf(key, sizeof(key), "{c:%s}:buyers", rep->campaign);
    const char *argv[] = {"HGETALL", key};
    dlock__reply *r = NULL;
    int err = dlock__conn_cmd(rc, 2, argv, NULL, &r);
    if (err) {
        free(du.v);
        return err;
    }
    for (size_t i = 0; i + 1 < dlock__reply_count(r); i += 2) {
        int64_t q = strtoll(dlock__reply_str(dlock__reply_at(r, i + 1), NULL), NULL, 10);
        if (q <= 0) continue;
        users_add(dlock__reply_str(dlock__reply_at(r, i), NULL), q, &ru);
        rep->r_buyer_units += q;
        rep->r_buyers++;
    }
    dlock__reply_free(r);
    if (du.n > 1) qsort(du.v, du.n, sizeof(*du.v), cmp_user);
    if (ru.n > 1) qsort(ru.v, ru.n, sizeof(*ru.v), cmp_user);
    size_t i = 0, j = 0, shown = 0, total = 0;
    while (i < ru.n || j < du.n) {
        int c = i == ru.n ? 1 : j == du.n ? -1 : strcmp(ru.v[i].user, du.v[j].user);
        int64_t rq = c <= 0 ? ru.v[i].qty : 0, dq = c >= 0 ? du.v[j].qty : 0;
        const char *name = c <= 0 ? ru.v[i].user : du.v[j].user;
        if (rq != dq) {
            total++;
            if (shown++ < 5) diff(rep, "user %s holds %" PRId64 " in Redis but %" PRId64 " in the database", name, rq, dq);
        }
        if (c <= 0) i++;
        if (c >= 0) j++;
    }
    if (total > 5) diff(rep, "... %zu users differ in total", total);
    free(du.v);
    free(ru.v);
    return 0;
}

static int redis_side(dlock__conn *rc, sk_reconcile_report *rep)
{
    char k[112];
    const char *id = rep->campaign;
    bool nil = false;
    int err;
    snprintf(k, sizeof(k), "{c:%s}:stock", id);
    if ((err = redis_int(rc, "GET", k, NULL, &rep->r_stock, &nil))) return err;
    rep->redis_present = !nil;
    snprintf(k, sizeof(k), "{c:%s}:meta", id);
    if ((err = redis_int(rc, "HGET", k, "stock", &rep->r_initial, NULL))) return err;
    snprintf(k, sizeof(k), "{c:%s}:orders", id);
    if ((err = redis_int(rc, "XLEN", k, NULL, &rep->r_stream_len, NULL))) return err;
    snprintf(k, sizeof(k), "{c:%s}:orders:dead", id);
    if ((err = redis_int(rc, "XLEN", k, NULL, &rep->r_dead, NULL))) return err;
    snprintf(k, sizeof(k), "{c:%s}:released", id);
    if ((err = redis_int(rc, "SCARD", k, NULL, &rep->r_released, NULL))) return err;
    snprintf(k, sizeof(k), "{c:%s}:carried", id);
    if ((err = redis_int(rc, "SCARD", k, NULL, &rep->r_carried, NULL))) return err;
    return sk_persist_backlog(rc, id, &rep->r_pending, &rep->r_lag);
}

static void checks(sk_reconcile_report *rep)
{
    const sk_db_campaign_stats *d = &rep->d;
    int64_t counted = d->units[SK_ST_PERSISTED] + d->units[SK_ST_PAID];
    int64_t sold_db = counted + d->units[SK_ST_PENDING];
    int64_t orders_db = d->orders[0] + d->orders[1] + d->orders[2] + d->orders[3] + d->orders[4];
    int64_t redis_share = d->remaining - d->reserve_remaining;
    if (!rep->redis_present) diff(rep, "campaign has no stock key in Redis (not pre-heated or lost)");
    if (rep->r_pending || rep->r_lag)
        diff(rep, "stream not drained: %" PRId64 " pending, %" PRId64 " never delivered", rep->r_pending, rep->r_lag);
    if (rep->r_dead) diff(rep, "%" PRId64 " entries in the dead-letter stream {c:%s}:orders:dead", rep->r_dead, rep->campaign);
    if (d->broken_promises)
        diff(rep, "%" PRId64 " orders accepted by Redis (path redis) were rejected by the database guard: "
                  "broken promises", d->broken_promises);
    if (rep->redis_present && rep->r_stock != redis_share)
        diff(rep, "remaining stock: Redis %" PRId64 ", database %" PRId64 " (remaining %" PRId64 " - reserve %" PRId64
                  ")", rep->r_stock, redis_share, d->remaining, d->reserve_remaining);
    if (d->stock != d->remaining + sold_db)
        diff(rep, "database does not add up: stock %" PRId64 " != remaining %" PRId64 " + sold %" PRId64, d->stock,
             d->remaining, sold_db);
    if (d->user_total_units != counted)
        diff(rep, "database user totals %" PRId64 " != units sold %" PRId64, d->user_total_units, counted);
    if (rep->redis_present && rep->r_initial != rep->r_stock + rep->r_buyer_units + d->reserve_remaining)
        diff(rep, "Redis does not add up: initial %" PRId64 " != remaining %" PRId64 " + bought %" PRId64
                  " + database reserve %" PRId64, rep->r_initial, rep->r_stock, rep->r_buyer_units, d->reserve_remaining);
    if (d->orders[SK_ST_PENDING])
        diff(rep, "%" PRId64 " tentative (database-path) orders not yet finalised", d->orders[SK_ST_PENDING]);
    if (rep->r_initial != d->stock && rep->redis_present)
        diff(rep, "initial stock: Redis %" PRId64 ", database %" PRId64, rep->r_initial, d->stock);
    int64_t in_db = orders_db - d->db_path_orders;
    if (rep->r_stream_len + rep->r_carried != in_db + rep->r_dead)
        diff(rep, "stream has %" PRId64 " entries (+%" PRId64 " carried by a barrier) but the database has %" PRId64
                  " orders from it (+%" PRId64 " dead)",
             rep->r_stream_len, rep->r_carried, in_db, rep->r_dead);
    if (d->released_pending)
        diff(rep, "%" PRId64 " cancelled orders not yet given back in Redis", d->released_pending);
    if (d->mirror_pending)
        diff(rep, "%" PRId64 " degraded-path (db) orders not yet mirrored into Redis", d->mirror_pending);
    if (rep->r_released != d->released_done)
        diff(rep, "Redis released %" PRId64 " orders, the database cancelled and released %" PRId64,
             rep->r_released, d->released_done);
}

int sk_reconcile_campaign(sk_db *db, dlock__conn *rc, const char *campaign, sk_reconcile_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    if (!sk_valid_campaign_id(campaign)) return SK_EINVAL;
    snprintf(rep->campaign, sizeof(rep->campaign), "%s", campaign);
    int err = sk_db_campaign_stats_get(db, campaign, &rep->d);
    if (err) return err;
    if ((err = redis_side(rc, rep))) return err;
    if ((err = compare_buyers(db, rc, rep))) return err;
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

void sk_reconcile_format(const sk_reconcile_report *rep, bool json, dlock__buf *o)
{
    const sk_db_campaign_stats *d = &rep->d;
    const char *p = rep->diffs.data;
    if (json) {
        dlock__buf_printf(o, "{\"campaign\":");
        json_str(o, rep->campaign);
        dlock__buf_printf(o, ",\"consistent\":%s,\"redis\":{\"present\":%s,\"initial\":%" PRId64
                             ",\"remaining\":%" PRId64 ",\"buyers\":%" PRId64 ",\"bought_units\":%" PRId64
                             ",\"stream_entries\":%" PRId64 ",\"pending\":%" PRId64 ",\"lag\":%" PRId64
                             ",\"dead_letters\":%" PRId64 ",\"released\":%" PRId64 "}",
                          rep->ndiffs ? "false" : "true", rep->redis_present ? "true" : "false", rep->r_initial,
                          rep->r_stock, rep->r_buyers, rep->r_buyer_units, rep->r_stream_len, rep->r_pending,
                          rep->r_lag, rep->r_dead, rep->r_released);
        dlock__buf_printf(o, ",\"database\":{\"stock\":%" PRId64 ",\"remaining\":%" PRId64
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
        return;
    }
    dlock__buf_printf(o, "campaign %s: %s\n", rep->campaign, rep->ndiffs ? "DIFFERENCES" : "consistent");
    dlock__buf_printf(o, "  redis:    remaining %" PRId64 " of %" PRId64 ", %" PRId64 " buyers (%" PRId64
                         " units), stream %" PRId64 " entries, pending %" PRId64 ", lag %" PRId64 ", dead %" PRId64
                         ", released %" PRId64 "\n",
                      rep->r_stock, rep->r_initial, rep->r_buyers, rep->r_buyer_units, rep->r_stream_len,
                      rep->r_pending, rep->r_lag, rep->r_dead, rep->r_released);
    dlock__buf_printf(o, "  database: remaining %" PRId64 " of %" PRId64 " (reserve %" PRId64 "), epoch %" PRId64
                         ", orders persisted %" PRId64 " paid %" PRId64 " cancelled %" PRId64 " rejected %" PRId64
                         " (stale timeline %" PRId64 ", broken promises %" PRId64 ") pending %" PRId64 "\n",
                      d->remaining, d->stock, d->reserve_remaining, d->epoch, d->orders[0], d->orders[1], d->orders[2],
                      d->orders[3], d->stale, d->broken_promises, d->orders[4]);
    for (int i = 0; i < rep->ndiffs; i++, p += strlen(p) + 1) dlock__buf_printf(o, "  - %s\n", p);
}
