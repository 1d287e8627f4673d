/* hs_conn.c: one client connection of the HTTP layer: non-blocking reads
 * fed to the parser, the per-connection answer queue (answers leave in
 * request order, whenever they are produced), writes, and the deadlines.
 * Invariants: a connection is freed only outside its own read handler
 * (c->dead defers it); an answer is counted in s->unflushed from
 * sk_hs_reply until its last byte is written or its connection is gone. */
#include "hs_internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dlock/dlock.h"
#include "json.h"
#include "sk_err.h"
#include "util.h"

#define LINGER_MS 2000 /* after our last answer: drain what the client still sends */

static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);
static void on_timer(evutil_socket_t fd, short what, void *arg);
static void after_io(hs_conn *c);

/* Requests are recycled with their buffers (a purchase then allocates
 * nothing in the layer), cleared (at most 4 KiB each); orphans, whose
 * server may be gone, are freed. */
#define HS_FREE_MAX 256

static void req_destroy(sk_hs_req *r)
{
    free(r->head);
    free(r->hdrs);
    free(r->body);
    free(r->outh);
    if (r->resp) evbuffer_free(r->resp);
    free(r);
}

sk_hs_req *hs__req_new(sk_hs *s)
{
    sk_hs_req *r = s->free_reqs;
    if (!r) return calloc(1, sizeof(*r));
    s->free_reqs = r->next;
    s->nfree--;
    char *head = r->head, *body = r->body, *outh = r->outh;
    hs_hdr *hdrs = r->hdrs;
    size_t hc = r->head_cap, bc = r->body_cap, oc = r->outh_cap, dc = r->hdr_cap;
    memset(r, 0, sizeof(*r));
    /* no byte of an earlier request stays readable through this one */
    if (head) memset(head, 0, hc);
    if (body) memset(body, 0, bc);
    r->head = head;
    r->head_cap = hc;
    r->body = body;
    r->body_cap = bc;
    r->outh = outh;
    r->outh_cap = oc;
    r->hdrs = hdrs;
    r->hdr_cap = dc;
    return r;
}

void hs__req_free(sk_hs *s, sk_hs_req *r)
{
    if (!r) return;
    if (!s || s->nfree >= HS_FREE_MAX || r->head_cap > 4096 || r->body_cap > 4096) {
        req_destroy(r);
        return;
    }
    if (r->resp) evbuffer_free(r->resp);
    r->resp = NULL;
    r->next = s->free_reqs;
    s->free_reqs = r;
    s->nfree++;
}

void hs__req_pool_free(sk_hs *s)
{
    while (s->free_reqs) {
        sk_hs_req *r = s->free_reqs;
        s->free_reqs = r->next;
        req_destroy(r);
    }
    s->nfree = 0;
}

void hs__wait_enter(hs_conn *c)
{
    hs_listener *l = c->l;
    if (!l || c->waiting) return;
    c->waiting = true;
    c->wait_since = c->last_io;
    c->wprev = l->wait_tail;
    c->wnext = NULL;
    if (l->wait_tail) l->wait_tail->wnext = c;
    else l->wait_head = c;
    l->wait_tail = c;
}

void hs__wait_leave(hs_conn *c)
{
    hs_listener *l = c->l;
    if (!c->waiting) return;
    c->waiting = false;
    if (c->wprev) c->wprev->wnext = c->wnext;
    else l->wait_head = c->wnext;
    if (c->wnext) c->wnext->wprev = c->wprev;
    else l->wait_tail = c->wprev;
}

int hs__conn_new(sk_hs *s, hs_listener *l, int fd, unsigned tag, const char *peer)
{
    hs_conn *c = calloc(1, sizeof(*c));
    if (!c) return DLOCK_ENOMEM;
    c->s = s;
    c->l = l;
    c->fd = fd;
    c->tag = tag;
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, on_read, c);
    c->wev = event_new(s->base, fd, EV_WRITE, on_write, c);
    c->tev = evtimer_new(s->base, on_timer, c);
    c->out = evbuffer_new();
    if (!c->rev || !c->wev || !c->tev || !c->out || event_add(c->rev, NULL) != 0) {
        if (c->rev) event_free(c->rev);
        if (c->wev) event_free(c->wev);
        if (c->tev) event_free(c->tev);
        if (c->out) evbuffer_free(c->out);
        free(c);
        return DLOCK_ENOMEM;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* fails harmlessly off TCP */
    c->reading = true;
    http_parser_init(&c->p, HTTP_REQUEST);
    c->p.data = c;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    c->last_io = dlock__now_ms();
    hs__wait_enter(c);
    after_io(c);
    return 0;
}

static void free_conn(hs_conn *c)
{
    sk_hs *s = c->s;
    hs__wait_leave(c);
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nconns--;
    s->unflushed -= c->in_out;
    for (sk_hs_req *r = c->qhead, *n; r; r = n) {
        n = r->next;
        if (r->replied) {
            s->unflushed--;
            hs__req_free(s, r);
        } else {
            r->c = NULL; /* its answer, when it comes, only frees it */
        }
    }
    hs__req_free(s, c->cur);
    event_free(c->rev);
    event_free(c->wev);
    event_free(c->tev);
    evbuffer_free(c->out);
    close(c->fd);
    free(c->pend);
    if (c->l) hs__listener_conn_gone(c->l, c->peer);
    free(c);
}

void hs__conn_close(hs_conn *c)
{
    if (c->in_read) c->dead = true;
    else free_conn(c);
}

void hs__conn_free(hs_conn *c) { free_conn(c); }

static void set_reading(hs_conn *c, bool on)
{
    if (c->reading == on) return;
    c->reading = on;
    if (on) event_add(c->rev, NULL);
    else event_del(c->rev);
}

/* Writes what is queued; -1 when the connection had to be closed. */
static int flush(hs_conn *c)
{
    while (evbuffer_get_length(c->out) > 0) {
        int n = evbuffer_write(c->out, c->fd);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (errno == EINTR) continue;
            if (!event_pending(c->wev, EV_WRITE, NULL)) event_add(c->wev, NULL);
            return 0;
        }
        if (n <= 0) {
            hs__conn_close(c);
            return -1;
        }
        /* progress counts against the write deadline only while output
         * waits (a complete write needs no clock reading) */
        if (evbuffer_get_length(c->out) > 0) c->last_io = dlock__now_ms();
    }
    c->s->unflushed -= c->in_out;
    c->in_out = 0;
    return 0;
}

/* Moves answers that are due (the head of the queue, answered) into out. */
static void pump(hs_conn *c)
{
    while (c->qhead && c->qhead->replied) {
        sk_hs_req *r = c->qhead;
        c->qhead = r->next;
        if (!c->qhead) c->qtail = NULL;
        c->nq--;
        if (r->resp) evbuffer_add_buffer(c->out, r->resp);
        c->in_out++;
        if (!r->keep_alive) c->closing = true;
        hs__req_free(c->s, r);
    }
}

bool hs__has_room(const hs_conn *c)
{
    return c->nq < c->s->o.max_pipeline && evbuffer_get_length(c->out) <= HS_OUT_HIGH;
}

/* Parses input kept while paused; answers it produces stay in out. */
static void resume(hs_conn *c)
{
    c->paused = false;
    c->in_read = true;
    size_t k = hs__feed(c, c->pend, c->pend_len);
    c->in_read = false;
    if (c->paused && k < c->pend_len) {
        memmove(c->pend, c->pend + k, c->pend_len - k);
        c->pend_len -= k;
    } else {
        free(c->pend);
        c->pend = NULL;
        c->pend_len = 0;
        c->paused = false;
    }
}

static int64_t deadline(const hs_conn *c)
{
    const sk_hs_opts *o = &c->s->o;
    int64_t d = INT64_MAX, idle = c->last_io + o->idle_timeout_ms;
    if (c->lingering) return c->linger_until;
    if (evbuffer_get_length(c->out) > 0) d = idle; /* a client that does not read */
    if (c->phase == HS_HEAD) {
        int64_t h = c->head_start + o->head_timeout_ms;
        d = h < idle ? h : idle;
    } else if (c->phase == HS_BODY) {
        int64_t b = c->body_start + o->body_timeout_ms;
        d = b < idle ? b : idle;
    } else if (c->nq == 0 && !c->paused) {
        d = idle; /* keep-alive wait */
    }
    return d;
}

static void arm(hs_conn *c)
{
    int64_t d = deadline(c);
    if (d == INT64_MAX || (c->armed && c->armed <= d)) return;
    int64_t left = d - dlock__now_ms();
    if (left < 0) left = 0;
    struct timeval tv = {.tv_sec = left / 1000, .tv_usec = (left % 1000) * 1000};
    event_add(c->tev, &tv);
    c->armed = d;
}

/* Everything owed is written: close, linger, or wait for the next request. */
static bool settle(hs_conn *c)
{
    bool owed = c->nq > 0 || evbuffer_get_length(c->out) > 0 || c->paused;
    if (owed) return true;
    if (c->closing && !c->lingering) {
        /* half-close and drain so the client reads our answer before a reset */
        shutdown(c->fd, SHUT_WR);
        c->lingering = true;
        c->linger_until = dlock__now_ms() + LINGER_MS;
        set_reading(c, true);
        return true;
    }
    if (c->eof || (c->s->draining && c->phase == HS_IDLE)) {
        free_conn(c);
        return false;
    }
    if (c->phase == HS_IDLE) hs__wait_enter(c);
    return true;
}

static void after_io(hs_conn *c)
{
    for (;;) {
        if (c->dead) {
            free_conn(c);
            return;
        }
        pump(c);
        if (flush(c) < 0) return;
        if (!c->paused || !hs__has_room(c)) break;
        resume(c);
    }
    if (!settle(c)) return;
    if (!c->lingering) set_reading(c, !c->paused && !c->eof && !c->closing);
    arm(c);
}

static void linger_read(hs_conn *c)
{
    ssize_t n = recv(c->fd, c->s->rbuf, sizeof(c->s->rbuf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) free_conn(c);
}

static void keep_pending(hs_conn *c, const char *rest, size_t n)
{
    char *p = realloc(c->pend, c->pend_len + n);
    if (!p) {
        c->dead = true;
        return;
    }
    memcpy(p + c->pend_len, rest, n);
    c->pend = p;
    c->pend_len += n;
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    hs_conn *c = arg;
    if (c->lingering) {
        linger_read(c);
        return;
    }
    ssize_t n = recv(fd, c->s->rbuf, sizeof(c->s->rbuf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n < 0) {
        free_conn(c);
        return;
    }
    if (n == 0) {
        /* half-close: whatever was sent completely is still answered */
        c->eof = true;
        hs__parse_abort(c);
    } else {
        c->last_io = dlock__now_ms();
        c->in_read = true;
        size_t k = hs__feed(c, c->s->rbuf, (size_t)n);
        c->in_read = false;
        if (c->paused && k < (size_t)n) keep_pending(c, c->s->rbuf + k, (size_t)n - k);
    }
    after_io(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hs_conn *c = arg;
    c->last_io = dlock__now_ms(); /* writable again: the client reads */
    after_io(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hs_conn *c = arg;
    c->armed = 0;
    int64_t now = dlock__now_ms();
    if (now < deadline(c)) {
        arm(c);
        return;
    }
    if (c->lingering || evbuffer_get_length(c->out) > 0 || c->phase == HS_IDLE) {
        free_conn(c); /* lingered enough, a client that does not read, or idle */
        return;
    }
    hs__parse_abort(c); /* a request not complete in time */
    hs__refuse(c, 408, "request_timeout", "request not complete in time");
    after_io(c);
}

void hs__conn_drain(hs_conn *c)
{
    if (c->nq == 0 && c->phase == HS_IDLE && evbuffer_get_length(c->out) == 0 && !c->in_read) free_conn(c);
}

/* ---- the queue and the answers ----------------------------------------- */

static void link_req(hs_conn *c, sk_hs_req *r)
{
    r->c = c;
    r->next = NULL;
    if (c->qtail) c->qtail->next = r;
    else c->qhead = r;
    c->qtail = r;
    c->nq++;
    if (!r->keep_alive) c->closing = true; /* no request is read after this one */
}

void hs__enqueue(hs_conn *c, sk_hs_req *r)
{
    link_req(c, r);
    c->s->o.on_request(r, c->s->o.ud);
}

void hs__refuse(hs_conn *c, int status, const char *code, const char *msg)
{
    sk_hs_req *r = hs__req_new(c->s);
    if (!r) {
        c->closing = true;
        return;
    }
    link_req(c, r); /* keep_alive false: the connection ends after it */
    sk_hs_reply_error(r, status, code, msg);
}

static char *put(char *p, const char *s, size_t n)
{
    if (n) memcpy(p, s, n); /* s may be NULL when n is 0 */
    return p + n;
}

static size_t head_size(const sk_hs_req *r) { return 160 + r->outh_len; }

/* Status line and headers into out (head_size(r) bytes; no printf: this
 * runs once per answer). Returns the length. */
static size_t format_head(sk_hs *s, const sk_hs_req *r, int status, size_t len, bool last, char *out)
{
    const char *reason = http_status_str((enum http_status)status);
    const char *date = hs__date(s);
    char num[24], *e = num + sizeof(num), *d = dlock__digits(e, len);
    char *p = put(out, "HTTP/1.1 ", 9);
    *p++ = (char)('0' + status / 100 % 10);
    *p++ = (char)('0' + status / 10 % 10);
    *p++ = (char)('0' + status % 10);
    *p++ = ' ';
    p = put(p, reason, strlen(reason)); /* at most 31 bytes */
    p = put(p, "\r\n", 2);
    p = put(p, date, strlen(date)); /* 37 bytes */
    p = put(p, "Content-Length: ", 16);
    p = put(p, d, (size_t)(e - d));
    p = put(p, "\r\n", 2);
    p = put(p, r->outh, r->outh_len);
    if (last) p = put(p, "Connection: close\r\n", 19);
    else if (r->v10) p = put(p, "Connection: keep-alive\r\n", 24);
    p = put(p, "\r\n", 2);
    return (size_t)(p - out);
}

/* head + body into b; with now, first what the socket takes at once. */
static void emit(hs_conn *c, struct evbuffer *b, bool now, const char *head, size_t hn, const void *body,
                 size_t bn)
{
    size_t done = 0;
    if (now) {
        struct iovec iov[2] = {{(void *)(uintptr_t)head, hn}, {(void *)(uintptr_t)body, bn}};
        ssize_t w = writev(c->fd, iov, bn ? 2 : 1);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            c->dead = true;
            return;
        }
        if (w > 0) done = (size_t)w;
    }
    if (done < hn) evbuffer_add(b, head + done, hn - done);
    size_t bd = done > hn ? done - hn : 0;
    if (bd < bn) evbuffer_add(b, (const char *)body + bd, bn - bd);
}

void sk_hs_reply(sk_hs_req *r, int status, const void *body, size_t len)
{
    hs_conn *c = r->c;
    if (!c) {
        hs__req_free(NULL, r); /* an orphan: nobody to answer */
        return;
    }
    sk_hs *s = c->s;
    bool last = !r->keep_alive || (s->draining && r == c->qtail && !c->cur);
    bool direct = r == c->qhead;
    struct evbuffer *b = direct ? c->out : (r->resp = evbuffer_new());
    char small[512], *head = small;
    if (head_size(r) > sizeof(small)) head = malloc(head_size(r));
    r->replied = true;
    s->unflushed++;
    if (!b || !head) {
        c->dead = true; /* out of memory: the order cannot be kept, end the connection */
        direct = false;
    } else {
        /* due now on an idle socket (an answer from a Redis reply): written
         * straight away, no buffer chain to allocate and free */
        bool now = direct && !c->in_read && evbuffer_get_length(c->out) == 0;
        emit(c, b, now, head, format_head(s, r, status, len, last, head), body, r->head_only || !body ? 0 : len);
    }
    if (head != small) free(head);
    r->keep_alive = !last;
    if (direct) {
        c->qhead = r->next;
        if (!c->qhead) c->qtail = NULL;
        c->nq--;
        c->in_out++;
        if (last) c->closing = true;
        hs__req_free(s, r);
    }
    if (!c->in_read) after_io(c);
}
