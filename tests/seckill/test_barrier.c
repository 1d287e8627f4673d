/* test_barrier.c: the barrier after a change of master, with real
 * processes: an "old master" sells and the persister records its orders;
 * a second redis-server, detached from it as a replica early on (so it
 * lacks later orders, a release and a handback), becomes the master. A
 * persister on the new master runs the barrier: afterwards the new
 * master's stock, buyers, Idempotency-Key answers and order statuses match
 * the database, meta.runid names it, an old-timeline entry is refused,
 * the new master sells only what nobody holds, and a second barrier
 * changes nothing; a runner whose lock is past its validity writes
 * nothing. SQLite, or PostgreSQL with SK_TEST_PG=1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "barrier.h"
#include "db.h"
#include "lifecycle.h"
#include "persist.h"
#include "redis_connect.h"
#include "persist_thread.h"
#include "reserve.h"
#include "servers.h"
#include "sk_err.h"
#include "util.h"
#include "promise_fixture.h"

static test_server new_srv;
static char new_url[128];
static dlock__conn *new_rc;

/* A persister on url (every campaign) until bg_stop. */
typedef pt_worker bg;

static void bg_start(bg *b, const char *url)
{
    pt_init(b, url, pf_db_url, NULL);
    assert_int_equal(pt_start(b), 0);
}

static void bg_stop(bg *b) { assert_int_equal(pt_stop(b), 0); }

static void str_on(dlock__conn *conn, const char *cmd, const char *key, const char *field, char *out, size_t len)
{
    const char *argv[] = {cmd, key, field};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(conn, field ? 3 : 2, argv, NULL, &r), 0);
    snprintf(out, len, "%s", dlock__reply_kind(r) == DLOCK__R_STRING ? dlock__reply_str(r, NULL) : "");
    dlock__reply_free(r);
}

static void run_id(dlock__conn *conn, char out[41]) { assert_int_equal(sk_barrier_run_id(conn, out), 0); }

/* Waits (<= 10 s) until campaign's meta names the master behind conn. */
static void wait_open(dlock__conn *conn, const char *camp)
{
    char want[41], key[96], got[64] = "";
    run_id(conn, want);
    snprintf(key, sizeof(key), "{c:%s}:meta", camp);
    for (int i = 0; i < 200 && strcmp(got, want) != 0; i++) {
        dlock__sleep_ms(50);
        str_on(conn, "HGET", key, "runid", got, sizeof(got));
    }
    assert_string_equal(got, want);
}

static int new_setup(void **state)
{
    if (pf_setup(state)) return -1;
    if (test_redis_start(&new_srv, NULL) != 0) return -1;
    snprintf(new_url, sizeof(new_url), "redis://127.0.0.1:%d", new_srv.port);
    char err[256];
    return dlock__conn_open_url(new_url, 5000, &new_rc, err, sizeof(err)) ? -1 : 0;
}

static int new_teardown(void **state)
{
    dlock__conn_close(new_rc);
    test_server_stop(&new_srv);
    return pf_teardown(state);
}

/* The new master was a replica of the old one until then: it holds the
 * campaigns as created and the first order only. */
static void detach_new_master(void)
{
    assert_int_equal(test_redis_replicate(&new_srv, &pf_redis_srv), 0);
    dlock__sleep_ms(300);
    const char *argv[] = {"REPLICAOF", "NO", "ONE"};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(new_rc, 3, argv, NULL, &r), 0);
    dlock__reply_free(r);
}

static uint64_t ids[8];

/* On the old master: orders u1 (before the detach), u2..u5 with
 * Idempotency-Keys, u5 cancelled, a database-path order confirmed, and a
 * second campaign sold out there and given its reserve back. */
static void old_timeline(void)
{
    pf_seed("bar", 10, 1, 2);   /* Redis 8 */
    pf_seed("barhb", 3, 5, 1);  /* Redis 2 */
    ids[1] = pf_redis_buy_on(NULL, "bar", "u1", 1, "k1");
    detach_new_master();
    for (int i = 2; i <= 5; i++) {
        char user[8], key[8];
        snprintf(user, sizeof(user), "u%d", i);
        snprintf(key, sizeof(key), "k%d", i);
        ids[i] = pf_redis_buy_on(NULL, "bar", user, 1, key);
    }
    ids[6] = pf_next_id();
    assert_int_equal(sk_db_purchase_direct(pf_db, ids[6], "bar", "d1", 1, dlock__wall_ms()), 0);
    pf_redis_buy("barhb", "h1", 2);
    bg old;
    bg_start(&old, pf_redis_url);
    for (int i = 0; i < 100; i++) { /* persisted, confirmed, handed back */
        sk_db_handback hb;
        sk_order_row row;
        assert_int_equal(sk_db_handback_get(pf_db, "barhb", &hb), 0);
        assert_int_equal(sk_db_order_get(pf_db, ids[6], &row), 0);
        if (hb.done && strcmp(row.status, "persisted") == 0) break;
        dlock__sleep_ms(50);
    }
    assert_int_equal(sk_order_cancel(pf_db, pf_rc, ids[5], "test"), 0);
    bg_stop(&old);
    assert_int_equal(pf_reconcile("bar"), 0);
    assert_int_equal(pf_reconcile("barhb"), 0);
}

static void check_new_master_matches_the_database(void)
{
    assert_int_equal(pf_redis_int_on(new_rc, "GET", "bar", "stock", NULL), 4); /* 8 - u1..u4 */
    assert_int_equal(pf_redis_int_on(NULL, "GET", "bar", "stock", NULL), 4);  /* as on the old master */
    for (int i = 1; i <= 4; i++) {
        char user[8], key[96], want[96], got[96];
        snprintf(user, sizeof(user), "u%d", i);
        assert_int_equal(pf_redis_int_on(new_rc, "HGET", "bar", "buyers", user), 1);
        snprintf(key, sizeof(key), "{c:bar}:idem:k%d", i);
        str_on(new_rc, "GET", key, NULL, got, sizeof(got)); /* the answer under the key's first user's name */
        snprintf(want, sizeof(want), "u%d\n%" PRIu64 "\n1\n", i, ids[i]);
        assert_memory_equal(got, want, strlen(want)); /* the answer a replay gets */
        /* confirmed: the database holds it (u1 drained on the new master, a
         * duplicate; u2..u4 mirrored), so a replay answers 201 */
        size_t gl = strlen(got);
        if (gl < 2 || strcmp(got + gl - 2, "\nc") != 0) fail_msg("answer of k%d not marked confirmed: %s", i, got);
        char oid[24];
        snprintf(oid, sizeof(oid), "%" PRIu64, ids[i]);
        str_on(new_rc, "HGET", "{c:bar}:order_status", oid, got, sizeof(got));
        snprintf(want, sizeof(want), "%s\n1", user);
        assert_string_equal(got, want);
    }
    assert_int_equal(pf_redis_int_on(new_rc, "HGET", "bar", "buyers", "u5"), 0); /* cancelled */
    assert_int_equal(pf_redis_int_on(new_rc, "HGET", "bar", "buyers", "d1"), 1); /* database path */
    assert_int_equal(pf_redis_int_on(new_rc, "GET", "barhb", "stock", NULL), 1); /* handback applied again */
    assert_int_equal(pf_redis_int_on(new_rc, "HGET", "bar", "meta", "epoch"), 2);
    int64_t ep = 0;
    assert_int_equal(sk_db_campaign_epoch(pf_db, "bar", &ep), 0);
    assert_int_equal(ep, 2);
    assert_true(pf_redis_int_on(new_rc, "HGET", "bar", "pipeline", "barrier_runs") >= 1);
}

/* An entry of the old timeline (epoch 1, or no epoch field) that reaches
 * the stream after the seal is refused; one of the new epoch is kept. */
static void check_old_timeline_entry_is_refused(void)
{
    const char *fields[][2] = {{"1", "epoch"}, {"", ""}};
    uint64_t stale[2];
    for (int i = 0; i < 2; i++) {
        char oid[24];
        stale[i] = pf_next_id();
        snprintf(oid, sizeof(oid), "%" PRIu64, stale[i]);
        const char *argv[] = {"XADD", "{c:bar}:orders", "*", "order_id", oid, "campaign", "bar", "user", "late",
                              "qty", "1", "idem", "", "ts_ms", "1", "path", "redis", fields[i][1], fields[i][0]};
        dlock__reply *r = NULL;
        assert_int_equal(dlock__conn_cmd(new_rc, i == 0 ? 19 : 17, argv, NULL, &r), 0);
        dlock__reply_free(r);
    }
    bg b;
    bg_start(&b, new_url);
    sk_order_row row;
    for (int i = 0; i < 100 && sk_db_order_get(pf_db, stale[1], &row) != 0; i++) dlock__sleep_ms(50);
    bg_stop(&b);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sk_db_order_get(pf_db, stale[i], &row), 0);
        assert_string_equal(row.status, "rejected");
        assert_string_equal(row.reason, "stale timeline");
    }
}

/* The new master sells only units nobody holds: the database accepts
 * every one of them (no broken promise). */
static void check_new_master_cannot_resell(void)
{
    int sold = 0;
    for (int i = 0; i < 12; i++) {
        char user[16];
        snprintf(user, sizeof(user), "n%d", i);
        if (pf_redis_int_on(new_rc, "GET", "bar", "stock", NULL) <= 0) break;
        pf_redis_buy_on(new_rc, "bar", user, 1, NULL);
        sold++;
    }
    bg b;
    bg_start(&b, new_url);
    int64_t pending = 1, lag = 1;
    for (int i = 0; i < 100 && (pending || lag); i++) {
        dlock__sleep_ms(50);
        assert_int_equal(sk_persist_backlog(new_rc, "bar", &pending, &lag), 0);
    }
    bg_stop(&b);
    sk_db_campaign_stats s;
    assert_int_equal(sk_db_campaign_stats_get(pf_db, "bar", &s), 0);
    fprintf(stderr, "new master sold %d more; database: remaining %" PRId64 ", broken promises %" PRId64 "\n", sold,
            s.remaining, s.broken_promises);
    assert_int_equal(s.broken_promises, 0);
    assert_int_equal(sold, 4);
    /* Redis agrees with the database (the persister may have handed the
     * last reserve unit back meanwhile: Redis sold out) */
    assert_int_equal(pf_redis_int_on(new_rc, "GET", "bar", "stock", NULL), s.remaining - s.reserve_remaining);
}

static void test_barrier_gives_the_new_master_what_the_database_holds(void **state)
{
    (void)state;
    old_timeline();
    char old_id[41], new_id[41], got[64];
    run_id(pf_rc, old_id);
    run_id(new_rc, new_id);
    str_on(new_rc, "HGET", "{c:bar}:meta", "runid", got, sizeof(got));
    assert_string_equal(got, old_id); /* the meta the new master inherited */
    assert_int_equal(pf_redis_int_on(new_rc, "GET", "bar", "stock", NULL), 7); /* it lacks u2..u5 */
    bg b;
    bg_start(&b, new_url);
    wait_open(new_rc, "bar");
    wait_open(new_rc, "barhb");
    bg_stop(&b);
    check_new_master_matches_the_database();
    check_old_timeline_entry_is_refused();

    /* a second barrier (forced by hand) changes nothing */
    int64_t stock = pf_redis_int_on(new_rc, "GET", "bar", "stock", NULL);
    assert_int_equal(sk_barrier_force(new_rc, "bar", "test"), 0);
    sk_barrier_run run;
    sk_barrier_run_init(&run, "test");
    int st = SK_BARRIER_WAITING;
    for (int i = 0; i < 100 && st == SK_BARRIER_WAITING; i++) st = sk_barrier_step(pf_db, new_rc, "bar", new_id, &run);
    assert_int_equal(st, SK_BARRIER_OPEN);
    assert_true(run.opened);
    assert_int_equal(run.mirrored + run.given_back + run.handbacks, 0);
    assert_int_equal(pf_redis_int_on(new_rc, "GET", "bar", "stock", NULL), stock);
    assert_int_equal(pf_redis_int_on(new_rc, "HGET", "bar", "buyers", "u2"), 1);
    assert_int_equal(sk_barrier_step(pf_db, new_rc, "bar", new_id, &run), SK_BARRIER_OPEN); /* not due */
    assert_false(run.opened);
    check_new_master_cannot_resell();
}

/* `seckill barrier --campaign ID` stops sales, waits for a persister to
 * drain, and opens the campaign again under a new epoch. */
static void test_admin_barrier_runs_by_hand(void **state)
{
    (void)state;
    char tool[512];
    const char *b = getenv("DLOCK_BUILD_DIR");
    snprintf(tool, sizeof(tool), "%s/tools/seckill/seckill", b ? b : ".");
    int64_t before = pf_redis_int_on(new_rc, "HGET", "bar", "meta", "epoch");
    bg p;
    bg_start(&p, new_url);
    pid_t pid = fork();
    if (pid == 0) {
        execl(tool, tool, "--redis-url", new_url, "--database-url", pf_db_url, "barrier", "--campaign", "bar",
              "--wait", "10s", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    bg_stop(&p);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(pf_redis_int_on(new_rc, "HGET", "bar", "meta", "epoch"), before + 1);
    wait_open(new_rc, "bar");
    pid = fork();
    if (pid == 0) {
        execl(tool, tool, "--redis-url", new_url, "--database-url", pf_db_url, "barrier", (char *)NULL); /* no --campaign */
        _exit(127);
    }
    waitpid(pid, &st, 0);
    assert_int_equal(WEXITSTATUS(st), 2);
    /* the counters reach `seckill metrics` (Prometheus text) */
    char out[400];
    snprintf(out, sizeof(out), "%s/metrics.txt", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    pid = fork();
    if (pid == 0) {
        if (!freopen(out, "w", stdout)) _exit(126);
        execl(tool, tool, "--redis-url", new_url, "--database-url", pf_db_url, "metrics", "--campaign", "bar",
              (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    assert_int_equal(WEXITSTATUS(st), 0);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char text[8192] = "";
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(out);
    assert_non_null(strstr(text, "seckill_barrier_runs_total{campaign=\"bar\"} 3\n")); /* failover, forced, by hand */
    assert_non_null(strstr(text, "seckill_barrier_running_seconds{campaign=\"bar\"} 0.000\n"));
    assert_non_null(strstr(text, "seckill_broken_promises{campaign=\"bar\"} 0\n"));
    assert_non_null(strstr(text, "seckill_stale_timeline_refusals{campaign=\"bar\"} 2\n"));
    assert_non_null(strstr(text, "seckill_tentative_finalised_total{campaign=\"bar\",result=\"confirmed\"}"));
}

/* The runner writes under its lock only while it believes it (the send
 * time of its last renewal + lock_ms - drift, barrier.c): a lock of 2 ms,
 * all of it drift allowance, is never believed by the time a step could
 * seal - as when every reply comes after the lock's validity (a frozen
 * Redis). Nothing is sealed, mirrored or opened; with a real lock the
 * same barrier finishes. */
static void test_barrier_writes_nothing_once_its_lock_is_past_validity(void **state)
{
    (void)state;
    char new_id[41];
    run_id(new_rc, new_id);
    int64_t meta_epoch = pf_redis_int_on(new_rc, "HGET", "bar", "meta", "epoch"), db_epoch = 0, now = 0;
    assert_int_equal(sk_db_campaign_epoch(pf_db, "bar", &db_epoch), 0);
    assert_int_equal(sk_barrier_force(new_rc, "bar", "test"), 0);
    sk_barrier_run run;
    sk_barrier_run_init(&run, "test");
    run.lock_ms = 2;
    for (int i = 0; i < 20; i++)
        assert_int_equal(sk_barrier_step(pf_db, new_rc, "bar", new_id, &run), SK_BARRIER_WAITING);
    assert_int_equal(sk_db_campaign_epoch(pf_db, "bar", &now), 0);
    assert_int_equal(now, db_epoch); /* not sealed */
    assert_int_equal(pf_redis_int_on(new_rc, "HGET", "bar", "meta", "epoch"), meta_epoch); /* not opened */
    run.lock_ms = 10000;
    int st = SK_BARRIER_WAITING;
    for (int i = 0; i < 100 && st == SK_BARRIER_WAITING; i++) st = sk_barrier_step(pf_db, new_rc, "bar", new_id, &run);
    assert_int_equal(st, SK_BARRIER_OPEN);
    assert_int_equal(pf_redis_int_on(new_rc, "HGET", "bar", "meta", "epoch"), meta_epoch + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_barrier_gives_the_new_master_what_the_database_holds),
        cmocka_unit_test(test_admin_barrier_runs_by_hand),
        cmocka_unit_test(test_barrier_writes_nothing_once_its_lock_is_past_validity),
    };
    return cmocka_run_group_tests(tests, new_setup, new_teardown);
}
