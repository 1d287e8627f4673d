/* hs_parse.c: libhttp-parser callbacks that build one sk_hs_req per
 * message and enforce the request limits (hserver.h). Invariant: a
 * request reaches hs__enqueue only complete and inside every limit; the
 * parser reads only a head hs__head_lines has passed and a Content-Length
 * body (a chunked body is hs__chunked's, its trailers never become
 * headers); any refusal stops parsing on that connection (framing is no
 * longer known) and queues a JSON error after the answers already owed. */
#include "hs_internal.h"

#include <event2/buffer.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dlock/dlock.h"

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

/* A Host value: uri-host (reg-name or [IP-literal]) and an optional
 * port (RFC 9112 3.2, RFC 3986 3.2.2). Empty is allowed. */
static bool host_ok(const char *h)
{
    static const char reg[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%!$&'()*+,;=";
    if (*h == '[') {
        size_t n = strspn(h + 1, "0123456789abcdefABCDEF:.vV-_~!$&'()*+,;=");
        if (h[1 + n] != ']') return false;
        h += n + 2;
    } else {
        h += strspn(h, reg);
    }
    if (*h == ':') h += 1 + strspn(h + 1, "0123456789");
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

void hs__parse_abort(hs_conn *c)
{
    hs__req_free(c->s, c->cur);
    c->cur = NULL;
    c->phase = HS_IDLE;
    c->chunked = false;
    c->lines = (hs_lines){0};
}

size_t hs__feed(hs_conn *c, const char *data, size_t n)
{
    size_t done = 0;
    while (done < n && !c->closing && !c->dead && !c->paused) {
        bool bad = false;
        if (c->chunked) done += feed_chunked(c, data + done, n - done, &bad);
        else done += feed_parser(c, data + done, n - done, &bad);
        if (bad) {
            hs__parse_abort(c);
            hs__refuse(c, c->err_status, c->err_code, c->err_msg);
            return n;
        }
    }
    return c->paused ? done : n;
}
