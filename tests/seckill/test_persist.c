/* test_persist.c: the order pipeline against a real redis-server and a real
 * database (a SQLite file, or a private PostgreSQL when built with
 * SK_TEST_PG=1): batches persisted exactly once, the database guard,
 * kill -9 of a persister mid-batch, dead letters, payment timeout and
 * concurrent cancellation returning stock once, reconciliation. Redis
 * acceptance is driven by a small test script that decides like the
 * engine and XADDs entries in the contract's format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "db.h"
#include "db_sql.h"
#include "lifecycle.h"
#include "persist.h"
#include "redis_connect.h"
#include "reconcile.h"
#include "release.h"
#include "redis_cmd.h"
#include "servers.h"
#include "sk_fixture.h"
#include "sk_err.h"
#include "util.h"

#ifndef SK_TEST_PG
#define SK_TEST_PG 0
#endif

static test_server redis_srv, pg_srv;
static char redis_url[128], db_url[600], sqlite_dir[256];
static dlock__conn *rc;
static sk_db *db;
static uint64_t next_order_id = 1000;

static void rkey(char *out, size_t len, const char *camp, const char *suffix)
{
    snprintf(out, len, "{c:%s}:%s", camp, suffix);
}

/* Campaign in the database and pre-heated in Redis, reserve units of the
 * stock carved out for the database path (Redis gets the rest). */
static void seed_reserve(const char *camp, int64_t stock, int64_t limit, int64_t reserve)
{
    sk_campaign c = {0};
    snprintf(c.id, sizeof(c.id), "%s", camp);
    snprintf(c.title, sizeof(c.title), "test %s", camp);
    c.stock = stock;
    c.per_user_limit = limit;
    c.price_cents = 999;
    c.db_reserve = reserve;
    assert_int_equal(sk_db_campaign_create(db, &c), 0);
    char meta[96], stk[96], s[24], l[24];
    rkey(meta, sizeof(meta), camp, "meta");
    rkey(stk, sizeof(stk), camp, "stock");
    snprintf(s, sizeof(s), "%" PRId64, stock);
    snprintf(l, sizeof(l), "%" PRId64, limit);
    const char *h[] = {"HSET", meta, "title", c.title, "stock", s, "per_user_limit", l, "starts_at_ms", "0",
                       "ends_at_ms", "0", "price_cents", "999"};
    dlock__reply_free(tr_cmdv(rc, 14, h));
    snprintf(s, sizeof(s), "%" PRId64, stock - reserve);
    const char *set[] = {"SET", stk, s};
    dlock__reply_free(tr_cmdv(rc, 3, set));
}

static void seed(const char *camp, int64_t stock, int64_t limit) { seed_reserve(camp, stock, limit, 0); }

/* One purchase attempt through SK_FX_ACCEPT_LUA (its per-user limit too); force skips the decision (a
 * Redis that lost writes). Returns 1 accepted / 0 refused; *oid_out. */
static int buy(const char *camp, const char *user, int64_t qty, bool force, uint64_t *oid_out)
{
    char meta[96], stk[96], buyers[96], orders[96], oid[24], q[24], ts[24];
    rkey(meta, sizeof(meta), camp, "meta");
    rkey(stk, sizeof(stk), camp, "stock");
    rkey(buyers, sizeof(buyers), camp, "buyers");
    rkey(orders, sizeof(orders), camp, "orders");
    uint64_t id = next_order_id++;
    snprintf(oid, sizeof(oid), "%" PRIu64, id);
    snprintf(q, sizeof(q), "%" PRId64, qty);
    snprintf(ts, sizeof(ts), "%" PRId64, dlock__wall_ms());
    const char *argv[] = {"EVAL", SK_FX_ACCEPT_LUA, "4", stk, buyers, orders, meta, oid, user, q, camp, ts,
                          force ? "force" : "check"};
    int ok = (int)tr_cmd_int(rc, 13, argv);
    if (oid_out) *oid_out = id;
    return ok;
}

/* Users <prefix><from> .. <prefix><to - 1> buy one unit each; all accepted.
 * ids_out (may be NULL) gets the order ids, ids_out[i - from]. */
static void buy_range(const char *camp, const char *prefix, int from, int to, uint64_t *ids_out)
{
    for (int i = from; i < to; i++) {
        char user[32];
        snprintf(user, sizeof(user), "%s%d", prefix, i);
        assert_int_equal(buy(camp, user, 1, false, ids_out ? &ids_out[i - from] : NULL), 1);
    }
}

static void persist_opts(sk_persist_opts *o, const char *camp)
{
    sk_persist_opts_init(o);
    o->redis_url = redis_url;
    o->database_url = db_url;
    o->campaign = camp;
    o->batch = 64;
    o->block_ms = 50;
    o->claim_idle_ms = 300;
    o->pay_timeout_ms = 0;
    o->drain = true;
}

static sk_persist_stats drain(const char *camp)
{
    sk_persist_opts o;
    persist_opts(&o, camp);
    sk_persist_stats st = {0};
    char err[256];
    assert_int_equal(sk_persist_run(&o, &st, err, sizeof(err)), 0);
    return st;
}

static int reconcile_diffs(const char *camp, bool print) { return sk_fx_reconcile(db, rc, camp, print); }

static void counts(const char *camp, sk_db_campaign_stats *st)
{
    assert_int_equal(sk_db_campaign_stats_get(db, camp, st), 0);
}

static const char *build_path(const char *rel, char *buf, size_t len)
{
    const char *b = getenv("DLOCK_BUILD_DIR");
    snprintf(buf, len, "%s/%s", b ? b : ".", rel);
    return buf;
}

/* Runs a tool binary; returns its exit status (or -1). */
static int run_tool(const char *rel, const char *const *args)
{
    char path[512];
    build_path(rel, path, sizeof(path));
    pid_t pid = fork();
    if (pid == 0) {
        const char *argv[24] = {path};
        int n = 1;
        for (; args[n - 1] && n < 23; n++) argv[n] = args[n - 1];
        argv[n] = NULL;
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 1);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- fixtures ---------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    if (test_redis_start(&redis_srv, NULL) != 0) return -1;
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", redis_srv.port);
    if (SK_TEST_PG) {
        if (test_postgres_start(&pg_srv) != 0) return -1;
        snprintf(db_url, sizeof(db_url), "%s", pg_srv.url);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(sqlite_dir, sizeof(sqlite_dir), "%s/sk-persist-XXXXXX", tmp ? tmp : "/tmp");
        if (!mkdtemp(sqlite_dir)) return -1;
        snprintf(db_url, sizeof(db_url), "sqlite://%s/orders.db", sqlite_dir);
    }
    char err[512];
    if (sk_db_open(db_url, &db, err, sizeof(err)) != 0) {
        fprintf(stderr, "open %s: %s\n", db_url, err);
        return -1;
    }
    if (dlock__conn_open_url(redis_url, 5000, &rc, err, sizeof(err)) != 0) return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    sk_db_close(db);
    dlock__conn_close(rc);
    test_server_stop(&redis_srv);
    if (SK_TEST_PG) test_server_stop(&pg_srv);
    test_sqlite_dir_remove(sqlite_dir, NULL);
    return 0;
}

/* ---- tests ------------------------------------------------------------- */

static void test_bad_urls_and_inputs_are_refused_cleanly(void **state)
{
    (void)state;
    sk_db *d = NULL;
    char err[256];
    assert_int_equal(sk_db_open("mysql://x", &d, err, sizeof(err)), SK_EINVAL);
    assert_null(d);
    assert_int_equal(sk_db_open("", &d, err, sizeof(err)), SK_EINVAL);
    assert_int_equal(sk_db_open("sqlite://", &d, err, sizeof(err)), SK_EINVAL);
    /* two slashes would have opened ./orders.db without a word */
    assert_int_equal(sk_db_open("sqlite://orders.db", &d, err, sizeof(err)), SK_EINVAL);
    assert_non_null(strstr(err, "absolute path"));
    assert_int_equal(access("orders.db", F_OK), -1);
    assert_int_equal(sk_db_open("/nonexistent-dir/x/y.db", &d, err, sizeof(err)), SK_EDB);
    assert_int_equal(sk_db_open("postgresql://nobody@127.0.0.1:1/x?connect_timeout=1", &d, err, sizeof(err)), SK_EDB);
    assert_non_null(strstr(err, "postgresql"));
    sk_campaign c = {0};
    snprintf(c.id, sizeof(c.id), "bad id!");
    c.stock = 1;
    c.per_user_limit = 1;
    assert_int_equal(sk_db_campaign_create(db, &c), SK_EINVAL);
    snprintf(c.id, sizeof(c.id), "ok-id");
    c.per_user_limit = 0;
    assert_int_equal(sk_db_campaign_create(db, &c), SK_EINVAL);
    assert_int_equal(sk_db_campaign_get(db, "ok-id", NULL, NULL), SK_ENOTFOUND);
    assert_int_equal(sk_db_order_get(db, 424242, NULL), SK_ENOTFOUND);
    assert_int_equal(sk_db_order_pay(db, 424242, "u", NULL), SK_ENOTFOUND);
    sk_order_in o = {0, "x", "u", 1, "redis", 0, NULL, 1};
    assert_non_null(sk_db_order_invalid(&o));
    assert_int_equal(sk_db_apply_batch(db, &o, 1, NULL), SK_EINVAL);
}

static void test_migrations_are_versioned_and_idempotent(void **state)
{
    (void)state;
    int v = 0;
    assert_int_equal(sk_db_schema_version(db, &v), 0);
    assert_int_equal(v, 8);
    sk_db *d2 = NULL;
    char err[256];
    assert_int_equal(sk_db_open(db_url, &d2, err, sizeof(err)), 0); /* re-run: no-op */
    assert_int_equal(sk_db_schema_version(d2, &v), 0);
    assert_int_equal(v, 8);
    sk_db_close(d2);
    sk_campaign c = {0};
    snprintf(c.id, sizeof(c.id), "mig");
    c.stock = 3;
    c.per_user_limit = 1;
    assert_int_equal(sk_db_campaign_create(db, &c), 0);
    assert_int_equal(sk_db_campaign_create(db, &c), SK_EEXIST);
    int64_t rem = -1;
    sk_campaign got;
    assert_int_equal(sk_db_campaign_get(db, "mig", &got, &rem), 0);
    assert_int_equal(rem, 3);
    assert_int_equal(got.stock, 3);
}

static void test_sale_of_100_to_2000_buyers_persists_exactly_100(void **state)
{
    (void)state;
    const char *camp = "sale100";
    seed(camp, 100, 1);
    int accepted = 0;
    for (int i = 0; i < 2000; i++) {
        char user[32];
        snprintf(user, sizeof(user), "user%d", i % 1900); /* 100 users try twice */
        accepted += buy(camp, user, 1, false, NULL);
    }
    assert_int_equal(accepted, 100);
    sk_persist_stats st = drain(camp);
    assert_int_equal(st.persisted, 100);
    assert_int_equal(st.rejected, 0);
    sk_db_campaign_stats s;
    counts(camp, &s);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 100);
    assert_int_equal(s.remaining, 0);
    assert_int_equal(s.user_total_units, 100);
    assert_int_equal(reconcile_diffs(camp, false), 0);
    const char *args[] = {"--redis-url", redis_url, "--database-url", db_url, "reconcile", "--campaign", camp,
                          "--wait", "2s", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", args), 0);
    /* a second drain finds nothing and changes nothing */
    st = drain(camp);
    assert_int_equal(st.persisted, 0);
    assert_int_equal(reconcile_diffs(camp, false), 0);
}

static void test_redelivered_orders_are_no_ops(void **state)
{
    (void)state;
    const char *camp = "redeliver";
    seed(camp, 10, 2);
    sk_order_in in[3] = {{900001, camp, "a", 1, "redis", 1, NULL, 1}, {900002, camp, "b", 2, "redis", 1, NULL, 1},
                         {900001, camp, "a", 1, "redis", 1, NULL, 1}};
    int res[3];
    assert_int_equal(sk_db_apply_batch(db, in, 3, res), 0);
    assert_int_equal(res[0], SK_APPLY_PERSISTED);
    assert_int_equal(res[1], SK_APPLY_PERSISTED);
    assert_int_equal(res[2], SK_APPLY_DUPLICATE);
    assert_int_equal(sk_db_apply_batch(db, in, 2, res), 0);
    assert_int_equal(res[0], SK_APPLY_DUPLICATE);
    assert_int_equal(res[1], SK_APPLY_DUPLICATE);
    int64_t rem = 0;
    assert_int_equal(sk_db_campaign_get(db, camp, NULL, &rem), 0);
    assert_int_equal(rem, 7);
    /* user ids with quotes, backslashes and braces are refused whole (one
     * user-id rule at every door, rulebook.h): nothing of the batch is written */
    sk_order_in bad[2] = {{900005, camp, "ok", 1, "redis", 1, NULL, 1}, {900006, camp, "a\"b\\c{,}", 1, "redis", 1, NULL, 1}};
    assert_int_equal(sk_db_apply_batch(db, bad, 2, res), SK_EINVAL);
    assert_int_equal(sk_db_order_get(db, 900005, NULL), SK_ENOTFOUND);
    /* the allowed punctuation and the spelling NULL survive (PostgreSQL arrays) */
    sk_order_in odd[2] = {{900003, camp, "a.b:c-d_e", 1, "redis", 1, NULL, 1}, {900004, camp, "NULL", 1, "db", 1, NULL, 1}};
    assert_int_equal(sk_db_apply_batch(db, odd, 2, res), 0);
    assert_int_equal(res[0], SK_APPLY_PERSISTED);
    assert_int_equal(res[1], SK_APPLY_PERSISTED);
    sk_order_row row;
    assert_int_equal(sk_db_order_get(db, 900003, &row), 0);
    assert_string_equal(row.user, "a.b:c-d_e");
    assert_int_equal(sk_db_order_get(db, 900004, &row), 0);
    assert_string_equal(row.user, "NULL");
    assert_string_equal(row.path, "db");
}

/* Stops the worker at a moment when it holds delivered, unacknowledged
 * entries (it is mid-batch), then kills it with SIGKILL. */
static int64_t pending_count(const char *camp)
{
    char key[96];
    rkey(key, sizeof(key), camp, "orders");
    int64_t pending = 0, lag = 0;
    assert_int_equal(sk_persist_backlog(rc, camp, &pending, &lag), 0);
    (void)key;
    return pending;
}

/* Starts seckill-persist on camp with opts (NULL-terminated): quiet when
 * log is NULL, else its log (stderr) goes to the file log. */
static pid_t spawn_persister_log(const char *camp, const char *const *opts, const char *log)
{
    char path[512];
    build_path("tools/seckill-persist/seckill-persist", path, sizeof(path));
    const char *argv[24] = {path, "--redis-url", redis_url, "--database-url", db_url, "--campaign", camp, "--quiet"};
    int n = log ? 7 : 8;
    for (int i = 0; opts[i] && n < 23; i++) argv[n++] = opts[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = log ? open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600) : -1;
        if (fd >= 0) dup2(fd, 2);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static pid_t spawn_persister(const char *camp, const char *const *opts)
{
    return spawn_persister_log(camp, opts, NULL);
}

static void test_kill9_mid_batch_then_restart_persists_every_order_once(void **state)
{
    (void)state;
    const char *camp = "kill9";
    const int n = 3000;
    seed(camp, n, 1);
    buy_range(camp, "k", 0, n, NULL);
    const char *opts[] = {"--batch", "20", "--block", "50", "--pay-timeout", "0", NULL};
    pid_t pid = spawn_persister(camp, opts);
    assert_true(pid > 0);
    bool killed = false;
    for (int tries = 0; tries < 4000 && !killed; tries++) {
        dlock__sleep_ms(2);
        kill(pid, SIGSTOP);
        sk_db_campaign_stats s;
        counts(camp, &s);
        int64_t pending = pending_count(camp);
        if (s.orders[SK_ST_PERSISTED] > 100 && pending > 0) {
            kill(pid, SIGKILL);
            killed = true;
        } else {
            kill(pid, SIGCONT);
        }
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(killed);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    int64_t stranded = pending_count(camp);
    assert_true(stranded > 0);
    sk_db_campaign_stats s;
    counts(camp, &s);
    assert_true(s.orders[SK_ST_PERSISTED] < n);
    /* a new worker reclaims the dead one's entries after claim_idle_ms */
    sk_persist_stats ps = drain(camp);
    assert_true(ps.reclaimed >= stranded);
    counts(camp, &s);
    assert_int_equal(s.orders[SK_ST_PERSISTED], n);
    assert_int_equal(s.orders[SK_ST_REJECTED], 0);
    assert_int_equal(s.remaining, 0);
    assert_int_equal(pending_count(camp), 0);
    assert_int_equal(reconcile_diffs(camp, false), 0);
}

static void test_guard_rejects_what_the_database_cannot_sell(void **state)
{
    (void)state;
    const char *camp = "guard";
    seed(camp, 100, 1);
    assert_int_equal(sk_db_stock_set(db, camp, 90), 0); /* behind Redis's back */
    buy_range(camp, "g", 0, 100, NULL);
    /* a Redis that lost the buyer record accepts g0 twice */
    uint64_t dup_user_order = 0;
    char buyers[96];
    rkey(buyers, sizeof(buyers), camp, "buyers");
    assert_int_equal(buy(camp, "g0", 1, true, &dup_user_order), 1);
    sk_persist_stats st = drain(camp);
    assert_int_equal(st.persisted, 90);
    assert_int_equal(st.rejected, 11);
    sk_db_campaign_stats s;
    counts(camp, &s);
    assert_int_equal(s.orders[SK_ST_PERSISTED], 90);
    assert_int_equal(s.orders[SK_ST_REJECTED], 11);
    assert_int_equal(s.remaining, 0);
    assert_int_equal(s.user_total_units, 90);
    sk_order_row row;
    assert_int_equal(sk_db_order_get(db, dup_user_order, &row), 0);
    assert_string_equal(row.status, "rejected");
    assert_true(strcmp(row.reason, "per-user limit") == 0 || strcmp(row.reason, "sold out in database") == 0);
    /* the metric */
    char stats[96];
    rkey(stats, sizeof(stats), camp, "pipeline");
    const char *hg[] = {"HGET", stats, "rejected"};
    assert_int_equal(tr_cmd_int(rc, 3, hg), 11);
    /* reconciliation reports it; Redis-path orders were refused: broken
     * promises, the tool exits 4 */
    assert_true(reconcile_diffs(camp, true) > 0);
    const char *args[] = {"--redis-url", redis_url, "--database-url", db_url, "reconcile", "--campaign", camp,
                          "--json", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", args), 4);
}

static void test_pay_then_timeout_cancels_the_rest_returning_stock_once(void **state)
{
    (void)state;
    const char *camp = "paytimeout";
    seed(camp, 10, 1);
    uint64_t ids[10];
    buy_range(camp, "p", 0, 10, ids);
    drain(camp);
    sk_order_row row;
    assert_int_equal(sk_db_order_pay(db, ids[0], "p1", &row), SK_EFORBIDDEN);
    for (int i = 0; i < 3; i++) {
        char user[32];
        snprintf(user, sizeof(user), "p%d", i);
        assert_int_equal(sk_db_order_pay(db, ids[i], user, &row), 0);
        assert_string_equal(row.status, "paid");
        assert_int_equal(sk_db_order_pay(db, ids[i], user, &row), 0); /* idempotent */
    }
    /* listen for the restock signal */
    dlock__conn *sub = NULL;
    char err[256], events[96];
    assert_int_equal(dlock__conn_open_url(redis_url, 2000, &sub, err, sizeof(err)), 0);
    rkey(events, sizeof(events), camp, "events");
    const char *sargv[] = {"SUBSCRIBE", events};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(sub, 2, sargv, NULL, &r), 0);
    dlock__reply_free(r);
    dlock__sleep_ms(120);
    int64_t cancelled = 0, released = 0;
    assert_int_equal(sk_lifecycle_sweep(db, rc, camp, 100, 500, &cancelled, &released), 0);
    assert_int_equal(cancelled, 7);
    assert_int_equal(released, 7);
    sk_db_campaign_stats s;
    counts(camp, &s);
    assert_int_equal(s.orders[SK_ST_CANCELLED], 7);
    char relkey[96];
    rkey(relkey, sizeof(relkey), camp, "released");
    const char *scard[] = {"SCARD", relkey};
    assert_int_equal(tr_cmd_int(rc, 2, scard), 7);
    assert_int_equal(s.orders[SK_ST_PAID], 3);
    assert_int_equal(s.released_pending, 0);
    r = NULL;
    assert_int_equal(dlock__conn_read_push(sub, 2000, &r), 0);
    assert_string_equal(dlock__reply_str(dlock__reply_at(r, 2), NULL), "restock");
    dlock__reply_free(r);
    dlock__conn_close(sub);
    /* again: nothing more goes back */
    int64_t c2 = 0, r2 = 0;
    assert_int_equal(sk_lifecycle_sweep(db, rc, camp, 100, 500, &c2, &r2), 0);
    assert_int_equal(c2, 0);
    assert_int_equal(r2, 0);
    assert_int_equal(sk_db_order_get(db, ids[5], &row), 0);
    assert_string_equal(row.status, "cancelled");
    assert_string_equal(row.reason, "payment timeout");
    assert_int_equal(sk_db_order_pay(db, ids[5], "p5", NULL), SK_ECONFLICT);
    char stk[96];
    rkey(stk, sizeof(stk), camp, "stock");
    const char *get[] = {"GET", stk};
    assert_int_equal(tr_cmd_int(rc, 2, get), 7);
    int64_t rem = 0;
    assert_int_equal(sk_db_campaign_get(db, camp, NULL, &rem), 0);
    assert_int_equal(rem, 7);
    assert_int_equal(reconcile_diffs(camp, false), 0);
    /* the freed units can be bought again, by the same users too */
    assert_int_equal(buy(camp, "p5", 1, false, NULL), 1);
    drain(camp);
    assert_int_equal(reconcile_diffs(camp, false), 0);
}

typedef struct cancel_arg {
    uint64_t order_id;
} cancel_arg;

static int cancel_child(void *p)
{
    cancel_arg *a = p;
    sk_db *d = NULL;
    dlock__conn *c = NULL;
    char err[256];
    if (sk_db_open(db_url, &d, err, sizeof(err)) || dlock__conn_open_url(redis_url, 5000, &c, err, sizeof(err)))
        return 2;
    int r = sk_order_cancel(d, c, a->order_id, "user cancelled");
    /* also hammer the Redis gate directly, as a retrying worker would */
    sk_order_row row;
    int rel = 0;
    if (sk_db_order_get(d, a->order_id, &row) == 0 && strcmp(row.status, "cancelled") == 0)
        rel = sk_release_order(c, &row, "cancelled");
    sk_db_close(d);
    dlock__conn_close(c);
    if (rel < 0) return 4;
    return r == 0 ? 0 : r == SK_ECONFLICT ? 1 : 4;
}

static void test_concurrent_cancellations_return_stock_once(void **state)
{
    (void)state;
    const char *camp = "concancel";
    seed(camp, 5, 1);
    uint64_t id = 0;
    assert_int_equal(buy(camp, "cc", 1, false, &id), 1);
    drain(camp);
    cancel_arg a = {id};
    enum { N = 8 };
    pid_t pids[N];
    for (int i = 0; i < N; i++) pids[i] = test_fork(cancel_child, &a);
    int winners = 0, losers = 0, others = 0;
    for (int i = 0; i < N; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (code == 0) winners++;
        else if (code == 1) losers++;
        else others++;
    }
    assert_int_equal(others, 0);
    assert_int_equal(winners, 1);
    assert_int_equal(losers, N - 1);
    char stk[96], rel[96];
    rkey(stk, sizeof(stk), camp, "stock");
    rkey(rel, sizeof(rel), camp, "released");
    const char *get[] = {"GET", stk};
    assert_int_equal(tr_cmd_int(rc, 2, get), 5);
    const char *sc[] = {"SCARD", rel};
    assert_int_equal(tr_cmd_int(rc, 2, sc), 1);
    int64_t rem = 0;
    assert_int_equal(sk_db_campaign_get(db, camp, NULL, &rem), 0);
    assert_int_equal(rem, 5);
    assert_int_equal(sk_order_cancel(db, rc, id, "again"), SK_ECONFLICT);
    assert_int_equal(reconcile_diffs(camp, false), 0);
}

static void test_malformed_and_poisoned_entries_go_to_dead_letters(void **state)
{
    (void)state;
    const char *camp = "poison";
    seed(camp, 50, 1);
    char orders[96], dead[96];
    rkey(orders, sizeof(orders), camp, "orders");
    rkey(dead, sizeof(dead), camp, "orders:dead");
    const char *bad[] = {"XADD", orders, "*", "order_id", "77", "campaign", camp, "user", "x", "qty", "abc",
                         "ts_ms", "1", "path", "redis"};
    dlock__reply_free(tr_cmdv(rc, 15, bad));
    /* a row the database refuses with an error (not a guard refusal) */
    if (SK_TEST_PG) {
        assert_int_equal(sk__db_script(db, "CREATE FUNCTION sk_poison() RETURNS trigger AS $$ BEGIN"
                                           " IF NEW.user_id = 'poison' THEN RAISE EXCEPTION 'poisoned row'; END IF;"
                                           " RETURN NEW; END $$ LANGUAGE plpgsql;"
                                           "CREATE TRIGGER sk_poison BEFORE INSERT ON orders FOR EACH ROW"
                                           " EXECUTE FUNCTION sk_poison()"),
                         0);
    } else {
        assert_int_equal(sk__db_script(db, "CREATE TRIGGER sk_poison BEFORE INSERT ON orders"
                                           " WHEN NEW.user_id = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned row'); END"),
                         0);
    }
    buy_range(camp, "ok", 0, 10, NULL);
    assert_int_equal(buy(camp, "poison", 1, false, NULL), 1);
    sk_persist_opts o;
    persist_opts(&o, camp);
    o.max_deliveries = 3;
    o.claim_idle_ms = 100;
    sk_persist_stats st = {0};
    char err[256];
    assert_int_equal(sk_persist_run(&o, &st, err, sizeof(err)), 0);
    assert_int_equal(st.persisted, 10);
    assert_int_equal(st.dead_lettered, 2);
    const char *xl[] = {"XLEN", dead};
    assert_int_equal(tr_cmd_int(rc, 2, xl), 2);
    const char *xr[] = {"XRANGE", dead, "-", "+"};
    dlock__reply *r = tr_cmdv(rc, 4, xr);
    int saw_poison = 0, saw_qty = 0;
    for (size_t i = 0; i < dlock__reply_count(r); i++) {
        const dlock__reply *f = dlock__reply_at(dlock__reply_at(r, i), 1);
        for (size_t j = 0; j + 1 < dlock__reply_count(f); j += 2) {
            const char *k = dlock__reply_str(dlock__reply_at(f, j), NULL);
            const char *v = dlock__reply_str(dlock__reply_at(f, j + 1), NULL);
            if (strcmp(k, "error") == 0 && strstr(v, "poisoned row")) saw_poison++;
            if (strcmp(k, "error") == 0 && strcmp(v, "bad qty") == 0) saw_qty++;
        }
    }
    dlock__reply_free(r);
    assert_int_equal(saw_poison, 1);
    assert_int_equal(saw_qty, 1);
    assert_int_equal(pending_count(camp), 0);
    if (!SK_TEST_PG) {
        sk__db_script(db, "DROP TRIGGER IF EXISTS sk_poison");
    } else {
        sk__db_script(db, "DROP TRIGGER IF EXISTS sk_poison ON orders");
        sk__db_script(db, "DROP FUNCTION IF EXISTS sk_poison()");
    }
    assert_true(reconcile_diffs(camp, false) > 0); /* dead letters are differences */
}

typedef struct thr_arg {
    const char *camp;
    int base, n;
    int ok;
} thr_arg;

static void *direct_thread(void *p)
{
    thr_arg *a = p;
    sk_db *d = NULL;
    char err[256];
    if (sk_db_open(db_url, &d, err, sizeof(err))) return NULL;
    for (int i = 0; i < a->n; i++) {
        char user[32];
        snprintf(user, sizeof(user), "dt%d", i); /* the same users in every thread */
        if (sk_db_purchase_direct(d, (uint64_t)(7000000 + a->base + i), a->camp, user, 1, dlock__wall_ms()) == 0)
            a->ok++;
    }
    sk_db_close(d);
    return NULL;
}

static void test_concurrent_direct_purchases_never_oversell(void **state)
{
    (void)state;
    const char *camp = "directcc";
    seed_reserve(camp, 40, 1, 30);
    enum { T = 4 };
    pthread_t th[T];
    thr_arg a[T];
    for (int i = 0; i < T; i++) {
        a[i] = (thr_arg){camp, i * 1000, 50, 0};
        pthread_create(&th[i], NULL, direct_thread, &a[i]);
    }
    int ok = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        ok += a[i].ok;
    }
    assert_int_equal(ok, 30);
    sk_db_campaign_stats s;
    counts(camp, &s);
    assert_int_equal(s.remaining, 10);
    assert_int_equal(s.reserve_remaining, 0);
    assert_int_equal(s.orders[SK_ST_PENDING], 30);
    assert_int_equal(s.user_total_units, 0);
}

static void test_two_persisters_at_once_persist_each_order_once(void **state)
{
    (void)state;
    const char *camp = "twoworkers";
    const int n = 1500;
    seed(camp, n, 1);
    buy_range(camp, "w", 0, n, NULL);
    const char *opts[] = {"--batch", "32", "--block", "50", "--pay-timeout", "0", "--drain", NULL};
    pid_t pids[2];
    for (int i = 0; i < 2; i++) pids[i] = spawn_persister(camp, opts);
    for (int i = 0; i < 2; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    sk_db_campaign_stats s;
    counts(camp, &s);
    assert_int_equal(s.orders[SK_ST_PERSISTED], n);
    assert_int_equal(s.remaining, 0);
    assert_int_equal(reconcile_diffs(camp, false), 0);
}

typedef struct bg_worker {
    sk_persist_opts o;
    atomic_int stop;
    sk_persist_stats st;
    int rc;
    pthread_t th;
} bg_worker;

static void *bg_main(void *p)
{
    bg_worker *b = p;
    char err[256];
    b->rc = sk_persist_run(&b->o, &b->st, err, sizeof(err));
    return NULL;
}

/* Starts a persister for camp on a thread; it runs until b->stop is set. */
static void bg_start(bg_worker *b, const char *camp)
{
    persist_opts(&b->o, camp);
    b->o.drain = false;
    b->o.stop = &b->stop;
    atomic_store(&b->stop, 0);
    assert_int_equal(pthread_create(&b->th, NULL, bg_main, b), 0);
}

/* Polls (<= 15 s); tolerates a database still in crash recovery. */
static void wait_persisted(const char *camp, int64_t want)
{
    int64_t end = dlock__now_ms() + 15000;
    sk_db_campaign_stats s = {0};
    int err;
    do {
        err = sk_db_campaign_stats_get(db, camp, &s);
        if (err == 0 && s.orders[SK_ST_PERSISTED] >= want) break;
        dlock__sleep_ms(20);
    } while (dlock__now_ms() < end);
    assert_int_equal(err, 0);
    assert_int_equal(s.orders[SK_ST_PERSISTED], want);
}

/* Redis killed and restarted empty (no persistence): the worker keeps
 * running, re-creates the group and persists what is accepted after. */
/* The Redis the tests share, set aside while one test runs on its own. */
typedef struct shared_redis {
    test_server srv;
    char url[sizeof(redis_url)];
    dlock__conn *conn;
} shared_redis;

/* Points the tests' Redis (redis_srv, redis_url, rc) at a private server. */
static void use_private_redis(shared_redis *saved)
{
    saved->srv = redis_srv;
    memcpy(saved->url, redis_url, sizeof(redis_url));
    saved->conn = rc;
    assert_int_equal(test_redis_start(&redis_srv, NULL), 0);
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", redis_srv.port);
    char err[512];
    assert_int_equal(dlock__conn_open_url(redis_url, 5000, &rc, err, sizeof(err)), 0);
}

static void restore_shared_redis(const shared_redis *saved)
{
    dlock__conn_close(rc);
    test_server_stop(&redis_srv);
    redis_srv = saved->srv;
    memcpy(redis_url, saved->url, sizeof(redis_url));
    rc = saved->conn;
}

/* On a Redis of its own: the kill and the empty restart touch no other
 * test's keys, so the test may run in any order. */
static void test_worker_survives_a_redis_restart(void **state)
{
    (void)state;
    shared_redis saved;
    use_private_redis(&saved);
    const char *camp = "rrestart";
    seed(camp, 100, 1);
    static bg_worker b;
    bg_start(&b, camp);
    buy_range(camp, "r", 0, 20, NULL);
    wait_persisted(camp, 20);
    test_server_kill(&redis_srv);
    dlock__sleep_ms(300); /* the worker sees the outage and backs off */
    assert_int_equal(test_redis_restart(&redis_srv, NULL), 0);
    char meta[96], stk[96];
    rkey(meta, sizeof(meta), camp, "meta");
    rkey(stk, sizeof(stk), camp, "stock");
    const char *h[] = {"HSET", meta, "stock", "100", "per_user_limit", "1"};
    dlock__reply_free(tr_cmdv(rc, 6, h));
    const char *set[] = {"SET", stk, "80"};
    dlock__reply_free(tr_cmdv(rc, 3, set));
    buy_range(camp, "r", 20, 40, NULL);
    wait_persisted(camp, 40);
    atomic_store(&b.stop, 1);
    pthread_join(b.th, NULL);
    assert_int_equal(b.rc, 0);
    assert_true(b.st.redis_errors > 0);
    int64_t rem = 0;
    assert_int_equal(sk_db_campaign_get(db, camp, NULL, &rem), 0);
    assert_int_equal(rem, 60);
    restore_shared_redis(&saved);
}

/* Two seckill-persist processes sweep the same campaign: every unpaid
 * order is cancelled once and its unit comes back once on each side. */
static void test_two_workers_cancel_unpaid_orders_once(void **state)
{
    (void)state;
    const char *camp = "sweep2";
    seed(camp, 50, 1);
    uint64_t ids[50];
    buy_range(camp, "s", 0, 50, ids);
    drain(camp);
    for (int i = 0; i < 10; i++) {
        char user[32];
        snprintf(user, sizeof(user), "s%d", i);
        assert_int_equal(sk_db_order_pay(db, ids[i], user, NULL), 0);
    }
    const char *opts[] = {"--block", "20", "--pay-timeout", "150ms", "--sweep-interval", "10ms", "--batch", "4", NULL};
    pid_t pids[2];
    for (int i = 0; i < 2; i++) pids[i] = spawn_persister(camp, opts);
    sk_db_campaign_stats s;
    int64_t end = dlock__now_ms() + 10000;
    do {
        dlock__sleep_ms(50);
        counts(camp, &s);
    } while ((s.orders[SK_ST_CANCELLED] < 40 || s.released_pending) && dlock__now_ms() < end);
    for (int i = 0; i < 2; i++) {
        kill(pids[i], SIGTERM);
        int st = 0;
        waitpid(pids[i], &st, 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    counts(camp, &s);
    assert_int_equal(s.orders[SK_ST_CANCELLED], 40);
    assert_int_equal(s.orders[SK_ST_PAID], 10);
    assert_int_equal(s.released_pending, 0);
    assert_int_equal(s.remaining, 40);
    char stk[96], rel[96];
    rkey(stk, sizeof(stk), camp, "stock");
    rkey(rel, sizeof(rel), camp, "released");
    const char *get[] = {"GET", stk};
    assert_int_equal(tr_cmd_int(rc, 2, get), 40);
    const char *sc[] = {"SCARD", rel};
    assert_int_equal(tr_cmd_int(rc, 2, sc), 40);
    assert_int_equal(reconcile_diffs(camp, false), 0);
}

/* Lines of log that report a payment-timeout cancellation: each names one
 * of ids and camp; the log limiter may fold a burst of them into one line
 * "(N more like this since ...)". Returns the cancellations they account for. */
static int timeout_lines(const char *log, const char *camp, const uint64_t *ids, int nids)
{
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[1024], want[96];
    snprintf(want, sizeof(want), " of campaign %s (user ", camp);
    int seen = 0;
    while (fgets(line, sizeof(line), f)) {
        if (!strstr(line, "cancelled: payment timeout (unpaid for ")) continue;
        assert_non_null(strstr(line, want));
        const char *o = strstr(line, "order ");
        assert_non_null(o);
        uint64_t id = strtoull(o + 6, NULL, 10);
        bool known = false;
        for (int i = 0; i < nids; i++) known |= ids[i] == id;
        if (!known) fail_msg("a cancellation line names order %" PRIu64 ", not one of the sale's: %s", id, line);
        const char *more = strstr(line, " more like this since ");
        seen += 1;
        if (more) {
            const char *p = more;
            while (p > line && p[-1] >= '0' && p[-1] <= '9') p--;
            seen += (int)strtol(p, NULL, 10) - 1; /* the summary repeats the last line counted */
        }
    }
    fclose(f);
    return seen;
}

/* The payment timeout leaves a trace: one log line per cancelled order
 * (order id, campaign, user, reason), folded by the log limiter when they
 * come in a burst but always accounted for. */
static void test_timeout_cancellation_is_logged(void **state)
{
    (void)state;
    const char *camp = "tolog";
    seed(camp, 10, 1);
    uint64_t ids[3];
    buy_range(camp, "t", 0, 3, ids);
    drain(camp);
    char log[] = "/tmp/dlock-tolog-XXXXXX";
    int fd = mkstemp(log);
    assert_true(fd >= 0);
    close(fd);
    const char *opts[] = {"--block", "20", "--pay-timeout", "150ms", "--sweep-interval", "10ms", NULL};
    pid_t pid = spawn_persister_log(camp, opts, log);
    sk_db_campaign_stats s;
    int64_t end = dlock__now_ms() + 10000;
    do {
        dlock__sleep_ms(50);
        counts(camp, &s);
    } while (s.orders[SK_ST_CANCELLED] < 3 && dlock__now_ms() < end);
    kill(pid, SIGTERM); /* the limiter's pending summary is flushed on exit */
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(s.orders[SK_ST_CANCELLED], 3);
    int seen = timeout_lines(log, camp, ids, 3);
    unlink(log);
    assert_int_equal(seen, 3);
}

/* PostgreSQL restarted under a running worker (and under this test's own
 * handle): the worker reconnects between transactions, entries accepted
 * meanwhile stay pending in Redis and are persisted afterwards. */
static void test_worker_survives_a_database_restart(void **state)
{
    (void)state;
    if (!SK_TEST_PG) skip(); /* SQLite is a file: nothing to restart */
    const char *camp = "dbrestart";
    seed(camp, 100, 1);
    static bg_worker b;
    bg_start(&b, camp);
    buy_range(camp, "q", 0, 20, NULL);
    wait_persisted(camp, 20);
    assert_int_equal(test_postgres_restart(&pg_srv), 0);
    buy_range(camp, "q", 20, 40, NULL);
    wait_persisted(camp, 40);
    atomic_store(&b.stop, 1);
    pthread_join(b.th, NULL);
    assert_int_equal(b.rc, 0);
    assert_int_equal(pending_count(camp), 0);
    assert_int_equal(reconcile_diffs(camp, false), 0);
}

/* PostgreSQL killed (-9) for a while under a worker with max_deliveries 2:
 * the outage dead-letters nothing; every order lands once it is back. */
static void test_database_outage_dead_letters_nothing(void **state)
{
    (void)state;
    if (!SK_TEST_PG) skip();
    const char *camp = "dboutage";
    seed(camp, 100, 1);
    static bg_worker b;
    persist_opts(&b.o, camp);
    b.o.drain = false;
    b.o.stop = &b.stop;
    b.o.max_deliveries = 2;
    b.o.claim_idle_ms = 200;
    atomic_store(&b.stop, 0);
    assert_int_equal(pthread_create(&b.th, NULL, bg_main, &b), 0);
    buy_range(camp, "o", 0, 10, NULL);
    wait_persisted(camp, 10);
    dlock__sleep_ms(700); /* the fixture runs synchronous_commit=off: let the WAL writer flush */
    test_server_kill(&pg_srv);
    buy_range(camp, "o", 10, 30, NULL);
    dlock__sleep_ms(2500); /* many worker rounds against a dead database */
    assert_int_equal(test_postgres_restart(&pg_srv), 0);
    wait_persisted(camp, 30);
    atomic_store(&b.stop, 1);
    pthread_join(b.th, NULL);
    assert_int_equal(b.rc, 0);
    assert_true(b.st.db_errors > 0);
    assert_int_equal(b.st.dead_lettered, 0);
    assert_int_equal(pending_count(camp), 0);
    assert_int_equal(reconcile_diffs(camp, false), 0);
}

static void test_tools_refuse_bad_arguments(void **state)
{
    (void)state;
    const char *a1[] = {"--database-url", db_url, "frobnicate", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", a1), 2);
    const char *a2[] = {"--database-url", "mysql://x", "campaigns", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", a2), 2);
    const char *a3[] = {"--database-url", db_url, "reconcile", "--campaign", "bad id!", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", a3), 2);
    const char *a4[] = {"--database-url", db_url, "order", "12x", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", a4), 2);
    const char *a5[] = {"--database-url", db_url, "--redis-url", "redis://127.0.0.1:1", "reconcile", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", a5), 3);
    const char *a6[] = {"--database-url", db_url, "order", "1", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", a6), 1); /* not found */
    const char *a8[] = {"--database-url", db_url, "reconcile", "--wait", "soon", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", a8), 2);
    const char *a7[] = {"--database-url", db_url, "campaigns", "--json", NULL};
    assert_int_equal(run_tool("tools/seckill/seckill", a7), 0);
    const char *p1[] = {"--database-url", db_url, "--batch", "0", NULL};
    assert_int_equal(run_tool("tools/seckill-persist/seckill-persist", p1), 2);
    const char *p2[] = {"--database-url", db_url, "--pay-timeout", "soon", NULL};
    assert_int_equal(run_tool("tools/seckill-persist/seckill-persist", p2), 2);
    const char *p3[] = {"--bogus", NULL};
    assert_int_equal(run_tool("tools/seckill-persist/seckill-persist", p3), 2);
    const char *p4[] = {"--database-url", db_url, "--redis-url", "redis://127.0.0.1:1", "--drain", "--quiet", NULL};
    assert_int_equal(run_tool("tools/seckill-persist/seckill-persist", p4), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_urls_and_inputs_are_refused_cleanly),
        cmocka_unit_test(test_migrations_are_versioned_and_idempotent),
        cmocka_unit_test(test_sale_of_100_to_2000_buyers_persists_exactly_100),
        cmocka_unit_test(test_redelivered_orders_are_no_ops),
        cmocka_unit_test(test_kill9_mid_batch_then_restart_persists_every_order_once),
        cmocka_unit_test(test_guard_rejects_what_the_database_cannot_sell),
        cmocka_unit_test(test_pay_then_timeout_cancels_the_rest_returning_stock_once),
        cmocka_unit_test(test_concurrent_cancellations_return_stock_once),
        cmocka_unit_test(test_malformed_and_poisoned_entries_go_to_dead_letters),
        cmocka_unit_test(test_concurrent_direct_purchases_never_oversell),
        cmocka_unit_test(test_two_persisters_at_once_persist_each_order_once),
        cmocka_unit_test(test_two_workers_cancel_unpaid_orders_once),
        cmocka_unit_test(test_timeout_cancellation_is_logged),
        cmocka_unit_test(test_worker_survives_a_redis_restart), /* on its own Redis */
        cmocka_unit_test(test_worker_survives_a_database_restart),
        cmocka_unit_test(test_database_outage_dead_letters_nothing),
        cmocka_unit_test(test_tools_refuse_bad_arguments),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
