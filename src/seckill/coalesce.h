/* coalesce.h: the purchase coalescer. Concurrent purchases of a campaign
 * are queued and sent as one purchase.lua call. It reaches Redis, the
 * order-id generator and the log only through the hooks it is given, so it
 * names nothing of the engine: the engine owns one and fills the hooks.
 * Not thread-safe: used from the engine's loop only. */
#ifndef SK_COALESCE_H
#define SK_COALESCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "redis_io.h"
#include "resp_batch.h"

struct event_base;
typedef struct sk__coalescer sk__coalescer;

/* Reply of a command sent through a hook: reply is NULL when err != 0 and
 * no reply came (err is DLOCK_EUNKNOWN when sent, SK_EUNAVAIL when never
 * sent); an ERROR reply comes with err = DLOCK_ESERVER. */
typedef void (*sk__reply_fn)(const dlock__reply *reply, int err, void *priv);

/* How a batch's acceptances are acknowledged (docs/design/promise.md). */
enum {
    SK__ACK_NONE = 0,  /* the deployment cannot acknowledge: every acceptance is pending (202) */
    SK__ACK_REPLY = 1, /* the script's reply is the acknowledgement (fsync before reply): 201 */
    SK__ACK_WAIT = 2,  /* WAIT <replicas> <timeout> behind the script: 201 when it reports enough */
};

/* Data connections a batch may go on: a WAIT blocks its connection for a
 * replica round trip, so batches go to one without a batch in flight
 * (coalesce.c, docs/design/promise.md "Acknowledgements"). */
#define SK__CONNS 5

typedef struct sk__coalesce_hooks {
    void *ud;
    /* Sends purchase.lua: its arguments (numkeys, keys, argv) already
     * written as RESP bulk strings, with the slot of their keys
     * (resp_batch.h; the hook adds the array header and EVALSHA <sha>;
     * a->resp is not kept). 0 (fn will run once) or an error (fn will not
     * run). conn: the data connection it goes on (conn_usable); its
     * WAIT goes on the same one. */
    int (*send_script)(void *ud, int conn, const sk__resp_args *a, sk__reply_fn fn, void *priv);
    /* Sends transfer.lua (args: numkeys, keys, argv); as send_script. */
    int (*send_xfer)(void *ud, int nargs, const char **args, sk__reply_fn fn, void *priv);
    /* Sends a plain command; as send_script. */
    int (*send)(void *ud, int argc, const char **argv, sk__reply_fn fn, void *priv);
    /* Sends WAIT (argv) on data connection conn, to the node serving
     * route_key's slot: on a Cluster a keyless command must name its node.
     * WAIT counts the replicas of that connection's own last write, so it
     * goes on the connection its batch's script went on. 0 (fn will run),
     * 1 not sent because that node is known to have too few replicas in
     * sync (the batch is pending at once), or an error (fn will not run). */
    int (*send_wait)(void *ud, int conn, const char *route_key, int argc, const char **argv, sk__reply_fn fn,
                     void *priv);
    /* Data connection conn (0 .. SK__CONNS - 1; 0 is the engine's main
     * connection) may carry a batch now: connected, and on the server
     * whose run id server_runid gives. Connection 0 is usable whenever
     * the engine is ready. May be NULL: connection 0 only. */
    bool (*conn_usable)(void *ud, int conn);
    /* True when WAIT must follow the script's reply instead of being
     * pipelined behind it (a Cluster: only the reply says the script ran,
     * possibly on another node after a redirect; the WAIT must go where it
     * ran). */
    bool (*wait_after_reply)(void *ud);
    /* The master serving route_key's slot lists no replica at all (so it
     * cannot be one cut off from its replica and Sentinel): a replay the
     * database confirmed may then be 201 without an acknowledgement. */
    bool (*master_alone)(void *ud, const char *route_key);
    /* Connected and holding an order-id lease. */
    bool (*ready)(void *ud);
    /* The next order id; 0 or SK_EUNAVAIL. */
    int (*next_order_id)(void *ud, uint64_t *id_out);
    /* The acknowledgement of a batch sent now: SK__ACK_*, with WAIT's
     * replicas and timeout for SK__ACK_WAIT. */
    int (*ack_plan)(void *ud, int *replicas_out, int64_t *timeout_ms_out);
    /* The run id of the connected server (purchase.lua's barrier check). */
    const char *(*server_runid)(void *ud);
    void (*log)(void *ud, int level, const char *msg);
} sk__coalesce_hooks;

/* o: max_batch, linger_us, the rate limits and TTLs. 0 or DLOCK_ENOMEM. */
int sk__coalescer_new(struct event_base *base, const sk_engine_opts *o, const sk__coalesce_hooks *hooks,
                      sk__coalescer **out);
/* Fails every purchase still queued with err (batches in flight are
 * answered by their reply); from now on nothing new is sent. */
void sk__coalescer_fail_all(sk__coalescer *co, int err);
/* Frees; call after sk__coalescer_fail_all and once no reply is due. NULL ok. */
void sk__coalescer_free(sk__coalescer *co);

/* sk_engine_purchase's contract (engine.h). */
int sk__coalescer_purchase(sk__coalescer *co, const char *campaign, const char *user, int64_t qty,
                           const char *idem, const char *ip, sk_purchase_cb cb, void *arg);
/* Re-checks the stock of locally sold-out campaigns (call periodically). */
void sk__coalescer_poll_soldout(sk__coalescer *co);
/* The campaign got new stock (re-heat): forget its sold-out flag. */
void sk__coalescer_restocked(sk__coalescer *co, const char *campaign);
/* Purchases queued or in flight. */
size_t sk__coalescer_pending(const sk__coalescer *co);
/* Adds the purchase figures (outcomes, batches, soldout_local) to st. */
void sk__coalescer_stats(const sk__coalescer *co, sk_engine_stats *st);

#endif
