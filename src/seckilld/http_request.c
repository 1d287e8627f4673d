/* http_request.c: a request as the routes see it: its record (recycled),
 * who it speaks for (read from its identity headers, whose credentials
 * auth.h checks), and how it is answered: the one writer every answer goes
 * through (sk__http_reply_bytes; JSON by dlock__buf and json.h, the
 * accepted purchase's by hand).
 * Invariants: each request is answered exactly once, here, and counted in
 * the metrics as it is; an identity header appears at most once (a second
 * one is refused before any route reads the first); an outcome of the
 * outcome table (rulebook.h) is answered from the table, whichever route
 * produced it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common_err.h"
#include "dlock/dlock.h"
#include "http_internal.h"
#include "json.h"
#include "rulebook.h"
#include "util.h"

/* Request records are recycled (a purchase then allocates none here). */
#define HREQ_FREE_MAX 256

hreq *sk__http_hreq_new(sk_http *h)
{
    hreq *q = h->free_q;
    if (!q) return calloc(1, sizeof(*q));
    h->free_q = q->next_free;
    h->nfree_q--;
    memset(q, 0, sizeof(*q));
    return q;
}

void sk__http_reply_no_record(sk_hs_req *req) { sk_hs_reply_error(req, 500, "internal", "out of memory"); }

static void hreq_free(sk_http *h, hreq *q)
{
    if (h->nfree_q >= HREQ_FREE_MAX) {
        free(q);
        return;
    }
    q->next_free = h->free_q;
    h->free_q = q;
    h->nfree_q++;
}

/* The layer adds Connection: close while draining and counts the answer
 * as unflushed until it is written (graceful shutdown waits for that).
 * Counted before it is written: a client that has its answer finds it in
 * /metrics, whichever thread serves that. */
void sk__http_reply_bytes(hreq *q, int status, const char *ctype, const char *body, size_t len)
{
    sk_http *h = q->h;
    static const char json[] = "Content-Type: application/json\r\nCache-Control: no-store\r\n";
    if (strcmp(ctype, "application/json") == 0) { /* nearly every answer: one copy */
        sk_hs_reply_header_lines(q->req, json, sizeof(json) - 1);
    } else {
        sk_hs_reply_header(q->req, "Content-Type", ctype);
        sk_hs_reply_header(q->req, "Cache-Control", "no-store");
    }
    sk_metrics_observe(&h->m, q->route, status, dlock__now_us() - q->t0_us);
    sk_hs_reply(q->req, status, body, len);
    h->inflight--;
    hreq_free(h, q);
}

void sk__http_reply_body(hreq *q, int status, const char *ctype, dlock__buf *body)
{
    if (body->oom) {
        dlock__buf_free(body);
        dlock__buf_printf(body, "{\"error\":\"internal\",\"message\":\"out of memory\"}");
        status = 500;
        ctype = "application/json";
    }
    sk__http_reply_bytes(q, status, ctype, body->data, body->data ? body->len : 0);
    dlock__buf_free(body);
}

void sk__http_reply_json(hreq *q, int status, dlock__buf *body)
{
    sk__http_reply_body(q, status, "application/json", body);
}

void sk__http_reply_error(hreq *q, int status, const char *code, const char *msg)
{
    dlock__buf b = {0};
    sk_hs_error_body(&b, code, msg);
    sk__http_reply_json(q, status, &b);
}

void sk__http_reply_outcome(hreq *q, int id, int64_t remaining, int64_t value)
{
    const sk_outcome *o = sk_outcome_get(id);
    char text[160], ra[24];
    int64_t v = o->field == SK_FIELD_REMAINING ? remaining : value;
    if (o->field != SK_FIELD_NONE && v >= o->detail_min)
        snprintf(text, sizeof(text), "%s%lld%s", o->detail_pre, (long long)v, o->detail_post);
    else
        snprintf(text, sizeof(text), "%s", o->message);
    int64_t retry_s = o->retry_after_s;
    if (o->http_status == 429) {
        retry_s = (value + 999) / 1000;
        if (retry_s < 1) retry_s = 1;
    }
    if (retry_s > 0) {
        snprintf(ra, sizeof(ra), "%lld", (long long)retry_s);
        sk_hs_reply_header(q->req, "Retry-After", ra);
    }
    sk__http_reply_error(q, o->http_status, o->error ? o->error : "internal", text);
}

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

static char *put_i64(char *p, int64_t v)
{
    char num[24], *e = num + sizeof(num), *d = dlock__digits(e, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    if (v < 0) *--d = '-';
    return put(p, d, (size_t)(e - d));
}

#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

/* Written without printf or a heap buffer: every accepted purchase comes
 * here (docs/design/promise.md says what 201 and 202 promise). */
void sk__http_reply_accepted(hreq *q, const sk_purchase_result *r)
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

/* Whether err is an outcome the table names (not decided, or unknown). */
static bool is_table_outcome(int err)
{
    return err == SK_EUNAVAIL || sk_outcome_of_err(err, false) != SK_OUT_UNAVAILABLE;
}

void sk__http_reply_err_code(hreq *q, int err, const char *what)
{
    char msg[160];
    switch (err) {
    case SK_EINVAL: sk__http_reply_error(q, 400, "bad_request", what); return;
    case SK_ENOTFOUND: sk__http_reply_error(q, 404, "not_found", what); return;
    case SK_EEXIST: sk__http_reply_error(q, 409, "exists", what); return;
    case SK_ECONFLICT:
    case SK_ELIVE: sk__http_reply_error(q, 409, "conflict", what); return;
    /* someone else's order is not found: its existence is not theirs to learn */
    case SK_EFORBIDDEN: sk__http_reply_error(q, 404, "not_found", what); return;
    default: break;
    }
    if (is_table_outcome(err)) {
        sk__http_reply_outcome(q, sk_outcome_of_err(err, false), 0, 0);
        return;
    }
    snprintf(msg, sizeof(msg), "%s: %s", what, sk_strerror(err));
    sk__http_reply_error(q, 503, "unavailable", msg);
}

/* ---- a request's identity, from its headers --------------------------- */

bool sk__http_is_admin(hreq *q)
{
    return sk_auth_is_admin(&q->h->auth, sk_hs_req_header(q->req, "Authorization"));
}

bool sk__http_admin_ok(hreq *q)
{
    if (!*q->h->auth.admin_token) {
        sk__http_reply_error(q, 401, "unauthorized", "admin API disabled: no admin token configured");
        return false;
    }
    if (!sk__http_is_admin(q)) {
        sk__http_reply_error(q, 401, "unauthorized", "missing or wrong admin token (Authorization: Bearer ...)");
        return false;
    }
    return true;
}

/* The answer to a signature that is not accepted. */
static void refuse_sig(hreq *q, sk_sig_result r)
{
    switch (r) {
    case SK_SIG_MISSING: sk__http_reply_error(q, 401, "unauthorized", "missing X-User-Signature"); return;
    case SK_SIG_MALFORMED:
        sk__http_reply_error(q, 401, "signature_malformed",
                             "X-User-Signature must be v1=<hex>;exp=<unix seconds>[;c=<campaign>]");
        return;
    case SK_SIG_LEGACY:
        sk__http_reply_error(q, 401, "signature_legacy",
                             "the unexpiring X-User-Signature form is not accepted: send v1=<hex>;exp=<unix seconds>");
        return;
    case SK_SIG_EXPIRED: sk__http_reply_error(q, 401, "signature_expired", "X-User-Signature has expired"); return;
    case SK_SIG_CAMPAIGN:
        sk__http_reply_error(q, 401, "signature_campaign", "X-User-Signature is bound to another campaign");
        return;
    default: sk__http_reply_error(q, 401, "unauthorized", "bad X-User-Signature"); return;
    }
}

/* X-User-Id (and X-User-Signature when a secret is set) into q->user; a
 * campaign-bound signature's campaign into q->sig_campaign. */
bool sk__http_user_ok(hreq *q, int missing_status)
{
    const char *u = sk_hs_req_header(q->req, "X-User-Id");
    if (!u) {
        sk__http_reply_error(q, missing_status, missing_status == 401 ? "unauthorized" : "bad_request",
                             "missing X-User-Id header");
        return false;
    }
    if (!sk_valid_user_id(u)) {
        sk__http_reply_error(q, 400, "bad_request", "X-User-Id must be " SK_USER_ID_RULE);
        return false;
    }
    memcpy(q->user, u, strlen(u) + 1); /* valid: at most 64 chars */
    if (!*q->h->auth.user_secret) return true;
    const char *campaign = q->route == SK_ROUTE_PURCHASE ? q->id : NULL;
    sk_sig_result r = sk_auth_check_sig(&q->h->auth, u, sk_hs_req_header(q->req, "X-User-Signature"), campaign,
                                        (int64_t)time(NULL), q->sig_campaign);
    if (r == SK_SIG_OK) return true;
    refuse_sig(q, r);
    return false;
}

bool sk__http_identity_unique(hreq *q)
{
    /* an Idempotency-Key names the order: two would let a proxy and this
     * server (first one wins) disagree on which order a retry is */
    static const char *const names[] = {"X-User-Id", "X-User-Signature", "Authorization", "Idempotency-Key"};
    const char *v[2];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (sk_hs_req_headers(q->req, names[i], v, 2) > 1) {
            char msg[96];
            snprintf(msg, sizeof(msg), "more than one %s header", names[i]);
            sk__http_reply_error(q, 400, "bad_request", msg);
            return false;
        }
    return true;
}
