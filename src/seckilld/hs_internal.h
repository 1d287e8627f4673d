/* hs_internal.h: the structures shared by hserver.c (server, listeners,
 * accepting), hs_conn.c (a connection's I/O, the libhttp-parser
 * callbacks building its requests, answer queue and deadlines) and hs_frame.c
 * (the head's line rules, the chunked body). Not a public interface:
 * everything here is owned by one event loop. */
#ifndef SK_HS_INTERNAL_H
#define SK_HS_INTERNAL_H

#include <http_parser.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "hserver.h"

struct event;
struct evbuffer;
struct evconnlistener;
typedef struct hs_conn hs_conn;
typedef struct hs_listener hs_listener;
typedef struct hs_addr_count hs_addr_count;

#define HS_READ_CHUNK 65536
#define HS_ADDR_BUCKETS 256
#define HS_OUT_HIGH (256 * 1024) /* answers waiting in memory: stop parsing more */

struct sk_hs {
    struct event_base *base;
    sk_hs_opts o;
    http_parser_settings ps;
    hs_listener *listeners;
    hs_conn *conns; /* every open connection */
    size_t nconns;
    size_t unflushed;
    bool draining;
    sk_hs_req *free_reqs; /* recycled requests */
    size_t nfree;
    time_t date_at;
    char date[40]; /* "Date: ...\r\n" of date_at */
    char rbuf[HS_READ_CHUNK];
};

/* Open connections in total and per client address: a listener's own, or
 * shared by the listeners of several loops (sk_hs_door, under its mutex). */
struct sk_hs_door {
    pthread_mutex_t mu;
    size_t nconns;
    hs_addr_count *addrs[HS_ADDR_BUCKETS];
};

struct hs_listener {
    sk_hs *s;
    hs_listener *next;
    struct evconnlistener *l;
    struct event *recheck; /* paused (cap, EMFILE): try again later */
    sk_hs_listen_opts o;
    sk_hs_door *door;      /* o.door, or own_door */
    sk_hs_door *own_door;
    bool paused;
    hs_conn *wait_head, *wait_tail; /* waiting for a complete head, oldest first */
};

struct hs_addr_count {
    hs_addr_count *next;
    size_t n;
    char addr[48];
};

typedef struct hs_hdr {
    uint32_t name, value; /* offsets into the request's head */
} hs_hdr;

enum hs_last { HS_NONE, HS_URL, HS_FIELD, HS_VALUE };

struct sk_hs_req {
    hs_conn *c; /* NULL: an orphan (its connection closed) */
    sk_hs_req *next;
    int method;
    bool head_only, keep_alive, v10, replied;
    enum hs_last last;
    unsigned tag;
    char *head; /* url, then header names and values, NUL-terminated */
    size_t head_len, head_cap;
    size_t url_len, head_bytes;
    size_t path_off, query_off; /* query_off 0: none */
    hs_hdr *hdrs;
    size_t nhdrs, hdr_cap;
    char *body;
    size_t body_len, body_cap;
    char *outh; /* the caller's answer headers, "Name: value\r\n"... */
    size_t outh_len, outh_cap;
    struct evbuffer *resp; /* a produced answer waiting for earlier ones */
    char peer[48];
};

enum hs_phase { HS_IDLE, HS_HEAD, HS_BODY };

/* Where hs__head_lines is in a request head. */
typedef struct hs_lines {
    bool cr;      /* the last byte was a CR */
    bool started; /* the request line has begun */
    bool mid;     /* inside a line */
} hs_lines;

/* A chunked body being decoded (hs__chunked); the budgets are set from
 * the limits when the head is complete and count down. */
typedef struct hs_chunked {
    int st;
    uint64_t size;     /* the chunk's size, then what is left of its data */
    size_t line;       /* bytes of the current chunk-size line */
    size_t body_left;  /* data and extension bytes still allowed */
    size_t head_left;  /* trailer bytes still allowed (max_head less the head) */
    size_t lines_left; /* trailer lines still allowed */
    int status;        /* a refusal: 400, 413 or 431, and why */
    const char *msg;
} hs_chunked;

struct hs_conn {
    sk_hs *s;
    hs_listener *l; /* NULL: adopted */
    hs_conn *prev, *next;
    hs_conn *wprev, *wnext;
    bool waiting; /* on l's wait list */
    int fd;
    unsigned tag;
    struct event *rev, *wev, *tev;
    struct evbuffer *out;
    http_parser p;
    hs_lines lines;          /* the head being read (phase idle or head) */
    hs_chunked ck;           /* the chunked body being read, when chunked */
    bool chunked;
    sk_hs_req *cur;          /* being parsed */
    sk_hs_req *qhead, *qtail; /* dispatched or refused, in order */
    size_t nq, in_out;       /* queued; answers in out */
    char *pend;              /* input kept while parsing is paused */
    size_t pend_len;
    enum hs_phase phase;
    bool eof, closing, lingering, in_read, paused, dead, reading;
    int64_t wait_since, head_start, body_start, last_io, armed, linger_until;
    int err_status; /* set by a parser callback that refuses */
    const char *err_code, *err_msg;
    char peer[48];
};

/* hs_conn.c */
int hs__conn_new(sk_hs *s, hs_listener *l, int fd, unsigned tag, const char *peer);
void hs__conn_close(hs_conn *c); /* deferred while its own read handler runs */
void hs__conn_free(hs_conn *c);  /* at once (the server is being freed) */
void hs__conn_drain(hs_conn *c); /* draining server: close now if idle */
void hs__wait_enter(hs_conn *c);
void hs__wait_leave(hs_conn *c);
/* Queues a complete request (dispatch) or a refusal (status != 0). */
void hs__enqueue(hs_conn *c, sk_hs_req *r);
void hs__refuse(hs_conn *c, int status, const char *code, const char *msg);
/* Room for another request: the pipeline and the answers waiting in
 * memory are under their caps (else reading pauses). */
bool hs__has_room(const hs_conn *c);
sk_hs_req *hs__req_new(sk_hs *s);
void hs__req_free(sk_hs *s, sk_hs_req *r); /* s NULL: never recycled */
void hs__req_pool_free(sk_hs *s);

/* hs_conn.c: the parser */
void hs__parser_settings(http_parser_settings *ps);

/* hs_frame.c */
/* A header or trailer value byte: HTAB, SP, VCHAR or obs-text (inline:
 * every value byte of every request goes through it). */
static inline bool hs__field_byte_ok(unsigned char ch) { return ch == '\t' || (ch >= 0x20 && ch != 0x7f); }
/* Scans d[0..n) of a request head. Returns 1 with *used the bytes up to
 * and including the blank line that ends it, 0 with *used = n while the
 * head goes on, -1 with *msg when a line does not end in CRLF, a CR has no
 * LF, or a line folds (starts with SP or HTAB). Blank lines before the
 * request line are skipped (RFC 9112 2.2). */
int hs__head_lines(hs_lines *s, const char *d, size_t n, size_t *used, const char **msg);
/* Decodes d[0..n) of a chunked body: returns 0 after *used bytes, with
 * *dlen bytes of data at *data (0: none yet), 1 when the message ended
 * after *used bytes, -1 when refused (k->status, k->msg). */
int hs__chunked(hs_chunked *k, const char *d, size_t n, size_t *used, const char **data, size_t *dlen);

/* hserver.c */
void hs__listener_conn_gone(hs_listener *l, const char *peer);
const char *hs__date(sk_hs *s);

#endif
