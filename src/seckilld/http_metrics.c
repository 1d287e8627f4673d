/* http_metrics.c: counters of http_metrics.h and their text rendering
 * (Prometheus exposition format 0.0.4). */
#include "http_metrics.h"

#include <stdio.h>

#include "rulebook.h"

static const char *const route_names[SK_ROUTE_COUNT] = {
    "campaign_create", "campaign_preheat", "campaign_get", "purchase", "order_get",
    "order_pay", "order_cancel", "healthz", "metrics", "ping", "other"};
static const int statuses[SK_METRIC_STATUSES - 1] = {200, 201, 202, 400, 401, 403, 404, 405,
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

/* One scalar series with its HELP and TYPE lines. */
static void put_scalar(dlock__buf *o, const char *type, const char *name, const char *help, unsigned long long v)
{
    dlock__buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, v);
}

/* A counter by purchase outcome (the labels of rulebook.h). */
static void put_outcomes(dlock__buf *o, const char *name, const char *help, const uint64_t *counts)
{
    dlock__buf_printf(o, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int i = 0; i < SK_STAT_OUTCOMES; i++)
        dlock__buf_printf(o, "%s{outcome=\"%s\"} %llu\n", name, sk_outcome_get(i)->label,
                          (unsigned long long)counts[i]);
}

static void put_requests(const sk_http_metrics *m, dlock__buf *o)
{
    dlock__buf_printf(o, "# HELP seckill_http_requests_total HTTP requests by route and status.\n"
                         "# TYPE seckill_http_requests_total counter\n");
    for (int r = 0; r < SK_ROUTE_COUNT; r++)
        for (int s = 0; s < SK_METRIC_STATUSES; s++) {
            if (!m->requests[r][s]) continue;
            char st[16];
            if (s < SK_METRIC_STATUSES - 1) snprintf(st, sizeof(st), "%d", statuses[s]);
            else snprintf(st, sizeof(st), "other");
            dlock__buf_printf(o, "seckill_http_requests_total{route=\"%s\",status=\"%s\"} %llu\n",
                              route_names[r], st, (unsigned long long)m->requests[r][s]);
        }
}

/* The _bucket lines of histogram name: counts[0..n) cumulated, bucket b
 * bounded by le[b] ("%g"), the last by +Inf; labels ("" or `route="x",`)
 * go before le. Returns the total. The one histogram writer. */
static uint64_t put_buckets(dlock__buf *o, const char *name, const char *labels, const uint64_t *counts, int n,
                            const double *le)
{
    uint64_t cum = 0;
    for (int b = 0; b < n; b++) {
        cum += counts[b];
        char bound[24];
        if (b < n - 1) snprintf(bound, sizeof(bound), "%g", le[b]);
        else snprintf(bound, sizeof(bound), "+Inf");
        dlock__buf_printf(o, "%s_bucket{%sle=\"%s\"} %llu\n", name, labels, bound, (unsigned long long)cum);
    }
    return cum;
}

static void put_latency(const sk_http_metrics *m, dlock__buf *o)
{
    dlock__buf_printf(o, "# HELP seckill_http_request_duration_seconds Time from request to answer.\n"
                         "# TYPE seckill_http_request_duration_seconds histogram\n");
    for (int r = 0; r < SK_ROUTE_COUNT; r++) {
        if (!m->lat_count[r]) continue;
        char labels[64];
        snprintf(labels, sizeof(labels), "route=\"%s\",", route_names[r]);
        put_buckets(o, "seckill_http_request_duration_seconds", labels, m->lat[r], SK_METRIC_LAT_BUCKETS, lat_le);
        dlock__buf_printf(o, "seckill_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n",
                          route_names[r], m->lat_sum_s[r]);
        dlock__buf_printf(o, "seckill_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                          route_names[r], (unsigned long long)m->lat_count[r]);
    }
}

static void put_batches(const sk_engine_stats *st, dlock__buf *o)
{
    dlock__buf_printf(o, "# HELP seckill_purchase_batch_size Purchases per purchase-script call (coalescing).\n"
                         "# TYPE seckill_purchase_batch_size histogram\n");
    double le[SK_STAT_BATCH_BUCKETS];
    for (int b = 0; b < SK_STAT_BATCH_BUCKETS; b++) le[b] = (double)sk_batch_bucket_le[b];
    uint64_t cum = put_buckets(o, "seckill_purchase_batch_size", "", st->batches, SK_STAT_BATCH_BUCKETS, le);
    dlock__buf_printf(o, "seckill_purchase_batch_size_sum %llu\nseckill_purchase_batch_size_count %llu\n",
                      (unsigned long long)st->batched_purchases, (unsigned long long)cum);
}

/* Transfers between the buckets of sharded campaigns, and how long
 * purchases that found their home bucket short waited for their answer. */
static void put_transfers(const sk_engine_xfer_stats *x, dlock__buf *o)
{
    put_scalar(o, "counter", "seckill_transfers_total",
               "Transfers that took units from one bucket of a sharded campaign for another.", x->takes);
    put_scalar(o, "counter", "seckill_transfer_units_total", "Units given to a bucket by a transfer.", x->units);
    put_scalar(o, "counter", "seckill_transfers_recovered_total",
               "Journal entries left by a stopped mover that this instance gave and finished.", x->recovered);
    put_scalar(o, "counter", "seckill_transfer_probes_total",
               "Take or probe calls that moved nothing (an empty source, the sold-out proof).", x->probes);
    put_scalar(o, "counter", "seckill_transfer_script_calls_total", "transfer.lua calls of every mode.",
               x->script_calls);
    put_scalar(o, "counter", "seckill_soldout_proofs_total",
               "Double collects that proved a sharded campaign had nothing outside the buyer's bucket.",
               x->soldout_checks);
    dlock__buf_printf(o, "# HELP seckill_stranded_wait_seconds Wait of purchases that found their home bucket "
                         "short, from then to their answer.\n# TYPE seckill_stranded_wait_seconds histogram\n");
    double le[SK_STAT_WAIT_BUCKETS];
    for (int b = 0; b < SK_STAT_WAIT_BUCKETS; b++) le[b] = (double)sk_wait_bucket_le_ms[b] / 1000.0;
    uint64_t cum = put_buckets(o, "seckill_stranded_wait_seconds", "", x->waits, SK_STAT_WAIT_BUCKETS, le);
    dlock__buf_printf(o, "seckill_stranded_wait_seconds_sum %.3f\nseckill_stranded_wait_seconds_count %llu\n",
                      (double)x->wait_ms_sum / 1000.0, (unsigned long long)cum);
}

/* What buyers were told about acceptances, and what acknowledged them. */
static void put_promises(const sk_engine_stats *st, bool internal, dlock__buf *o)
{
    dlock__buf_printf(o, "# HELP seckill_answers_total Accepted purchases (and replays) by answer: 201 "
                         "acknowledged, 202 pending.\n# TYPE seckill_answers_total counter\n"
                         "seckill_answers_total{answer=\"201\"} %llu\nseckill_answers_total{answer=\"202\"} %llu\n",
                      (unsigned long long)st->answered_acked, (unsigned long long)st->answered_pending);
    put_scalar(o, "counter", "seckill_answers_confirmed_total",
               "Replays answered 201 without an acknowledgement because the database holds the order "
               "(counted in seckill_answers_total 201).",
               st->answered_confirmed);
    put_scalar(o, "counter", "seckill_ack_waits_total", "WAITs sent behind purchase batches.", st->ack_waits);
    put_scalar(o, "counter", "seckill_ack_failures_total",
               "WAITs that reported fewer replicas than replica-acks (or failed): the batch answered 202.",
               st->ack_failures);
    put_scalar(o, "counter", "seckill_ack_skipped_total",
               "Batches sent no WAIT because fewer than replica-acks replicas were in sync: answered 202 at once.",
               st->ack_skipped);
    dlock__buf_printf(o, "# HELP seckill_ack_replicas_in_sync Replicas known online and in sync on the master "
                         "(probed every 250 ms, lowered by a short WAIT; -1 unknown).\n"
                         "# TYPE seckill_ack_replicas_in_sync gauge\nseckill_ack_replicas_in_sync %d\n",
                      st->ack_in_sync);
    put_scalar(o, "gauge", "seckill_ack_mode",
               "How acceptances are acknowledged now: 0 never (202), 1 fsync before reply, 2 WAIT.",
               (unsigned long long)st->ack_mode);
    put_scalar(o, "gauge", "seckill_ack_replicas", "The replicas WAIT waits for.", (unsigned long long)st->ack_replicas);
    put_scalar(o, "gauge", "seckill_worker_lease_held", "1 while order ids may be issued (lease fresh).",
               (unsigned long long)st->lease_held);
    if (internal)
        dlock__buf_printf(o, "# HELP seckill_worker_id The leased order-id worker id (-1 none).\n"
                             "# TYPE seckill_worker_id gauge\nseckill_worker_id %d\n", st->worker_id);
    put_scalar(o, "counter", "seckill_worker_lease_lost_total",
               "Leases given up (not renewed in time) or found taken by another instance.", st->lease_lost);
}

/* Calls per Redis node: on a Cluster, which masters decide. */
static void put_nodes(const sk_engine_stats *st, dlock__buf *o)
{
    dlock__buf_printf(o, "# HELP seckill_redis_node_calls_total Purchase/campaign scripts and WAITs answered, by "
                         "the Redis node that served them.\n# TYPE seckill_redis_node_calls_total counter\n");
    for (int i = 0; i < st->nnodes; i++)
        dlock__buf_printf(o, "seckill_redis_node_calls_total{node=\"%s\"} %llu\n", st->nodes[i].node,
                          (unsigned long long)st->nodes[i].calls);
}

void sk_metrics_render(const sk_http_metrics *m, const sk_engine_stats *st, size_t inflight,
                       int ready, bool internal, dlock__buf *o)
{
    put_requests(m, o);
    put_latency(m, o);
    put_outcomes(o, "seckill_purchases_total", "Purchase decisions by outcome.", st->outcomes);
    put_batches(st, o);
    put_promises(st, internal, o);
    put_transfers(&st->xfer, o);
    if (internal) put_nodes(st, o);
    put_scalar(o, "counter", "seckill_soldout_local_total", "Purchases answered sold-out from the local flag.",
               st->soldout_local);
    put_scalar(o, "counter", "seckill_redis_errors_total", "Redis commands that failed or timed out.",
               st->redis_errors);
    put_scalar(o, "counter", "seckill_redis_reconnects_total", "Redis connections opened after the first.",
               st->reconnects);
    put_scalar(o, "gauge", "seckill_http_inflight", "Requests being processed.", inflight);
    put_scalar(o, "gauge", "seckill_ready", "1 when Redis is connected and an order-id worker id is leased.",
               (unsigned long long)ready);
}

void sk_metrics_render_degraded(const sk_degraded_stats *ds, dlock__buf *o)
{
    put_scalar(o, "gauge", "seckill_mode", "Purchase path: 0 Redis, 1 degraded (database path, Redis down).",
               (unsigned long long)ds->mode);
    put_scalar(o, "counter", "seckill_degraded_entered_total", "Switches to the degraded database path.",
               ds->entered);
    put_outcomes(o, "seckill_db_purchases_total", "Purchases decided by the database path, by outcome.",
                 ds->outcomes);
    put_scalar(o, "counter", "seckill_db_throttled_total",
               "Database-path purchases refused at once (queue full).", ds->throttled);
    put_scalar(o, "gauge", "seckill_db_queued", "Database-path purchases queued, running or held.", ds->queued);
}
