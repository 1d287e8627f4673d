/* barrier.c: the barrier after a change of master, run by seckill-persist
 * (and `seckill barrier`). Design note (docs/design/promise.md):
 *  - due when {c:<id>}:meta has runid or epoch (the campaign was heated by
 *    an engine that writes them) and meta.runid differs from the run id of
 *    the connected server; purchase.lua refuses to decide meanwhile;
 *  - the lock {c:<id>}:barrier (SET NX PX, value = owner) keeps one runner
 *    per campaign; every step renews it; the open is written only while
 *    it is held (barrier_mirror.lua "open");
 *  - steps never block: while the group has entries pending or unread the
 *    caller keeps consuming and calls again, so a single persister drains
 *    its own backlog and then finishes the barrier;
 *  - seal before mirror: once campaign_stock.epoch is meta.epoch + 1 no
 *    order of the old timeline the database does not hold can get in, so
 *    the set of orders to mirror is final;
 *  - every write is idempotent (gates in Redis, epoch only grows), so a
 *    crash anywhere is repaired by running the barrier again. */
#include "barrier.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "persist.h"
#include "release.h"
#include "reserve.h"
#include "sk_err.h"
#include "util.h"

extern const unsigned char sk_lua_barrier_mirror[];
extern const unsigned char sk_lua_node_runid[];

/* The engine's defaults (engine.h): order hash 7 days, Idempotency-Key answers 24 h. */
#define ORDER_HASH_TTL_MS "604800000"
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
    int err = dlock__conn_cmd(rc, 2, argv, NULL, &r);
    if (err) return err;
    const char *text = dlock__reply_kind(r) == DLOCK__R_STRING ? dlock__reply_str(r, NULL) : NULL;
    const char *p = text ? strstr(text, "run_id:") : NULL;
    size_t n = p ? strcspn(p + 7, "\r\n") : 0;
    if (n == 40) snprintf(out, 41, "%.40s", p + 7);
    dlock__reply_free(r);
    return n == 40 ? 0 : DLOCK_ESERVER;
}

int sk_barrier_node_run_id(dlock__conn *rc, const char *campaign, char out[41])
{
    char key[96];
    snprintf(key, sizeof(key), "{c:%s}:meta", campaign);
    const char *keys[] = {key};
    dlock__reply *r = NULL;
    int err = sk__eval_script(rc, (const char *)sk_lua_node_runid, 1, keys, 0, NULL, &r);
    if (err) return err;
    size_t n = 0;
    const char *id = dlock__reply_kind(r) == DLOCK__R_STRING ? dlock__reply_str(r, &n) : NULL;
    if (id && n == 40) snprintf(out, 41, "%.40s", id);
    dlock__reply_free(r);
    return id && n == 40 ? 0 : DLOCK_ESERVER;
}

typedef struct meta_view {
    bool exists, versioned; /* versioned: has runid or epoch */
    char runid[64];
    int64_t epoch;
} meta_view;

static int cmd(dlock__conn *rc, int argc, const char **argv, dlock__reply **r)
{
    int err = dlock__conn_cmd(rc, argc, argv, NULL, r);
    if (!err && dlock__reply_kind(*r) == DLOCK__R_ERROR) {
        dlock__reply_free(*r);
        *r = NULL;
        err = DLOCK_ESERVER;
    }
    return err;
}

static int read_meta(dlock__conn *rc, const char *campaign, meta_view *m)
{
    char key[96];
    snprintf(key, sizeof(key), "{c:%s}:meta", campaign);
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

/* Takes or renews the lock: 1 held by b->owner, 0 held by another, < 0. */
static int lock_hold(dlock__conn *rc, const char *campaign, const sk_barrier_run *b)
{
    char key[96], px[24];
    snprintf(key, sizeof(key), "{c:%s}:barrier", campaign);
    snprintf(px, sizeof(px), "%" PRId64, b->lock_ms);
    const char *set[] = {"SET", key, b->owner, "NX", "PX", px};
    dlock__reply *r = NULL;
    int err = cmd(rc, 6, set, &r);
    if (err) return err;
    bool took = dlock__reply_kind(r) == DLOCK__R_STATUS;
    dlock__reply_free(r);
    if (took) return 1;
    /* ours from an earlier step? then renew (a lost race only shortens it) */
    const char *get[] = {"GET", key};
    if ((err = cmd(rc, 2, get, &r))) return err;
    bool ours = dlock__reply_kind(r) == DLOCK__R_STRING && strcmp(dlock__reply_str(r, NULL), b->owner) == 0;
    dlock__reply_free(r);
    if (!ours) return 0;
    const char *pexpire[] = {"PEXPIRE", key, px};
    if ((err = cmd(rc, 3, pexpire, &r))) return err;
    dlock__reply_free(r);
    return 1;
}

/* Strings of one order in a barrier_mirror.lua call. */
typedef struct mirror_item {
    char hash[160], idem[160], oid[24], qty[24], ts[24];
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

/* One barrier_mirror.lua call for the rows of p. 0 or a code. */
static int mirror_page(dlock__conn *rc, const char *campaign, const sk_db_rows *p, sk_barrier_run *b)
{
    mirror_item *it = calloc((size_t)p->n, sizeof(*it));
    const char **keys = calloc(6 + 2 * (size_t)p->n, sizeof(*keys));
    const char **args = calloc(4 + 7 * (size_t)p->n, sizeof(*args));
    char k[6][112];
    static const char *const sfx[6] = {"stock", "buyers", "mirrored", "released", "dropped", "carried"};
    int nk = 0, na = 0, err = DLOCK_ENOMEM;
    if (!it || !keys || !args) goto out;
    for (int i = 0; i < 6; i++) {
        snprintf(k[i], sizeof(k[i]), "{c:%s}:%s", campaign, sfx[i]);
        keys[nk++] = k[i];
    }
    args[na++] = "mirror";
    args[na++] = campaign;
    args[na++] = ORDER_HASH_TTL_MS;
    args[na++] = IDEM_TTL_MS;
    for (int i = 0; i < p->n; i++) {
        const sk_order_row *row = &p->v[i];
        mirror_item *m = &it[i];
        if (!(m->final = final_of(row))) continue;
        snprintf(m->hash, sizeof(m->hash), "{c:%s}:order:%" PRIu64, campaign, row->order_id);
        snprintf(m->idem, sizeof(m->idem), "{c:%s}:%s%s", campaign, row->idem[0] ? "idem:" : "stock", row->idem);
        snprintf(m->oid, sizeof(m->oid), "%" PRIu64, row->order_id);
        snprintf(m->qty, sizeof(m->qty), "%" PRId64, row->qty);
        snprintf(m->ts, sizeof(m->ts), "%" PRId64, row->created_ms);
        keys[nk++] = m->hash;
        keys[nk++] = m->idem;
        const char *a[7] = {m->oid, row->user, m->qty, row->path, row->idem, m->ts, m->final};
        for (int j = 0; j < 7; j++) args[na++] = a[j];
    }
    dlock__reply *r = NULL;
    err = nk > 6 ? sk__eval_script(rc, (const char *)sk_lua_barrier_mirror, nk, keys, na, args, &r) : 0;
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
static int mirror_all(sk_db *db, dlock__conn *rc, const char *campaign, sk_barrier_run *b)
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
        int held = lock_hold(rc, campaign, b);
        int err = held == 1 ? mirror_page(rc, campaign, &p, b) : held;
        if (err || held != 1) {
            rc_out = held == 0 ? 0 : err;
            break;
        }
        after = p.v[p.n - 1].order_id;
    }
    free(p.v);
    return rc_out;
}

/* meta.runid / meta.epoch written while the lock is ours. 1, 0 or < 0. */
static int open_campaign(dlock__conn *rc, const char *campaign, const char *run_id, sk_barrier_run *b)
{
    char meta[96], lock[96], ep[24];
    snprintf(meta, sizeof(meta), "{c:%s}:meta", campaign);
    snprintf(lock, sizeof(lock), "{c:%s}:barrier", campaign);
    snprintf(ep, sizeof(ep), "%" PRId64, b->epoch);
    const char *keys[2] = {meta, lock};
    const char *args[4] = {"open", b->owner, run_id, ep};
    dlock__reply *r = NULL;
    int err = sk__eval_script(rc, (const char *)sk_lua_barrier_mirror, 2, keys, 4, args, &r);
    if (err) return err;
    int out = dlock__reply_kind(r) == DLOCK__R_INTEGER ? (int)dlock__reply_int(r) : DLOCK_ESERVER;
    dlock__reply_free(r);
    return out;
}

/* barrier_started_ms (wall clock) in {c:<id>}:pipeline while a barrier
 * runs, for `seckill metrics` (seckill_barrier_running_seconds). */
static void mark_running(dlock__conn *rc, const char *campaign, bool running)
{
    char key[96], ms[24];
    snprintf(key, sizeof(key), "{c:%s}:pipeline", campaign);
    snprintf(ms, sizeof(ms), "%" PRId64, dlock__wall_ms());
    const char *set[] = {"HSET", key, "barrier_started_ms", ms};
    const char *del[] = {"HDEL", key, "barrier_started_ms"};
    dlock__reply *r = NULL;
    if (dlock__conn_cmd(rc, running ? 4 : 3, running ? set : del, NULL, &r) == 0) dlock__reply_free(r);
}

static void record(dlock__conn *rc, const char *campaign, const sk_barrier_run *b)
{
    mark_running(rc, campaign, false);
    sk__pipeline_add(rc, campaign, "barrier_runs", 1);
    sk__pipeline_add(rc, campaign, "barrier_ms_total", b->duration_ms);
    char key[96], ms[24];
    snprintf(key, sizeof(key), "{c:%s}:pipeline", campaign);
    snprintf(ms, sizeof(ms), "%" PRId64, b->duration_ms);
    const char *argv[] = {"HSET", key, "barrier_last_ms", ms};
    dlock__reply *r = NULL;
    if (dlock__conn_cmd(rc, 4, argv, NULL, &r) == 0) dlock__reply_free(r);
}

/* Seal, mirror, handbacks, open: the lock is held and the group drained. */
static int finish(sk_db *db, dlock__conn *rc, const char *campaign, const char *run_id, const meta_view *m,
                  sk_barrier_run *b)
{
    b->epoch = m->epoch + 1;
    int err = sk_db_campaign_seal(db, campaign, b->epoch);
    if (err) return err;
    err = mirror_all(db, rc, campaign, b);
    if (err <= 0) return err < 0 ? err : SK_BARRIER_WAITING;
    sk_db_handback hb;
    if ((err = sk_db_handback_get(db, campaign, &hb))) return err;
    int h = sk_reserve_handback_apply(rc, campaign, &hb);
    if (h < 0) return h;
    b->handbacks += h;
    err = open_campaign(rc, campaign, run_id, b);
    if (err <= 0) return err < 0 ? err : SK_BARRIER_WAITING;
    b->opened = true;
    b->duration_ms = dlock__now_ms() - b->started_ms;
    b->started_ms = 0;
    record(rc, campaign, b);
    return SK_BARRIER_OPEN;
}

int sk_barrier_step(sk_db *db, dlock__conn *rc, const char *campaign, const char *run_id, sk_barrier_run *b)
{
    b->opened = false;
    meta_view m;
    int err = read_meta(rc, campaign, &m);
    if (err) return err;
    if (!m.exists || !m.versioned || strcmp(m.runid, run_id) == 0) {
        b->started_ms = 0;
        return SK_BARRIER_OPEN;
    }
    bool first = !b->started_ms;
    if (first) b->started_ms = dlock__now_ms();
    int held = lock_hold(rc, campaign, b);
    if (held <= 0) return held < 0 ? held : SK_BARRIER_WAITING;
    if (first) mark_running(rc, campaign, true);
    int64_t pending = 0, lag = 0;
    if ((err = sk_persist_backlog(rc, campaign, &pending, &lag))) return err;
    if (pending || lag) return SK_BARRIER_WAITING;
    return finish(db, rc, campaign, run_id, &m, b);
}

int sk_barrier_force(dlock__conn *rc, const char *campaign, const char *owner)
{
    char key[96], value[160];
    snprintf(key, sizeof(key), "{c:%s}:meta", campaign);
    snprintf(value, sizeof(value), "barrier-by-%s", owner);
    const char *argv[] = {"HSET", key, "runid", value};
    dlock__reply *r = NULL;
    int err = cmd(rc, 4, argv, &r);
    if (!err) dlock__reply_free(r);
    return err;
}
