/* hserver.h: a lean HTTP/1.1 server on one libevent loop (raw sockets +
 * events, Debian's libhttp-parser for the syntax). It owns connections,
 * limits and framing; the caller owns routes. Every request reaches the
 * callback complete (head and body) and well-formed, or is answered by the
 * layer itself with a JSON error {"error","message"} and the connection
 * closed. Answers on one connection leave in request order, whenever the
 * caller produces them (keep-alive, pipelining, asynchronous answers).
 *
 * Thread-safety: none, except sk_hs_door; one server, its requests and its
 * listeners belong to the thread running its event loop. Writes use writev(): the process
 * ignores SIGPIPE (seckilld does). */
#ifndef SK_HSERVER_H
#define SK_HSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h" /* dlock__buf */

struct event_base;
typedef struct sk_hs sk_hs;
/* One request. Valid from the callback until sk_hs_reply() (which frees
 * it), also after its client vanished: answering an orphan only frees it. */
typedef struct sk_hs_req sk_hs_req;

/* Called once per complete request. It must lead, now or later, to
 * exactly one sk_hs_reply() of req. */
typedef void (*sk_hs_request_cb)(sk_hs_req *req, void *ud);

typedef struct sk_hs_opts {
    size_t max_head;            /* request line + headers, bytes (8192): 431 above */
    size_t max_url;             /* request target, bytes (4096): 414 above */
    size_t max_headers_count;   /* header lines (100): 431 above */
    size_t max_body;            /* body bytes (8192): 413 above, before reading it */
    int64_t head_timeout_ms;    /* first byte to complete head (5000): 408, closed */
    int64_t body_timeout_ms;    /* complete head to complete body (10000): 408, closed */
    int64_t idle_timeout_ms;    /* silence while reading or writing (10000): closed */
    size_t max_pipeline;        /* requests held per connection before reading pauses (64) */
    unsigned methods;           /* allowed methods: bits (1u << enum http_method); 0: GET,
                                 * HEAD, POST, PUT, DELETE, OPTIONS, PATCH. Others: 501 */
    sk_hs_request_cb on_request;
    void *ud;
} sk_hs_opts;

/* Connection counts (total and per client address) shared by listeners
 * on several loops, so the caps below hold for all of them together (one
 * seckilld process with --threads N). Thread-safe; free it after every
 * listener using it is gone. */
typedef struct sk_hs_door sk_hs_door;
int sk_hs_door_new(sk_hs_door **out); /* 0 or DLOCK_ENOMEM */
void sk_hs_door_free(sk_hs_door *d);  /* NULL ok */

typedef struct sk_hs_listen_opts {
    sk_hs_door *door;           /* NULL: this listener counts alone */
    unsigned tag;               /* handed to requests (sk_hs_req_tag): which door */
    size_t max_conns;           /* open connections of this listener (10000) */
    size_t max_conns_per_addr;  /* from one client address (1024; 0: no limit): beyond,
                                 * a 503 JSON answer and close */
    int ipv6_prefix;            /* IPv6 peers count per network of this many bits (64; 128:
                                 * each address); ::ffff:a.b.c.d as a.b.c.d (sk_addr_group) */
    int64_t evict_after_ms;     /* at max_conns, a new connection replaces the one that has
                                 * waited longest for a complete head, if it waited this
                                 * long (500; 0: never evict, pause accepting instead) */
} sk_hs_listen_opts;

void sk_hs_opts_init(sk_hs_opts *o);
void sk_hs_listen_opts_init(sk_hs_listen_opts *o);

/* 0, SK_EINVAL (no on_request) or DLOCK_ENOMEM. */
int sk_hs_new(struct event_base *base, const sk_hs_opts *opts, sk_hs **out);

/* A listening TCP socket on addr:port (NULL/"" = any; port 0 = any, the
 * chosen one in *port_out), non-blocking, close-on-exec, SO_REUSEADDR and,
 * when reuseport, SO_REUSEPORT. Returns the fd, or -1 with err set. */
int sk_hs_bind(const char *addr, int port, bool reuseport, int *port_out, char *err, size_t errlen);

/* Accepts on fd (a listening socket the caller bound; the server closes it
 * when it stops). accept() failing (EMFILE: the process's fd limit) pauses
 * this listener for 100 ms instead of spinning. 0, DLOCK_ENOMEM or
 * DLOCK_EIO; on error fd is not closed. */
int sk_hs_listen(sk_hs *s, int fd, const sk_hs_listen_opts *lo);

/* Serves an already connected socket (tests, the fuzzer) as if accepted
 * by listener tag; peer is its printable address. Closes fd on error. */
int sk_hs_adopt(sk_hs *s, int fd, unsigned tag, const char *peer);

/* Graceful shutdown: closes the listeners, closes connections waiting for
 * a request, and every answer from now on carries "Connection: close". */
void sk_hs_stop_accepting(sk_hs *s);

/* Answers produced and not yet completely written to their sockets. */
size_t sk_hs_unflushed(const sk_hs *s);
/* Open connections (all listeners). */
size_t sk_hs_connections(const sk_hs *s);

/* Closes every connection; requests still unanswered become orphans that
 * their sk_hs_reply() frees. NULL is a no-op. */
void sk_hs_free(sk_hs *s);

/* ---- a request (valid until answered) ---------------------------------- */

int sk_hs_req_method(const sk_hs_req *r);             /* enum http_method */
const char *sk_hs_req_method_name(const sk_hs_req *r);
const char *sk_hs_req_path(const sk_hs_req *r);       /* raw (not %-decoded), "/" at least */
const char *sk_hs_req_query(const sk_hs_req *r);      /* after '?', NULL when absent */
/* The first header of that name (case-insensitive), trimmed; NULL if absent.
 * Values never hold control bytes other than HTAB (refused with 400). */
const char *sk_hs_req_header(const sk_hs_req *r, const char *name);
/* Every header of that name, in order: the first max into out; returns
 * how many there are (also beyond max). */
size_t sk_hs_req_headers(const sk_hs_req *r, const char *name, const char **out, size_t max);
/* Body (NUL-terminated, may hold NULs itself); "" and 0 when empty. */
const char *sk_hs_req_body(const sk_hs_req *r, size_t *len_out);
const char *sk_hs_req_peer(const sk_hs_req *r);       /* client address ("127.0.0.1") */
unsigned sk_hs_req_tag(const sk_hs_req *r);           /* the listener's tag */

/* Adds an answer header (before sk_hs_reply). Content-Length, Date and
 * Connection are the layer's. 0, SK_EINVAL (CR, LF or NUL in name or
 * value) or DLOCK_ENOMEM. */
int sk_hs_reply_header(sk_hs_req *r, const char *name, const char *value);
/* Adds header lines already formatted ("Name: value\r\n"..., n bytes): the
 * caller's constants, not checked. 0 or DLOCK_ENOMEM. */
int sk_hs_reply_header_lines(sk_hs_req *r, const char *lines, size_t n);
/* Answers r (status 100..599, body may be NULL) and frees it; the answer
 * is written once every earlier answer on its connection is. A HEAD
 * request gets the headers only. */
void sk_hs_reply(sk_hs_req *r, int status, const void *body, size_t len);

/* The JSON error shape every layer error uses: {"error":code,"message":msg}
 * with Content-Type application/json. */
void sk_hs_reply_error(sk_hs_req *r, int status, const char *code, const char *msg);
/* {"error":code,"message":msg}\n appended to b: the one error body of both
 * the HTTP layer and the routes above it. */
void sk_hs_error_body(dlock__buf *b, const char *code, const char *msg);

#endif
