/* http.c: routes and handlers of seckilld (see http.h and docs/http-api.md).
 * Invariant: every request gets exactly one answer, always through
 * http_reply.c, which also counts it in the metrics; identities are read
 * by http_auth.c, orders served by http_orders.c; requests waiting for Redis
 * hold an hreq that the answer frees. A client that disconnects while its
 * request waits is fine: the HTTP layer (hserver.h) keeps the request
 * until it is answered. */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "db.h"
#include "degraded.h"
#include "dlock/dlock.h"
#include "hserver.h"
#include "http_internal.h"
#include "http_metrics.h"
#include "ids.h"
#include "outcome.h"
#include "common_err.h"
#include "json.h"
#include "util.h"

void sk_http_opts_init(sk_http_opts *o)
{
    memset(o, 0, sizeof(*o));
    sk_hs_opts hs; /* the HTTP layer's limits are the defaults: one place */
    sk_hs_opts_init(&hs);
    o->idle_timeout_ms = hs.idle_timeout_ms;
    o->max_body = hs.max_body;
    o->max_headers = hs.max_head;
    o->head_timeout_ms = hs.head_timeout_ms;
    o->body_timeout_ms = hs.body_timeout_ms;
    o->max_connections = 10000;
    o->max_conns_per_addr = 1024;
    o->ipv6_prefix = SK_IPV6_PREFIX_DEFAULT;
}

size_t sk_http_inflight(const sk_http *h) { return h->inflight; }

size_t sk_http_unflushed(const sk_http *h) { return sk_hs_unflushed(h->hs); }

/* ---- request helpers ---------------------------------------------------- */

static const char *header(hreq *q, const char *name)
{
    return sk_hs_req_header(q->req, name);
}

/* The JSON body parsed into doc: 0, 1 for an empty body (doc untouched),
 * or -1 when it has answered already (400 malformed, 500). Bodies over
 * max-body never get here: the HTTP layer answers 413 itself. */
static int read_json(hreq *q, dlock__json_doc *doc)
{
    char msg[200];
    size_t len = 0;
    const char *body = sk_hs_req_body(q->req, &len);
    int rc = len ? dlock__json_parse(body, len, doc, msg + 14, sizeof(msg) - 14) : 0;
    if (rc == DLOCK__EINVAL) {
        memcpy(msg, "invalid JSON: ", 14); /* the reader's refusal, json.h */
        sk__http_reply_error(q, 400, "bad_request", msg);
        return -1;
    }
    if (rc) {
        sk__http_reply_error(q, 500, "internal", "out of memory");
        return -1;
    }
    return len ? 0 : 1;
}

/* The client address (client_addr.h); false when a forwarded entry is
 * not an address (answered 400). */
static bool client_ip(hreq *q, char ip[SK_ADDR_MAX])
{
    const char *xff[16], *fwd[16];
    size_t n = sk_hs_req_headers(q->req, "X-Forwarded-For", xff, 16);
    size_t m = sk_hs_req_headers(q->req, "Forwarded", fwd, 16);
    char addr[SK_ADDR_MAX];
    if (n <= 16 && m <= 16 && sk_client_addr(&q->h->trusted, sk_hs_req_peer(q->req), xff, n, fwd, m, addr) == 0) {
        /* the rate limit's key: an IPv6 client's network, a mapped IPv4 as IPv4 */
        sk_addr_group(addr, q->h->o.ipv6_prefix, ip);
        return true;
    }
    sk__http_reply_error(q, 400, "bad_request", "X-Forwarded-For / Forwarded: not a list of IP addresses");
    return false;
}

/* ---- campaigns ------------------------------------------------------------ */

static void put_campaign(dlock__buf *b, const sk_campaign_info *ci)
{
    char s[40], e[40];
    sk_http_format_time(ci->def.starts_at_ms, s);
    sk_http_format_time(ci->def.ends_at_ms, e);
    dlock__buf_append(b, "{\"id\":", 6);
    dlock__json_put_str(b, ci->def.id, strlen(ci->def.id));
    dlock__buf_append(b, ",\"title\":", 9);
    dlock__json_put_str(b, ci->def.title, strlen(ci->def.title));
    dlock__buf_printf(b,
                      ",\"stock\":%lld,\"remaining\":%lld,\"sold\":%lld,\"per_user_limit\":%lld,"
                      "\"price_cents\":%lld,\"starts_at\":\"%s\",\"ends_at\":\"%s\","
                      "\"starts_at_ms\":%lld,\"ends_at_ms\":%lld,\"db_reserve\":%lld,\"shards\":%lld,"
                      "\"state\":\"%s\"}\n",
                      (long long)ci->def.stock, (long long)ci->remaining, (long long)ci->sold,
                      (long long)ci->def.per_user_limit, (long long)ci->def.price_cents, s, e,
                      (long long)ci->def.starts_at_ms, (long long)ci->def.ends_at_ms,
                      (long long)ci->def.db_reserve, (long long)(ci->def.shards > 1 ? ci->def.shards : 1),
                      ci->state);
}

static void on_campaign(int err, const sk_campaign_info *ci, void *arg)
{
    hreq *q = arg;
    if (err) {
        const char *what = err == SK_EEXIST      ? "campaign already exists"
                           : err == SK_ELIVE     ? "campaign is live: re-heat needs force=1"
                           : err == SK_ENOTFOUND ? "no such campaign"
                                                 : "campaign";
        sk__http_reply_err_code(q, err, what);
        return;
    }
    dlock__buf b = {0};
    put_campaign(&b, ci);
    sk__http_reply_json(q, q->route == SK_ROUTE_CAMPAIGN_CREATE ? 201 : 200, &b);
}

/* Whether s (len bytes, UTF-8) holds a control character: C0, DEL, or
 * C1 (U+0080..U+009F, C2 80..C2 9F): a title is printed by admin tools
 * and logs, where such bytes forge lines or drive a terminal. */
static bool has_control(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) return true;
        if (c == 0xc2 && i + 1 < len && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9f)
            return true;
    }
    return false;
}

/* A time: unix ms, or RFC 3339 text; either within what RFC 3339 writes
 * back (SK_HTTP_TIME_MAX_MS), else SK_EINVAL. */
static int json_time(const dlock__json_val *v, int64_t *ms_out)
{
    if (v->type == DLOCK__JSON_NUMBER && v->is_int && v->i >= 0 && v->i <= SK_HTTP_TIME_MAX_MS) {
        *ms_out = v->i;
        return 0;
    }
    if (v->type == DLOCK__JSON_STRING && strlen(v->s) == v->len) return sk_http_parse_time(v->s, v->len, ms_out);
    return SK_EINVAL;
}

/* Fills d from a campaign JSON object; 0 or SK_EINVAL with msg. */
static int parse_campaign(const dlock__json_doc *doc, sk_campaign *d, char *msg, size_t msglen)
{
    const dlock__json_val *root = &doc->nodes[0];
    memset(d, 0, sizeof(*d));
    d->per_user_limit = 1;
    bool has_id = false, has_stock = false, has_start = false, has_end = false;
    if (root->type != DLOCK__JSON_OBJECT) {
        snprintf(msg, msglen, "body must be a JSON object");
        return SK_EINVAL;
    }
    for (int c = root->first; c >= 0; c = doc->nodes[c].next) {
        const dlock__json_val *v = &doc->nodes[c];
        const char *k = v->key; /* no \0 inside (json.h): printable as a C string */
        bool ok = true;
        if (dlock__json_key_is(v, "id")) {
            ok = v->type == DLOCK__JSON_STRING && v->len < sizeof(d->id) && strlen(v->s) == v->len;
            if (ok) snprintf(d->id, sizeof(d->id), "%s", v->s);
            has_id = true;
        } else if (dlock__json_key_is(v, "title")) {
            ok = v->type == DLOCK__JSON_STRING && v->len < sizeof(d->title) && strlen(v->s) == v->len;
            if (ok) snprintf(d->title, sizeof(d->title), "%s", v->s);
        } else if (dlock__json_key_is(v, "stock")) {
            ok = v->type == DLOCK__JSON_NUMBER && v->is_int;
            d->stock = v->i;
            has_stock = true;
        } else if (dlock__json_key_is(v, "per_user_limit")) {
            ok = v->type == DLOCK__JSON_NUMBER && v->is_int;
            d->per_user_limit = v->i;
        } else if (dlock__json_key_is(v, "price_cents") || dlock__json_key_is(v, "db_reserve") ||
                   dlock__json_key_is(v, "shards")) {
            ok = v->type == DLOCK__JSON_NUMBER && v->is_int;
            *(k[0] == 'p' ? &d->price_cents : k[0] == 'd' ? &d->db_reserve : &d->shards) = v->i;
        } else if (dlock__json_key_is(v, "starts_at")) {
            ok = json_time(v, &d->starts_at_ms) == 0;
            has_start = true;
        } else if (dlock__json_key_is(v, "ends_at")) {
            ok = json_time(v, &d->ends_at_ms) == 0;
            has_end = true;
        } else {
            snprintf(msg, msglen, "unknown field \"%.64s\"", k);
            return SK_EINVAL;
        }
        if (!ok) {
            /* only starts_at and ends_at among the known fields hold "_at" */
            snprintf(msg, msglen, "bad value for \"%s\"%s", k, strstr(k, "_at") ? ": " SK_HTTP_TIME_RULE : "");
            return SK_EINVAL;
        }
    }
    if (!has_id || !has_stock || !has_start || !has_end) {
        snprintf(msg, msglen, "id, stock, starts_at and ends_at are required");
        return SK_EINVAL;
    }
    if (has_control(d->title, strlen(d->title))) {
        snprintf(msg, msglen, "title must not contain control characters");
        return SK_EINVAL;
    }
    return sk_campaign_check(d, msg, msglen);
}

/* Creation is atomic with its answer (a 503 or 409 stores nothing, a 201
 * stores both). The database is written first: a campaign Redis knows but
 * the database does not could sell orders the pipeline must reject. So a
 * Redis that is down is found before the database is written, and a
 * pre-heat Redis did not take (refused, or never sent) is undone in the
 * database (sk_db_campaign_delete_unsold). Only an outcome unknown (Redis
 * may hold it) keeps the row, and says so. false: answered. */
static bool create_in_db(hreq *q, const sk_campaign *d)
{
    const char *why = NULL;
    if (sk_engine_redis_health(q->h->engine, &why) != SK_REDIS_OK || !sk_engine_ready(q->h->engine)) {
        sk__http_reply_error(q, 503, "unavailable", "Redis unavailable: campaign not created (nothing stored)");
        return false;
    }
    int rc = sk_db_campaign_create(q->h->o.db, d);
    if (rc == SK_EEXIST) sk__http_reply_error(q, 409, "exists", "campaign already exists");
    else if (rc) sk__http_reply_error(q, 503, "unavailable", "database error storing the campaign");
    q->stored_db = rc == 0;
    return rc == 0;
}

/* The pre-heat of a new campaign failed with err: the database row this
 * request wrote goes again, unless Redis may hold the campaign. */
static void created_fail(hreq *q, int err)
{
    if (q->stored_db && err != DLOCK_EUNKNOWN) {
        int rc = sk_db_campaign_delete_unsold(q->h->o.db, q->id);
        if (rc == SK_ECONFLICT) {
            sk__http_reply_error(q, 503, "unavailable", "campaign stored in the database but not in Redis, and "
                                                        "sold there meanwhile: pre-heat it once Redis is back");
            return;
        }
        if (rc && rc != SK_ENOTFOUND) {
            sk__http_reply_error(q, 503, "unavailable", "campaign stored in the database but not in Redis "
                                                        "(database error undoing it): pre-heat it or retry");
            return;
        }
    } else if (q->stored_db) {
        sk__http_reply_error(q, 503, "outcome_unknown", "campaign stored in the database; Redis did not answer: "
                                                        "GET it, or pre-heat it");
        return;
    }
    on_campaign(err, NULL, q);
}

static void on_created(int err, const sk_campaign_info *ci, void *arg)
{
    if (err) created_fail(arg, err);
    else on_campaign(0, ci, arg);
}

static void handle_campaign_create(hreq *q)
{
    if (!sk__http_admin_ok(q)) return;
    char msg[200];
    dlock__json_doc doc;
    sk_campaign d;
    int rc = read_json(q, &doc);
    if (rc < 0) return;
    if (rc == 1) {
        sk__http_reply_error(q, 400, "bad_request", "body must be a JSON object");
        return;
    }
    rc = parse_campaign(&doc, &d, msg, sizeof(msg));
    dlock__json_free(&doc);
    if (rc) {
        sk__http_reply_error(q, 400, "bad_request", msg);
        return;
    }
    snprintf(q->id, sizeof(q->id), "%s", d.id);
    rc = sk_engine_place_buckets(q->h->engine, &d);
    if (rc) {
        sk__http_reply_err_code(q, rc, "bucket placement");
        return;
    }
    if (q->h->o.db && !create_in_db(q, &d)) return;
    rc = sk_engine_campaign_heat(q->h->engine, &d, SK_HEAT_CREATE, on_created, q);
    if (rc) created_fail(q, rc);
}

static void on_preheat_def(int err, const sk_campaign_info *ci, void *arg)
{
    hreq *q = arg;
    if (err) {
        sk__http_reply_err_code(q, err, err == SK_ENOTFOUND ? "no such campaign" : "campaign");
        return;
    }
    int rc = sk_engine_campaign_heat(q->h->engine, &ci->def, q->mode, on_campaign, q);
    if (rc) sk__http_reply_err_code(q, rc, "pre-heat");
}

static void add_qty(const sk_order_row *row, void *ud) { *(int64_t *)ud += row->qty; }

/* The units the database path keeps apart from what Redis's buyers hold
 * (sk_engine_campaign_heat_apart): the reserve left, its orders not yet
 * mirrored into Redis (sold from the reserve, not yet among the buyers)
 * and a handback Redis has not applied yet (it adds them when it does).
 * Mirrored database-path orders are among the buyers: counted once. */
static int reserve_apart(sk_db *db, const char *id, int64_t *apart)
{
    sk_db_handback hb;
    int64_t unmirrored = 0;
    if (sk_db_handback_get(db, id, &hb) != 0) return SK_EDB;
    if (sk_db_orders_mirror_pending(db, id, INT32_MAX, add_qty, &unmirrored) < 0) return SK_EDB;
    *apart = hb.reserve_remaining + unmirrored + (hb.id[0] && !hb.done ? hb.units : 0);
    return 0;
}

/* The pre-heat query, read as a whole: at most one parameter, force,
 * exactly 1/true or 0/false. false: answered 400. */
static bool preheat_query(hreq *q, const char *query, bool *force)
{
    *force = false;
    if (!query || !*query) return true;
    static const char *const yes[] = {"force=1", "force=true"}, *const no[] = {"force=0", "force=false"};
    for (int i = 0; i < 2; i++) {
        if (strcmp(query, yes[i]) == 0) *force = true;
        if (*force || strcmp(query, no[i]) == 0) return true;
    }
    sk__http_reply_error(q, 400, "bad_request", "the only pre-heat parameter is force=1|true|0|false, once");
    return false;
}

static void handle_campaign_preheat(hreq *q, const char *query)
{
    if (!sk__http_admin_ok(q)) return;
    bool force;
    if (!preheat_query(q, query, &force)) return;
    q->mode = force ? SK_HEAT_FORCE : SK_HEAT_REHEAT;
    if (q->h->o.db) {
        sk_campaign c;
        int64_t apart = -1;
        int rc = sk_db_campaign_get(q->h->o.db, q->id, &c, NULL);
        if (rc == 0 && c.shards <= 1 && reserve_apart(q->h->o.db, q->id, &apart) != 0) rc = SK_EDB;
        if (rc == 0) {
            rc = sk_engine_campaign_heat_apart(q->h->engine, &c, q->mode, apart, on_campaign, q);
            if (rc) sk__http_reply_err_code(q, rc, "pre-heat");
            return;
        }
        if (rc != SK_ENOTFOUND) {
            sk__http_reply_error(q, 503, "unavailable", "database error reading the campaign");
            return;
        }
    }
    int rc = sk_engine_campaign_get(q->h->engine, q->id, on_preheat_def, q);
    if (rc) sk__http_reply_err_code(q, rc, "pre-heat");
}

static void handle_campaign_get(hreq *q)
{
    int rc = sk_engine_campaign_get(q->h->engine, q->id, on_campaign, q);
    if (rc) sk__http_reply_err_code(q, rc, "campaign");
}

/* ---- purchase ------------------------------------------------------------ */

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

static char *put_i64(char *p, int64_t v)
{
    char num[24], *e = num + sizeof(num), *d = e;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        *--d = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--d = '-';
    return put(p, d, (size_t)(e - d));
}

#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

/* An accepted purchase (or its replay): 201 when acknowledged, else 202
 * pending with the order's Location (docs/design/promise.md). Written
 * without printf or a heap buffer: every accepted purchase comes here. */
static void answer_accepted(hreq *q, const sk_purchase_result *r)
{
    char ref[SK_ORDER_REF_MAX];
    sk_order_ref_format(&q->h->order_key, r->order_id, ref);
    size_t rn = strlen(ref);
    /* q->id is a valid campaign id: [A-Za-z0-9_-], at most 64 */
    char body[320], *p = body; /* 218 bytes at most */
    if (r->pending) {
        char loc[16 + SK_ORDER_REF_MAX];
        *put(PUT_LIT(loc, "/v1/orders/"), ref, rn) = '\0';
        sk_hs_reply_header(q->req, "Location", loc);
        p = PUT_LIT(p, "{\"order_id\":\"");
        p = put(p, ref, rn);
        p = PUT_LIT(p, "\",\"status\":\"pending\"}\n");
        sk__http_reply_bytes(q, 202, "application/json", body, (size_t)(p - body));
        return;
    }
    p = PUT_LIT(p, "{\"order_id\":\"");
    p = put(p, ref, rn);
    p = PUT_LIT(p, "\",\"campaign\":\"");
    p = put(p, q->id, strlen(q->id));
    p = PUT_LIT(p, "\",\"quantity\":");
    p = put_i64(p, r->qty);
    p = PUT_LIT(p, ",\"remaining\":");
    p = put_i64(p, r->remaining);
    p = PUT_LIT(p, ",\"status\":\"accepted\"}\n");
    sk__http_reply_bytes(q, 201, "application/json", body, (size_t)(p - body));
}

/* Every purchase answer, from the outcome table (outcome.h). */
static void answer_purchase(hreq *q, const sk_purchase_result *r)
{
    sk_outcome_id id = sk_outcome_of_err(r->err, r->replay);
    /* a replay answers what the order is now, never a stale acceptance */
    if (id == SK_OUT_REPLAY && sk__http_order_replay(q, r->order_id)) return;
    if (!sk_outcome_get(id)->error) answer_accepted(q, r);
    else sk__http_reply_outcome(q, id, r->remaining, r->value);
}

static void on_purchase(const sk_purchase_result *r, void *arg) { answer_purchase(arg, r); }

/* {"quantity": n} into *qty; NULL, or why it is refused. */
static const char *parse_quantity(const dlock__json_doc *doc, int64_t *qty)
{
    const dlock__json_val *root = &doc->nodes[0];
    if (root->type != DLOCK__JSON_OBJECT) return "body must be a JSON object";
    for (int c = root->first; c >= 0; c = doc->nodes[c].next) {
        const dlock__json_val *v = &doc->nodes[c];
        if (!dlock__json_key_is(v, "quantity")) return "unknown field (only \"quantity\")";
        if (v->type != DLOCK__JSON_NUMBER || !v->is_int || v->i < 1 || v->i > 1000000)
            return "quantity must be a positive integer";
        *qty = v->i;
    }
    return NULL;
}

/* The body nearly every buyer sends, exactly {"quantity":N} (N 1..1000000
 * without a leading zero), read without the JSON parser; every other body
 * goes through the parser, so both give the same answer to any input. */
static bool quick_quantity(const char *b, size_t n, int64_t *qty)
{
    static const char pre[] = "{\"quantity\":";
    size_t pn = sizeof(pre) - 1;
    if (n < pn + 2 || n > pn + 8 || memcmp(b, pre, pn) != 0 || b[n - 1] != '}') return false;
    if (b[pn] < '1' || b[pn] > '9') return false;
    int64_t v = 0;
    for (size_t i = pn; i < n - 1; i++) {
        if (b[i] < '0' || b[i] > '9') return false;
        v = v * 10 + (b[i] - '0');
    }
    if (v > 1000000) return false;
    *qty = v;
    return true;
}

static void handle_purchase(hreq *q)
{
    if (!sk__http_user_ok(q, 400)) return;
    const char *idem = header(q, "Idempotency-Key");
    if (idem && !sk_valid_idem_key(idem)) {
        sk__http_reply_error(q, 400, "bad_request", "Idempotency-Key must be " SK_IDEM_KEY_RULE);
        return;
    }
    int64_t qty = 1;
    dlock__json_doc doc;
    size_t blen = 0;
    const char *body = sk_hs_req_body(q->req, &blen);
    int rc = quick_quantity(body, blen, &qty) ? 2 : read_json(q, &doc);
    if (rc < 0) return;
    if (rc == 0) {
        const char *bad = parse_quantity(&doc, &qty);
        dlock__json_free(&doc);
        if (bad) {
            sk__http_reply_error(q, 400, "bad_request", bad);
            return;
        }
    }
    char ip[SK_ADDR_MAX];
    if (!client_ip(q, ip)) return;
    bool degraded = sk_degraded_active(q->h->o.degraded);
    if (degraded && idem) {
        /* the database keeps no Idempotency-Keys: never risk a second order */
        sk__http_reply_outcome(q, SK_OUT_IDEM_DEGRADED, 0, 0);
        return;
    }
    if (degraded) rc = sk_degraded_purchase(q->h->o.degraded, q->id, q->user, qty, ip, on_purchase, q);
    else rc = sk_engine_purchase(q->h->engine, q->id, q->user, qty, idem, ip, on_purchase, q);
    if (rc == SK_EINVAL) {
        sk__http_reply_error(q, 400, "bad_request", "bad purchase");
    } else if (rc) {
        sk_purchase_result r = {.err = rc};
        answer_purchase(q, &r);
    }
}

/* ---- orders (the handlers are in http_orders.c) ---------------------------- */

/* ---- health, metrics, ping -------------------------------------------------- */

/* 200 while purchases can be decided (by Redis, or by the database path
 * while degraded); otherwise 503. Whenever Redis is not fine, "reason"
 * says why in one line (docs/seckill.md, "Health"). */
static void on_health(int err, void *arg)
{
    hreq *q = arg;
    dlock__buf b = {0};
    const char *why = "";
    sk_redis_health rh = sk_engine_redis_health(q->h->engine, &why);
    bool ready = sk_engine_ready(q->h->engine);
    /* degraded: purchases are still served (by the database path) */
    bool degraded = sk_degraded_active(q->h->o.degraded);
    bool redis_ok = !err && rh == SK_REDIS_OK;
    bool ok = (redis_ok && ready) || degraded;
    const char *redis = rh == SK_REDIS_WRITES_REFUSED && !err ? "refusing writes" : redis_ok ? "up" : "down";
    if (!*why && err) why = "redis did not answer PING";
    if (!*why && !ready) why = "no order-id worker lease yet";
    dlock__buf_printf(&b, "{\"status\":\"%s\",\"redis\":\"%s\",\"order_ids\":\"%s\",\"mode\":\"%s\"",
                      degraded ? "degraded" : ok ? "ok" : "unavailable", redis, ready ? "ready" : "no worker lease",
                      degraded ? "degraded" : "redis");
    /* the reason may name a Redis node: for the admin token only */
    if (*why && !(redis_ok && ready) && sk__http_is_admin(q)) {
        dlock__buf_append(&b, ",\"reason\":", 10);
        dlock__json_put_str(&b, why, strlen(why));
    }
    dlock__buf_append(&b, "}\n", 2);
    sk__http_reply_json(q, ok ? 200 : 503, &b);
}

static void handle_healthz(hreq *q)
{
    if (sk_engine_ping(q->h->engine, on_health, q) != 0) on_health(SK_EUNAVAIL, q);
}

static void handle_metrics(hreq *q)
{
    sk__http_snap *s = malloc(sizeof(*s));
    if (!s) {
        sk__http_reply_error(q, 500, "internal", "out of memory");
        return;
    }
    sk__http_gather(q->h, s); /* every loop of the process */
    dlock__buf b = {0};
    /* this request counts as in flight until answered; report the others */
    sk_metrics_render(&s->m, &s->st, s->inflight - 1, s->ready, sk__http_is_admin(q), &b);
    sk_metrics_render_degraded(&s->ds, &b);
    free(s);
    sk__http_reply_body(q, 200, "text/plain; version=0.0.4", &b);
}

static void handle_ping(hreq *q) { sk__http_reply_bytes(q, 200, "text/plain", "pong\n", 5); }

/* ---- routing ------------------------------------------------------------------ */

static void method_not_allowed(hreq *q, const char *allow)
{
    sk_hs_reply_header(q->req, "Allow", allow);
    sk__http_reply_error(q, 405, "method_not_allowed", "method not allowed on this path");
}

enum { MAX_SEGS = 5, SEG_LEN = 72 };

/* Splits path at '/' into at most MAX_SEGS segments; -1 when it has more
 * or a longer one. */
static int split_path(const char *p, char seg[MAX_SEGS][SEG_LEN])
{
    int n = 0;
    while (*p == '/') p++;
    while (*p) {
        size_t len = strcspn(p, "/");
        if (n == MAX_SEGS || len >= SEG_LEN) return -1;
        memcpy(seg[n], p, len);
        seg[n++][len] = '\0';
        p += len;
        if (*p == '/') p++;
    }
    return n;
}

/* /v1/campaigns[/{id}[/purchase|/preheat]] */
static void route_campaigns(hreq *q, char seg[MAX_SEGS][SEG_LEN], int n, const char *query, bool get,
                            bool post)
{
    if (n == 2) {
        q->route = SK_ROUTE_CAMPAIGN_CREATE;
        post ? handle_campaign_create(q) : method_not_allowed(q, "POST");
        return;
    }
    if (!sk_valid_campaign_id(seg[2]) || n > 4) {
        sk__http_reply_error(q, 404, "not_found", "no such campaign");
        return;
    }
    memcpy(q->id, seg[2], strlen(seg[2]) + 1); /* valid: at most 64 chars */
    if (n == 3) {
        q->route = SK_ROUTE_CAMPAIGN_GET;
        get ? handle_campaign_get(q) : method_not_allowed(q, "GET");
    } else if (strcmp(seg[3], "purchase") == 0) {
        q->route = SK_ROUTE_PURCHASE;
        post ? handle_purchase(q) : method_not_allowed(q, "POST");
    } else if (strcmp(seg[3], "preheat") == 0) {
        q->route = SK_ROUTE_CAMPAIGN_PREHEAT;
        post ? handle_campaign_preheat(q, query) : method_not_allowed(q, "POST");
    } else {
        sk__http_reply_error(q, 404, "not_found", "no such path");
    }
}

/* /v1/orders/{id}[/pay|/cancel]: id is the public "<id>-<tag>"
 * (order_ref.h), or a bare id that only the admin token may use. */
static void route_orders(hreq *q, char seg[MAX_SEGS][SEG_LEN], int n, const char *query, bool get, bool post)
{
    if (strlen(seg[2]) >= sizeof(q->ref) || !sk_order_ref_parse(&q->h->order_key, seg[2], &q->order_id, &q->ref_ok)) {
        sk__http_reply_error(q, 404, "not_found", "no such order");
        return;
    }
    memcpy(q->ref, seg[2], strlen(seg[2]) + 1);
    if (n == 3) {
        q->route = SK_ROUTE_ORDER_GET;
        get ? sk__http_order_get(q, query) : method_not_allowed(q, "GET");
    } else if (strcmp(seg[3], "pay") == 0) {
        q->route = SK_ROUTE_ORDER_PAY;
        post ? sk__http_order_pay(q) : method_not_allowed(q, "POST");
    } else if (strcmp(seg[3], "cancel") == 0) {
        q->route = SK_ROUTE_ORDER_CANCEL;
        post ? sk__http_order_cancel(q) : method_not_allowed(q, "POST");
    } else {
        sk__http_reply_error(q, 404, "not_found", "no such path");
    }
}

/* A route without a path parameter: GET only. */
static void route_plain(hreq *q, sk_route route, void (*handle)(hreq *q), bool get)
{
    q->route = route;
    get ? handle(q) : method_not_allowed(q, "GET");
}

static void dispatch(hreq *q, const char *path, const char *query)
{
    const char *m = sk_hs_req_method_name(q->req);
    bool get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0;
    char seg[MAX_SEGS][SEG_LEN];
    int n = split_path(path, seg);
    bool v1 = n >= 2 && strcmp(seg[0], "v1") == 0;
    if (n == 1 && strcmp(seg[0], "ping") == 0) route_plain(q, SK_ROUTE_PING, handle_ping, get);
    else if (n == 1 && strcmp(seg[0], "healthz") == 0) route_plain(q, SK_ROUTE_HEALTHZ, handle_healthz, get);
    else if (n == 1 && strcmp(seg[0], "metrics") == 0) route_plain(q, SK_ROUTE_METRICS, handle_metrics, get);
    else if (v1 && strcmp(seg[1], "campaigns") == 0) route_campaigns(q, seg, n, query, get, post);
    else if (v1 && (n == 3 || n == 4) && strcmp(seg[1], "orders") == 0) route_orders(q, seg, n, query, get, post);
    else sk__http_reply_error(q, 404, "not_found", "no such path");
}

static void on_request(sk_hs_req *req, void *arg)
{
    sk_http *h = arg;
    hreq *q = sk__http_hreq_new(h);
    if (!q) {
        sk_hs_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    q->h = h;
    q->req = req;
    q->route = SK_ROUTE_OTHER;
    q->t0_us = dlock__now_us();
    h->inflight++;
    if (sk__http_identity_unique(q)) dispatch(q, sk_hs_req_path(req), sk_hs_req_query(req));
}

/* ---- server ------------------------------------------------------------------- */

/* The key of public order ids: the order secret, else the admin token's,
 * else the user secret's (what every instance of a deployment shares),
 * else random: then only this process reads its ids (seckilld warns). */
static void order_key_init(sk_http *h)
{
    const char *o = h->o.order_secret;
    const char *secret = o && *o                                   ? o
                         : *h->auth.admin_token                    ? h->auth.admin_token
                         : *h->auth.user_secret                    ? h->auth.user_secret
                                                                   : NULL;
    unsigned char raw[SK_ORDER_KEY_LEN];
    if (secret) {
        sk_order_key_derive(secret, raw);
    } else if (RAND_bytes(raw, SK_ORDER_KEY_LEN) != 1) {
        /* no entropy source (never seen on Linux): the clock, through the KDF */
        char clock_text[64];
        snprintf(clock_text, sizeof(clock_text), "%lld %p", (long long)dlock__now_us(), (void *)h);
        sk_order_key_derive(clock_text, raw);
    }
    sk_order_key_set(&h->order_key, raw);
    OPENSSL_cleanse(raw, sizeof(raw));
}

int sk_http_new(struct event_base *base, sk_engine *engine, const sk_http_opts *opts,
                sk_http **out)
{
    *out = NULL;
    sk_http *h = calloc(1, sizeof(*h));
    if (!h) return DLOCK_ENOMEM;
    h->base = base;
    h->engine = engine;
    sk_http_opts_init(&h->o);
    if (opts) h->o = *opts;
    if (sk_auth_init(&h->auth, h->o.admin_token, h->o.user_secret, h->o.user_secret_previous,
                     h->o.user_signature_legacy) != 0) {
        free(h);
        return DLOCK_ENOMEM;
    }
    order_key_init(h);
    char terr[128];
    if (sk_trusted_parse(h->o.trusted_proxies, &h->trusted, terr, sizeof(terr)) != 0) {
        sk_auth_free(&h->auth);
        sk_order_key_clear(&h->order_key);
        free(h);
        return SK_EINVAL;
    }
    h->o.trusted_proxies = NULL;
    h->o.admin_token = h->o.user_secret = h->o.user_secret_previous = h->o.order_secret = NULL;
    sk_hs_opts ho;
    sk_hs_opts_init(&ho);
    ho.max_head = h->o.max_headers;
    ho.max_body = h->o.max_body;
    ho.idle_timeout_ms = h->o.idle_timeout_ms;
    ho.head_timeout_ms = h->o.head_timeout_ms;
    ho.body_timeout_ms = h->o.body_timeout_ms;
    ho.on_request = on_request;
    ho.ud = h;
    if (sk_hs_new(base, &ho, &h->hs) != 0 ||
        (h->o.group && sk__http_group_join(h) != 0)) {
        sk_http_free(h);
        return DLOCK_ENOMEM;
    }
    *out = h;
    return 0;
}

int sk_http_listen_fd(sk_http *h, int fd)
{
    sk_hs_listen_opts lo;
    sk_hs_listen_opts_init(&lo);
    if (h->o.max_connections) lo.max_conns = h->o.max_connections;
    lo.door = h->o.door;
    lo.max_conns_per_addr = h->o.max_conns_per_addr;
    lo.ipv6_prefix = h->o.ipv6_prefix;
    if (sk_hs_listen(h->hs, fd, &lo) != 0) {
        close(fd);
        return DLOCK_EIO;
    }
    return 0;
}

int sk_http_listen(sk_http *h, const char *addr, int port, bool reuseport, int *port_out,
                   char *err, size_t errlen)
{
    int fd = sk_hs_bind(addr, port, reuseport, port_out, err, errlen);
    if (fd < 0) return DLOCK_EIO;
    if (sk_http_listen_fd(h, fd) != 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: out of memory", addr ? addr : "*", port);
        return DLOCK_EIO;
    }
    return 0;
}

void sk_http_stop_accepting(sk_http *h) { sk_hs_stop_accepting(h->hs); }

void sk_http_leave_group(sk_http *h)
{
    if (h) sk__http_group_leave(h);
}

void sk_http_free(sk_http *h)
{
    if (!h) return;
    sk__http_group_leave(h);
    sk_hs_free(h->hs);
    while (h->free_q) {
        hreq *q = h->free_q;
        h->free_q = q->next_free;
        free(q);
    }
    sk_auth_free(&h->auth);
    sk_order_key_clear(&h->order_key);
    free(h);
}
