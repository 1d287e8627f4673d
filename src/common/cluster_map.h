/* cluster_map.h: the pure half of the Redis Cluster router: the slot map
 * parsed from CLUSTER SHARDS / CLUSTER SLOTS, MOVED/ASK redirect replies,
 * and which slot (or which nodes) a command goes to. No I/O here: the sync
 * router (cluster_conn.c) and the async one (cluster_async.c) drive it.
 * Everything is a pure function of its arguments; thread-safe. Hostile or
 * malformed replies are refused with DLOCK__ESERVER and a reason, never
 * trusted (ranges, types, lengths are all checked).
 */
#ifndef DLOCK_COMMON_CLUSTER_MAP_H
#define DLOCK_COMMON_CLUSTER_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "reply.h"
#include "slot.h"
#include "url.h"

#define DLOCK__CMAP_NONE      0xffffu /* a slot no master serves */
#define DLOCK__CMAP_MAX_NODES 1024

/* Masters (each address once) and, for every slot, the index of its
 * master in nodes (or DLOCK__CMAP_NONE). Owns the host strings. */
typedef struct dlock__cmap {
    dlock__hostport *nodes;
    size_t n_nodes;
    uint16_t owner[DLOCK__SLOTS];
} dlock__cmap;

/* Parses a CLUSTER SHARDS reply (Redis >= 7.0) into *out (the master of
 * every shard; an endpoint "" or "?" means asked_host, the node that
 * answered). 0, ESERVER (err says why) or ENOMEM; *out is freed on error. */
int dlock__cmap_from_shards(const dlock__reply *r, const char *asked_host, dlock__cmap *out, char *err,
                            size_t errlen);
/* Same for a CLUSTER SLOTS reply (Redis 3.0 to 7.x). */
int dlock__cmap_from_slots(const dlock__reply *r, const char *asked_host, dlock__cmap *out, char *err,
                           size_t errlen);
void dlock__cmap_free(dlock__cmap *m);
/* The order routers ask for the map: CLUSTER SLOTS first (on Redis 7.x
 * CLUSTER SHARDS has known bugs after failovers), CLUSTER SHARDS when a
 * node refuses SLOTS or its reply does not parse. */
#define DLOCK__CMAP_FIRST  "SLOTS"
#define DLOCK__CMAP_SECOND "SHARDS"
/* The reply to "CLUSTER <sub>" (sub: "SLOTS" or "SHARDS"), parsed by the
 * matching function above; an error reply is ESERVER. */
int dlock__cmap_parse(const char *sub, const dlock__reply *r, const char *asked_host, dlock__cmap *out,
                      char *err, size_t errlen);

typedef enum dlock__redirect_kind { DLOCK__REDIR_MOVED = 1, DLOCK__REDIR_ASK = 2 } dlock__redirect_kind;

typedef struct dlock__redirect {
    dlock__redirect_kind kind;
    unsigned slot;
    char host[256]; /* "" when the server left it empty: the node that answered */
    int port;
} dlock__redirect;

/* True (with *out) when r is a well-formed "MOVED <slot> <host>:<port>" or
 * "ASK ..." error reply; false for anything else, malformed ones too. */
bool dlock__redirect_parse(const dlock__reply *r, dlock__redirect *out);

/* The router's bounds (documented in redis_io.h and docs/locks.md). */
#define DLOCK__CLUSTER_MAX_REDIRECTS 5 /* MOVED/ASK a command */
#define DLOCK__CLUSTER_BUSY_RETRIES                                                                          \
    8 /* TRYAGAIN/CLUSTERDOWN/READONLY/LOADING/MASTERDOWN retries:                                           \
         5,10,20,40,80,100,100,100 ms */
#define DLOCK__CLUSTER_REFRESH_GAP_MS 100

typedef enum dlock__next {
    DLOCK__NEXT_DONE = 0,    /* r is the answer */
    DLOCK__NEXT_MOVED = 1,   /* resend to *rd's node; the slot moved there */
    DLOCK__NEXT_ASK = 2,     /* ASKING + resend once to *rd's node */
    DLOCK__NEXT_BUSY = 3,    /* TRYAGAIN: resend to the same node after *wait_ms */
    DLOCK__NEXT_DOWN = 4,    /* CLUSTERDOWN: refresh the map, resend after *wait_ms */
    DLOCK__NEXT_DEMOTED = 5, /* READONLY: the node is no longer the master (failover):
                              * refresh the map, resend to the slot's master after *wait_ms */
} dlock__next;

/* What reply r asks of the router, given the redirects and busy retries
 * the command has had so far (past a bound: DONE, r is the answer).
 * TRYAGAIN, LOADING (the node is loading its data) and MASTERDOWN (a
 * replica cut from its master) are BUSY; all five retryable errors share
 * the busy bound and its waits. Each of them, and MOVED/ASK, means the
 * command did not run, so resending it is safe. */
dlock__next dlock__cluster_next(const dlock__reply *r, int redirects, int busy, dlock__redirect *rd,
                                int64_t *wait_ms);

/* Where a command goes on a cluster. */
typedef enum dlock__route_kind {
    DLOCK__ROUTE_SLOT = 1,    /* the master of .slot (all keys hash there) */
    DLOCK__ROUTE_CURRENT = 2, /* keyless: the node of the last routed command (WAIT, PING, INFO...) */
    DLOCK__ROUTE_ALL = 3,     /* every master: SCRIPT, FUNCTION, FLUSHALL, FLUSHDB */
    DLOCK__ROUTE_MULTI = 4,   /* MULTI: opens a transaction (pipelines only) */
    DLOCK__ROUTE_EXEC = 5,    /* EXEC / DISCARD: closes it */
} dlock__route_kind;

typedef struct dlock__route {
    dlock__route_kind kind;
    unsigned slot; /* ROUTE_SLOT only */
} dlock__route;

/* Routes one command by its name and keys (EVAL/EVALSHA/EVAL_RO/
 * EVALSHA_RO/FCALL/FCALL_RO by numkeys, XREAD/XREADGROUP after STREAMS,
 * a table for the rest). Returns 0 with *out; DLOCK__ECROSSSLOT when its
 * keys hash to different slots; DLOCK__EINVAL for a command the router
 * does not know or cannot route (SUBSCRIBE, SELECT, SCAN, KEYS...) or a
 * malformed one (bad numkeys). err says why in each case. lens may be
 * NULL (NUL-terminated argv). */
int dlock__route_cmd(int argc, const char *const *argv, const size_t *lens, dlock__route *out, char *err,
                     size_t errlen);

#endif
