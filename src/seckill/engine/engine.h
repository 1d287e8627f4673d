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
#include "engine_types.h" /* the options, a purchase's result, the health states, the figures */
#include "rulebook.h"
#include "sk_err.h"
#include "sk_log.h"

struct event_base;

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

/* (the states, sk_redis_health: engine_types.h) */
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

/* (sk_engine_stats and its buckets: engine_types.h) */
void sk_engine_get_stats(const sk_engine *e, sk_engine_stats *out);
/* Adds calls to node's count in st (a new node takes the next entry; past
 * SK_STAT_NODES, the last entry counts the rest): how the engine counts,
 * and how a process adds up its loops' figures. */
void sk_engine_stats_add_node(sk_engine_stats *st, const char *node, uint64_t calls);

#endif
