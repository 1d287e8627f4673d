/* test_rconn.c: the reconnecting connection (dlock__rconn, redis_async.h)
 * on a real redis-server: it comes back after the server restarts; a reply that does
 * not come within the deadline drops the connection and fails its command
 * as unknown; a script whose cache was flushed still runs once (EVAL after
 * NOSCRIPT); WAIT goes out typed; freeing it inside its own callbacks is
 * safe (run under ASan); and the async door's loop glue writes a command
 * queued inside a callback without waiting for another event. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "common_err.h"
#include "redis_async.h"
#include "resp_write.h"
#include "script.h"
#include "servers.h"
#include "util.h"

static const dlock__script incr = {"t_incr", "return redis.call('INCR', KEYS[1])", 34,
                                   "61636018f4e6b5817b89791bbed242f93fa089e3"};

typedef struct watch {
    int ups, losts, drops, fails;
    int replies;
    int last_err;
    long long last_int;
    dlock__rconn *free_me; /* freed inside the next reply callback */
} watch;

static test_server srv;
static struct event_base *base;
static dlock__url url;

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&srv, NULL) != 0) return -1;
    char err[256];
    if (dlock__url_parse(srv.url, &url, err, sizeof(err)) != 0) return -1;
    base = event_base_new();
    return base ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    test_server_stop(&srv);
    dlock__url_free(&url);
    event_base_free(base);
    return 0;
}

static void on_state(dlock__rconn *rc, dlock__rconn_event ev, dlock__aconn *ac, const char *why, void *owner)
{
    (void)rc;
    (void)ac;
    (void)why;
    watch *w = owner;
    if (ev == DLOCK__RCONN_UP) w->ups++;
    if (ev == DLOCK__RCONN_LOST) w->losts++;
    if (ev == DLOCK__RCONN_DROPPED) w->drops++;
    if (ev == DLOCK__RCONN_FAILED) w->fails++;
}

static void on_reply(const dlock__reply *r, int err, void *priv)
{
    watch *w = priv;
    w->replies++;
    w->last_err = err;
    w->last_int = r && dlock__reply_kind(r) == DLOCK__R_INTEGER ? dlock__reply_int(r) : -1;
    if (w->free_me) {
        dlock__rconn *rc = w->free_me;
        w->free_me = NULL;
        dlock__rconn_free(rc);
    }
}

static dlock__rconn *open_rconn(watch *w, int64_t timeout_ms)
{
    const dlock__rconn_opts o = {.base = base, .url = &url, .timeout_ms = timeout_ms, .backoff_max_ms = 200,
                                 .owner = w, .on_state = on_state};
    dlock__rconn *rc = NULL;
    assert_int_equal(dlock__rconn_new(&o, &rc), 0);
    dlock__rconn_connect(rc);
    return rc;
}

/* Runs the loop (checking the deadlines as an owner's tick does) until
 * *count reaches want or 10 s pass. */
static void run_until(dlock__rconn *rc, const int *count, int want)
{
    int64_t end = dlock__now_ms() + 10000;
    while (*count < want && dlock__now_ms() < end) {
        struct timeval tv = {0, 20000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
        if (rc) dlock__rconn_check(rc, dlock__now_ms());
    }
    assert_true(*count >= want);
}

static void test_rconn_reconnects_after_server_restart(void **state)
{
    (void)state;
    watch w = {0};
    dlock__rconn *rc = open_rconn(&w, 2000);
    run_until(rc, &w.ups, 1);
    test_server_kill(&srv);
    run_until(rc, &w.losts, 1);
    assert_false(dlock__rconn_is_up(rc));
    const char *ping[] = {"PING"};
    assert_int_equal(dlock__rconn_cmd(rc, -1, 1, ping, NULL, on_reply, &w), DLOCK__ECONN);
    assert_int_equal(test_redis_restart(&srv, NULL), 0);
    run_until(rc, &w.ups, 2);
    assert_int_equal(dlock__rconn_cmd(rc, -1, 1, ping, NULL, on_reply, &w), 0);
    run_until(rc, &w.replies, 1);
    assert_int_equal(w.last_err, 0);
    dlock__rconn_free(rc);
}

static void test_rconn_late_reply_drops_connection_as_unknown(void **state)
{
    (void)state;
    watch w = {0};
    dlock__rconn *rc = open_rconn(&w, 300);
    run_until(rc, &w.ups, 1);
    test_server_pause(&srv, true);
    const char *ping[] = {"PING"};
    assert_int_equal(dlock__rconn_cmd(rc, -1, 1, ping, NULL, on_reply, &w), 0);
    run_until(rc, &w.drops, 1);
    test_server_pause(&srv, false);
    assert_int_equal(w.replies, 1); /* failed by the drop, before it returned */
    assert_int_equal(w.last_err, DLOCK__EUNKNOWN);
    run_until(rc, &w.ups, 2); /* and back after the backoff */
    dlock__rconn_free(rc);
}

static void test_rconn_script_runs_once_after_flush(void **state)
{
    (void)state;
    watch w = {0};
    dlock__rconn *rc = open_rconn(&w, 2000);
    run_until(rc, &w.ups, 1);
    const char *flush[] = {"SCRIPT", "FLUSH"};
    assert_int_equal(dlock__rconn_cmd(rc, -1, 2, flush, NULL, on_reply, &w), 0);
    char key[64], args[128];
    snprintf(key, sizeof(key), "%srconn:n", test_prefix());
    char *p = dlock__resp_bulk(args, "1", 1);
    p = dlock__resp_bulk(p, key, strlen(key));
    assert_int_equal(dlock__rconn_script(rc, &incr, args, (size_t)(p - args), 2, -1, on_reply, &w), 0);
    run_until(rc, &w.replies, 2);
    assert_int_equal(w.last_err, 0);
    assert_int_equal(w.last_int, 1); /* EVAL ran it once, EVALSHA not at all */
    assert_int_equal(dlock__rconn_script(rc, &incr, args, (size_t)(p - args), 2, -1, on_reply, &w), 0);
    run_until(rc, &w.replies, 3);
    assert_int_equal(w.last_int, 2);
    dlock__rconn_free(rc);
}

static void test_rconn_wait_is_typed_and_answers_an_integer(void **state)
{
    (void)state;
    watch w = {0};
    dlock__rconn *rc = open_rconn(&w, 2000);
    run_until(rc, &w.ups, 1);
    assert_int_equal(dlock__rconn_wait(rc, -1, 0, 0, on_reply, &w), DLOCK__EINVAL); /* would block forever */
    assert_int_equal(dlock__rconn_wait(rc, -1, 0, 50, on_reply, &w), 0);
    run_until(rc, &w.replies, 1);
    assert_int_equal(w.last_err, 0);
    assert_int_equal(w.last_int, 0); /* no replica */
    dlock__rconn_free(rc);
}

static void test_rconn_free_inside_its_callback_is_safe(void **state)
{
    (void)state;
    watch w = {0};
    dlock__rconn *rc = open_rconn(&w, 2000);
    run_until(rc, &w.ups, 1);
    const char *ping[] = {"PING"};
    w.free_me = rc;
    assert_int_equal(dlock__rconn_cmd(rc, -1, 1, ping, NULL, on_reply, &w), 0);
    assert_int_equal(dlock__rconn_cmd(rc, -1, 1, ping, NULL, on_reply, &w), 0);
    run_until(NULL, &w.replies, 2); /* the second fails when the first's callback frees it */
    assert_int_equal(w.last_err, DLOCK__EUNKNOWN);
    run_until(NULL, &w.replies, 2); /* the deferred free runs on a later turn */
}

/* A command queued inside a reply callback goes out on the same loop turn
 * (the glue's flush), and a pipeline of them is answered in order. */
static void on_chain(const dlock__reply *r, int err, void *priv)
{
    watch *w = priv;
    w->replies++;
    w->last_int = r && dlock__reply_kind(r) == DLOCK__R_INTEGER ? dlock__reply_int(r) : -1;
    w->last_err = err;
}

static void test_rconn_pipeline_keeps_order(void **state)
{
    (void)state;
    watch w = {0};
    dlock__rconn *rc = open_rconn(&w, 2000);
    run_until(rc, &w.ups, 1);
    char key[64];
    snprintf(key, sizeof(key), "%srconn:order", test_prefix());
    const char *argv[] = {"INCR", key};
    for (int i = 0; i < 200; i++) assert_int_equal(dlock__rconn_cmd(rc, -1, 2, argv, NULL, on_chain, &w), 0);
    run_until(rc, &w.replies, 200);
    assert_int_equal(w.last_err, 0);
    assert_int_equal(w.last_int, 200);
    dlock__rconn_free(rc);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rconn_reconnects_after_server_restart),
        cmocka_unit_test(test_rconn_late_reply_drops_connection_as_unknown),
        cmocka_unit_test(test_rconn_script_runs_once_after_flush),
        cmocka_unit_test(test_rconn_wait_is_typed_and_answers_an_integer),
        cmocka_unit_test(test_rconn_free_inside_its_callback_is_safe),
        cmocka_unit_test(test_rconn_pipeline_keeps_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
