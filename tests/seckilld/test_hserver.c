/* test_hserver.c: the HTTP layer's contracts (hserver.h) over a socket
 * pair, without a network or an engine: answers leave in request order
 * whatever order they are produced in, an orphan's answer only frees it,
 * draining closes after the last answer, HEAD and HTTP/1.0 framing,
 * answer headers that would split a response are refused, and a chunked
 * body's trailers never become headers (nor show a recycled request's
 * bytes), whatever pieces the bytes come in. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "hserver.h"
#include "sk_err.h"

static struct event_base *base;
static sk_hs *srv;
static sk_hs_req *held[8];
static size_t nheld;

/* Holds every request; the test answers them when it wants. */
static void on_request(sk_hs_req *r, void *ud)
{
    (void)ud;
    if (nheld < 8) held[nheld++] = r;
    else sk_hs_reply(r, 500, NULL, 0);
}

static int setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    base = event_base_new();
    sk_hs_opts o;
    sk_hs_opts_init(&o);
    o.on_request = on_request;
    nheld = 0;
    return base && sk_hs_new(base, &o, &srv) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    sk_hs_free(srv);
    for (size_t i = 0; i < nheld; i++) sk_hs_reply(held[i], 200, NULL, 0); /* orphans now */
    event_base_free(base);
    return 0;
}

/* A client socket served by the layer. */
static int client(void)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(sk_hs_adopt(srv, sv[0], 7, "peer-1"), 0);
    return sv[1];
}

static void turns(void)
{
    for (int i = 0; i < 5; i++) event_base_loop(base, EVLOOP_NONBLOCK);
}

static void send_all(int fd, const char *s)
{
    assert_int_equal(send(fd, s, strlen(s), 0), (ssize_t)strlen(s));
    turns();
}

/* What the client has received so far (non-blocking), NUL-terminated. */
static size_t received(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + n, cap - 1 - n, MSG_DONTWAIT);
        if (r <= 0) break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return n;
}

static void test_answers_leave_in_request_order_whatever_order_they_are_made_in(void **state)
{
    (void)state;
    int fd = client();
    send_all(fd, "GET /a?x=1 HTTP/1.1\r\nHost: h\r\nX-Id: one\r\n\r\n"
                 "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc");
    assert_int_equal(nheld, 2);
    assert_string_equal(sk_hs_req_path(held[0]), "/a");
    assert_string_equal(sk_hs_req_query(held[0]), "x=1");
    assert_string_equal(sk_hs_req_header(held[0], "x-id"), "one");
    assert_string_equal(sk_hs_req_peer(held[0]), "peer-1");
    assert_int_equal(sk_hs_req_tag(held[0]), 7);
    size_t n = 0;
    assert_string_equal(sk_hs_req_body(held[1], &n), "abc");
    assert_null(sk_hs_req_query(held[1]));
    sk_hs_reply(held[1], 201, "second", 6); /* the later one first */
    turns();
    char buf[4096];
    assert_int_equal(received(fd, buf, sizeof(buf)), 0); /* held back behind the first */
    assert_int_equal(sk_hs_unflushed(srv), 1);
    sk_hs_reply(held[0], 200, "first", 5);
    turns();
    received(fd, buf, sizeof(buf));
    const char *a = strstr(buf, "first"), *b = strstr(buf, "second");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
    assert_int_equal(sk_hs_unflushed(srv), 0);
    nheld = 0;
    close(fd);
}

static void test_a_client_that_left_is_answered_into_the_void_and_an_orphan_only_freed(void **state)
{
    (void)state;
    int fd = client();
    send_all(fd, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_int_equal(nheld, 1);
    close(fd);
    turns();
    assert_int_equal(sk_hs_connections(srv), 1); /* EOF may be a half-close: the answer is owed */
    sk_hs_reply(held[0], 200, "late", 4);
    nheld = 0;
    turns();
    assert_int_equal(sk_hs_connections(srv), 0);
    assert_int_equal(sk_hs_unflushed(srv), 0);
    /* the server goes while a request waits: its answer only frees it */
    fd = client();
    send_all(fd, "GET /slower HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_int_equal(nheld, 1);
    sk_hs_free(srv);
    srv = NULL;
    sk_hs_reply(held[0], 200, "later", 5);
    nheld = 0;
    char buf[64];
    assert_int_equal(recv(fd, buf, sizeof(buf), 0), 0); /* closed, nothing written */
    close(fd);
}

static void test_draining_closes_after_the_last_answer(void **state)
{
    (void)state;
    int fd = client();
    int idle = client();
    send_all(fd, "GET /x HTTP/1.1\r\nHost: h\r\n\r\n");
    sk_hs_stop_accepting(srv);
    turns();
    assert_int_equal(sk_hs_connections(srv), 1); /* the idle one is closed at once */
    sk_hs_reply(held[0], 200, "bye", 3);
    nheld = 0;
    turns();
    char buf[4096];
    received(fd, buf, sizeof(buf));
    assert_non_null(strstr(buf, "Connection: close\r\n"));
    assert_int_equal(recv(fd, buf, sizeof(buf), 0), 0); /* then EOF */
    assert_int_equal(recv(idle, buf, sizeof(buf), 0), 0);
    close(fd);
    close(idle);
}

static void test_head_gets_the_length_without_the_body(void **state)
{
    (void)state;
    int fd = client();
    send_all(fd, "HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n");
    sk_hs_reply(held[0], 200, "12345", 5);
    nheld = 0;
    turns();
    char buf[4096];
    received(fd, buf, sizeof(buf));
    assert_non_null(strstr(buf, "Content-Length: 5\r\n"));
    assert_null(strstr(buf, "12345"));
    close(fd);
}

static void test_http_1_0_keeps_alive_only_when_asked(void **state)
{
    (void)state;
    int fd = client();
    char buf[4096];
    send_all(fd, "GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    sk_hs_reply(held[0], 200, "k", 1);
    nheld = 0;
    turns();
    received(fd, buf, sizeof(buf));
    assert_non_null(strstr(buf, "Connection: keep-alive\r\n"));
    send_all(fd, "GET /c HTTP/1.0\r\n\r\n");
    sk_hs_reply(held[0], 200, "c", 1);
    nheld = 0;
    turns();
    received(fd, buf, sizeof(buf));
    assert_non_null(strstr(buf, "Connection: close\r\n"));
    assert_int_equal(recv(fd, buf, sizeof(buf), 0), 0);
    close(fd);
}

static void test_answer_headers_that_would_split_the_response_are_refused(void **state)
{
    (void)state;
    int fd = client();
    send_all(fd, "GET /s HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_int_equal(sk_hs_reply_header(held[0], "X-A", "v\r\nSet-Cookie: x"), SK_EINVAL);
    assert_int_equal(sk_hs_reply_header(held[0], "X:B", "v"), SK_EINVAL);
    assert_int_equal(sk_hs_reply_header(held[0], "", "v"), SK_EINVAL);
    assert_int_equal(sk_hs_reply_header(held[0], "Retry-After", "3"), 0);
    sk_hs_reply_error(held[0], 429, "rate_limited", "say \"when\"");
    nheld = 0;
    turns();
    char buf[4096];
    received(fd, buf, sizeof(buf));
    assert_null(strstr(buf, "Set-Cookie"));
    assert_non_null(strstr(buf, "Retry-After: 3\r\n"));
    assert_non_null(strstr(buf, "Content-Type: application/json\r\n"));
    assert_non_null(strstr(buf, "{\"error\":\"rate_limited\",\"message\":\"say \\\"when\\\"\"}"));
    close(fd);
}

/* A chunked request whose trailers name an identity and the admin header,
 * after a request whose head held a token: the recycled request shows
 * neither (the old layer read trailers as headers, their last value
 * unterminated, running into the earlier request's bytes). */
static const char first_req[] = "GET /t HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer tok-secret\r\n\r\n";
static const char chunked_req[] = "POST /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  "2;ext=1\r\nab\r\n1\r\nc\r\n0\r\nX-User-Id: victim\r\nAuthorization: B\r\n\r\n"
                                  "GET /next HTTP/1.1\r\nHost: h\r\n\r\n";

static void check_chunked(void)
{
    size_t n = 0;
    assert_int_equal(nheld, 2);
    assert_string_equal(sk_hs_req_path(held[0]), "/u");
    assert_string_equal(sk_hs_req_body(held[0], &n), "abc");
    assert_int_equal(n, 3);
    assert_null(sk_hs_req_header(held[0], "X-User-Id"));
    assert_null(sk_hs_req_header(held[0], "Authorization"));
    assert_string_equal(sk_hs_req_header(held[0], "Transfer-Encoding"), "chunked");
    assert_string_equal(sk_hs_req_path(held[1]), "/next");
    assert_null(sk_hs_req_header(held[1], "Authorization"));
}

static void test_trailers_are_dropped_whole_or_byte_by_byte(void **state)
{
    (void)state;
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        int fd = client();
        send_all(fd, first_req);
        assert_int_equal(nheld, 1);
        sk_hs_reply(held[0], 200, NULL, 0); /* its request is recycled */
        nheld = 0;
        turns();
        if (!bytewise) send_all(fd, chunked_req);
        for (size_t i = 0; bytewise && chunked_req[i]; i++) {
            char one[2] = {chunked_req[i], '\0'};
            send_all(fd, one);
        }
        check_chunked();
        sk_hs_reply(held[0], 200, NULL, 0);
        sk_hs_reply(held[1], 200, NULL, 0);
        nheld = 0;
        turns();
        close(fd);
    }
}

#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_answers_leave_in_request_order_whatever_order_they_are_made_in),
        CASE(test_a_client_that_left_is_answered_into_the_void_and_an_orphan_only_freed),
        CASE(test_draining_closes_after_the_last_answer),
        CASE(test_head_gets_the_length_without_the_body),
        CASE(test_http_1_0_keeps_alive_only_when_asked),
        CASE(test_answer_headers_that_would_split_the_response_are_refused),
        CASE(test_trailers_are_dropped_whole_or_byte_by_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
