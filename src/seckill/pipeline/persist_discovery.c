/* persist_discovery.c: finding the campaigns whose streams a worker
 * consumes (persist_discovery.h). Invariant: a campaign's K streams are
 * added together, each with its group created (XGROUP CREATE ... MKSTREAM,
 * BUSYGROUP is fine), or not at all; the database row of a campaign the
 * engine heated without a database is created from its Redis meta. */
#include "persist_discovery.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "layout.h"
#include "rulebook.h"
#include "sk_err.h"

static sk_pcamp *camp_find(sk_pcamps *cs, const char *id)
{
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i].id, id) == 0) return &cs->v[i];
    return NULL;
}

/* Creates the database row from {c:<id>}:meta (bucket 0's: it has the
 * layout, shards + bucket_tags) when the engine ran without a database
 * (the contract asks it to create it first; this is a safety net). */
static void camp_ensure_db(sk_pctx *w, const char *id)
{
    if (sk_db_campaign_get(w->db, id, NULL, NULL) != SK_ENOTFOUND) return;
    char key[96];
    sk_campaign_key(id, "meta", key, sizeof(key));
    const char *argv[] = {"HGETALL", key};
    dlock__reply *r;
    if (sk__pctx_cmd(w, 2, argv, &r)) return;
    sk_campaign c = {0};
    snprintf(c.id, sizeof(c.id), "%s", id);
    c.per_user_limit = 0;
    int have_stock = 0;
    for (size_t i = 0; i + 1 < dlock__reply_count(r); i += 2) {
        const char *k = sk__pctx_rstr(dlock__reply_at(r, i)), *v = sk__pctx_rstr(dlock__reply_at(r, i + 1));
        if (strcmp(k, "title") == 0) snprintf(c.title, sizeof(c.title), "%s", v);
        if (strcmp(k, "stock") == 0) c.stock = sk__pctx_i64(v), have_stock = 1;
        if (strcmp(k, "per_user_limit") == 0) c.per_user_limit = sk__pctx_i64(v);
        if (strcmp(k, "starts_at_ms") == 0) c.starts_at_ms = sk__pctx_i64(v);
        if (strcmp(k, "ends_at_ms") == 0) c.ends_at_ms = sk__pctx_i64(v);
        if (strcmp(k, "price_cents") == 0) c.price_cents = sk__pctx_i64(v);
        if (strcmp(k, "db_reserve") == 0) c.db_reserve = sk__pctx_i64(v);
        if (strcmp(k, "shards") == 0) c.shards = sk__pctx_i64(v);
        if (strcmp(k, "bucket_tags") == 0) snprintf(c.bucket_tags, sizeof(c.bucket_tags), "%s", v);
    }
    dlock__reply_free(r);
    if (!have_stock) return;
    if (c.price_cents < 0) c.price_cents = 0;
    if (c.db_reserve < 0 || c.db_reserve > c.stock) c.db_reserve = 0;
    if (c.shards <= 1) c.bucket_tags[0] = '\0';
    int rc = sk_db_campaign_create(w->db, &c);
    sk__pctx_log(w, "campaign %s: created in the database from Redis meta: %s", id, rc ? sk_strerror(rc) : "ok");
}

/* The layout of campaign id: bucket 0's meta when Redis has it, else the
 * database's definition, else one bucket (a stream nobody heated yet is
 * followed as today). 0, or a code: Redis unreachable, or a layout not
 * readable yet (the campaign is tried again at the next discovery). */
static int camp_layout(sk_pctx *w, const char *id, sk_buckets *out)
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
static int camp_stream(sk_pctx *w, sk_pcamp *c, const char *id, sk_buckets *lay, int j)
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

void sk__pcamps_clear(sk_pcamps *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        if (cs->v[i].j == 0) free(cs->v[i].lay);
    cs->n = 0;
}

void sk__pcamps_free(sk_pcamps *cs)
{
    sk__pcamps_clear(cs);
    free(cs->v);
    cs->v = NULL;
    cs->cap = 0;
}

static bool camps_room(sk_pcamps *cs, size_t more)
{
    if (cs->n + more <= cs->cap) return true;
    size_t cap = cs->cap ? 2 * cs->cap : 8;
    while (cap < cs->n + more) cap *= 2;
    sk_pcamp *n = realloc(cs->v, cap * sizeof(*n));
    if (!n) return false;
    cs->v = n;
    cs->cap = cap;
    return true;
}

/* Follows every bucket's stream of campaign id, or none of them yet. */
static void camp_add(sk_pctx *w, sk_pcamps *cs, const char *id)
{
    if (!sk_valid_campaign_id(id) || camp_find(cs, id)) return;
    sk_buckets *lay = malloc(sizeof(*lay));
    if (!lay) return;
    int err = camp_layout(w, id, lay);
    if (err || !camps_room(cs, (size_t)lay->k)) {
        if (err) sk__pctx_log(w, "campaign %s: bucket layout not readable yet (%s): retried", id, sk_strerror(err));
        free(lay);
        return;
    }
    for (int j = 0; j < lay->k && !err; j++) err = camp_stream(w, &cs->v[cs->n + (size_t)j], id, lay, j);
    if (err) { /* retried at the next discovery */
        free(lay);
        return;
    }
    camp_ensure_db(w, id);
    cs->n += (size_t)lay->k;
    if (lay->k == 1) sk__pctx_log(w, "campaign %s: consuming %s", id, cs->v[cs->n - 1].key);
    else sk__pctx_log(w, "campaign %s: consuming the streams of its %d buckets", id, lay->k);
}

typedef struct found {
    sk_pctx *w;
    sk_pcamps *cs;
} found;

static void db_camp_cb(const sk_campaign *c, int64_t remaining, void *ud)
{
    (void)remaining;
    found *f = ud;
    camp_add(f->w, f->cs, c->id);
}

void sk__pcamps_discover(sk_pctx *w, sk_pcamps *cs)
{
    if (w->o->campaign) {
        camp_add(w, cs, w->o->campaign);
        return;
    }
    const char *argv[] = {"SMEMBERS", "seckill:campaigns"};
    dlock__reply *r;
    if (sk__pctx_cmd(w, 2, argv, &r) == 0) {
        for (size_t i = 0; i < dlock__reply_count(r); i++) camp_add(w, cs, sk__pctx_rstr(dlock__reply_at(r, i)));
        dlock__reply_free(r);
    }
    found f = {w, cs};
    sk_db_campaign_list(w->db, db_camp_cb, &f);
}

/* Campaigns announced since the last round are consumed now. */
void sk__pcamps_take_announced(sk_pctx *w, sk_pcamps *cs, sk_announce *ann)
{
    char ids[16][65];
    size_t n;
    while (ann && (n = sk_announce_take(ann, ids, 16)) > 0)
        for (size_t i = 0; i < n; i++) {
            if (!camp_find(cs, ids[i])) sk__pctx_log(w, "campaign %s: announced", ids[i]);
            camp_add(w, cs, ids[i]);
        }
}

