/* cluster_router.h: the state one Redis Cluster router keeps, and what it
 * does with a reply, shared by its three I/O drivers (the sync
 * cluster_conn.c, the libevent cluster_async.c and libdlock's asynchronous
 * client, src/lib/async_cluster.c). No I/O here: a node table (host:port, an
 * index per node that a driver uses for its own connection array), the
 * slot map, the node of the last routed command, the node that last failed
 * and the refresh bookkeeping, and a command's hop (where it goes next,
 * after which redirects and retries). Not thread-safe: one driver, one
 * thread (as its connection). Bounds: cluster_map.h. */
#ifndef DLOCK_COMMON_CLUSTER_ROUTER_H
#define DLOCK_COMMON_CLUSTER_ROUTER_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster_map.h"
#include "url.h"

#define DLOCK__ROUTER_MAX_NODES 64

typedef struct dlock__router {
    dlock__hostport nodes[DLOCK__ROUTER_MAX_NODES]; /* every node ever named (owns host) */
    size_t n_nodes;
    uint16_t owner[DLOCK__SLOTS]; /* index in nodes, or DLOCK__CMAP_NONE */
    int last;                     /* node of the last routed command, -1 */
    int suspect;                  /* node that last failed: asked last in a refresh, -1 */
    bool refresh_due;
    int64_t refreshed_at_ms;
} dlock__router;

/* A command's way through the cluster (one command or pipeline unit). */
typedef struct dlock__hop {
    int target; /* node index, -1: none */
    bool asking;
    int redirects, busy;
    bool reroute; /* look the slot up again once the map was refreshed */
} dlock__hop;

void dlock__router_init(dlock__router *rt);
void dlock__router_free(dlock__router *rt);
/* Index of host:port, added when new; -1 when the table is full or out of memory. */
int dlock__router_node(dlock__router *rt, const char *host, int port);
/* Replaces the slot map by m (its nodes added to the table). 0 or ENOMEM. */
int dlock__router_apply(dlock__router *rt, const dlock__cmap *m);
/* The node a command for slot goes to (slot < 0: keyless, the node of the
 * last routed command, before any the master of the first served slot); -1. */
int dlock__router_target(const dlock__router *rt, int slot);
/* The masters of the map, each once, in slot order (at most max); with
 * slots_out (may be NULL), one slot each serves. Returns the count. */
size_t dlock__router_masters(const dlock__router *rt, int *nodes_out, unsigned *slots_out, size_t max);
/* Who to ask for the map, in order: the masters of the map, the URL's nodes,
 * the suspect last (order has DLOCK__ROUTER_MAX_NODES + 1 entries). */
size_t dlock__router_refresh_order(dlock__router *rt, const dlock__url *url, int *order);
/* True when a refresh is due and the last began at least REFRESH_GAP_MS ago. */
bool dlock__router_refresh_allowed(const dlock__router *rt, int64_t now_ms);
/* A refresh walk begins (now_ms), ends well (the map applied). */
void dlock__router_refresh_begins(dlock__router *rt, int64_t now_ms);
void dlock__router_refreshed(dlock__router *rt);
/* Node i failed (nothing or no reply came back): ask it last, refresh. */
void dlock__router_lost(dlock__router *rt, int i);
/* A command sent to node got no reply (its connection failed): the node
 * is suspect (dlock__router_lost). True when it goes again, to the slot's
 * master after DLOCK__CLUSTER_REFRESH_GAP_MS (h counts it as a redirect):
 * nothing was written (the connection never came up), it may move and
 * the redirect bound is not reached. A written command is never resent:
 * it may have run. */
bool dlock__router_no_reply(dlock__router *rt, dlock__hop *h, int node, bool written, bool may_move);
/* The ms before a refresh may begin (0: now): REFRESH_GAP_MS after the
 * last one began. */
int64_t dlock__router_refresh_wait_ms(const dlock__router *rt, int64_t now_ms);

/* An asynchronous driver's walk for the map: one node asked at a time, in
 * dlock__router_refresh_order, "CLUSTER <DLOCK__CMAP_FIRST>" and, when a
 * node refuses it or its reply does not parse, "CLUSTER
 * <DLOCK__CMAP_SECOND>" of the same node; the first good reply is applied. */
typedef struct dlock__rwalk {
    int order[DLOCK__ROUTER_MAX_NODES + 1];
    size_t n, i;
    int node;      /* the node asked now, -1 */
    bool second;   /* it was asked DLOCK__CMAP_SECOND */
    bool answered; /* a node answered during this walk (even badly) */
} dlock__rwalk;

typedef enum dlock__rwalk_step {
    DLOCK__RWALK_DONE = 0,  /* the map was applied, the refresh ended well */
    DLOCK__RWALK_AGAIN = 1, /* ask the same node "CLUSTER <*sub_out>" */
    DLOCK__RWALK_NEXT = 2,  /* ask the next node (dlock__rwalk_next) */
} dlock__rwalk_step;

/* A walk begins (the refresh begins at now_ms). */
void dlock__rwalk_begin(dlock__router *rt, const dlock__url *url, dlock__rwalk *w, int64_t now_ms);
/* The next node to ask, with the CLUSTER subcommand to send it; -1 when
 * none is left (the walk failed). */
int dlock__rwalk_next(dlock__rwalk *w, const char **sub_out);
/* What the node asked answered (r NULL: nothing came). */
dlock__rwalk_step dlock__rwalk_reply(dlock__router *rt, dlock__rwalk *w, const dlock__reply *r,
                                     const char **sub_out);

typedef enum dlock__hop_step {
    DLOCK__HOP_FINAL = 0,  /* the reply is the answer */
    DLOCK__HOP_RESEND = 1, /* send again to h->target (after *wait_ms) */
} dlock__hop_step;

/* Reads reply r of a command for slot (-1: keyless) sent to h->target with
 * dlock__cluster_next, and updates h and the router: MOVED points the slot
 * at the named node and makes a refresh due; ASK sends once with ASKING;
 * TRYAGAIN/LOADING/MASTERDOWN retry the same node after *wait_ms;
 * CLUSTERDOWN and READONLY (a demoted master) make a refresh due and set
 * h->reroute (keyed commands go to the slot's master once it is known).
 * *next_out (may be NULL) says which case it was. */
dlock__hop_step dlock__router_follow(dlock__router *rt, dlock__hop *h, int slot, const dlock__reply *r,
                                     int64_t *wait_ms, dlock__next *next_out);

#endif
