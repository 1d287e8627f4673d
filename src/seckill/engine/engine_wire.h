/* engine_wire.h: the one narrow interface to the engine's Redis
 * connections, for everything that sends through them (the engine's
 * parts, the coalescer, the mover, the campaign calls): send a command, a
 * script (as arguments or as a pre-written batch) or a typed WAIT to a
 * connection and a slot; name a slot's node; read the clock; log. And the
 * one writer of a purchase batch's bytes (sk__rb_write: purchase.lua's
 * arguments as RESP with the slot of their keys, fixed where the keys are
 * chosen, so the send path neither formats nor parses them again; pure).
 * Plain functions on one object, no table of pointers: the parts' unit
 * tests link tests/seckill/part_fake.c, which defines the sk__wire_*
 * functions over a recorder and a hand-moved clock, instead of
 * engine_wire.c (no part writes a batch; test_resp_batch tests the real
 * sk__rb_write).
 * Not thread-safe: the engine's loop only. */
#ifndef SK_ENGINE_WIRE_H
#define SK_ENGINE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_io.h"
#include "sk_err.h" /* the codes its calls return and its replies carry */
#include "sk_log.h"

typedef struct dlock__rconn dlock__rconn;

/* ---- a purchase batch's bytes: purchase.lua's arguments (numkeys, the
 * bucket's 5 keys and per purchase only the keys it uses: its
 * Idempotency-Key's two names, the rate-limit keys it counts; then the
 * campaign's 9 argv and 4 per purchase) as RESP bulk strings
 * (src/common/resp_write.h). Pure: thread-safe. ---------------------- */

/* A script call's arguments after the sha, written: nargs bulk strings in
 * resp[0..len), all keys in one slot (-1: no key). */
typedef struct sk__resp_args {
    const char *resp;
    size_t len;
    int nargs;
    int slot;
} sk__resp_args;

/* One purchase of the batch (strings NUL-terminated; idem, ip may be ""). */
typedef struct sk__rb_buyer {
    const char *user, *idem, *ip;
    uint64_t order_id;
    int64_t qty;
    bool resent; /* sent again after a transfer: its rate limits are not counted twice */
} sk__rb_buyer;

/* The batch's campaign-wide part. */
typedef struct sk__rb_camp {
    const char *prefix;   /* the bucket's key prefix "{<tag>}:" (at most prefix_max bytes) */
    int k;                /* buckets of the campaign */
    const int64_t *limits; /* 6: user rate, window; ip rate, window; idem ttl; order status ttl */
    const char *runid;    /* at most 40 bytes */
} sk__rb_camp;

/* Bytes a batch of n purchases takes at most (prefix up to prefix_max;
 * user, idem up to 64 bytes, ip up to 63). */
size_t sk__rb_bound(size_t prefix_max, int n);

/* Writes the batch of buyers b[0..n) of c into buf (sk__rb_bound bytes)
 * and describes it in *out (resp = buf). */
void sk__rb_write(char *buf, const sk__rb_camp *c, const sk__rb_buyer *const *b, int n, sk__resp_args *out);

/* Reply of a command sent through the wire: reply is NULL when err != 0
 * and no reply came (err is DLOCK_EUNKNOWN when sent, SK_EUNAVAIL when
 * never sent); an ERROR reply comes with err = DLOCK_ESERVER. */
typedef void (*sk__reply_fn)(const dlock__reply *reply, int err, void *priv);

/* The engine's scripts (lua/<name>.lua), by the number a sender names. */
enum { SK__LUA_PURCHASE = 0, SK__LUA_HEAT, SK__LUA_INFO, SK__LUA_LEASE, SK__LUA_TRANSFER, SK__NLUA };

/* Data connections a batch may go on: a WAIT blocks its connection for a
 * replica round trip, so batches go to one without a batch in flight
 * (coalesce.c, docs/design/promise.md "Acknowledgements"). Connection 0
 * also carries the engine's own commands. */
#define SK__CONNS 5

typedef struct sk__wire {
    dlock__rconn *conns[SK__CONNS]; /* the engine's; a test's wire may leave them NULL */
    char runid[SK__CONNS][41];      /* conn > 0: INFO server's run_id on it ("" until read) */
    const bool *muted;              /* true while the server refuses the credentials (may be NULL) */
    bool strip_db;                  /* node names lose a "/db" suffix (a redis:// URL) */
    sk_log_fn log;                  /* NULL: silent */
    void *log_ud;
    void *fake;                     /* a test's recorder (part_fake.c); NULL in the engine */
} sk__wire;

/* Sends argv (NUL-terminated strings) on connection conn to the master of
 * slot (-1: where a keyless command goes, or by its keys). 0: fn runs
 * once, later, as sk__reply_fn says; an error (SK_EUNAVAIL: not
 * connected, DLOCK_ENOMEM): fn will not run. */
int sk__wire_cmd(sk__wire *w, int conn, int slot, int argc, const char **argv, sk__reply_fn fn, void *priv);
/* Script SK__LUA_* with nargs arguments (numkeys, keys, argv) on
 * connection 0, its slot its first key's; the wire adds EVALSHA and the
 * sha (EVAL once on NOSCRIPT). As sk__wire_cmd; SK_EINVAL for nargs < 1. */
int sk__wire_script(sk__wire *w, int script, int nargs, const char **args, sk__reply_fn fn, void *priv);
/* The same with the arguments already written as RESP with their keys'
 * slot (a purchase batch: sk__rb_write; a->resp is copied), on conn. */
int sk__wire_batch(sk__wire *w, int conn, int script, const sk__resp_args *a, sk__reply_fn fn, void *priv);
/* WAIT replicas timeout_ms on conn, to the master of slot (-1: the one
 * server): it counts the replicas of that connection's own writes. Its
 * reply is an integer. As sk__wire_cmd; SK_EINVAL for timeout_ms <= 0. */
int sk__wire_wait(sk__wire *w, int conn, int slot, int replicas, int64_t timeout_ms, sk__reply_fn fn, void *priv);
/* "host:port" of the node serving slot now (one server: its endpoint): 0,
 * or -1 unknown. */
int sk__wire_node_of_slot(const sk__wire *w, int slot, char *out, size_t cap);
/* Connection conn is up. */
bool sk__wire_up(const sk__wire *w, int conn);
/* Monotonic ms (every deadline) and wall-clock unix ms (an order id's). */
int64_t sk__wire_now_ms(const sk__wire *w);
int64_t sk__wire_wall_ms(const sk__wire *w);

static inline bool sk__wire_muted(const sk__wire *w) { return w->muted && *w->muted; }

#define sk__wire_log(w, level, ...) sk_logf((w)->log, (w)->log_ud, level, __VA_ARGS__)

#endif
