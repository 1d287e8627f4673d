/* test_etcd_errors.c: bad input to the etcd backend gets a clear error
 * code and leaves nothing behind: malformed etcd URLs (EURL), an
 * unreachable cluster (ECONN), wrong or missing credentials on a cluster
 * with authentication (EAUTH; the right ones work), and a "gateway" that
 * answers garbage, served by a tiny socket server in this process
 * (ESERVER or ECONN, never a crash, nothing held); etcds:// with and
 * without its certificates. Run under ASan it also
 * shows that no failure path leaks. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd_support.h"
#include "servers.h"
#include "util.h"

static void test_malformed_urls_are_refused_at_create(void **state)
{
    (void)state;
    static const char *const bad[] = {"etcd://", "etcd://h:0", "etcd://h:1,,h:2", "etcd://h:1?cacert=/x",
                                      "etcds://h:1?cert=/c", "etcd://:pw@127.0.0.1:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dlock_client *c = NULL;
        es_log_clear();
        int rc = es_client_rc(bad[i], 0, &c);
        if (rc != DLOCK_EURL) fail_msg("%s: got %s", bad[i], dlock_strerror(rc));
        assert_null(c);
        assert_true(es_log_contains("url: "));
    }
}

static void test_unreachable_cluster_is_econn(void **state)
{
    (void)state;
    char url[128];
    int p1 = test_free_port(), p2 = test_free_port();
    snprintf(url, sizeof(url), "etcd://127.0.0.1:%d,127.0.0.1:%d", p1, p2);
    dlock_client *c = NULL;
    int64_t t0 = dlock__now_ms();
    assert_int_equal(es_client_rc(url, 0, &c), DLOCK_ECONN);
    assert_null(c);
    assert_true(dlock__now_ms() - t0 < 5000);
}

static void test_wrong_credentials_are_eauth_and_right_ones_work(void **state)
{
    (void)state;
    test_etcd e;
    assert_int_equal(test_etcd_start(&e, 1), 0);
    assert_int_equal(test_etcd_enable_auth(&e, "s3cret"), 0);
    char good[1100], wrong[1100];
    snprintf(good, sizeof(good), "etcd://root:s3cret@%.1000s", e.url + 7);
    snprintf(wrong, sizeof(wrong), "etcd://root:nope@%.1000s", e.url + 7);
    dlock_client *c = NULL;
    assert_int_equal(es_client_rc(wrong, 0, &c), DLOCK_EAUTH);
    assert_null(c);
    assert_int_equal(es_client_rc(e.url, 0, &c), DLOCK_EAUTH); /* no user at all */
    assert_null(c);
    assert_int_equal(es_client_rc(good, 0, &c), 0);
    dlock_lock *l = es_lock(c, "auth", NULL, NULL);
    uint64_t fence = 0;
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, &fence), 0);
    assert_true(fence > 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    test_etcd_stop(&e);
}

/* etcds://: the lock works over HTTPS with a client certificate; without
 * the certificate, or trusting another CA, nothing connects (ECONN, with
 * the TLS reason logged). */
static void test_etcds_works_with_its_certificates_only(void **state)
{
    (void)state;
    test_etcd e;
    assert_int_equal(test_etcd_start_tls(&e), 0);
    dlock_client *c = NULL;
    assert_int_equal(es_client_rc(e.url, 0, &c), 0);
    dlock_lock *l = es_lock(c, "tls", NULL, NULL);
    uint64_t fence = 0;
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, &fence), 0);
    assert_true(fence > 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    char url[1100];
    snprintf(url, sizeof(url), "etcds://127.0.0.1:%d?cacert=%.300s/ca.pem", e.client_port[0], e.certs);
    assert_int_equal(es_client_rc(url, 0, &c), DLOCK_ECONN); /* no client certificate */
    snprintf(url, sizeof(url), "etcds://127.0.0.1:%d?cert=%.300s/member.pem&key=%.300s/member.key",
             e.client_port[0], e.certs, e.certs);
    es_log_clear();
    assert_int_equal(es_client_rc(url, 0, &c), DLOCK_ECONN); /* the system CAs do not know ours */
    assert_true(es_log_contains("etcd: "));
    snprintf(url, sizeof(url), "etcd://127.0.0.1:%d", e.client_port[0]);
    assert_int_equal(es_client_rc(url, 0, &c), DLOCK_ECONN); /* plain HTTP to an HTTPS member */
    assert_null(c);
    test_etcd_stop(&e);
}

/* ---- a gateway answering garbage ------------------------------------------ */

enum { G_NOT_HTTP, G_NOT_JSON, G_NO_HEADER, G_WRONG_SHAPE, G_CLOSE, G_TRUNCATED, G_MODES };

typedef struct garbage_server {
    int fd, port, mode;
    volatile int stop;
    pthread_t thread;
} garbage_server;

static void answer(int c, int mode)
{
    static const char *const replies[G_MODES] = {
        "garbage garbage garbage\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello world",
        "HTTP/1.1 200 OK\r\nContent-Length: 20\r\nConnection: close\r\n\r\n{\"ID\":[1,2],\"kvs\":5}",
        "HTTP/1.1 200 OK\r\nContent-Length: 30\r\nConnection: close\r\n\r\n{\"header\":{},\"ID\":[1],\"kvs\":5}",
        "",
        "HTTP/1.1 200 OK\r\nContent-Length: 500\r\nConnection: close\r\n\r\n{\"header\":{",
    };
    char req[8192];
    if (read(c, req, sizeof(req)) <= 0) return; /* one read holds our small requests */
    const char *r = replies[mode];
    if (*r && write(c, r, strlen(r)) < 0) return;
}

static void *garbage_main(void *arg)
{
    garbage_server *g = arg;
    while (!g->stop) {
        struct pollfd p = {.fd = g->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept(g->fd, NULL, NULL);
        if (c < 0) continue;
        answer(c, g->mode);
        close(c);
    }
    return NULL;
}

static void garbage_start(garbage_server *g)
{
    memset(g, 0, sizeof(*g));
    g->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    assert_int_equal(bind(g->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(g->fd, 16), 0);
    assert_int_equal(getsockname(g->fd, (struct sockaddr *)&a, &len), 0);
    g->port = ntohs(a.sin_port);
    pthread_create(&g->thread, NULL, garbage_main, g);
}

static void garbage_stop(garbage_server *g)
{
    g->stop = 1;
    pthread_join(g->thread, NULL);
    close(g->fd);
}

static void test_gateway_answering_garbage_is_a_clear_error(void **state)
{
    (void)state;
    static const int want[G_MODES] = {DLOCK_ESERVER, DLOCK_ESERVER, DLOCK_ESERVER, 0, DLOCK_ECONN, DLOCK_ECONN};
    garbage_server g;
    garbage_start(&g);
    char url[64];
    snprintf(url, sizeof(url), "etcd://127.0.0.1:%d", g.port);
    for (int mode = 0; mode < G_MODES; mode++) {
        __atomic_store_n(&g.mode, mode, __ATOMIC_SEQ_CST);
        dlock_client *c = NULL;
        int rc = es_client_rc(url, 0, &c);
        if (rc != want[mode]) fail_msg("mode %d: create got %s", mode, dlock_strerror(rc));
        if (!c) continue;
        /* JSON of the wrong shape passes the first read, then every lock
         * call refuses it: nothing is held */
        dlock_lock *l = es_lock(c, "garbage", NULL, NULL);
        assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), DLOCK_ESERVER);
        assert_int_equal(dlock_lock_try_lock(l, 200, 0, NULL), DLOCK_ESERVER);
        assert_false(dlock_lock_is_held(l));
        dlock_lock_status st;
        assert_int_equal(dlock_lock_status_get(c, "garbage", &st), DLOCK_ESERVER);
        assert_int_equal(dlock_fence_guard(c, "garbage", 5, NULL), DLOCK_ESERVER);
        assert_int_equal(dlock_lock_unlock(l), DLOCK_ENOTHELD);
        dlock_lock_free(l);
        dlock_client_destroy(c);
    }
    garbage_stop(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed_urls_are_refused_at_create),
        cmocka_unit_test(test_unreachable_cluster_is_econn),
        cmocka_unit_test(test_wrong_credentials_are_eauth_and_right_ones_work),
        cmocka_unit_test(test_etcds_works_with_its_certificates_only),
        cmocka_unit_test(test_gateway_answering_garbage_is_a_clear_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
