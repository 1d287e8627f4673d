/* http.h: seckilld's HTTP front end (on the HTTP/1.1 layer hserver.h) over an sk_engine:
 * the JSON API of docs/http-api.md, /healthz, /metrics and /ping. One
 * server lives on one event loop with one engine (several loops of one
 * process form a group, for /metrics); nothing here blocks on
 * the purchase path (database calls happen only for admin, pay and order
 * reads; degraded-mode purchases run on sk_degraded's own thread). Every
 * answer, also every error, is JSON {"error","message"} except /metrics
 * (Prometheus text) and /ping. */
#ifndef SK_HTTP_H
#define SK_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct event_base;
typedef struct sk_http sk_http;
struct sk_db;
struct sk_degraded;
struct sk_hs_door;
struct sk_relay_door;
/* The servers of one process's loops (seckilld --threads N): /metrics on
 * any member reports the sum over all of them. Thread-safe; free it after
 * every member is freed. */
typedef struct sk_http_group sk_http_group;
int sk_http_group_new(sk_http_group **out); /* 0 or DLOCK_ENOMEM */
void sk_http_group_free(sk_http_group *g);  /* NULL ok */

typedef struct sk_http_opts {
    const char *admin_token;     /* NULL/"": the admin API answers 401 */
    const char *user_secret;     /* NULL/"": X-User-Signature not required (auth.h) */
    const char *user_secret_previous; /* NULL/"": none; else signatures made with it are
                                  * accepted too (key rotation) */
    bool user_signature_legacy;  /* also accept the unexpiring form, hex HMAC(secret, user) */
    const char *order_secret;    /* key of public order ids (order_ref.h); NULL/"": the admin
                                  * token's, else the user secret's, else random (this process) */
    int64_t idle_timeout_ms;     /* read/write inactivity before closing (default 10000) */
    size_t max_body;             /* JSON 413 above this (default 8192) */
    size_t max_headers;          /* request line + header bytes (default 8192): 431 above */
    int64_t head_timeout_ms;     /* first byte to complete head, whatever the pace (5000): 408 */
    int64_t body_timeout_ms;     /* complete head to complete body (10000): 408 */
    size_t max_connections;      /* open connections; at the cap the one waiting longest for a
                                  * head (>= 500 ms) makes room (default 10000) */
    size_t max_conns_per_addr;   /* from one client address (default 1024; 0 = no cap) */
    int ipv6_prefix;             /* per-address limits count IPv6 clients per network of this
                                  * many bits (default 64; 128: each address; sk_addr_group) */
    const char *trusted_proxies; /* "CIDR[,CIDR...]": peers whose X-Forwarded-For / Forwarded
                                  * is believed (client_addr.h); NULL/"": none */
    struct sk_db *db;            /* NULL: Redis only */
    struct sk_degraded *degraded;/* NULL: no database path when Redis is down (503) */
    sk_http_group *group;        /* NULL: a process with one loop */
    struct sk_hs_door *door;     /* connection counts shared with other loops (NULL: own) */
    struct sk_relay_door *relay; /* purchases decided by another loop's engine (relay.h;
                                  * NULL: this loop's own) */
} sk_http_opts;

void sk_http_opts_init(sk_http_opts *o);
/* Strings in opts are copied. 0 or DLOCK_ENOMEM. */
int sk_http_new(struct event_base *base, sk_engine *engine, const sk_http_opts *opts,
                sk_http **out);
/* Listens on addr:port (port 0 = any; the chosen port is returned in
 * *port_out). reuseport sets SO_REUSEPORT so several processes can share
 * a port. 0 or DLOCK_EIO (err says why). */
int sk_http_listen(sk_http *h, const char *addr, int port, bool reuseport, int *port_out,
                   char *err, size_t errlen);
/* Accepts on fd, a listening socket bound by the caller (sk_hs_bind); the
 * server owns it from now on, also on error. 0 or DLOCK_EIO. */
int sk_http_listen_fd(sk_http *h, int fd);
/* Leaves the group (before the engine is freed; sk_http_free does it too). */
void sk_http_leave_group(sk_http *h);
/* Stops accepting new connections (graceful shutdown); answers from now
 * on carry "Connection: close". */
void sk_http_stop_accepting(sk_http *h);
/* Requests received and not yet answered. */
size_t sk_http_inflight(const sk_http *h);
/* Answers produced and not yet completely written to their sockets. */
size_t sk_http_unflushed(const sk_http *h);
void sk_http_free(sk_http *h);

/* The times RFC 3339 can write (years 0000-9999, UTC): every time the
 * server reads is refused outside them, so each reads back as it came. */
#define SK_HTTP_TIME_MIN_MS INT64_C(-62167219200000) /* 0000-01-01T00:00:00Z */
#define SK_HTTP_TIME_MAX_MS INT64_C(253402300799999) /* 9999-12-31T23:59:59.999Z */
#define SK_HTTP_TIME_RULE "RFC 3339 (years 0000-9999) or unix ms 0..253402300799999"

/* RFC 3339 time ("2026-12-01T10:00:00+08:00", fraction optional) to unix
 * ms; 0, or SK_EINVAL (also for an instant outside SK_HTTP_TIME_MIN_MS ..
 * SK_HTTP_TIME_MAX_MS, which an offset can reach: "9999-12-31T23:00:00-02:00"). */
int sk_http_parse_time(const char *s, size_t len, int64_t *ms_out);
/* Unix ms to RFC 3339 UTC ("2026-12-01T02:00:00Z", ".mmm" when needed). */
void sk_http_format_time(int64_t ms, char out[40]);

#endif
