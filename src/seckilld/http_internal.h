/* http_internal.h: what http.c and http_orders.c share: the server and
 * request structs and the answering helpers. Every answer goes through
 * sk__http_reply_json / sk__http_reply_error (which free the request). */
#ifndef SK_HTTP_INTERNAL_H
#define SK_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "client_addr.h"
#include "degraded.h"
#include "hserver.h"
#include "http.h"
#include "http_metrics.h"
#include "order_ref.h"
#include "util.h"

struct sk_http {
    struct event_base *base;
    sk_engine *engine;
    sk_hs *hs; /* the HTTP layer (hserver.h) */
    sk_http_opts o;
    char *admin_token;
    char *user_secret;
    sk_trusted trusted; /* proxies (client_addr.h) */
    unsigned char order_key[SK_ORDER_KEY_LEN]; /* public order ids (order_ref.h) */
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
    sk_heat_mode mode;
} hreq;

/* Answers body (JSON) with status and frees it and q. */
void sk__http_reply_json(hreq *q, int status, dlock__buf *body);
/* Answers {"error": code, "message": msg}. */
void sk__http_reply_error(hreq *q, int status, const char *code, const char *msg);
/* Maps an engine/database error to status + code. */
void sk__http_reply_err_code(hreq *q, int err, const char *what);
/* X-User-Id (and X-User-Signature when a secret is set) into q->user;
 * false when it has answered already. */
bool sk__http_user_ok(hreq *q, int missing_status);
/* Whether the request carries the right admin token (answers nothing). */
bool sk__http_is_admin(hreq *q);

/* http_orders.c: POST /v1/orders/{id}/cancel too. */
void sk__http_order_cancel(hreq *q);

/* http_orders.c: GET /v1/orders/{id}, POST /v1/orders/{id}/pay. */
void sk__http_order_get(hreq *q, const char *query);
void sk__http_order_pay(hreq *q);

#endif
