/* test_seckilld.c: seckilld as users meet it: real redis-server, real
 * seckilld processes, HTTP over sockets. 2000 concurrent buyers over 3
 * instances against stock 100, a scalper's 200 concurrent requests, the
 * per-user limit with quantity mixes, Idempotency-Key replay, time windows
 * on the Redis clock, admin auth, the bad-input matrix, size limits, slow
 * clients, signatures, rate limits, graceful shutdown, and Redis going
 * away and coming back. Each case stands alone: it gets its own Redis and
 * three fresh seckilld (every one must exit 0 at the end), so any case can
 * run by itself: SKT_FILTER=test_metrics_and_ping ./test_seckilld. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "redis_io.h"
#include "servers.h"
#include "skt.h"
#include "util.h"

#define ADMIN "Authorization: Bearer adm-token\r\n"

static test_server redis;
static skt_daemon d[3];

/* A standalone server whose reply is the acknowledgement (it fsyncs the
 * AOF before replying), so acceptances are answered 201
 * (docs/design/promise.md); test_standalone_without_fsync_answers_202
 * starts one without. */
static const char *const durable[] = {"appendonly yes", "appendfsync always", NULL};

/* Per case: a private Redis and three seckilld on it. */
static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&redis, durable) != 0) return -1;
    const char *extra[] = {"--admin-token", "adm-token", "--redis-timeout-ms", "500", NULL};
    for (int i = 0; i < 3; i++)
        if (skt_daemon_start(&d[i], redis.url, extra) != 0) return -1;
    return 0;
}

/* Stops what the case left running; a daemon that does not exit 0 (under
 * ASan: a leak or memory error) fails the case. */
static int teardown(void **state)
{
    (void)state;
    int bad = 0;
    test_server_pause(&redis, false); /* a failed case may leave it frozen */
    for (int i = 0; i < 3; i++)
        if (d[i].pid > 0 && skt_daemon_stop(&d[i]) != 0) bad = -1;
    test_server_stop(&redis);
    return bad;
}

/* Creates a campaign through the admin API; window relative to now (s). */
static int create(const char *id, long stock, long limit, long start_s, long end_s)
{
    char body[512], resp[1024];
    int64_t now = dlock__wall_ms();
    snprintf(body, sizeof(body),
             "{\"id\":\"%s\",\"title\":\"test %s\",\"stock\":%ld,\"per_user_limit\":%ld,"
             "\"starts_at\":%lld,\"ends_at\":%lld,\"price_cents\":990}",
             id, id, stock, limit, (long long)(now + start_s * 1000), (long long)(now + end_s * 1000));
    return skt_http(d[0].port, "POST", "/v1/campaigns", ADMIN, body, strlen(body), resp, sizeof(resp));
}

static int buy(int port, const char *campaign, const char *user, int qty, const char *idem,
               char *resp, size_t cap)
{
    char path[128], hdr[256], body[64];
    snprintf(path, sizeof(path), "/v1/campaigns/%s/purchase", campaign);
    snprintf(hdr, sizeof(hdr), "X-User-Id: %s\r\n%s%s%s", user, idem ? "Idempotency-Key: " : "",
             idem ? idem : "", idem ? "\r\n" : "");
    snprintf(body, sizeof(body), "{\"quantity\":%d}", qty);
    return skt_http(port, "POST", path, hdr, body, strlen(body), resp, cap);
}

static void expect_error(const char *resp, const char *code)
{
    char got[64] = "";
    if (!skt_json_str(resp, "error", got, sizeof(got)) || strcmp(got, code) != 0)
        fail_msg("expected error \"%s\", got: %s", code, resp);
    assert_non_null(strstr(resp, "\"message\":\""));
}

static dlock__conn *redis_conn(void)
{
    dlock__url u = {.kind = DLOCK__URL_TCP, .host = "127.0.0.1", .port = redis.port};
    dlock__conn_opts o = {.connect_timeout_ms = 1000, .command_timeout_ms = 5000};
    dlock__conn *c = NULL;
    assert_int_equal(dlock__conn_open(&u, &o, &c, NULL, 0), 0);
    return c;
}

/* r: one purchase of qty units of campaign by user, sent to port. */
static void purchase_req(skt_req *r, int port, const char *campaign, const char *user, int qty)
{
    r->port = port;
    r->method = "POST";
    snprintf(r->path, sizeof(r->path), "/v1/campaigns/%s/purchase", campaign);
    snprintf(r->headers, sizeof(r->headers), "X-User-Id: %s\r\n", user);
    snprintf(r->body, sizeof(r->body), "{\"quantity\":%d}", qty);
}

/* r[0..n-1]: one unit of campaign each, by users <prefix><i>, sent to port
 * (0: to the three instances in turn). */
static void distinct_buyers(skt_req *r, int n, int port, const char *campaign, const char *prefix)
{
    for (int i = 0; i < n; i++) {
        char user[32];
        snprintf(user, sizeof(user), "%s%d", prefix, i);
        purchase_req(&r[i], port ? port : d[i % 3].port, campaign, user, 1);
    }
}

/* Event loops per instance (SECKILL_THREADS, as ctest sets it: 1 for the
 * plain run, 2 for test_seckilld_threaded). */
static int loops(void)
{
    const char *t = getenv("SECKILL_THREADS");
    long n = t ? strtol(t, NULL, 10) : 1;
    return n > 0 ? (int)n : 2; /* 0: one per CPU; this machine class has 2 */
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_2000_buyers_on_3_instances_get_exactly_the_stock(void **state)
{
    (void)state;
    assert_int_equal(create("big", 100, 1, -60, 3600), 201);
    enum { N = 2000 };
    skt_req *r = calloc(N, sizeof(*r));
    assert_non_null(r);
    distinct_buyers(r, N, 0, "big", "buyer");
    assert_int_equal(skt_run_concurrent(r, N, 20000), 0);
    int accepted = 0, sold_out = 0;
    char **ids = calloc(N, sizeof(char *));
    for (int i = 0; i < N; i++) {
        if (r[i].status == 201) {
            char oid[48];
            assert_true(skt_json_str(r[i].resp, "order_id", oid, sizeof(oid)));
            oid[strcspn(oid, "-")] = '\0'; /* buyers see <id>-<tag>; the stream keeps <id> */
            ids[accepted++] = strdup(oid);
        } else {
            if (r[i].status != 409) fail_msg("buyer %d: status %d %s", i, r[i].status, r[i].resp);
            expect_error(r[i].resp, "sold_out");
            sold_out++;
        }
    }
    assert_int_equal(accepted, 100);
    assert_int_equal(sold_out, N - 100);
    char resp[1024], v[32];
    assert_int_equal(skt_http(d[1].port, "GET", "/v1/campaigns/big", NULL, NULL, 0, resp, sizeof(resp)), 200);
    assert_true(skt_json_str(resp, "remaining", v, sizeof(v)));
    assert_string_equal(v, "0");
    assert_true(skt_json_str(resp, "sold", v, sizeof(v)));
    assert_string_equal(v, "100");
    assert_true(skt_json_str(resp, "state", v, sizeof(v)));
    assert_string_equal(v, "sold_out");
    /* every accepted order is in the stream exactly once */
    dlock__conn *c = redis_conn();
    const char *argv[] = {"XRANGE", "{c:big}:orders", "-", "+"};
    dlock__reply *x = NULL;
    assert_int_equal(dlock__conn_cmd(c, 4, argv, NULL, &x), 0);
    assert_int_equal(dlock__reply_count(x), 100);
    char **sids = calloc(100, sizeof(char *));
    for (size_t i = 0; i < 100; i++) {
        const dlock__reply *fields = dlock__reply_at(dlock__reply_at(x, i), 1);
        for (size_t k = 0; k + 1 < dlock__reply_count(fields); k += 2)
            if (!strcmp(dlock__reply_str(dlock__reply_at(fields, k), NULL), "o")) /* the order id */
                sids[i] = strdup(dlock__reply_str(dlock__reply_at(fields, k + 1), NULL));
        assert_non_null(sids[i]);
    }
    dlock__reply_free(x);
    dlock__conn_close(c);
    qsort(ids, 100, sizeof(char *), cmp_str);
    qsort(sids, 100, sizeof(char *), cmp_str);
    for (int i = 0; i < 100; i++) {
        assert_string_equal(ids[i], sids[i]);
        if (i) assert_true(strcmp(ids[i - 1], ids[i]) != 0);
    }
    for (int i = 0; i < 100; i++) {
        free(ids[i]);
        free(sids[i]);
    }
    free(ids);
    free(sids);
    free(r);
}

static void run_same_user(const char *campaign, const char *user, int n, int qty_mix, int *units_out,
                          int *accepted_out)
{
    skt_req *r = calloc((size_t)n, sizeof(*r));
    assert_non_null(r);
    for (int i = 0; i < n; i++) {
        purchase_req(&r[i], d[i % 3].port, campaign, user, qty_mix ? 1 + i % 2 : 1);
    }
    assert_int_equal(skt_run_concurrent(r, (size_t)n, 10000), 0);
    int units = 0, accepted = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].status == 201) {
            accepted++;
            units += qty_mix ? 1 + i % 2 : 1;
        } else {
            if (r[i].status != 409) fail_msg("status %d %s", r[i].status, r[i].resp);
            expect_error(r[i].resp, "limit_reached");
        }
    }
    *units_out = units;
    *accepted_out = accepted;
    free(r);
}

static void test_one_user_with_200_concurrent_requests_gets_its_limit(void **state)
{
    (void)state;
    assert_int_equal(create("lim1", 1000, 1, -60, 3600), 201);
    int units, accepted;
    run_same_user("lim1", "scalper", 200, 0, &units, &accepted);
    assert_int_equal(accepted, 1);
    assert_int_equal(units, 1);

    assert_int_equal(create("lim2", 1000, 2, -60, 3600), 201);
    run_same_user("lim2", "mixer", 100, 1, &units, &accepted);
    assert_true(units >= 1 && units <= 2);
    char held[32] = "";
    const char *argv[] = {"HGET", "{c:lim2}:buyers", "mixer"};
    assert_int_equal(test_redis_cmd(&redis, held, sizeof(held), 3, argv), 0);
    assert_int_equal(strtol(held, NULL, 10), units);

    char resp[512];
    assert_int_equal(buy(d[0].port, "lim2", "u2", 2, NULL, resp, sizeof(resp)), 201);
    assert_int_equal(buy(d[1].port, "lim2", "u2", 1, NULL, resp, sizeof(resp)), 409);
    expect_error(resp, "limit_reached");
    assert_int_equal(buy(d[2].port, "lim2", "u3", 1, NULL, resp, sizeof(resp)), 201);
    assert_int_equal(buy(d[0].port, "lim2", "u3", 2, NULL, resp, sizeof(resp)), 409);
    assert_int_equal(buy(d[0].port, "lim2", "u3", 1, NULL, resp, sizeof(resp)), 201);
    assert_int_equal(buy(d[0].port, "lim2", "u4", 3, NULL, resp, sizeof(resp)), 400);
    expect_error(resp, "bad_request");
}

static void test_idempotency_key_replay_returns_the_same_order(void **state)
{
    (void)state;
    assert_int_equal(create("idem", 1, 1, -60, 3600), 201);
    char first[512], again[512], other[512];
    assert_int_equal(buy(d[0].port, "idem", "ann", 1, "key-1", first, sizeof(first)), 201);
    /* sold out now; the replay still answers the first answer (no local flag) */
    assert_int_equal(buy(d[0].port, "idem", "bob", 1, NULL, other, sizeof(other)), 409);
    expect_error(other, "sold_out");
    assert_int_equal(buy(d[0].port, "idem", "ann", 1, "key-1", again, sizeof(again)), 201);
    assert_string_equal(first, again);
    assert_int_equal(buy(d[2].port, "idem", "ann", 1, "key-1", again, sizeof(again)), 201);
    assert_string_equal(first, again);
    /* a key is scoped to (user, campaign): bob's use of it is decided on its own */
    assert_int_equal(buy(d[1].port, "idem", "bob", 1, "key-1", other, sizeof(other)), 409);
    expect_error(other, "sold_out");
    /* the order is readable */
    char oid[48], path[80], resp[512], v[64];
    assert_true(skt_json_str(first, "order_id", oid, sizeof(oid)));
    snprintf(path, sizeof(path), "/v1/orders/%s", oid);
    assert_int_equal(skt_http(d[1].port, "GET", path, "X-User-Id: ann\r\n", NULL, 0, resp, sizeof(resp)), 200);
    assert_true(skt_json_str(resp, "user", v, sizeof(v)));
    assert_string_equal(v, "ann");
    assert_true(skt_json_str(resp, "status", v, sizeof(v)));
    assert_string_equal(v, "accepted");
    assert_true(skt_json_str(resp, "campaign", v, sizeof(v)));
    assert_string_equal(v, "idem");
}

/* The head and body of an accepted purchase's answer on the wire: the
 * headers a client and a proxy see, and the body exactly. */
static void expect_accepted_bytes(int status, const char *location_of, const char *body)
{
    const char *raw = skt_last_response();
    char line[64], want[256];
    snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", status, status == 201 ? "Created" : "Accepted");
    if (strncmp(raw, line, strlen(line)) != 0) fail_msg("status line of: %s", raw);
    const char *end = strstr(raw, "\r\n\r\n");
    assert_non_null(end);
    assert_string_equal(end + 4, body);
    snprintf(want, sizeof(want), "\r\nContent-Length: %zu\r\n", strlen(body));
    if (!strstr(raw, want)) fail_msg("no %s in: %s", want + 2, raw);
    if (!strstr(raw, "\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"))
        fail_msg("JSON headers missing in: %s", raw);
    if (!strstr(raw, "\r\nDate: ")) fail_msg("no Date in: %s", raw);
    if (location_of) {
        snprintf(want, sizeof(want), "\r\nLocation: /v1/orders/%s\r\n", location_of);
        if (!strstr(raw, want)) fail_msg("no %s in: %s", want + 2, raw);
    } else if (strstr(raw, "\r\nLocation: ")) {
        fail_msg("a 201 has no Location: %s", raw);
    }
}

static void test_accepted_answers_byte_for_byte(void **state)
{
    (void)state;
    char resp[1024], oid[48], want[256];
    assert_int_equal(create("bytes", 1000000000, 5, -60, 3600), 201);
    assert_int_equal(buy(d[0].port, "bytes", "ann", 3, NULL, resp, sizeof(resp)), 201);
    assert_true(skt_json_str(resp, "order_id", oid, sizeof(oid)));
    snprintf(want, sizeof(want),
             "{\"order_id\":\"%s\",\"campaign\":\"bytes\",\"quantity\":3,\"remaining\":999999997,"
             "\"status\":\"accepted\"}\n",
             oid);
    expect_accepted_bytes(201, NULL, want);
    /* a server that does not fsync: pending, with the order's Location */
    test_server plain;
    skt_daemon p = {0};
    const char *extra[] = {"--admin-token", "adm-token", NULL};
    assert_int_equal(test_redis_start(&plain, NULL), 0);
    assert_int_equal(skt_daemon_start(&p, plain.url, extra), 0);
    char body[256];
    int64_t now = dlock__wall_ms();
    snprintf(body, sizeof(body),
             "{\"id\":\"bytes\",\"stock\":9,\"per_user_limit\":1,\"starts_at\":%lld,\"ends_at\":%lld}",
             (long long)(now - 60000), (long long)(now + 3600000));
    assert_int_equal(skt_http(p.port, "POST", "/v1/campaigns", ADMIN, body, strlen(body), resp, sizeof(resp)), 201);
    assert_int_equal(buy(p.port, "bytes", "bob", 1, NULL, resp, sizeof(resp)), 202);
    assert_true(skt_json_str(resp, "order_id", oid, sizeof(oid)));
    snprintf(want, sizeof(want), "{\"order_id\":\"%s\",\"status\":\"pending\"}\n", oid);
    expect_accepted_bytes(202, oid, want);
    assert_int_equal(skt_daemon_stop(&p), 0);
    test_server_stop(&plain);
}

/* One Idempotency-Key rule whatever the number of buckets: the key is
 * scoped to (user, campaign). Three users sending one key get three
 * orders, each user's repeat (through another instance) answers that
 * user's first answer, on a one-bucket and on a three-bucket campaign. */
static void idem_scope_case(const char *camp, const char *extra)
{
    char body[512], resp[1024];
    int64_t now = dlock__wall_ms();
    snprintf(body, sizeof(body),
             "{\"id\":\"%s\",\"title\":\"t\",\"stock\":9,\"per_user_limit\":1,\"starts_at\":%lld,"
             "\"ends_at\":%lld%s}",
             camp, (long long)(now - 60000), (long long)(now + 3600000), extra);
    assert_int_equal(skt_http(d[0].port, "POST", "/v1/campaigns", ADMIN, body, strlen(body), resp, sizeof(resp)),
                     201);
    static const char *const users[3] = {"ida", "ivo", "ilse"};
    char first[3][512], again[512], oid[3][48];
    for (int i = 0; i < 3; i++) {
        int st = buy(d[i].port, camp, users[i], 1, "same-key", first[i], sizeof(first[i]));
        if (st != 201) fail_msg("%s: %s with the key another user used: %d %s", camp, users[i], st, first[i]);
        assert_true(skt_json_str(first[i], "order_id", oid[i], sizeof(oid[i])));
        for (int j = 0; j < i; j++) assert_string_not_equal(oid[i], oid[j]);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(buy(d[(i + 1) % 3].port, camp, users[i], 1, "same-key", again, sizeof(again)), 201);
        assert_string_equal(first[i], again); /* the user's own first answer */
    }
}

static void test_idempotency_key_is_scoped_to_user_and_campaign(void **state)
{
    (void)state;
    idem_scope_case("idem-k1", "");
    idem_scope_case("idem-k3", ",\"shards\":3");
}

static void test_time_window_uses_the_server_clock(void **state)
{
    (void)state;
    char resp[1024], v[32];
    assert_int_equal(create("later", 10, 1, 3600, 7200), 201);
    assert_int_equal(buy(d[0].port, "later", "u1", 1, NULL, resp, sizeof(resp)), 409);
    expect_error(resp, "not_started");
    assert_int_equal(skt_http(d[0].port, "GET", "/v1/campaigns/later", NULL, NULL, 0, resp, sizeof(resp)), 200);
    assert_true(skt_json_str(resp, "state", v, sizeof(v)));
    assert_string_equal(v, "scheduled");
    assert_int_equal(create("over", 10, 1, -7200, -3600), 201);
    assert_int_equal(buy(d[1].port, "over", "u1", 1, NULL, resp, sizeof(resp)), 409);
    expect_error(resp, "ended");
    assert_int_equal(skt_http(d[0].port, "GET", "/v1/campaigns/over", NULL, NULL, 0, resp, sizeof(resp)), 200);
    assert_true(skt_json_str(resp, "state", v, sizeof(v)));
    assert_string_equal(v, "ended");
    /* a window that opens in 2 s: refused, then accepted on the Redis clock */
    int64_t t0 = dlock__now_ms();
    assert_int_equal(create("soon", 10, 1, 2, 3600), 201);
    assert_int_equal(buy(d[1].port, "soon", "u1", 1, NULL, resp, sizeof(resp)), 409);
    assert_true(dlock__now_ms() - t0 < 1900); /* else the machine is too slow to tell */
    dlock__sleep_ms(2100 - (dlock__now_ms() - t0));
    assert_int_equal(buy(d[1].port, "soon", "u1", 1, NULL, resp, sizeof(resp)), 201);
}

static void test_unknown_campaign_and_admin_token(void **state)
{
    (void)state;
    char resp[1024];
    assert_int_equal(buy(d[0].port, "nosuch", "u1", 1, NULL, resp, sizeof(resp)), 404);
    expect_error(resp, "not_found");
    assert_int_equal(skt_http(d[0].port, "GET", "/v1/campaigns/nosuch", NULL, NULL, 0, resp, sizeof(resp)), 404);
    expect_error(resp, "not_found");
    const char *body = "{\"id\":\"adm\",\"stock\":1,\"starts_at\":0,\"ends_at\":1}";
    assert_int_equal(skt_http(d[0].port, "POST", "/v1/campaigns", NULL, body, strlen(body), resp, sizeof(resp)), 401);
    expect_error(resp, "unauthorized");
    assert_int_equal(skt_http(d[0].port, "POST", "/v1/campaigns", "Authorization: Bearer wrong\r\n", body,
                              strlen(body), resp, sizeof(resp)), 401);
    expect_error(resp, "unauthorized");
    assert_int_equal(skt_http(d[0].port, "POST", "/v1/campaigns", ADMIN, body, strlen(body), resp, sizeof(resp)), 201);
    assert_int_equal(skt_http(d[1].port, "POST", "/v1/campaigns", ADMIN, body, strlen(body), resp, sizeof(resp)), 409);
    expect_error(resp, "exists");
    /* re-heat: refused while live unless forced */
    assert_int_equal(create("live", 5, 1, -60, 3600), 201);
    assert_int_equal(skt_http(d[0].port, "POST", "/v1/campaigns/live/preheat", ADMIN, "", 0, resp, sizeof(resp)), 409);
    assert_int_equal(skt_http(d[0].port, "POST", "/v1/campaigns/live/preheat?force=1", NULL, "", 0, resp, sizeof(resp)), 401);
    assert_int_equal(buy(d[0].port, "live", "u1", 1, NULL, resp, sizeof(resp)), 201);
    assert_int_equal(skt_http(d[0].port, "POST", "/v1/campaigns/live/preheat?force=1", ADMIN, "", 0, resp, sizeof(resp)), 200);
    char v[32];
    assert_true(skt_json_str(resp, "remaining", v, sizeof(v)));
    assert_string_equal(v, "4"); /* a re-heat keeps what buyers hold */
}

typedef struct bad_case {
    const char *method, *path, *headers, *body;
    int status;
    const char *code;
} bad_case;

static void test_bad_input_matrix(void **state)
{
    (void)state;
    assert_int_equal(create("m", 100, 2, -60, 3600), 201);
    char long_user[128], long_key[128], a65[66], k65[66];
    memset(a65, 'a', 65);
    a65[65] = '\0';
    memset(k65, 'k', 65);
    k65[65] = '\0';
    snprintf(long_user, sizeof(long_user), "X-User-Id: %s\r\n", a65);
    snprintf(long_key, sizeof(long_key), "X-User-Id: u\r\nIdempotency-Key: %s\r\n", k65);
    const char *P = "/v1/campaigns/m/purchase";
    const bad_case cases[] = {
        {"POST", P, "", "{\"quantity\":1}", 400, "bad_request"},
        {"POST", P, "X-User-Id: a b\r\n", "{\"quantity\":1}", 400, "bad_request"},
        {"POST", P, "X-User-Id: a/b\r\n", "{\"quantity\":1}", 400, "bad_request"},
        {"POST", P, long_user, "{\"quantity\":1}", 400, "bad_request"},
        {"POST", P, long_key, "{\"quantity\":1}", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{\"quantity\":0}", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{\"quantity\":-1}", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{\"quantity\":\"1\"}", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{\"quantity\":1.5}", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{\"quantity\":3}", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{\"quantity\":99999999999999999999}", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{\"qty\":1}", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "[1]", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{\"quantity\":1}x", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "{\"quantity\":1,\"quantity\":1}", 400, "bad_request"},
        {"POST", P, "X-User-Id: u\r\n", "\"\xff\"", 400, "bad_request"},
        {"GET", P, "X-User-Id: u\r\n", NULL, 405, "method_not_allowed"},
        {"DELETE", "/v1/campaigns/m", "", NULL, 405, "method_not_allowed"},
        {"GET", "/v1/campaigns", "", NULL, 405, "method_not_allowed"},
        {"GET", "/nope", "", NULL, 404, "not_found"},
        {"GET", "/v1/campaigns/m/x", "", NULL, 404, "not_found"},
        {"GET", "/v1/campaigns/bad.id", "", NULL, 404, "not_found"},
        {"GET", "/v1/orders/abc", "", NULL, 404, "not_found"},
        {"POST", "/v1/campaigns/m/preheat?xforce=1", ADMIN, "", 400, "bad_request"},
        {"POST", "/v1/campaigns/m/preheat?mode=noforce=1", ADMIN, "", 400, "bad_request"},
        {"POST", "/v1/campaigns/m/preheat?force=1&force=1", ADMIN, "", 400, "bad_request"},
        {"POST", "/v1/campaigns/m/preheat?force=yes", ADMIN, "", 400, "bad_request"},
        {"POST", "/v1/orders/1/cancel", "X-User-Id: a\r\nX-User-Id: b\r\n", "", 400, "bad_request"},
        {"GET", "/v1/orders/99999999999999999999", "X-User-Id: ann\r\n", NULL, 404, "not_found"},
        {"GET", "/v1/orders/12345", "X-User-Id: ann\r\n", NULL, 404, "not_found"},
        {"GET", "/v1/orders/12345", "", NULL, 401, "unauthorized"},
        {"POST", "/v1/campaigns", ADMIN, "{", 400, "bad_request"},
        {"POST", "/v1/campaigns", ADMIN, "{\"id\":\"z1\"}", 400, "bad_request"},
        {"POST", "/v1/campaigns", ADMIN, "{\"id\":\"z1\",\"stock\":1,\"starts_at\":5,\"ends_at\":4}", 400, "bad_request"},
        {"POST", "/v1/campaigns", ADMIN, "{\"id\":\"z1\",\"stock\":1,\"starts_at\":\"yesterday\",\"ends_at\":4}", 400, "bad_request"},
        {"POST", "/v1/campaigns", ADMIN, "{\"id\":\"z 1\",\"stock\":1,\"starts_at\":1,\"ends_at\":4}", 400, "bad_request"},
        {"POST", "/v1/campaigns", ADMIN, "{\"id\":\"z1\",\"stock\":-1,\"starts_at\":1,\"ends_at\":4}", 400, "bad_request"},
        {"POST", "/v1/campaigns", ADMIN, "{\"id\":\"z1\",\"stock\":1,\"per_user_limit\":0,\"starts_at\":1,\"ends_at\":4}", 400, "bad_request"},
        {"POST", "/v1/campaigns", ADMIN, "{\"id\":\"z1\",\"stock\":1,\"starts_at\":1,\"ends_at\":4,\"extra\":1}", 400, "bad_request"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const bad_case *c = &cases[i];
        char resp[1024];
        int st = skt_http(d[i % 3].port, c->method, c->path, c->headers, c->body,
                          c->body ? strlen(c->body) : 0, resp, sizeof(resp));
        if (st != c->status) fail_msg("case %zu (%s %s %s): status %d, want %d: %s", i, c->method, c->path,
                                      c->body ? c->body : "", st, c->status, resp);
        expect_error(resp, c->code);
        if (strstr(resp, "out of memory")) fail_msg("case %zu: %s", i, resp); /* says what is wrong */
    }
    /* over 8 KiB */
    size_t n = 9000;
    char *big = malloc(n);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    char resp[1024];
    assert_int_equal(skt_http(d[0].port, "POST", P, "X-User-Id: u\r\n", big, n, resp, sizeof(resp)), 413);
    expect_error(resp, "too_large");
    free(big);
    /* nothing was bought by all of that */
    char held[32] = "";
    const char *argv[] = {"HLEN", "{c:m}:buyers"};
    assert_int_equal(test_redis_cmd(&redis, held, sizeof(held), 2, argv), 0);
    assert_string_equal(held, "0");
    /* and the service is fine */
    assert_int_equal(buy(d[0].port, "m", "u", 2, NULL, resp, sizeof(resp)), 201);
}

/* The quantity's bounds are the entry point's one table (rulebook.h): the
 * body read without the parser ({"quantity":N}) and the same number read
 * by it answer alike, just inside and just outside the bounds. */
static void test_quantity_bounds_answer_alike_on_every_reading(void **state)
{
    (void)state;
    assert_int_equal(create("qb", 10, 1, -60, 3600), 201);
    const char *P = "/v1/campaigns/qb/purchase", *U = "X-User-Id: qbuser\r\n";
    const char *outside[] = {"{\"quantity\":1000001}", "{\"quantity\": 1000001}", "{\"quantity\":9999999}",
                             "{\"quantity\":10000000}", "{\"quantity\":0}", "{ \"quantity\":0}"};
    char resp[1024];
    for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
        int st = skt_http(d[i % 3].port, "POST", P, U, outside[i], strlen(outside[i]), resp, sizeof(resp));
        if (st != 400 || !strstr(resp, "quantity must be a positive integer"))
            fail_msg("%s: %d %s", outside[i], st, resp);
    }
    /* the largest quantity passes the entry point on both readings: the
     * campaign's rules answer it (above its limit of 1: bad quantity) */
    const char *largest[] = {"{\"quantity\":1000000}", "{\"quantity\": 1000000}"};
    for (size_t i = 0; i < 2; i++) {
        int st = skt_http(d[i].port, "POST", P, U, largest[i], strlen(largest[i]), resp, sizeof(resp));
        if (st != 400 || strstr(resp, "positive integer")) fail_msg("%s: %d %s", largest[i], st, resp);
    }
    assert_int_equal(buy(d[2].port, "qb", "qbuser", 1, NULL, resp, sizeof(resp)), 201);
}

/* One JSON body, one reading. A key holding \u0000 is no second
 * "quantity" or "id", a key spelled with escapes is the same key, and a
 * time is bounded to what RFC 3339 writes: each is 400 and changes nothing. */
static void test_one_json_reading_for_every_body(void **state)
{
    (void)state;
    assert_int_equal(create("jr", 10, 5, -60, 3600), 201);
    const char *P = "/v1/campaigns/jr/purchase", *U = "X-User-Id: u\r\n";
    const char *purchases[] = {"{\"quantity\":1,\"quantity\\u0000\":3}", "{\"quantity\\u0000\":3,\"quantity\":1}",
                               "{\"quantity\":1,\"quant\\u0069ty\":3}", "{\"quantity\":1,\"\\u0071uantity\":3}",
                               "\xef\xbb\xbf{\"quantity\":1}", "{\"quantity\":3e0}", "{\"quantity\":1}\n{}"};
    char resp[1024];
    for (size_t i = 0; i < sizeof(purchases) / sizeof(purchases[0]); i++) {
        int st = skt_http(d[i % 3].port, "POST", P, U, purchases[i], strlen(purchases[i]), resp, sizeof(resp));
        if (st != 400) fail_msg("purchase %zu (%s): %d, want 400: %s", i, purchases[i], st, resp);
        expect_error(resp, "bad_request");
    }
    assert_non_null(strstr(resp, "invalid JSON: trailing characters at byte 15"));
    const char *held_argv[] = {"HLEN", "{c:jr}:buyers"};
    char held[32] = "";
    assert_int_equal(test_redis_cmd(&redis, held, sizeof(held), 2, held_argv), 0);
    assert_string_equal(held, "0"); /* nothing bought, by anyone */
    /* the campaign reproduction: neither D6 nor zz exists afterwards */
    const char *camps[] = {
        "{\"id\":\"D6\",\"id\\u0000x\":\"zz\",\"stock\":5,\"starts_at\":0,\"ends_at\":4102444800000}",
        "{\"id\":\"D6\",\"i\\u0064\":\"zz\",\"stock\":5,\"starts_at\":0,\"ends_at\":4102444800000}",
        "{\"id\":\"D6\",\"stock\":5,\"starts_at\":0,\"ends_at\":4611686018427387904}",
        "{\"id\":\"D6\",\"stock\":5,\"starts_at\":0,\"ends_at\":253402300800000}",
        "{\"id\":\"D6\",\"stock\":5,\"starts_at\":0,\"ends_at\":\"9999-12-31T23:00:00-02:00\"}",
        "{\"id\":\"D6\",\"stock\":5,\"starts_at\":0,\"ends_at\":1,\"price_cents\":99999999999999999999}"};
    for (size_t i = 0; i < sizeof(camps) / sizeof(camps[0]); i++) {
        int st = skt_http(d[0].port, "POST", "/v1/campaigns", ADMIN, camps[i], strlen(camps[i]), resp, sizeof(resp));
        if (st != 400) fail_msg("campaign %zu (%s): %d, want 400: %s", i, camps[i], st, resp);
        expect_error(resp, "bad_request");
        if (i == 2) assert_non_null(strstr(resp, "bad value for \\\"ends_at\\\": RFC 3339 (years 0000-9999)"));
    }
    assert_int_equal(skt_http(d[1].port, "GET", "/v1/campaigns/zz", NULL, NULL, 0, resp, sizeof(resp)), 404);
    assert_int_equal(skt_http(d[1].port, "GET", "/v1/campaigns/D6", NULL, NULL, 0, resp, sizeof(resp)), 404);
    /* the last instant RFC 3339 writes is accepted and read back as written */
    const char *last = "{\"id\":\"D7\",\"stock\":5,\"starts_at\":0,\"ends_at\":253402300799999}";
    assert_int_equal(skt_http(d[0].port, "POST", "/v1/campaigns", ADMIN, last, strlen(last), resp, sizeof(resp)), 201);
    assert_non_null(strstr(resp, "\"ends_at\":\"9999-12-31T23:59:59.999Z\""));
    /* and the service is fine */
    assert_int_equal(buy(d[2].port, "jr", "u", 1, NULL, resp, sizeof(resp)), 201);
}

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* ms until the server closes fd (reads EOF/reset), or -1 after wait_ms. */
static int64_t ms_until_closed(int fd, int wait_ms)
{
    int64_t t0 = dlock__now_ms();
    char buf[4096];
    while (dlock__now_ms() - t0 < wait_ms) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) > 0) {
            ssize_t r = recv(fd, buf, sizeof(buf), 0);
            if (r <= 0) return dlock__now_ms() - t0;
        }
    }
    return -1;
}

static void test_slow_and_silent_clients_are_timed_out(void **state)
{
    (void)state;
    skt_daemon s;
    const char *extra[] = {"--idle-timeout-ms", "1000", NULL};
    assert_int_equal(skt_daemon_start(&s, redis.url, extra), 0);
    int silent = raw_connect(s.port);
    int slow = raw_connect(s.port);
    const char *part = "POST /v1/campaigns/m/purchase HTTP/1.1\r\nHost: x\r\nX-User-Id: u";
    assert_true(send(slow, part, strlen(part), MSG_NOSIGNAL) > 0);
    int64_t a = ms_until_closed(silent, 4000), b = ms_until_closed(slow, 4000);
    close(silent);
    close(slow);
    assert_true(a >= 0 && a < 3000); /* idle timeout is 1 s */
    assert_true(b >= 0 && b < 3000);
    char resp[256];
    assert_int_equal(skt_http(s.port, "GET", "/ping", NULL, NULL, 0, resp, sizeof(resp)), 200);
    assert_int_equal(skt_daemon_stop(&s), 0);
}

/* X-User-Signature as docs/http-api.md defines it: v1=<hex HMAC-SHA256 of
 * user "\n" exp>;exp=<exp>, valid for an hour. */
static void sign_user(const char *secret, const char *user, char out[96])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    char text[96];
    long long exp = (long long)time(NULL) + 3600;
    int len = snprintf(text, sizeof(text), "%s\n%lld", user, exp);
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)text, (size_t)len, md, &n);
    memcpy(out, "v1=", 3);
    for (unsigned i = 0; i < n; i++) snprintf(out + 3 + 2 * i, 3, "%02x", md[i]);
    snprintf(out + 3 + 2 * n, 96 - 3 - 2 * n, ";exp=%lld", exp);
}

static void test_signature_and_graceful_shutdown(void **state)
{
    (void)state;
    skt_daemon s;
    const char *extra[] = {"--user-secret", "s3cret", NULL};
    assert_int_equal(skt_daemon_start(&s, redis.url, extra), 0);
    assert_int_equal(create("sig", 10, 1, -60, 3600), 201);
    char resp[512], hdr[256], sig[96];
    const char *body = "{\"quantity\":1}";
    assert_int_equal(skt_http(s.port, "POST", "/v1/campaigns/sig/purchase", "X-User-Id: alice\r\n", body,
                              strlen(body), resp, sizeof(resp)), 401);
    expect_error(resp, "unauthorized");
    sign_user("s3cret", "mallory", sig);
    snprintf(hdr, sizeof(hdr), "X-User-Id: alice\r\nX-User-Signature: %s\r\n", sig);
    assert_int_equal(skt_http(s.port, "POST", "/v1/campaigns/sig/purchase", hdr, body, strlen(body), resp,
                              sizeof(resp)), 401);
    sign_user("s3cret", "alice", sig);
    snprintf(hdr, sizeof(hdr), "X-User-Id: alice\r\nX-User-Signature: %s\r\n", sig);
    assert_int_equal(skt_http(s.port, "POST", "/v1/campaigns/sig/purchase", hdr, body, strlen(body), resp,
                              sizeof(resp)), 201);
    assert_int_equal(skt_daemon_stop(&s), 0); /* SIGTERM -> exit 0 */
}

static void test_rate_limit_stops_a_scalper_with_retry_after(void **state)
{
    (void)state;
    skt_daemon s;
    const char *extra[] = {"--user-rate-limit", "5", "--user-rate-window-ms", "10000", NULL};
    assert_int_equal(skt_daemon_start(&s, redis.url, extra), 0);
    assert_int_equal(create("rl", 1000, 1, -60, 3600), 201);
    enum { N = 1000 };
    skt_req *r = calloc(N, sizeof(*r));
    for (int i = 0; i < N; i++) {
        purchase_req(&r[i], s.port, "rl", "scalper", 1);
    }
    assert_int_equal(skt_run_concurrent(r, N, 20000), 0);
    int acc = 0, lim = 0, rate = 0;
    for (int i = 0; i < N; i++) {
        if (r[i].status == 201) acc++;
        else if (r[i].status == 409) {
            expect_error(r[i].resp, "limit_reached");
            lim++;
        } else if (r[i].status == 429) {
            expect_error(r[i].resp, "rate_limited");
            rate++;
        } else {
            fail_msg("status %d %s", r[i].status, r[i].resp);
        }
    }
    free(r);
    assert_int_equal(acc, 1);
    assert_int_equal(lim + acc, 5); /* 5 attempts per window reach the decision */
    assert_int_equal(rate, N - 5);
    char resp[512];
    assert_int_equal(buy(s.port, "rl", "scalper", 1, NULL, resp, sizeof(resp)), 429);
    const char *ra = strstr(skt_last_response(), "\r\nRetry-After: ");
    assert_non_null(ra);
    long secs = strtol(ra + 15, NULL, 10);
    assert_true(secs >= 1 && secs <= 10);
    assert_int_equal(skt_daemon_stop(&s), 0);
}

static void test_ip_rate_limit_with_forwarded_addresses(void **state)
{
    (void)state;
    skt_daemon s;
    const char *extra[] = {"--ip-rate-limit", "3", "--ip-rate-window-ms", "10000", "--trust-forwarded", NULL};
    assert_int_equal(skt_daemon_start(&s, redis.url, extra), 0);
    assert_int_equal(create("iprl", 100, 1, -60, 3600), 201);
    char resp[512], hdr[128];
    const char *body = "{\"quantity\":1}";
    for (int i = 0; i < 5; i++) {
        snprintf(hdr, sizeof(hdr), "X-User-Id: ip%d\r\nX-Forwarded-For: 10.0.0.1, 192.0.2.9\r\n", i);
        int st = skt_http(s.port, "POST", "/v1/campaigns/iprl/purchase", hdr, body, strlen(body), resp, sizeof(resp));
        assert_int_equal(st, i < 3 ? 201 : 429);
        if (i >= 3) {
            expect_error(resp, "rate_limited");
            assert_non_null(strstr(skt_last_response(), "\r\nRetry-After: "));
        }
    }
    /* another address is not affected */
    snprintf(hdr, sizeof(hdr), "X-User-Id: ip9\r\nX-Forwarded-For: 10.0.0.2\r\n");
    assert_int_equal(skt_http(s.port, "POST", "/v1/campaigns/iprl/purchase", hdr, body, strlen(body), resp,
                              sizeof(resp)), 201);
    assert_int_equal(skt_daemon_stop(&s), 0);
}

static void test_workers_share_one_port_and_stop_cleanly(void **state)
{
    (void)state;
    char n[16] = "";
    /* the leases, not their fencing counters (seckill:worker:<n>:fence) */
    const char *argv[] = {"EVAL",
                          "local n = 0 for _, k in ipairs(redis.call('KEYS', 'seckill:worker:*')) do "
                          "if not k:find(':fence$') then n = n + 1 end end return n",
                          "0"};
    assert_int_equal(test_redis_cmd(&redis, n, sizeof(n), 3, argv), 0);
    long before = strtol(n, NULL, 10);
    skt_daemon s;
    const char *extra[] = {"--workers", "3", NULL};
    assert_int_equal(skt_daemon_start(&s, redis.url, extra), 0);
    assert_int_equal(create("wk", 30, 1, -60, 3600), 201);
    enum { N = 60 };
    skt_req r[N];
    memset(r, 0, sizeof(r));
    distinct_buyers(r, N, s.port, "wk", "w");
    /* each worker process (each of its loops with --threads) leases its
     * own order-id worker id; once all are leased every worker is ready */
    long want = before + 3L * loops();
    int64_t deadline = dlock__now_ms() + 5000;
    do {
        assert_int_equal(test_redis_cmd(&redis, n, sizeof(n), 3, argv), 0);
        if (strtol(n, NULL, 10) >= want) break;
        dlock__sleep_ms(20);
    } while (dlock__now_ms() < deadline);
    assert_int_equal(strtol(n, NULL, 10), want);
    assert_int_equal(skt_run_concurrent(r, N, 10000), 0);
    int acc = 0;
    for (int i = 0; i < N; i++) acc += r[i].status == 201;
    assert_int_equal(acc, 30);
    assert_int_equal(skt_daemon_stop(&s), 0); /* parent forwards SIGTERM, all exit 0 */
}

typedef struct term_plan {
    pid_t daemon;
    int port;
    int want;
    const test_server *redis;
} term_plan;

/* Child: once all purchases wait for the frozen Redis (the daemon's own
 * in-flight gauge says so), SIGTERM the daemon, then let Redis go on. */
static int term_while_in_flight(void *arg)
{
    term_plan *p = arg;
    static char m[65536];
    int64_t deadline = dlock__now_ms() + 8000;
    while (dlock__now_ms() < deadline) {
        if (skt_http(p->port, "GET", "/metrics", NULL, NULL, 0, m, sizeof(m)) == 200) {
            const char *g = strstr(m, "\nseckill_http_inflight ");
            if (g && strtol(g + 23, NULL, 10) >= p->want) break;
        }
        dlock__sleep_ms(20);
    }
    kill(p->daemon, SIGTERM);
    dlock__sleep_ms(200);
    kill(p->redis->pid, SIGCONT);
    return 0;
}

static void test_sigterm_finishes_in_flight_purchases(void **state)
{
    (void)state;
    skt_daemon s;
    const char *extra[] = {"--redis-timeout-ms", "5000", NULL};
    assert_int_equal(skt_daemon_start(&s, redis.url, extra), 0);
    assert_int_equal(create("term", 1000, 1, -60, 3600), 201);
    enum { N = 100 };
    skt_req r[N];
    memset(r, 0, sizeof(r));
    distinct_buyers(r, N, s.port, "term", "t");
    test_server_pause(&redis, true);
    term_plan plan = {.daemon = s.pid, .port = s.port, .want = N, .redis = &redis};
    pid_t helper = test_fork(term_while_in_flight, &plan);
    assert_true(helper > 0);
    assert_int_equal(skt_run_concurrent(r, N, 10000), 0);
    waitpid(helper, NULL, 0);
    int acc = 0;
    for (int i = 0; i < N; i++) {
        if (r[i].status != 201) fail_msg("request %d: %d %s", i, r[i].status, r[i].resp);
        acc++;
    }
    assert_int_equal(acc, N); /* every request in flight at SIGTERM got its answer */
    char xlen[16] = "";
    const char *argv[] = {"XLEN", "{c:term}:orders"};
    assert_int_equal(test_redis_cmd(&redis, xlen, sizeof(xlen), 2, argv), 0);
    assert_string_equal(xlen, "100");
    assert_int_equal(skt_daemon_stop(&s), 0); /* already exiting: status 0 */
}

/* Asserts that the exposition has the line "<series> <value>". */
static void expect_metric(const char *text, const char *series, const char *value)
{
    char line[256];
    snprintf(line, sizeof(line), "\n%s %s\n", series, value);
    if (!strstr(text, line)) fail_msg("want %s %s in:\n%s", series, value, text);
}

/* The value of "<series> <value>" in the exposition (fails when absent). */
static long metric_value(const char *text, const char *series)
{
    char pat[256];
    snprintf(pat, sizeof(pat), "\n%s ", series);
    const char *p = strstr(text, pat);
    if (!p) fail_msg("no %s in:\n%s", series, text);
    return strtol(p + strlen(pat), NULL, 10);
}

/* /metrics of an instance counts what every loop of it served: 40
 * purchases on 40 connections (spread over the loops by SO_REUSEPORT),
 * then one /metrics, on yet another connection, counts all 40. */
static void test_metrics_count_the_requests_of_every_loop(void **state)
{
    (void)state;
    assert_int_equal(create("all", 1000, 1, -60, 3600), 201);
    enum { N = 40 };
    skt_req r[N];
    memset(r, 0, sizeof(r));
    distinct_buyers(r, N, d[2].port, "all", "l");
    assert_int_equal(skt_run_concurrent(r, N, 10000), 0);
    for (int i = 0; i < N; i++) assert_int_equal(r[i].status, 201);
    static char resp[65536];
    for (int k = 0; k < 5; k++) { /* each /metrics may land on another loop */
        assert_int_equal(skt_http(d[2].port, "GET", "/metrics", NULL, NULL, 0, resp, sizeof(resp)), 200);
        expect_metric(resp, "seckill_http_requests_total{route=\"purchase\",status=\"201\"}", "40");
        expect_metric(resp, "seckill_purchases_total{outcome=\"accepted\"}", "40");
        expect_metric(resp, "seckill_answers_total{answer=\"201\"}", "40");
        expect_metric(resp, "seckill_ready", "1");
    }
}

/* The counters start at zero and count exactly the traffic sent here. */
static void test_metrics_and_ping(void **state)
{
    (void)state;
    static char resp[65536];
    char body[256];
    assert_int_equal(skt_http(d[0].port, "GET", "/metrics", NULL, NULL, 0, resp, sizeof(resp)), 200);
    expect_metric(resp, "seckill_purchases_total{outcome=\"accepted\"}", "0");
    expect_metric(resp, "seckill_purchases_total{outcome=\"sold_out\"}", "0");
    expect_metric(resp, "seckill_purchase_batch_size_count", "0");
    assert_null(strstr(resp, "route=\"purchase\""));
    assert_int_equal(create("met", 3, 1, -60, 3600), 201);
    for (int i = 0; i < 4; i++) {
        char user[16];
        snprintf(user, sizeof(user), "m%d", i);
        assert_int_equal(buy(d[0].port, "met", user, 1, NULL, body, sizeof(body)), i < 3 ? 201 : 409);
    }
    assert_int_equal(skt_http(d[0].port, "GET", "/ping", NULL, NULL, 0, resp, sizeof(resp)), 200);
    assert_string_equal(resp, "pong\n");
    assert_int_equal(skt_http(d[0].port, "GET", "/metrics", NULL, NULL, 0, resp, sizeof(resp)), 200);
    expect_metric(resp, "seckill_http_requests_total{route=\"purchase\",status=\"201\"}", "3");
    expect_metric(resp, "seckill_http_requests_total{route=\"purchase\",status=\"409\"}", "1");
    expect_metric(resp, "seckill_http_requests_total{route=\"ping\",status=\"200\"}", "1");
    expect_metric(resp, "seckill_purchases_total{outcome=\"accepted\"}", "3");
    expect_metric(resp, "seckill_purchases_total{outcome=\"sold_out\"}", "1");
    if (loops() == 1) {
        /* the third sale emptied the stock: the fourth is answered locally */
        expect_metric(resp, "seckill_soldout_local_total", "1");
        /* one at a time: three script calls of one purchase each */
        expect_metric(resp, "seckill_purchase_batch_size_bucket{le=\"1\"}", "3");
        expect_metric(resp, "seckill_purchase_batch_size_bucket{le=\"+Inf\"}", "3");
        expect_metric(resp, "seckill_purchase_batch_size_count", "3");
    } else {
        /* the sold-out flag is per loop: the fourth is answered by the
         * flag of the loop that sold the last unit, or by Redis */
        long local = metric_value(resp, "seckill_soldout_local_total");
        assert_true(local == 0 || local == 1);
        assert_int_equal(metric_value(resp, "seckill_purchase_batch_size_count"), 4 - local);
        assert_int_equal(metric_value(resp, "seckill_purchase_batch_size_bucket{le=\"1\"}"), 4 - local);
    }
    expect_metric(resp, "seckill_http_request_duration_seconds_count{route=\"purchase\"}", "4");
    expect_metric(resp, "seckill_http_request_duration_seconds_bucket{route=\"purchase\",le=\"+Inf\"}", "4");
    expect_metric(resp, "seckill_redis_reconnects_total", "0");
    expect_metric(resp, "seckill_ready", "1");
    /* the other instance saw none of it */
    assert_int_equal(skt_http(d[1].port, "GET", "/metrics", NULL, NULL, 0, resp, sizeof(resp)), 200);
    expect_metric(resp, "seckill_purchases_total{outcome=\"accepted\"}", "0");
}

/* What a client does after a 503: retry with the same Idempotency-Key (a
 * loaded machine may need more than one attempt while connections settle). */
static int buy_retrying(int port, const char *campaign, const char *user, const char *idem,
                        char *resp, size_t cap)
{
    int64_t deadline = dlock__now_ms() + 5000;
    int st;
    for (;;) {
        st = buy(port, campaign, user, 1, idem, resp, cap);
        if (st != 503 || dlock__now_ms() >= deadline) return st;
        dlock__sleep_ms(50);
    }
}

static void test_frozen_redis_and_vanishing_clients(void **state)
{
    (void)state;
    char resp[512];
    assert_int_equal(create("frz", 10, 1, -60, 3600), 201);
    test_server_pause(&redis, true);
    /* a client that gives up while its purchase waits for Redis */
    int fd = raw_connect(d[0].port);
    const char *req = "POST /v1/campaigns/frz/purchase HTTP/1.1\r\nHost: x\r\nX-User-Id: gone\r\n"
                      "Content-Length: 14\r\n\r\n{\"quantity\":1}";
    assert_true(send(fd, req, strlen(req), MSG_NOSIGNAL) > 0);
    dlock__sleep_ms(50);
    close(fd);
    /* At once, while every connection is still up (a lease renewal or a
     * probe that meets the frozen server later drops an instance's
     * connection, and what is sent after that is rightly "unavailable"):
     * one buyer that waits on d[0], and on d[1] a purchase and an order
     * look-up. Each is sent and never answered: 503 outcome unknown after
     * the reply deadline, the same status and body from the one table. */
    skt_req r[3];
    memset(r, 0, sizeof(r));
    purchase_req(&r[0], d[0].port, "frz", "waits", 1);
    snprintf(r[0].headers, sizeof(r[0].headers), "X-User-Id: waits\r\nIdempotency-Key: w-1\r\n");
    purchase_req(&r[1], d[1].port, "frz", "waits-too", 1);
    r[2].port = d[1].port;
    r[2].method = "GET";
    snprintf(r[2].path, sizeof(r[2].path), "/v1/orders/12345");
    snprintf(r[2].headers, sizeof(r[2].headers), "%s", ADMIN);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(skt_run_concurrent(r, 3, 8000), 0);
    assert_true(dlock__now_ms() - t0 < 3000);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r[i].status, 503);
        expect_error(r[i].resp, "outcome_unknown");
    }
    assert_non_null(strstr(r[0].resp, "unknown"));
    assert_string_equal(r[2].resp, r[1].resp);
    assert_string_equal(r[0].resp, r[1].resp);
    test_server_pause(&redis, false);
    int64_t deadline = dlock__now_ms() + 5000;
    while (skt_http(d[0].port, "GET", "/healthz", NULL, NULL, 0, resp, sizeof(resp)) != 200) {
        assert_true(dlock__now_ms() < deadline);
        dlock__sleep_ms(50);
    }
    /* the retry with the same key learns the outcome (accepted or not, once) */
    int st = buy_retrying(d[0].port, "frz", "waits", "w-1", resp, sizeof(resp));
    if (st != 201) fail_msg("retry: %d %s (log %s)", st, resp, d[0].log);
    char first[512];
    snprintf(first, sizeof(first), "%s", resp);
    assert_int_equal(buy_retrying(d[1].port, "frz", "waits", "w-1", resp, sizeof(resp)), 201);
    assert_string_equal(first, resp);
}

static void test_redis_down_answers_503_and_recovers(void **state)
{
    (void)state;
    char resp[512];
    assert_int_equal(create("rec", 10, 1, -60, 3600), 201);
    test_server_kill(&redis);
    assert_int_equal(buy(d[0].port, "rec", "u1", 1, NULL, resp, sizeof(resp)), 503);
    expect_error(resp, "unavailable");
    assert_int_equal(skt_http(d[1].port, "GET", "/healthz", NULL, NULL, 0, resp, sizeof(resp)), 503);
    assert_int_equal(skt_http(d[2].port, "GET", "/v1/campaigns/rec", NULL, NULL, 0, resp, sizeof(resp)), 503);
    /* back empty (it lost its data: a fresh AOF directory), still durable */
    const char *const lost[] = {"appendonly yes", "appendfsync always", "appenddirname lost", NULL};
    assert_int_equal(test_redis_restart(&redis, lost), 0);
    int64_t deadline = dlock__now_ms() + 8000;
    for (int i = 0; i < 3; i++)
        while (skt_http(d[i].port, "GET", "/healthz", NULL, NULL, 0, resp, sizeof(resp)) != 200) {
            assert_true(dlock__now_ms() < deadline);
            dlock__sleep_ms(50);
        }
    /* the restarted server is empty (no persistence): heat again and buy */
    int st;
    while ((st = create("rec", 10, 1, -60, 3600)) == 503 && dlock__now_ms() < deadline) dlock__sleep_ms(50);
    assert_true(st == 201 || st == 409); /* 409: an earlier 503 attempt did create it */
    for (int i = 0; i < 3; i++) {
        char user[16];
        snprintf(user, sizeof(user), "r%d", i);
        assert_int_equal(buy_retrying(d[i].port, "rec", user, user, resp, sizeof(resp)), 201);
    }
}

static void test_instances_finish_and_exit_0_on_sigterm(void **state)
{
    (void)state;
    /* under ASan a leak or memory error makes the exit status non-zero */
    for (int i = 0; i < 3; i++) assert_int_equal(skt_daemon_stop(&d[i]), 0);
}

/* Every case with its own fixture (setup, teardown). */
#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_2000_buyers_on_3_instances_get_exactly_the_stock),
        CASE(test_one_user_with_200_concurrent_requests_gets_its_limit),
        CASE(test_idempotency_key_replay_returns_the_same_order),
        CASE(test_idempotency_key_is_scoped_to_user_and_campaign),
        CASE(test_accepted_answers_byte_for_byte),
        CASE(test_time_window_uses_the_server_clock),
        CASE(test_unknown_campaign_and_admin_token),
        CASE(test_bad_input_matrix),
        CASE(test_one_json_reading_for_every_body),
        CASE(test_quantity_bounds_answer_alike_on_every_reading),
        CASE(test_slow_and_silent_clients_are_timed_out),
        CASE(test_signature_and_graceful_shutdown),
        CASE(test_rate_limit_stops_a_scalper_with_retry_after),
        CASE(test_ip_rate_limit_with_forwarded_addresses),
        CASE(test_workers_share_one_port_and_stop_cleanly),
        CASE(test_sigterm_finishes_in_flight_purchases),
        CASE(test_metrics_and_ping),
        CASE(test_metrics_count_the_requests_of_every_loop),
        CASE(test_frozen_redis_and_vanishing_clients),
        CASE(test_redis_down_answers_503_and_recovers),
        CASE(test_instances_finish_and_exit_0_on_sigterm),
    };
    if (getenv("SKT_FILTER")) cmocka_set_test_filter(getenv("SKT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
