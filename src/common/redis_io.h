/* redis_io.h: the door to hiredis, sync half (replies, sync connections,
 * Sentinel lookup); redis_async.h is the async (libevent) half. Everything
 * else in dlock talks to Redis through these types, so a hiredis upgrade
 * (0.14 -> 1.x) touches reply.c, redis_plain.c and redis_aplain.c alone
 * (redis_io.c and redis_async.c pick a plain connection or the router). Only API shared
 * by hiredis 0.14.1 and 1.x is used. Error codes are dlock__err
 * (common_err.h).
 *
 * Sync connections (dlock__conn) are used by one thread at a time; the
 * caller serialises.
 * Replies: a reply passed to the caller is owned by the caller and released
 * with dlock__reply_free (top-level reply only; elements belong to it),
 * except in async callbacks, where the reply is freed after the callback.
 */
#ifndef DLOCK_COMMON_REDIS_IO_H
#define DLOCK_COMMON_REDIS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common_err.h"
#include "reply.h"
#include "url.h"

typedef struct dlock__conn dlock__conn;

/* ---- sync connections ---------------------------------------------- */

typedef struct dlock__conn_opts {
    int64_t connect_timeout_ms;
    int64_t command_timeout_ms;
} dlock__conn_opts;

/* Connects to a TCP or UNIX endpoint, or, for a sentinel URL, to the
 * master the sentinels name (asked again at every reconnect, and checked
 * with ROLE), applies timeouts and TCP keepalive, sends AUTH and SELECT.
 * A redis-cluster:// URL gives a routing connection (cluster_conn.c):
 * the slot map is loaded (CLUSTER SLOTS, then SHARDS) from the first seed
 * that answers, and cmd and
 * pipeline route every command to the master of its keys' slot, following
 * MOVED/ASK/TRYAGAIN/CLUSTERDOWN within bounds; see "Cluster" below.
 * Returns 0, ECONN, EAUTH, ESERVER or ENOMEM; err says why. */
int dlock__conn_open(const dlock__url *url, const dlock__conn_opts *opts, dlock__conn **out,
                     char *err, size_t errlen);
void dlock__conn_close(dlock__conn *c);
/* Replaces the connection's timeouts (both > 0): the command timeout
 * applies to the next reply read (an open socket is updated at once), the
 * connect timeout to the next (re)open; on a Cluster connection, to every
 * node's. Used to bound one call by a deadline, then to restore. */
void dlock__conn_set_timeouts(dlock__conn *c, const dlock__conn_opts *opts);

/* Sends one command and reads its reply into *reply_out (which may be an
 * ERROR reply: the command was applied or refused by the server). A broken
 * connection (killed by the server while idle, earlier failure) is reopened
 * first, once. Returns 0, or
 *   ECONN/EAUTH: reconnect failed, nothing was sent;
 *   EUNKNOWN:    sent, then the reply did not come (timeout, reset);
 *   ENOMEM.
 * After EUNKNOWN the connection is closed and reopened on the next call. */
int dlock__conn_cmd(dlock__conn *c, int argc, const char **argv, const size_t *lens,
                    dlock__reply **reply_out);

/* Pipelines n commands and reads n replies (replies_out[n]); all-or-nothing
 * on transport errors, with the same codes as dlock__conn_cmd. */
int dlock__conn_pipeline(dlock__conn *c, size_t n, const int *argcs, const char *const *const *argvs,
                         const size_t *const *lens, dlock__reply **replies_out);

/* ---- Cluster (routing connections) ----------------------------------
 * On a redis-cluster:// connection, dlock__conn_cmd and _pipeline keep
 * the contracts above, plus:
 *  - routing: by the command's keys (EVAL* and FCALL* by numkeys, XREAD*
 *    after STREAMS); keys in two slots: DLOCK__ECROSSSLOT, nothing sent;
 *    a command the router does not know or that is node-state (SELECT,
 *    SUBSCRIBE, SCAN, KEYS...): DLOCK__EINVAL, nothing sent; MULTI..EXEC
 *    only inside one pipeline (one slot);
 *  - keyless: SCRIPT, FUNCTION, FLUSHALL, FLUSHDB go to every master (the
 *    first master's reply, or an error reply from any); WAIT, PING, INFO,
 *    ROLE, CLIENT, CONFIG, PUBLISH and other node commands go to the node
 *    of this connection's last routed command (so WAIT counts the replicas
 *    of that write), before any: the master of slot 0;
 *  - redirects: MOVED resends on the named node and refreshes the map (at
 *    most every 100 ms); ASK sends ASKING + the command once there; at
 *    most 5 redirects a command; TRYAGAIN / LOADING / MASTERDOWN /
 *    CLUSTERDOWN / READONLY: at most 8 retries (together) after 5, 10, 20,
 *    40, 80, 100, 100, 100 ms, CLUSTERDOWN and READONLY (a demoted master)
 *    after a map refresh, to the slot's master; past a bound the error
 *    reply is returned as the reply;
 *  - EUNKNOWN keeps its meaning: a command sent without a reply is never
 *    resent (the map is refreshed from another node before the next one);
 *    ECONN: the slot's master could not be reached and a refresh from the
 *    other nodes named no other master (nothing was sent).
 *  - pipelines: one pipeline per node, replies in the caller's order;
 *    ECONN only when nothing was sent anywhere, EUNKNOWN once anything was.
 *  - dlock__conn_send / _read_push return EINVAL and _fd -1: subscribe
 *    with a plain connection to dlock__conn_master_of_key's node. */

/* True for a redis-cluster:// routing connection. */
bool dlock__conn_is_cluster(const dlock__conn *c);
/* The master now serving key's slot, as a redis:// URL with the cluster
 * URL's credentials (for a plain connection to one node, e.g. SSUBSCRIBE).
 * On a plain connection: a copy of its own URL. 0, ECONN (slot unserved)
 * or ENOMEM; free *out with dlock__url_free. */
int dlock__conn_master_of_key(dlock__conn *c, const char *key, size_t len, dlock__url *out);
/* Sends a keyless command (INFO, WAIT, XINFO...) to the master of slot,
 * once, without redirects (a plain connection: dlock__conn_cmd). */
int dlock__conn_cmd_slot(dlock__conn *c, unsigned slot, int argc, const char **argv, const size_t *lens,
                         dlock__reply **reply_out);
/* One slot served by each master (at most max, in slot order), so that
 * dlock__conn_cmd_slot can visit every master; returns the count. A plain
 * connection: 1 (slot 0). */
size_t dlock__conn_cluster_slots(dlock__conn *c, unsigned *slots_out, size_t max);

/* Reads the next pushed message on a subscribed connection, waiting at
 * most timeout_ms. Returns 0 with *reply_out, ETIMEOUT when nothing came,
 * ECONN/EIO when the connection broke (it is then closed). */
int dlock__conn_read_push(dlock__conn *c, int64_t timeout_ms, dlock__reply **reply_out);

/* Sends one command without reading a reply (for subscribed connections,
 * whose replies are read with dlock__conn_read_push). The connection must
 * be open (no reopen: a subscribed socket is readable by design).
 * Returns 0, ECONN (not open / write failed: closed) or ENOMEM. */
int dlock__conn_send(dlock__conn *c, int argc, const char **argv, const size_t *lens);
/* The socket of an open connection (to poll alongside other fds), or -1. */
int dlock__conn_fd(const dlock__conn *c);

/* Last error text of this connection (for logs); never NULL. */
const char *dlock__conn_errstr(const dlock__conn *c);
bool dlock__conn_is_open(const dlock__conn *c);

/* Asks the sentinels in url for the current master of url->master_name and
 * writes a TCP url (auth and db taken from url) to *master_out. */
int dlock__sentinel_resolve(const dlock__url *url, const dlock__conn_opts *opts,
                            dlock__url *master_out, char *err, size_t errlen);

#endif
