/* engine_acks.h: the engine's part that plans how each purchase batch is
 * acknowledged (SK__ACK_*) and follows the server's replicas
 * and persistence for it (engine_acks.c). Invariant: it reads the server
 * facts (engine_server.h) and reaches Redis only through the wire (INFO
 * replication, CONFIG GET: engine_wire.h), so a test drives it on a fake
 * wire and clock. A batch's WAIT is its sender's (the coalescer, the
 * mover), which asks sk__acks_wait_slot first and reports the answer. Not thread-safe: the engine's loop only. */
#ifndef SK_ENGINE_ACKS_H
#define SK_ENGINE_ACKS_H

#include "engine.h"
#include "engine_wire.h"
#include "engine_server.h"

/* How a batch's acceptances are acknowledged (docs/design/promise.md). */
enum {
    SK__ACK_NONE = 0,  /* the deployment cannot acknowledge: every acceptance is pending (202) */
    SK__ACK_REPLY = 1, /* the script's reply is the acknowledgement (fsync before reply): 201 */
    SK__ACK_WAIT = 2,  /* WAIT <replicas> <timeout> behind the script: 201 when it reports enough */
};

/* What is known of one master WAITs go to: entry 0 is the connected
 * server (one server, or Sentinel's master); on a Cluster one entry per
 * master whose WAIT came back short, by "host:port". known: replicas
 * online and in sync, -1 unknown (WAIT is sent); listed: replicas the
 * master lists in any state, -1 unknown. */
typedef struct sk__ack_node {
    char node[64];
    int slot;
    int known;
    int listed;
    int64_t seen_ms;
} sk__ack_node;

typedef struct sk__acks {
    sk__wire *w;        /* cmd (probes), node_of_slot, muted, log, clock */
    sk__server *srv;    /* the facts the plan follows; the CONFIG re-read updates them */
    int replica_acks;   /* replica-acks, -1: the replicas the master reports at connect */
    int64_t timeout_ms; /* replica-ack-timeout-ms */
    bool failover;      /* behind Sentinel or a Cluster: the master's own disk is no acknowledgement */
    sk__ack_node nodes[SK_STAT_NODES];
    int64_t probe_ms;   /* when the last periodic probe was sent */
    int probe_due;      /* its replies still to come */
    bool reprobe_off;   /* a probe was refused (ACL, renamed command): not sent again on this connection */
} sk__acks;

void sk__acks_init(sk__acks *a, sk__wire *w, sk__server *srv, int replica_acks,
                   int64_t timeout_ms, bool failover);
/* How a purchase batch is acknowledged now: SK__ACK_* and, for
 * SK__ACK_WAIT, the replicas and the timeout of its WAIT. */
int sk__acks_plan(const sk__acks *a, int *replicas_out, int64_t *timeout_ms_out);
/* A new connection: nothing is known yet. */
void sk__acks_reset(sk__acks *a);
/* The server's connect-time facts are in: the connected server's entry
 * from them; logs the plan. */
void sk__acks_connected(sk__acks *a);
/* A WAIT for slot (-1: the connected server) asking for asked replicas
 * was answered got (fewer: the known count drops at once). */
void sk__acks_wait_answered(sk__acks *a, int slot, long long asked, long long got);
/* Whether a batch whose keys are in slot gets a WAIT asking for asked
 * replicas: 1 skip it (the master serving slot is known short of them:
 * the batch is pending at once), 0 send it (sk__wire_wait) to *slot_out's
 * master (-1: the one server). Its answer goes to sk__acks_wait_answered. */
int sk__acks_wait_slot(sk__acks *a, int slot, int asked, int *slot_out);
/* A batch's WAIT, typed: unless sk__acks_wait_slot skips it (returns 1:
 * the batch is pending at once), WAIT replicas timeout_ms goes on data
 * connection conn to the master serving slot (sk__wire_wait), and its
 * integer answer reaches sk__acks_wait_answered before fn runs. 0 (fn
 * will run), 1 or an error (fn will not). */
int sk__acks_send_wait(sk__acks *a, int conn, int slot, int replicas, int64_t timeout_ms, sk__reply_fn fn,
                       void *priv);
/* The master serving slot lists no replica at all (its last INFO
 * replication): a promoted master whose replica is gone, or a server
 * without replicas. False when unknown, and for a master that still lists
 * a replica that does not acknowledge (cut off from it, as a master cut
 * off from Sentinel is): there a confirmed replay stays 202. */
bool sk__acks_master_alone(sk__acks *a, int slot);
/* Replicas known in sync on the connected server (Cluster: the fewest of
 * the masters known), -1 unknown: the seckill_ack_replicas_in_sync gauge. */
int sk__acks_known(const sk__acks *a);
/* The periodic probe (every 250 ms, one at a time, not while muted):
 * the replicas online and in sync (INFO replication) while the plan is
 * WAIT, the AOF settings (CONFIG GET) of a standalone server while it is
 * not; on a Cluster INFO replication of each master known short. */
void sk__acks_tick(sk__acks *a);

#endif
