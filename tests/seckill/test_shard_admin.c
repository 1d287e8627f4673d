/* test_shard_admin.c: the order lifecycle, reconcile and the admin tool on
 * a campaign of K = 3 buckets (docs/seckill.md, "One hot campaign over
 * many masters"), against a real redis-server (with SK_TEST_CLUSTER=1: a
 * real 3-master Cluster) and a real SQLite file. The bucket key sets are
 * written the way the heat and the transfer scripts leave them (metas with
 * shards / bucket, stocks, buyers, streams, journal entries {T}:xfer and
 * gates {T}:xin); orders are accepted in their user's home bucket and stored
 * in the database, their stream entries read and acknowledged by the
 * persisters' group. Checks: a cancellation restocks the user's home bucket
 * only; reconcile is clean with one applied and one in-flight transfer and
 * names the exact difference when a unit is doubled or lost, or a journal
 * entry is malformed; `seckill campaigns show` and `seckill metrics` list
 * every bucket (on the Cluster: three buckets on three masters). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "buckets.h"
#include "cluster_fixture.h"
#include "db.h"
#include "lifecycle.h"
#include "persist.h"
#include "redis_connect.h"
#include "reconcile.h"
#include "redis_cmd.h"
#include "servers.h"
#include "sk_fixture.h"
#include "sk_err.h"
#include "slot.h"
#include "util.h"

#ifndef SK_TEST_CLUSTER
#define SK_TEST_CLUSTER 0
#endif

#define K 3

static test_server redis_srv;
static test_cluster cluster;
static char redis_url[1100], db_url[600], db_dir[256];
static dlock__conn *rc;
static sk_db *db;
static uint64_t next_order_id = 5000;

static int64_t bucket_stock(const sk_buckets *b, int j)
{
    char k[128];
    sk_bucket_key(b, j, "stock", k, sizeof(k));
    const char *argv[] = {"GET", k};
    return tr_cmd_int(rc, 2, argv);
}

/* ---- bucket placement on the Cluster: the master of each slot ---------- */

/* The slot map, read once per placement from CLUSTER NODES (placement
 * asks for every slot: one round trip each would take seconds). */
static int slot_port[16384];

static void slot_map_read(void)
{
    static char nodes[16384];
    const char *cn[] = {"CLUSTER", "NODES"};
    memset(slot_port, 0, sizeof(slot_port));
    assert_int_equal(test_cluster_cmd(&cluster, 0, nodes, sizeof(nodes), 2, cn), 0);
    for (char *l = nodes, *nl; *l; l = nl ? nl + 1 : l + strlen(l)) {
        nl = strchr(l, '\n');
        if (nl) *nl = '\0'; /* one line of CLUSTER NODES at a time */
        char addr[64], flags[64];
        int used = 0;
        if (sscanf(l, "%*s %63s %63s %*s %*s %*s %*s %*s%n", addr, flags, &used) != 2 || !strstr(flags, "master"))
            continue;
        const char *colon = strchr(addr, ':');
        int port = colon ? (int)strtol(colon + 1, NULL, 10) : 0;
        for (char *t = l + used; *t;) {
            char *end = NULL;
            long a = strtol(t, &end, 10), b = a;
            if (end == t) break;
            if (*end == '-') b = strtol(end + 1, &end, 10);
            for (long x = a; x <= b && x < 16384; x++) slot_port[x] = port;
            t = end;
        }
    }
}

static int node_of_slot(void *ud, unsigned slot, char *buf, size_t len)
{
    (void)ud;
    if (slot >= 16384 || !slot_port[slot]) return -1;
    snprintf(buf, len, "127.0.0.1:%d", slot_port[slot]);
    return 0;
}

/* The campaign in the database and its K buckets in Redis as the heat
 * leaves them: stock split evenly, every meta with shards / bucket, bucket
 * 0's with bucket_tags, each stream with the persisters' group. */
static void heat(const char *camp, int64_t stock, sk_buckets *b)
{
    if (SK_TEST_CLUSTER) slot_map_read();
    assert_int_equal(sk_buckets_place(camp, K, SK_TEST_CLUSTER ? node_of_slot : NULL, NULL, b), 0);
    sk_campaign c = {0};
    snprintf(c.id, sizeof(c.id), "%s", camp);
    snprintf(c.title, sizeof(c.title), "sharded %s", camp);
    c.stock = stock;
    c.per_user_limit = 2;
    c.price_cents = 100;
    c.shards = K;
    assert_true(sk_buckets_format(b, c.bucket_tags, sizeof(c.bucket_tags)) > 0);
    assert_int_equal(sk_db_campaign_create(db, &c), 0);
    char s[24], kk[8], jj[8], meta[128], stk[128], orders[128];
    snprintf(s, sizeof(s), "%" PRId64, stock);
    snprintf(kk, sizeof(kk), "%d", K);
    for (int j = 0; j < K; j++) {
        snprintf(jj, sizeof(jj), "%d", j);
        sk_bucket_key(b, j, "meta", meta, sizeof(meta));
        const char *h[] = {"HSET", meta, "title", c.title, "stock", s, "per_user_limit", "2", "starts_at_ms", "0",
                           "ends_at_ms", "0", "price_cents", "100", "shards", kk, "bucket", jj,
                           "bucket_tags", c.bucket_tags};
        tr_cmd(rc, j == 0 ? 20 : 18, h);
        char share[24];
        snprintf(share, sizeof(share), "%" PRId64, stock / K + (j < stock % K));
        sk_bucket_key(b, j, "stock", stk, sizeof(stk));
        const char *set[] = {"SET", stk, share};
        tr_cmd(rc, 3, set);
        sk_bucket_key(b, j, "orders", orders, sizeof(orders));
        const char *g[] = {"XGROUP", "CREATE", orders, SK_PERSIST_GROUP, "$", "MKSTREAM"};
        tr_cmd(rc, 6, g);
    }
}

/* The persisters' half for bucket j: every new entry read and acknowledged. */
static void ack_stream(const sk_buckets *b, int j)
{
    char orders[128];
    sk_bucket_key(b, j, "orders", orders, sizeof(orders));
    const char *xr[] = {"XREADGROUP", "GROUP", SK_PERSIST_GROUP, "t", "COUNT", "10000", "STREAMS", orders, ">"};
    dlock__reply *r = tr_cmdv(rc, 9, xr);
    if (dlock__reply_kind(r) == DLOCK__R_ARRAY && dlock__reply_count(r) == 1) {
        const dlock__reply *entries = dlock__reply_at(dlock__reply_at(r, 0), 1);
        for (size_t i = 0; i < dlock__reply_count(entries); i++) {
            const char *id = dlock__reply_str(dlock__reply_at(dlock__reply_at(entries, i), 0), NULL);
            const char *ack[] = {"XACK", orders, SK_PERSIST_GROUP, id};
            tr_cmd(rc, 4, ack);
        }
    }
    dlock__reply_free(r);
}

/* user buys one unit in its home bucket; the order is stored (persisted),
 * its stream entry acknowledged when ack. */
static uint64_t buy_ack(const char *camp, const sk_buckets *b, const char *user, bool ack)
{
    int j = sk_home_bucket(user, K);
    char stk[128], buyers[128], orders[128], oid[24], ts[24];
    sk_bucket_key(b, j, "stock", stk, sizeof(stk));
    sk_bucket_key(b, j, "buyers", buyers, sizeof(buyers));
    sk_bucket_key(b, j, "orders", orders, sizeof(orders));
    uint64_t id = next_order_id++;
    snprintf(oid, sizeof(oid), "%" PRIu64, id);
    snprintf(ts, sizeof(ts), "%" PRId64, dlock__wall_ms());
    const char *ev[] = {"EVAL", SK_FX_ACCEPT_LUA, "3", stk, buyers, orders, oid, user, "1", camp, ts};
    assert_int_equal(tr_cmd_int(rc, 11, ev), 1);
    sk_order_in o = {.order_id = id, .campaign = camp, .user = user, .qty = 1, .path = "redis",
                     .created_ms = dlock__wall_ms(), .idem = "", .epoch = 1};
    int res = 0;
    assert_int_equal(sk_db_apply_batch(db, &o, 1, &res), 0);
    assert_int_equal(res, SK_APPLY_PERSISTED);
    if (ack) ack_stream(b, j);
    return id;
}

static uint64_t buy(const char *camp, const sk_buckets *b, const char *user) { return buy_ack(camp, b, user, true); }

/* A user whose home bucket is j (u<j>-<n> for the first n that hashes there). */
static void user_of_bucket(int j, const char *prefix, char *out, size_t len)
{
    for (int n = 0;; n++) {
        snprintf(out, len, "%s%d", prefix, n);
        if (sk_home_bucket(out, K) == j) return;
    }
}

/* take of a transfer on bucket src: its units leave the stock, the journal
 * entry names the destination; give: the destination's gate and stock. */
static void take(const sk_buckets *b, const char *xid, int src, int dst, int64_t n)
{
    char stk[128], xfer[128], units[24], val[64];
    sk_bucket_key(b, src, "stock", stk, sizeof(stk));
    sk_bucket_key(b, src, "xfer", xfer, sizeof(xfer));
    snprintf(units, sizeof(units), "%" PRId64, n);
    snprintf(val, sizeof(val), "%d\n%" PRId64 "\n%" PRId64, dst, n, dlock__wall_ms());
    const char *d[] = {"DECRBY", stk, units};
    tr_cmd(rc, 3, d);
    const char *h[] = {"HSET", xfer, xid, val};
    tr_cmd(rc, 4, h);
}

static void give(const sk_buckets *b, const char *xid, int dst, int64_t n)
{
    char stk[128], xin[128], units[24];
    sk_bucket_key(b, dst, "stock", stk, sizeof(stk));
    sk_bucket_key(b, dst, "xin", xin, sizeof(xin));
    snprintf(units, sizeof(units), "%" PRId64, n);
    const char *s[] = {"SADD", xin, xid};
    if (tr_cmd_int(rc, 3, s) == 1) {
        const char *i[] = {"INCRBY", stk, units};
        tr_cmd(rc, 3, i);
    }
}

/* Reconcile's differences of camp (text), and the count. */
static int reconcile(const char *camp, sk_reconcile_report *rep, dlock__buf *text)
{
    assert_int_equal(sk_reconcile_campaign(db, rc, camp, rep), 0);
    sk_reconcile_format(rep, false, text);
    if (rep->ndiffs) fprintf(stderr, "%s", text->data);
    return rep->ndiffs;
}

static int reconcile_n(const char *camp)
{
    sk_reconcile_report rep;
    dlock__buf t = {0};
    int n = reconcile(camp, &rep, &t);
    sk_reconcile_report_free(&rep);
    dlock__buf_free(&t);
    return n;
}

/* Runs the admin tool; its stdout into out (NUL-terminated); exit status. */
static int run_seckill(char *out, size_t len, const char *const *args)
{
    char path[512];
    const char *bd = getenv("DLOCK_BUILD_DIR");
    snprintf(path, sizeof(path), "%s/tools/seckill/seckill", bd ? bd : ".");
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        const char *argv[24] = {path, "--redis-url", redis_url, "--database-url", db_url};
        int n = 5;
        for (int i = 0; args[i] && n < 23; i++) argv[n++] = args[i];
        argv[n] = NULL;
        dup2(fd[1], 1);
        close(fd[0]);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < len && (r = read(fd[0], out + got, len - 1 - got)) > 0) got += (size_t)r;
    out[got] = '\0';
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- tests ------------------------------------------------------------- */

/* A cancelled order's unit returns to its user's home bucket and no other;
 * a second cancellation changes nothing; reconcile stays clean. */
static void test_cancellation_restocks_the_users_home_bucket_only(void **state)
{
    (void)state;
    sk_buckets b;
    heat("cancel3", 30, &b);
    char users[K][32];
    uint64_t oid[K];
    for (int j = 0; j < K; j++) {
        user_of_bucket(j, "cu", users[j], sizeof(users[j]));
        oid[j] = buy("cancel3", &b, users[j]);
    }
    assert_int_equal(reconcile_n("cancel3"), 0);
    for (int j = 0; j < K; j++) assert_int_equal(bucket_stock(&b, j), 9);
    /* the user of bucket 2 cancels: bucket 2 gets the unit, 0 and 1 keep 9 */
    assert_int_equal(sk_order_cancel(db, rc, oid[2], "test"), 0);
    assert_int_equal(bucket_stock(&b, 0), 9);
    assert_int_equal(bucket_stock(&b, 1), 9);
    assert_int_equal(bucket_stock(&b, 2), 10);
    char buyers[128], released[128];
    sk_bucket_key(&b, 2, "buyers", buyers, sizeof(buyers));
    const char *hg[] = {"HEXISTS", buyers, users[2]};
    assert_int_equal(tr_cmd_int(rc, 3, hg), 0);
    sk_bucket_key(&b, 2, "released", released, sizeof(released));
    const char *sc[] = {"SCARD", released};
    assert_int_equal(tr_cmd_int(rc, 2, sc), 1);
    assert_int_equal(sk_order_cancel(db, rc, oid[2], "again"), SK_ECONFLICT);
    assert_int_equal(bucket_stock(&b, 2), 10);
    /* the sweep re-running a release is gated in the home bucket too */
    int64_t cancelled = 0, released_n = 0;
    assert_int_equal(sk_lifecycle_sweep(db, rc, "cancel3", 0, 16, &cancelled, &released_n), 0);
    assert_int_equal(bucket_stock(&b, 2), 10);
    assert_int_equal(reconcile_n("cancel3"), 0);
}

/* One transfer given but not finished, one taken and not given: both
 * count once; the Redis side adds up to what the database says is left. */
static void test_reconcile_counts_units_in_transit_once(void **state)
{
    (void)state;
    sk_buckets b;
    heat("xfer3", 30, &b);
    char u[32];
    for (int j = 0; j < K; j++) {
        user_of_bucket(j, "xu", u, sizeof(u));
        buy("xfer3", &b, u);
    }
    take(&b, "x-applied", 1, 2, 3); /* given, journal entry not yet done */
    give(&b, "x-applied", 2, 3);
    take(&b, "x-flight", 0, 1, 2); /* taken, the give has not run */
    sk_reconcile_report rep;
    dlock__buf t = {0};
    assert_int_equal(reconcile("xfer3", &rep, &t), 0);
    assert_int_equal(rep.r_in_transit, 2);
    assert_int_equal(rep.r_in_transit_entries, 1);
    assert_int_equal(rep.r_stock, 25);
    assert_int_equal(rep.bucket[0].transit_out_units, 2);
    assert_int_equal(rep.bucket[1].xfer_entries, 1);
    assert_int_equal(rep.bucket[1].transit_out_units, 0);
    assert_non_null(strstr(t.data, "in transit: 2 units in 1 transfers between 3 buckets"));
    sk_reconcile_report_free(&rep);
    dlock__buf_free(&t);
    /* recovery finishes both: still clean, nothing in transit */
    give(&b, "x-flight", 1, 2);
    give(&b, "x-flight", 1, 2); /* re-run: gated */
    char xfer[128];
    sk_bucket_key(&b, 0, "xfer", xfer, sizeof(xfer));
    const char *done0[] = {"HDEL", xfer, "x-flight"};
    tr_cmd(rc, 3, done0);
    assert_int_equal(reconcile("xfer3", &rep, &t), 0);
    assert_int_equal(rep.r_in_transit, 0);
    assert_int_equal(rep.r_stock, 27);
    sk_reconcile_report_free(&rep);
    dlock__buf_free(&t);
}

/* One of rep's differences contains s. */
static bool has_diff(const sk_reconcile_report *rep, const char *s)
{
    const char *p = rep->diffs.data;
    for (int i = 0; i < rep->ndiffs; i++, p += strlen(p) + 1)
        if (strstr(p, s)) return true;
    return false;
}

/* A give applied twice (its gate lost) is 3 units too many, a journal
 * entry dropped before its give 2 units missing; each named exactly, with
 * one line per bucket. */
static void test_reconcile_names_a_doubled_or_lost_transfer(void **state)
{
    (void)state;
    sk_buckets b;
    heat("lost3", 30, &b);
    take(&b, "x-a", 1, 2, 3);
    give(&b, "x-a", 2, 3);
    take(&b, "x-b", 0, 1, 2);
    assert_int_equal(reconcile_n("lost3"), 0);
    char xin2[128], xfer0[128], line[160];
    sk_bucket_key(&b, 2, "xin", xin2, sizeof(xin2));
    sk_bucket_key(&b, 0, "xfer", xfer0, sizeof(xfer0));
    /* the gate of x-a deleted: the journal says in transit, bucket 2 has it too */
    const char *srem[] = {"SREM", xin2, "x-a"};
    tr_cmd(rc, 3, srem);
    sk_reconcile_report rep;
    dlock__buf t = {0};
    assert_true(reconcile("lost3", &rep, &t) > 0);
    assert_true(has_diff(&rep, "remaining stock: Redis 28 in 3 buckets + 5 in transit = 33, database 30 "
                               "(remaining 30 - reserve 0): 3 units too many"));
    sk_reconcile_report_free(&rep);
    dlock__buf_free(&t);
    /* the doubled give itself (the give re-run without its gate) */
    give(&b, "x-a", 2, 3);
    assert_true(reconcile("lost3", &rep, &t) > 0);
    assert_true(has_diff(&rep, "remaining stock: Redis 31 in 3 buckets + 2 in transit = 33, database 30 "
                               "(remaining 30 - reserve 0): 3 units too many"));
    for (int j = 0; j < K; j++) {
        snprintf(line, sizeof(line), "bucket %d {%s}: stock ", j, b.tag[j]);
        assert_true(has_diff(&rep, line));
    }
    snprintf(line, sizeof(line), "bucket 2 {%s}: stock 16, 0 units taken out in transit", b.tag[2]);
    assert_true(has_diff(&rep, line));
    sk_reconcile_report_free(&rep);
    dlock__buf_free(&t);
    /* undo the double (3 out of bucket 2, the entry done), then lose x-b */
    char stk2[128];
    sk_bucket_key(&b, 2, "stock", stk2, sizeof(stk2));
    const char *dec[] = {"DECRBY", stk2, "3"};
    tr_cmd(rc, 3, dec);
    char xfer1[128];
    sk_bucket_key(&b, 1, "xfer", xfer1, sizeof(xfer1));
    const char *done_a[] = {"HDEL", xfer1, "x-a"};
    tr_cmd(rc, 3, done_a);
    assert_int_equal(reconcile_n("lost3"), 0);
    const char *drop_b[] = {"HDEL", xfer0, "x-b"};
    tr_cmd(rc, 3, drop_b);
    assert_true(reconcile("lost3", &rep, &t) > 0);
    assert_true(has_diff(&rep, "remaining stock: Redis 28 in 3 buckets + 0 in transit = 28, database 30 "
                               "(remaining 30 - reserve 0): 2 units missing"));
    assert_true(has_diff(&rep, "bucket 0 {c:lost3}: stock 8, 0 units taken out in transit (0 transfers)"));
    sk_reconcile_report_free(&rep);
    dlock__buf_free(&t);
}

/* Journal entries that name no other bucket or do not parse are
 * differences (never a crash), their units counted nowhere. */
static void test_reconcile_reports_malformed_journal_entries(void **state)
{
    (void)state;
    sk_buckets b;
    heat("bad3", 30, &b);
    char xfer1[128];
    sk_bucket_key(&b, 1, "xfer", xfer1, sizeof(xfer1));
    static const char *const bad[][2] = {
        {"x-garbage", "garbage"}, {"x-far", "7\n1\n1"}, {"x-self", "1\n1\n1"},
        {"x-zero", "2\n0\n1"},    {"x-neg", "-1\n1\n1"}, {"x-short", "2\n1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *h[] = {"HSET", xfer1, bad[i][0], bad[i][1]};
        tr_cmd(rc, 4, h);
    }
    sk_reconcile_report rep;
    dlock__buf t = {0};
    assert_int_equal(reconcile("bad3", &rep, &t), 6);
    assert_int_equal(rep.r_in_transit, 0);
    assert_int_equal(rep.bucket[1].xfer_entries, 6);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[256];
        snprintf(want, sizeof(want), "bucket 1 {%s}: journal entry %s of {%s}:xfer is malformed", b.tag[1],
                 bad[i][0], b.tag[1]);
        assert_true(has_diff(&rep, want));
    }
    assert_true(has_diff(&rep, "('7|1|1')"));
    sk_reconcile_report_free(&rep);
    dlock__buf_free(&t);
}

/* Line of text that starts with prefix, copied into out. */
static bool line_with(const char *text, const char *prefix, char *out, size_t len)
{
    const char *p = strstr(text, prefix);
    if (!p) return false;
    size_t n = strcspn(p, "\n");
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p);
    return true;
}

/* campaigns show lists every bucket with its master, stock, buyers and
 * journal; metrics has the per-bucket gauges; the tool's reconcile exits 0
 * on the consistent campaign. On the Cluster the 3 buckets are served by
 * 3 different masters, each the one placement chose. */
static void test_admin_shows_every_bucket_and_its_master(void **state)
{
    (void)state;
    sk_buckets b;
    heat("show3", 30, &b);
    char u[32];
    for (int j = 0; j < K; j++) {
        user_of_bucket(j, "su", u, sizeof(u));
        buy("show3", &b, u);
    }
    take(&b, "x-s", 2, 0, 4);
    static char out[16384];
    const char *show[] = {"campaigns", "show", "show3", NULL};
    assert_int_equal(run_seckill(out, sizeof(out), show), 0);
    fprintf(stderr, "%s", out);
    char masters[K][64], line[512], want[256];
    for (int j = 0; j < K; j++) {
        snprintf(want, sizeof(want), "  bucket %d {%s} on ", j, b.tag[j]);
        assert_true(line_with(out, want, line, sizeof(line)));
        const char *m = line + strlen(want), *end = strstr(m, ": ");
        assert_non_null(end);
        snprintf(masters[j], sizeof(masters[j]), "%.*s", (int)(end - m), m);
        char key[128], expect[64];
        sk_bucket_key(&b, j, "meta", key, sizeof(key));
        if (SK_TEST_CLUSTER) node_of_slot(NULL, dlock__key_slot(key, strlen(key)), expect, sizeof(expect));
        else snprintf(expect, sizeof(expect), "127.0.0.1:%d", redis_srv.port);
        assert_string_equal(masters[j], expect);
        assert_non_null(strstr(line, j == 2 ? "remaining 5, buyers 1 (1 units), journal 1 out (4 units in transit)"
                                            : "remaining 9, buyers 1 (1 units), journal 0 out (0 units in transit)"));
        assert_non_null(strstr(line, "stream 1 entries (pending 0, lag 0)"));
    }
    if (SK_TEST_CLUSTER) {
        assert_string_not_equal(masters[0], masters[1]);
        assert_string_not_equal(masters[1], masters[2]);
        assert_string_not_equal(masters[0], masters[2]);
    }
    assert_non_null(strstr(out, "remaining 23 + 4 in transit (1 transfers), 3 units bought by 3 buyers"));
    assert_non_null(strstr(out, "oldest transfer in transit taken "));
    const char *js[] = {"campaigns", "show", "show3", "--json", NULL};
    assert_int_equal(run_seckill(out, sizeof(out), js), 0);
    assert_non_null(strstr(out, "\"shards\":3,\"remaining\":23,\"in_transit\":4"));
    const char *met[] = {"metrics", "--campaign", "show3", NULL};
    assert_int_equal(run_seckill(out, sizeof(out), met), 0);
    assert_non_null(strstr(out, "seckill_campaign_shards{campaign=\"show3\"} 3\n"));
    assert_non_null(strstr(out, "seckill_bucket_remaining{campaign=\"show3\",bucket=\"2\"} 5\n"));
    assert_non_null(strstr(out, "seckill_bucket_journal_entries{campaign=\"show3\",bucket=\"2\"} 1\n"));
    assert_non_null(strstr(out, "seckill_bucket_in_transit_units{campaign=\"show3\"} 4\n"));
    assert_non_null(strstr(out, "seckill_bucket_in_transit_transfers{campaign=\"show3\"} 1\n"));
    assert_non_null(strstr(out, "seckill_bucket_in_transit_oldest_seconds{campaign=\"show3\"} "));
    assert_null(strstr(out, "seckill_bucket_in_transit_oldest_seconds{campaign=\"show3\"} 0.000\n"));
    assert_non_null(strstr(out, "seckill_reconcile_differences{campaign=\"show3\"} 0\n"));
    const char *rec[] = {"reconcile", "--campaign", "show3", NULL};
    assert_int_equal(run_seckill(out, sizeof(out), rec), 0);
    const char *bad[] = {"campaigns", "show", "no such", NULL};
    assert_int_equal(run_seckill(out, sizeof(out), bad), 2);
    const char *none[] = {"campaigns", "show", "nosuch", NULL};
    assert_int_equal(run_seckill(out, sizeof(out), none), 1);
}

/* An entry of bucket 2's stream not yet read by the persisters: reconcile
 * names that bucket, and --wait waits for it (not for bucket 0 only). */
static void test_reconcile_waits_for_every_buckets_stream(void **state)
{
    (void)state;
    sk_buckets b;
    heat("wait3", 30, &b);
    char u[32], want[256];
    user_of_bucket(2, "wu", u, sizeof(u));
    buy_ack("wait3", &b, u, false);
    sk_reconcile_report rep;
    dlock__buf t = {0};
    assert_int_equal(reconcile("wait3", &rep, &t), 1);
    snprintf(want, sizeof(want), "bucket 2 {%s}: stream not drained: 0 pending, 1 never delivered", b.tag[2]);
    assert_true(has_diff(&rep, want));
    sk_reconcile_report_free(&rep);
    dlock__buf_free(&t);
    static char out[16384];
    const char *rec[] = {"reconcile", "--campaign", "wait3", "--wait", "400ms", NULL};
    int64_t t0 = dlock__now_ms();
    assert_int_equal(run_seckill(out, sizeof(out), rec), 1);
    assert_true(dlock__now_ms() - t0 >= 400);
    assert_non_null(strstr(out, want));
    ack_stream(&b, 2);
    t0 = dlock__now_ms();
    assert_int_equal(run_seckill(out, sizeof(out), rec), 0);
    assert_true(dlock__now_ms() - t0 < 400);
}

/* A buyer record outside its user's home bucket (the per-user limit would
 * no longer be exact) is named with both buckets. */
static void test_reconcile_names_a_buyer_outside_its_home_bucket(void **state)
{
    (void)state;
    sk_buckets b;
    heat("home3", 30, &b);
    char u[32], from[128], to[128], want[256];
    user_of_bucket(1, "hu", u, sizeof(u));
    buy("home3", &b, u);
    assert_int_equal(reconcile_n("home3"), 0);
    sk_bucket_key(&b, 1, "buyers", from, sizeof(from));
    sk_bucket_key(&b, 0, "buyers", to, sizeof(to));
    const char *del[] = {"HDEL", from, u};
    tr_cmd(rc, 3, del);
    const char *set[] = {"HSET", to, u, "1"};
    tr_cmd(rc, 4, set);
    sk_reconcile_report rep;
    dlock__buf t = {0};
    assert_int_equal(reconcile("home3", &rep, &t), 1);
    snprintf(want, sizeof(want), "bucket 0 {c:home3}: user %s holds 1 units but its home bucket is 1 {%s}", u, b.tag[1]);
    assert_true(has_diff(&rep, want));
    sk_reconcile_report_free(&rep);
    dlock__buf_free(&t);
}

/* ---- fixtures ---------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    if (SK_TEST_CLUSTER) {
        if (test_cluster_start(&cluster, 3, 0) != 0) return -1;
        snprintf(redis_url, sizeof(redis_url), "%s", cluster.url);
    } else {
        if (test_redis_start(&redis_srv, NULL) != 0) return -1;
        snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", redis_srv.port);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(db_dir, sizeof(db_dir), "%s/sk-shard-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(db_dir)) return -1;
    snprintf(db_url, sizeof(db_url), "sqlite://%s/orders.db", db_dir);
    char err[256];
    if (sk_db_open(db_url, &db, err, sizeof(err)) != 0) {
        fprintf(stderr, "db: %s\n", err);
        return -1;
    }
    if (dlock__conn_open_url(redis_url, 5000, &rc, err, sizeof(err)) != 0) {
        fprintf(stderr, "redis: %s\n", err);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    dlock__conn_close(rc);
    sk_db_close(db);
    if (SK_TEST_CLUSTER) test_cluster_stop(&cluster);
    else test_server_stop(&redis_srv);
    test_sqlite_dir_remove(db_dir, NULL);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cancellation_restocks_the_users_home_bucket_only),
        cmocka_unit_test(test_reconcile_counts_units_in_transit_once),
        cmocka_unit_test(test_reconcile_names_a_doubled_or_lost_transfer),
        cmocka_unit_test(test_reconcile_reports_malformed_journal_entries),
        cmocka_unit_test(test_admin_shows_every_bucket_and_its_master),
        cmocka_unit_test(test_reconcile_waits_for_every_buckets_stream),
        cmocka_unit_test(test_reconcile_names_a_buyer_outside_its_home_bucket),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
