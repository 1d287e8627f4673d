/* redis_rconn.h: one reconnecting Redis connection on a libevent loop: an
 * async connection (redis_async.h) that opens again after a loss with
 * backoff, the commands in flight in a FIFO with a reply deadline, and
 * scripts sent EVALSHA and, on NOSCRIPT, once more as EVAL. The engine's
 * every connection is one of these; nothing about it is per program.
 *
 * Contracts. Used only from its loop's thread. A command's callback runs
 * exactly once when the send returned 0, never when it returned an error.
 * Every function here is safe inside the rconn's own callbacks, free
 * included (its memory then goes on the loop's next turn). Codes are
 * dlock__err (common_err.h), as the owner's on_reply may change them.
 *
 * Deadlines (dlock__rconn_check, called by the owner's timer): a connect
 * that has not come up within timeout_ms is dropped (hiredis's async
 * connect has none: a partition would hold it for the kernel's SYN
 * retries); so is the connection when its oldest unanswered command was
 * not answered timeout_ms (plus its own WAIT timeout) after it was sent
 * and after the reply ahead of it came: measured from the reply ahead, not
 * accumulated, so a queue of WAITs that each overshoot a little never adds
 * up to a false deadline. A dropped or lost connection's commands in flight
 * get reply NULL and DLOCK__EUNKNOWN (sent: the outcome is unknown). */
#ifndef DLOCK_COMMON_REDIS_RCONN_H
#define DLOCK_COMMON_REDIS_RCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_async.h"
#include "script.h"

typedef struct dlock__rconn dlock__rconn;

/* What happened to the connection (on_state). */
typedef enum {
    DLOCK__RCONN_UP,      /* connected (AUTH/SELECT queued) */
    DLOCK__RCONN_LOST,    /* the server or the network closed it */
    DLOCK__RCONN_DROPPED, /* closed here: dlock__rconn_drop or a deadline */
    DLOCK__RCONN_FAILED,  /* could not even start to connect (why: the reason) */
} dlock__rconn_event;

/* A command's reply: reply NULL when err != 0 and no reply came. */
typedef void (*dlock__rconn_fn)(const dlock__reply *reply, int err, void *priv);

typedef struct dlock__rconn_opts {
    struct event_base *base;
    const dlock__url *url;  /* not copied: must outlive the rconn (a sentinel URL is resolved at each connect) */
    int64_t timeout_ms;     /* connect and reply deadline (> 0) */
    int64_t backoff_max_ms; /* reconnect backoff: 50 ms, doubling, at most this */
    void *owner;            /* handed to the three functions below */
    /* The connection came up or went. ac: that connection (readable
     * here: dlock__aconn_refusal), NULL for FAILED. After a loss or a
     * drop it is closed when this returns; the next connect follows the
     * backoff. May be NULL. */
    void (*on_state)(dlock__rconn *rc, dlock__rconn_event ev, dlock__aconn *ac, const char *why, void *owner);
    /* Sees each final reply (not a NOSCRIPT that is answered by sending
     * the source) before its command's callback and returns the err that
     * callback gets. slot: the command's (-1: none). May be NULL. */
    int (*on_reply)(dlock__rconn *rc, int slot, const dlock__reply *reply, int err, void *owner);
    /* Whether a reconnect due after the backoff may connect now; false:
     * it waits for dlock__rconn_connect. May be NULL (always). */
    bool (*may_connect)(dlock__rconn *rc, void *owner);
} dlock__rconn_opts;

/* Makes the connection without connecting (dlock__rconn_connect). 0,
 * DLOCK__EINVAL (no base/url, timeout_ms <= 0) or DLOCK__ENOMEM. */
int dlock__rconn_new(const dlock__rconn_opts *o, dlock__rconn **out);
/* Connects now unless connected or connecting (a pending backoff is cut short). */
void dlock__rconn_connect(dlock__rconn *rc);
/* Closes now (on_state DROPPED, then the commands in flight fail) and
 * connects again after the backoff. Nothing when not connected. */
void dlock__rconn_drop(dlock__rconn *rc, const char *why);
/* Which deadline dlock__rconn_check found passed (it dropped the connection). */
enum { DLOCK__RCONN_IN_TIME = 0, DLOCK__RCONN_CONNECT_LATE = 1, DLOCK__RCONN_REPLY_LATE = 2 };
/* Applies the deadlines at now (monotonic ms): DLOCK__RCONN_IN_TIME, or
 * the one that passed; the connection was then dropped as by
 * dlock__rconn_drop ("connect timed out", "reply deadline passed"). */
int dlock__rconn_check(dlock__rconn *rc, int64_t now);
/* The connection works: the next loss reconnects after 50 ms again. */
void dlock__rconn_backoff_reset(dlock__rconn *rc);
/* Closes (commands in flight fail now; no on_state) and frees. NULL ok. */
void dlock__rconn_free(dlock__rconn *rc);

/* Connected and not closing. */
bool dlock__rconn_is_up(const dlock__rconn *rc);
/* The current connection (connecting or up), NULL while there is none. */
dlock__aconn *dlock__rconn_aconn(const dlock__rconn *rc);

/* Sends argv (lens NULL: NUL-terminated) to the master of slot on a
 * Cluster (dlock__aconn_cmd_slot: once, no redirect), slot -1: routed by
 * its keys (dlock__aconn_cmd). 0 (fn will run) or DLOCK__ECONN (not up),
 * DLOCK__ENOMEM, or the door's code (fn will not). */
int dlock__rconn_cmd(dlock__rconn *rc, int slot, int argc, const char **argv, const size_t *lens,
                     dlock__rconn_fn fn, void *priv);
/* WAIT replicas timeout_ms, to the master of slot (-1: the one server):
 * as dlock__rconn_cmd, its reply deadline extended by timeout_ms. */
int dlock__rconn_wait(dlock__rconn *rc, int slot, int replicas, int64_t timeout_ms, dlock__rconn_fn fn,
                      void *priv);
/* Runs script s with its arguments (numkeys, keys, argv: nargs bulk
 * strings of len bytes, written as RESP, copied) whose keys are in slot
 * (-1: none): EVALSHA, and once EVAL when the server answers NOSCRIPT
 * (dlock__script_rcall_send). As dlock__rconn_cmd. */
int dlock__rconn_script(dlock__rconn *rc, const dlock__script *s, const char *args, size_t len, int nargs,
                        int slot, dlock__rconn_fn fn, void *priv);

#endif
