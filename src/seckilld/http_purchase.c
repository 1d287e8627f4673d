/* http_purchase.c: the purchase route, POST /v1/campaigns/{id}/purchase:
 * reads what the buyer sent (identity, Idempotency-Key, {"quantity": n},
 * client address), checks it once against the one table of limits
 * (rulebook.h), hands it to the one path that decides purchases now (Redis, or
 * the database while Redis is away) and answers from the outcome table
 * (rulebook.h) through http_request.c.
 * Invariants: the body is read once; the common {"quantity":N} without the
 * JSON parser, every other body with it, and both give the same answer;
 * every purchase goes to exactly one path (each keeps the same check for
 * its direct callers: tools, tests). */
#include <stdint.h>
#include <string.h>

#include "http_internal.h"
#include "json.h"
#include "relay.h"
#include "rulebook.h"
#include "sk_err.h"

/* Every purchase answer, from the outcome table (rulebook.h). */
static void answer_purchase(hreq *q, const sk_purchase_result *r)
{
    sk_outcome_id id = sk_outcome_of_err(r->err, r->replay);
    /* a replay answers what the order is now, never a stale acceptance */
    if (id == SK_OUT_REPLAY && sk__http_order_replay(q, r->order_id)) return;
    if (!sk_outcome_get(id)->error) sk__http_reply_accepted(q, r);
    else sk__http_reply_outcome(q, id, r->remaining, r->value);
}

static void on_purchase(const sk_purchase_result *r, void *arg) { answer_purchase(arg, r); }

/* {"quantity": n} into *qty (its bounds are the entry point's: rulebook.h);
 * NULL, or why it is refused. */
static const char *parse_quantity(const dlock__json_doc *doc, int64_t *qty)
{
    const dlock__json_val *root = &doc->nodes[0];
    if (root->type != DLOCK__JSON_OBJECT) return "body must be a JSON object";
    for (int c = root->first; c >= 0; c = doc->nodes[c].next) {
        const dlock__json_val *v = &doc->nodes[c];
        if (!dlock__json_key_is(v, "quantity")) return "unknown field (only \"quantity\")";
        if (v->type != DLOCK__JSON_NUMBER || !v->is_int) return "quantity must be " SK_QTY_RULE;
        *qty = v->i;
    }
    return NULL;
}

/* The body nearly every buyer sends, exactly {"quantity":N} (N of 1 to 7
 * digits without a leading zero), read without the JSON parser; every
 * other body goes through the parser, so both give the same answer to any
 * input. */
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
    *qty = v;
    return true;
}

/* The quantity the body asks for (1 when empty); false when answered 400. */
static bool read_quantity(hreq *q, int64_t *qty)
{
    size_t blen = 0;
    const char *body = sk_hs_req_body(q->req, &blen);
    if (quick_quantity(body, blen, qty)) return true;
    dlock__json_doc doc;
    int rc = sk__http_read_json(q, &doc);
    if (rc < 0) return false;
    if (rc == 1) return true;
    const char *bad = parse_quantity(&doc, qty);
    dlock__json_free(&doc);
    if (bad) sk__http_reply_error(q, 400, "bad_request", bad);
    return bad == NULL;
}

/* The client address (client_addr.h), grouped as the rate limit keys it;
 * false when a forwarded entry is not an address (answered 400). */
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

/* What a buyer asks: qty units of campaign as user; idem the
 * Idempotency-Key (NULL: none); ip the client's address for the rate
 * limit. */
typedef struct purchase_req {
    const char *campaign;
    const char *user;
    int64_t qty;
    const char *idem;
    const char *ip;
} purchase_req;

/* On Redis: the process's one coalescer (relay.h), or e's own while no
 * loop serves it. */
static int on_redis(sk_engine *e, sk_relay_door *relay, const purchase_req *r, sk_purchase_cb cb, void *arg)
{
    if (relay) {
        int rc = sk_relay_purchase(relay, r->campaign, r->user, r->qty, r->idem, r->ip, cb, arg);
        if (rc != SK_EUNAVAIL) return rc;
    }
    return sk_engine_purchase(e, r->campaign, r->user, r->qty, r->idem, r->ip, cb, arg);
}

/* The one entry point: checks r once and decides it on Redis, or on the
 * database path while d is active (d NULL: Redis only). Returns 0 when cb
 * will run (later, from the loop), or an answer now, cb never called:
 * SK_EINVAL with *why_out set (r breaks a rule of rulebook.h), SK_EIDEMWAIT (a
 * keyed purchase while the database decides: it keeps no
 * Idempotency-Keys, so none risks a second order), or what
 * sk_engine_purchase / sk_degraded_purchase return at once. */
static int purchase(sk_engine *e, sk_relay_door *relay, sk_degraded *d, const purchase_req *r,
                    sk_purchase_cb cb, void *arg, const char **why_out)
{
    const char *why = sk_purchase_invalid(r->campaign, r->user, r->qty, r->idem);
    *why_out = why;
    if (why) return SK_EINVAL;
    if (!sk_degraded_active(d)) return on_redis(e, relay, r, cb, arg);
    if (r->idem) return SK_EIDEMWAIT;
    return sk_degraded_purchase(d, r->campaign, r->user, r->qty, r->ip, cb, arg);
}

void sk__http_purchase(hreq *q)
{
    if (!sk__http_user_ok(q, 400)) return;
    purchase_req r = {.campaign = q->id, .user = q->user, .qty = 1,
                         .idem = sk_hs_req_header(q->req, "Idempotency-Key")};
    char ip[SK_ADDR_MAX];
    if (!read_quantity(q, &r.qty) || !client_ip(q, ip)) return;
    r.ip = ip;
    const char *why = NULL;
    int rc = purchase(q->h->engine, q->h->o.relay, q->h->o.degraded, &r, on_purchase, q, &why);
    if (rc == SK_EINVAL) {
        sk__http_reply_error(q, 400, "bad_request", why ? why : "bad purchase");
    } else if (rc) {
        sk_purchase_result res = {.err = rc};
        answer_purchase(q, &res);
    }
}
