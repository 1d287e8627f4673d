/* http_auth.c: the identity of a request, read from its headers through
 * auth.h. Invariants: one identity per request (a repeated identity or
 * Idempotency-Key header is refused); a refusal says what was wrong with
 * the credential, never anything about the resource asked for. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "http_internal.h"
#include "ids.h"

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
