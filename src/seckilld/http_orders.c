/* http_orders.c: the order routes: GET /v1/orders/{id} (its state, from
 * the system of record first) and POST /v1/orders/{id}/pay. Invariant:
 * "confirmed" is said only from the database; without one seckilld can
 * see only Redis, so an order Redis holds is "pending" and one it does
 * not hold is "lost" (404), see docs/http-api.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "dlock/dlock.h"
#include "http_internal.h"
#include "ids.h"
#include "json.h"

/* The state a stored status means (docs/design/promise.md). */
static const char *db_state(const char *status)
{
    if (!strcmp(status, "persisted") || !strcmp(status, "paid") || !strcmp(status, "cancelled")) return "confirmed";
    if (!strcmp(status, "rejected")) return "lost";
    return "pending";
}

/* The order JSON; state NULL leaves it out (the pay answer). */
static void put_order(dlock__buf *b, uint64_t id, const char *campaign, const char *user,
                      int64_t qty, const char *state, const char *status, const char *reason)
{
    dlock__buf_printf(b, "{\"order_id\":\"%llu\",\"campaign\":", (unsigned long long)id);
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

static void on_order(int err, const sk_order_info *o, void *arg)
{
    hreq *q = arg;
    if (err == SK_ENOTFOUND) {
        /* neither the database (when there is one) nor the master holds it */
        dlock__buf b = {0};
        dlock__buf_printf(&b, "{\"error\":\"not_found\",\"message\":\"no such order\","
                              "\"order_id\":\"%llu\",\"state\":\"lost\"}\n",
                          (unsigned long long)q->order_id);
        sk__http_reply_json(q, 404, &b);
        return;
    }
    if (err) {
        sk__http_reply_err_code(q, err, "order");
        return;
    }
    dlock__buf b = {0};
    /* Redis holds it: decided, not (known to be) persisted */
    put_order(&b, o->order_id, o->campaign, o->user, o->qty, "pending", o->status[0] ? o->status : "accepted",
              NULL);
    sk__http_reply_json(q, 200, &b);
}

void sk__http_order_get(hreq *q, const char *query)
{
    if (q->h->o.db) {
        sk_order_row row;
        int rc = sk_db_order_get(q->h->o.db, q->order_id, &row);
        if (rc == 0) {
            dlock__buf b = {0};
            put_order(&b, row.order_id, row.campaign, row.user, row.qty, db_state(row.status), row.status,
                      row.reason);
            sk__http_reply_json(q, 200, &b);
            return;
        }
        /* not persisted yet (or a database hiccup): Redis knows accepted orders */
    }
    const char *campaign = NULL;
    char cbuf[65];
    if (query && strncmp(query, "campaign=", 9) == 0) {
        snprintf(cbuf, sizeof(cbuf), "%.*s", (int)strcspn(query + 9, "&"), query + 9);
        if (!sk_valid_campaign_id(cbuf)) {
            sk__http_reply_error(q, 400, "bad_request", "bad campaign parameter");
            return;
        }
        campaign = cbuf;
    }
    int rc = sk_engine_order_get(q->h->engine, q->order_id, campaign, on_order, q);
    if (rc) sk__http_reply_err_code(q, rc, "order");
}

void sk__http_order_pay(hreq *q)
{
    if (!sk__http_user_ok(q, 401)) return;
    if (!q->h->o.db) {
        sk__http_reply_error(q, 503, "unavailable", "payments need a database (--database-url)");
        return;
    }
    sk_order_row row;
    int rc = sk_db_order_pay(q->h->o.db, q->order_id, q->user, &row);
    switch (rc) {
    case 0: {
        dlock__buf b = {0};
        put_order(&b, row.order_id, row.campaign, row.user, row.qty, NULL, "paid", NULL);
        sk__http_reply_json(q, 200, &b);
        return;
    }
    case SK_ENOTFOUND: sk__http_reply_error(q, 404, "not_found", "no such order (or not persisted yet)"); return;
    case SK_EFORBIDDEN: sk__http_reply_error(q, 403, "forbidden", "not your order"); return;
    case SK_ECONFLICT:
        sk__http_reply_error(q, 409, strcmp(row.status, "rejected") == 0 ? "rejected" : "cancelled",
                    "order is cancelled or rejected");
        return;
    default: sk__http_reply_error(q, 503, "unavailable", "database error"); return;
    }
}

