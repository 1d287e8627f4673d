/* http_internal.h: what the files of seckilld's front end share: the
 * server and request structs, a request's identity and answers
 * (http_request.c), the JSON body (http_body.c) and the handlers of each
 * resource: http_campaigns.c, http_purchase.c, http_orders.c,
 * http_health.c. Every answer goes through http_request.c (which frees the
 * request); the router (http.c) calls the handlers, which never call back
 * into http.c. */
#ifndef SK_HTTP_INTERNAL_H
#define SK_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "client_addr.h"
#include "degraded.h"
#include "hserver.h"
#include "http.h"
#include "http_metrics.h"
#include "json.h"
#include "order_ref.h"
#include "util.h"

struct sk_http {
    struct event_base *base;
    sk_engine *engine;
    sk_hs *hs; /* the HTTP layer (hserver.h) */
    sk_http_opts o;
    sk_auth auth; /* admin token and user secrets (auth.h) */
    sk_trusted trusted; /* proxies (client_addr.h) */
    sk_order_key order_key; /* public order ids (order_ref.h) */
    size_t inflight;
    sk_http_metrics m;
    struct hreq *free_q; /* recycled request records */
    size_t nfree_q;
    struct member *member; /* in o.group (http_group.c) */
};

/* One loop's figures for /metrics (http_group.c sums them). */
typedef struct sk__http_snap {
    sk_http_metrics m;
    sk_engine_stats st;
    sk_degraded_stats ds;
    size_t inflight;
    int ready;
} sk__http_snap;

/* http_group.c: joins h->o.group (0, DLOCK_ENOMEM, DLOCK_EIO); leaves it,
 * answering what other loops asked (before the engine goes; idempotent);
 * this loop's figures, summed with every other member's when in a group. */
int sk__http_group_join(sk_http *h);
void sk__http_group_leave(sk_http *h);
void sk__http_gather(sk_http *h, sk__http_snap *out);

typedef struct hreq {
    sk_http *h;
    struct hreq *next_free;
    sk_hs_req *req;
    sk_route route;
    int64_t t0_us;
    char id[65];
    char user[65];
    uint64_t order_id;
    char ref[SK_ORDER_REF_MAX]; /* the order id as the client gave it (syntax checked) */
    bool ref_ok;                /* its tag is ours (a bare id: false) */
    bool admin;                 /* the request carries the admin token */
    bool deny;                  /* answer this order's 404 whatever the look-up finds */
    bool in_campaign;           /* ?campaign= narrowed the look-up: a miss is not "lost" */
    char sig_campaign[65];      /* the campaign a signed identity is bound to ("": none) */
    sk_heat_mode mode;
    bool stored_db;             /* campaign creation: this request wrote the database row */
} hreq;

/* http_request.c: a fresh request record (NULL: out of memory); the
 * answers, each of which frees q: bytes as they are; body (freed too);
 * body as JSON; {"error": code, "message": msg}; the outcome table's
 * answer to outcome id (rulebook.h) with its detail fields; an
 * engine/database error as status + code (an outcome of the table is
 * answered from the table, whatever route met it). */
hreq *sk__http_hreq_new(sk_http *h);
/* The one answer without a request record (none could be made): 500, not
 * counted in the metrics (there is no route to count it under). */
void sk__http_reply_no_record(sk_hs_req *req);
void sk__http_reply_bytes(hreq *q, int status, const char *ctype, const char *body, size_t len);
void sk__http_reply_body(hreq *q, int status, const char *ctype, dlock__buf *body);
void sk__http_reply_json(hreq *q, int status, dlock__buf *body);
void sk__http_reply_error(hreq *q, int status, const char *code, const char *msg);
void sk__http_reply_outcome(hreq *q, int id, int64_t remaining, int64_t value);
void sk__http_reply_err_code(hreq *q, int err, const char *what);
/* An accepted purchase (or its replay): 201 when acknowledged, else 202
 * pending with the order's Location. */
void sk__http_reply_accepted(hreq *q, const sk_purchase_result *r);

/* http_request.c, who the request speaks for (the credentials checked
 * by auth.h): whether it carries the admin token (answers nothing); the
 * same, answering 401 when not (false); X-User-Id (and X-User-Signature
 * when a secret is set) into q->user, false when it has answered
 * (missing_status when the header is missing, 400 or 401); false after
 * answering 400 when an identity header is repeated. */
bool sk__http_is_admin(hreq *q);
bool sk__http_admin_ok(hreq *q);
bool sk__http_user_ok(hreq *q, int missing_status);
bool sk__http_identity_unique(hreq *q);

/* http_body.c: the JSON body parsed into doc: 0, 1 for an empty body (doc
 * untouched), or -1 when it has answered already (400 malformed, 500). */
int sk__http_read_json(hreq *q, dlock__json_doc *doc);

/* http_campaigns.c: POST /v1/campaigns, GET /v1/campaigns/{id},
 * POST /v1/campaigns/{id}/preheat (query: force=...). */
void sk__http_campaign_create(hreq *q);
void sk__http_campaign_get(hreq *q);
void sk__http_campaign_preheat(hreq *q, const char *query);

/* http_purchase.c: POST /v1/campaigns/{id}/purchase. */
void sk__http_purchase(hreq *q);

/* http_health.c: GET /healthz, /metrics, /ping. */
void sk__http_healthz(hreq *q);
void sk__http_metrics(hreq *q);
void sk__http_ping(hreq *q);


/* http_orders.c: POST /v1/orders/{id}/cancel too. */
void sk__http_order_cancel(hreq *q);

/* http_orders.c: GET /v1/orders/{id}, POST /v1/orders/{id}/pay. */
void sk__http_order_get(hreq *q, const char *query);
void sk__http_order_pay(hreq *q);
/* http_orders.c: a replayed acceptance whose order has moved on since
 * (cancelled, rejected, paid) answered with its current state (200, the
 * GET document); false when the replay's own answer stands. */
bool sk__http_order_replay(hreq *q, uint64_t order_id);

#endif
