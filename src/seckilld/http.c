/* http.c: seckilld's router and server (see http.h and docs/http-api.md):
 * which handler serves a path (/v1/campaigns... in http_campaigns.c, its
 * /purchase in http_purchase.c, /v1/orders... in http_orders.c, /healthz,
 * /metrics and /ping in http_health.c), and the server's lifecycle.
 * Invariant: every request gets exactly one answer, always through
 * http_request.c, which also counts it in the metrics; requests waiting for
 * Redis hold an hreq that the answer frees. A client that disconnects
 * while its request waits is fine: the HTTP layer (hserver.h) keeps the
 * request until it is answered. */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "dlock/dlock.h"
#include "hserver.h"
#include "http_internal.h"
#include "http_metrics.h"
#include "rulebook.h"
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
        post ? sk__http_campaign_create(q) : method_not_allowed(q, "POST");
        return;
    }
    if (!sk_valid_campaign_id(seg[2]) || n > 4) {
        sk__http_reply_error(q, 404, "not_found", "no such campaign");
        return;
    }
    memcpy(q->id, seg[2], strlen(seg[2]) + 1); /* valid: at most 64 chars */
    if (n == 3) {
        q->route = SK_ROUTE_CAMPAIGN_GET;
        get ? sk__http_campaign_get(q) : method_not_allowed(q, "GET");
    } else if (strcmp(seg[3], "purchase") == 0) {
        q->route = SK_ROUTE_PURCHASE;
        post ? sk__http_purchase(q) : method_not_allowed(q, "POST");
    } else if (strcmp(seg[3], "preheat") == 0) {
        q->route = SK_ROUTE_CAMPAIGN_PREHEAT;
        post ? sk__http_campaign_preheat(q, query) : method_not_allowed(q, "POST");
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
    if (n == 1 && strcmp(seg[0], "ping") == 0) route_plain(q, SK_ROUTE_PING, sk__http_ping, get);
    else if (n == 1 && strcmp(seg[0], "healthz") == 0) route_plain(q, SK_ROUTE_HEALTHZ, sk__http_healthz, get);
    else if (n == 1 && strcmp(seg[0], "metrics") == 0) route_plain(q, SK_ROUTE_METRICS, sk__http_metrics, get);
    else if (v1 && strcmp(seg[1], "campaigns") == 0) route_campaigns(q, seg, n, query, get, post);
    else if (v1 && (n == 3 || n == 4) && strcmp(seg[1], "orders") == 0) route_orders(q, seg, n, query, get, post);
    else sk__http_reply_error(q, 404, "not_found", "no such path");
}

static void on_request(sk_hs_req *req, void *arg)
{
    sk_http *h = arg;
    hreq *q = sk__http_hreq_new(h);
    if (!q) {
        sk__http_reply_no_record(req);
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
