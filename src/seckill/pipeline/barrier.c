/* barrier.c: the barrier after a change of master, run by seckill-persist
 * (and `seckill barrier`). Design note (docs/design/promise.md):
 *  - due when {c:<id>}:meta has runid or epoch (the campaign was heated by
 *    an engine that writes them) and meta.runid differs from the run id of
 *    the connected server; purchase.lua refuses to decide meanwhile;
 *  - the lock {c:<id>}:barrier (SET NX PX, value = owner) keeps one runner
 *    per campaign; every step renews it; the open is written only while
 *    it is held (barrier_mirror.lua "open", checked by Redis); the seal,
 *    each mirror page and the handback only while the runner still
 *    believes it by libdlock's validity rule (lock_valid: send time of the
 *    last renewal + lock_ms - drift), so a frozen Redis cannot make it
 *    write after that (the writes are idempotent anyway: below);
 *  - steps never block: while the group has entries pending or unread the
 *    caller keeps consuming and calls again, so a single persister drains
 *    its own backlog and then finishes the barrier;
 *  - seal before mirror: once campaign_stock.epoch is meta.epoch + 1 no
 *    order of the old timeline the database does not hold can get in, so
 *    the set of orders to mirror is final;
 *  - every write is idempotent (gates in Redis, epoch only grows), so a
 *    crash anywhere is repaired by running the barrier again.
 * A campaign of K > 1 buckets (buckets.h) has a barrier per bucket: each
 * bucket's meta has its own runid/epoch, and each bucket is drained on,
 * and mirrored into, its own master (only the orders of users whose home
 * bucket it is; handbacks belong to bucket 0). The database keeps one
 * timeline per campaign (campaign_stock.epoch), and every bucket's orders
 * are checked against it, so the seal is shared (docs/design/promise.md,
 * "Buckets"): under the campaign's seal lock {c:<id>}:sealing the runner
 * picks E = 1 + the highest epoch of the database and of every bucket's
 * meta, raises every other bucket open on its master to E (its later
 * orders carry E) and waits until each other bucket's stream is
 * persisted through the raise (a bucket not open: through its end), then
 * seals E and opens its own bucket with E. So no live bucket's order is
 * ever below the seal, and every order of a lost timeline of any bucket
 * is (it is below the E of the seal that followed its loss). K = 1 keeps
 * today's steps exactly (E = meta.epoch + 1, no seal lock). */
#include "barrier.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "layout.h"
#include "release.h"
#include "reserve.h"
#include "sk_err.h"
#include "util.h"

extern const dlock__script sk_script_barrier_mirror; /* lua/barrier_mirror.lua */
extern const dlock__script sk_script_node_runid; /* lua/node_runid.lua */

/* The engine's defaults (engine.h): order hash 7 days, Idempotency-Key answers 24 h. */
#define ORDER_STATUS_TTL_MS "604800000" /* after the campaign's end, as the engine's default */
#define IDEM_TTL_MS "86400000"

void sk_barrier_run_init(sk_barrier_run *b, const char *owner)
{
    memset(b, 0, sizeof(*b));
    b->owner = owner;
    b->lock_ms = 10000;
    b->batch = 200;
}

int sk_barrier_run_id(dlock__conn *rc, char out[41])
{
    const char *argv[] = {"INFO", "server"};
    dlock__reply *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(rc, 2, argv, NULL, &r));
    if (err) return err;
    const char *text = dlock__reply_kind(r) == DLOCK__R_STRING ? dlock__reply_str(r, NULL) : NULL;
    const char *p = text ? strstr(text, "run_id:") : NULL;
    size_t n = p ? strcspn(p + 7, "\r\n") : 0;
    if (n == 40) snprintf(out, 41, "%.40s", p + 7);
    dlock__reply_free(r);
    return n == 40 ? 0 : DLOCK_ESERVER;
}

int sk_barrier_bucket_run_id(dlock__conn *rc, const sk_buckets *lay, int j, char out[41])
{
    char key[128];
    sk_bucket_key(lay, j, "meta", key, sizeof(key));
    const char *keys[] = {key};
    dlock__reply *r = NULL;
    int err = sk__eval_script(rc, &sk_script_node_runid, 1, keys, 0, NULL, &r);
    if (err) return err;
    size_t n = 0;
    const char *id = dlock__reply_kind(r) == DLOCK__R_STRING ? dlock__reply_str(r, &n) : NULL;
    if (id && n == 40) snprintf(out, 41, "%.40s", id);
    dlock__reply_free(r);
    return id && n == 40 ? 0 : DLOCK_ESERVER;
}

int sk_barrier_node_run_id(dlock__conn *rc, const char *campaign, char out[41])
{
    sk_buckets one;
    sk_buckets_single(campaign, &one);
    return sk_barrier_bucket_run_id(rc, &one, 0, out);
}

typedef struct meta_view {
    bool exists, versioned; /* versioned: has runid or epoch */
    char runid[64];
    int64_t epoch;
} meta_view;

static int cmd(dlock__conn *rc, int argc, const char **argv, dlock__reply **r)
{
    int err = sk_err_from_common(dlock__conn_cmd(rc, argc, argv, NULL, r));
    if (!err && dlock__reply_kind(*r) == DLOCK__R_ERROR) {
        dlock__reply_free(*r);
        *r = NULL;
        err = DLOCK_ESERVER;
    }
    return err;
}

static int read_meta(dlock__conn *rc, const char *key, meta_view *m)
{
    const char *argv[] = {"HMGET", key, "runid", "epoch", "stock"};
    dlock__reply *r = NULL;
    int err = cmd(rc, 5, argv, &r);
    if (err) return err;
    memset(m, 0, sizeof(*m));
    const dlock__reply *rid = dlock__reply_at(r, 0), *ep = dlock__reply_at(r, 1), *st = dlock__reply_at(r, 2);
    bool has_rid = rid && dlock__reply_kind(rid) == DLOCK__R_STRING;
    bool has_ep = ep && dlock__reply_kind(ep) == DLOCK__R_STRING;
    m->exists = st && dlock__reply_kind(st) == DLOCK__R_STRING;
    m->versioned = has_rid || has_ep;
    if (has_rid) snprintf(m->runid, sizeof(m->runid), "%s", dlock__reply_str(rid, NULL));
    m->epoch = has_ep ? strtoll(dlock__reply_str(ep, NULL), NULL, 10) : 1;
    if (m->epoch < 1) m->epoch = 1;
    dlock__reply_free(r);
    return 0;
}

/* Takes or renews lock key for owner: 2 taken now, 1 held (renewed), 0
 * held by another, < 0. On 1 and 2, *sent_ms is when its first command
 * was sent (monotonic): Redis's PX runs later, so the lock lasts at least
 * lock_ms from then. */
static int lock_hold(dlock__conn *rc, const char *key, const char *owner, int64_t lock_ms, int64_t *sent_ms)
{
    int64_t t0 = dlock__now_ms();
    char px[24];
    snprintf(px, sizeof(px), "%" PRId64, lock_ms);
    const char *set[] = {"SET", key, owner, "NX", "PX", px};
    dlock__reply *r = NULL;
    int err = cmd(rc, 6, set, &r);
    if (err) return err;
    bool took = dlock__reply_kind(r) == DLOCK__R_STATUS;
    dlock__reply_free(r);
    if (took) {
        *sent_ms = t0;
        return 2;
    }
    /* ours from an earlier step? then renew (a lost race only shortens it) */
    const char *get[] = {"GET", key};
    if ((err = cmd(rc, 2, get, &r))) return err;
    bool ours = dlock__reply_kind(r) == DLOCK__R_STRING && strcmp(dlock__reply_str(r, NULL), owner) == 0;
    dlock__reply_free(r);
    if (!ours) return 0;
    const char *pexpire[] = {"PEXPIRE", key, px};
    if ((err = cmd(rc, 3, pexpire, &r))) return err;
    dlock__reply_free(r);
    *sent_ms = t0;
    return 1;
}

/* The validity rule of libdlock (dlock.h): a lock taken or renewed by a
 * command sent at sent_ms is believed until sent_ms + lock_ms - drift, on
 * this process's clock, whatever the I/O did since. Writes that need the
 * lock check it just before they go, so a step slowed by a frozen Redis
 * (each command waits up to its timeout) never writes after that. */
static bool lock_valid(const sk_barrier_run *b, int64_t sent_ms)
{
    int64_t drift = b->lock_ms * DLOCK_DRIFT_PPM_DEFAULT / 1000000 + DLOCK_DRIFT_MS_DEFAULT;
    return dlock__now_ms() < sent_ms + b->lock_ms - drift;
}

/* The keys of bucket j the barrier uses. */
typedef struct bkeys {
    const sk_buckets *lay;
    int j;
    char meta[128], lock[128], stats[128], orders[128];
} bkeys;

static void bkeys_of(const sk_buckets *lay, int j, bkeys *k)
{
    k->lay = lay;
    k->j = j;
    sk_bucket_key(lay, j, "meta", k->meta, sizeof(k->meta));
    sk_bucket_key(lay, j, "barrier", k->lock, sizeof(k->lock));
    sk_bucket_key(lay, j, "pipeline", k->stats, sizeof(k->stats));
    sk_bucket_key(lay, j, "orders", k->orders, sizeof(k->orders));
}

/* Strings of one order in a barrier_mirror.lua call. */
typedef struct mirror_item {
    char hash[200], idem[200], idem_user[320], oid[24], qty[24], ts[24];
    const char *final;
} mirror_item;

/* What the master must end with for row: "" (holds it), "released"
 * (cancelled), "dropped" (refused at finalisation); NULL: not in Redis at
 * all (a database-path order cancelled before any mirror). */
static const char *final_of(const sk_order_row *row)
{
    bool in_redis = strcmp(row->path, "redis") == 0 || row->redis_mirrored;
    if (strcmp(row->status, "cancelled") == 0) return in_redis ? "released" : NULL;
    if (strcmp(row->status, "rejected") == 0) return "dropped";
    return "";
}

/* Fills m for row in bucket k (a user of another bucket: final NULL). */
static void mirror_fill(const bkeys *k, const sk_order_row *row, mirror_item *m)
{
    m->final = k->lay->k > 1 && sk_home_bucket(row->user, k->lay->k) != k->j ? NULL : final_of(row);
    if (!m->final) return;
    char part[96];
    snprintf(part, sizeof(part), "order:%" PRIu64, row->order_id);
    sk_bucket_key(k->lay, k->j, part, m->hash, sizeof(m->hash));
    snprintf(part, sizeof(part), "%s%s", row->idem[0] ? "idem:" : "stock", row->idem);
    sk_bucket_key(k->lay, k->j, part, m->idem, sizeof(m->idem));
    char upart[160];
    if (row->idem[0]) snprintf(upart, sizeof(upart), "iu:%s/%s", row->user, row->idem);
    else snprintf(upart, sizeof(upart), "stock");
    sk_bucket_key(k->lay, k->j, upart, m->idem_user, sizeof(m->idem_user));
    snprintf(m->oid, sizeof(m->oid), "%" PRIu64, row->order_id);
    snprintf(m->qty, sizeof(m->qty), "%" PRId64, row->qty);
    snprintf(m->ts, sizeof(m->ts), "%" PRId64, row->created_ms);
}

/* One barrier_mirror.lua call for the rows of p. 0 or a code. */
static int mirror_page(dlock__conn *rc, const char *campaign, const bkeys *bk, const sk_db_rows *p,
                       sk_barrier_run *b)
{
    mirror_item *it = calloc((size_t)p->n, sizeof(*it));
    const char **keys = calloc(8 + 3 * (size_t)p->n, sizeof(*keys));
    const char **args = calloc(4 + 7 * (size_t)p->n, sizeof(*args));
    char k[8][128];
    static const char *const sfx[8] = {"stock",   "buyers",       "mirrored", "released",
                                       "dropped", "carried", "order_status", "meta"};
    int nk = 0, na = 0, err = DLOCK_ENOMEM;
    if (!it || !keys || !args) goto out;
    for (int i = 0; i < 8; i++) {
        sk_bucket_key(bk->lay, bk->j, sfx[i], k[i], sizeof(k[i]));
        keys[nk++] = k[i];
    }
    args[na++] = "mirror";
    args[na++] = campaign;
    args[na++] = ORDER_STATUS_TTL_MS;
    args[na++] = IDEM_TTL_MS;
    for (int i = 0; i < p->n; i++) {
        const sk_order_row *row = &p->v[i];
        mirror_item *m = &it[i];
        mirror_fill(bk, row, m);
        if (!m->final) continue;
        keys[nk++] = m->hash;
        keys[nk++] = m->idem;
        keys[nk++] = m->idem_user;
        const char *a[7] = {m->oid, row->user, m->qty, row->path, row->idem, m->ts, m->final};
        for (int j = 0; j < 7; j++) args[na++] = a[j];
    }
    dlock__reply *r = NULL;
    err = nk > 8 ? sk__eval_script(rc, &sk_script_barrier_mirror, nk, keys, na, args, &r) : 0;
    if (!err && r && dlock__reply_kind(r) == DLOCK__R_ARRAY && dlock__reply_count(r) == 2) {
        b->mirrored += dlock__reply_int(dlock__reply_at(r, 0));
        b->given_back += dlock__reply_int(dlock__reply_at(r, 1));
    } else if (!err && r) {
        err = DLOCK_ESERVER;
    }
    dlock__reply_free(r);
out:
    free(it);
    free(keys);
    free(args);
    return err;
}

/* Every order of the campaign, by order id pages; the lock renewed per
 * page (0 when it was lost: stop). 1 done, 0 lock lost, < 0 error. */
static int mirror_all(sk_db *db, dlock__conn *rc, const char *campaign, const bkeys *bk, sk_barrier_run *b)
{
    sk_db_rows p = {calloc((size_t)b->batch, sizeof(sk_order_row)), 0, b->batch};
    if (!p.v) return DLOCK_ENOMEM;
    uint64_t after = 0;
    int rc_out = 1;
    for (;;) {
        p.n = 0;
        int found = sk_db_orders_for_barrier(db, campaign, after, p.cap, sk_db_rows_add, &p);
        if (found < 0 || p.n == 0) {
            rc_out = found < 0 ? found : 1;
            break;
        }
        int held = lock_hold(rc, bk->lock, b->owner, b->lock_ms, &b->lock_sent_ms);
        if (held > 0 && !lock_valid(b, b->lock_sent_ms)) held = 0; /* renewed too late to act on */
        int err = held > 0 ? mirror_page(rc, campaign, bk, &p, b) : held;
        if (err || held <= 0) {
            rc_out = held == 0 ? 0 : err;
            break;
        }
        after = p.v[p.n - 1].order_id;
    }
    free(p.v);
    return rc_out;
}

/* meta.runid / meta.epoch written while the lock is ours. 1, 0 or < 0. */
static int open_bucket(dlock__conn *rc, const bkeys *bk, const char *run_id, sk_barrier_run *b)
{
    char ep[24];
    snprintf(ep, sizeof(ep), "%" PRId64, b->epoch);
    const char *keys[2] = {bk->meta, bk->lock};
    const char *args[4] = {"open", b->owner, run_id, ep};
    dlock__reply *r = NULL;
    int err = sk__eval_script(rc, &sk_script_barrier_mirror, 2, keys, 4, args, &r);
    if (err) return err;
    int out = dlock__reply_kind(r) == DLOCK__R_INTEGER ? (int)dlock__reply_int(r) : DLOCK_ESERVER;
    dlock__reply_free(r);
    return out;
}

/* barrier_started_ms (wall clock) in the bucket's pipeline hash while a
 * barrier runs, for `seckill metrics` (seckill_barrier_running_seconds). */
static void mark_running(dlock__conn *rc, const bkeys *bk, bool running)
{
    char ms[24];
    snprintf(ms, sizeof(ms), "%" PRId64, dlock__wall_ms());
    const char *set[] = {"HSET", bk->stats, "barrier_started_ms", ms};
    const char *del[] = {"HDEL", bk->stats, "barrier_started_ms"};
    dlock__reply *r = NULL;
    if (dlock__conn_cmd(rc, running ? 4 : 3, running ? set : del, NULL, &r) == 0) dlock__reply_free(r);
}

static void record(dlock__conn *rc, const bkeys *bk, const sk_barrier_run *b)
{
    mark_running(rc, bk, false);
    sk__pipeline_add_key(rc, bk->stats, "barrier_runs", 1);
    sk__pipeline_add_key(rc, bk->stats, "barrier_ms_total", b->duration_ms);
    char ms[24];
    snprintf(ms, sizeof(ms), "%" PRId64, b->duration_ms);
    const char *argv[] = {"HSET", bk->stats, "barrier_last_ms", ms};
    dlock__reply *r = NULL;
    if (dlock__conn_cmd(rc, 4, argv, NULL, &r) == 0) dlock__reply_free(r);
}

/* ---- the shared seal of a campaign of K > 1 buckets -------------------- */

static void seal_owner(const sk_barrier_run *b, int j, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%d", b->owner, j);
}

/* 1 + the highest epoch of the database and of every bucket's meta. */
static int seal_choose(sk_db *db, dlock__conn *rc, const char *campaign, const sk_buckets *lay, int64_t *e_out)
{
    int64_t e = 0;
    int err = sk_db_campaign_epoch(db, campaign, &e);
    if (err) return err;
    for (int i = 0; i < lay->k; i++) {
        char key[128];
        meta_view m;
        sk_bucket_key(lay, i, "meta", key, sizeof(key));
        if ((err = read_meta(rc, key, &m))) return err;
        if (m.epoch > e) e = m.epoch;
    }
    *e_out = e + 1;
    return 0;
}

/* barrier_mirror.lua "raise" on bucket i: 1 when its stream is persisted
 * through the raise (b->raise_id[i], taken at the first call while it is
 * open) or, not open, through its end; 0 not yet; < 0. */
static int seal_raise(dlock__conn *rc, const sk_buckets *lay, int i, sk_barrier_run *b)
{
    bkeys k;
    bkeys_of(lay, i, &k);
    char ep[24];
    snprintf(ep, sizeof(ep), "%" PRId64, b->seal_epoch);
    const char *keys[2] = {k.meta, k.orders};
    const char *args[4] = {"raise", ep, SK_PERSIST_GROUP, b->raise_id[i]};
    dlock__reply *r = NULL;
    int err = sk__eval_script(rc, &sk_script_barrier_mirror, 2, keys, 4, args, &r);
    if (err) return err;
    int out = DLOCK_ESERVER;
    if (dlock__reply_kind(r) == DLOCK__R_ARRAY && dlock__reply_count(r) == 3) {
        bool open = dlock__reply_int(dlock__reply_at(r, 0)) == 1;
        const char *through = dlock__reply_str(dlock__reply_at(r, 1), NULL);
        if (open && !b->raise_id[i][0] && through) snprintf(b->raise_id[i], sizeof(b->raise_id[i]), "%s", through);
        out = dlock__reply_int(dlock__reply_at(r, 2)) == 1;
    }
    dlock__reply_free(r);
    return out;
}

static void seal_reset(sk_barrier_run *b)
{
    b->seal_epoch = 0;
    memset(b->raise_id, 0, sizeof(b->raise_id));
}

/* Under the seal lock: E chosen (once per holding), the other buckets
 * raised and persisted through, E sealed. 0 sealed (b->epoch = E),
 * SK_BARRIER_WAITING, or < 0. */
static int seal_shared(sk_db *db, dlock__conn *rc, const char *campaign, const bkeys *bk, sk_barrier_run *b)
{
    char lock[128], owner[200];
    sk_bucket_key(bk->lay, 0, "sealing", lock, sizeof(lock));
    seal_owner(b, bk->j, owner, sizeof(owner));
    int held = lock_hold(rc, lock, owner, b->lock_ms, &b->seal_sent_ms);
    if (held <= 0) return held < 0 ? held : SK_BARRIER_WAITING;
    if (held == 2) seal_reset(b); /* a new holding: whatever was chosen before may be stale */
    int err = b->seal_epoch ? 0 : seal_choose(db, rc, campaign, bk->lay, &b->seal_epoch);
    if (err) return err;
    int done = 1;
    for (int i = 0; i < bk->lay->k; i++) {
        if (i == bk->j) continue;
        int r = seal_raise(rc, bk->lay, i, b);
        if (r < 0) return r;
        done &= r;
    }
    if (!done) return SK_BARRIER_WAITING;
    if (!lock_valid(b, b->seal_sent_ms) || !lock_valid(b, b->lock_sent_ms)) return SK_BARRIER_WAITING;
    if ((err = sk_db_campaign_seal(db, campaign, b->seal_epoch))) return err;
    int64_t now = 0;
    if ((err = sk_db_campaign_epoch(db, campaign, &now))) return err;
    if (now != b->seal_epoch) { /* sealed higher meanwhile (a lock that expired): choose again */
        seal_reset(b);
        return SK_BARRIER_WAITING;
    }
    b->epoch = b->seal_epoch;
    return 0;
}

static void seal_unlock(dlock__conn *rc, const bkeys *bk, sk_barrier_run *b)
{
    char lock[128], owner[200];
    sk_bucket_key(bk->lay, 0, "sealing", lock, sizeof(lock));
    seal_owner(b, bk->j, owner, sizeof(owner));
    const char *keys[1] = {lock};
    const char *args[2] = {"unlock", owner};
    dlock__reply *r = NULL;
    if (sk__eval_script(rc, &sk_script_barrier_mirror, 1, keys, 2, args, &r) == 0) dlock__reply_free(r);
    seal_reset(b);
}

/* ---- the steps ---------------------------------------------------------- */

/* Seal, mirror, handbacks, open: the lock is held and the bucket drained. */
static int finish(sk_db *db, dlock__conn *rc, const char *campaign, const bkeys *bk, const char *run_id,
                  const meta_view *m, sk_barrier_run *b)
{
    int err;
    if (bk->lay->k == 1) {
        b->epoch = m->epoch + 1;
        if (!lock_valid(b, b->lock_sent_ms)) return SK_BARRIER_WAITING; /* the next step renews it */
        if ((err = sk_db_campaign_seal(db, campaign, b->epoch))) return err;
    } else if ((err = seal_shared(db, rc, campaign, bk, b)) != 0) {
        return err;
    }
    err = mirror_all(db, rc, campaign, bk, b);
    if (err <= 0) return err < 0 ? err : SK_BARRIER_WAITING;
    if (bk->j == 0) { /* handbacks are bucket 0's stock */
        sk_db_handback hb;
        if ((err = sk_db_handback_get(db, campaign, &hb))) return err;
        if (!lock_valid(b, b->lock_sent_ms)) return SK_BARRIER_WAITING;
        int h = sk_reserve_handback_apply(rc, campaign, &hb);
        if (h < 0) return h;
        b->handbacks += h;
    }
    err = open_bucket(rc, bk, run_id, b);
    if (err <= 0) return err < 0 ? err : SK_BARRIER_WAITING;
    if (bk->lay->k > 1) seal_unlock(rc, bk, b);
    b->opened = true;
    b->duration_ms = dlock__now_ms() - b->started_ms;
    b->started_ms = 0;
    record(rc, bk, b);
    return SK_BARRIER_OPEN;
}

int sk_barrier_step_bucket(sk_db *db, dlock__conn *rc, const char *campaign, const sk_buckets *lay, int j,
                           const char *run_id, sk_barrier_run *b)
{
    b->opened = false;
    if (j < 0 || j >= lay->k) return SK_EINVAL;
    bkeys bk;
    bkeys_of(lay, j, &bk);
    meta_view m;
    int err = read_meta(rc, bk.meta, &m);
    if (err) return err;
    if (!m.exists || !m.versioned || strcmp(m.runid, run_id) == 0) {
        b->started_ms = 0;
        return SK_BARRIER_OPEN;
    }
    bool first = !b->started_ms;
    if (first) b->started_ms = dlock__now_ms();
    int held = lock_hold(rc, bk.lock, b->owner, b->lock_ms, &b->lock_sent_ms);
    if (held <= 0) return held < 0 ? held : SK_BARRIER_WAITING;
    if (first) mark_running(rc, &bk, true);
    int64_t pending = 0, lag = 0;
    if ((err = sk_stream_backlog(rc, bk.orders, &pending, &lag))) return err;
    if (pending || lag) return SK_BARRIER_WAITING;
    return finish(db, rc, campaign, &bk, run_id, &m, b);
}

int sk_barrier_step(sk_db *db, dlock__conn *rc, const char *campaign, const char *run_id, sk_barrier_run *b)
{
    sk_buckets *lay = malloc(sizeof(*lay));
    if (!lay) return DLOCK_ENOMEM;
    int err = sk_layout_read(rc, campaign, lay);
    if (err == SK_ENOTFOUND) sk_buckets_single(campaign, lay), err = 0;
    if (!err) err = sk_barrier_step_bucket(db, rc, campaign, lay, 0, run_id, b);
    free(lay);
    return err;
}

int sk_barrier_force_bucket(dlock__conn *rc, const sk_buckets *lay, int j, const char *owner)
{
    if (j < 0 || j >= lay->k) return SK_EINVAL;
    char key[128], value[160];
    sk_bucket_key(lay, j, "meta", key, sizeof(key));
    snprintf(value, sizeof(value), "barrier-by-%s", owner);
    const char *argv[] = {"HSET", key, "runid", value};
    dlock__reply *r = NULL;
    int err = cmd(rc, 4, argv, &r);
    if (!err) dlock__reply_free(r);
    return err;
}

int sk_barrier_force(dlock__conn *rc, const char *campaign, const char *owner)
{
    sk_buckets one;
    sk_buckets_single(campaign, &one);
    return sk_barrier_force_bucket(rc, &one, 0, owner);
}
