/* cluster_async.h: the async Redis Cluster router behind a dlock__aconn
 * opened on a redis-cluster:// URL (redis_async.c delegates to it; callers
 * see only dlock__aconn). Internal to src/common; one libevent loop, its
 * thread only. Behaviour: redis_async.h and cluster_async.c's design note.
 */
#ifndef DLOCK_COMMON_CLUSTER_ASYNC_H
#define DLOCK_COMMON_CLUSTER_ASYNC_H

#include <stdint.h>

#include "redis_async.h"

typedef struct dlock__acluster dlock__acluster;

/* Loads the map synchronously (<= 500 ms connect + 500 ms reply a seed);
 * `outer` is the dlock__aconn the caller holds: callbacks name it. */
int dlock__acluster_open(struct event_base *base, const dlock__url *url, dlock__aconn *outer,
                         dlock__acluster **out, char *err, size_t errlen);
void dlock__acluster_close(dlock__acluster *cl);
/* slot < 0: route by the command's keys; else to slot's master, once. */
int dlock__acluster_cmd(dlock__acluster *cl, int slot, dlock__acb cb, void *priv, int argc, const char **argv,
                        const size_t *lens);
/* A command written in RESP (cmd[0..len), copied, sent as written): slot
 * >= 0: its keys' slot, routed as a keyed command (redirects followed);
 * slot < 0: read back into argv to find its keys (counted), then routed as
 * dlock__acluster_cmd routes it, still sent as written. */
int dlock__acluster_cmd_resp(dlock__acluster *cl, int slot, dlock__acb cb, void *priv, const char *cmd,
                             size_t len);
/* Commands dlock__acluster_cmd_resp read back into argv so far. */
uint64_t dlock__acluster_parsed(const dlock__acluster *cl);
bool dlock__acluster_is_up(const dlock__acluster *cl);
int dlock__acluster_node_of_slot(dlock__acluster *cl, unsigned slot, char *buf, size_t len);

/* ---- provided by redis_async.c for the router ---- */
/* Runs a caller's reply callback as the aconn's own (freeing-safe). */
void dlock__aconn_deliver(dlock__aconn *ac, dlock__acb cb, dlock__reply *reply, int err, void *priv);
/* Reports the routing connection's state to the caller's state callback. */
void dlock__aconn_report(dlock__aconn *ac, bool up, const char *why);

#endif
