/* test_seckilld_db.c: seckilld with a system of record (SQLite, then
 * PostgreSQL): a campaign created through the admin API is stored in the
 * database before it is pre-heated; GET /v1/orders answers "accepted" from
 * Redis until the order is persisted, then the database status; paying
 * checks the owner (another buyer's order is 404, as an unknown id) and
 * cancelled orders (409).
 * Persistence is done here with the pipeline's own call, sk_db_apply_batch.
 * A user id is held to one rule at both doors: refused by HTTP, refused by
 * the database path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "db.h"
#include "rulebook.h"
#include "servers.h"
#include "sk_err.h"
#include "skt.h"
#include "util.h"

#define ADMIN "Authorization: Bearer adm\r\n"

static test_server redis; /* each case starts its own */

static void get_field(const char *json, const char *key, const char *want)
{
    char v[128] = "";
    if (!skt_json_str(json, key, v, sizeof(v)) || strcmp(v, want) != 0)
        fail_msg("%s: want %s in %s", key, want, json);
}

/* "u!1" is printable without spaces (the database once took it) but outside
 * [A-Za-z0-9_.:-]: HTTP and every database door refuse the same id. */
static void bad_user_is_refused_at_both_doors(int port, sk_db *db, const char *campaign)
{
    char path[128], resp[1024];
    const char *bad = "u!1";
    snprintf(path, sizeof(path), "/v1/campaigns/%s/purchase", campaign);
    assert_int_equal(skt_http(port, "POST", path, "X-User-Id: u!1\r\n", "{\"quantity\":1}", 14, resp,
                              sizeof(resp)), 400);
    get_field(resp, "error", "bad_request");
    assert_false(sk_valid_user_id(bad));
    int64_t now = dlock__wall_ms();
    assert_int_equal(sk_db_purchase_direct(db, 7700001, campaign, bad, 1, now), SK_EINVAL);
    sk_order_in o = {.order_id = 7700002, .campaign = campaign, .user = bad, .qty = 1, .path = "redis",
                     .created_ms = now};
    assert_string_equal(sk_db_order_invalid(&o), "bad user id");
    assert_int_equal(sk_db_apply_batch(db, &o, 1, NULL), SK_EINVAL);
    assert_int_equal(sk_db_order_pay(db, 7700002, bad, NULL), SK_EINVAL);
    assert_int_equal(sk_db_order_get(db, 7700001, NULL), SK_ENOTFOUND);
    /* and a good id passes both */
    o.user = "u.1:ok";
    assert_null(sk_db_order_invalid(&o));
}

/* One case, on its own Redis: the database at url is the system of record. */
static void run_with_database(const char *url, const char *campaign)
{
    /* fsync before reply: the reply is the acknowledgement, so 201 */
    const char *durable[] = {"appendonly yes", "appendfsync always", NULL};
    assert_int_equal(test_redis_start(&redis, durable), 0);
    skt_daemon d;
    const char *extra[] = {"--admin-token", "adm", "--database-url", url, NULL};
    assert_int_equal(skt_daemon_start(&d, redis.url, extra), 0);
    char body[512], resp[1024], path[128], oid1[48], oid2[48];
    int64_t now = dlock__wall_ms();
    snprintf(body, sizeof(body),
             "{\"id\":\"%s\",\"title\":\"db\",\"stock\":10,\"per_user_limit\":1,\"starts_at\":%lld,"
             "\"ends_at\":%lld,\"price_cents\":500}",
             campaign, (long long)(now - 60000), (long long)(now + 3600000));
    assert_int_equal(skt_http(d.port, "POST", "/v1/campaigns", ADMIN, body, strlen(body), resp, sizeof(resp)), 201);
    /* stored durably */
    sk_db *db = NULL;
    char err[256];
    assert_int_equal(sk_db_open(url, &db, err, sizeof(err)), 0);
    sk_campaign c;
    int64_t remaining = -1;
    assert_int_equal(sk_db_campaign_get(db, campaign, &c, &remaining), 0);
    assert_int_equal(c.stock, 10);
    assert_int_equal(c.price_cents, 500);
    assert_int_equal(remaining, 10);
    /* a second create is refused by the database */
    assert_int_equal(skt_http(d.port, "POST", "/v1/campaigns", ADMIN, body, strlen(body), resp, sizeof(resp)), 409);
    bad_user_is_refused_at_both_doors(d.port, db, campaign);

    snprintf(path, sizeof(path), "/v1/campaigns/%s/purchase", campaign);
    assert_int_equal(skt_http(d.port, "POST", path, "X-User-Id: alice\r\n", "{\"quantity\":1}", 14, resp, sizeof(resp)), 201);
    assert_true(skt_json_str(resp, "order_id", oid1, sizeof(oid1)));
    assert_int_equal(skt_http(d.port, "POST", path, "X-User-Id: bob\r\n", "{\"quantity\":1}", 14, resp, sizeof(resp)), 201);
    assert_true(skt_json_str(resp, "order_id", oid2, sizeof(oid2)));

    /* before persistence: from Redis */
    snprintf(path, sizeof(path), "/v1/orders/%s", oid1);
    assert_int_equal(skt_http(d.port, "GET", path, "X-User-Id: alice\r\n", NULL, 0, resp, sizeof(resp)), 200);
    get_field(resp, "status", "accepted");
    get_field(resp, "state", "pending");
    /* paying an order the database does not know yet */
    snprintf(path, sizeof(path), "/v1/orders/%s/pay", oid1);
    assert_int_equal(skt_http(d.port, "POST", path, "X-User-Id: alice\r\n", "", 0, resp, sizeof(resp)), 404);

    /* the pipeline persists both */
    sk_order_in in[2] = {
        {.order_id = strtoull(oid1, NULL, 10), .campaign = campaign, .user = "alice", .qty = 1,
         .path = "redis", .created_ms = now},
        {.order_id = strtoull(oid2, NULL, 10), .campaign = campaign, .user = "bob", .qty = 1,
         .path = "redis", .created_ms = now}};
    int results[2];
    assert_int_equal(sk_db_apply_batch(db, in, 2, results), 0);
    assert_int_equal(results[0], SK_APPLY_PERSISTED);
    snprintf(path, sizeof(path), "/v1/orders/%s", oid1);
    assert_int_equal(skt_http(d.port, "GET", path, "X-User-Id: alice\r\n", NULL, 0, resp, sizeof(resp)), 200);
    get_field(resp, "status", "persisted");
    get_field(resp, "state", "confirmed");
    get_field(resp, "user", "alice");

    snprintf(path, sizeof(path), "/v1/orders/%s/pay", oid1);
    assert_int_equal(skt_http(d.port, "POST", path, NULL, "", 0, resp, sizeof(resp)), 401);
    /* another buyer: the answer of an order that does not exist */
    assert_int_equal(skt_http(d.port, "POST", path, "X-User-Id: bob\r\n", "", 0, resp, sizeof(resp)), 404);
    get_field(resp, "error", "not_found");
    assert_int_equal(skt_http(d.port, "POST", path, "X-User-Id: alice\r\n", "", 0, resp, sizeof(resp)), 200);
    get_field(resp, "status", "paid");
    get_field(resp, "order_id", oid1);
    snprintf(path, sizeof(path), "/v1/orders/%s", oid1);
    assert_int_equal(skt_http(d.port, "GET", path, "X-User-Id: alice\r\n", NULL, 0, resp, sizeof(resp)), 200);
    get_field(resp, "status", "paid");
    get_field(resp, "state", "confirmed");

    /* a cancelled order cannot be paid */
    assert_int_equal(sk_db_order_cancel(db, strtoull(oid2, NULL, 10), "timeout", NULL), 0);
    snprintf(path, sizeof(path), "/v1/orders/%s/pay", oid2);
    assert_int_equal(skt_http(d.port, "POST", path, "X-User-Id: bob\r\n", "", 0, resp, sizeof(resp)), 409);
    snprintf(path, sizeof(path), "/v1/orders/%s", oid2);
    assert_int_equal(skt_http(d.port, "GET", path, "X-User-Id: bob\r\n", NULL, 0, resp, sizeof(resp)), 200);
    get_field(resp, "status", "cancelled");
    get_field(resp, "state", "cancelled");
    assert_int_equal(skt_http(d.port, "POST", "/v1/orders/12345/pay", "X-User-Id: bob\r\n", "", 0, resp, sizeof(resp)), 404);

    /* Redis loses everything: the campaign is re-heated from the database */
    const char *flush[] = {"FLUSHALL"};
    assert_int_equal(test_redis_cmd(&redis, NULL, 0, 1, flush), 0);
    snprintf(path, sizeof(path), "/v1/campaigns/%s/preheat?force=1", campaign);
    assert_int_equal(skt_http(d.port, "POST", path, ADMIN, "", 0, resp, sizeof(resp)), 200);
    get_field(resp, "stock", "10");
    get_field(resp, "price_cents", "500");
    sk_db_close(db);
    assert_int_equal(skt_daemon_stop(&d), 0);
    test_server_stop(&redis);
}

static void test_sqlite_system_of_record(void **state)
{
    (void)state;
    char dir[] = "/tmp/seckilld-db-XXXXXX", url[300], file[280];
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/sk.db", dir);
    snprintf(url, sizeof(url), "sqlite://%s", file);
    run_with_database(url, "dbs");
    unlink(file);
    char side[300];
    snprintf(side, sizeof(side), "%s-wal", file);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", file);
    unlink(side);
    rmdir(dir);
}

static void test_postgresql_system_of_record(void **state)
{
    (void)state;
    test_server pg;
    assert_int_equal(test_postgres_start(&pg), 0);
    run_with_database(pg.url, "dbp");
    test_server_stop(&pg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlite_system_of_record),
        cmocka_unit_test(test_postgresql_system_of_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
