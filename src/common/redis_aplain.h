/* redis_aplain.h: one plain async connection on a libevent loop (internal
 * to src/common). The door everything else uses is redis_async.h, whose
 * dlock__aconn_* functions pick this file or the async Cluster router
 * (cluster_async.c); the router's per-node connections are plain ones and
 * its callbacks reach the caller through dlock__aplain_deliver/_report, so
 * it calls this file and never redis_async.c. Contracts: as the matching
 * dlock__aconn_* functions, for a non-cluster URL.
 */
#ifndef DLOCK_COMMON_REDIS_APLAIN_H
#define DLOCK_COMMON_REDIS_APLAIN_H

#include <event2/event.h>

#include "redis_async.h"

typedef struct dlock__acluster dlock__acluster;

/* The one deferred free of the async door (plain connections, the
 * Cluster router, the reconnecting connection): runs destroy(-1, 0, obj)
 * now, or on the loop's next turn when in_cb > 0 (obj's own callbacks are
 * on the stack, and what called them still reads obj when they return). */
void dlock__after_callbacks(struct event_base *base, int in_cb, event_callback_fn destroy, void *obj);

/* A redis-cluster:// URL is refused here (EINVAL): open it with the router. */
int dlock__aplain_open(struct event_base *base, const dlock__url *url, dlock__astate_cb on_state, void *priv,
                       dlock__aconn **out, char *err, size_t errlen);
int dlock__aplain_cmd(dlock__aconn *ac, dlock__acb cb, void *priv, int argc, const char **argv,
                      const size_t *lens);
int dlock__aplain_cmd_resp(dlock__aconn *ac, dlock__acb cb, void *priv, const char *cmd, size_t len);
/* Frees the connection (deferred inside its own callbacks), not its
 * router: detach and close that first. */
void dlock__aplain_close(dlock__aconn *ac);
bool dlock__aplain_is_up(const dlock__aconn *ac);
const char *dlock__aplain_refusal(const dlock__aconn *ac, bool *auth_out);
/* The endpoint as text ("host:port", for dlock__aconn_node_of_slot). */
const char *dlock__aplain_addr(const dlock__aconn *ac);

/* A connection object that carries a router instead of a socket (what
 * dlock__aconn_open returns for a redis-cluster:// URL); the router is set
 * once it is open. 0 or ENOMEM. */
int dlock__aplain_routing(struct event_base *base, const dlock__url *url, dlock__astate_cb on_state,
                          void *priv, dlock__aconn **out);
void dlock__aplain_set_router(dlock__aconn *ac, dlock__acluster *cl);
/* The router, NULL for a plain connection or one being closed. */
dlock__acluster *dlock__aplain_router(const dlock__aconn *ac);
/* Marks ac closing and hands its router back (NULL if none) to be closed. */
dlock__acluster *dlock__aplain_detach_router(dlock__aconn *ac);

/* For the router: runs a caller's reply callback as ac's own (freeing-safe). */
void dlock__aplain_deliver(dlock__aconn *ac, dlock__acb cb, dlock__reply *reply, int err, void *priv);
/* For the router: reports the routing connection's state to its owner. */
void dlock__aplain_report(dlock__aconn *ac, bool up, const char *why);

#endif
