/* test_seckilld_promise.c: what a 201 promises (docs/design/promise.md),
 * with real redis-server processes (standalone with and without fsync,
 * a master with a replica) and real seckilld processes: 201 only when the
 * decision is acknowledged, 202 pending + Location otherwise (replica
 * paused, no fsync, CONFIG refused), a replay answers the current state,
 * GET tells pending/lost, the barrier answers 503 recovering with
 * Retry-After, every call bumps meta.calls and XADDs the epoch, the
 * database reserve is carved out of Redis's stock, and an instance paused
 * past its worker-id lease stops issuing ids until it holds a new one.
 * Each case starts its own servers: SKT_FILTER=<case> runs one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "orderid.h"
#include "servers.h"
#include "skt.h"
#include "util.h"

#define ADMIN "Authorization: Bearer adm-token\r\n"

static test_server master, replica, sentinel;
static skt_daemon d, d2;

static int teardown(void **state)
{
    (void)state;
    int bad = 0;
    test_server_pause(&replica, false);
    test_server_pause(&master, false);
    if (d.pid > 0) kill(d.pid, SIGCONT); /* a failed case may leave it stopped */
    if (d.pid > 0 && skt_daemon_stop(&d) != 0) bad = -1;
    if (d2.pid > 0 && skt_daemon_stop(&d2) != 0) bad = -1;
    if (sentinel.pid > 0) test_server_stop(&sentinel);
    if (replica.pid > 0) test_server_stop(&replica);
    if (master.pid > 0) test_server_stop(&master);
    memset(&replica, 0, sizeof(replica));
    memset(&sentinel, 0, sizeof(sentinel));
    memset(&master, 0, sizeof(master));
    return bad;
}

/* Starts master (with conf) and d on it (with the extra flags). */
static void start(const char *const *conf, const char *const *flags)
{
    assert_int_equal(test_redis_start(&master, conf), 0);
    const char *extra[16] = {"--admin-token", "adm-token"};
    int n = 2;
    for (int i = 0; flags && flags[i] && n < 15; i++) extra[n++] = flags[i];
    extra[n] = NULL;
    assert_int_equal(skt_daemon_start(&d, master.url, extra), 0);
}

static int create_on(int port, const char *id, long stock, const char *more)
{
    char body[512], resp[1024];
    int64_t now = dlock__wall_ms();
    snprintf(body, sizeof(body),
             "{\"id\":\"%s\",\"stock\":%ld,\"starts_at\":%lld,\"ends_at\":%lld%s}", id, stock,
             (long long)(now - 60000), (long long)(now + 3600000), more ? more : "");
    return skt_http(port, "POST", "/v1/campaigns", ADMIN, body, strlen(body), resp, sizeof(resp));
}

static int buy(int port, const char *campaign, const char *user, const char *idem, char *resp, size_t cap)
{
    char path[128], hdr[256];
    snprintf(path, sizeof(path), "/v1/campaigns/%s/purchase", campaign);
    snprintf(hdr, sizeof(hdr), "X-User-Id: %s\r\n%s%s%s", user, idem ? "Idempotency-Key: " : "",
             idem ? idem : "", idem ? "\r\n" : "");
    return skt_http(port, "POST", path, hdr, "{}", 2, resp, cap);
}

static void field(const char *json, const char *key, const char *want)
{
    char got[128] = "";
    if (!skt_json_str(json, key, got, sizeof(got)) || strcmp(got, want) != 0)
        fail_msg("expected \"%s\":\"%s\" in %s", key, want, json);
}

static void expect_pending(const char *resp, char *oid, size_t cap)
{
    field(resp, "status", "pending");
    assert_true(skt_json_str(resp, "order_id", oid, cap));
    char loc[96];
    snprintf(loc, sizeof(loc), "Location: /v1/orders/%s\r\n", oid);
    if (!strstr(skt_last_response(), loc)) fail_msg("no %s in %s", loc, skt_last_response());
}

static long metric(int port, const char *series)
{
    static char m[65536];
    assert_int_equal(skt_http(port, "GET", "/metrics", ADMIN, NULL, 0, m, sizeof(m)), 200); /* all of it */
    char pat[160];
    snprintf(pat, sizeof(pat), "\n%s ", series);
    const char *p = strstr(m, pat);
    if (!p) fail_msg("no metric %s", series);
    return strtol(p + strlen(pat), NULL, 10);
}

/* Waits (at most 2 s) until the gauge series is want; its last value. */
static long metric_until(const char *series, long want)
{
    long v = metric(d.port, series);
    for (int64_t end = dlock__now_ms() + 2000; v != want && dlock__now_ms() < end; v = metric(d.port, series))
        dlock__sleep_ms(20);
    return v;
}

/* Handshake: a 201 needs x's engine to have seen the replica in sync (its
 * 250 ms probe); before that a purchase is rightly 202. */
static void wait_in_sync(const skt_daemon *x)
{
    for (int64_t end = dlock__now_ms() + 5000; metric(x->port, "seckill_ack_replicas_in_sync") < 1 && dlock__now_ms() < end;)
        dlock__sleep_ms(20);
    assert_int_equal(metric(x->port, "seckill_ack_replicas_in_sync"), 1);
}

static void redis_cmd(const test_server *s, char *out, size_t cap, int argc, const char **argv)
{
    assert_int_equal(test_redis_cmd(s, out, cap, argc, argv), 0);
}

static void test_standalone_without_fsync_answers_202_and_get_says_pending(void **state)
{
    (void)state;
    start(NULL, NULL); /* appendonly no: nothing acknowledges a decision */
    char resp[1024], oid[48], again[48];
    assert_int_equal(create_on(d.port, "nf", 10, NULL), 201);
    assert_int_equal(buy(d.port, "nf", "ann", "k-ann", resp, sizeof(resp)), 202);
    expect_pending(resp, oid, sizeof(oid));
    /* the replay answers the current state: still not acknowledged */
    assert_int_equal(buy(d.port, "nf", "ann", "k-ann", resp, sizeof(resp)), 202);
    expect_pending(resp, again, sizeof(again));
    assert_string_equal(oid, again);
    char path[80];
    snprintf(path, sizeof(path), "/v1/orders/%s", oid);
    assert_int_equal(skt_http(d.port, "GET", path, "X-User-Id: ann\r\n", NULL, 0, resp, sizeof(resp)), 200);
    field(resp, "state", "pending");
    field(resp, "status", "accepted");
    field(resp, "user", "ann");
    /* the query as a whole: the right campaign, a wrong one (not a false "lost"), junk */
    char qpath[160];
    snprintf(qpath, sizeof(qpath), "%s?campaign=nf", path);
    assert_int_equal(skt_http(d.port, "GET", qpath, "X-User-Id: ann\r\n", NULL, 0, resp, sizeof(resp)), 200);
    field(resp, "state", "pending");
    snprintf(qpath, sizeof(qpath), "%s?campaign=zz", path);
    assert_int_equal(skt_http(d.port, "GET", qpath, "X-User-Id: ann\r\n", NULL, 0, resp, sizeof(resp)), 404);
    field(resp, "error", "not_found");
    assert_null(strstr(resp, "lost"));
    static const char *const junk[] = {"?x=1&campaign=nf", "?campaign=nf&campaign=nf", "?campaign=", "?campaign=a.b"};
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        snprintf(qpath, sizeof(qpath), "%s%s", path, junk[i]);
        assert_int_equal(skt_http(d.port, "GET", qpath, "X-User-Id: ann\r\n", NULL, 0, resp, sizeof(resp)), 400);
    }
    assert_int_equal(skt_http(d.port, "GET", "/v1/orders/12345", "X-User-Id: ann\r\n", NULL, 0, resp, sizeof(resp)), 404);
    field(resp, "state", "lost");
    field(resp, "error", "not_found");
    assert_int_equal(metric(d.port, "seckill_answers_total{answer=\"202\"}"), 2);
    assert_int_equal(metric(d.port, "seckill_answers_total{answer=\"201\"}"), 0);
    assert_int_equal(metric(d.port, "seckill_ack_mode"), 0);
}

static void test_refused_config_counts_as_not_durable(void **state)
{
    (void)state;
    const char *conf[] = {"appendonly yes", "appendfsync always", "rename-command CONFIG \"\"", NULL};
    start(conf, NULL);
    char resp[1024], oid[48];
    assert_int_equal(create_on(d.port, "rc", 10, NULL), 201);
    assert_int_equal(buy(d.port, "rc", "bob", NULL, resp, sizeof(resp)), 202);
    expect_pending(resp, oid, sizeof(oid));
    assert_int_equal(buy(d.port, "rc", "cid", NULL, resp, sizeof(resp)), 202);
    /* said once per connection, not per purchase */
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "test \"$(grep -c 'CONFIG GET refused' %s)\" = 1", d.log);
    assert_int_equal(system(cmd), 0);
}

static void test_fsync_always_answers_201_and_every_call_writes(void **state)
{
    (void)state;
    const char *conf[] = {"appendonly yes", "appendfsync always", NULL};
    start(conf, NULL);
    char resp[1024], oid[48], out[256];
    assert_int_equal(create_on(d.port, "fs", 10, NULL), 201);
    assert_int_equal(buy(d.port, "fs", "dan", "k-dan", resp, sizeof(resp)), 201);
    field(resp, "status", "accepted");
    assert_true(skt_json_str(resp, "order_id", oid, sizeof(oid)));
    const char *calls[] = {"HGET", "{c:fs}:meta", "calls"};
    redis_cmd(&master, out, sizeof(out), 3, calls);
    assert_string_equal(out, "1");
    /* a replay decides nothing new, yet writes: WAIT then covers the first write */
    assert_int_equal(buy(d.port, "fs", "dan", "k-dan", resp, sizeof(resp)), 201);
    redis_cmd(&master, out, sizeof(out), 3, calls);
    assert_string_equal(out, "2");
    /* the compact entry: o <id> u <user> q <qty> e <epoch> k <key> */
    const char *epoch[] = {"EVAL", "return redis.call('XRANGE', KEYS[1], '-', '+')[1][2][8]", "1",
                           "{c:fs}:orders"};
    const char *ekey[] = {"EVAL", "return redis.call('XRANGE', KEYS[1], '-', '+')[1][2][7]", "1",
                          "{c:fs}:orders"};
    redis_cmd(&master, out, sizeof(out), 4, ekey);
    assert_string_equal(out, "e");
    redis_cmd(&master, out, sizeof(out), 4, epoch);
    assert_string_equal(out, "1");
    assert_int_equal(metric(d.port, "seckill_ack_mode"), 1);
}

/* The run id the server reports (INFO server). */
static void server_runid(const test_server *s, char *out, size_t cap)
{
    static char info[8192];
    const char *argv[] = {"INFO", "server"};
    redis_cmd(s, info, sizeof(info), 2, argv);
    const char *p = strstr(info, "run_id:");
    assert_non_null(p);
    snprintf(out, cap, "%.40s", p + 7);
}

static void test_barrier_answers_503_recovering_until_the_run_id_matches(void **state)
{
    (void)state;
    const char *conf[] = {"appendonly yes", "appendfsync always", NULL};
    start(conf, NULL);
    char resp[1024], out[128], runid[48];
    assert_int_equal(create_on(d.port, "br", 10, NULL), 201);
    server_runid(&master, runid, sizeof(runid));
    const char *get[] = {"HGET", "{c:br}:meta", "runid"};
    redis_cmd(&master, out, sizeof(out), 3, get);
    assert_string_equal(out, runid); /* set at creation from the engine's connection */
    const char *other[] = {"HSET", "{c:br}:meta", "runid", "an-older-master"};
    redis_cmd(&master, out, sizeof(out), 4, other);
    assert_int_equal(buy(d.port, "br", "eve", NULL, resp, sizeof(resp)), 503);
    field(resp, "error", "recovering");
    assert_non_null(strstr(skt_last_response(), "Retry-After: 1\r\n"));
    const char *none[] = {"HDEL", "{c:br}:meta", "runid"};
    redis_cmd(&master, out, sizeof(out), 3, none);
    assert_int_equal(buy(d.port, "br", "eve", NULL, resp, sizeof(resp)), 503);
    const char *stock[] = {"GET", "{c:br}:stock"};
    redis_cmd(&master, out, sizeof(out), 2, stock);
    assert_string_equal(out, "10"); /* nothing was decided */
    const char *open[] = {"HSET", "{c:br}:meta", "runid", runid};
    redis_cmd(&master, out, sizeof(out), 4, open);
    assert_int_equal(buy(d.port, "br", "eve", NULL, resp, sizeof(resp)), 201);
    assert_int_equal(metric(d.port, "seckill_purchases_total{outcome=\"barrier\"}"), 2);
}

/* Buyers <prefix>0 .. <prefix>n-1 buy one unit each of camp on d: how
 * many were accepted (201) and refused sold out (409). */
static void buy_distinct(const char *camp, const char *prefix, int n, int *accepted, int *sold_out)
{
    char resp[1024];
    *accepted = *sold_out = 0;
    for (int i = 0; i < n; i++) {
        char user[32];
        snprintf(user, sizeof(user), "%s%d", prefix, i);
        int st = buy(d.port, camp, user, NULL, resp, sizeof(resp));
        *accepted += st == 201;
        *sold_out += st == 409;
    }
}

static void test_db_reserve_is_carved_out_of_the_redis_stock(void **state)
{
    (void)state;
    const char *conf[] = {"appendonly yes", "appendfsync always", NULL};
    start(conf, NULL);
    char resp[1024];
    assert_int_equal(create_on(d.port, "bad1", 10, ",\"db_reserve\":11"), 400);
    assert_int_equal(create_on(d.port, "bad2", 10, ",\"db_reserve\":-1"), 400);
    assert_int_equal(create_on(d.port, "rs", 5, ",\"db_reserve\":2"), 201);
    assert_int_equal(skt_http(d.port, "GET", "/v1/campaigns/rs", NULL, NULL, 0, resp, sizeof(resp)), 200);
    field(resp, "db_reserve", "2");
    field(resp, "remaining", "3");
    int acc, sold;
    buy_distinct("rs", "r", 5, &acc, &sold);
    assert_int_equal(acc, 3);
    assert_int_equal(sold, 2);
}

/* A sharded campaign over HTTP: bad shard counts are refused and change
 * nothing; K = 3 with a reserve sells exactly stock - db_reserve (201 on
 * fsync always), whatever bucket each buyer's home is. */
static void test_a_sharded_campaign_sells_exactly_its_redis_stock(void **state)
{
    (void)state;
    const char *conf[] = {"appendonly yes", "appendfsync always", NULL};
    start(conf, NULL);
    char resp[1024];
    assert_int_equal(create_on(d.port, "sh0", 10, ",\"shards\":65"), 400);
    assert_int_equal(create_on(d.port, "sh1", 10, ",\"shards\":-1"), 400);
    assert_int_equal(create_on(d.port, "sh2", 10, ",\"shards\":1.5"), 400);
    assert_int_equal(create_on(d.port, "sh3", 10, ",\"shards\":\"3\""), 400);
    assert_int_equal(skt_http(d.port, "GET", "/v1/campaigns/sh0", NULL, NULL, 0, resp, sizeof(resp)), 404);
    assert_int_equal(create_on(d.port, "sh", 11, ",\"shards\":3,\"db_reserve\":2"), 201);
    assert_int_equal(create_on(d.port, "sh", 11, ",\"shards\":3"), 409);
    assert_int_equal(skt_http(d.port, "GET", "/v1/campaigns/sh", NULL, NULL, 0, resp, sizeof(resp)), 200);
    field(resp, "shards", "3");
    field(resp, "remaining", "9");
    int acc, sold;
    buy_distinct("sh", "s", 14, &acc, &sold);
    assert_int_equal(acc, 9);
    assert_int_equal(sold, 5);
    assert_int_equal(skt_http(d.port, "GET", "/v1/campaigns/sh", NULL, NULL, 0, resp, sizeof(resp)), 200);
    field(resp, "remaining", "0");
    field(resp, "state", "sold_out");
}

static void test_replica_acknowledges_and_a_paused_replica_gives_202(void **state)
{
    (void)state;
    assert_int_equal(test_redis_start(&master, NULL), 0);
    assert_int_equal(test_redis_start(&replica, NULL), 0);
    assert_int_equal(test_redis_replicate(&replica, &master), 0);
    /* A healthy replica acknowledges: 201. The WAIT timeout here is far
     * above a loopback replica's answer even on a loaded machine (with
     * 200 ms, an ASan build on a busy 2-core CI machine once saw the WAIT
     * come back short: a correct 202, and a test depending on the
     * scheduler); the 202 of a replica that does not answer is shown
     * below, by a second instance with a short timeout. */
    const char *patient[] = {"--admin-token", "adm-token", "--replica-ack-timeout-ms", "5000", NULL};
    assert_int_equal(skt_daemon_start(&d, master.url, patient), 0);
    assert_int_equal(metric(d.port, "seckill_ack_mode"), 2);
    assert_int_equal(metric(d.port, "seckill_ack_replicas"), 1);
    wait_in_sync(&d);
    char resp[1024], oid[48], again[48];
    assert_int_equal(create_on(d.port, "rp", 10, NULL), 201);
    int st = buy(d.port, "rp", "fay", NULL, resp, sizeof(resp));
    if (st != 201) {
        skt_daemon_print_log(&d);
        fail_msg("a replica in sync did not acknowledge: %d %s (WAITs %ld, short %ld, skipped %ld)", st, resp,
                 metric(d.port, "seckill_ack_waits_total"), metric(d.port, "seckill_ack_failures_total"),
                 metric(d.port, "seckill_ack_skipped_total"));
    }
    assert_int_equal(metric(d.port, "seckill_ack_failures_total"), 0);
    assert_int_equal(skt_daemon_stop(&d), 0);
    /* A replica that does not answer: 202 after WAIT's own timeout. */
    const char *extra[] = {"--admin-token", "adm-token", "--replica-ack-timeout-ms", "200",
                           "--redis-timeout-ms", "500", NULL};
    assert_int_equal(skt_daemon_start(&d, master.url, extra), 0);
    wait_in_sync(&d);
    test_server_pause(&replica, true);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(buy(d.port, "rp", "gil", "k-gil", resp, sizeof(resp)), 202);
    int64_t took = dlock__now_ms() - t0;
    expect_pending(resp, oid, sizeof(oid));
    assert_true(took >= 190 && took < 1500); /* WAIT's own timeout, not the reply deadline */
    assert_int_equal(metric(d.port, "seckill_ack_failures_total"), 1);
    /* 8 campaigns' batches at once: each is 202, whether its WAIT is
     * skipped (the short WAIT above marked the replica out of sync) or
     * sent (the 250 ms probe sees the stopped replica in sync until its
     * lag passes 2 s): WAITs of 200 ms queued on the one connection can
     * last beyond the 500 ms reply deadline, which must count each WAIT's
     * own timeout and not drop the connection */
    enum { NC = 8 };
    skt_req r[NC];
    memset(r, 0, sizeof(r));
    for (int i = 0; i < NC; i++) {
        char id[16];
        snprintf(id, sizeof(id), "rq%d", i);
        assert_int_equal(create_on(d.port, id, 10, NULL), 201);
        r[i].port = d.port;
        r[i].method = "POST";
        snprintf(r[i].path, sizeof(r[i].path), "/v1/campaigns/%s/purchase", id);
        snprintf(r[i].headers, sizeof(r[i].headers), "X-User-Id: q%d\r\n", i);
    }
    assert_int_equal(skt_run_concurrent(r, NC, 10000), 0);
    for (int i = 0; i < NC; i++)
        if (r[i].status != 202) fail_msg("queued WAIT %d: %d %s", i, r[i].status, r[i].resp);
    assert_int_equal(metric(d.port, "seckill_redis_reconnects_total"), 0);
    test_server_pause(&replica, false);
    /* the replay's batch WAITs for its own write, which follows the first */
    int64_t deadline = dlock__now_ms() + 5000;
    while ((st = buy(d.port, "rp", "gil", "k-gil", resp, sizeof(resp))) == 202 && dlock__now_ms() < deadline)
        dlock__sleep_ms(50);
    assert_int_equal(st, 201);
    assert_true(skt_json_str(resp, "order_id", again, sizeof(again)));
    assert_string_equal(oid, again);
    assert_true(metric(d.port, "seckill_answers_total{answer=\"201\"}") >= 1);
    assert_int_equal(metric(d.port, "seckill_redis_reconnects_total"), 0);
}

/* The worker id an instance holds, from its metrics. */
static int worker_of(const skt_daemon *x) { return (int)metric(x->port, "seckill_worker_id"); }

/* Occupies every worker id but keep (PX 60 s), so the next instance must
 * take keep. */
static void occupy_all_but(int keep)
{
    const char *lua = "for n = 0, 1023 do if n ~= tonumber(ARGV[1]) then "
                      "redis.call('SET', 'seckill:worker:' .. n, 'test-dummy:0', 'PX', 60000, 'NX') end end "
                      "return 1";
    char k[16], out[16];
    snprintf(k, sizeof(k), "%d", keep);
    const char *argv[] = {"EVAL", lua, "0", k};
    redis_cmd(&master, out, sizeof(out), 4, argv);
}

/* Buys n units with fresh users on x; appends the ids of 201s to ids. */
static int buy_ids(const skt_daemon *x, const char *tag, int n, uint64_t *ids, int *nids)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char user[32], resp[512], oid[48];
        snprintf(user, sizeof(user), "%s-%d", tag, i);
        if (buy(x->port, "ls", user, NULL, resp, sizeof(resp)) != 201) continue;
        assert_true(skt_json_str(resp, "order_id", oid, sizeof(oid)));
        ids[(*nids)++] = strtoull(oid, NULL, 10);
        ok++;
    }
    return ok;
}

/* Sends a purchase to port without reading the answer (the instance may
 * be stopped): the request waits in the socket. Returns the fd. */
static int send_purchase_of(int port, const char *campaign, const char *user)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    char req[256];
    int n = snprintf(req, sizeof(req), "POST /v1/campaigns/%s/purchase HTTP/1.1\r\nHost: x\r\n"
                                       "Connection: close\r\nX-User-Id: %s\r\nContent-Length: 2\r\n\r\n{}",
                     campaign, user);
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    return fd;
}

/* The status of the answer on fd (0: none within 5 s); closes fd. */
static int read_status(int fd)
{
    char buf[1024];
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got < sizeof(buf) - 1 && poll(&p, 1, 5000) > 0) {
        ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    close(fd);
    int st = 0;
    return sscanf(buf, "HTTP/1.%*d %d", &st) == 1 ? st : 0;
}

/* Clients of s blocked in WAIT now (CLIENT LIST). */
static int blocked_waits(const test_server *s)
{
    static char out[16384];
    const char *argv[] = {"CLIENT", "LIST"};
    redis_cmd(s, out, sizeof(out), 2, argv);
    int n = 0;
    for (const char *p = out; (p = strstr(p, "cmd=wait")) != NULL; p++) n++;
    return n;
}

enum { NCONN_CAMPS = 6 };

/* A master with a paused replica and d on it; NCONN_CAMPS campaigns, each
 * bought once (201) before the pause, then one purchase of each sent at
 * once (fds): they go out as batches on several data connections, and
 * this returns once WAITs block on at least two connections at the same
 * time, or after 1 s: the most seen at once. */
static int batches_blocked_on_several_connections(int fds[NCONN_CAMPS], const char *deadline_ms)
{
    assert_int_equal(test_redis_start(&master, NULL), 0);
    assert_int_equal(test_redis_start(&replica, NULL), 0);
    assert_int_equal(test_redis_replicate(&replica, &master), 0);
    const char *extra[] = {"--admin-token", "adm-token", "--replica-ack-timeout-ms", "1500",
                           "--redis-timeout-ms", deadline_ms, NULL};
    assert_int_equal(skt_daemon_start(&d, master.url, extra), 0);
    wait_in_sync(&d);
    char resp[1024];
    for (int i = 0; i < NCONN_CAMPS; i++) {
        char id[16], user[16];
        snprintf(id, sizeof(id), "mc%d", i);
        snprintf(user, sizeof(user), "first%d", i);
        assert_int_equal(create_on(d.port, id, 10, NULL), 201);
        assert_int_equal(buy(d.port, id, user, NULL, resp, sizeof(resp)), 201);
    }
    test_server_pause(&replica, true);
    for (int i = 0; i < NCONN_CAMPS; i++) {
        char id[16], user[16];
        snprintf(id, sizeof(id), "mc%d", i);
        snprintf(user, sizeof(user), "then%d", i);
        fds[i] = send_purchase_of(d.port, id, user);
    }
    /* handshake: the batches' WAITs are blocked in Redis (their 1.5 s timeout) */
    int most = 0;
    for (int64_t end = dlock__now_ms() + 1000; most < 2 && dlock__now_ms() < end;) {
        int n = blocked_waits(&master);
        if (n > most) most = n;
    }
    return most;
}

/* Batches in flight on several data connections at once: each is
 * acknowledged only by the WAIT on its own connection (WAIT counts that
 * connection's writes), so with the replica paused none is 201, and the
 * short WAITs are counted. */
static void test_batches_on_several_connections_are_each_acknowledged_by_their_own_wait(void **state)
{
    (void)state;
    int fds[NCONN_CAMPS];
    int most = batches_blocked_on_several_connections(fds, "3000");
    for (int i = 0; i < NCONN_CAMPS; i++) {
        int st = read_status(fds[i]);
        if (st != 202) fail_msg("campaign mc%d, replica paused: %d, not 202", i, st);
    }
    if (most < 2) fail_msg("WAITs blocked on %d connection(s) at once, not several", most);
    assert_true(metric(d.port, "seckill_ack_failures_total") >= 2);
    assert_int_equal(metric(d.port, "seckill_answers_total{answer=\"201\"}"), NCONN_CAMPS);
    assert_int_equal(metric(d.port, "seckill_redis_reconnects_total"), 0);
    test_server_pause(&replica, false);
    char resp[1024];
    int64_t deadline = dlock__now_ms() + 5000;
    int st;
    while ((st = buy(d.port, "mc0", "after", "k-after", resp, sizeof(resp))) == 202 && dlock__now_ms() < deadline)
        dlock__sleep_ms(50); /* the replay WAITs for its own write once the replica is back */
    assert_int_equal(st, 201);
}

/* The master stops (SIGSTOP) while WAITs block on several connections:
 * their batches are 202 (decided, the WAIT never answered) or 503 outcome
 * unknown (the script unanswered), never 201; the reply deadline drops
 * the connections, and once the master runs again purchases are 201. */
static void test_master_stopped_mid_wait_on_several_connections_is_never_201(void **state)
{
    (void)state;
    int fds[NCONN_CAMPS];
    int most = batches_blocked_on_several_connections(fds, "500");
    test_server_pause(&master, true);
    for (int i = 0; i < NCONN_CAMPS; i++) {
        int st = read_status(fds[i]);
        if (st != 202 && st != 503) fail_msg("campaign mc%d, master stopped mid-WAIT: %d", i, st);
    }
    if (most < 2) fail_msg("WAITs blocked on %d connection(s) at once, not several", most);
    test_server_pause(&master, false);
    test_server_pause(&replica, false);
    char resp[1024];
    int64_t deadline = dlock__now_ms() + 10000;
    int st;
    while ((st = buy(d.port, "mc1", "after", "k-after", resp, sizeof(resp))) != 201 && dlock__now_ms() < deadline)
        dlock__sleep_ms(50); /* reconnect, lease, probe */
    assert_int_equal(st, 201);
    assert_int_equal(metric(d.port, "seckill_answers_total{answer=\"201\"}"), NCONN_CAMPS + 1);
    assert_true(metric(d.port, "seckill_redis_reconnects_total") >= 1); /* the deadline dropped it */
}

static void test_instance_paused_past_its_lease_stops_issuing_ids(void **state)
{
    (void)state;
    const char *conf[] = {"appendonly yes", "appendfsync always", NULL};
    start(conf, (const char *[]){"--worker-lease-ms", "2000", NULL});
    assert_int_equal(create_on(d.port, "ls", 10000, NULL), 201);
    static uint64_t ids[512];
    int nids = 0;
    int wa = worker_of(&d);
    assert_int_equal(buy_ids(&d, "a1", 20, ids, &nids), 20);
    occupy_all_but(wa); /* B can only take A's worker id, once A's lease expired */
    kill(d.pid, SIGSTOP);
    const char *extra[] = {"--admin-token", "adm-token", "--worker-lease-ms", "2000", NULL};
    assert_int_equal(skt_daemon_start(&d2, master.url, extra), 0);
    assert_int_equal(worker_of(&d2), wa);
    assert_int_equal(buy_ids(&d2, "b1", 20, ids, &nids), 20);
    /* buyers' requests pile up on the stopped instance: they are read at
     * once on resume, before any of its timers runs */
    int fds[4];
    for (int i = 0; i < 4; i++) {
        char user[16];
        snprintf(user, sizeof(user), "queued-%d", i);
        fds[i] = send_purchase_of(d.port, "ls", user);
    }
    dlock__sleep_ms(4000 - 100);
    kill(d.pid, SIGCONT);
    for (int i = 0; i < 4; i++) assert_int_equal(read_status(fds[i]), 503);
    /* A resumed: its lease is stale, its fence is B's now, no id is free */
    char resp[512];
    for (int i = 0; i < 5; i++) {
        char user[16];
        snprintf(user, sizeof(user), "a2-%d", i);
        int st = buy(d.port, "ls", user, NULL, resp, sizeof(resp));
        if (st != 503) fail_msg("paused instance answered %d %s", st, resp);
        dlock__sleep_ms(100);
    }
    assert_int_equal(buy_ids(&d2, "b2", 20, ids, &nids), 20);
    int wfree = wa == 77 ? 78 : 77;
    char key[32], out[16];
    snprintf(key, sizeof(key), "seckill:worker:%d", wfree);
    const char *free1[] = {"DEL", key};
    redis_cmd(&master, out, sizeof(out), 2, free1);
    int64_t deadline = dlock__now_ms() + 5000;
    while (worker_of(&d) != wfree && dlock__now_ms() < deadline) dlock__sleep_ms(50);
    assert_int_equal(worker_of(&d), wfree);
    assert_int_equal(buy_ids(&d, "a3", 20, ids, &nids), 20);
    for (int i = 0; i < nids; i++)
        for (int j = i + 1; j < nids; j++)
            if (ids[i] == ids[j]) fail_msg("order id %llu issued twice", (unsigned long long)ids[i]);
    int w;
    sk_orderid_decode(ids[nids - 1], NULL, &w, NULL);
    assert_int_equal(w, wfree);
}

/* Behind Sentinel the master's fsync is no acknowledgement (a failover
 * abandons its disk): a master on appendfsync always without a replica
 * answers 202 by default, and 201 once a replica acknowledges. */
static void test_sentinel_master_without_replica_answers_202_not_201_on_fsync(void **state)
{
    (void)state;
    const char *conf[] = {"appendonly yes", "appendfsync always", NULL};
    assert_int_equal(test_redis_start(&master, conf), 0);
    assert_int_equal(test_sentinel_start(&sentinel, &master, "pm", 1), 0);
    char url[128];
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d/pm", sentinel.port);
    const char *extra[] = {"--admin-token", "adm-token", "--replica-ack-timeout-ms", "100", NULL};
    assert_int_equal(skt_daemon_start(&d, url, extra), 0);
    assert_int_equal(metric(d.port, "seckill_ack_mode"), 2);
    assert_int_equal(metric(d.port, "seckill_ack_replicas"), 1);
    char resp[1024], oid[48], again[48];
    assert_int_equal(create_on(d.port, "sn", 10, NULL), 201);
    assert_int_equal(buy(d.port, "sn", "hal", "k-hal", resp, sizeof(resp)), 202);
    expect_pending(resp, oid, sizeof(oid));
    assert_int_equal(test_redis_start(&replica, NULL), 0);
    assert_int_equal(test_redis_replicate(&replica, &master), 0);
    int64_t deadline = dlock__now_ms() + 5000;
    int st;
    while ((st = buy(d.port, "sn", "hal", "k-hal", resp, sizeof(resp))) == 202 && dlock__now_ms() < deadline)
        dlock__sleep_ms(50);
    assert_int_equal(st, 201);
    assert_true(skt_json_str(resp, "order_id", again, sizeof(again)));
    assert_string_equal(oid, again);
}

/* WAITs the server has answered (INFO commandstats cmdstat_wait calls).
 * Server: Redis 7.0 and Valkey 8.0 (both passes): both count a WAIT when
 * it is answered (docs/compatibility.md). */
static long wait_calls(const test_server *s)
{
    static char info[16384];
    const char *argv[] = {"INFO", "commandstats"};
    redis_cmd(s, info, sizeof(info), 2, argv);
    const char *p = strstr(info, "cmdstat_wait:calls=");
    return p ? strtol(p + strlen("cmdstat_wait:calls="), NULL, 10) : 0;
}

/* One purchase with a fresh user; its status, and how long it took in *ms_out. */
static int timed_buy(int port, const char *camp, const char *user, char *resp, size_t cap, int64_t *ms_out)
{
    int64_t t0 = dlock__now_ms();
    int st = buy(port, camp, user, NULL, resp, cap);
    *ms_out = dlock__now_ms() - t0;
    return st;
}

/* A master told to wait for one replica (replica-acks 1) that has none:
 * every acceptance answers 202 at once, and no WAIT reaches the server
 * (a WAIT would block each batch its whole 1 s timeout). Once a replica
 * has linked (REPLICAOF, link up), the first 201 comes within 2 s. */
static void test_master_without_replica_answers_202_at_once_then_201_when_one_attaches(void **state)
{
    (void)state;
    const char *conf[] = {"repl-diskless-sync-delay 0", NULL};
    start(conf, (const char *[]){"--replica-acks", "1", "--replica-ack-timeout-ms", "1000", NULL});
    assert_int_equal(metric(d.port, "seckill_ack_mode"), 2);
    assert_int_equal(metric(d.port, "seckill_ack_replicas_in_sync"), 0);
    char resp[1024], oid[64], user[32];
    assert_int_equal(create_on(d.port, "nr", 1000, NULL), 201);
    long waits0 = wait_calls(&master);
    for (int i = 0; i < 10; i++) {
        int64_t took = 0;
        snprintf(user, sizeof(user), "nr-%d", i);
        assert_int_equal(timed_buy(d.port, "nr", user, resp, sizeof(resp), &took), 202);
        expect_pending(resp, oid, sizeof(oid));
        if (took >= 1000) fail_msg("purchase %d took %lld ms: it waited for a WAIT", i, (long long)took);
    }
    assert_int_equal(wait_calls(&master) - waits0, 0);
    assert_int_equal(metric(d.port, "seckill_ack_waits_total"), 0);
    assert_int_equal(metric(d.port, "seckill_ack_skipped_total"), 10);
    assert_int_equal(test_redis_start(&replica, NULL), 0);
    assert_int_equal(test_redis_replicate(&replica, &master), 0); /* returns once the link is up */
    int64_t linked = dlock__now_ms();
    int st = 0, n = 0;
    while (dlock__now_ms() - linked < 5000) {
        snprintf(user, sizeof(user), "nr-after-%d", n++);
        if ((st = buy(d.port, "nr", user, NULL, resp, sizeof(resp))) == 201) break;
        dlock__sleep_ms(20);
    }
    int64_t first_201 = dlock__now_ms() - linked;
    assert_int_equal(st, 201);
    field(resp, "status", "accepted");
    print_message("first 201 %lld ms after the replica linked\n", (long long)first_201);
    if (first_201 > 2000) fail_msg("first 201 came %lld ms after the replica linked", (long long)first_201);
    assert_true(wait_calls(&master) > waits0);
    assert_int_equal(metric_until("seckill_ack_replicas_in_sync", 1), 1); /* each loop probes on its own */
    assert_int_equal(metric(d.port, "seckill_redis_reconnects_total"), 0);
}

/* What seckill-persist does to every stream once (--drain). */
static void persist_drain(const char *redis_url, const char *db_url)
{
    const char *bdir = getenv("DLOCK_BUILD_DIR");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/tools/seckill-persist/seckill-persist --quiet --drain --redis-url '%s' "
             "--database-url '%s'", bdir ? bdir : ".", redis_url, db_url);
    assert_int_equal(system(cmd), 0);
}

/* Replays user's key until the answer is want (at most 5 s); the status last seen. */
static int buy_until_key(const char *camp, const char *user, const char *key, int want)
{
    char resp[512];
    int st = 0;
    for (int64_t end = dlock__now_ms() + 5000; dlock__now_ms() < end; dlock__sleep_ms(50))
        if ((st = buy(d.port, camp, user, key, resp, sizeof(resp))) == want) break;
    return st;
}

/* A replay answers the current state: the key of a 202 (no fsync, no
 * replica) replays 202 until seckill-persist has the order in the
 * database, then the 201 body a first answer of 201 carries (status
 * accepted, the remaining at the decision), byte for byte, every time. */
static void test_replay_of_a_202_answers_the_201_body_once_persisted(void **state)
{
    (void)state;
    char db_url[256];
    snprintf(db_url, sizeof(db_url), "sqlite:///tmp/seckilld-promise-%d.db", (int)getpid());
    unlink(db_url + strlen("sqlite://"));
    start(NULL, (const char *[]){"--database-url", db_url, NULL});
    char resp[1024], oid[64], want[256];
    assert_int_equal(create_on(d.port, "rc1", 10, NULL), 201);
    assert_int_equal(buy(d.port, "rc1", "ivy", NULL, resp, sizeof(resp)), 202); /* another order first */
    assert_int_equal(buy(d.port, "rc1", "jon", "k-jon", resp, sizeof(resp)), 202);
    expect_pending(resp, oid, sizeof(oid));
    assert_int_equal(buy(d.port, "rc1", "jon", "k-jon", resp, sizeof(resp)), 202); /* not yet */
    persist_drain(master.url, db_url);
    snprintf(want, sizeof(want), "{\"order_id\":\"%s\",\"campaign\":\"rc1\",\"quantity\":1,\"remaining\":8,"
             "\"status\":\"accepted\"}\n", oid);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(buy(d.port, "rc1", "jon", "k-jon", resp, sizeof(resp)), 201);
        assert_string_equal(resp, want);
        if (strstr(skt_last_response(), "Location:")) fail_msg("a 201 with a Location: %s", skt_last_response());
    }
    assert_int_equal(metric(d.port, "seckill_answers_confirmed_total"), 2);
    char path[96];
    snprintf(path, sizeof(path), "/v1/orders/%s", oid);
    assert_int_equal(skt_http(d.port, "GET", path, "X-User-Id: jon\r\n", NULL, 0, resp, sizeof(resp)), 200);
    field(resp, "state", "confirmed");
    /* a key is scoped to (user, campaign): kim's use of jon's key is a
     * decision of its own (a new order), and a new key still decides 202 */
    char kim_oid[64];
    assert_int_equal(buy(d.port, "rc1", "kim", "k-jon", resp, sizeof(resp)), 202);
    expect_pending(resp, kim_oid, sizeof(kim_oid));
    assert_string_not_equal(kim_oid, oid);
    assert_int_equal(buy(d.port, "rc1", "kim-2", "k-kim", resp, sizeof(resp)), 202);
    assert_int_equal(skt_daemon_stop(&d), 0);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char f[300];
        snprintf(f, sizeof(f), "%s%s", db_url + strlen("sqlite://"), sfx[i]);
        unlink(f);
    }
}

/* A master that still lists a replica that does not acknowledge (paused
 * here; cut off, as a master cut off from Sentinel is) gives no 201 on the
 * database's confirmation alone: the replay of a persisted 202 stays 202
 * until a WAIT covers it again. */
static void test_confirmed_replay_stays_202_while_the_master_lists_a_silent_replica(void **state)
{
    (void)state;
    char db_url[256];
    snprintf(db_url, sizeof(db_url), "sqlite:///tmp/seckilld-promise-s%d.db", (int)getpid());
    unlink(db_url + strlen("sqlite://"));
    assert_int_equal(test_redis_start(&master, NULL), 0);
    assert_int_equal(test_redis_start(&replica, NULL), 0);
    assert_int_equal(test_redis_replicate(&replica, &master), 0);
    const char *extra[] = {"--admin-token", "adm-token", "--database-url", db_url, "--replica-acks", "1", NULL};
    assert_int_equal(skt_daemon_start(&d, master.url, extra), 0);
    char resp[1024], oid[64];
    assert_int_equal(create_on(d.port, "sr", 10, NULL), 201);
    test_server_pause(&replica, true);
    assert_int_equal(buy(d.port, "sr", "lea", "k-lea", resp, sizeof(resp)), 202);
    expect_pending(resp, oid, sizeof(oid));
    persist_drain(master.url, db_url);
    dlock__sleep_ms(3500); /* the paused replica's lag passes 2 s: not in sync, still listed */
    for (int i = 0; i < 3; i++) assert_int_equal(buy(d.port, "sr", "lea", "k-lea", resp, sizeof(resp)), 202);
    assert_int_equal(metric(d.port, "seckill_answers_confirmed_total"), 0);
    test_server_pause(&replica, false);
    assert_int_equal(buy_until_key("sr", "lea", "k-lea", 201), 201);
    assert_int_equal(skt_daemon_stop(&d), 0);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char f[300];
        snprintf(f, sizeof(f), "%s%s", db_url + strlen("sqlite://"), sfx[i]);
        unlink(f);
    }
}

static void config_set(const char *name, const char *value)
{
    char out[64];
    const char *argv[] = {"CONFIG", "SET", name, value};
    redis_cmd(&master, out, sizeof(out), 4, argv);
}

/* Buys with fresh users until the answer is want (at most 3 s); the status last seen. */
static int buy_until(const char *camp, const char *tag, int want)
{
    char user[32], resp[512];
    int st = 0;
    int64_t deadline = dlock__now_ms() + 3000;
    for (int i = 0; dlock__now_ms() < deadline; i++) {
        snprintf(user, sizeof(user), "%s-%d", tag, i);
        if ((st = buy(d.port, camp, user, NULL, resp, sizeof(resp))) == want) break;
        dlock__sleep_ms(20);
    }
    return st;
}

/* A running standalone server switched to appendfsync always (AOF on)
 * answers 201 without a restart of seckilld, and 202 again once switched
 * back; seckill_ack_mode follows. */
static void test_appendfsync_switched_on_a_running_server_is_followed(void **state)
{
    (void)state;
    const char *conf[] = {"appendonly yes", "appendfsync everysec", NULL};
    start(conf, NULL);
    char resp[512];
    assert_int_equal(create_on(d.port, "af", 1000, NULL), 201);
    assert_int_equal(buy(d.port, "af", "af-0", NULL, resp, sizeof(resp)), 202);
    assert_int_equal(metric(d.port, "seckill_ack_mode"), 0);
    pid_t pid = d.pid;
    config_set("appendfsync", "always");
    assert_int_equal(buy_until("af", "on", 201), 201);
    assert_int_equal(metric_until("seckill_ack_mode", 1), 1);
    config_set("appendfsync", "everysec");
    assert_int_equal(buy_until("af", "off", 202), 202);
    assert_int_equal(metric_until("seckill_ack_mode", 0), 0);
    config_set("appendfsync", "always");
    config_set("appendonly", "no"); /* fsync always without an AOF is no acknowledgement */
    assert_int_equal(buy_until("af", "noaof", 202), 202);
    for (int i = 0; i < 5; i++) {
        char user[16];
        snprintf(user, sizeof(user), "noaof2-%d", i);
        assert_int_equal(buy(d.port, "af", user, NULL, resp, sizeof(resp)), 202);
    }
    assert_int_equal(metric_until("seckill_ack_mode", 0), 0);
    assert_int_equal(d.pid, pid);
    assert_int_equal(metric(d.port, "seckill_redis_reconnects_total"), 0);
}

/* After SCRIPT FLUSH a batch's EVALSHA meets NOSCRIPT and the engine sends
 * the script again with its source: the WAIT already pipelined behind the
 * EVALSHA runs before the re-sent script writes, so it acknowledges none
 * of this decision (with a replica that happens to be up to date it
 * answers 1 at once). Its answer must be void, and another WAIT, sent
 * once the script's reply is in, acknowledges the batch: the purchase is
 * 201 after two WAITs, neither counted as short. */
static void test_a_script_sent_again_after_noscript_is_acknowledged_by_a_later_wait(void **state)
{
    (void)state;
    assert_int_equal(test_redis_start(&master, NULL), 0);
    assert_int_equal(test_redis_start(&replica, NULL), 0);
    assert_int_equal(test_redis_replicate(&replica, &master), 0);
    const char *extra[] = {"--admin-token", "adm-token", "--replica-ack-timeout-ms", "5000", NULL};
    assert_int_equal(skt_daemon_start(&d, master.url, extra), 0);
    wait_in_sync(&d);
    char resp[1024], out[64];
    assert_int_equal(create_on(d.port, "nsc", 10, NULL), 201);
    assert_int_equal(buy(d.port, "nsc", "ann", NULL, resp, sizeof(resp)), 201);
    long waits = metric(d.port, "seckill_ack_waits_total");
    long shorts = metric(d.port, "seckill_ack_failures_total");
    const char *flush[] = {"SCRIPT", "FLUSH"};
    redis_cmd(&master, out, sizeof(out), 2, flush);
    assert_int_equal(buy(d.port, "nsc", "bob", NULL, resp, sizeof(resp)), 201);
    assert_int_equal(metric(d.port, "seckill_ack_waits_total"), waits + 2);
    assert_int_equal(metric(d.port, "seckill_ack_failures_total"), shorts);
    /* the script is cached again: one WAIT a batch */
    assert_int_equal(buy(d.port, "nsc", "cal", NULL, resp, sizeof(resp)), 201);
    assert_int_equal(metric(d.port, "seckill_ack_waits_total"), waits + 3);
}

#define CASE(f) cmocka_unit_test_teardown(f, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_standalone_without_fsync_answers_202_and_get_says_pending),
        CASE(test_refused_config_counts_as_not_durable),
        CASE(test_fsync_always_answers_201_and_every_call_writes),
        CASE(test_barrier_answers_503_recovering_until_the_run_id_matches),
        CASE(test_db_reserve_is_carved_out_of_the_redis_stock),
        CASE(test_a_sharded_campaign_sells_exactly_its_redis_stock),
        CASE(test_replica_acknowledges_and_a_paused_replica_gives_202),
        CASE(test_batches_on_several_connections_are_each_acknowledged_by_their_own_wait),
        CASE(test_master_stopped_mid_wait_on_several_connections_is_never_201),
        CASE(test_sentinel_master_without_replica_answers_202_not_201_on_fsync),
        CASE(test_instance_paused_past_its_lease_stops_issuing_ids),
        CASE(test_master_without_replica_answers_202_at_once_then_201_when_one_attaches),
        CASE(test_replay_of_a_202_answers_the_201_body_once_persisted),
        CASE(test_appendfsync_switched_on_a_running_server_is_followed),
        CASE(test_confirmed_replay_stays_202_while_the_master_lists_a_silent_replica),
        CASE(test_a_script_sent_again_after_noscript_is_acknowledged_by_a_later_wait),
    };
    if (getenv("SKT_FILTER")) cmocka_set_test_filter(getenv("SKT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
