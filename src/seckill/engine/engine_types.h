/* engine_types.h: the engine's value types, shared by its API (engine.h)
 * and the parts below it that take or fill them (the coalescer, the mover,
 * the acknowledgement and health parts): the engine's options, a
 * purchase's result and callback, what /healthz is told about Redis, and
 * the figures. Types only, so a part never includes the engine's API to
 * name one of them. Not thread-safe: the engine's loop only. */
#ifndef SK_ENGINE_TYPES_H
#define SK_ENGINE_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "rulebook.h"
#include "sk_log.h"

typedef struct sk_engine sk_engine;

typedef struct sk_engine_opts {
    int max_batch;              /* purchases per script call; 1 = no coalescing (default 64) */
    int64_t linger_us;          /* max wait to fill a batch while one is in flight (default 1000) */
    int64_t soldout_poll_ms;    /* re-check of a locally sold-out campaign (default 500) */
    int64_t user_rate_limit;    /* purchases per user per window per campaign; 0 = off (default 0) */
    int64_t user_rate_window_ms;/* default 1000 */
    int64_t ip_rate_limit;      /* purchases per client ip per window per campaign; 0 = off */
    int64_t ip_rate_window_ms;  /* default 1000 */
    int64_t idem_ttl_ms;        /* Idempotency-Key answers kept (default 24 h) */
    int64_t order_ttl_ms;       /* {c:<id>}:order_status kept after the end (default 7 days) */
    int64_t command_timeout_ms; /* a reply (or a connect) later than this drops the connection (default 2000) */
    int64_t reconnect_max_ms;   /* backoff cap (default 2000) */
    /* Acknowledged answers (docs/design/promise.md). replica_acks: replicas
     * that must acknowledge a batch (WAIT) before its purchases are told
     * 201; -1 (default): the connected_slaves the master reports at every
     * (re)connect (at least 1 behind Sentinel or on a Cluster). While
     * fewer replicas are online and in sync (probed every 250 ms, and
     * lowered by a WAIT that came back short) a batch sends no WAIT and
     * its acceptances are pending (202) at once. 0: standalone: 201 only
     * while the server runs appendonly yes + appendfsync always (re-read
     * every 250 ms), else every acceptance is pending (202). */
    int replica_acks;
    int64_t replica_ack_timeout_ms; /* WAIT's timeout (default 100, >= 1) */
    int64_t worker_lease_ms;    /* order-id worker lease (default 60000, >= 300) */
    /* Test hook (the fault suite's crash between a transfer's two
     * halves): delay each transfer's give after its take by this many ms. 0 = none. */
    int64_t xfer_pause_ms;
    sk_log_fn log;              /* NULL: silent */
    void *log_ud;
} sk_engine_opts;

/* ---- purchase ------------------------------------------------------- */

typedef struct sk_purchase_result {
    int err;                /* one of the outcomes of rulebook.h: 0 accepted, SK_ESOLDOUT,
                               SK_ELIMIT, SK_ENOTSTARTED, SK_EENDED, SK_ENOTFOUND, SK_ERATE,
                               SK_EINVAL (quantity above the limit), SK_EIDEMPOTENCY
                               (Idempotency-Key of another user), SK_EUNAVAIL (not sent),
                               DLOCK_EUNKNOWN (sent, outcome unknown) */
    bool replay;            /* accepted earlier under the same Idempotency-Key */
    bool pending;           /* accepted/replay, but not acknowledged (replicas or
                               fsync, or decided by the database path): HTTP 202 */
    uint64_t order_id;      /* accepted/replay */
    int64_t qty;
    int64_t remaining;      /* accepted, replay (at the first answer), sold out */
    int64_t value;          /* limit: units held; not started: ms to start;
                               rate: retry-after ms; bad quantity: per-user limit */
} sk_purchase_result;

typedef void (*sk_purchase_cb)(const sk_purchase_result *res, void *arg);

/* ---- health (engine_health.c) ------------------------------------------ */

typedef enum sk_redis_health {
    SK_REDIS_OK = 0,         /* connected, writes not known to be refused */
    SK_REDIS_DOWN,           /* not connected: reconnecting with backoff */
    SK_REDIS_AUTH_REFUSED,   /* the server refused the credentials: reconnecting with backoff */
    SK_REDIS_WRITES_REFUSED, /* connected, but writes are refused (OOM, READONLY, MISCONF,
                                NOREPLICAS) until one succeeds */
} sk_redis_health;

/* ---- stats -------------------------------------------------------------- */

enum { SK_STAT_OUTCOMES = SK_OUT_COUNT, SK_STAT_BATCH_BUCKETS = 9 };
#define SK_STAT_NODES 16 /* Redis nodes counted by name (a Cluster's masters) */
typedef struct sk_node_calls {
    char node[64];  /* "host:port" of the node that served the calls */
    uint64_t calls; /* purchase/campaign scripts and WAITs it answered */
} sk_node_calls;

/* Transfers between the buckets of sharded campaigns (transfer.c), and
 * the wait of purchases that found their home bucket short. */
#define SK_STAT_WAIT_BUCKETS 8
typedef struct sk_engine_xfer_stats {
    uint64_t takes;          /* take calls that moved units out of a bucket */
    uint64_t units;          /* units moved (given) */
    uint64_t gives;          /* gives applied (first time) */
    uint64_t recovered;      /* journal entries of others (stale) finished here */
    uint64_t probes;         /* take/probe calls that moved nothing */
    uint64_t soldout_checks; /* double collects that found the campaign empty */
    uint64_t script_calls;   /* every transfer.lua call */
    /* purchases parked "short" by how long until their final answer: ms <= 1, 2, 5, 10, 50, 100, 1000, more */
    uint64_t waits[SK_STAT_WAIT_BUCKETS];
    uint64_t wait_ms_sum;
} sk_engine_xfer_stats;
extern const int64_t sk_wait_bucket_le_ms[SK_STAT_WAIT_BUCKETS];

typedef struct sk_engine_stats {
    /* purchases by outcome: index by sk_outcome_id (rulebook.h) */
    uint64_t outcomes[SK_STAT_OUTCOMES];
    /* script calls by batch size: <=1, 2, 4, 8, 16, 32, 64, 128, more */
    uint64_t batches[SK_STAT_BATCH_BUCKETS];
    uint64_t batched_purchases;
    uint64_t redis_errors;   /* failed commands (no reply, error reply, timeout) */
    uint64_t reconnects;     /* connections opened after the first */
    uint64_t soldout_local;  /* answered from the local sold-out flag */
    uint64_t answered_acked;   /* accepted/replay answers told 201 */
    uint64_t answered_pending; /* accepted/replay answers told 202 (not acknowledged) */
    uint64_t answered_confirmed; /* replays told 201 only because the database holds the order (in answered_acked) */
    uint64_t ack_waits;        /* WAITs sent (one per batch) */
    uint64_t ack_failures;     /* WAITs that reported fewer than replica_acks (or failed) */
    uint64_t ack_skipped;      /* batches not WAITed for: too few replicas known in sync (202 at once) */
    int ack_mode;              /* now: 0 none (202), 1 reply is the ack (fsync), 2 WAIT */
    int ack_replicas;          /* now: the n of WAIT */
    int ack_in_sync;           /* now: replicas known online and in sync (-1 unknown) */
    int lease_held;            /* 1 while order ids may be issued */
    int worker_id;             /* leased worker id, -1 none */
    uint64_t lease_fence;      /* fencing token of the current lease */
    uint64_t lease_lost;       /* leases given up or found taken */
    sk_node_calls nodes[SK_STAT_NODES]; /* per node (nnodes used; more nodes count in the last) */
    int nnodes;
    sk_engine_xfer_stats xfer;
} sk_engine_stats;
extern const int64_t sk_batch_bucket_le[SK_STAT_BATCH_BUCKETS];

#endif
