/* engine.h: the flash-sale decision engine, usable without HTTP (seckilld
 * and the load generator both drive it). One engine lives on one libevent
 * loop and is used only from that loop's thread; it keeps one pipelined
 * async Redis connection, reconnects with backoff, leases an order-id
 * worker id, coalesces concurrent purchases of a campaign into one script
 * call and remembers sold-out campaigns locally.
 *
 * Callback rule (as in libuv): a function taking a callback that returns
 * 0 calls it exactly once, later, from the loop; one that returns an error
 * never calls it. Strings passed in are copied; results passed to
 * callbacks are valid only during the call. */
#ifndef SK_ENGINE_H
#define SK_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "campaign_def.h"
#include "ids.h"
#include "outcome.h"
#include "sk_log.h"
#include "sk_err.h"

struct event_base;
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

void sk_engine_opts_init(sk_engine_opts *o);

/* Creates the engine and starts connecting (asynchronously). Returns 0,
 * SK_EINVAL (bad URL, err says why) or DLOCK_ENOMEM. */
int sk_engine_new(struct event_base *base, const char *redis_url, const sk_engine_opts *opts,
                  sk_engine **out, char *err, size_t errlen);
/* Fails every pending request (callbacks run with DLOCK_ECLOSED) and frees. */
void sk_engine_free(sk_engine *e);
/* Connected and holding an order-id worker lease. */
bool sk_engine_ready(const sk_engine *e);
/* The next order id from the engine's generator while its worker-id lease
 * is held (also while Redis is down, until the lease would have expired):
 * for the degraded database path. 0, SK_EUNAVAIL (no lease) or SK_EINVAL. */
int sk_engine_next_order_id(sk_engine *e, uint64_t *id_out);
/* Requests queued or in flight (for graceful shutdown). */
size_t sk_engine_pending(const sk_engine *e);

/* ---- purchase ------------------------------------------------------- */

typedef struct sk_purchase_result {
    int err;                /* one of the outcomes of outcome.h: 0 accepted, SK_ESOLDOUT,
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

/* Buys qty units of campaign for user. idem (Idempotency-Key) and ip may
 * be NULL. Returns 0 (cb will run), or answers at once without calling cb:
 * SK_EINVAL (bad id/user/key/qty), SK_ESOLDOUT (known sold out locally;
 * never for requests with an Idempotency-Key, so replays still work),
 * SK_EUNAVAIL (no Redis connection or no worker lease), SK_EQUEUEFULL (the
 * campaign's queue is full), DLOCK_ENOMEM. */
int sk_engine_purchase(sk_engine *e, const char *campaign, const char *user, int64_t qty,
                       const char *idem, const char *ip, sk_purchase_cb cb, void *arg);

/* ---- campaigns and orders --------------------------------------------- */

typedef struct sk_campaign_info {
    sk_campaign def;
    int64_t remaining;
    int64_t sold;        /* stock - remaining */
    int64_t now_ms;      /* Redis server clock */
    const char *state;   /* "scheduled" | "live" | "sold_out" | "ended" */
} sk_campaign_info;

typedef enum sk_heat_mode {
    SK_HEAT_CREATE = 0,  /* refuse (SK_EEXIST) if it exists */
    SK_HEAT_REHEAT = 1,  /* rewrite; refuse (SK_ELIVE) while live */
    SK_HEAT_FORCE = 2,   /* rewrite even while live */
} sk_heat_mode;

/* err: 0, SK_ENOTFOUND, SK_EEXIST, SK_ELIVE, SK_EUNAVAIL, DLOCK_EUNKNOWN. */
typedef void (*sk_campaign_cb)(int err, const sk_campaign_info *info, void *arg);

/* Checks a definition (id charset, stock >= 0, limit >= 1, starts < ends,
 * price >= 0, title length); 0 or SK_EINVAL with a reason in err. */
int sk_campaign_check(const sk_campaign *d, char *err, size_t errlen);
/* Pre-heats d into Redis (meta, stock; db_reserve carved out; meta.runid
 * the connected server's) and adds it to seckill:campaigns; cb gets the
 * resulting info. SK_EUNAVAIL at once while the server's run id is not
 * known yet (connect-time probe in flight, or INFO refused).
 * d->shards > 1: the Redis stock is split over that many buckets
 * (buckets.h) with the tags of d->bucket_tags (placed here when empty).
 * Bucket 0 is written first and decides (exists, live); then the others:
 * at creation each gets its share, on a re-heat an existing bucket keeps
 * its stock (units move between buckets) and a missing one is written
 * with its share. info.remaining is the sum over the buckets. */
int sk_engine_campaign_heat(sk_engine *e, const sk_campaign *d, sk_heat_mode mode,
                            sk_campaign_cb cb, void *arg);
/* The same, for a campaign the database path may have sold from: apart is
 * the units the database keeps apart from what Redis's buyers hold (the
 * reserve left, plus its orders not yet mirrored into Redis, plus a
 * handback not yet applied), so a re-heat sets stock = stock - apart -
 * units held by buyers and counts each database-path sale once (the
 * mirrored ones are among the buyers). -1: db_reserve, as
 * sk_engine_campaign_heat. Only a campaign of one bucket uses it (an
 * existing bucket keeps its stock). SK_EINVAL when apart > stock. An
 * error after Redis took the pre-heat (the read-back failed) is
 * DLOCK_EUNKNOWN, never a refusal. */
int sk_engine_campaign_heat_apart(sk_engine *e, const sk_campaign *d, sk_heat_mode mode, int64_t apart,
                                  sk_campaign_cb cb, void *arg);
/* Chooses d's bucket tags (d->shards > 1) so the buckets land on
 * different masters of the slot map the engine holds now; "" for one
 * bucket. Call before storing a new campaign in the database, so both
 * keep the same tags. 0, SK_EUNAVAIL (not connected) or SK_EINVAL. */
int sk_engine_place_buckets(sk_engine *e, sk_campaign *d);
int sk_engine_campaign_get(sk_engine *e, const char *id, sk_campaign_cb cb, void *arg);

typedef struct sk_order_info {
    uint64_t order_id;
    char campaign[65];
    char user[65];
    int64_t qty;
    char status[16];     /* "accepted" (from Redis) */
} sk_order_info;
/* err: 0, SK_ENOTFOUND, SK_EUNAVAIL, DLOCK_EUNKNOWN. */
typedef void (*sk_order_cb)(int err, const sk_order_info *o, void *arg);
/* Looks an order up in Redis; campaign may be NULL (then every campaign
 * in seckill:campaigns is asked). */
int sk_engine_order_get(sk_engine *e, uint64_t order_id, const char *campaign, sk_order_cb cb,
                        void *arg);

/* PING through the engine's connection; cb(0) when Redis answered. */
int sk_engine_ping(sk_engine *e, void (*cb)(int err, void *arg), void *arg);

/* ---- health (engine_health.c) ------------------------------------------ */

typedef enum sk_redis_health {
    SK_REDIS_OK = 0,         /* connected, writes not known to be refused */
    SK_REDIS_DOWN,           /* not connected: reconnecting with backoff */
    SK_REDIS_AUTH_REFUSED,   /* the server refused the credentials: reconnecting with backoff */
    SK_REDIS_WRITES_REFUSED, /* connected, but writes are refused (OOM, READONLY, MISCONF,
                                NOREPLICAS) until one succeeds */
} sk_redis_health;

/* What the engine knows about Redis now; *why_out (may be NULL) gets a
 * one-line reason ("" when OK), valid until the loop runs again. Never
 * contains a password. */
sk_redis_health sk_engine_redis_health(const sk_engine *e, const char **why_out);

/* Connects once, synchronously, to find out whether the server accepts
 * the credentials of redis_url (at start-up, before the engine runs).
 * Returns DLOCK_EAUTH with the reason in err ("redis auth refused for user
 * 'default': WRONGPASS ..."), SK_EINVAL for a bad URL, 0 otherwise
 * (accepted, or the server could not be reached: the engine keeps trying). */
int sk_engine_check_auth(const char *redis_url, int64_t timeout_ms, char *err, size_t errlen);

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
    /* purchases by outcome: index by sk_outcome_id (outcome.h) */
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
void sk_engine_get_stats(const sk_engine *e, sk_engine_stats *out);
extern const int64_t sk_batch_bucket_le[SK_STAT_BATCH_BUCKETS];

#endif
