/* http_metrics.h: seckilld's Prometheus counters: requests by route and
 * status, a latency histogram per route, plus the engine's figures
 * (purchase outcomes, coalesced batch sizes, Redis errors, reconnects,
 * 201/202 answers, WAIT acknowledgements, the worker lease).
 * Plain counters owned by one event loop (one process): no locking. */
#ifndef SK_HTTP_METRICS_H
#define SK_HTTP_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "degraded.h"
#include "engine.h"
#include "util.h"

typedef enum sk_route {
    SK_ROUTE_CAMPAIGN_CREATE = 0,
    SK_ROUTE_CAMPAIGN_PREHEAT,
    SK_ROUTE_CAMPAIGN_GET,
    SK_ROUTE_PURCHASE,
    SK_ROUTE_ORDER_GET,
    SK_ROUTE_ORDER_PAY,
    SK_ROUTE_ORDER_CANCEL,
    SK_ROUTE_HEALTHZ,
    SK_ROUTE_METRICS,
    SK_ROUTE_PING,
    SK_ROUTE_OTHER,
    SK_ROUTE_COUNT
} sk_route;

enum { SK_METRIC_STATUSES = 15, SK_METRIC_LAT_BUCKETS = 14 };

typedef struct sk_http_metrics {
    uint64_t requests[SK_ROUTE_COUNT][SK_METRIC_STATUSES];
    uint64_t lat[SK_ROUTE_COUNT][SK_METRIC_LAT_BUCKETS]; /* cumulative at render time */
    uint64_t lat_count[SK_ROUTE_COUNT];
    double lat_sum_s[SK_ROUTE_COUNT];
} sk_http_metrics;

void sk_metrics_observe(sk_http_metrics *m, sk_route r, int status, int64_t us);
/* Appends the Prometheus text exposition of m, st and the gauges; the
 * figures that name the deployment's insides (the order-id worker id,
 * the Redis node addresses) only when internal (an admin-token scrape). */
void sk_metrics_render(const sk_http_metrics *m, const sk_engine_stats *st, size_t inflight,
                       int ready, bool internal, dlock__buf *out);
/* Appends the degraded-mode figures (mode gauge, database-path outcomes);
 * all zero when seckilld runs without a database. */
void sk_metrics_render_degraded(const sk_degraded_stats *ds, dlock__buf *out);

#endif
