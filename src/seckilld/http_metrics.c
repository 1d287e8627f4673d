/* http_metrics.c: counters of http_metrics.h and their text rendering
 * (Prometheus exposition format 0.0.4). */
#include "http_metrics.h"

#include "outcome.h"

static const char *const route_names[SK_ROUTE_COUNT] = {
    "campaign_create", "campaign_preheat", "campaign_get", "purchase", "order_get",
    "order_pay", "healthz", "metrics", "ping", "other"};
static const int statuses[SK_METRIC_STATUSES - 1] = {200, 201, 400, 401, 403, 404, 405,
                                                     408, 409, 413, 429, 500, 503};
static const double lat_le[SK_METRIC_LAT_BUCKETS - 1] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};

static int status_index(int status)
{
    for (int i = 0; i < SK_METRIC_STATUSES - 1; i++)
        if (statuses[i] == status) return i;
    return SK_METRIC_STATUSES - 1;
}

void sk_metrics_observe(sk_http_metrics *m, sk_route r, int status, int64_t us)
{
    if ((int)r < 0 || r >= SK_ROUTE_COUNT) r = SK_ROUTE_OTHER;
    m->requests[r][status_index(status)]++;
    double s = (double)us / 1e6;
    int b = 0;
    while (b < SK_METRIC_LAT_BUCKETS - 1 && s > lat_le[b]) b++;
    m->lat[r][b]++;
    m->lat_count[r]++;
    m->lat_sum_s[r] += s;
}

void sk_metrics_render(const sk_http_metrics *m, const sk_engine_stats *st, size_t inflight,
                       int ready, dlock__buf *o)
{
    dlock__buf_printf(o, "# HELP seckill_http_requests_total HTTP requests by route and status.\n"
                         "# TYPE seckill_http_requests_total counter\n");
    for (int r = 0; r < SK_ROUTE_COUNT; r++)
        for (int s = 0; s < SK_METRIC_STATUSES; s++) {
            if (!m->requests[r][s]) continue;
            if (s < SK_METRIC_STATUSES - 1)
                dlock__buf_printf(o, "seckill_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                                  route_names[r], statuses[s], (unsigned long long)m->requests[r][s]);
            else
                dlock__buf_printf(o, "seckill_http_requests_total{route=\"%s\",status=\"other\"} %llu\n",
                                  route_names[r], (unsigned long long)m->requests[r][s]);
        }
    dlock__buf_printf(o, "# HELP seckill_http_request_duration_seconds Time from request to answer.\n"
                         "# TYPE seckill_http_request_duration_seconds histogram\n");
    for (int r = 0; r < SK_ROUTE_COUNT; r++) {
        if (!m->lat_count[r]) continue;
        uint64_t cum = 0;
        for (int b = 0; b < SK_METRIC_LAT_BUCKETS; b++) {
            cum += m->lat[r][b];
            if (b < SK_METRIC_LAT_BUCKETS - 1)
                dlock__buf_printf(o, "seckill_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                                  route_names[r], lat_le[b], (unsigned long long)cum);
            else
                dlock__buf_printf(o, "seckill_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                                  route_names[r], (unsigned long long)cum);
        }
        dlock__buf_printf(o, "seckill_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n",
                          route_names[r], m->lat_sum_s[r]);
        dlock__buf_printf(o, "seckill_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                          route_names[r], (unsigned long long)m->lat_count[r]);
    }
    dlock__buf_printf(o, "# HELP seckill_purchases_total Purchase decisions by outcome.\n"
                         "# TYPE seckill_purchases_total counter\n");
    for (int i = 0; i < SK_STAT_OUTCOMES; i++)
        dlock__buf_printf(o, "seckill_purchases_total{outcome=\"%s\"} %llu\n", sk_outcome_get(i)->label,
                          (unsigned long long)st->outcomes[i]);
    dlock__buf_printf(o, "# HELP seckill_purchase_batch_size Purchases per purchase-script call (coalescing).\n"
                         "# TYPE seckill_purchase_batch_size histogram\n");
    uint64_t cum = 0;
    for (int b = 0; b < SK_STAT_BATCH_BUCKETS; b++) {
        cum += st->batches[b];
        if (b < SK_STAT_BATCH_BUCKETS - 1)
            dlock__buf_printf(o, "seckill_purchase_batch_size_bucket{le=\"%lld\"} %llu\n",
                              (long long)sk_batch_bucket_le[b], (unsigned long long)cum);
        else
            dlock__buf_printf(o, "seckill_purchase_batch_size_bucket{le=\"+Inf\"} %llu\n",
                              (unsigned long long)cum);
    }
    dlock__buf_printf(o, "seckill_purchase_batch_size_sum %llu\nseckill_purchase_batch_size_count %llu\n",
                      (unsigned long long)st->batched_purchases, (unsigned long long)cum);
    dlock__buf_printf(o, "# HELP seckill_soldout_local_total Purchases answered sold-out from the local flag.\n"
                         "# TYPE seckill_soldout_local_total counter\nseckill_soldout_local_total %llu\n",
                      (unsigned long long)st->soldout_local);
    dlock__buf_printf(o, "# HELP seckill_redis_errors_total Redis commands that failed or timed out.\n"
                         "# TYPE seckill_redis_errors_total counter\nseckill_redis_errors_total %llu\n",
                      (unsigned long long)st->redis_errors);
    dlock__buf_printf(o, "# HELP seckill_redis_reconnects_total Redis connections opened after the first.\n"
                         "# TYPE seckill_redis_reconnects_total counter\nseckill_redis_reconnects_total %llu\n",
                      (unsigned long long)st->reconnects);
    dlock__buf_printf(o, "# HELP seckill_http_inflight Requests being processed.\n"
                         "# TYPE seckill_http_inflight gauge\nseckill_http_inflight %zu\n", inflight);
    dlock__buf_printf(o, "# HELP seckill_ready 1 when Redis is connected and an order-id worker id is leased.\n"
                         "# TYPE seckill_ready gauge\nseckill_ready %d\n", ready);
}

void sk_metrics_render_degraded(const sk_degraded_stats *ds, dlock__buf *o)
{
    dlock__buf_printf(o, "# HELP seckill_mode Purchase path: 0 Redis, 1 degraded (database path, Redis down).\n"
                         "# TYPE seckill_mode gauge\nseckill_mode %d\n", ds->mode);
    dlock__buf_printf(o, "# HELP seckill_degraded_entered_total Switches to the degraded database path.\n"
                         "# TYPE seckill_degraded_entered_total counter\nseckill_degraded_entered_total %llu\n",
                      (unsigned long long)ds->entered);
    dlock__buf_printf(o, "# HELP seckill_db_purchases_total Purchases decided by the database path, by outcome.\n"
                         "# TYPE seckill_db_purchases_total counter\n");
    for (int i = 0; i < SK_STAT_OUTCOMES; i++)
        dlock__buf_printf(o, "seckill_db_purchases_total{outcome=\"%s\"} %llu\n", sk_outcome_get(i)->label,
                          (unsigned long long)ds->outcomes[i]);
    dlock__buf_printf(o, "# HELP seckill_db_throttled_total Database-path purchases refused at once (queue full).\n"
                         "# TYPE seckill_db_throttled_total counter\nseckill_db_throttled_total %llu\n",
                      (unsigned long long)ds->throttled);
    dlock__buf_printf(o, "# HELP seckill_db_queued Database-path purchases queued, running or held.\n"
                         "# TYPE seckill_db_queued gauge\nseckill_db_queued %llu\n",
                      (unsigned long long)ds->queued);
}
