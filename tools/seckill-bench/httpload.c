/* httpload.c: see httpload.h. Invariant: a connection has at most one
 * request in flight; every request handed out by next() ends in exactly one
 * done() call (status 0 on a connection failure), so callers can count. */
#include "httpload.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "util.h"

#define MAX_BODY (1 << 20)

typedef struct pending {
    hl_request req;
    int64_t sched_us; /* when it should have started (open loop) */
    int attempts;     /* sends so far */
    int64_t not_before_us; /* retry backoff */
    struct pending *next;
} pending;

typedef struct hl_conn hl_conn;
typedef struct hl_state {
    const hl_options *o;
    struct event_base *base;
    hl_conn *conns;
    hl_result *res;
    int64_t start_us, measure_from_us, stop_at_us;
    pending *q_head, *q_tail; /* open loop: started, waiting for a connection */
    size_t q_len;
    pending **r_heap; /* to resend (after a failure, a 503, a 202), a min-heap by
                         not_before_us: the first due is resent first */
    size_t r_len, r_cap;
    uint64_t scheduled;
    int exhausted;   /* next() returned 0 or duration passed */
    int in_flight;
    int connected_once;
    int64_t exhausted_at_us, last_answer_us, any_up_us;
    struct event *tick, *progress_ev, *guard, *retry_tick;
} hl_state;

struct hl_conn {
    hl_state *st;
    struct bufferevent *bev;
    size_t target;
    int busy, up;
    pending cur;
    int64_t sent_us;
    int hdr_done, status, close_after;
    int retry_after_ms; /* Retry-After of the answer, capped */
    size_t body_len, hdr_len;
    struct event *retry;
};

static void conn_connect(hl_conn *c);
static void dispatch(hl_conn *c);

static int64_t now_us(void)
{
    return dlock__now_us();
}

static void maybe_finish(hl_state *st)
{
    if (st->exhausted && st->in_flight == 0 && st->q_len == 0 && st->r_len == 0)
        event_base_loopbreak(st->base);
}

static void finish_request(hl_conn *c, int status, const char *body, size_t len)
{
    hl_state *st = c->st;
    int64_t t = now_us();
    int64_t from = st->o->rate > 0 ? c->cur.sched_us : c->sent_us;
    uint64_t lat = t > from ? (uint64_t)(t - from) : 0;
    if (c->sent_us >= st->measure_from_us) dlock__hist_record(&st->res->latency, lat);
    st->res->completed += status != 0;
    st->res->failed += status == 0;
    st->o->done(st->o->ud, c->cur.req.tag, status, body, len, lat);
    free(c->cur.req.bytes);
    memset(&c->cur, 0, sizeof(c->cur));
    c->busy = 0;
    st->in_flight--;
}

static void heap_swap(pending **h, size_t i, size_t j)
{
    pending *t = h[i];
    h[i] = h[j];
    h[j] = t;
}

/* Adds p to the resend heap; 0, or -1 out of memory (p not added). */
static int heap_push(hl_state *st, pending *p)
{
    if (st->r_len == st->r_cap) {
        size_t cap = st->r_cap ? st->r_cap * 2 : 1024;
        pending **h = realloc(st->r_heap, cap * sizeof(*h));
        if (!h) return -1;
        st->r_heap = h;
        st->r_cap = cap;
    }
    size_t i = st->r_len++;
    st->r_heap[i] = p;
    while (i > 0 && st->r_heap[(i - 1) / 2]->not_before_us > st->r_heap[i]->not_before_us) {
        heap_swap(st->r_heap, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return 0;
}

/* Removes and returns the earliest resend if it is due, else NULL. */
static pending *heap_pop_due(hl_state *st, int64_t now)
{
    if (st->r_len == 0 || st->r_heap[0]->not_before_us > now) return NULL;
    pending **h = st->r_heap, *top = h[0];
    h[0] = h[--st->r_len];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < st->r_len && h[l]->not_before_us < h[m]->not_before_us) m = l;
        if (r < st->r_len && h[r]->not_before_us < h[m]->not_before_us) m = r;
        if (m == i) break;
        heap_swap(h, i, m);
        i = m;
    }
    return top;
}

/* The wait before resend number `attempts` (1 = the first resend):
 * 50 ms doubling to 2 s, drawn in [half, full] so that clients failed by
 * one event do not all come back at the same instant; at least the
 * answer's Retry-After plus up to a quarter of it. */
static int64_t backoff_us(int attempts, int retry_after_ms)
{
    int shift = attempts < 7 ? attempts - 1 : 6;
    int64_t full = 50000LL << (shift > 0 ? shift : 0);
    if (full > 2000000) full = 2000000;
    int64_t d = full / 2 + (int64_t)dlock__random_below((uint64_t)full / 2 + 1);
    int64_t ra = (int64_t)retry_after_ms * 1000;
    if (ra > 0 && d < ra) d = ra + (int64_t)dlock__random_below((uint64_t)ra / 4 + 1);
    return d;
}

/* A request to resend (same bytes, so the same Idempotency-Key) unless its
 * retries are used up. Returns 1 if queued. */
static int requeue(hl_state *st, pending *cur, int retry_after_ms)
{
    if (cur->attempts > st->o->retries) return 0;
    pending *p = malloc(sizeof(*p));
    if (!p) return 0;
    *p = *cur;
    p->not_before_us = now_us() + backoff_us(cur->attempts, retry_after_ms);
    if (heap_push(st, p) != 0) {
        free(p);
        return 0;
    }
    st->res->retried++;
    return 1;
}

static int pull_request(hl_state *st, pending *out)
{
    pending *r = heap_pop_due(st, now_us());
    if (r) {
        *out = *r;
        free(r);
        return 1;
    }
    if (st->o->rate > 0) {
        if (!st->q_head) return 0;
        pending *p = st->q_head;
        st->q_head = p->next;
        if (!st->q_head) st->q_tail = NULL;
        st->q_len--;
        *out = *p;
        free(p);
        return 1;
    }
    if (st->exhausted) return 0;
    if (st->stop_at_us && now_us() >= st->stop_at_us) {
        st->exhausted = 1;
        return 0;
    }
    memset(out, 0, sizeof(*out));
    if (!st->o->next(st->o->ud, &out->req)) {
        st->exhausted = 1;
        return 0;
    }
    out->sched_us = now_us();
    return 1;
}

static void dispatch(hl_conn *c)
{
    hl_state *st = c->st;
    if (!c->up || c->busy) return;
    if (!pull_request(st, &c->cur)) {
        maybe_finish(st);
        return;
    }
    c->busy = 1;
    c->hdr_done = 0;
    c->cur.attempts++;
    st->in_flight++;
    st->res->sent += c->cur.attempts == 1;
    c->sent_us = now_us();
    bufferevent_write(c->bev, c->cur.req.bytes, c->cur.req.len);
}

/* Parses the status line and the headers we need; 0 ok, -1 malformed. */
static int parse_head(hl_conn *c, const char *h, size_t n)
{
    if (n < 12 || strncmp(h, "HTTP/1.", 7) != 0) return -1;
    c->status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
    c->body_len = 0;
    c->retry_after_ms = 0;
    c->close_after = h[7] == '0';
    const char *p = memchr(h, '\n', n);
    while (p && (size_t)(p - h) < n) {
        p++;
        size_t rest = n - (size_t)(p - h);
        if (rest > 15 && strncasecmp(p, "Content-Length:", 15) == 0)
            c->body_len = (size_t)strtoul(p + 15, NULL, 10);
        else if (rest > 17 && strncasecmp(p, "Connection: close", 17) == 0)
            c->close_after = 1;
        else if (rest > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
            long s = strtol(p + 12, NULL, 10);
            c->retry_after_ms = s > 0 ? (s > 1 ? 1000 : (int)s * 1000) : 0; /* bounded: 1 s */
        }
        p = memchr(p, '\n', rest);
    }
    return c->body_len > MAX_BODY ? -1 : 0;
}

static void drop_conn(hl_conn *c, int delay_ms)
{
    const hl_options *o = c->st->o;
    bool may_resend = c->busy && (!o->resend || o->resend(o->ud, c->cur.req.tag, 0, "", 0));
    if (may_resend && requeue(c->st, &c->cur, 0)) {
        memset(&c->cur, 0, sizeof(c->cur)); /* the bytes now belong to the retry queue */
        c->busy = 0;
        c->st->in_flight--;
        for (int i = 0; i < c->st->o->connections; i++) /* hand it to a live connection */
            if (&c->st->conns[i] != c) dispatch(&c->st->conns[i]);
    }
    if (c->busy) finish_request(c, 0, "", 0);
    if (c->bev) bufferevent_free(c->bev);
    c->bev = NULL;
    c->up = 0;
    if (c->st->exhausted && c->st->o->rate <= 0) {
        maybe_finish(c->st);
        return;
    }
    struct timeval tv = {0, delay_ms * 1000};
    evtimer_add(c->retry, &tv);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    hl_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    for (;;) {
        if (!c->busy) { /* unsolicited bytes: protocol error */
            drop_conn(c, 10);
            return;
        }
        if (!c->hdr_done) {
            struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
            if (end.pos < 0) {
                if (evbuffer_get_length(in) > 65536) drop_conn(c, 10);
                return;
            }
            c->hdr_len = (size_t)end.pos + 4;
            const char *h = (const char *)evbuffer_pullup(in, (ev_ssize_t)c->hdr_len);
            if (parse_head(c, h, c->hdr_len) != 0) {
                drop_conn(c, 10);
                return;
            }
            evbuffer_drain(in, c->hdr_len);
            c->hdr_done = 1;
        }
        if (evbuffer_get_length(in) < c->body_len) return;
        char *body = (char *)evbuffer_pullup(in, (ev_ssize_t)c->body_len);
        const hl_options *o = c->st->o;
        c->st->last_answer_us = now_us();
        int again = o->resend ? o->resend(o->ud, c->cur.req.tag, c->status, body ? body : "", c->body_len)
                              : c->status == 503;
        if (again && requeue(c->st, &c->cur, c->retry_after_ms)) {
            memset(&c->cur, 0, sizeof(c->cur));
            c->busy = 0;
            c->st->in_flight--;
        } else {
            finish_request(c, c->status, body ? body : "", c->body_len);
        }
        evbuffer_drain(in, c->body_len);
        if (c->close_after) {
            if (c->bev) bufferevent_free(c->bev);
            c->bev = NULL;
            c->up = 0;
            conn_connect(c);
            return;
        }
        dispatch(c);
        if (!c->busy || evbuffer_get_length(in) == 0) return;
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    hl_conn *c = arg;
    if (what & BEV_EVENT_CONNECTED) {
        c->up = 1;
        c->st->connected_once = 1;
        evutil_socket_t fd = bufferevent_getfd(c->bev);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        dispatch(c);
        return;
    }
    drop_conn(c, 20);
}

static void conn_connect(hl_conn *c)
{
    hl_state *st = c->st;
    const hl_target *t = &st->o->targets[c->target];
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t->port)};
    if (inet_pton(AF_INET, t->host, &sa.sin_addr) != 1) sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->bev = bufferevent_socket_new(st->base, -1, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&sa, sizeof(sa)) != 0) drop_conn(c, 50);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hl_conn *c = arg;
    if (!c->bev) conn_connect(c);
}

/* Open loop: start every request whose scheduled time has come. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hl_state *st = arg;
    int64_t t = now_us();
    if (st->stop_at_us && t >= st->stop_at_us) st->exhausted = 1;
    while (!st->exhausted) {
        int64_t sched = st->start_us + (int64_t)((double)st->scheduled * 1e6 / st->o->rate);
        if (sched > t) break;
        pending *p = calloc(1, sizeof(*p));
        if (!p || !st->o->next(st->o->ud, &p->req)) {
            free(p);
            st->exhausted = 1;
            break;
        }
        p->sched_us = sched;
        if (st->q_tail) st->q_tail->next = p;
        else st->q_head = p;
        st->q_tail = p;
        st->q_len++;
        st->scheduled++;
    }
    for (int i = 0; i < st->o->connections && st->q_len; i++) dispatch(&st->conns[i]);
    maybe_finish(st);
}

static void on_progress(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hl_state *st = arg;
    st->o->progress(st->o->ud, (double)(now_us() - st->start_us) / 1e6);
}

/* Drops the connections whose request timed out (as a reset: resent or
 * reported), then hands due retries to idle connections. */
static void on_retry_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hl_state *st = arg;
    if (st->o->timeout_s > 0) {
        int64_t limit = (int64_t)(st->o->timeout_s * 1e6), t = now_us();
        for (int i = 0; i < st->o->connections; i++)
            if (st->conns[i].busy && st->conns[i].bev && t - st->conns[i].sent_us > limit) drop_conn(&st->conns[i], 10);
    }
    for (int i = 0; i < st->o->connections && st->r_len; i++) dispatch(&st->conns[i]);
}

/* Bounds every run: no target reachable for 5 s (at the start, or every
 * connection down that long later), or, once the workload
 * ended, no answer for 15 s (a server that stopped answering) or 5 min
 * in all, stops the loop. */
static void on_guard(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hl_state *st = arg;
    int64_t t = now_us();
    if (!st->connected_once && t - st->start_us > 5000000) event_base_loopbreak(st->base);
    for (int i = 0; i < st->o->connections; i++)
        if (st->conns[i].up) st->any_up_us = t;
    if (st->connected_once && t - st->any_up_us > 5000000) event_base_loopbreak(st->base); /* every target gone */
    if (st->exhausted && !st->exhausted_at_us) st->exhausted_at_us = t;
    if (!st->exhausted_at_us) return;
    int64_t quiet_from = st->last_answer_us > st->exhausted_at_us ? st->last_answer_us : st->exhausted_at_us;
    if (t - quiet_from > 15000000 || t - st->exhausted_at_us > 300000000) event_base_loopbreak(st->base);
}

static struct event *add_timer(hl_state *st, void (*cb)(evutil_socket_t, short, void *), double every_s)
{
    struct event *ev = event_new(st->base, -1, EV_PERSIST, cb, st);
    struct timeval tv = {(time_t)every_s, (suseconds_t)((every_s - (double)(time_t)every_s) * 1e6)};
    if (ev) evtimer_add(ev, &tv);
    return ev;
}

/* Answers every request still queued as a connection failure. */
static void fail_queued(hl_state *st, pending **head)
{
    const hl_options *o = st->o;
    while (*head) {
        pending *p = *head;
        *head = p->next;
        o->done(o->ud, p->req.tag, 0, "", 0, 0);
        st->res->failed++;
        free(p->req.bytes);
        free(p);
    }
}

static void teardown(hl_state *st)
{
    for (int i = 0; i < st->o->connections; i++) {
        hl_conn *c = &st->conns[i];
        if (c->busy) finish_request(c, 0, "", 0);
        if (c->bev) bufferevent_free(c->bev);
        event_free(c->retry);
    }
    for (size_t i = 0; i < st->r_len; i++) st->r_heap[i]->next = i + 1 < st->r_len ? st->r_heap[i + 1] : NULL;
    pending *r_head = st->r_len ? st->r_heap[0] : NULL;
    fail_queued(st, &r_head);
    free(st->r_heap);
    fail_queued(st, &st->q_head);
    if (st->tick) event_free(st->tick);
    if (st->progress_ev) event_free(st->progress_ev);
    if (st->guard) event_free(st->guard);
    if (st->retry_tick) event_free(st->retry_tick);
    free(st->conns);
    event_base_free(st->base);
}

int hl_run(const hl_options *o, hl_result *out)
{
    memset(out, 0, sizeof(*out));
    dlock__hist_reset(&out->latency);
    hl_state st = {.o = o, .res = out};
    st.base = event_base_new();
    st.conns = calloc((size_t)o->connections, sizeof(*st.conns));
    if (!st.base || !st.conns) return -1;
    st.start_us = now_us();
    st.any_up_us = st.start_us;
    st.measure_from_us = st.start_us + (int64_t)(o->warmup_s * 1e6);
    st.stop_at_us = o->duration_s > 0 ? st.start_us + (int64_t)(o->duration_s * 1e6) : 0;
    for (int i = 0; i < o->connections; i++) {
        hl_conn *c = &st.conns[i];
        c->st = &st;
        c->target = (size_t)i % o->n_targets;
        c->retry = evtimer_new(st.base, on_retry, c);
        conn_connect(c);
    }
    if (o->rate > 0) st.tick = add_timer(&st, on_tick, 0.001);
    if (o->progress && o->progress_s > 0) st.progress_ev = add_timer(&st, on_progress, o->progress_s);
    st.retry_tick = add_timer(&st, on_retry_tick, 0.01);
    st.guard = add_timer(&st, on_guard, 0.5);
    event_base_dispatch(st.base);
    int64_t end = now_us();
    out->elapsed_s = (double)(end - (st.measure_from_us > st.start_us ? st.measure_from_us : st.start_us)) / 1e6;
    teardown(&st);
    if (!st.connected_once) {
        fprintf(stderr, "seckill-bench: could not connect to any target\n");
        return -1;
    }
    return 0;
}
