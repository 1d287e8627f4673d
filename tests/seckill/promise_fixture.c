/* promise_fixture.c: see promise_fixture.h. The purchase script below is
 * a small stand-in for the engine's purchase.lua (same keys, same stream
 * fields, same Idempotency-Key answer), so the pipeline is tested without
 * the engine. */
#include "promise_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "persist.h"
#include "redis_cmd.h"
#include "sk_fixture.h"
#include "redis_connect.h"
#include "lifecycle.h"
#include "reconcile.h"
#include "sk_err.h"
#include "util.h"

test_server pf_redis_srv;
static test_server pg_srv;
char pf_redis_url[128], pf_db_url[600];
static char sqlite_dir[256];
dlock__conn *pf_rc;
sk_db *pf_db;
static uint64_t next_id = 77000000;

uint64_t pf_next_id(void) { return next_id++; }

/* KEYS meta stock buyers orders order_status idem; ARGV oid user qty camp
 * idem: purchase.lua's writes (the status field, the answer under the key's
 * first user's name, the compact stream entry). */
static const char BUY_LUA[] =
    "local m = redis.call('HMGET', KEYS[1], 'per_user_limit', 'epoch')\n"
    "local limit, q = tonumber(m[1]), tonumber(ARGV[3])\n"
    "local stock = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
    "local held = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '0')\n"
    "if stock < q or held + q > limit then return -1 end\n"
    "stock = redis.call('DECRBY', KEYS[2], q)\n"
    "redis.call('HINCRBY', KEYS[3], ARGV[2], q)\n"
    "redis.call('HSET', KEYS[5], ARGV[1], ARGV[2] .. '\\n' .. q)\n"
    "if ARGV[5] ~= '' then redis.call('SET', KEYS[6], ARGV[2] .. '\\n' .. ARGV[1] .. '\\n' .. q .. '\\n' .. stock)"
    " end\n"
    "local f = {'o', ARGV[1], 'u', ARGV[2], 'q', tostring(q)}\n"
    "if m[2] then f[#f + 1] = 'e'; f[#f + 1] = m[2] end\n"
    "if ARGV[5] ~= '' then f[#f + 1] = 'k'; f[#f + 1] = ARGV[5] end\n"
    "redis.call('XADD', KEYS[4], '*', unpack(f))\n"
    "return stock\n";

/* conn, or pf_rc when NULL. */
static dlock__conn *on(dlock__conn *conn) { return conn ? conn : pf_rc; }

int64_t pf_redis_int_on(dlock__conn *conn, const char *cmd, const char *camp, const char *suffix,
                        const char *field)
{
    char key[128];
    snprintf(key, sizeof(key), "{c:%s}:%s", camp, suffix);
    const char *argv[] = {cmd, key, field};
    return tr_reply_int(tr_cmdv(on(conn), field ? 3 : 2, argv));
}

int64_t pf_redis_int(const char *cmd, const char *camp, const char *suffix, const char *field)
{
    return pf_redis_int_on(NULL, cmd, camp, suffix, field);
}

/* run_id of the node serving key's slot (one server: that server's). */
void pf_run_id_on(dlock__conn *conn, const char *key, char out[41])
{
    const char *argv[] = {"EVAL", "return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')", "1", key};
    dlock__reply *r = tr_cmdv(on(conn), 4, argv);
    assert_int_equal(dlock__reply_kind(r), DLOCK__R_STRING);
    snprintf(out, 41, "%s", dlock__reply_str(r, NULL));
    dlock__reply_free(r);
}

/* run_id of the server behind conn, from INFO server. */
static void run_id_of(dlock__conn *conn, char out[41])
{
    const char *argv[] = {"INFO", "server"};
    dlock__reply *r = tr_cmdv(on(conn), 2, argv);
    const char *p = strstr(dlock__reply_str(r, NULL), "run_id:");
    assert_non_null(p);
    snprintf(out, 41, "%.40s", p + 7);
    dlock__reply_free(r);
}

void pf_seed(const char *camp, int64_t stock, int64_t limit, int64_t reserve)
{
    sk_campaign c = {0};
    snprintf(c.id, sizeof(c.id), "%s", camp);
    snprintf(c.title, sizeof(c.title), "promise %s", camp);
    c.stock = stock;
    c.per_user_limit = limit;
    c.ends_at_ms = dlock__wall_ms() + 3600000;
    c.db_reserve = reserve;
    assert_int_equal(sk_db_campaign_create(pf_db, &c), 0);
    char meta[96], stk[96], s[24], l[24], rs[24], runid[41];
    snprintf(meta, sizeof(meta), "{c:%s}:meta", camp);
    snprintf(stk, sizeof(stk), "{c:%s}:stock", camp);
    snprintf(s, sizeof(s), "%" PRId64, stock);
    snprintf(l, sizeof(l), "%" PRId64, limit);
    snprintf(rs, sizeof(rs), "%" PRId64, reserve);
    run_id_of(NULL, runid);
    const char *h[] = {"HSET", meta, "title", c.title, "stock", s, "per_user_limit", l, "starts_at_ms", "0",
                       "ends_at_ms", "0", "price_cents", "0", "db_reserve", rs, "epoch", "1", "runid", runid};
    dlock__reply_free(tr_cmdv(on(NULL), 20, h));
    snprintf(s, sizeof(s), "%" PRId64, stock - reserve);
    const char *set[] = {"SET", stk, s};
    dlock__reply_free(tr_cmdv(on(NULL), 3, set));
    const char *sadd[] = {"SADD", "seckill:campaigns", camp};
    dlock__reply_free(tr_cmdv(on(NULL), 3, sadd));
}

sk_order_in pf_order(const char *camp, const char *user, int64_t qty)
{
    return (sk_order_in){pf_next_id(), camp, user, qty, "redis", dlock__wall_ms(), NULL, 0};
}

uint64_t pf_tag_buy_on(dlock__conn *conn, const char *tag, const char *camp, const char *user, int64_t qty,
                       const char *idem)
{
    char k[6][200], oid[24], q[24];
    uint64_t id = pf_next_id();
    static const char *const sfx[4] = {"meta", "stock", "buyers", "orders"};
    for (int i = 0; i < 4; i++) snprintf(k[i], sizeof(k[i]), "{%s}:%s", tag, sfx[i]);
    snprintf(k[4], sizeof(k[4]), "{%s}:order_status", tag);
    snprintf(k[5], sizeof(k[5]), "{%s}:idem:%s", tag, idem ? idem : "");
    snprintf(oid, sizeof(oid), "%" PRIu64, id);
    snprintf(q, sizeof(q), "%" PRId64, qty);
    const char *argv[] = {"EVAL", BUY_LUA, "6", k[0], k[1], k[2], k[3], k[4], k[5],
                          oid, user, q, camp, idem ? idem : ""};
    int64_t left = tr_reply_int(tr_cmdv(on(conn), 14, argv));
    if (left < 0) fail_msg("purchase of %s by %s in {%s} refused", camp, user, tag);
    return id;
}

uint64_t pf_redis_buy_on(dlock__conn *conn, const char *camp, const char *user, int64_t qty, const char *idem)
{
    char tag[80];
    snprintf(tag, sizeof(tag), "c:%s", camp);
    return pf_tag_buy_on(conn, tag, camp, user, qty, idem);
}

uint64_t pf_tag_xadd_on(dlock__conn *conn, const char *tag, const char *camp, const char *user, int64_t qty,
                        int64_t epoch)
{
    char key[200], oid[24], q[24], ep[24], ts[24];
    uint64_t id = pf_next_id();
    snprintf(key, sizeof(key), "{%s}:orders", tag);
    snprintf(oid, sizeof(oid), "%" PRIu64, id);
    snprintf(q, sizeof(q), "%" PRId64, qty);
    snprintf(ep, sizeof(ep), "%" PRId64, epoch);
    snprintf(ts, sizeof(ts), "%" PRId64, dlock__wall_ms());
    const char *argv[] = {"XADD", key, "*", "order_id", oid, "campaign", camp, "user", user, "qty", q,
                          "idem", "", "ts_ms", ts, "path", "redis", "epoch", ep};
    dlock__reply_free(tr_cmdv(on(conn), 19, argv));
    return id;
}

void pf_seed_sharded_on(dlock__conn *conn, const char *camp, int64_t stock, int64_t limit, int64_t reserve,
                        const sk_buckets *lay, const int64_t *bucket_stock, bool in_db)
{
    sk_campaign *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    snprintf(c->id, sizeof(c->id), "%s", camp);
    snprintf(c->title, sizeof(c->title), "shards %s", camp);
    c->stock = stock;
    c->per_user_limit = limit;
    c->db_reserve = reserve;
    c->shards = lay->k;
    assert_true(sk_buckets_format(lay, c->bucket_tags, sizeof(c->bucket_tags)) > 0);
    if (in_db) assert_int_equal(sk_db_campaign_create(pf_db, c), 0);
    for (int j = 0; j < lay->k; j++) {
        char meta[200], stk[200], s[24], l[24], rs[24], k[24], b[24], runid[41];
        sk_bucket_key(lay, j, "meta", meta, sizeof(meta));
        sk_bucket_key(lay, j, "stock", stk, sizeof(stk));
        snprintf(s, sizeof(s), "%" PRId64, stock);
        snprintf(l, sizeof(l), "%" PRId64, limit);
        snprintf(rs, sizeof(rs), "%" PRId64, reserve);
        snprintf(k, sizeof(k), "%d", lay->k);
        snprintf(b, sizeof(b), "%d", j);
        pf_run_id_on(conn, meta, runid);
        const char *h[] = {"HSET", meta, "title", c->title, "stock", s, "per_user_limit", l, "starts_at_ms", "0",
                           "ends_at_ms", "0", "price_cents", "0", "db_reserve", rs, "epoch", "1", "runid", runid,
                           "shards", k, "bucket", b, "bucket_tags", c->bucket_tags};
        dlock__reply_free(tr_cmdv(on(conn), j == 0 ? 26 : 24, h));
        snprintf(s, sizeof(s), "%" PRId64, bucket_stock[j]);
        const char *set[] = {"SET", stk, s};
        dlock__reply_free(tr_cmdv(on(conn), 3, set));
    }
    const char *sadd[] = {"SADD", "seckill:campaigns", camp};
    dlock__reply_free(tr_cmdv(on(conn), 3, sadd));
    free(c);
}

uint64_t pf_redis_buy(const char *camp, const char *user, int64_t qty)
{
    return pf_redis_buy_on(NULL, camp, user, qty, NULL);
}

void pf_drain(const char *camp)
{
    sk_persist_opts o;
    sk_persist_opts_init(&o);
    o.redis_url = pf_redis_url;
    o.database_url = pf_db_url;
    o.campaign = camp;
    o.batch = 64;
    o.block_ms = 50;
    o.claim_idle_ms = 300;
    o.pay_timeout_ms = 0;
    o.drain = true;
    char err[256];
    assert_int_equal(sk_persist_run(&o, NULL, err, sizeof(err)), 0);
}

void pf_sweep(const char *camp)
{
    int64_t c = 0, r = 0;
    assert_int_equal(sk_lifecycle_sweep(pf_db, pf_rc, camp, 0, 100, &c, &r), 0);
}

int pf_reconcile(const char *camp) { return sk_fx_reconcile(pf_db, pf_rc, camp, false); }

/* The schema as migrations 1..5 left it (test data: a database written by
 * an older release). */
static const char SCHEMA5[] =
    "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL);"
    "INSERT INTO schema_version VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0);"
    "CREATE TABLE campaigns (id TEXT PRIMARY KEY, title TEXT NOT NULL, stock BIGINT NOT NULL CHECK (stock >= 0),"
    " per_user_limit BIGINT NOT NULL CHECK (per_user_limit >= 1), starts_at_ms BIGINT NOT NULL,"
    " ends_at_ms BIGINT NOT NULL, price_cents BIGINT NOT NULL CHECK (price_cents >= 0), created_ms BIGINT NOT NULL);"
    "CREATE TABLE campaign_stock (campaign TEXT PRIMARY KEY REFERENCES campaigns(id),"
    " remaining BIGINT NOT NULL CHECK (remaining >= 0));"
    "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, campaign TEXT NOT NULL, user_id TEXT NOT NULL,"
    " qty BIGINT NOT NULL CHECK (qty > 0),"
    " status TEXT NOT NULL CHECK (status IN ('persisted','paid','cancelled','rejected')),"
    " reason TEXT NOT NULL DEFAULT '', path TEXT NOT NULL CHECK (path IN ('redis','db')),"
    " redis_released INTEGER NOT NULL DEFAULT 0, created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL,"
    " redis_mirrored INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX orders_campaign_status ON orders (campaign, status);"
    "CREATE INDEX orders_status_created ON orders (status, created_ms);"
    "CREATE INDEX orders_release_pending ON orders (updated_ms) WHERE status = 'cancelled' AND redis_released = 0;"
    "CREATE INDEX orders_mirror_pending ON orders (order_id) WHERE path = 'db' AND redis_mirrored = 0;"
    "CREATE TABLE user_totals (campaign TEXT NOT NULL, user_id TEXT NOT NULL, qty BIGINT NOT NULL CHECK (qty >= 0),"
    " PRIMARY KEY (campaign, user_id)) WITHOUT ROWID;"
    "INSERT INTO campaigns VALUES ('old', 'old', 5, 1, 0, 0, 0, 0);"
    "INSERT INTO campaign_stock VALUES ('old', 4);"
    "INSERT INTO orders VALUES (4242, 'old', 'o1', 1, 'persisted', '', 'redis', 0, 1, 1, 0);"
    "INSERT INTO user_totals VALUES ('old', 'o1', 1);";

uint64_t pf_make_schema5_sqlite(char *url_out, size_t len)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/schema5.db", sqlite_dir);
    unlink(path);
    sqlite3 *lite = NULL;
    assert_int_equal(sqlite3_open(path, &lite), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(lite, SCHEMA5, NULL, NULL, &msg) != SQLITE_OK) fail_msg("schema 5: %s", msg);
    sqlite3_close(lite);
    snprintf(url_out, len, "sqlite://%s", path);
    return 4242;
}

int pf_setup(void **state)
{
    (void)state;
    if (test_redis_start(&pf_redis_srv, NULL) != 0) return -1;
    snprintf(pf_redis_url, sizeof(pf_redis_url), "redis://127.0.0.1:%d", pf_redis_srv.port);
    const char *tmp = getenv("TMPDIR");
    snprintf(sqlite_dir, sizeof(sqlite_dir), "%s/sk-promise-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(sqlite_dir)) return -1;
    if (SK_TEST_PG) {
        if (test_postgres_start(&pg_srv) != 0) return -1;
        snprintf(pf_db_url, sizeof(pf_db_url), "%s", pg_srv.url);
    } else {
        snprintf(pf_db_url, sizeof(pf_db_url), "sqlite://%s/orders.db", sqlite_dir);
    }
    char err[512];
    if (sk_db_open(pf_db_url, &pf_db, err, sizeof(err)) != 0) {
        fprintf(stderr, "open %s: %s\n", pf_db_url, err);
        return -1;
    }
    return dlock__conn_open_url(pf_redis_url, 5000, &pf_rc, err, sizeof(err)) ? -1 : 0;
}

int pf_teardown(void **state)
{
    (void)state;
    sk_db_close(pf_db);
    dlock__conn_close(pf_rc);
    test_server_stop(&pf_redis_srv);
    if (SK_TEST_PG) test_server_stop(&pg_srv);
    static const char *const dbs[] = {"orders.db", "schema5.db", NULL};
    test_sqlite_dir_remove(sqlite_dir, dbs);
    return 0;
}
