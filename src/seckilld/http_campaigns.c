/* http_campaigns.c: the campaign routes: POST /v1/campaigns (create),
 * GET /v1/campaigns/{id}, POST /v1/campaigns/{id}/preheat, with the
 * reading of a campaign's JSON definition.
 * Invariant: creation is atomic with its answer (create_in_db): a 503 or
 * 409 stores nothing, a 201 stores the campaign in the database and Redis. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "dlock/dlock.h"
#include "http_internal.h"
#include "json.h"
#include "sk_err.h"
#include "util.h"

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

void sk__http_campaign_create(hreq *q)
{
    if (!sk__http_admin_ok(q)) return;
    char msg[200];
    dlock__json_doc doc;
    sk_campaign d;
    int rc = sk__http_read_json(q, &doc);
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

void sk__http_campaign_preheat(hreq *q, const char *query)
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

void sk__http_campaign_get(hreq *q)
{
    int rc = sk_engine_campaign_get(q->h->engine, q->id, on_campaign, q);
    if (rc) sk__http_reply_err_code(q, rc, "campaign");
}
