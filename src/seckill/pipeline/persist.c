/* persist.c: a persistence worker, the scheduler of the pipeline's parts.
 * Design note:
 *  - the parts: discovery (persist_discovery.c: which streams), the stream
 *    consumer (persist_stream.c: read, apply, ack, dead-letter), the
 *    backlog (persist_backlog.c), sharing one context (persist_ctx.c);
 *    beside them the barrier (barrier.c), the reserve (reserve.c) and the
 *    lifecycle sweep (lifecycle.c), which this file runs between reads;
 *  - each round: re-create the groups if Redis lost them; wait while the
 *    database is down; follow announced and (every 2 s) discovered
 *    campaigns; every 250 ms a barrier pass (a change of master seen
 *    within one pass); own pending entries, every claim_idle_ms/2 a
 *    reclaim, then new entries (blocking only when the others found
 *    nothing); every sweep_interval_ms the lifecycle sweep and the reserve
 *    pass, the latter only for campaigns with no barrier due;
 *  - a failed round is retried with back-off; nothing accepted is lost. */
#include "persist.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "announce.h"
#include "barrier.h"
#include "dlock/dlock.h"
#include "lifecycle.h"
#include "persist_backlog.h"
#include "persist_ctx.h"
#include "persist_discovery.h"
#include "persist_stream.h"
#include "redis_connect.h"
#include "reserve.h"
#include "rulebook.h"
#include "sk_err.h"
#include "util.h"

#define BARRIER_EVERY_MS 250 /* how often the master's run id is compared with each campaign's */

typedef struct worker {
    sk_pctx x;         /* options, handles, figures: shared by the parts */
    sk_pcamps camps;   /* the streams followed (discovery) */
    sk_pstream in;     /* the stream consumer */
    sk_announce *ann;  /* new campaigns, announced (NULL with --campaign) */
    int64_t next_claim_ms, next_sweep_ms, next_discover_ms, next_barrier_ms;
} worker;

void sk_persist_opts_init(sk_persist_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->batch = 1000;
    o->block_ms = 500;
    o->claim_idle_ms = 30000;
    o->max_deliveries = 5;
    o->pay_timeout_ms = 15 * 60 * 1000;
    o->sweep_interval_ms = 1000;
}

bool sk_persist_is_cluster(dlock__conn *rc)
{
    const char *argv[] = {"INFO", "cluster"};
    dlock__reply *r = NULL;
    bool yes = dlock__conn_cmd(rc, 2, argv, NULL, &r) == 0 && dlock__reply_kind(r) == DLOCK__R_STRING &&
               strstr(dlock__reply_str(r, NULL), "cluster_enabled:1") != NULL;
    dlock__reply_free(r);
    return yes;
}

/* Whether every bucket of the campaign whose bucket 0 is camps[i] is
 * open (its K camps follow it). */
static bool all_open(const worker *w, size_t i)
{
    for (int j = 0; j < w->camps.v[i].lay->k; j++)
        if (i + (size_t)j >= w->camps.n || !w->camps.v[i + (size_t)j].open) return false;
    return true;
}

/* Tentative orders finalised, refused ones given back, and the reserve
 * handed back where Redis sold out; once per campaign, only when every
 * bucket of it is open on its master (no barrier due). */
static void reserve_pass(worker *w)
{
    sk_reserve_stats rs = {0};
    for (size_t i = 0; i < w->camps.n; i++) {
        if (w->camps.v[i].j != 0 || !all_open(w, i)) continue;
        sk_reserve_finalise(w->x.db, w->x.rc, w->camps.v[i].id, w->x.o->batch, &rs);
        sk_reserve_handback(w->x.db, w->x.rc, w->camps.v[i].id, &rs);
    }
    w->x.st.confirmed += rs.confirmed;
    w->x.st.lost += rs.lost;
    w->x.st.handbacks += rs.handbacks;
}

/* The barrier after a change of master, one step per bucket (barrier.h):
 * the run id of the node serving each bucket's slot is read at every
 * pass (on a Cluster every master has its own; one server answers for
 * all), so a failover, a restart behind the same address or a slot moved
 * to another master is seen within one pass. */
static void barrier_pass(worker *w)
{
    for (size_t i = 0; i < w->camps.n; i++) {
        sk_pcamp *c = &w->camps.v[i];
        char run_id[41], what[96] = "";
        if (c->lay->k > 1) snprintf(what, sizeof(what), " bucket %d", c->j);
        if (sk_barrier_bucket_run_id(w->x.rc, c->lay, c->j, run_id) != 0) {
            c->open = false;
            continue;
        }
        bool was_due = c->bar.started_ms != 0;
        int st = sk_barrier_step_bucket(w->x.db, w->x.rc, c->id, c->lay, c->j, run_id, &c->bar);
        c->open = st == SK_BARRIER_OPEN;
        if (st < 0) sk__pctx_log(&w->x, "campaign %s%s: barrier: %s", c->id, what, sk_strerror(st));
        if (!was_due && c->bar.started_ms)
            sk__pctx_log(&w->x, "campaign %s%s: new master (run id %s): barrier, draining", c->id, what, run_id);
        if (!c->bar.opened) continue;
        w->x.st.barriers++;
        w->x.st.barrier_ms = c->bar.duration_ms;
        sk__pctx_log(&w->x,
                     "campaign %s%s: barrier done in %" PRId64 " ms: epoch %" PRId64 ", %" PRId64
                     " orders and %" PRId64 " give-backs mirrored, %" PRId64
                     " handbacks applied again; selling on this master",
                     c->id, what, c->bar.duration_ms, c->bar.epoch, c->bar.mirrored, c->bar.given_back,
                     c->bar.handbacks);
        c->bar.mirrored = c->bar.given_back = c->bar.handbacks = 0;
    }
}

/* On a Cluster a Redis error of one campaign is its slot's master's (down
 * until its replica is promoted, or the slot in migration): the other
 * campaigns go on this round; their entries stay pending meanwhile. */
static int one_node_down(worker *w, int err)
{
    bool redis = err == DLOCK_ECONN || err == DLOCK_EUNKNOWN || err == DLOCK_ESERVER || err == DLOCK_ETIMEOUT ||
                 err == DLOCK_EIO;
    return w->x.cluster && redis ? 0 : err;
}

/* One line per order the payment timeout cancelled: without it a buyer's
 * "my order vanished" has no trace in the persister's log (the program's
 * log limiter folds a burst of them into a count). */
static void log_timeout_cancel(const sk_order_row *row, void *ud)
{
    sk_pctx *x = ud;
    int64_t unpaid_s = (dlock__wall_ms() - row->created_ms) / 1000;
    sk__pctx_log(x, "order %" PRIu64 " of campaign %s (user %s, %" PRId64 " unit(s)) cancelled: "
                    "payment timeout (unpaid for %" PRId64 " s)",
                 row->order_id, row->campaign, row->user, row->qty, unpaid_s);
}

static int worker_round(worker *w)
{
    int64_t now = dlock__now_ms();
    if (w->x.nogroup) { /* the streams' groups are gone: forget and re-create them all */
        sk__pctx_log(&w->x, "consumer group missing (Redis restarted or failed over?): re-creating");
        sk__pcamps_clear(&w->camps);
        w->x.nogroup = false;
        w->next_discover_ms = 0;
    }
    if (w->in.db_down) { /* delivering entries now would only count failed deliveries */
        if (sk_db_ping(w->x.db) != 0) return SK_EDB;
        sk__pctx_log(&w->x, "database reachable again");
        w->in.db_down = false;
    }
    sk__pcamps_take_announced(&w->x, &w->camps, w->ann);
    if (now >= w->next_discover_ms) {
        sk__pcamps_discover(&w->x, &w->camps);
        w->next_discover_ms = now + 2000;
    }
    if (w->camps.n == 0) {
        dlock__sleep_ms(w->x.o->block_ms);
        return w->x.o->drain ? 1 : 0;
    }
    if (now >= w->next_barrier_ms) {
        barrier_pass(w);
        int64_t every = w->x.o->sweep_interval_ms < BARRIER_EVERY_MS ? w->x.o->sweep_interval_ms : BARRIER_EVERY_MS;
        w->next_barrier_ms = now + every;
    }
    int work = 0, n = 0, err = 0;
    for (size_t i = 0; i < w->camps.n && !err && now >= w->in.next_own_ms; i++) {
        err = one_node_down(w, sk__pstream_own(&w->in, &w->camps.v[i], &n));
        work += n;
    }
    if (!err && now >= w->next_claim_ms) {
        for (size_t i = 0; i < w->camps.n && !err; i++) {
            err = one_node_down(w, sk__pstream_reclaim(&w->in, &w->camps.v[i], &n));
            work += n;
        }
        int64_t every = w->x.o->claim_idle_ms / 2;
        w->next_claim_ms = now + (every < 100 ? 100 : every);
    }
    if (!err) {
        err = sk__pstream_read_new(&w->in, work == 0, &n);
        work += n;
    }
    if (dlock__now_ms() >= w->next_sweep_ms) { /* timeouts (if on), mirrors, releases */
        sk_lifecycle_sweep_cb(w->x.db, w->x.rc, w->x.o->campaign, w->x.o->pay_timeout_ms, w->x.o->batch,
                              &w->x.st.cancelled, &w->x.st.released, log_timeout_cancel, &w->x);
        reserve_pass(w);
        w->next_sweep_ms = dlock__now_ms() + w->x.o->sweep_interval_ms;
    }
    if (err) return err;
    if (w->x.o->drain && work == 0 && sk__persist_drained(w->x.rc, &w->camps)) return 1;
    return 0;
}

static int worker_init(worker *w, const sk_persist_opts *o, char *err, size_t errlen)
{
    memset(w, 0, sizeof(*w));
    w->x.o = o;
    if (!o->redis_url || !o->database_url || o->batch < 1 || o->batch > 10000 || o->block_ms < 0 ||
        o->claim_idle_ms < 1 || o->max_deliveries < 1 || (o->campaign && !sk_valid_campaign_id(o->campaign))) {
        snprintf(err, errlen, "invalid persister options");
        return SK_EINVAL;
    }
    if (o->consumer) {
        snprintf(w->x.consumer, sizeof(w->x.consumer), "%s", o->consumer);
    } else {
        char host[64] = "host", rnd[9];
        gethostname(host, sizeof(host) - 1);
        dlock__random_hex(rnd, 4);
        snprintf(w->x.consumer, sizeof(w->x.consumer), "%s-%ld-%s", host, (long)getpid(), rnd);
    }
    if (sk__pstream_init(&w->in, &w->x, &w->camps) != 0) {
        snprintf(err, errlen, "out of memory");
        return DLOCK_ENOMEM;
    }
    int rc = sk_db_open(o->database_url, &w->x.db, err, errlen);
    if (rc) return rc;
    rc = sk_err_from_common(dlock__conn_open_url(o->redis_url, o->block_ms + 5000, &w->x.rc, err, errlen));
    if (rc) return rc;
    w->x.cluster = sk_persist_is_cluster(w->x.rc);
    if (w->x.cluster) sk__pctx_log(&w->x, "redis is a Cluster: one read per campaign stream, on the node of its slot");
    if (o->campaign) return 0;
    char why[256];
    if (sk_announce_start(o->redis_url, &w->ann, why, sizeof(why)) != 0) /* discovery still finds them */
        sk__pctx_log(&w->x, "campaign announcements not followed (%s): new campaigns are found every 2 s", why);
    w->in.ann = w->ann;
    return 0;
}

static void worker_free(worker *w)
{
    sk_announce_stop(w->ann);
    sk_db_close(w->x.db);
    dlock__conn_close(w->x.rc);
    sk__pcamps_free(&w->camps);
    sk__pstream_free(&w->in);
}

int sk_persist_run(const sk_persist_opts *o, sk_persist_stats *stats_out, char *err, size_t errlen)
{
    worker w;
    int rc = worker_init(&w, o, err, errlen);
    if (rc) {
        worker_free(&w);
        return rc;
    }
    sk__pctx_log(&w.x, "persister %s started (%s)", w.x.consumer, sk_db_kind(w.x.db));
    int attempt = 0;
    while (!(o->stop && atomic_load(o->stop))) {
        int r = worker_round(&w);
        if (stats_out) *stats_out = w.x.st;
        if (r == 1) break;
        if (r < 0) {
            int64_t pause = dlock__backoff_ms(50, attempt++, 2000);
            sk__pctx_log(&w.x, "round failed (%s); retrying in %" PRId64 " ms", sk_strerror(r), pause);
            dlock__sleep_ms(pause);
        } else {
            attempt = 0;
        }
    }
    if (stats_out) *stats_out = w.x.st;
    sk__pctx_log(&w.x, "persister %s stopping: persisted %" PRId64 " rejected %" PRId64 " duplicates %" PRId64
                 " dead %" PRId64 " reclaimed %" PRId64 " cancelled %" PRId64,
                 w.x.consumer, w.x.st.persisted, w.x.st.rejected, w.x.st.duplicates, w.x.st.dead_lettered,
                 w.x.st.reclaimed, w.x.st.cancelled);
    worker_free(&w);
    return 0;
}
