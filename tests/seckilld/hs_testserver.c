/* hs_testserver.c: the HTTP layer (hserver.h) alone behind seckilld's
 * door shapes, for the hostile-client tests before and without an engine:
 * GET /ping, /healthz, /metrics; POST /v1/campaigns (Bearer admin token:
 * 201, else 401); POST /v1/campaigns/{id}/purchase (X-User-Id, answered
 * 1 ms later from a timer, as the engine answers from a Redis reply).
 * Flags: a subset of seckilld's (--port --bind --max-connections
 * --idle-timeout-ms --max-body --max-headers --admin-token; others are
 * read and ignored). Prints nothing; SIGTERM stops it with exit 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "hserver.h"

typedef struct later {
    struct event *ev;
    sk_hs_req *req;
    struct later *prev, *next;
    char body[160];
} later;

static later *pending; /* answers not given yet: orphans at exit */

static void forget(later *l)
{
    if (l->prev) l->prev->next = l->next;
    else pending = l->next;
    if (l->next) l->next->prev = l->prev;
    event_free(l->ev);
    free(l);
}

static const char *admin_token = "adm-token";

static void json(sk_hs_req *r, int status, const char *body)
{
    sk_hs_reply_header(r, "Content-Type", "application/json");
    sk_hs_reply(r, status, body, strlen(body));
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    later *l = arg;
    json(l->req, 201, l->body);
    forget(l);
}

static void purchase(sk_hs_req *r, struct event_base *base)
{
    const char *u = sk_hs_req_header(r, "X-User-Id");
    if (!u || !*u) {
        sk_hs_reply_error(r, 400, "bad_request", "missing X-User-Id header");
        return;
    }
    later *l = calloc(1, sizeof(*l));
    if (!l) {
        sk_hs_reply_error(r, 500, "internal", "out of memory");
        return;
    }
    l->req = r;
    l->next = pending;
    if (pending) pending->prev = l;
    pending = l;
    snprintf(l->body, sizeof(l->body), "{\"status\":\"accepted\",\"user\":\"%.64s\"}\n", u);
    l->ev = evtimer_new(base, on_later, l);
    struct timeval tv = {0, 1000};
    event_add(l->ev, &tv);
}

static void on_request(sk_hs_req *r, void *ud)
{
    const char *p = sk_hs_req_path(r), *m = sk_hs_req_method_name(r);
    bool get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0;
    if (get && strcmp(p, "/ping") == 0) {
        sk_hs_reply_header(r, "Content-Type", "text/plain");
        sk_hs_reply(r, 200, "pong\n", 5);
    } else if (get && strcmp(p, "/healthz") == 0) {
        json(r, 200, "{\"status\":\"ok\"}\n");
    } else if (get && strcmp(p, "/metrics") == 0) {
        sk_hs_reply_header(r, "Content-Type", "text/plain; version=0.0.4");
        sk_hs_reply(r, 200, "seckill_up 1\n", 13);
    } else if (post && strcmp(p, "/v1/campaigns") == 0) {
        const char *a = sk_hs_req_header(r, "Authorization");
        if (a && strncmp(a, "Bearer ", 7) == 0 && strcmp(a + 7, admin_token) == 0) json(r, 201, "{\"id\":\"c\"}\n");
        else sk_hs_reply_error(r, 401, "unauthorized", "missing or wrong admin token");
    } else if (post && strncmp(p, "/v1/campaigns/", 14) == 0 && strstr(p, "/purchase")) {
        purchase(r, ud);
    } else {
        sk_hs_reply_error(r, 404, "not_found", "no such path");
    }
}

static void on_term(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    event_base_loopexit(arg, NULL);
}

int main(int argc, char **argv)
{
    const char *bind = "127.0.0.1";
    int port = 0;
    sk_hs_opts o;
    sk_hs_listen_opts lo;
    sk_hs_opts_init(&o);
    sk_hs_listen_opts_init(&lo);
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        long n = strtol(v, NULL, 10);
        if (!strcmp(k, "--port")) port = (int)n;
        else if (!strcmp(k, "--bind")) bind = v;
        else if (!strcmp(k, "--max-connections")) lo.max_conns = (size_t)n;
        else if (!strcmp(k, "--idle-timeout-ms")) o.idle_timeout_ms = n;
        else if (!strcmp(k, "--max-body")) o.max_body = (size_t)n;
        else if (!strcmp(k, "--max-headers")) o.max_head = (size_t)n;
        else if (!strcmp(k, "--admin-token")) admin_token = v;
    }
    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = event_base_new();
    sk_hs *s = NULL;
    o.on_request = on_request;
    o.ud = base;
    char err[256];
    int fd = sk_hs_bind(bind, port, false, NULL, err, sizeof(err));
    if (!base || fd < 0 || sk_hs_new(base, &o, &s) != 0 || sk_hs_listen(s, fd, &lo) != 0) {
        fprintf(stderr, "hs_testserver: %s\n", fd < 0 ? err : "cannot start");
        return 1;
    }
    struct event *term = evsignal_new(base, SIGTERM, on_term, base);
    event_add(term, NULL);
    event_base_dispatch(base);
    event_free(term);
    sk_hs_free(s);
    while (pending) { /* orphans now: answering only frees them */
        sk_hs_reply(pending->req, 503, NULL, 0);
        forget(pending);
    }
    event_base_free(base);
    return 0;
}
