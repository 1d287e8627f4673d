/* fuzz_hs_request.c: libFuzzer harness of the HTTP layer's request path
 * (hs_conn.c, hs_frame.c: heads, chunked bodies and their trailers, and
 * the answer queue; seeds in fuzz_hs_corpus/): the input goes through a real socket pair,
 * cut into pieces by its first byte, half-closed, and answered
 * synchronously or from a later loop turn (orphans included). After each
 * input every connection must be gone and every answer flushed, or the
 * harness aborts (a stuck state is a bug as much as a crash is). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "hserver.h"

static struct event_base *base;
static sk_hs *srv;
static sk_hs_req *later[256];
static size_t nlater;

static volatile size_t sink;

static void answer(sk_hs_req *r)
{
    /* the headers handlers read: each must be a string ended inside the
     * request (a runaway value, such as an unterminated trailer, is an
     * ASan report) */
    static const char *const names[] = {"Authorization", "X-User-Signature", "Host", "Idempotency-Key",
                                        "Transfer-Encoding"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = sk_hs_req_header(r, names[i]);
        if (v) sink += strlen(v);
    }
    size_t n = 0;
    const char *b = sk_hs_req_body(r, &n);
    const char *u = sk_hs_req_header(r, "x-user-id");
    if (sk_hs_req_query(r) && sk_hs_req_header(r, "Retry")) sk_hs_reply_header(r, "Retry-After", "1");
    if (u) sk_hs_reply_header(r, "X-Echo", u);
    sk_hs_reply(r, n ? 201 : 200, b, n);
}

static void on_request(sk_hs_req *r, void *ud)
{
    (void)ud;
    /* every accessor once; odd paths are answered on a later loop turn */
    (void)sk_hs_req_method_name(r);
    (void)sk_hs_req_peer(r);
    if ((strlen(sk_hs_req_path(r)) & 1) && nlater < 256) later[nlater++] = r;
    else answer(r);
}

static void answer_later(void)
{
    size_t n = nlater;
    nlater = 0;
    for (size_t i = 0; i < n; i++) answer(later[i]);
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    base = event_base_new();
    sk_hs_opts o;
    sk_hs_opts_init(&o);
    o.on_request = on_request;
    o.max_body = 1024;
    o.max_head = 2048;
    o.max_url = 512;
    o.max_pipeline = 4;
    if (!base || sk_hs_new(base, &o, &srv) != 0) abort();
}

static void turn(int peer)
{
    char buf[65536];
    event_base_loop(base, EVLOOP_NONBLOCK);
    answer_later();
    event_base_loop(base, EVLOOP_NONBLOCK);
    while (read(peer, buf, sizeof(buf)) > 0) {
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base) setup();
    if (size < 1) return 0;
    size_t piece = (size_t)data[0] % 64 + 1;
    data++;
    size--;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) abort();
    if (sk_hs_adopt(srv, sv[0], 0, "fuzz") != 0) abort();
    for (size_t off = 0; off < size;) {
        size_t n = size - off < piece ? size - off : piece;
        ssize_t w = write(sv[1], data + off, n);
        if (w > 0) off += (size_t)w;
        else if (errno != EAGAIN) break;
        turn(sv[1]);
    }
    shutdown(sv[1], SHUT_WR);
    for (int i = 0; i < 8; i++) turn(sv[1]);
    close(sv[1]);
    for (int i = 0; i < 8 && sk_hs_connections(srv) > 0; i++) turn(-1);
    answer_later(); /* orphans, if the connection went first */
    if (sk_hs_connections(srv) != 0 || sk_hs_unflushed(srv) != 0) {
        fprintf(stderr, "fuzz: %zu connections / %zu answers left\n", sk_hs_connections(srv), sk_hs_unflushed(srv));
        abort();
    }
    return 0;
}
