/* persist_stream.c: consuming the order streams (persist_stream.h).
 * Design note:
 *  - one consumer (unique name) of group seckill-persist on every stream
 *    followed; the scheduler (persist.c) asks, each round, for (1) its own
 *    pending entries (a failed batch) with XREADGROUP ... 0, (2) every
 *    claim_idle_ms/2, entries idle on other (dead) consumers (XAUTOCLAIM),
 *    (3) new entries (BLOCK only when (1) and (2) found nothing);
 *  - a batch goes to the database in one transaction (sk_db_apply_batch);
 *    XACK follows the commit, so a crash between the two only causes a
 *    redelivery, which the order_id primary key turns into a no-op;
 *  - a batch that fails while the database answers a ping is retried entry
 *    by entry, so one poisoned entry cannot hold back the others; its error
 *    is kept in {c:<id>}:orders:errors and after max_deliveries deliveries
 *    it moves (dead_letter.lua: XADD dead + XACK) to {c:<id>}:orders:dead;
 *  - when the database does not answer, db_down is set and the scheduler
 *    reads nothing (which would count deliveries) until it does: an outage
 *    dead-letters nothing;
 *  - malformed entries can never succeed: they are dead-lettered at once. */
#include "persist_stream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "confirm.h"
#include "dlock/dlock.h"
#include "layout.h"
#include "release.h"
#include "rulebook.h"
#include "script.h"
#include "sk_err.h"
#include "util.h"

#define MAX_FIELDS 16
#define OWN_RETRY_MS 200 /* pause before an entry that failed is delivered again */

extern const dlock__script sk_script_dead_letter; /* lua/dead_letter.lua */

typedef struct sk_pentry {
    char id[32];
    const dlock__reply *fields; /* name/value array; lives as long as the reply */
    bool deleted;      /* XREADGROUP history of a deleted entry */
    const char *why;   /* malformed: reason */
    int64_t deliveries;
    sk_order_in in;
    char campaign[65], user[65], path[8], idem[65];
} entry;

int sk__pstream_init(sk_pstream *sm, sk_pctx *w, sk_pcamps *camps)
{
    memset(sm, 0, sizeof(*sm));
    sm->w = w;
    sm->camps = camps;
    sm->buf = calloc((size_t)w->o->batch, sizeof(entry));
    sm->results = calloc((size_t)w->o->batch, sizeof(int));
    sm->ins = calloc((size_t)w->o->batch, sizeof(sk_order_in));
    return sm->buf && sm->results && sm->ins ? 0 : DLOCK_ENOMEM;
}

void sk__pstream_free(sk_pstream *sm)
{
    free(sm->buf);
    free(sm->results);
    free(sm->ins);
    sm->buf = NULL;
    sm->results = NULL;
    sm->ins = NULL;
}

/* ---- entries ----------------------------------------------------------- */

/* The ms part of an entry id "<ms>-<seq>", or -1. */
static int64_t id_ms(const char *id)
{
    int64_t ms = 0;
    const char *p = id;
    for (; *p >= '0' && *p <= '9' && ms < INT64_MAX / 10 - 9; p++) ms = ms * 10 + (*p - '0');
    return p != id && *p == '-' ? ms : -1;
}

/* Fills out from one stream entry [id, [k, v, ...]]; out points into e.
 * Two formats (docs/design/seckill-contract.md, "Order stream entry"):
 * the compact one of purchase.lua (o u q e [k]: the campaign is the
 * stream's, the time the entry id's) and the one of every release before
 * it (order_id campaign user qty idem ts_ms path epoch), which instances
 * of such a release still write during a rolling upgrade. */
static void entry_parse(const sk_pcamp *c, const dlock__reply *e, entry *out)
{
    out->deleted = false;
    out->why = NULL;
    out->deliveries = 0;
    out->campaign[0] = out->user[0] = out->path[0] = out->idem[0] = '\0';
    snprintf(out->id, sizeof(out->id), "%s", sk__pctx_rstr(dlock__reply_at(e, 0)));
    const dlock__reply *f = dlock__reply_count(e) > 1 ? dlock__reply_at(e, 1) : NULL;
    out->fields = f;
    if (!f || dlock__reply_kind(f) != DLOCK__R_ARRAY) {
        out->deleted = true;
        return;
    }
    const char *oid = NULL, *qty = NULL, *ts = NULL, *epoch = NULL;
    bool compact = false;
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
        if (kl == 1) {
            compact = true;
            if (k[0] == 'o') oid = v;
            else if (k[0] == 'q') qty = v;
            else if (k[0] == 'e') epoch = v;
            else if (k[0] == 'k' && fits) memcpy(out->idem, v, vl + 1);
            else if (k[0] == 'u' && fits) memcpy(out->user, v, vl + 1);
        } else if (strcmp(k, "order_id") == 0) oid = v;
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
    out->in.qty = qty ? sk__pctx_i64(qty) : -1;
    out->in.epoch = epoch ? sk__pctx_i64(epoch) : 1; /* no field: the first timeline */
    if (compact) {
        /* written by purchase.lua on this stream: its campaign, path redis, and
         * the entry id's ms is the Redis clock of the decision */
        if (out->campaign[0] || out->path[0] || ts) out->why = "mixed stream entry formats";
        snprintf(out->campaign, sizeof(out->campaign), "%s", c->id);
        int64_t ms = id_ms(out->id);
        out->in.created_ms = ms > 0 ? ms : dlock__wall_ms();
    } else {
        out->in.created_ms = ts ? sk__pctx_i64(ts) : dlock__wall_ms();
    }
    if (!out->path[0]) snprintf(out->path, sizeof(out->path), "redis");
    if (out->idem[0] && !sk_valid_idem_key(out->idem)) out->idem[0] = '\0'; /* the order stands without it */
    if (!out->why) out->why = sk_db_order_invalid(&out->in);
    if (!out->why && strcmp(out->campaign, c->id) != 0) out->why = "campaign field does not match the stream";
}

/* Parses the entries array of a stream reply into sm->buf; returns count. */
static int entries_parse(sk_pstream *sm, const sk_pcamp *c, const dlock__reply *arr)
{
    sk_pctx *w = sm->w;
    int n = 0;
    for (size_t i = 0; arr && i < dlock__reply_count(arr) && n < w->o->batch; i++)
        entry_parse(c, dlock__reply_at(arr, i), &sm->buf[n++]);
    return n;
}

static int xack(sk_pctx *w, const sk_pcamp *c, const entry *es, int n, const bool *which)
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
        err = sk__pctx_cmd(w, argc, argv, &r);
        if (!err) dlock__reply_free(r);
    }
    free(argv);
    return err;
}

/* XADD dead ...; XACK; HDEL errors; HINCRBY stats: one script (one slot). */
static int dead_letter(sk_pctx *w, const sk_pcamp *c, const entry *e, const char *why)
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
        args[n++] = sk__pctx_rstr(dlock__reply_at(e->fields, i));
        args[n++] = sk__pctx_rstr(dlock__reply_at(e->fields, i + 1));
    }
    const char *keys[] = {c->dead, c->key, c->errs, c->stats};
    dlock__reply *r = NULL;
    int err = sk__eval_script(w->rc, &sk_script_dead_letter, 4, keys, n, args, &r);
    if (!err && dlock__reply_kind(r) != DLOCK__R_STRING) err = DLOCK_ESERVER;
    if (err == DLOCK_ESERVER && r) sk__pctx_log(w, "redis dead letter: %s", dlock__reply_str(r, NULL));
    dlock__reply_free(r);
    if (err) {
        w->st.redis_errors++;
        return err;
    }
    w->st.dead_lettered++;
    sk__pctx_log(w, "campaign %s: entry %s dead-lettered after %" PRId64 " deliveries: %s", c->id, e->id,
         e->deliveries, why);
    return 0;
}

/* Delivery counts of history entries (XPENDING first..last, this consumer). */
static void deliveries_fill(sk_pctx *w, const sk_pcamp *c, entry *es, int n)
{
    char cnt[16];
    snprintf(cnt, sizeof(cnt), "%d", n);
    const char *argv[] = {"XPENDING", c->key, SK_PERSIST_GROUP, es[0].id, es[n - 1].id, cnt, w->consumer};
    dlock__reply *r;
    if (sk__pctx_cmd(w, 7, argv, &r)) return;
    for (size_t i = 0; i < dlock__reply_count(r); i++) {
        const dlock__reply *p = dlock__reply_at(r, i);
        const char *id = sk__pctx_rstr(dlock__reply_at(p, 0));
        for (int j = 0; j < n; j++)
            if (strcmp(es[j].id, id) == 0) es[j].deliveries = sk__pctx_rint(dlock__reply_at(p, 3));
    }
    dlock__reply_free(r);
}

static void last_error(sk_pctx *w, const sk_pcamp *c, const char *id, char *out, size_t len)
{
    snprintf(out, len, "delivered too often without a commit");
    const char *argv[] = {"HGET", c->errs, id};
    dlock__reply *r;
    if (sk__pctx_cmd(w, 3, argv, &r)) return;
    if (dlock__reply_kind(r) == DLOCK__R_STRING) snprintf(out, len, "%s", sk__pctx_rstr(r));
    dlock__reply_free(r);
}

static void note_error(sk_pctx *w, const sk_pcamp *c, const char *id, const char *why)
{
    const char *argv[] = {"HSET", c->errs, id, why};
    dlock__reply *r;
    if (sk__pctx_cmd(w, 4, argv, &r) == 0) dlock__reply_free(r);
}

static void count_stats(sk_pctx *w, const sk_pcamp *c, int64_t persisted, int64_t rejected, int64_t dups, int64_t stale)
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

/* Applies entries [0,n) of sm->buf that are not yet settled (keep[i]). */
static int apply_and_ack(sk_pstream *sm, const sk_pcamp *c, entry *es, int n, bool *keep)
{
    sk_pctx *w = sm->w;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (keep[i]) sm->ins[m++] = es[i].in;
    if (m == 0) return xack(w, c, es, n, keep);
    int rc = sk_db_apply_batch(w->db, sm->ins, (size_t)m, sm->results);
    if (rc == 0) {
        int64_t p = 0, rj = 0, d = 0, stale = 0;
        for (int i = 0; i < m; i++) {
            if (sm->results[i] == SK_APPLY_PERSISTED) p++;
            else if (sm->results[i] == SK_APPLY_REJECTED) rj++;
            else if (sm->results[i] == SK_APPLY_STALE) stale++;
            else d++;
        }
        w->st.batches++;
        /* before the XACK: a mark lost with a master comes with a redelivery */
        if (sk_confirm_answers(w->rc, w->db, c->lay, c->j, sm->ins, sm->results, (size_t)m) < 0)
            w->st.redis_errors++;
        int err = xack(w, c, es, n, keep);
        count_stats(w, c, p, rj + stale, d, stale);
        if (rj) sk__pctx_log(w, "campaign %s: %" PRId64 " order(s) rejected by the database guard", c->id, rj);
        if (stale)
            sk__pctx_log(w, "campaign %s: %" PRId64 " order(s) of an old timeline refused (stale timeline)", c->id,
                         stale);
        return err;
    }
    w->st.db_errors++;
    if (sk_db_ping(w->db) != 0) { /* an outage, not a bad entry: touch nothing, wait */
        sk__pctx_log(w, "database unreachable (%s): pausing", sk_db_errmsg(w->db));
        sm->db_down = true;
        return SK_EDB;
    }
    sk__pctx_log(w, "campaign %s: batch of %d failed (%s); retrying one by one", c->id, m, sk_db_errmsg(w->db));
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
    if (failed) sm->next_own_ms = dlock__now_ms() + OWN_RETRY_MS;
    return 0;
}

/* Handles n parsed entries of campaign c; history: they were delivered
 * before (own pending or reclaimed), so delivery counts matter. */
static int process(sk_pstream *sm, const sk_pcamp *c, int n, bool history)
{
    sk_pctx *w = sm->w;
    entry *es = sm->buf;
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
    if (!err) err = apply_and_ack(sm, c, es, n, keep);
    free(keep);
    return err;
}

/* ---- the reads --------------------------------------------------------- */

int sk__pstream_own(sk_pstream *sm, const sk_pcamp *c, int *n_out)
{
    sk_pctx *w = sm->w;
    char cnt[16];
    snprintf(cnt, sizeof(cnt), "%d", w->o->batch);
    const char *argv[] = {"XREADGROUP", "GROUP", SK_PERSIST_GROUP, w->consumer, "COUNT", cnt,
                          "STREAMS", c->key, "0"};
    dlock__reply *r;
    *n_out = 0;
    int err = sk__pctx_cmd(w, 9, argv, &r);
    if (err) return err;
    const dlock__reply *s = dlock__reply_count(r) ? dlock__reply_at(r, 0) : NULL;
    int n = s ? entries_parse(sm, c, dlock__reply_at(s, 1)) : 0;
    *n_out = n;
    err = n ? process(sm, c, n, true) : 0;
    dlock__reply_free(r);
    return err;
}

int sk__pstream_reclaim(sk_pstream *sm, sk_pcamp *c, int *n_out)
{
    sk_pctx *w = sm->w;
    char cnt[16], idle[24];
    snprintf(cnt, sizeof(cnt), "%d", w->o->batch);
    snprintf(idle, sizeof(idle), "%" PRId64, w->o->claim_idle_ms);
    const char *argv[] = {"XAUTOCLAIM", c->key, SK_PERSIST_GROUP, w->consumer, idle, c->cursor, "COUNT", cnt};
    dlock__reply *r;
    *n_out = 0;
    int err = sk__pctx_cmd(w, 8, argv, &r);
    if (err) return err;
    snprintf(c->cursor, sizeof(c->cursor), "%s", sk__pctx_rstr(dlock__reply_at(r, 0)));
    int n = entries_parse(sm, c, dlock__reply_at(r, 1));
    *n_out = n;
    if (n) {
        w->st.reclaimed += n;
        sk__pctx_log(w, "campaign %s: reclaimed %d entries idle > %" PRId64 " ms", c->id, n, w->o->claim_idle_ms);
        err = process(sm, c, n, true);
    }
    dlock__reply_free(r);
    return err;
}

/* Before blocking: not at all when announcements wait, else the waiter
 * learns which connection to unblock (its id changes at a reconnect). */
static bool may_block(sk_pstream *sm)
{
    sk_pctx *w = sm->w;
    if (!sm->ann) return true;
    if (sk_announce_queued(sm->ann)) return false;
    const char *argv[] = {"CLIENT", "ID"};
    dlock__reply *r;
    if (sk__pctx_cmd(w, 2, argv, &r) == 0) {
        sk_announce_set_target(sm->ann, dlock__reply_kind(r) == DLOCK__R_INTEGER ? dlock__reply_int(r) : 0);
        dlock__reply_free(r);
    }
    return true;
}

/* The entries of one campaign's stream from an XREADGROUP reply. */
static int take_stream(sk_pstream *sm, const dlock__reply *st, int *n_out)
{
    const char *key = sk__pctx_rstr(dlock__reply_at(st, 0));
    sk_pcamp *c = NULL;
    for (size_t i = 0; i < sm->camps->n && !c; i++)
        if (strcmp(sm->camps->v[i].key, key) == 0) c = &sm->camps->v[i];
    if (!c) return 0;
    int n = entries_parse(sm, c, dlock__reply_at(st, 1));
    *n_out += n;
    return n ? process(sm, c, n, false) : 0;
}

#define XREAD_ARGC 11 /* XREADGROUP GROUP g c COUNT n BLOCK ms STREAMS key > */

/* XREADGROUP ... [BLOCK ms] STREAMS key > into argv (XREAD_ARGC slots). */
static int xread_argv(const sk_pctx *w, const sk_pcamp *c, const char *cnt, const char *blk, const char **argv)
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
static int take_replies(sk_pstream *sm, dlock__reply **rs, size_t n, int *n_out)
{
    sk_pctx *w = sm->w;
    int err = 0;
    for (size_t i = 0; i < n; i++) {
        dlock__reply *r = rs[i];
        if (r && dlock__reply_kind(r) == DLOCK__R_ERROR) {
            if (dlock__reply_is_error(r, "NOGROUP")) w->nogroup = true;
            sk__pctx_log(w, "redis XREADGROUP: %s", dlock__reply_str(r, NULL));
            w->st.redis_errors++;
        } else if (r && dlock__reply_kind(r) == DLOCK__R_ARRAY && !err) {
            for (size_t s = 0; s < dlock__reply_count(r) && !err; s++)
                err = take_stream(sm, dlock__reply_at(r, s), n_out);
        }
        dlock__reply_free(r);
    }
    return err;
}

/* One stream at a time (a node is down); an error only when all failed. */
static int read_each(sk_pstream *sm, const int *argcs, const char *const **vv, size_t n, int *n_out)
{
    sk_pctx *w = sm->w;
    int failed = 0, err = 0;
    for (size_t i = 0; i < n && !err; i++) {
        dlock__reply *r = NULL;
        int e = sk_err_from_common(dlock__conn_cmd(w->rc, argcs[i], (const char **)vv[i], NULL, &r));
        if (e) {
            w->st.redis_errors++;
            failed++;
            continue;
        }
        err = take_replies(sm, &r, 1, n_out);
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
static int read_new_cluster(sk_pstream *sm, bool block, int *n_out)
{
    sk_pctx *w = sm->w;
    size_t n = sm->camps->n;
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
            argcs[i] = xread_argv(w, &sm->camps->v[i], cnt, NULL, argvs + XREAD_ARGC * i);
            vv[i] = argvs + XREAD_ARGC * i;
        }
        err = sk_err_from_common(
            dlock__conn_pipeline(w->rc, n, argcs, (const char *const *const *)vv, NULL, rs));
        if (err) w->st.redis_errors++;
        if (err) err = read_each(sm, argcs, vv, n, n_out); /* a node down: the others still */
        else err = take_replies(sm, rs, n, n_out);
    }
    if (!err && *n_out == 0 && block && bms > 0) {
        const char *one[XREAD_ARGC];
        int argc = xread_argv(w, &sm->camps->v[sm->block_turn++ % n], cnt, blk, one);
        dlock__reply *r = NULL;
        err = sk_err_from_common(dlock__conn_cmd(w->rc, argc, one, NULL, &r));
        if (err) w->st.redis_errors++;
        else err = take_replies(sm, &r, 1, n_out);
    }
    free(argcs);
    free(argvs);
    free((void *)vv);
    free(rs);
    return err;
}

int sk__pstream_read_new(sk_pstream *sm, bool block, int *n_out)
{
    sk_pctx *w = sm->w;
    *n_out = 0;
    if (w->cluster) return read_new_cluster(sm, block, n_out);
    block = block && may_block(sm);
    size_t argc = 0, cap = 10 + 2 * sm->camps->n;
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
    for (size_t i = 0; i < sm->camps->n; i++) argv[argc++] = sm->camps->v[i].key;
    for (size_t i = 0; i < sm->camps->n; i++) argv[argc++] = ">";
    dlock__reply *r;
    int err = sk__pctx_cmd(w, (int)argc, argv, &r);
    free(argv);
    if (err) return err;
    for (size_t s = 0; s < dlock__reply_count(r) && !err; s++) err = take_stream(sm, dlock__reply_at(r, s), n_out);
    dlock__reply_free(r);
    return err;
}
