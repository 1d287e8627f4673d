/* etcd_gw.h: a client of etcd's v3 JSON gateway (POST /v3/...) over
 * libcurl, for libdlock's etcd backend. Internal only.
 *
 * Thread-safety: a dlock__gw is safe from any number of threads (a mutex-
 * guarded pool of curl handles; each handle keeps its HTTP connections).
 * A dlock__gw_wait is cancelled from any thread.
 * Wire facts handled here once: keys and values are base64; int64 fields
 * are JSON strings; fields holding their default (0, false, "") are
 * omitted; stream endpoints wrap each message in {"result": ...}.
 * Errors (dlock_err): ECONN nothing was sent (every endpoint refused or
 * timed out connecting), EUNKNOWN sent but no answer (a call marked
 * DLOCK__GW_RETRY is resent to the next endpoint first, and is EUNKNOWN
 * only if no later try got an answer either), EAUTH
 * credentials refused, ESERVER etcd answered an error (reply.code and
 * reply.msg say which) or the answer was not JSON, ENOMEM.
 */
#ifndef DLOCK_LIB_ETCD_GW_H
#define DLOCK_LIB_ETCD_GW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd_url.h"
#include "json.h"

typedef struct dlock__gw dlock__gw;

typedef void (*dlock__gw_log_fn)(void *ud, int level, const char *msg); /* level: dlock_log_level */

typedef struct dlock__gw_opts {
    int64_t connect_timeout_ms;
    int64_t command_timeout_ms;
    int retry_attempts;     /* extra rounds over all endpoints, with backoff */
    int64_t retry_delay_ms;
    int pool_size;          /* curl handles kept */
    dlock__gw_log_fn log_fn;
    void *log_ud;
} dlock__gw_opts;

/* etcd's gRPC status codes the backend reacts to. */
#define DLOCK__GRPC_INVALID_ARGUMENT 3
#define DLOCK__GRPC_NOT_FOUND 5
#define DLOCK__GRPC_PERMISSION_DENIED 7
#define DLOCK__GRPC_UNAVAILABLE 14
#define DLOCK__GRPC_UNAUTHENTICATED 16

typedef struct dlock__gw_reply {
    dlock__json_doc doc;
    const dlock__json_val *root; /* the answer object ("result" unwrapped), NULL on error */
    int code;                    /* etcd's error code when it answered an error, else 0 */
    char msg[256];               /* etcd's error message, or what went wrong */
} dlock__gw_reply;

/* The call may be resent after a lost answer (it is idempotent, or a
 * duplicate does no harm). */
#define DLOCK__GW_RETRY 1

/* Copies u, authenticates when u has a user, and checks the cluster with
 * one request. Returns 0 and *out, or ECONN/EAUTH/ESERVER/ENOMEM/EINVAL
 * with err naming the problem. */
int dlock__gw_open(const dlock__etcd_url *u, const dlock__gw_opts *o, dlock__gw **out, char *err,
                   size_t errlen);
void dlock__gw_close(dlock__gw *g); /* NULL is a no-op */

/* POSTs body (JSON) to path ("/v3/kv/txn") and parses the answer.
 * The reply is always to be freed with dlock__gw_reply_free. */
int dlock__gw_call(dlock__gw *g, const char *path, const char *body, int flags, dlock__gw_reply *r);
/* The same, but no try runs past deadline_ms (monotonic): each try's
 * timeout is cut to what is left and no new try starts after it (a
 * keepalive that cannot arrive before the lease ends is worthless). */
int dlock__gw_call_until(dlock__gw *g, const char *path, const char *body, int flags, int64_t deadline_ms,
                         dlock__gw_reply *r);
void dlock__gw_reply_free(dlock__gw_reply *r);
/* The same with a body built in a dlock__buf, which it frees (an
 * out-of-memory buffer is ENOMEM without sending). */
int dlock__gw_call_buf(dlock__gw *g, const char *path, dlock__buf *body, int flags, dlock__gw_reply *r);

/* ---- waiting for a key's deletion (streaming POST /v3/watch) ---------- */

typedef struct dlock__gw_wait dlock__gw_wait;
int dlock__gw_wait_new(dlock__gw_wait **out);
/* Makes the current or next dlock__gw_watch_delete on w return ECANCELED. */
void dlock__gw_wait_cancel(dlock__gw_wait *w);
/* Clears a cancel that was delivered (or not yet consumed). */
void dlock__gw_wait_reset(dlock__gw_wait *w);
void dlock__gw_wait_free(dlock__gw_wait *w);

/* Watches key (raw bytes) from revision from_rev until a DELETE event for
 * it arrives (0), until_ms on the monotonic clock passes (ETIMEOUT), w is
 * cancelled (ECANCELED), tick(ud) returns non-zero (that code), or the
 * stream breaks or is compacted (ECONN: re-check and watch again). tick is
 * called about every tick_ms while waiting (e.g. to keep a lease alive). */
int dlock__gw_watch_delete(dlock__gw *g, dlock__gw_wait *w, const char *key, size_t keylen,
                           int64_t from_rev, int64_t until_ms, int64_t tick_ms, int (*tick)(void *ud),
                           void *ud);

/* ---- reading answers ---------------------------------------------------- */

/* Member name of obj, also accepting its lowerCamelCase spelling. */
const dlock__json_val *dlock__gw_get(const dlock__json_doc *d, const dlock__json_val *obj, const char *name);
/* An int64 field (a JSON string or number); absent (the default) is 0. */
int64_t dlock__gw_int(const dlock__json_doc *d, const dlock__json_val *obj, const char *name);
/* A bool field; absent (the default) is false. */
bool dlock__gw_bool(const dlock__json_doc *d, const dlock__json_val *obj, const char *name);
/* A base64 field decoded into out (NUL-terminated); absent is "".
 * 0, or DLOCK_ESERVER when not valid base64 or longer than outlen - 1. */
int dlock__gw_b64(const dlock__json_doc *d, const dlock__json_val *obj, const char *name, char *out,
                  size_t outlen, size_t *len_out);
/* The i-th element of array member name of obj, or NULL. */
const dlock__json_val *dlock__gw_at(const dlock__json_doc *d, const dlock__json_val *obj, const char *name,
                                    int i);

/* Appends a string literal to a dlock__buf. */
#define DLOCK__BUF_LIT(b, lit) dlock__buf_append((b), "" lit, sizeof(lit) - 1)

/* Appends "name":"<base64 of s[0..n)>". */
void dlock__gw_put_b64(dlock__buf *b, const char *name, const char *s, size_t n);

#endif
