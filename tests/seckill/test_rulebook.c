/* test_rulebook.c: one purchase rulebook, written in three languages, fed
 * one table of cases: purchase.lua through a real redis-server, the
 * database guard through SQLite and through a private PostgreSQL (the
 * PL/pgSQL sk_apply_batch), and the degraded path's rules
 * (sk_db_purchase_direct). Every implementation that judges a case must
 * give it the same outcome id (rulebook.h); a rule changed in one of them
 * fails here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "db.h"
#include "persist.h"
#include "redis_connect.h"
#include "redis_io.h"
#include "release.h"
#include "reply.h"
#include "rulebook.h"
#include "servers.h"
#include "sk_err.h"
#include "util.h"

extern const dlock__script sk_script_purchase;

enum { LUA = 1, LITE = 2, PG = 4, DEGR = 8, ALL = 15, GUARD = LUA | LITE | PG };
enum { OPEN = 0, EARLY = -1, LATE = 1 };
enum { NOKEY = 0, SAME_USER = 1, OTHER_USER = 2 };

/* One case. Before it the user already holds `held` units (bought the same
 * way), and with a key the key was first used for one unit by u0; the
 * stock left for the case itself is `stock`. Implementations outside
 * `judges` do not hold that rule: the guard applies orders Redis already
 * decided within the window, and the database path takes no key. */
typedef struct rcase {
    const char *name;
    int64_t stock, limit;
    int window;
    int64_t held, qty;
    int key;
    int expect;
    unsigned judges;
    bool unknown;
} rcase;

static const rcase cases[] = {
    {"accepted", 5, 2, OPEN, 0, 1, NOKEY, SK_OUT_ACCEPTED, ALL, false},
    {"last unit of the limit", 5, 2, OPEN, 1, 1, NOKEY, SK_OUT_ACCEPTED, ALL, false},
    {"limit reached", 5, 2, OPEN, 2, 1, NOKEY, SK_OUT_LIMIT, ALL, false},
    {"limit reached by this quantity", 5, 3, OPEN, 2, 2, NOKEY, SK_OUT_LIMIT, ALL, false},
    {"sold out", 1, 3, OPEN, 0, 2, NOKEY, SK_OUT_SOLD_OUT, ALL, false},
    {"sold out to the last unit", 0, 3, OPEN, 1, 1, NOKEY, SK_OUT_SOLD_OUT, ALL, false},
    {"limit reached and sold out", 0, 2, OPEN, 2, 1, NOKEY, SK_OUT_LIMIT, ALL, false},
    {"not started", 5, 2, EARLY, 0, 1, NOKEY, SK_OUT_NOT_STARTED, LUA | DEGR, false},
    {"above the limit before the start", 5, 2, EARLY, 0, 3, NOKEY, SK_OUT_BAD_QUANTITY, LUA | DEGR, false},
    {"ended", 5, 2, LATE, 0, 1, NOKEY, SK_OUT_ENDED, LUA | DEGR, false},
    {"quantity above the limit", 5, 2, OPEN, 0, 3, NOKEY, SK_OUT_BAD_QUANTITY, ALL, false},
    {"quantity zero", 5, 2, OPEN, 0, 0, NOKEY, SK_OUT_BAD_QUANTITY, ALL, false},
    {"unknown campaign", 5, 2, OPEN, 0, 1, NOKEY, SK_OUT_NOT_FOUND, ALL, true},
    {"idempotency replay", 5, 2, OPEN, 0, 1, SAME_USER, SK_OUT_REPLAY, GUARD, false},
    {"key reused by another user", 5, 2, OPEN, 0, 1, OTHER_USER, SK_OUT_ACCEPTED, GUARD, false},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static test_server redis_srv, pg_srv;
static dlock__conn *rc;
static sk_db *lite, *pg;
static char sqlite_dir[300], run_id[41];
static uint64_t next_oid = 1000;

static void window_of(const rcase *c, int64_t *starts, int64_t *ends)
{
    int64_t now = dlock__wall_ms();
    *starts = c->window == EARLY ? now + 3600000 : now - 3600000;
    *ends = c->window == LATE ? now - 60000 : now + 3600000;
}

/* ---- purchase.lua --------------------------------------------------------- */

static void redis_do(int argc, const char **argv)
{
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(rc, argc, argv, NULL, &r), 0);
    if (dlock__reply_kind(r) == DLOCK__R_ERROR) fail_msg("redis %s: %s", argv[0], dlock__reply_str(r, NULL));
    dlock__reply_free(r);
}

/* One purchase through the real script: its outcome id. */
static int lua_buy(const char *camp, const char *user, int64_t qty, const char *idem)
{
    char k[7][200], oid[24], q[24], fk[72];
    static const char *const sfx[5] = {"meta", "stock", "buyers", "orders", "order_status"};
    for (int i = 0; i < 5; i++) snprintf(k[i], sizeof(k[i]), "{c:%s}:%s", camp, sfx[i]);
    snprintf(oid, sizeof(oid), "%" PRIu64, next_oid++);
    snprintf(q, sizeof(q), "%" PRId64, qty);
    snprintf(fk, sizeof(fk), "0%s", idem ? idem : ""); /* no rate limits: no rate keys */
    int nk = 5;
    if (idem) {
        snprintf(k[nk++], sizeof(k[0]), "{c:%s}:idem:%s", camp, idem);
        snprintf(k[nk++], sizeof(k[0]), "{c:%s}:iu:%s/%s", camp, user, idem);
    }
    const char *keys[7] = {k[0], k[1], k[2], k[3], k[4], k[5], k[6]};
    const char *args[13] = {"1", "0", "1000", "0", "1000", "86400000", "86400000", run_id, "1", oid, user, q, fk};
    dlock__reply *r = NULL;
    assert_int_equal(sk__eval_script(rc, &sk_script_purchase, nk, keys, 13, args, &r), 0);
    if (dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != 1)
        fail_msg("purchase.lua: %s", dlock__reply_str(r, NULL));
    /* the purchase's entry: code + 16 * value, or a replay's {code, ...} */
    const dlock__reply *e = dlock__reply_at(r, 0);
    long long code = dlock__reply_kind(e) == DLOCK__R_ARRAY ? dlock__reply_int(dlock__reply_at(e, 0))
                                                             : ((dlock__reply_int(e) % 16) + 16) % 16;
    int out = sk_outcome_of_script(code);
    dlock__reply_free(r);
    return out;
}

static int run_lua(const rcase *c, const char *camp)
{
    if (!c->unknown) {
        int64_t s, e;
        window_of(c, &s, &e);
        char meta[96], stk[96], lim[24], st[24], en[24], units[24];
        snprintf(meta, sizeof(meta), "{c:%s}:meta", camp);
        snprintf(stk, sizeof(stk), "{c:%s}:stock", camp);
        snprintf(lim, sizeof(lim), "%" PRId64, c->limit);
        snprintf(st, sizeof(st), "%" PRId64, c->window == OPEN ? 0 : s);
        snprintf(en, sizeof(en), "%" PRId64, e);
        snprintf(units, sizeof(units), "%" PRId64, c->stock + c->held + (c->key ? 1 : 0));
        const char *h[] = {"HSET", meta, "per_user_limit", lim, "starts_at_ms", st, "ends_at_ms", en,
                           "runid", run_id, "epoch", "1"};
        redis_do(12, h);
        const char *set[] = {"SET", stk, units};
        redis_do(3, set);
        if (c->held) assert_int_equal(lua_buy(camp, "u1", c->held, NULL), SK_OUT_ACCEPTED);
        if (c->key) assert_int_equal(lua_buy(camp, "u0", 1, "k1"), SK_OUT_ACCEPTED);
    }
    const char *user = c->key == SAME_USER ? "u0" : "u1";
    return lua_buy(camp, user, c->qty, c->key ? "k1" : NULL);
}

/* ---- the database guard (SQLite, PL/pgSQL) and the degraded path ---------- */

static void create(sk_db *db, const rcase *c, const char *camp, bool reserve)
{
    sk_campaign d = {0};
    snprintf(d.id, sizeof(d.id), "%s", camp);
    snprintf(d.title, sizeof(d.title), "rulebook");
    d.stock = c->stock + c->held + (c->key ? 1 : 0);
    d.per_user_limit = c->limit;
    window_of(c, &d.starts_at_ms, &d.ends_at_ms);
    d.db_reserve = reserve ? d.stock : 0;
    assert_int_equal(sk_db_campaign_create(db, &d), 0);
}

/* Applies o as the persister does: its outcome id. */
static int guard_apply(sk_db *db, const sk_order_in *o)
{
    int res = 0;
    int rc2 = sk_db_apply_batch(db, o, 1, &res);
    if (rc2) return sk_outcome_of_err(rc2, false);
    if (res == SK_APPLY_PERSISTED) return SK_OUT_ACCEPTED;
    if (res == SK_APPLY_DUPLICATE) return SK_OUT_REPLAY;
    sk_order_row row;
    assert_int_equal(sk_db_order_get(db, o->order_id, &row), 0);
    assert_string_equal(row.status, "rejected");
    assert_string_equal(row.reason, sk_outcome_get(row.reason_code)->stored);
    return row.reason_code;
}

static sk_order_in order(const char *camp, const char *user, int64_t qty, const char *idem)
{
    return (sk_order_in){next_oid++, camp, user, qty, "redis", dlock__wall_ms(), idem, 1};
}

static int run_guard(sk_db *db, const rcase *c, const char *camp)
{
    if (!c->unknown) create(db, c, camp, false);
    sk_order_in first = order(camp, "u0", 1, "k1");
    if (c->held) {
        sk_order_in h = order(camp, "u1", c->held, NULL);
        assert_int_equal(guard_apply(db, &h), SK_OUT_ACCEPTED);
    }
    if (c->key) assert_int_equal(guard_apply(db, &first), SK_OUT_ACCEPTED);
    if (c->key == SAME_USER) return guard_apply(db, &first); /* the same order delivered again */
    sk_order_in o = order(camp, "u1", c->qty, c->key ? "k1" : NULL);
    return guard_apply(db, &o);
}

static int run_degraded(const rcase *c, const char *camp)
{
    if (!c->unknown) create(lite, c, camp, true);
    int64_t now = dlock__wall_ms();
    if (c->held) assert_int_equal(sk_db_purchase_direct(lite, next_oid++, camp, "u1", c->held, now), 0);
    int r = sk_db_purchase_direct(lite, next_oid++, camp, "u1", c->qty, now);
    return sk_outcome_of_err(r, false);
}

/* ---- the table ------------------------------------------------------------ */

static const char *label(int id) { return id < 0 ? "-" : sk_outcome_get(id)->label; }

static void test_every_implementation_gives_every_case_the_same_outcome(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < NCASES; i++) {
        const rcase *c = &cases[i];
        char camp[4][32];
        static const char pre[4] = {'l', 's', 'p', 'd'};
        for (int j = 0; j < 4; j++) snprintf(camp[j], sizeof(camp[j]), "rb-%c%zu", pre[j], i);
        int got[4];
        got[0] = c->judges & LUA ? run_lua(c, camp[0]) : -1;
        got[1] = c->judges & LITE ? run_guard(lite, c, camp[1]) : -1;
        got[2] = c->judges & PG ? run_guard(pg, c, camp[2]) : -1;
        got[3] = c->judges & DEGR ? run_degraded(c, camp[3]) : -1;
        bool ok = true;
        for (int j = 0; j < 4; j++)
            if ((c->judges & (1u << j)) && got[j] != c->expect) ok = false;
        printf("%-32s want %-14s lua %-14s sqlite %-14s postgres %-14s degraded %-14s %s\n", c->name,
               label(c->expect), label(got[0]), label(got[1]), label(got[2]), label(got[3]), ok ? "" : "MISMATCH");
        bad += !ok;
    }
    if (bad) fail_msg("%d case(s) judged differently (above)", bad);
}

/* ---- fixture -------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&redis_srv, NULL) != 0) return -1;
    if (test_postgres_start(&pg_srv) != 0) return -1;
    char info[8192], err[512], url[400];
    const char *argv[] = {"INFO", "server"};
    if (test_redis_cmd(&redis_srv, info, sizeof(info), 2, argv) != 0) return -1;
    const char *p = strstr(info, "run_id:");
    if (!p || sscanf(p + 7, "%40[0-9a-f]", run_id) != 1) return -1;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", redis_srv.port);
    if (dlock__conn_open_url(url, 5000, &rc, err, sizeof(err))) return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(sqlite_dir, sizeof(sqlite_dir), "%s/sk-rulebook-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(sqlite_dir)) return -1;
    snprintf(url, sizeof(url), "sqlite://%s/orders.db", sqlite_dir);
    if (sk_db_open(url, &lite, err, sizeof(err)) || sk_db_open(pg_srv.url, &pg, err, sizeof(err))) {
        fprintf(stderr, "open: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sk_db_close(lite);
    sk_db_close(pg);
    dlock__conn_close(rc);
    test_server_stop(&redis_srv);
    test_server_stop(&pg_srv);
    test_sqlite_dir_remove(sqlite_dir, NULL);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_implementation_gives_every_case_the_same_outcome),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
