/* hs_conn.c: one client connection of the HTTP layer: non-blocking reads
 * fed to the parser, the libhttp-parser callbacks that build one sk_hs_req
 * per message and enforce the request limits (hserver.h), the
 * per-connection answer queue (answers leave in request order, whenever
 * they are produced), writes, and the deadlines.
 * Invariants: a connection is freed only outside its own read handler
 * (c->dead defers it); an answer is counted in s->unflushed from
 * sk_hs_reply until its last byte is written or its connection is gone;
 * a request reaches hs__enqueue only complete and inside every limit; the
 * parser reads only a head hs__head_lines has passed and a Content-Length
 * body (a chunked body is hs__chunked's, its trailers never become
 * headers); any refusal stops parsing on that connection (framing is no
 * longer known) and queues a JSON error after the answers already owed. */
#include "hs_internal.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <limits.h>
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
/* Feeds input to the connection's parser (below); returns bytes consumed
 * (less than n only when parsing paused or stopped). */
static size_t feed_input(hs_conn *c, const char *data, size_t n);
/* Drops the request being read (timeout, end of input). */
static void parse_abort(hs_conn *c);

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
    size_t k = feed_input(c, c->pend, c->pend_len);
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
        parse_abort(c);
    } else {
        c->last_io = dlock__now_ms();
        c->in_read = true;
        size_t k = feed_input(c, c->s->rbuf, (size_t)n);
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
    parse_abort(c); /* a request not complete in time */
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

/* ---- parsing: libhttp-parser's callbacks build the request ---------- */

static sk_hs_req *cur_of(http_parser *p) { return ((hs_conn *)p->data)->cur; }

/* A callback's refusal: recorded, returned as a parser error. */
static int refuse_cb(http_parser *p, int status, const char *code, const char *msg)
{
    hs_conn *c = p->data;
    c->err_status = status;
    c->err_code = code;
    c->err_msg = msg;
    return -1;
}

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap * 2 : 256;
    while (n < need) n *= 2;
    char *b = realloc(*buf, n);
    if (!b) return -1;
    *buf = b;
    *cap = n;
    return 0;
}

static int head_put(http_parser *p, const char *at, size_t n)
{
    sk_hs_req *r = cur_of(p);
    hs_conn *c = p->data;
    r->head_bytes += n;
    if (r->head_bytes > c->s->o.max_head)
        return refuse_cb(p, 431, "headers_too_large", "request head over the size limit");
    if (grow(&r->head, &r->head_cap, r->head_len + n + 1)) return refuse_cb(p, 500, "internal", "out of memory");
    memcpy(r->head + r->head_len, at, n);
    r->head_len += n;
    return 0;
}

/* Ends the string being collected (a header value loses trailing blanks). */
static int head_end(http_parser *p)
{
    sk_hs_req *r = cur_of(p);
    if (r->last == HS_VALUE)
        while (r->head_len > r->hdrs[r->nhdrs - 1].value &&
               (r->head[r->head_len - 1] == ' ' || r->head[r->head_len - 1] == '\t'))
            r->head_len--;
    if (r->last != HS_NONE && head_put(p, "", 1)) return -1;
    r->head_bytes += 3; /* ": " and CRLF count as head bytes too */
    return 0;
}

static int on_begin(http_parser *p)
{
    hs_conn *c = p->data;
    sk_hs_req *r = hs__req_new(c->s);
    if (!r) return refuse_cb(p, 500, "internal", "out of memory");
    r->tag = c->tag;
    memcpy(r->peer, c->peer, sizeof(r->peer));
    c->cur = r;
    c->phase = HS_HEAD;
    c->head_start = c->last_io;
    c->err_status = 0;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    sk_hs_req *r = cur_of(p);
    r->last = HS_URL;
    r->url_len += n;
    if (r->url_len > ((hs_conn *)p->data)->s->o.max_url)
        return refuse_cb(p, 414, "uri_too_long", "request target over the size limit");
    return head_put(p, at, n);
}

static int on_field(http_parser *p, const char *at, size_t n)
{
    sk_hs_req *r = cur_of(p);
    hs_conn *c = p->data;
    /* "Host : x" (RFC 9112 5.1): a proxy may read another name than we do */
    if (memchr(at, ' ', n) || memchr(at, '\t', n))
        return refuse_cb(p, 400, "bad_request", "whitespace in a header name");
    if (r->last != HS_FIELD) {
        if (head_end(p)) return -1;
        if (r->nhdrs == c->s->o.max_headers_count)
            return refuse_cb(p, 431, "headers_too_large", "too many header lines");
        if (r->nhdrs == r->hdr_cap) {
            size_t ncap = r->hdr_cap ? r->hdr_cap * 2 : 16;
            hs_hdr *h = realloc(r->hdrs, ncap * sizeof(*h));
            if (!h) return refuse_cb(p, 500, "internal", "out of memory");
            r->hdrs = h;
            r->hdr_cap = ncap;
        }
        r->hdrs[r->nhdrs++] = (hs_hdr){.name = (uint32_t)r->head_len, .value = 0};
        r->last = HS_FIELD;
    }
    return head_put(p, at, n);
}

static int on_value(http_parser *p, const char *at, size_t n)
{
    sk_hs_req *r = cur_of(p);
    /* NUL or another control byte would cut or bend the value for a
     * handler (X-User-Id "al\0ice" read as "al"): refused, whatever the
     * parser build lets through */
    for (size_t i = 0; i < n; i++)
        if (!hs__field_byte_ok((unsigned char)at[i]))
            return refuse_cb(p, 400, "bad_request", "control character in a header value");
    if (r->last != HS_VALUE) {
        if (head_end(p)) return -1;
        r->hdrs[r->nhdrs - 1].value = (uint32_t)r->head_len;
        r->last = HS_VALUE;
    }
    return head_put(p, at, n);
}

/* Origin form ("/path?query#fragment", the parser has checked its bytes)
 * without http_parser_parse_url: what nearly every request is. */
static void split_origin(const sk_hs_req *r, struct http_parser_url *u)
{
    const char *t = r->head;
    size_t n = r->url_len, q = 0, f = n;
    while (q < n && t[q] != '?' && t[q] != '#') q++;
    for (size_t i = q; i < n; i++)
        if (t[i] == '#') {
            f = i;
            break;
        }
    u->field_set = 1 << UF_PATH;
    u->field_data[UF_PATH].off = 0;
    u->field_data[UF_PATH].len = (uint16_t)q;
    if (q < n && t[q] == '?') {
        u->field_set |= 1 << UF_QUERY;
        u->field_data[UF_QUERY].off = (uint16_t)(q + 1);
        u->field_data[UF_QUERY].len = (uint16_t)(f - q - 1);
    }
}

/* path and query of the target, appended to the head as two strings. */
static int split_target(http_parser *p, sk_hs_req *r)
{
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (r->url_len > 0 && r->url_len < 65536 && r->head[0] == '/') split_origin(r, &u);
    else if (r->url_len == 0 || http_parser_parse_url(r->head, r->url_len, 0, &u) != 0)
        return refuse_cb(p, 400, "bad_request", "bad request target");
    bool has_p = (u.field_set & (1 << UF_PATH)) != 0;
    size_t poff = u.field_data[UF_PATH].off, plen = has_p ? u.field_data[UF_PATH].len : 1;
    size_t qoff = u.field_data[UF_QUERY].off, qlen = u.field_data[UF_QUERY].len;
    bool has_q = (u.field_set & (1 << UF_QUERY)) != 0;
    if (grow(&r->head, &r->head_cap, r->head_len + plen + qlen + 2))
        return refuse_cb(p, 500, "internal", "out of memory");
    r->path_off = r->head_len;
    if (has_p) memcpy(r->head + r->head_len, r->head + poff, plen);
    else r->head[r->head_len] = '/';
    r->head_len += plen;
    r->head[r->head_len++] = '\0';
    if (has_q) {
        r->query_off = r->head_len;
        memcpy(r->head + r->head_len, r->head + qoff, qlen);
        r->head_len += qlen;
        r->head[r->head_len++] = '\0';
    }
    return 0;
}

/* Expect: 100-continue is answered at once when nothing is owed before
 * it (else the client's own wait covers it); other expectations: 417. */
static int expectation(http_parser *p, sk_hs_req *r)
{
    hs_conn *c = p->data;
    const char *e = sk_hs_req_header(r, "Expect");
    if (!e) return 0;
    if (strcasecmp(e, "100-continue") != 0)
        return refuse_cb(p, 417, "expectation_failed", "only Expect: 100-continue is supported");
    bool body = (p->flags & F_CHUNKED) || (p->content_length > 0 && p->content_length != ULLONG_MAX);
    if (p->http_minor >= 1 && body && c->nq == 0 && evbuffer_get_length(c->out) == 0)
        evbuffer_add(c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    return 0;
}

/* Transfer-Encoding, when sent, is exactly one "chunked": any other
 * coding, a list ("gzip, chunked") or a repeated header is 501 (the
 * parser alone would read the chunks and ignore the coding before them). */
static int transfer_coding(http_parser *p, sk_hs_req *r)
{
    const char *te[2];
    size_t n = sk_hs_req_headers(r, "Transfer-Encoding", te, 2);
    if (n == 0 || (n == 1 && strcasecmp(te[0], "chunked") == 0)) return 0;
    return refuse_cb(p, 501, "not_implemented", "only Transfer-Encoding: chunked is supported");
}

/* The bytes at the start of s that are letters (alpha) or hex digits
 * (!alpha), digits, or in extra. Not strspn: glibc's builds a table of
 * the set on every call, and every request has a Host. */
static size_t host_span(const char *s, bool alpha, const char *extra)
{
    size_t n = 0;
    for (unsigned char c; (c = (unsigned char)s[n]) != '\0'; n++) {
        unsigned char l = c | 0x20;
        bool letter = alpha ? l >= 'a' && l <= 'z' : l >= 'a' && l <= 'f';
        if (!letter && !(c >= '0' && c <= '9') && !strchr(extra, c)) break;
    }
    return n;
}

/* A Host value: uri-host (reg-name or [IP-literal]) and an optional
 * port (RFC 9112 3.2, RFC 3986 3.2.2). Empty is allowed. */
static bool host_ok(const char *h)
{
    if (*h == '[') {
        size_t n = host_span(h + 1, false, ":.vV-_~!$&'()*+,;=");
        if (h[1 + n] != ']') return false;
        h += n + 2;
    } else {
        h += host_span(h, true, "-._~%!$&'()*+,;=");
    }
    if (*h == ':')
        for (h++; *h >= '0' && *h <= '9';) h++;
    return *h == '\0';
}

/* One Host (none is allowed in HTTP/1.0 only): a proxy and this server
 * must not read two different targets from one request. */
static int host_rule(http_parser *p, sk_hs_req *r)
{
    const char *h[2];
    size_t n = sk_hs_req_headers(r, "Host", h, 2);
    if (n > 1) return refuse_cb(p, 400, "bad_request", "more than one Host header");
    if (n == 0 && p->http_minor >= 1) return refuse_cb(p, 400, "bad_request", "HTTP/1.1 request without a Host header");
    if (n == 1 && !host_ok(h[0])) return refuse_cb(p, 400, "bad_request", "bad Host header");
    return 0;
}

/* A chunked body is decoded by hs__chunked from here on; the parser is
 * fed again only from the next message. HTTP/1.0 has no chunked coding:
 * its framing cannot be trusted (RFC 9112 6.1). */
static int chunked_start(http_parser *p, sk_hs_req *r)
{
    hs_conn *c = p->data;
    const sk_hs_opts *o = &c->s->o;
    if (!(p->flags & F_CHUNKED)) return 0;
    if (p->http_minor == 0) return refuse_cb(p, 400, "bad_request", "Transfer-Encoding in an HTTP/1.0 request");
    c->ck = (hs_chunked){.body_left = o->max_body,
                         .head_left = o->max_head - r->head_bytes,
                         .lines_left = o->max_headers_count - r->nhdrs};
    c->chunked = true;
    return 0;
}

static int on_headers_done(http_parser *p)
{
    hs_conn *c = p->data;
    sk_hs_req *r = c->cur;
    const sk_hs_opts *o = &c->s->o;
    if (head_end(p)) return -1;
    r->last = HS_NONE;
    if (p->http_major != 1) return refuse_cb(p, 505, "version_not_supported", "only HTTP/1.0 and 1.1");
    if (p->method >= 32 || !(o->methods & (1u << p->method)))
        return refuse_cb(p, 501, "not_implemented", "method not implemented");
    if (split_target(p, r) || transfer_coding(p, r) || host_rule(p, r)) return -1;
    if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX && p->content_length > o->max_body)
        return refuse_cb(p, 413, "too_large", "body over the size limit");
    if (expectation(p, r) || chunked_start(p, r)) return -1;
    r->method = (int)p->method;
    r->head_only = p->method == HTTP_HEAD;
    r->keep_alive = http_should_keep_alive(p) != 0;
    r->v10 = p->http_minor == 0;
    c->phase = HS_BODY;
    c->body_start = c->last_io;
    hs__wait_leave(c);
    return 0;
}

static int body_add(http_parser *p, const char *at, size_t n)
{
    sk_hs_req *r = cur_of(p);
    if (r->body_len + n > ((hs_conn *)p->data)->s->o.max_body)
        return refuse_cb(p, 413, "too_large", "body over the size limit");
    if (grow(&r->body, &r->body_cap, r->body_len + n + 1)) return refuse_cb(p, 500, "internal", "out of memory");
    memcpy(r->body + r->body_len, at, n);
    r->body_len += n;
    return 0;
}

/* The request is complete: queued for its handler. */
static void message_end(hs_conn *c)
{
    sk_hs_req *r = c->cur;
    c->cur = NULL;
    c->phase = HS_IDLE;
    if (r->body) r->body[r->body_len] = '\0';
    hs__enqueue(c, r);
}

static int on_complete(http_parser *p)
{
    hs_conn *c = p->data;
    message_end(c);
    if (c->closing || c->dead) return -1; /* no request after this one */
    http_parser_pause(p, 1);              /* the next head is scanned before the parser reads it */
    return 0;
}

void hs__parser_settings(http_parser_settings *ps)
{
    http_parser_settings_init(ps);
    ps->on_message_begin = on_begin;
    ps->on_url = on_url;
    ps->on_header_field = on_field;
    ps->on_header_value = on_value;
    ps->on_headers_complete = on_headers_done;
    ps->on_body = body_add;
    ps->on_message_complete = on_complete;
}

/* A parser error as status, code and message. bad is the refused byte. */
static void map_error(hs_conn *c, enum http_errno e, int bad)
{
    c->err_status = 400;
    c->err_code = "bad_request";
    switch (e) {
    case HPE_HEADER_OVERFLOW:
        c->err_status = 431;
        c->err_code = "headers_too_large";
        c->err_msg = "request head over the size limit";
        return;
    case HPE_INVALID_METHOD:
        /* a method-like token we do not know is 501; garbage is 400 */
        if ((bad >= 'A' && bad <= 'Z') || bad == '-' || bad == '_') {
            c->err_status = 501;
            c->err_code = "not_implemented";
            c->err_msg = "method not implemented";
        } else {
            c->err_msg = "malformed request line";
        }
        return;
    case HPE_INVALID_TRANSFER_ENCODING:
        c->err_status = 501;
        c->err_code = "not_implemented";
        c->err_msg = "only Transfer-Encoding: chunked is supported";
        return;
    case HPE_UNEXPECTED_CONTENT_LENGTH:
        c->err_msg = "Content-Length twice, or with Transfer-Encoding";
        return;
    case HPE_INVALID_CHUNK_SIZE:
    case HPE_INVALID_CONTENT_LENGTH: c->err_msg = "bad Content-Length or chunk size"; return;
    case HPE_INVALID_HEADER_TOKEN: c->err_msg = "bad character in a header"; return;
    case HPE_INVALID_URL:
    case HPE_INVALID_PATH:
    case HPE_INVALID_QUERY_STRING:
    case HPE_INVALID_FRAGMENT: c->err_msg = "bad request target"; return;
    case HPE_INVALID_VERSION: c->err_msg = "bad HTTP version"; return;
    default: c->err_msg = "malformed request"; return;
    }
}

static void reset_parser(hs_conn *c)
{
    void *d = c->p.data;
    http_parser_init(&c->p, HTTP_REQUEST);
    c->p.data = d;
}

/* The parser over d[0..n): a head only as far as hs__head_lines passed
 * it, a Content-Length body, up to the end of one message. Returns the
 * bytes used; *bad when refused. */
static size_t feed_parser(hs_conn *c, const char *d, size_t n, bool *bad)
{
    size_t lim = n;
    const char *msg;
    if (c->phase != HS_BODY && hs__head_lines(&c->lines, d, n, &lim, &msg) < 0) {
        c->err_status = 400;
        c->err_code = "bad_request";
        c->err_msg = msg;
        *bad = true;
        return n;
    }
    size_t k = http_parser_execute(&c->p, &c->s->ps, d, lim);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
    if (e == HPE_PAUSED) { /* a message ended (on_complete) */
        http_parser_pause(&c->p, 0);
        if (!hs__has_room(c)) c->paused = true;
    } else if (e != HPE_OK) {
        if (c->closing || c->dead) return k; /* stopped on purpose after a message */
        if (!c->err_status) map_error(c, e, k < lim ? (unsigned char)d[k] : -1);
        *bad = true;
        return k;
    }
    /* Upgrade: is not offered; the message was answered as plain
     * HTTP/1.1, the next one starts afresh */
    if (c->phase == HS_IDLE && c->p.upgrade) reset_parser(c);
    return k;
}

static const char *code_of(int status)
{
    return status == 413 ? "too_large" : status == 431 ? "headers_too_large" : "bad_request";
}

/* hs__chunked over d[0..n), up to the end of the message. */
static size_t feed_chunked(hs_conn *c, const char *d, size_t n, bool *bad)
{
    size_t used = 0;
    while (used < n) {
        size_t k, dlen;
        const char *data = NULL;
        int rc = hs__chunked(&c->ck, d + used, n - used, &k, &data, &dlen);
        used += k;
        if (rc < 0) {
            c->err_status = c->ck.status;
            c->err_code = code_of(c->ck.status);
            c->err_msg = c->ck.msg;
            *bad = true;
            return used;
        }
        if (dlen && body_add(&c->p, data, dlen)) {
            *bad = true;
            return used;
        }
        if (rc == 1) {
            c->chunked = false;
            reset_parser(c); /* it stopped at the body: read the next head afresh */
            message_end(c);
            if (!c->closing && !c->dead && !hs__has_room(c)) c->paused = true;
            break;
        }
    }
    return used;
}

static void parse_abort(hs_conn *c)
{
    hs__req_free(c->s, c->cur);
    c->cur = NULL;
    c->phase = HS_IDLE;
    c->chunked = false;
    c->lines = (hs_lines){0};
}

static size_t feed_input(hs_conn *c, const char *data, size_t n)
{
    size_t done = 0;
    while (done < n && !c->closing && !c->dead && !c->paused) {
        bool bad = false;
        if (c->chunked) done += feed_chunked(c, data + done, n - done, &bad);
        else done += feed_parser(c, data + done, n - done, &bad);
        if (bad) {
            parse_abort(c);
            hs__refuse(c, c->err_status, c->err_code, c->err_msg);
            return n;
        }
    }
    return c->paused ? done : n;
}
