/* seckill: admin tool of the order pipeline: reconcile Redis with the
 * database, list campaigns, show / pay / cancel an order, run migrations,
 * run the barrier after a change of master by hand, show a campaign's
 * buckets (a sharded campaign's, docs/seckill.md).
 * Exit status: 0 ok (reconcile: consistent), 1 differences or refused,
 * 2 usage error, 3 cannot reach Redis or the database, 4 (reconcile)
 * broken promises found. */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "barrier.h"
#include "buckets.h"
#include "dlock/dlock.h"
#include "envfile.h"
#include "layout.h"
#include "lifecycle.h"
#include "options.h"
#include "persist.h"
#include "redis_connect.h"
#include "reconcile.h"
#include "seckill_urls.h"
#include "sk_err.h"
#include "text.h"
#include "url.h"
#include "json.h"
#include "util.h"

typedef struct cli {
    const char *redis_url, *database_url, *campaign, *reason;
    const char *env_file; /* read by opt_env_file_apply before the rest */
    int64_t wait_ms; /* reconcile: wait this long for the streams to drain first */
    const char *bucket_arg;
    int bucket; /* barrier: this bucket only (-1: every bucket) */
    bool json, help, version;
    const char *pos[4];
    int npos;
    sk_db *db;
    dlock__conn *rc;
} cli;

static void usage(FILE *f)
{
    fprintf(f, "usage: seckill [--env-file FILE] [--redis-url URL] [--database-url URL] COMMAND [args]\n"
               "  reconcile [--campaign ID] [--json] [--wait DUR]\n"
               "                                       compare Redis with the database; exit 0 only if consistent,\n"
               "                                       4 when a Redis-path order was refused by the guard (a broken promise);\n"
               "                                       --wait: first wait up to DUR for the streams to drain\n"
               "  metrics [--campaign ID]              backlog, dead letters, differences, stock, orders as\n"
               "                                       Prometheus text (for node_exporter's textfile collector)\n"
               "  barrier --campaign ID [--bucket J] [--wait DUR]\n"
               "                                       run the barrier after a change of master now: stop sales,\n"
               "                                       wait (default 30s) for the persisters to drain the stream,\n"
               "                                       seal the old timeline, mirror the database into Redis, open;\n"
               "                                       a sharded campaign: bucket J only, else each bucket in turn\n"
               "  campaigns [--json]                   list campaigns (database) with remaining stock\n"
               "  campaigns show ID [--json]           one campaign: its definition and each bucket's tag, master,\n"
               "                                       stock, buyers, transfer journal (units in transit), stream\n"
               "  order ORDER_ID [--json]              show an order from the database\n"
               "  pay ORDER_ID USER                    mark a persisted order paid\n"
               "  cancel ORDER_ID [--reason TEXT]      cancel a persisted order; stock returns once\n"
               "  migrate                              create / migrate the schema, print its version\n"
               "  --help, --version\n"
               "Durations: 250ms, 1.5s, 30s, 2m (a bare number is milliseconds, deprecated).\n"
               "--env-file FILE: first set the variables of FILE (NAME=VALUE lines, the units'\n"
               "EnvironmentFile=, e.g. /etc/dlock/seckill.env), then read the environment.\n"
               "URLs: --redis-url redis://, unix://, redis-sentinel:// or redis-cluster:// (env REDIS_URL,\n"
               "default redis://127.0.0.1:6379); --database-url sqlite:///abs/path.db, a file path or\n"
               "postgresql://... (env DATABASE_URL, required).\n");
}

static int open_db(cli *c)
{
    char err[512];
    if (!c->database_url || !*c->database_url) {
        fprintf(stderr, "seckill: no database: set --database-url or DATABASE_URL (the units' is in "
                        "/etc/dlock/seckill.env: --env-file /etc/dlock/seckill.env)\n");
        return 2;
    }
    int rc = sk_db_open(c->database_url, &c->db, err, sizeof(err));
    if (rc) fprintf(stderr, "seckill: database: %s\n", err);
    return rc ? (rc == SK_EINVAL ? 2 : 3) : 0;
}

static int open_redis(cli *c)
{
    char err[512];
    int rc = sk_err_from_common(dlock__conn_open_url(c->redis_url, 5000, &c->rc, err, sizeof(err)));
    if (rc) fprintf(stderr, "seckill: redis: %s\n", err);
    return rc ? (rc == DLOCK_EURL ? 2 : 3) : 0;
}

typedef struct id_list {
    char (*ids)[65];
    size_t n, cap;
} id_list;

static void id_add(id_list *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->ids[i], id) == 0) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char(*n)[65] = realloc(l->ids, cap * sizeof(*n));
        if (!n) return;
        l->ids = n;
        l->cap = cap;
    }
    snprintf(l->ids[l->n++], 65, "%s", id);
}

static void camp_id_cb(const sk_campaign *c, int64_t remaining, void *ud)
{
    (void)remaining;
    id_add(ud, c->id);
}

/* Waits until every listed stream has nothing pending or unread (or the
 * deadline passes: reconcile then reports the backlog). */
static void wait_drained(cli *c, const id_list *l)
{
    int64_t end = dlock__now_ms() + c->wait_ms;
    for (;;) {
        bool drained = true;
        for (size_t i = 0; i < l->n && drained; i++) { /* every bucket's stream (persist.h) */
            int64_t pending = 0, lag = 0;
            drained = sk_persist_backlog(c->rc, l->ids[i], &pending, &lag) == 0 && pending == 0 && lag == 0;
        }
        if (drained || dlock__now_ms() >= end) return;
        dlock__sleep_ms(50);
    }
}

/* The campaigns to look at: --campaign, else every one the database or
 * Redis (seckill:campaigns) knows. 0 or 3 (database unreachable). */
static int collect_campaigns(cli *c, id_list *l)
{
    if (c->campaign) {
        id_add(l, c->campaign);
        return 0;
    }
    if (sk_db_campaign_list(c->db, camp_id_cb, l)) {
        fprintf(stderr, "seckill: %s\n", sk_db_errmsg(c->db));
        return 3;
    }
    const char *argv[] = {"SMEMBERS", "seckill:campaigns"}; /* campaigns only Redis knows */
    dlock__reply *r = NULL;
    if (dlock__conn_cmd(c->rc, 2, argv, NULL, &r) == 0 && dlock__reply_kind(r) == DLOCK__R_ARRAY)
        for (size_t i = 0; i < dlock__reply_count(r); i++) {
            const char *id = dlock__reply_str(dlock__reply_at(r, i), NULL);
            if (id && sk_db_id_valid(id)) id_add(l, id);
        }
    dlock__reply_free(r);
    return 0;
}

/* Prometheus text of the pipeline's state, for node_exporter's textfile
 * collector (docs/ops/README.md): backlog, dead letters, differences,
 * stock, orders, broken promises per campaign, and the persisters'
 * counters of {c:<id>}:pipeline (finalised tentative orders, handbacks,
 * barriers). Exit 0, or 3 when a store is unreachable. */
static const char METRICS_HELP[] =
    "# HELP seckill_pipeline_backlog Accepted orders not yet in the database (stream lag + pending).\n"
    "# TYPE seckill_pipeline_backlog gauge\n"
    "# HELP seckill_pipeline_dead_letters Entries moved to the dead-letter stream.\n"
    "# TYPE seckill_pipeline_dead_letters gauge\n"
    "# HELP seckill_reconcile_differences Differences between Redis and the database.\n"
    "# TYPE seckill_reconcile_differences gauge\n"
    "# HELP seckill_stock_remaining Remaining stock as each store sees it.\n"
    "# TYPE seckill_stock_remaining gauge\n"
    "# HELP seckill_db_orders Orders in the database by status.\n"
    "# TYPE seckill_db_orders gauge\n"
    "# HELP seckill_broken_promises Redis-path orders the database guard refused (their buyers may have been told 201).\n"
    "# TYPE seckill_broken_promises gauge\n"
    "# HELP seckill_stale_timeline_refusals Orders of an old master's timeline refused after a barrier.\n"
    "# TYPE seckill_stale_timeline_refusals gauge\n"
    "# HELP seckill_db_reserve_remaining Units of the database reserve not sold or handed back.\n"
    "# TYPE seckill_db_reserve_remaining gauge\n"
    "# HELP seckill_pipeline_entries_total Stream entries the persisters settled, by result.\n"
    "# TYPE seckill_pipeline_entries_total counter\n"
    "# HELP seckill_tentative_finalised_total Tentative (database-path) orders finalised, by result.\n"
    "# TYPE seckill_tentative_finalised_total counter\n"
    "# HELP seckill_reserve_handbacks_total Reserve handbacks applied to Redis.\n"
    "# TYPE seckill_reserve_handbacks_total counter\n"
    "# HELP seckill_barrier_runs_total Barriers after a change of master completed.\n"
    "# TYPE seckill_barrier_runs_total counter\n"
    "# HELP seckill_barrier_seconds_total Time spent in completed barriers.\n"
    "# TYPE seckill_barrier_seconds_total counter\n"
    "# HELP seckill_barrier_last_seconds Duration of the last completed barrier.\n"
    "# TYPE seckill_barrier_last_seconds gauge\n"
    "# HELP seckill_barrier_running_seconds Age of the barrier running now (0: none; sales stopped meanwhile).\n"
    "# TYPE seckill_barrier_running_seconds gauge\n"
    "# HELP seckill_campaign_shards Buckets the campaign's Redis stock is split over (K).\n"
    "# TYPE seckill_campaign_shards gauge\n"
    "# HELP seckill_bucket_remaining Units left in one bucket's stock in Redis.\n"
    "# TYPE seckill_bucket_remaining gauge\n"
    "# HELP seckill_bucket_buyer_units Units the buyers whose home is the bucket hold in Redis.\n"
    "# TYPE seckill_bucket_buyer_units gauge\n"
    "# HELP seckill_bucket_backlog Accepted orders of the bucket's stream not yet in the database.\n"
    "# TYPE seckill_bucket_backlog gauge\n"
    "# HELP seckill_bucket_journal_entries Transfers leaving the bucket not finished yet (its journal).\n"
    "# TYPE seckill_bucket_journal_entries gauge\n"
    "# HELP seckill_bucket_transfers_received Transfers given to the bucket (its once-only gate).\n"
    "# TYPE seckill_bucket_transfers_received gauge\n"
    "# HELP seckill_bucket_in_transit_units Units taken from one bucket and not yet given to another.\n"
    "# TYPE seckill_bucket_in_transit_units gauge\n"
    "# HELP seckill_bucket_in_transit_transfers Transfers whose units are in transit.\n"
    "# TYPE seckill_bucket_in_transit_transfers gauge\n"
    "# HELP seckill_bucket_in_transit_oldest_seconds Age of the oldest transfer in transit (0: none).\n"
    "# TYPE seckill_bucket_in_transit_oldest_seconds gauge\n";

/* The persisters' counters of one campaign ({c:<id>}:pipeline). */
typedef struct pipeline_counters {
    int64_t persisted, rejected, duplicates, dead, stale;
    int64_t confirmed, lost, handbacks, barrier_runs, barrier_ms_total, barrier_last_ms, barrier_started_ms;
} pipeline_counters;

static void read_pipeline(cli *c, const char *id, pipeline_counters *p)
{
    memset(p, 0, sizeof(*p));
    char key[96];
    sk_campaign_key(id, "pipeline", key, sizeof(key));
    const char *argv[] = {"HGETALL", key};
    dlock__reply *r = NULL;
    if (dlock__conn_cmd(c->rc, 2, argv, NULL, &r) || dlock__reply_kind(r) != DLOCK__R_ARRAY) {
        dlock__reply_free(r);
        return;
    }
    static const char *const names[] = {"persisted", "rejected", "duplicates", "dead", "stale",
                                        "confirmed", "lost", "handbacks", "barrier_runs", "barrier_ms_total",
                                        "barrier_last_ms", "barrier_started_ms"};
    int64_t *dst[] = {&p->persisted, &p->rejected, &p->duplicates, &p->dead, &p->stale,
                      &p->confirmed, &p->lost, &p->handbacks, &p->barrier_runs, &p->barrier_ms_total,
                      &p->barrier_last_ms, &p->barrier_started_ms};
    for (size_t i = 0; i + 1 < dlock__reply_count(r); i += 2)
        for (size_t k = 0; k < OPT_COUNT(names); k++)
            if (strcmp(dlock__reply_str(dlock__reply_at(r, i), NULL), names[k]) == 0)
                *dst[k] = strtoll(dlock__reply_str(dlock__reply_at(r, i + 1), NULL), NULL, 10);
    dlock__reply_free(r);
}

/* The per-bucket gauges of one campaign (K = 1: bucket "0"). */
static void metrics_buckets(const sk_reconcile_report *rep, dlock__buf *out)
{
    const char *id = rep->campaign;
    dlock__buf_printf(out, "seckill_campaign_shards{campaign=\"%s\"} %d\n", id, rep->nbuckets);
    for (int j = 0; j < rep->nbuckets; j++) {
        const sk_reconcile_bucket *bk = &rep->bucket[j];
        dlock__buf_printf(out, "seckill_bucket_remaining{campaign=\"%s\",bucket=\"%d\"} %lld\n", id, j,
                          (long long)bk->stock);
        dlock__buf_printf(out, "seckill_bucket_buyer_units{campaign=\"%s\",bucket=\"%d\"} %lld\n", id, j,
                          (long long)bk->buyer_units);
        dlock__buf_printf(out, "seckill_bucket_backlog{campaign=\"%s\",bucket=\"%d\"} %lld\n", id, j,
                          (long long)(bk->lag + bk->pending));
        dlock__buf_printf(out, "seckill_bucket_journal_entries{campaign=\"%s\",bucket=\"%d\"} %lld\n", id, j,
                          (long long)bk->xfer_entries);
        dlock__buf_printf(out, "seckill_bucket_transfers_received{campaign=\"%s\",bucket=\"%d\"} %lld\n", id, j,
                          (long long)bk->xin);
    }
    dlock__buf_printf(out, "seckill_bucket_in_transit_units{campaign=\"%s\"} %lld\n", id, (long long)rep->r_in_transit);
    dlock__buf_printf(out, "seckill_bucket_in_transit_transfers{campaign=\"%s\"} %lld\n", id,
                      (long long)rep->r_in_transit_entries);
    int64_t age = rep->r_transit_oldest_ms ? dlock__wall_ms() - rep->r_transit_oldest_ms : 0;
    dlock__buf_printf(out, "seckill_bucket_in_transit_oldest_seconds{campaign=\"%s\"} %.3f\n", id,
                      (age > 0 ? age : 0) / 1000.0);
}

static void metrics_campaign(cli *c, const sk_reconcile_report *rep, dlock__buf *out)
{
    static const char *const statuses[5] = {"persisted", "paid", "cancelled", "rejected", "pending"};
    const char *id = rep->campaign;
    const sk_db_campaign_stats *d = &rep->d;
    dlock__buf_printf(out, "seckill_pipeline_backlog{campaign=\"%s\"} %lld\n", id, (long long)(rep->r_lag + rep->r_pending));
    dlock__buf_printf(out, "seckill_pipeline_dead_letters{campaign=\"%s\"} %lld\n", id, (long long)rep->r_dead);
    dlock__buf_printf(out, "seckill_reconcile_differences{campaign=\"%s\"} %d\n", id, rep->ndiffs);
    dlock__buf_printf(out, "seckill_stock_remaining{campaign=\"%s\",store=\"redis\"} %lld\n", id, (long long)rep->r_stock);
    dlock__buf_printf(out, "seckill_stock_remaining{campaign=\"%s\",store=\"db\"} %lld\n", id, (long long)d->remaining);
    for (int k = 0; k < 5; k++)
        dlock__buf_printf(out, "seckill_db_orders{campaign=\"%s\",status=\"%s\"} %lld\n", id, statuses[k],
                          (long long)d->orders[k]);
    dlock__buf_printf(out, "seckill_broken_promises{campaign=\"%s\"} %lld\n", id, (long long)d->broken_promises);
    dlock__buf_printf(out, "seckill_stale_timeline_refusals{campaign=\"%s\"} %lld\n", id, (long long)d->stale);
    dlock__buf_printf(out, "seckill_db_reserve_remaining{campaign=\"%s\"} %lld\n", id, (long long)d->reserve_remaining);
    pipeline_counters p;
    read_pipeline(c, id, &p);
    const char *results[] = {"persisted", "rejected", "duplicate", "dead_lettered", "stale"};
    const int64_t counts[] = {p.persisted, p.rejected, p.duplicates, p.dead, p.stale};
    for (size_t k = 0; k < OPT_COUNT(results); k++)
        dlock__buf_printf(out, "seckill_pipeline_entries_total{campaign=\"%s\",result=\"%s\"} %lld\n", id, results[k],
                          (long long)counts[k]);
    dlock__buf_printf(out, "seckill_tentative_finalised_total{campaign=\"%s\",result=\"confirmed\"} %lld\n", id,
                      (long long)p.confirmed);
    dlock__buf_printf(out, "seckill_tentative_finalised_total{campaign=\"%s\",result=\"lost\"} %lld\n", id,
                      (long long)p.lost);
    dlock__buf_printf(out, "seckill_reserve_handbacks_total{campaign=\"%s\"} %lld\n", id, (long long)p.handbacks);
    dlock__buf_printf(out, "seckill_barrier_runs_total{campaign=\"%s\"} %lld\n", id, (long long)p.barrier_runs);
    dlock__buf_printf(out, "seckill_barrier_seconds_total{campaign=\"%s\"} %.3f\n", id, p.barrier_ms_total / 1000.0);
    dlock__buf_printf(out, "seckill_barrier_last_seconds{campaign=\"%s\"} %.3f\n", id, p.barrier_last_ms / 1000.0);
    int64_t running = p.barrier_started_ms > 0 ? dlock__wall_ms() - p.barrier_started_ms : 0;
    dlock__buf_printf(out, "seckill_barrier_running_seconds{campaign=\"%s\"} %.3f\n", id,
                      (running > 0 ? running : 0) / 1000.0);
    metrics_buckets(rep, out);
}

static int cmd_metrics(cli *c)
{
    id_list l = {0};
    int status = collect_campaigns(c, &l);
    dlock__buf out = {0};
    dlock__buf_printf(&out, "%s", METRICS_HELP);
    for (size_t i = 0; i < l.n && status == 0; i++) {
        sk_reconcile_report rep;
        int rc = sk_reconcile_campaign(c->db, c->rc, l.ids[i], &rep);
        if (rc == 0) {
            metrics_campaign(c, &rep, &out);
        } else if (rc != SK_ENOTFOUND && rc != SK_EINVAL) {
            fprintf(stderr, "seckill: metrics %s: %s\n", l.ids[i], sk_strerror(rc));
            status = 3;
        }
        sk_reconcile_report_free(&rep);
    }
    if (status == 0 && out.data) fputs(out.data, stdout);
    dlock__buf_free(&out);
    free(l.ids);
    return status;
}

static int cmd_reconcile(cli *c)
{
    id_list l = {0};
    int collected = collect_campaigns(c, &l);
    if (collected) return collected;
    if (c->wait_ms > 0) wait_drained(c, &l);
    int status = 0;
    dlock__buf out = {0};
    if (c->json) dlock__buf_printf(&out, "[");
    for (size_t i = 0; i < l.n; i++) {
        sk_reconcile_report rep;
        int rc = sk_reconcile_campaign(c->db, c->rc, l.ids[i], &rep);
        if (rc == SK_ENOTFOUND) {
            static const char why[] = "listed in Redis (seckill:campaigns) but not in the database";
            if (c->json)
                dlock__buf_printf(&out, "%s{\"campaign\":\"%s\",\"consistent\":false,\"differences\":[\"%s\"]}",
                                  i ? "," : "", l.ids[i], why);
            else
                dlock__buf_printf(&out, "campaign %s: DIFFERENCES\n  - %s\n", l.ids[i], why);
            status = status ? status : 1;
        } else if (rc) {
            fprintf(stderr, "seckill: reconcile %s: %s%s%s\n", l.ids[i], sk_strerror(rc),
                    rc == SK_EDB ? ": " : "", rc == SK_EDB ? sk_db_errmsg(c->db) : "");
            status = rc == SK_ENOTFOUND || rc == SK_EINVAL ? (status ? status : 1) : 3;
        } else {
            if (c->json && i) dlock__buf_printf(&out, ",");
            sk_reconcile_format(&rep, c->json, &out);
            if (rep.ndiffs && !status) status = 1;
            if (rep.d.broken_promises && status < 3) status = 4;
        }
        sk_reconcile_report_free(&rep);
    }
    if (c->json) dlock__buf_printf(&out, "]\n");
    if (out.data) fputs(out.data, stdout);
    if (!c->json && l.n == 0) printf("no campaigns\n");
    dlock__buf_free(&out);
    free(l.ids);
    return status;
}

typedef struct camp_print {
    bool json;
    int n;
} camp_print;

static void camp_print_cb(const sk_campaign *cp, int64_t remaining, void *ud)
{
    camp_print *p = ud;
    dlock__buf o = {0};
    if (p->json) {
        dlock__buf_printf(&o, "%s{\"id\":", p->n ? "," : "");
        sk_tool_put_json(&o, cp->id);
        dlock__buf_printf(&o, ",\"stock\":%" PRId64 ",\"remaining\":%" PRId64 ",\"per_user_limit\":%" PRId64
                              ",\"starts_at_ms\":%" PRId64 ",\"ends_at_ms\":%" PRId64 ",\"price_cents\":%" PRId64 "}",
                          cp->stock, remaining, cp->per_user_limit, cp->starts_at_ms, cp->ends_at_ms, cp->price_cents);
    } else {
        dlock__buf id = {0};
        sk_tool_put_text(&id, cp->id);
        dlock__buf_printf(&o, "%-24s remaining %8" PRId64 " of %8" PRId64 "  limit %" PRId64 "  ",
                          id.data ? id.data : "", remaining, cp->stock, cp->per_user_limit);
        sk_tool_put_text(&o, cp->title);
        dlock__buf_append(&o, "\n", 1);
        dlock__buf_free(&id);
    }
    if (o.data) fputs(o.data, stdout);
    dlock__buf_free(&o);
    p->n++;
}

/* The master serving bucket tag's slot: on a Cluster the slot's master
 * now (host:port), on one server that server. */
static void bucket_master(cli *c, const char *tag, char *buf, size_t len)
{
    char key[SK_BUCKET_TAG_MAX + 8];
    snprintf(key, sizeof(key), "{%s}:meta", tag);
    dlock__url u;
    memset(&u, 0, sizeof(u));
    if (dlock__conn_master_of_key(c->rc, key, strlen(key), &u)) snprintf(buf, len, "unserved");
    else if (u.kind == DLOCK__URL_TCP) snprintf(buf, len, "%s:%d", u.host, u.port);
    else if (u.kind == DLOCK__URL_UNIX) snprintf(buf, len, "%s", u.path);
    else snprintf(buf, len, "sentinel master %s", u.master_name ? u.master_name : "?");
    dlock__url_free(&u);
}

typedef struct show_ctx {
    const sk_campaign *def; /* NULL: not in the database */
    int64_t remaining;
    const sk_reconcile_report *rep;
    char (*master)[128];
} show_ctx;

static void show_json(const show_ctx *s, dlock__buf *o)
{
    const sk_reconcile_report *rep = s->rep;
    dlock__buf_printf(o, "{\"id\":\"%s\",\"database\":", rep->campaign);
    if (s->def) {
        dlock__buf_printf(o, "{\"title\":");
        sk_tool_put_json(o, s->def->title);
        dlock__buf_printf(o, ",\"stock\":%" PRId64 ",\"remaining\":%" PRId64 ",\"per_user_limit\":%" PRId64
                             ",\"db_reserve\":%" PRId64 "}",
                          s->def->stock, s->remaining, s->def->per_user_limit, s->def->db_reserve);
    } else {
        dlock__buf_printf(o, "null");
    }
    dlock__buf_printf(o, ",\"shards\":%d,\"remaining\":%" PRId64 ",\"in_transit\":%" PRId64
                         ",\"in_transit_transfers\":%" PRId64 ",\"buckets\":[",
                      rep->nbuckets, rep->r_stock, rep->r_in_transit, rep->r_in_transit_entries);
    for (int j = 0; j < rep->nbuckets; j++) {
        const sk_reconcile_bucket *bk = &rep->bucket[j];
        dlock__buf_printf(o, "%s{\"bucket\":%d,\"tag\":", j ? "," : "", j);
        sk_tool_put_json(o, bk->tag);
        dlock__buf_append(o, ",\"master\":", 10);
        sk_tool_put_json(o, s->master[j]);
        dlock__buf_printf(o, ",\"present\":%s,\"remaining\":%" PRId64 ",\"buyers\":%" PRId64 ",\"bought_units\":%" PRId64
                             ",\"journal_entries\":%" PRId64 ",\"in_transit_out\":%" PRId64
                             ",\"in_transit_out_transfers\":%" PRId64 ",\"transfers_in\":%" PRId64
                             ",\"stream_entries\":%" PRId64 ",\"pending\":%" PRId64 ",\"lag\":%" PRId64
                             ",\"dead_letters\":%" PRId64 "}",
                          bk->present ? "true" : "false", bk->stock, bk->buyers, bk->buyer_units, bk->xfer_entries,
                          bk->transit_out_units, bk->transit_out_entries, bk->xin, bk->stream_len, bk->pending,
                          bk->lag, bk->dead);
    }
    dlock__buf_printf(o, "],\"differences\":[");
    const char *p = rep->diffs.data;
    for (int i = 0; i < rep->ndiffs; i++, p += strlen(p) + 1) {
        if (i) dlock__buf_append(o, ",", 1);
        sk_tool_put_json(o, p);
    }
    dlock__buf_printf(o, "]}\n");
}

static void show_text(const show_ctx *s, dlock__buf *o)
{
    const sk_reconcile_report *rep = s->rep;
    if (s->def) {
        dlock__buf_printf(o, "campaign %s: ", rep->campaign);
        sk_tool_put_text(o, s->def->title);
        dlock__buf_printf(o, "\n  database: stock %" PRId64 ", remaining %" PRId64 " (reserve %" PRId64
                             "), limit %" PRId64 "\n",
                          s->def->stock, s->remaining, s->def->db_reserve, s->def->per_user_limit);
    } else
        dlock__buf_printf(o, "campaign %s: not in the database\n", rep->campaign);
    dlock__buf_printf(o, "  redis: %d bucket%s, remaining %" PRId64 " + %" PRId64 " in transit (%" PRId64
                         " transfers), %" PRId64 " units bought by %" PRId64 " buyers\n",
                      rep->nbuckets, rep->nbuckets > 1 ? "s" : "", rep->r_stock, rep->r_in_transit,
                      rep->r_in_transit_entries, rep->r_buyer_units, rep->r_buyers);
    if (rep->r_transit_oldest_ms)
        dlock__buf_printf(o, "  oldest transfer in transit taken %.1f s ago (recovery gives it after 3 s)\n",
                          (double)(dlock__wall_ms() - rep->r_transit_oldest_ms) / 1000.0);
    for (int j = 0; j < rep->nbuckets; j++) {
        const sk_reconcile_bucket *bk = &rep->bucket[j];
        dlock__buf_printf(o, "  bucket %d {", j);
        sk_tool_put_text(o, bk->tag);
        dlock__buf_append(o, "} on ", 5);
        sk_tool_put_text(o, s->master[j]);
        dlock__buf_printf(o, ": %s%" PRId64 ", buyers %" PRId64 " (%" PRId64
                             " units), journal %" PRId64 " out (%" PRId64 " units in transit), %" PRId64
                             " transfers in, stream %" PRId64 " entries (pending %" PRId64 ", lag %" PRId64
                             "), dead %" PRId64 "\n",
                          bk->present ? "remaining " : "no stock key, remaining ", bk->stock,
                          bk->buyers, bk->buyer_units, bk->xfer_entries, bk->transit_out_units, bk->xin,
                          bk->stream_len, bk->pending, bk->lag, bk->dead);
    }
    const char *p = rep->diffs.data;
    for (int i = 0; i < rep->ndiffs; i++, p += strlen(p) + 1) {
        dlock__buf_append(o, "  - ", 4);
        sk_tool_put_text(o, p);
        dlock__buf_append(o, "\n", 1);
    }
}

/* campaigns show ID: the definition (database) and every bucket (Redis).
 * 0, 1 (in neither), 2 (usage), 3 (unreachable). */
static int cmd_campaign_show(cli *c)
{
    const char *id = c->npos >= 3 ? c->pos[2] : c->campaign;
    if (!id || !sk_db_id_valid(id)) {
        fprintf(stderr, "seckill: campaigns show needs a valid campaign id (see --help)\n");
        return 2;
    }
    int rc = open_redis(c);
    if (rc) return rc;
    sk_campaign def;
    char master[SK_MAX_SHARDS][128];
    show_ctx s = {&def, 0, NULL, master};
    int dbr = sk_db_campaign_get(c->db, id, &def, &s.remaining);
    if (dbr && dbr != SK_ENOTFOUND) {
        fprintf(stderr, "seckill: %s\n", sk_db_errmsg(c->db));
        return 3;
    }
    if (dbr) s.def = NULL;
    sk_reconcile_report rep;
    int err = sk_reconcile_redis(c->rc, id, &rep);
    s.rep = &rep;
    if (err) fprintf(stderr, "seckill: campaigns show %s: %s\n", id, sk_strerror(err));
    else if (!s.def && !rep.redis_present) fprintf(stderr, "seckill: no campaign '%s' in the database or Redis\n", id);
    rc = err ? 3 : !s.def && !rep.redis_present ? 1 : 0;
    for (int j = 0; rc == 0 && j < rep.nbuckets; j++) bucket_master(c, rep.bucket[j].tag, master[j], sizeof(master[j]));
    dlock__buf out = {0};
    if (rc == 0 && c->json) show_json(&s, &out);
    else if (rc == 0) show_text(&s, &out);
    if (out.data) fputs(out.data, stdout);
    dlock__buf_free(&out);
    sk_reconcile_report_free(&rep);
    return rc;
}

static int cmd_campaigns(cli *c)
{
    if (c->npos >= 2 && strcmp(c->pos[1], "show") == 0) return cmd_campaign_show(c);
    if (c->npos >= 2) {
        fprintf(stderr, "seckill: unknown campaigns subcommand '%s' (see --help)\n", c->pos[1]);
        return 2;
    }
    camp_print p = {c->json, 0};
    if (c->json) printf("[");
    if (sk_db_campaign_list(c->db, camp_print_cb, &p)) {
        fprintf(stderr, "seckill: %s\n", sk_db_errmsg(c->db));
        return 3;
    }
    if (c->json) printf("]\n");
    return 0;
}

/* An order id: the internal decimal id, or the "<id>-<tag>" a buyer was
 * handed (the tag is seckilld's to check; the admin tool reads the id). */
static int parse_order_id(const char *s, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v = s && *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
    bool tail_ok = end && (*end == '\0' || (*end == '-' && strlen(end + 1) == 16 &&
                                            strspn(end + 1, "0123456789abcdefABCDEF") == 16));
    if (!s || end == s || !tail_ok || v == 0) {
        fprintf(stderr, "seckill: bad order id '%s'\n", s ? s : "");
        return 2;
    }
    *out = (uint64_t)v;
    return 0;
}

static void print_order(const sk_order_row *r, bool json)
{
    /* every text field comes from the database: sk_tool_put_json or sk_tool_put_text (text.h) */
    const char *name[] = {"campaign", "user", "status", "reason", "path"};
    const char *val[] = {r->campaign, r->user, r->status, r->reason, r->path};
    dlock__buf o = {0};
    if (json) {
        dlock__buf_printf(&o, "{\"order_id\":\"%" PRIu64 "\"", r->order_id);
        for (size_t k = 0; k < sizeof(name) / sizeof(name[0]); k++) {
            if (k == 2) dlock__buf_printf(&o, ",\"quantity\":%" PRId64, r->qty);
            dlock__buf_printf(&o, ",\"%s\":", name[k]);
            sk_tool_put_json(&o, val[k]);
        }
        dlock__buf_append(&o, "}\n", 2);
    } else {
        dlock__buf_printf(&o, "order %" PRIu64 ": campaign ", r->order_id);
        sk_tool_put_text(&o, r->campaign);
        dlock__buf_append(&o, " user ", 6);
        sk_tool_put_text(&o, r->user);
        dlock__buf_printf(&o, " qty %" PRId64 " status ", r->qty);
        sk_tool_put_text(&o, r->status);
        if (r->reason[0]) {
            dlock__buf_append(&o, ", ", 2);
            sk_tool_put_text(&o, r->reason);
        }
        dlock__buf_append(&o, " (path ", 7);
        sk_tool_put_text(&o, r->path);
        dlock__buf_append(&o, ")\n", 2);
    }
    if (o.data) fputs(o.data, stdout);
    dlock__buf_free(&o);
}

static int cmd_order(cli *c, const char *what)
{
    uint64_t id = 0;
    if (c->npos < 2) {
        usage(stderr);
        return 2;
    }
    int rc = parse_order_id(c->pos[1], &id);
    if (rc) return rc;
    sk_order_row row;
    if (strcmp(what, "order") == 0) {
        rc = sk_db_order_get(c->db, id, &row);
    } else if (strcmp(what, "pay") == 0) {
        if (c->npos < 3) {
            usage(stderr);
            return 2;
        }
        rc = sk_db_order_pay(c->db, id, c->pos[2], &row);
    } else {
        rc = sk_order_cancel(c->db, c->rc, id, c->reason ? c->reason : "cancelled by admin");
        if (rc == 0 || rc == SK_ECONFLICT) sk_db_order_get(c->db, id, &row);
    }
    if (rc && !(rc == SK_ECONFLICT && strcmp(what, "cancel") == 0)) {
        fprintf(stderr, "seckill: %s %" PRIu64 ": %s\n", what, id, sk_strerror(rc));
        return rc == SK_EDB ? 3 : 1;
    }
    print_order(&row, c->json);
    if (rc) fprintf(stderr, "seckill: cancel %" PRIu64 ": not cancelled now (status %s)\n", id, row.status);
    return rc ? 1 : 0;
}

static int cmd_migrate(cli *c)
{
    int v = 0;
    sk_db_schema_version(c->db, &v);
    printf("schema version %d (%s)\n", v, sk_db_kind(c->db));
    return 0;
}

/* Forces a barrier on bucket j of --campaign (layout lay) and runs it to
 * the end by end_ms; the persisters (one at least must run) drain the
 * stream meanwhile. 0 opened, 1 not in time, 3 unreachable. */
static int barrier_bucket(cli *c, const sk_buckets *lay, int j, int64_t end_ms)
{
    char run_id[41], owner[64], what[SK_BUCKET_TAG_MAX + 32] = "";
    snprintf(owner, sizeof(owner), "seckill-barrier-%ld", (long)getpid());
    if (lay->k > 1) snprintf(what, sizeof(what), " bucket %d {%s}", j, lay->tag[j]);
    int err = sk_barrier_bucket_run_id(c->rc, lay, j, run_id); /* the bucket's master */
    if (!err) err = sk_barrier_force_bucket(c->rc, lay, j, owner);
    if (err) {
        fprintf(stderr, "seckill: barrier %s%s: %s\n", c->campaign, what, sk_strerror(err));
        return 3;
    }
    sk_barrier_run b;
    sk_barrier_run_init(&b, owner);
    int st = SK_BARRIER_WAITING;
    while ((st = sk_barrier_step_bucket(c->db, c->rc, c->campaign, lay, j, run_id, &b)) == SK_BARRIER_WAITING &&
           dlock__now_ms() < end_ms)
        dlock__sleep_ms(50);
    if (st < 0) {
        fprintf(stderr, "seckill: barrier %s%s: %s\n", c->campaign, what, sk_strerror(st));
        return 3;
    }
    if (st == SK_BARRIER_WAITING) {
        fprintf(stderr, "seckill: barrier %s%s: the stream was not drained in time (is a persister running?); "
                        "sales stay stopped until a persister finishes it\n", c->campaign, what);
        return 1;
    }
    printf("campaign %s%s: barrier done in %" PRId64 " ms: epoch %" PRId64 ", %" PRId64 " orders and %" PRId64
           " give-backs mirrored, %" PRId64 " handbacks applied again\n",
           c->campaign, what, b.duration_ms, b.epoch, b.mirrored, b.given_back, b.handbacks);
    return 0;
}

/* The barrier of --campaign now: of --bucket J only, else of every bucket
 * one after another (a K = 1 campaign has one), all within --wait. */
static int cmd_barrier(cli *c)
{
    sk_buckets lay;
    int err = sk_layout_read(c->rc, c->campaign, &lay);
    if (err == SK_ENOTFOUND) sk_buckets_single(c->campaign, &lay); /* as before: the step says what to do */
    else if (err) {
        fprintf(stderr, "seckill: barrier %s: cannot read its bucket layout: %s\n", c->campaign, sk_strerror(err));
        return err == SK_EINVAL ? 1 : 3;
    }
    if (c->bucket >= lay.k) {
        fprintf(stderr, "seckill: barrier %s: no bucket %d (the campaign has %d)\n", c->campaign, c->bucket, lay.k);
        return 2;
    }
    int64_t end = dlock__now_ms() + (c->wait_ms > 0 ? c->wait_ms : 30000);
    int rc = 0;
    for (int j = c->bucket >= 0 ? c->bucket : 0; j < lay.k && rc == 0; j++) {
        rc = barrier_bucket(c, &lay, j, end);
        if (c->bucket >= 0) break;
    }
    return rc;
}

static int cmd_show(cli *c) { return cmd_order(c, "order"); }
static int cmd_pay(cli *c) { return cmd_order(c, "pay"); }
static int cmd_cancel(cli *c) { return cmd_order(c, "cancel"); }

static const struct command {
    const char *name;
    bool needs_redis;
    int (*run)(cli *c);
} commands[] = {
    {"reconcile", true, cmd_reconcile}, {"metrics", true, cmd_metrics}, {"campaigns", false, cmd_campaigns},
    {"order", false, cmd_show},         {"pay", false, cmd_pay},         {"cancel", true, cmd_cancel},
    {"migrate", false, cmd_migrate},    {"barrier", true, cmd_barrier},
};

static int add_operand(void *base, const char *arg, char *err, size_t errlen)
{
    cli *c = base;
    return opt_append(c->pos, &c->npos, 4, arg, "too many arguments", err, errlen);
}

#define OFF(f) offsetof(cli, f)

static const opt_spec specs[] = {
    OPT_ENV_FILE_SPEC(OFF(env_file)),
    {.name = "redis-url", .type = OPT_STR, .off = OFF(redis_url), .env = "REDIS_URL",
     .def = "redis://127.0.0.1:6379", .check = skurl_check_redis},
    {.name = "database-url", .type = OPT_STR, .off = OFF(database_url), .env = "DATABASE_URL",
     .check = skurl_check_database},
    {.name = "campaign", .type = OPT_STR, .off = OFF(campaign)},
    {.name = "reason", .type = OPT_STR, .off = OFF(reason)},
    {.name = "bucket", .type = OPT_STR, .off = OFF(bucket_arg)},
    {.name = "wait", .type = OPT_DURATION, .off = OFF(wait_ms), .lo = 0, .hi = OPT_MAX_MS, .unit = OPT_UNIT_MS},
    {.name = "json", .type = OPT_FLAG, .off = OFF(json)},
    {.name = "help", .short_name = 'h', .type = OPT_FLAG, .off = OFF(help)},
    {.name = "version", .type = OPT_FLAG, .off = OFF(version)},
};

/* Options and operands into c; the command in *cmd_out. 0, 1 (--help or
 * --version printed) or 2 (usage error printed). */
static int parse(cli *c, int argc, char **argv, const struct command **cmd_out)
{
    char err[256];
    if (opt_env_file_apply(specs, OPT_COUNT(specs), argc, argv, err, sizeof(err)) ||
        opt_load(specs, OPT_COUNT(specs), argc, argv, c, add_operand, err, sizeof(err))) {
        fprintf(stderr, "seckill: %s (see --help)\n", err);
        return 2;
    }
    if (c->help || c->version) {
        if (c->help) usage(stdout);
        else printf("seckill %s\n", DLOCK_VERSION);
        return 1;
    }
    if (c->npos == 0) {
        usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < OPT_COUNT(commands) && !*cmd_out; i++)
        if (strcmp(c->pos[0], commands[i].name) == 0) *cmd_out = &commands[i];
    if (!*cmd_out) {
        fprintf(stderr, "seckill: unknown command '%s' (see --help)\n", c->pos[0]);
        return 2;
    }
    if (c->campaign && !sk_db_id_valid(c->campaign)) {
        fprintf(stderr, "seckill: bad campaign id '%s'\n", c->campaign);
        return 2;
    }
    if ((*cmd_out)->run == cmd_barrier && !c->campaign) {
        fprintf(stderr, "seckill: barrier needs --campaign ID\n");
        return 2;
    }
    int64_t j = -1;
    if (c->bucket_arg && opt_parse_int("bucket", c->bucket_arg, 0, SK_MAX_SHARDS - 1, &j, err, sizeof(err))) {
        fprintf(stderr, "seckill: %s (see --help)\n", err);
        return 2;
    }
    c->bucket = (int)j;
    return 0;
}

/* The options module's deprecation warnings (a bare duration). */
static void warn_line(const char *msg) { fprintf(stderr, "seckill: %s\n", msg); }

int main(int argc, char **argv)
{
    cli c = {0};
    const struct command *cmd = NULL;
    opt_set_warn(warn_line);
    int rc = parse(&c, argc, argv, &cmd);
    if (rc) return rc == 1 ? 0 : rc;
    rc = open_db(&c);
    if (!rc && cmd->needs_redis) rc = open_redis(&c);
    if (!rc) rc = cmd->run(&c);
    sk_db_close(c.db);
    dlock__conn_close(c.rc);
    return rc;
}
