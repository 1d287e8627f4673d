/* persist.c: a persistence worker. Design note:
 *  - one consumer (unique name) of group seckill-persist on every campaign
 *    stream; each round: (1) re-reads its own pending entries (a failed
 *    batch) with XREADGROUP ... 0, (2) every claim_idle_ms/2 XAUTOCLAIMs
 *    entries idle on other (dead) consumers, (3) reads new entries (BLOCK
 *    only when (1) and (2) found nothing), (4) runs the payment sweeper;
 *  - a batch goes to the database in one transaction (sk_db_apply_batch);
 *    XACK follows the commit, so a crash between the two only causes a
 *    redelivery, which the order_id primary key turns into a no-op;
 *  - a batch that fails while the database answers a ping is retried entry
 *    by entry, so one poisoned entry cannot hold back the others; its error
 *    is kept in {c:<id>}:orders:errors and after max_deliveries deliveries
 *    it moves (dead_letter.lua: XADD dead + XACK) to {c:<id>}:orders:dead;
 *  - when the database does not answer, the worker reads nothing (which
 *    would count deliveries) until it does: an outage dead-letters nothing;
 *  - malformed entries can never succeed: they are dead-lettered at once. */
#include "persist.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "announce.h"
#include "barrier.h"
#include "confirm.h"
#include "dlock/dlock.h"
#include "ids.h"
#include "layout.h"
#include "lifecycle.h"
#include "release.h"
#include "reserve.h"
#include "sk_err.h"
#include "url.h"
#include "util.h"

#define MAX_FIELDS 16

extern const dlock__script sk_script_dead_letter; /* lua/dead_letter.lua */
#define OWN_RETRY_MS 200 /* pause before an entry that failed is delivered again */
#define BARRIER_EVERY_MS 250 /* how often the master's run id is compared with each campaign's */

typedef struct entry {
    char id[32];
    const dlock__reply *fields; /* name/value array; lives as long as the reply */
    bool deleted;      /* XREADGROUP history of a deleted entry */
    const char *why;   /* malformed: reason */
    int64_t deliveries;
    sk_order_in in;
    char campaign[65], user[65], path[8], idem[65];
} entry;

/* One stream followed: bucket j of campaign id (a campaign of K buckets
 * has K of them, each with its own group, dead letters and counters in
 * its bucket's slot; docs/seckill.md, "One hot campaign over many
 * masters"). */
typedef struct camp {
    char id[65];
    int j;             /* bucket index; 0 for every K = 1 campaign */
    sk_buckets *lay;   /* the campaign's layout, shared by its K camps (owned by bucket 0's) */
    char key[128], dead[144], errs[144], stats[144];
    char cursor[32]; /* XAUTOCLAIM cursor */
    sk_barrier_run bar; /* the barrier after a change of master (barrier.h) */
    bool open;          /* no barrier due on the connected master */
} camp;

typedef struct worker {
    const sk_persist_opts *o;
    sk_db *db;
    dlock__conn *rc;
    char consumer[128];
    camp *camps;
    size_t ncamps, capcamps;
    sk_persist_stats st;
    entry *buf;    /* o->batch entries */
    int *results;  /* o->batch results */
    sk_order_in *ins;
    int64_t next_claim_ms, next_sweep_ms, next_discover_ms, next_barrier_ms;
    sk_announce *ann; /* new campaigns, announced (NULL with --campaign) */
    bool cluster; /* a Cluster (INFO cluster): one read per stream, short blocks */
    size_t block_turn; /* on a Cluster: the stream the next idle round blocks on */
    bool nogroup; /* Redis lost a stream or group (restart, failover): re-create */
    bool db_down; /* the database is unreachable: read nothing (deliveries would count) */
    int64_t next_own_ms; /* own pending entries that failed are retried from then on */
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

__attribute__((format(printf, 2, 3))) static void wlog(worker *w, const char *fmt, ...)
{
    if (!w->o->log) return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    w->o->log(line, w->o->log_ud);
}

int sk_persist_redis_open(const char *url, int64_t command_timeout_ms, dlock__conn **out, char *err,
                          size_t errlen)
{
    dlock__url u;
    int rc = sk_err_from_common(dlock__url_parse(url, &u, err, errlen));
    if (rc) return rc;
    dlock__conn_opts co = {.connect_timeout_ms = 2000, .command_timeout_ms = command_timeout_ms};
    /* A sentinel URL is kept as is: the connection asks the sentinels for
     * the master again at every reconnect, so a failover is followed. */
    rc = sk_err_from_common(dlock__conn_open(&u, &co, out, err, errlen));
    dlock__url_free(&u);
    return rc;
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

/* Runs one command; 0 with *r (caller frees) or the transport code mapped
 * at the engine's edge (sk_err_from_common). A Redis error reply is
 * returned as ESERVER (and freed). */
static int cmd(worker *w, int argc, const char **argv, dlock__reply **r)
{
    *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(w->rc, argc, argv, NULL, r));
    if (!err && dlock__reply_kind(*r) == DLOCK__R_ERROR) {
        if (dlock__reply_is_error(*r, "NOGROUP")) w->nogroup = true;
        wlog(w, "redis %s: %s", argv[0], dlock__reply_str(*r, NULL));
        dlock__reply_free(*r);
        *r = NULL;
        err = DLOCK_ESERVER;
    }
    if (err) w->st.redis_errors++;
    return err;
}

static const char *rstr(const dlock__reply *r)
{
    if (!r) return "";
    dlock__reply_type t = dlock__reply_kind(r);
    return (t == DLOCK__R_STRING || t == DLOCK__R_STATUS) ? dlock__reply_str(r, NULL) : "";
}

/* Decimal int64, -1 when s is not one. */
static int64_t parse_i64(const char *s)
{
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    return end && end != s && *end == '\0' ? (int64_t)v : -1;
}

static int64_t rint64(const dlock__reply *r)
{
    if (!r) return 0;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER) return dlock__reply_int(r);
    return parse_i64(rstr(r));
}

/* ---- campaigns --------------------------------------------------------- */

static camp *camp_find(worker *w, const char *id)
{
    for (size_t i = 0; i < w->ncamps; i++)
        if (strcmp(w->camps[i].id, id) == 0) return &w->camps[i];
    return NULL;
}

/* Creates the database row from {c:<id>}:meta (bucket 0's: it has the
 * layout, shards + bucket_tags) when the engine ran without a database
 * (the contract asks it to create it first; this is a safety net). */
static void camp_ensure_db(worker *w, const char *id)
{
    if (sk_db_campaign_get(w->db, id, NULL, NULL) != SK_ENOTFOUND) return;
    char key[96];
    snprintf(key, sizeof(key), "{c:%s}:meta", id);
    const char *argv[] = {"HGETALL", key};
    dlock__reply *r;
    if (cmd(w, 2, argv, &r)) return;
    sk_campaign c = {0};
    snprintf(c.id, sizeof(c.id), "%s", id);
    c.per_user_limit = 0;
    int have_stock = 0;
    for (size_t i = 0; i + 1 < dlock__reply_count(r); i += 2) {
        const char *k = rstr(dlock__reply_at(r, i)), *v = rstr(dlock__reply_at(r, i + 1));
        if (strcmp(k, "title") == 0) snprintf(c.title, sizeof(c.title), "%s", v);
        if (strcmp(k, "stock") == 0) c.stock = parse_i64(v), have_stock = 1;
        if (strcmp(k, "per_user_limit") == 0) c.per_user_limit = parse_i64(v);
        if (strcmp(k, "starts_at_ms") == 0) c.starts_at_ms = parse_i64(v);
        if (strcmp(k, "ends_at_ms") == 0) c.ends_at_ms = parse_i64(v);
        if (strcmp(k, "price_cents") == 0) c.price_cents = parse_i64(v);
        if (strcmp(k, "db_reserve") == 0) c.db_reserve = parse_i64(v);
        if (strcmp(k, "shards") == 0) c.shards = parse_i64(v);
        if (strcmp(k, "bucket_tags") == 0) snprintf(c.bucket_tags, sizeof(c.bucket_tags), "%s", v);
    }
    dlock__reply_free(r);
    if (!have_stock) return;
    if (c.price_cents < 0) c.price_cents = 0;
    if (c.db_reserve < 0 || c.db_reserve > c.stock) c.db_reserve = 0;
    if (c.shards <= 1) c.bucket_tags[0] = '\0';
    int rc = sk_db_campaign_create(w->db, &c);
    wlog(w, "campaign %s: created in the database from Redis meta: %s", id, rc ? sk_strerror(rc) : "ok");
}

/* The layout of campaign id: bucket 0's meta when Redis has it, else the
 * database's definition, else one bucket (a stream nobody heated yet is
 * followed as today). 0, or a code: Redis unreachable, or a layout not
 * readable yet (the campaign is tried again at the next discovery). */
static int camp_layout(worker *w, const char *id, sk_buckets *out)
{
    int err = sk_layout_read(w->rc, id, out);
    if (err != SK_ENOTFOUND) return err;
    sk_campaign *def = malloc(sizeof(*def));
    if (!def) return DLOCK_ENOMEM;
    err = sk_db_campaign_get(w->db, id, def, NULL);
    if (err == 0) err = sk_layout_of_def(id, def->shards, def->bucket_tags, out);
    else if (err == SK_ENOTFOUND) sk_buckets_single(id, out), err = 0;
    free(def);
    return err;
}

/* Bucket j's stream: its group created (BUSYGROUP is fine). 0 or a code. */
static int camp_stream(worker *w, camp *c, const char *id, sk_buckets *lay, int j)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->j = j;
    c->lay = lay;
    sk_bucket_key(lay, j, "orders", c->key, sizeof(c->key));
    sk_bucket_key(lay, j, "orders:dead", c->dead, sizeof(c->dead));
    sk_bucket_key(lay, j, "orders:errors", c->errs, sizeof(c->errs));
    sk_bucket_key(lay, j, "pipeline", c->stats, sizeof(c->stats));
    snprintf(c->cursor, sizeof(c->cursor), "0-0");
    sk_barrier_run_init(&c->bar, w->consumer);
    const char *argv[] = {"XGROUP", "CREATE", c->key, SK_PERSIST_GROUP, "0", "MKSTREAM"};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(w->rc, 6, argv, NULL, &r));
    bool ok = !err && (dlock__reply_kind(r) != DLOCK__R_ERROR || dlock__reply_is_error(r, "BUSYGROUP"));
    dlock__reply_free(r);
    return ok ? 0 : err ? err : DLOCK_ESERVER;
}

/* Forgets every stream (their layouts freed). */
static void camps_clear(worker *w)
{
    for (size_t i = 0; i < w->ncamps; i++)
        if (w->camps[i].j == 0) free(w->camps[i].lay);
    w->ncamps = 0;
}

static bool camps_room(worker *w, size_t more)
{
    if (w->ncamps + more <= w->capcamps) return true;
    size_t cap = w->capcamps ? 2 * w->capcamps : 8;
    while (cap < w->ncamps + more) cap *= 2;
    camp *n = realloc(w->camps, cap * sizeof(*n));
    if (!n) return false;
    w->camps = n;
    w->capcamps = cap;
    return true;
}

/* Follows every bucket's stream of campaign id, or none of them yet. */
static void camp_add(worker *w, const char *id)
{
    if (!sk_valid_campaign_id(id) || camp_find(w, id)) return;
    sk_buckets *lay = malloc(sizeof(*lay));
    if (!lay) return;
    int err = camp_layout(w, id, lay);
    if (err || !camps_room(w, (size_t)lay->k)) {
        if (err) wlog(w, "campaign %s: bucket layout not readable yet (%s): retried", id, sk_strerror(err));
        free(lay);
        return;
    }
    for (int j = 0; j < lay->k && !err; j++) err = camp_stream(w, &w->camps[w->ncamps + (size_t)j], id, lay, j);
    if (err) { /* retried at the next discovery */
        free(lay);
        return;
    }
    camp_ensure_db(w, id);
    w->ncamps += (size_t)lay->k;
    if (lay->k == 1) wlog(w, "campaign %s: consuming %s", id, w->camps[w->ncamps - 1].key);
    else wlog(w, "campaign %s: consuming the streams of its %d buckets", id, lay->k);
}

static void db_camp_cb(const sk_campaign *c, int64_t remaining, void *ud)
{
    (void)remaining;
    camp_add(ud, c->id);
}

static void discover(worker *w)
{
    if (w->o->campaign) {
        camp_add(w, w->o->campaign);
        return;
    }
    const char *argv[] = {"SMEMBERS", "seckill:campaigns"};
    dlock__reply *r;
    if (cmd(w, 2, argv, &r) == 0) {
        for (size_t i = 0; i < dlock__reply_count(r); i++) camp_add(w, rstr(dlock__reply_at(r, i)));
        dlock__reply_free(r);
    }
    sk_db_campaign_list(w->db, db_camp_cb, w);
}

/* ---- entries ----------------------------------------------------------- */

/* Fills out from one stream entry [id, [k, v, ...]]; out points into e. */
static void entry_parse(const camp *c, const dlock__reply *e, entry *out)
{
    out->deleted = false;
    out->why = NULL;
    out->deliveries = 0;
    out->campaign[0] = out->user[0] = out->path[0] = out->idem[0] = '\0';
    snprintf(out->id, sizeof(out->id), "%s", rstr(dlock__reply_at(e, 0)));
    const dlock__reply *f = dlock__reply_count(e) > 1 ? dlock__reply_at(e, 1) : NULL;
    out->fields = f;
    if (!f || dlock__reply_kind(f) != DLOCK__R_ARRAY) {
        out->deleted = true;
        return;
    }
    const char *oid = NULL, *qty = NULL, *ts = NULL, *epoch = NULL;
    out->in.campaign = out->campaign;
    out->in.user = out->user;
    out->in.path = out->path;
    out->in.idem = out->idem;
    for (size_t i = 0; i + 1 < dlock__reply_count(f); i += 2) {
        size_t kl = 0, vl = 0;
        const char *k = dlock__reply_str(dlock__reply_at(f, i), &kl);
        const char *v = dlock__reply_str(dlock__reply_at(f, i + 1), &vl);
        if (!k || !v) continue;
        bool fits = vl < 65;
        if (strcmp(k, "order_id") == 0) oid = v;
        else if (strcmp(k, "qty") == 0) qty = v;
        else if (strcmp(k, "ts_ms") == 0) ts = v;
        else if (strcmp(k, "epoch") == 0) epoch = v;
        else if (strcmp(k, "idem") == 0 && fits) memcpy(out->idem, v, vl + 1);
        else if (strcmp(k, "campaign") == 0 && fits) memcpy(out->campaign, v, vl + 1);
        else if (strcmp(k, "user") == 0 && fits) memcpy(out->user, v, vl + 1);
        else if (strcmp(k, "path") == 0 && vl < sizeof(out->path)) memcpy(out->path, v, vl + 1);
    }
    char *end = NULL;
    unsigned long long id = oid ? strtoull(oid, &end, 10) : 0;
    out->in.order_id = (oid && end != oid && *end == '\0' && oid[0] != '-') ? (uint64_t)id : 0;
    out->in.qty = qty ? parse_i64(qty) : -1;
    out->in.created_ms = ts ? parse_i64(ts) : dlock__wall_ms();
    out->in.epoch = epoch ? parse_i64(epoch) : 1; /* no field: the first timeline */
    if (!out->path[0]) snprintf(out->path, sizeof(out->path), "redis");
    if (out->idem[0] && !sk_valid_idem_key(out->idem)) out->idem[0] = '\0'; /* the order stands without it */
    out->why = sk_db_order_invalid(&out->in);
    if (!out->why && strcmp(out->campaign, c->id) != 0) out->why = "campaign field does not match the stream";
}

/* Parses the entries array of a stream reply into w->buf; returns count. */
static int entries_parse(worker *w, const camp *c, const dlock__reply *arr)
{
    int n = 0;
    for (size_t i = 0; arr && i < dlock__reply_count(arr) && n < w->o->batch; i++)
        entry_parse(c, dlock__reply_at(arr, i), &w->buf[n++]);
    return n;
}

static int xack(worker *w, const camp *c, const entry *es, int n, const bool *which)
{
    const char **argv = calloc((size_t)n + 3, sizeof(*argv));
    if (!argv) return DLOCK_ENOMEM;
    int argc = 0;
    argv[argc++] = "XACK";
    argv[argc++] = c->key;
    argv[argc++] = SK_PERSIST_GROUP;
    for (int i = 0; i < n; i++)
        if (!which || which[i]) argv[argc++] = es[i].id;
    int err = 0;
    if (argc > 3) {
        dlock__reply *r;
        err = cmd(w, argc, argv, &r);
        if (!err) dlock__reply_free(r);
    }
    free(argv);
    return err;
}

/* XADD dead ...; XACK; HDEL errors; HINCRBY stats: one script (one slot). */
static int dead_letter(worker *w, const camp *c, const entry *e, const char *why)
{
    char deliv[24];
    snprintf(deliv, sizeof(deliv), "%" PRId64, e->deliveries);
    const char *args[8 + 2 * MAX_FIELDS];
    int n = 0;
    args[n++] = SK_PERSIST_GROUP;
    args[n++] = e->id;
    args[n++] = "entry_id";
    args[n++] = e->id;
    args[n++] = "error";
    args[n++] = why;
    args[n++] = "deliveries";
    args[n++] = deliv;
    for (size_t i = 0; e->fields && i + 1 < dlock__reply_count(e->fields) && n + 2 <= 8 + 2 * MAX_FIELDS; i += 2) {
        args[n++] = rstr(dlock__reply_at(e->fields, i));
        args[n++] = rstr(dlock__reply_at(e->fields, i + 1));
    }
    const char *keys[] = {c->dead, c->key, c->errs, c->stats};
    dlock__reply *r = NULL;
    int err = sk__eval_script(w->rc, &sk_script_dead_letter, 4, keys, n, args, &r);
    if (!err && dlock__reply_kind(r) != DLOCK__R_STRING) err = DLOCK_ESERVER;
    if (err == DLOCK_ESERVER && r) wlog(w, "redis dead letter: %s", dlock__reply_str(r, NULL));
    dlock__reply_free(r);
    if (err) {
        w->st.redis_errors++;
        return err;
    }
    w->st.dead_lettered++;
    wlog(w, "campaign %s: entry %s dead-lettered after %" PRId64 " deliveries: %s", c->id, e->id,
         e->deliveries, why);
    return 0;
}

/* Delivery counts of history entries (XPENDING first..last, this consumer). */
static void deliveries_fill(worker *w, const camp *c, entry *es, int n)
{
    char cnt[16];
    snprintf(cnt, sizeof(cnt), "%d", n);
    const char *argv[] = {"XPENDING", c->key, SK_PERSIST_GROUP, es[0].id, es[n - 1].id, cnt, w->consumer};
    dlock__reply *r;
    if (cmd(w, 7, argv, &r)) return;
    for (size_t i = 0; i < dlock__reply_count(r); i++) {
        const dlock__reply *p = dlock__reply_at(r, i);
        const char *id = rstr(dlock__reply_at(p, 0));
        for (int j = 0; j < n; j++)
            if (strcmp(es[j].id, id) == 0) es[j].deliveries = rint64(dlock__reply_at(p, 3));
    }
    dlock__reply_free(r);
}

static void last_error(worker *w, const camp *c, const char *id, char *out, size_t len)
{
    snprintf(out, len, "delivered too often without a commit");
    const char *argv[] = {"HGET", c->errs, id};
    dlock__reply *r;
    if (cmd(w, 3, argv, &r)) return;
    if (dlock__reply_kind(r) == DLOCK__R_STRING) snprintf(out, len, "%s", rstr(r));
    dlock__reply_free(r);
}

static void note_error(worker *w, const camp *c, const char *id, const char *why)
{
    const char *argv[] = {"HSET", c->errs, id, why};
    dlock__reply *r;
    if (cmd(w, 4, argv, &r) == 0) dlock__reply_free(r);
}

static void count_stats(worker *w, const camp *c, int64_t persisted, int64_t rejected, int64_t dups, int64_t stale)
{
    w->st.persisted += persisted;
    w->st.rejected += rejected;
    w->st.duplicates += dups;
    w->st.stale += stale;
    sk__pipeline_add_key(w->rc, c->stats, "stale", stale);
    char p[24], rj[24], d[24];
    snprintf(p, sizeof(p), "%" PRId64, persisted);
    snprintf(rj, sizeof(rj), "%" PRId64, rejected);
    snprintf(d, sizeof(d), "%" PRId64, dups);
    const char *a1[] = {"HINCRBY", c->stats, "persisted", p};
    const char *a2[] = {"HINCRBY", c->stats, "rejected", rj};
    const char *a3[] = {"HINCRBY", c->stats, "duplicates", d};
    int argcs[] = {4, 4, 4};
    const char *const *argvs[] = {a1, a2, a3};
    dlock__reply *rs[3] = {0};
    if (dlock__conn_pipeline(w->rc, 3, argcs, argvs, NULL, rs) == 0)
        for (int i = 0; i < 3; i++) dlock__reply_free(rs[i]);
}

/* Applies entries [0,n) of w->buf that are not yet settled (keep[i]). */
static int apply_and_ack(worker *w, const camp *c, entry *es, int n, bool *keep)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (keep[i]) w->ins[m++] = es[i].in;
    if (m == 0) return xack(w, c, es, n, keep);
    int rc = sk_db_apply_batch(w->db, w->ins, (size_t)m, w->results);
    if (rc == 0) {
        int64_t p = 0, rj = 0, d = 0, stale = 0;
        for (int i = 0; i < m; i++) {
            if (w->results[i] == SK_APPLY_PERSISTED) p++;
            else if (w->results[i] == SK_APPLY_REJECTED) rj++;
            else if (w->results[i] == SK_APPLY_STALE) stale++;
            else d++;
        }
        w->st.batches++;
        /* before the XACK: a mark lost with a master comes with a redelivery */
        if (sk_confirm_answers(w->rc, w->db, c->lay, c->j, w->ins, w->results, (size_t)m) < 0) w->st.redis_errors++;
        int err = xack(w, c, es, n, keep);
        count_stats(w, c, p, rj + stale, d, stale);
        if (rj) wlog(w, "campaign %s: %" PRId64 " order(s) rejected by the database guard", c->id, rj);
        if (stale) wlog(w, "campaign %s: %" PRId64 " order(s) of an old timeline refused (stale timeline)", c->id, stale);
        return err;
    }
    w->st.db_errors++;
    if (sk_db_ping(w->db) != 0) { /* an outage, not a bad entry: touch nothing, wait */
        wlog(w, "database unreachable (%s): pausing", sk_db_errmsg(w->db));
        w->db_down = true;
        return SK_EDB;
    }
    wlog(w, "campaign %s: batch of %d failed (%s); retrying one by one", c->id, m, sk_db_errmsg(w->db));
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (!keep[i]) continue;
        int res = 0;
        if (sk_db_apply_batch(w->db, &es[i].in, 1, &res) != 0) {
            failed++;
            w->st.db_errors++;
            note_error(w, c, es[i].id, sk_db_errmsg(w->db));
            continue;
        }
        bool stale = res == SK_APPLY_STALE;
        count_stats(w, c, res == SK_APPLY_PERSISTED, res == SK_APPLY_REJECTED || stale, res == SK_APPLY_DUPLICATE,
                    stale);
        if (sk_confirm_answers(w->rc, w->db, c->lay, c->j, &es[i].in, &res, 1) < 0) w->st.redis_errors++;
        xack(w, c, &es[i], 1, NULL);
    }
    /* The failed entries stay pending; the flow of new entries goes on and
     * they are retried (each retry is a delivery) a little later. */
    if (failed) w->next_own_ms = dlock__now_ms() + OWN_RETRY_MS;
    return 0;
}

/* Handles n parsed entries of campaign c; history: they were delivered
 * before (own pending or reclaimed), so delivery counts matter. */
static int process(worker *w, const camp *c, int n, bool history)
{
    entry *es = w->buf;
    bool *keep = calloc((size_t)n, sizeof(bool));
    if (!keep) return DLOCK_ENOMEM;
    if (history) deliveries_fill(w, c, es, n);
    int err = 0;
    for (int i = 0; i < n && !err; i++) {
        if (es[i].deleted) { /* trimmed away: nothing left to persist */
            err = xack(w, c, &es[i], 1, NULL);
        } else if (es[i].why) {
            err = dead_letter(w, c, &es[i], es[i].why);
        } else if (history && es[i].deliveries > w->o->max_deliveries) {
            char why[256];
            last_error(w, c, es[i].id, why, sizeof(why));
            err = dead_letter(w, c, &es[i], why);
        } else {
            keep[i] = true;
        }
    }
    if (!err) err = apply_and_ack(w, c, es, n, keep);
    free(keep);
    return err;
}

/* ---- the rounds -------------------------------------------------------- */

/* XREADGROUP of own pending history ("0") of one campaign. */
static int read_own_pending(worker *w, const camp *c, int *n_out)
{
    char cnt[16];
    snprintf(cnt, sizeof(cnt), "%d", w->o->batch);
    const char *argv[] = {"XREADGROUP", "GROUP", SK_PERSIST_GROUP, w->consumer, "COUNT", cnt,
                          "STREAMS", c->key, "0"};
    dlock__reply *r;
    *n_out = 0;
    int err = cmd(w, 9, argv, &r);
    if (err) return err;
    const dlock__reply *s = dlock__reply_count(r) ? dlock__reply_at(r, 0) : NULL;
    int n = s ? entries_parse(w, c, dlock__reply_at(s, 1)) : 0;
    *n_out = n;
    err = n ? process(w, c, n, true) : 0;
    dlock__reply_free(r);
    return err;
}

static int reclaim(worker *w, camp *c, int *n_out)
{
    char cnt[16], idle[24];
    snprintf(cnt, sizeof(cnt), "%d", w->o->batch);
    snprintf(idle, sizeof(idle), "%" PRId64, w->o->claim_idle_ms);
    const char *argv[] = {"XAUTOCLAIM", c->key, SK_PERSIST_GROUP, w->consumer, idle, c->cursor, "COUNT", cnt};
    dlock__reply *r;
    *n_out = 0;
    int err = cmd(w, 8, argv, &r);
    if (err) return err;
    snprintf(c->cursor, sizeof(c->cursor), "%s", rstr(dlock__reply_at(r, 0)));
    int n = entries_parse(w, c, dlock__reply_at(r, 1));
    *n_out = n;
    if (n) {
        w->st.reclaimed += n;
        wlog(w, "campaign %s: reclaimed %d entries idle > %" PRId64 " ms", c->id, n, w->o->claim_idle_ms);
        err = process(w, c, n, true);
    }
    dlock__reply_free(r);
    return err;
}

/* Before blocking: not at all when announcements wait, else the waiter
 * learns which connection to unblock (its id changes at a reconnect). */
static bool may_block(worker *w)
{
    if (!w->ann) return true;
    if (sk_announce_queued(w->ann)) return false;
    const char *argv[] = {"CLIENT", "ID"};
    dlock__reply *r;
    if (cmd(w, 2, argv, &r) == 0) {
        sk_announce_set_target(w->ann, dlock__reply_kind(r) == DLOCK__R_INTEGER ? dlock__reply_int(r) : 0);
        dlock__reply_free(r);
    }
    return true;
}

/* Campaigns announced since the last round are consumed now. */
static void take_announced(worker *w)
{
    char ids[16][65];
    size_t n;
    while (w->ann && (n = sk_announce_take(w->ann, ids, 16)) > 0)
        for (size_t i = 0; i < n; i++) {
            if (!camp_find(w, ids[i])) wlog(w, "campaign %s: announced", ids[i]);
            camp_add(w, ids[i]);
        }
}

/* The entries of one campaign's stream from an XREADGROUP reply. */
static int take_stream(worker *w, const dlock__reply *st, int *n_out)
{
    const char *key = rstr(dlock__reply_at(st, 0));
    camp *c = NULL;
    for (size_t i = 0; i < w->ncamps && !c; i++)
        if (strcmp(w->camps[i].key, key) == 0) c = &w->camps[i];
    if (!c) return 0;
    int n = entries_parse(w, c, dlock__reply_at(st, 1));
    *n_out += n;
    return n ? process(w, c, n, false) : 0;
}

#define XREAD_ARGC 11 /* XREADGROUP GROUP g c COUNT n BLOCK ms STREAMS key > */

/* XREADGROUP ... [BLOCK ms] STREAMS key > into argv (XREAD_ARGC slots). */
static int xread_argv(const worker *w, const camp *c, const char *cnt, const char *blk, const char **argv)
{
    int n = 0;
    const char *head[] = {"XREADGROUP", "GROUP", SK_PERSIST_GROUP, w->consumer, "COUNT", cnt};
    for (size_t i = 0; i < 6; i++) argv[n++] = head[i];
    if (blk) {
        argv[n++] = "BLOCK";
        argv[n++] = blk;
    }
    argv[n++] = "STREAMS";
    argv[n++] = c->key;
    argv[n++] = ">";
    return n;
}

/* Replies of a per-stream read: entries processed, errors counted. */
static int take_replies(worker *w, dlock__reply **rs, size_t n, int *n_out)
{
    int err = 0;
    for (size_t i = 0; i < n; i++) {
        dlock__reply *r = rs[i];
        if (r && dlock__reply_kind(r) == DLOCK__R_ERROR) {
            if (dlock__reply_is_error(r, "NOGROUP")) w->nogroup = true;
            wlog(w, "redis XREADGROUP: %s", dlock__reply_str(r, NULL));
            w->st.redis_errors++;
        } else if (r && dlock__reply_kind(r) == DLOCK__R_ARRAY && !err) {
            for (size_t s = 0; s < dlock__reply_count(r) && !err; s++) err = take_stream(w, dlock__reply_at(r, s), n_out);
        }
        dlock__reply_free(r);
    }
    return err;
}

/* One stream at a time (a node is down); an error only when all failed. */
static int read_each(worker *w, const int *argcs, const char *const **vv, size_t n, int *n_out)
{
    int failed = 0, err = 0;
    for (size_t i = 0; i < n && !err; i++) {
        dlock__reply *r = NULL;
        int e = sk_err_from_common(dlock__conn_cmd(w->rc, argcs[i], (const char **)vv[i], NULL, &r));
        if (e) {
            w->st.redis_errors++;
            failed++;
            continue;
        }
        err = take_replies(w, &r, 1, n_out);
    }
    return err ? err : (size_t)failed == n ? DLOCK_ECONN : 0;
}

/* On a Cluster the campaigns' streams live in different slots, most often
 * on different masters, and one command may name keys of one slot only:
 * one XREADGROUP per stream, pipelined (the router sends each to the
 * node serving its slot and follows MOVED/ASK when a slot moves with its
 * stream and group). When none had anything, one short BLOCK on one
 * stream, turn by turn: announcements and the other nodes' streams wait
 * at most CLUSTER_BLOCK_MS (no CLIENT UNBLOCK across nodes). */
#define CLUSTER_BLOCK_MS 20
static int read_new_cluster(worker *w, bool block, int *n_out)
{
    size_t n = w->ncamps;
    int *argcs = calloc(n, sizeof(*argcs));
    const char **argvs = calloc(n * XREAD_ARGC, sizeof(*argvs));
    const char *const **vv = calloc(n, sizeof(*vv));
    dlock__reply **rs = calloc(n, sizeof(*rs));
    char cnt[16], blk[24];
    snprintf(cnt, sizeof(cnt), "%d", w->o->batch);
    int64_t bms = w->o->block_ms < CLUSTER_BLOCK_MS ? w->o->block_ms : CLUSTER_BLOCK_MS;
    snprintf(blk, sizeof(blk), "%" PRId64, bms);
    int err = DLOCK_ENOMEM;
    if (argcs && argvs && vv && rs) {
        for (size_t i = 0; i < n; i++) {
            argcs[i] = xread_argv(w, &w->camps[i], cnt, NULL, argvs + XREAD_ARGC * i);
            vv[i] = argvs + XREAD_ARGC * i;
        }
        err = sk_err_from_common(
            dlock__conn_pipeline(w->rc, n, argcs, (const char *const *const *)vv, NULL, rs));
        if (err) w->st.redis_errors++;
        if (err) err = read_each(w, argcs, vv, n, n_out); /* a node down: the others still */
        else err = take_replies(w, rs, n, n_out);
    }
    if (!err && *n_out == 0 && block && bms > 0) {
        const char *one[XREAD_ARGC];
        int argc = xread_argv(w, &w->camps[w->block_turn++ % n], cnt, blk, one);
        dlock__reply *r = NULL;
        err = sk_err_from_common(dlock__conn_cmd(w->rc, argc, one, NULL, &r));
        if (err) w->st.redis_errors++;
        else err = take_replies(w, &r, 1, n_out);
    }
    free(argcs);
    free(argvs);
    free((void *)vv);
    free(rs);
    return err;
}

static int read_new(worker *w, bool block, int *n_out)
{
    *n_out = 0;
    if (w->cluster) return read_new_cluster(w, block, n_out);
    block = block && may_block(w);
    size_t argc = 0, cap = 10 + 2 * w->ncamps;
    const char **argv = calloc(cap, sizeof(*argv));
    if (!argv) return DLOCK_ENOMEM;
    char cnt[16], blk[24];
    snprintf(cnt, sizeof(cnt), "%d", w->o->batch);
    snprintf(blk, sizeof(blk), "%" PRId64, w->o->block_ms);
    argv[argc++] = "XREADGROUP";
    argv[argc++] = "GROUP";
    argv[argc++] = SK_PERSIST_GROUP;
    argv[argc++] = w->consumer;
    argv[argc++] = "COUNT";
    argv[argc++] = cnt;
    if (block) {
        argv[argc++] = "BLOCK";
        argv[argc++] = blk;
    }
    argv[argc++] = "STREAMS";
    for (size_t i = 0; i < w->ncamps; i++) argv[argc++] = w->camps[i].key;
    for (size_t i = 0; i < w->ncamps; i++) argv[argc++] = ">";
    dlock__reply *r;
    int err = cmd(w, (int)argc, argv, &r);
    free(argv);
    if (err) return err;
    for (size_t s = 0; s < dlock__reply_count(r) && !err; s++) err = take_stream(w, dlock__reply_at(r, s), n_out);
    dlock__reply_free(r);
    return err;
}

int sk_persist_backlog_key(dlock__conn *rc, const char *key, int64_t *pending_out, int64_t *lag_out)
{
    *pending_out = 0;
    *lag_out = 0;
    const char *argv[] = {"XINFO", "GROUPS", key};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(rc, 3, argv, NULL, &r));
    if (err) return err;
    if (dlock__reply_kind(r) == DLOCK__R_ERROR) { /* no stream yet */
        dlock__reply_free(r);
        return 0;
    }
    char last[32] = "";
    bool found = false, have_lag = false;
    for (size_t g = 0; g < dlock__reply_count(r); g++) {
        const dlock__reply *grp = dlock__reply_at(r, g);
        const char *name = NULL;
        for (size_t i = 0; i + 1 < dlock__reply_count(grp); i += 2)
            if (strcmp(rstr(dlock__reply_at(grp, i)), "name") == 0) name = rstr(dlock__reply_at(grp, i + 1));
        if (!name || strcmp(name, SK_PERSIST_GROUP) != 0) continue;
        found = true;
        for (size_t i = 0; i + 1 < dlock__reply_count(grp); i += 2) {
            const char *k = rstr(dlock__reply_at(grp, i));
            const dlock__reply *v = dlock__reply_at(grp, i + 1);
            if (strcmp(k, "pending") == 0) *pending_out = rint64(v);
            if (strcmp(k, "last-delivered-id") == 0) snprintf(last, sizeof(last), "%s", rstr(v));
            if (strcmp(k, "lag") == 0 && dlock__reply_kind(v) == DLOCK__R_INTEGER) {
                *lag_out = dlock__reply_int(v);
                have_lag = true;
            }
        }
    }
    dlock__reply_free(r);
    if (have_lag) return 0;
    /* lag: entries after last-delivered-id (exact, also when XINFO's lag is nil) */
    char from[40];
    snprintf(from, sizeof(from), "(%s", found ? last : "0-0");
    if (!found) snprintf(from, sizeof(from), "-");
    const char *xr[] = {"XRANGE", key, from, "+", "COUNT", "1000000"};
    const char *xl[] = {"XLEN", key};
    r = NULL;
    err = sk_err_from_common(found ? dlock__conn_cmd(rc, 6, xr, NULL, &r)
                                   : dlock__conn_cmd(rc, 2, xl, NULL, &r));
    if (err) return err;
    *lag_out = dlock__reply_kind(r) == DLOCK__R_ARRAY ? (int64_t)dlock__reply_count(r) : dlock__reply_int(r);
    dlock__reply_free(r);
    return 0;
}

int sk_persist_backlog(dlock__conn *rc, const char *campaign, int64_t *pending_out, int64_t *lag_out)
{
    *pending_out = *lag_out = 0;
    sk_buckets *lay = malloc(sizeof(*lay));
    if (!lay) return DLOCK_ENOMEM;
    int err = sk_layout_read(rc, campaign, lay);
    if (err == SK_ENOTFOUND) sk_buckets_single(campaign, lay), err = 0; /* not heated: today's stream */
    for (int j = 0; !err && j < lay->k; j++) {
        char key[128];
        int64_t p = 0, l = 0;
        sk_bucket_key(lay, j, "orders", key, sizeof(key));
        err = sk_persist_backlog_key(rc, key, &p, &l);
        *pending_out += p;
        *lag_out += l;
    }
    free(lay);
    return err;
}

static bool all_drained(worker *w)
{
    for (size_t i = 0; i < w->ncamps; i++) {
        int64_t pending = 0, lag = 0;
        if (sk_persist_backlog_key(w->rc, w->camps[i].key, &pending, &lag) || pending || lag) return false;
    }
    return true;
}

/* Whether every bucket of the campaign whose bucket 0 is camps[i] is
 * open (its K camps follow it). */
static bool all_open(const worker *w, size_t i)
{
    for (int j = 0; j < w->camps[i].lay->k; j++)
        if (i + (size_t)j >= w->ncamps || !w->camps[i + (size_t)j].open) return false;
    return true;
}

/* Tentative orders finalised, refused ones given back, and the reserve
 * handed back where Redis sold out; once per campaign, only when every
 * bucket of it is open on its master (no barrier due). */
static void reserve_pass(worker *w)
{
    sk_reserve_stats rs = {0};
    for (size_t i = 0; i < w->ncamps; i++) {
        if (w->camps[i].j != 0 || !all_open(w, i)) continue;
        sk_reserve_finalise(w->db, w->rc, w->camps[i].id, w->o->batch, &rs);
        sk_reserve_handback(w->db, w->rc, w->camps[i].id, &rs);
    }
    w->st.confirmed += rs.confirmed;
    w->st.lost += rs.lost;
    w->st.handbacks += rs.handbacks;
}

/* The barrier after a change of master, one step per bucket (barrier.h):
 * the run id of the node serving each bucket's slot is read at every
 * pass (on a Cluster every master has its own; one server answers for
 * all), so a failover, a restart behind the same address or a slot moved
 * to another master is seen within one pass. */
static void barrier_pass(worker *w)
{
    for (size_t i = 0; i < w->ncamps; i++) {
        camp *c = &w->camps[i];
        char run_id[41], what[96] = "";
        if (c->lay->k > 1) snprintf(what, sizeof(what), " bucket %d", c->j);
        if (sk_barrier_bucket_run_id(w->rc, c->lay, c->j, run_id) != 0) {
            c->open = false;
            continue;
        }
        bool was_due = c->bar.started_ms != 0;
        int st = sk_barrier_step_bucket(w->db, w->rc, c->id, c->lay, c->j, run_id, &c->bar);
        c->open = st == SK_BARRIER_OPEN;
        if (st < 0) wlog(w, "campaign %s%s: barrier: %s", c->id, what, sk_strerror(st));
        if (!was_due && c->bar.started_ms)
            wlog(w, "campaign %s%s: new master (run id %s): barrier, draining", c->id, what, run_id);
        if (!c->bar.opened) continue;
        w->st.barriers++;
        w->st.barrier_ms = c->bar.duration_ms;
        wlog(w, "campaign %s%s: barrier done in %" PRId64 " ms: epoch %" PRId64 ", %" PRId64 " orders and %" PRId64
                " give-backs mirrored, %" PRId64 " handbacks applied again; selling on this master",
             c->id, what, c->bar.duration_ms, c->bar.epoch, c->bar.mirrored, c->bar.given_back, c->bar.handbacks);
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
    return w->cluster && redis ? 0 : err;
}

static int worker_round(worker *w)
{
    int64_t now = dlock__now_ms();
    if (w->nogroup) { /* the streams' groups are gone: forget and re-create them all */
        wlog(w, "consumer group missing (Redis restarted or failed over?): re-creating");
        camps_clear(w);
        w->nogroup = false;
        w->next_discover_ms = 0;
    }
    if (w->db_down) { /* delivering entries now would only count failed deliveries */
        if (sk_db_ping(w->db) != 0) return SK_EDB;
        wlog(w, "database reachable again");
        w->db_down = false;
    }
    take_announced(w);
    if (now >= w->next_discover_ms) {
        discover(w);
        w->next_discover_ms = now + 2000;
    }
    if (w->ncamps == 0) {
        dlock__sleep_ms(w->o->block_ms);
        return w->o->drain ? 1 : 0;
    }
    if (now >= w->next_barrier_ms) {
        barrier_pass(w);
        int64_t every = w->o->sweep_interval_ms < BARRIER_EVERY_MS ? w->o->sweep_interval_ms : BARRIER_EVERY_MS;
        w->next_barrier_ms = now + every;
    }
    int work = 0, n = 0, err = 0;
    for (size_t i = 0; i < w->ncamps && !err && now >= w->next_own_ms; i++) {
        err = one_node_down(w, read_own_pending(w, &w->camps[i], &n));
        work += n;
    }
    if (!err && now >= w->next_claim_ms) {
        for (size_t i = 0; i < w->ncamps && !err; i++) {
            err = one_node_down(w, reclaim(w, &w->camps[i], &n));
            work += n;
        }
        int64_t every = w->o->claim_idle_ms / 2;
        w->next_claim_ms = now + (every < 100 ? 100 : every);
    }
    if (!err) {
        err = read_new(w, work == 0, &n);
        work += n;
    }
    if (dlock__now_ms() >= w->next_sweep_ms) { /* timeouts (if on), mirrors, releases */
        sk_lifecycle_sweep(w->db, w->rc, w->o->campaign, w->o->pay_timeout_ms, w->o->batch, &w->st.cancelled,
                           &w->st.released);
        reserve_pass(w);
        w->next_sweep_ms = dlock__now_ms() + w->o->sweep_interval_ms;
    }
    if (err) return err;
    if (w->o->drain && work == 0 && all_drained(w)) return 1;
    return 0;
}

static int worker_init(worker *w, const sk_persist_opts *o, char *err, size_t errlen)
{
    memset(w, 0, sizeof(*w));
    w->o = o;
    if (!o->redis_url || !o->database_url || o->batch < 1 || o->batch > 10000 || o->block_ms < 0 ||
        o->claim_idle_ms < 1 || o->max_deliveries < 1 || (o->campaign && !sk_valid_campaign_id(o->campaign))) {
        snprintf(err, errlen, "invalid persister options");
        return SK_EINVAL;
    }
    if (o->consumer) {
        snprintf(w->consumer, sizeof(w->consumer), "%s", o->consumer);
    } else {
        char host[64] = "host", rnd[9];
        gethostname(host, sizeof(host) - 1);
        dlock__random_hex(rnd, 4);
        snprintf(w->consumer, sizeof(w->consumer), "%s-%ld-%s", host, (long)getpid(), rnd);
    }
    w->buf = calloc((size_t)o->batch, sizeof(entry));
    w->results = calloc((size_t)o->batch, sizeof(int));
    w->ins = calloc((size_t)o->batch, sizeof(sk_order_in));
    if (!w->buf || !w->results || !w->ins) {
        snprintf(err, errlen, "out of memory");
        return DLOCK_ENOMEM;
    }
    int rc = sk_db_open(o->database_url, &w->db, err, errlen);
    if (rc) return rc;
    rc = sk_persist_redis_open(o->redis_url, o->block_ms + 5000, &w->rc, err, errlen);
    if (rc) return rc;
    w->cluster = sk_persist_is_cluster(w->rc);
    if (w->cluster) wlog(w, "redis is a Cluster: one read per campaign stream, on the node of its slot");
    if (o->campaign) return 0;
    char why[256];
    if (sk_announce_start(o->redis_url, &w->ann, why, sizeof(why)) != 0) /* discovery still finds them */
        wlog(w, "campaign announcements not followed (%s): new campaigns are found every 2 s", why);
    return 0;
}

static void worker_free(worker *w)
{
    sk_announce_stop(w->ann);
    sk_db_close(w->db);
    dlock__conn_close(w->rc);
    camps_clear(w);
    free(w->camps);
    free(w->buf);
    free(w->results);
    free(w->ins);
}

int sk_persist_run(const sk_persist_opts *o, sk_persist_stats *stats_out, char *err, size_t errlen)
{
    worker w;
    int rc = worker_init(&w, o, err, errlen);
    if (rc) {
        worker_free(&w);
        return rc;
    }
    wlog(&w, "persister %s started (%s)", w.consumer, sk_db_kind(w.db));
    int attempt = 0;
    while (!(o->stop && atomic_load(o->stop))) {
        int r = worker_round(&w);
        if (stats_out) *stats_out = w.st;
        if (r == 1) break;
        if (r < 0) {
            int64_t pause = dlock__backoff_ms(50, attempt++, 2000);
            wlog(&w, "round failed (%s); retrying in %" PRId64 " ms", sk_strerror(r), pause);
            dlock__sleep_ms(pause);
        } else {
            attempt = 0;
        }
    }
    if (stats_out) *stats_out = w.st;
    wlog(&w, "persister %s stopping: persisted %" PRId64 " rejected %" PRId64 " duplicates %" PRId64
             " dead %" PRId64 " reclaimed %" PRId64 " cancelled %" PRId64,
         w.consumer, w.st.persisted, w.st.rejected, w.st.duplicates, w.st.dead_lettered, w.st.reclaimed,
         w.st.cancelled);
    worker_free(&w);
    return 0;
}
