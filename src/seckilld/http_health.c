/* http_health.c: the routes an operator's tools read: GET /healthz
 * (whether purchases can be decided, and by which path), GET /metrics
 * (every loop's figures, Prometheus text) and GET /ping.
 * Invariant: they read state and change none; a Redis node's name (in
 * "reason") is shown to the admin token only. */
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "http_internal.h"
#include "json.h"
#include "sk_err.h"
#include "util.h"

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

void sk__http_healthz(hreq *q)
{
    if (sk_engine_ping(q->h->engine, on_health, q) != 0) on_health(SK_EUNAVAIL, q);
}

void sk__http_metrics(hreq *q)
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

void sk__http_ping(hreq *q) { sk__http_reply_bytes(q, 200, "text/plain", "pong\n", 5); }
