/* http_orders.c: the order routes: GET /v1/orders/{id} (its state, from
 * the system of record first), POST /v1/orders/{id}/pay and .../cancel.
 * Invariants: an order is shown, paid or cancelled only for its buyer (the
 * identity it was decided under) or the admin token; anyone else gets the
 * answer of an order that does not exist, after the same look-ups (no
 * early way out). "confirmed" is said only from the database; without one
 * seckilld sees only Redis, so an order Redis holds is "pending" and one
 * it does not hold is "lost" (404), see docs/http-api.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "db.h"
#include "dlock/dlock.h"
#include "http_internal.h"
#include "json.h"
#include "lifecycle.h"
#include "rulebook.h"

/* The state a stored status means (docs/design/promise.md). */
static const char *db_state(const char *status)
{
    if (!strcmp(status, "persisted") || !strcmp(status, "paid")) return "confirmed";
    if (!strcmp(status, "cancelled")) return "cancelled";
    if (!strcmp(status, "rejected")) return "lost";
    return "pending";
}

/* Whether user a is user b, in a time that depends on neither. */
static bool same_user(const char *a, const char *b)
{
    char x[72] = {0}, y[72] = {0};
    snprintf(x, sizeof(x), "%s", a);
    snprintf(y, sizeof(y), "%s", b);
    return CRYPTO_memcmp(x, y, sizeof(x)) == 0;
}

/* May q see an order of user owner in campaign? The admin token, or the
 * buyer with the tag handed out for this id (and, when the buyer's
 * signature is bound to a campaign, an order of that campaign). */
static bool may_see(const hreq *q, const char *owner, const char *campaign)
{
    bool mine = same_user(owner, q->user);
    bool scope = !q->sig_campaign[0] || same_user(campaign, q->sig_campaign);
    return q->admin || (!q->deny && q->ref_ok && mine && scope);
}

/* The order JSON; state NULL leaves it out (the pay answer). The id is
 * the public one; the admin token also sees the internal id. */
static void put_order(const hreq *q, dlock__buf *b, uint64_t id, const char *campaign, const char *user,
                      int64_t qty, const char *state, const char *status, const char *reason)
{
    char ref[SK_ORDER_REF_MAX];
    sk_order_ref_format(&q->h->order_key, id, ref);
    dlock__buf_printf(b, "{\"order_id\":\"%s\",", ref);
    if (q->admin) dlock__buf_printf(b, "\"internal_id\":\"%llu\",", (unsigned long long)id);
    dlock__buf_append(b, "\"campaign\":", 11);
    dlock__json_put_str(b, campaign, strlen(campaign));
    dlock__buf_append(b, ",\"user\":", 8);
    dlock__json_put_str(b, user, strlen(user));
    dlock__buf_printf(b, ",\"quantity\":%lld,\"status\":", (long long)qty);
    dlock__json_put_str(b, status, strlen(status));
    if (state) dlock__buf_printf(b, ",\"state\":\"%s\"", state);
    if (reason && *reason) {
        dlock__buf_append(b, ",\"reason\":", 10);
        dlock__json_put_str(b, reason, strlen(reason));
    }
    dlock__buf_append(b, "}\n", 2);
}

/* The one answer for an order that is not there or not the caller's. */
static void order_not_found(hreq *q)
{
    static const char lost[] = "{\"error\":\"not_found\",\"message\":\"no such order\",\"state\":\"lost\"}\n";
    /* a look-up narrowed to one campaign saw only that campaign */
    static const char other[] = "{\"error\":\"not_found\",\"message\":\"no such order in this campaign\"}\n";
    dlock__buf b = {0};
    if (q->in_campaign) dlock__buf_append(&b, other, sizeof(other) - 1);
    else dlock__buf_append(&b, lost, sizeof(lost) - 1);
    sk__http_reply_json(q, 404, &b);
}

static void on_order(int err, const sk_order_info *o, void *arg)
{
    hreq *q = arg;
    /* neither the database (when there is one) nor the master holds it,
     * or it is not the caller's */
    if (err == SK_ENOTFOUND || (!err && !may_see(q, o->user, o->campaign))) {
        order_not_found(q);
        return;
    }
    if (err) {
        sk__http_reply_err_code(q, err, "order");
        return;
    }
    dlock__buf b = {0};
    /* Redis holds it: decided, not (known to be) persisted */
    put_order(q, &b, o->order_id, o->campaign, o->user, o->qty, "pending", o->status[0] ? o->status : "accepted",
              NULL);
    sk__http_reply_json(q, 200, &b);
}

/* A replayed Idempotency-Key whose order has moved on since (cancelled,
 * expired, rejected, paid): the answer is the order's current state, the
 * document GET returns, with 200 (no new success is claimed: 201 and 202
 * speak of an acceptance). false: nothing answered (no database, the
 * order not stored yet or still as accepted, or a database error: the
 * replay's own answer stands). */
bool sk__http_order_replay(hreq *q, uint64_t order_id)
{
    sk_order_row row;
    if (!q->h->o.db || sk_db_order_get(q->h->o.db, order_id, &row) != 0) return false;
    if (!strcmp(row.status, "persisted") || !strcmp(row.status, "pending")) return false;
    dlock__buf b = {0};
    put_order(q, &b, row.order_id, row.campaign, row.user, row.qty, db_state(row.status), row.status, row.reason);
    sk__http_reply_json(q, 200, &b);
    return true;
}

/* Who asks: the admin token, or a buyer's identity (401 when missing or
 * badly signed: that says nothing about any order). false: answered. */
static bool order_caller(hreq *q)
{
    q->admin = sk__http_is_admin(q);
    if (!q->admin && !sk__http_user_ok(q, 401)) return false;
    q->deny = !q->admin && !q->ref_ok;
    return true;
}

/* The order query as a whole: nothing, or campaign=<id> once, into cbuf
 * (65 bytes; "" for none). false: answered 400. */
static bool order_query(hreq *q, const char *query, char *cbuf)
{
    cbuf[0] = '\0';
    if (!query || !*query) return true;
    size_t n = strlen(query);
    if (strncmp(query, "campaign=", 9) != 0 || n - 9 >= 65) {
        sk__http_reply_error(q, 400, "bad_request", "the only order parameter is campaign=<id>, once");
        return false;
    }
    memcpy(cbuf, query + 9, n - 8);
    if (!sk_valid_campaign_id(cbuf)) {
        sk__http_reply_error(q, 400, "bad_request", "bad campaign parameter");
        return false;
    }
    q->in_campaign = true;
    return true;
}

void sk__http_order_get(hreq *q, const char *query)
{
    char cbuf[65];
    if (!order_caller(q) || !order_query(q, query, cbuf)) return;
    if (q->h->o.db) {
        sk_order_row row;
        int rc = sk_db_order_get(q->h->o.db, q->order_id, &row);
        bool mine = rc == 0 && may_see(q, row.user, row.campaign);
        if (mine && (!cbuf[0] || strcmp(row.campaign, cbuf) == 0)) {
            dlock__buf b = {0};
            put_order(q, &b, row.order_id, row.campaign, row.user, row.qty, db_state(row.status), row.status,
                      row.reason);
            sk__http_reply_json(q, 200, &b);
            return;
        }
        /* not the caller's: Redis is asked all the same (as for an id the
         * database lacks), then the answer is the nonexistent order's */
        if (rc == 0 && !mine) q->deny = true;
        /* the caller's, but another campaign was named: that campaign's
         * master is asked, as for an id the database lacks (it does not
         * hold it: 404 "no such order in this campaign"). Not persisted
         * yet (or a database hiccup): Redis knows accepted orders. */
    }
    int rc = sk_engine_order_get(q->h->engine, q->order_id, cbuf[0] ? cbuf : NULL, on_order, q);
    if (rc) sk__http_reply_err_code(q, rc, "order");
}

/* The order row for pay/cancel, read for everyone alike: 0 when q may act
 * on it (row filled), SK_ENOTFOUND when it is absent or not q's, SK_EDB. */
static int order_row_for(hreq *q, sk_order_row *row)
{
    int rc = sk_db_order_get(q->h->o.db, q->order_id, row);
    if (rc == SK_ENOTFOUND || (rc == 0 && !may_see(q, row->user, row->campaign))) return SK_ENOTFOUND;
    return rc ? SK_EDB : 0;
}

/* pay and cancel: the caller, a database, the row. false: answered. */
static bool order_action_start(hreq *q, const char *what, sk_order_row *row)
{
    if (!order_caller(q)) return false;
    if (!q->h->o.db) {
        char msg[96];
        snprintf(msg, sizeof(msg), "%s needs a database (--database-url)", what);
        sk__http_reply_error(q, 503, "unavailable", msg);
        return false;
    }
    int rc = order_row_for(q, row);
    if (rc == SK_ENOTFOUND) order_not_found(q);
    else if (rc) sk__http_reply_error(q, 503, "unavailable", "database error");
    return rc == 0;
}

void sk__http_order_pay(hreq *q)
{
    sk_order_row row;
    if (!order_action_start(q, "paying", &row)) return;
    int rc = sk_db_order_pay(q->h->o.db, q->order_id, row.user, &row);
    switch (rc) {
    case 0: {
        dlock__buf b = {0};
        put_order(q, &b, row.order_id, row.campaign, row.user, row.qty, NULL, "paid", NULL);
        sk__http_reply_json(q, 200, &b);
        return;
    }
    case SK_ENOTFOUND:
    case SK_EFORBIDDEN: order_not_found(q); return;
    case SK_ECONFLICT:
        sk__http_reply_error(q, 409, strcmp(row.status, "rejected") == 0 ? "rejected" : "cancelled",
                    "order is cancelled or rejected");
        return;
    default: sk__http_reply_error(q, 503, "unavailable", "database error"); return;
    }
}

/* POST /v1/orders/{id}/cancel: before payment, by its buyer (or the admin
 * token), through the one cancellation path (lifecycle.h): the database
 * gives the units back at once; the persister's next sweep gives them
 * back to the order's bucket in Redis (the release is once-only there). A
 * cancelled order answers the same 200 however often it is cancelled. */
void sk__http_order_cancel(hreq *q)
{
    sk_order_row row;
    if (!order_action_start(q, "cancelling", &row)) return;
    int rc = sk_order_cancel(q->h->o.db, NULL, q->order_id, q->admin ? "cancelled by admin" : "cancelled by buyer");
    if (rc == 0 || rc == SK_ECONFLICT) rc = sk_db_order_get(q->h->o.db, q->order_id, &row);
    if (rc == SK_ENOTFOUND) {
        order_not_found(q);
        return;
    }
    if (rc) {
        sk__http_reply_error(q, 503, "unavailable", "database error");
        return;
    }
    if (strcmp(row.status, "cancelled") == 0) {
        dlock__buf b = {0};
        put_order(q, &b, row.order_id, row.campaign, row.user, row.qty, "cancelled", "cancelled", row.reason);
        sk__http_reply_json(q, 200, &b);
        return;
    }
    const char *code = strcmp(row.status, "paid") == 0 ? "paid" : strcmp(row.status, "rejected") == 0 ? "rejected" : "conflict";
    sk__http_reply_error(q, 409, code,
                         !strcmp(code, "paid") ? "a paid order cannot be cancelled"
                         : !strcmp(code, "rejected") ? "order was rejected"
                                                    : "order is not confirmed yet (pending); retry later");
}
