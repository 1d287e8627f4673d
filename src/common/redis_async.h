/* redis_async.h: the door to hiredis, async half: connections driven by a
 * libevent loop. Kept apart from redis_io.h so that only programs that use
 * it (the flash-sale engine) link libevent; libdlock does not.
 *
 * Async connections (dlock__aconn) live on one libevent loop and are used
 * only from that loop's thread. A reply passed to a callback is freed after
 * the callback returns. Error codes are dlock__err (common_err.h). A
 * command costs no epoll_ctl: what is queued in one loop turn is written at
 * its end, and the socket is watched for writing only while the kernel's
 * buffer is full (redis_aplain.c). A connection that reconnects by
 * itself and tracks its commands' deadlines (dlock__rconn) is at the end.
 */
#ifndef DLOCK_COMMON_REDIS_ASYNC_H
#define DLOCK_COMMON_REDIS_ASYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_io.h"

typedef struct dlock__aconn dlock__aconn;
struct event_base;

/* Reply callback: reply is NULL when the command failed without a reply
 * (err then is EUNKNOWN if it was sent, ECONN otherwise). Called exactly
 * once per accepted command, also when the connection goes away. */
typedef void (*dlock__acb)(dlock__aconn *ac, dlock__reply *reply, int err, void *priv);
/* Connection state callback: up=true once connected (AUTH/SELECT queued),
 * up=false when the connection is gone; the aconn is then unusable and
 * must be released with dlock__aconn_close (inside this callback or
 * later: see dlock__aconn_close). */
typedef void (*dlock__astate_cb)(dlock__aconn *ac, bool up, const char *why, void *priv);

/* Starts connecting (TCP, UNIX, or the master named by the sentinels of a
 * sentinel URL: that lookup is synchronous, at most 500 ms a sentinel).
 * A redis-cluster:// URL gives a routing connection (cluster_async.c):
 * the slot map is loaded synchronously from the first seed that answers
 * (at most 500 ms connect + 500 ms reply a seed; none: ECONN/EAUTH and
 * no callback), then one async connection per master is opened on first
 * use, on the same loop; see "Cluster" below. */
int dlock__aconn_open(struct event_base *base, const dlock__url *url, dlock__astate_cb on_state, void *priv,
                      dlock__aconn **out, char *err, size_t errlen);
/* Queues a command; returns 0 (cb will run) or ECONN/ENOMEM (cb will not). */
int dlock__aconn_cmd(dlock__aconn *ac, dlock__acb cb, void *priv, int argc, const char **argv,
                     const size_t *lens);
/* Queues one command already written in RESP (cmd[0..len), an array of
 * bulk strings, copied and sent as written); as dlock__aconn_cmd. On a
 * Cluster aconn it is read back into argv to find its keys (see
 * dlock__aconn_resp_parsed), then sent as written. */
int dlock__aconn_cmd_resp(dlock__aconn *ac, dlock__acb cb, void *priv, const char *cmd, size_t len);
/* The same for a caller that knows the slot of every key of cmd (slot <
 * 0: it has none, exactly dlock__aconn_cmd_resp). On a Cluster aconn it
 * goes to that slot's master as a keyed command does (redirects and
 * retries, the never-resent rule: "Cluster" below) and is never parsed:
 * the bytes go out as written, also on every resend; slot >= 16384:
 * EINVAL. A plain aconn ignores slot. */
int dlock__aconn_cmd_resp_slot(dlock__aconn *ac, int slot, dlock__acb cb, void *priv, const char *cmd,
                               size_t len);
/* Disconnects (pending callbacks run with reply NULL, before it returns;
 * no state callback) and frees. NULL ok. Safe anywhere, also inside this
 * aconn's own reply and state callbacks: its memory is then freed on the
 * loop's next turn. */
void dlock__aconn_close(dlock__aconn *ac);
bool dlock__aconn_is_up(const dlock__aconn *ac);
/* Why the server refused the connection's AUTH or SELECT ("AUTH refused:
 * WRONGPASS ..."; the server's text, never the password), or NULL when it
 * did not. The connection then goes down with that text as the reason.
 * *auth_out (may be NULL): the refusal was about credentials (AUTH, or
 * NOAUTH to SELECT). */
const char *dlock__aconn_refusal(const dlock__aconn *ac, bool *auth_out);

/* ---- Cluster (routing connections) ---------------------------------
 * dlock__aconn_cmd (and _cmd_resp, _cmd_resp_slot) on a redis-cluster://
 * aconn routes like the sync router (redis_io.h, "Cluster"): by keys (or
 * the slot given) (ECROSSSLOT / EINVAL returned,
 * callback not run, for keys in two slots or an unroutable command;
 * MULTI/EXEC are refused), SCRIPT/FUNCTION/FLUSH* to every master (the
 * callback gets the last master's reply, or the first error reply a
 * master gave; NULL + EUNKNOWN if a master was lost), other keyless
 * commands to the node of the last routed command; MOVED/ASK and the
 * retryable errors (TRYAGAIN, LOADING, MASTERDOWN, CLUSTERDOWN, READONLY)
 * followed within the same bounds. Replies of one node come
 * in order; across nodes they do not. A command written to a node whose
 * connection then dropped is never resent (reply NULL, EUNKNOWN); one
 * never written (the node's connection never came up) is retried every
 * 100 ms on the slot's owner, at most 5 times, then NULL + ECONN.
 * State callback: up once the map is loaded (the loop's next turn after
 * open); down only when a map refresh found no node reachable (then close
 * it, as a plain aconn). A single node's loss is handled inside: its
 * connection is closed, the map refreshed from the others (at most every
 * 100 ms), the node reopened on next use. */

bool dlock__aconn_is_cluster(const dlock__aconn *ac);
/* Sends a command (keyless: WAIT, INFO...) to the master that serves
 * slot now, once, without following redirects; a plain aconn sends it on
 * its one connection. Returns like dlock__aconn_cmd. WAIT there counts
 * the replicas of that node's connection's writes from this aconn. */
int dlock__aconn_cmd_slot(dlock__aconn *ac, unsigned slot, dlock__acb cb, void *priv, int argc,
                          const char **argv, const size_t *lens);
/* "host:port" of the master serving slot (per-node metrics); a plain
 * aconn: its endpoint. 0, ECONN (slot unserved) or EINVAL. */
int dlock__aconn_node_of_slot(dlock__aconn *ac, unsigned slot, char *buf, size_t len);
/* How many commands a Cluster aconn has read back from RESP into argv to
 * route them (dlock__aconn_cmd_resp, or _slot with no slot); 0 on a plain
 * aconn. A figure for tests and metrics. */
uint64_t dlock__aconn_resp_parsed(const dlock__aconn *ac);

/* ---- the reconnecting connection (dlock__rconn) ---------------------
 * One reconnecting Redis connection on a libevent loop: an async
 * connection (above) that opens again after a loss with backoff, the
 * commands in flight in a FIFO with a reply deadline, and scripts sent
 * EVALSHA and, on NOSCRIPT, once more as EVAL. The engine's every
 * connection is one of these; nothing about it is per program.
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
typedef struct dlock__rconn dlock__rconn;
struct dlock__script; /* script.h */

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
int dlock__rconn_script(dlock__rconn *rc, const struct dlock__script *s, const char *args, size_t len,
                        int nargs, int slot, dlock__rconn_fn fn, void *priv);

#endif
