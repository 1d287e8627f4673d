/* engine_acks.h: the engine's part that plans how each purchase batch is
 * acknowledged (SK__ACK_*, coalesce.h) and follows the server's replicas
 * and persistence for it (engine_acks.c). Invariant: it reads the server
 * facts (engine_server.h) and reaches Redis only through its port (WAIT,
 * INFO replication, CONFIG GET), so a test drives it on a fake port and
 * clock. Not thread-safe: the engine's loop only. */
#ifndef SK_ENGINE_ACKS_H
#define SK_ENGINE_ACKS_H

#include "engine.h"
#include "engine_port.h"
#include "engine_server.h"

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
    sk__port port;      /* cmd (WAIT, probes), node_of_slot, muted, log */
    sk__clock clock;
    sk__server *srv;    /* the facts the plan follows; the CONFIG re-read updates them */
    int replica_acks;   /* replica-acks, -1: the replicas the master reports at connect */
    int64_t timeout_ms; /* replica-ack-timeout-ms */
    bool failover;      /* behind Sentinel or a Cluster: the master's own disk is no acknowledgement */
    sk__ack_node nodes[SK_STAT_NODES];
    int64_t probe_ms;   /* when the last periodic probe was sent */
    int probe_due;      /* its replies still to come */
    bool reprobe_off;   /* a probe was refused (ACL, renamed command): not sent again on this connection */
} sk__acks;

void sk__acks_init(sk__acks *a, const sk__port *port, const sk__clock *clock, sk__server *srv, int replica_acks,
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
/* Sends a batch's WAIT (argv: WAIT <replicas> <timeout>) unless the
 * master serving route_key is known to have fewer replicas in sync than
 * it asks for: 0 sent (fn will run), 1 skipped (no WAIT: the batch is
 * pending), or an error. */
int sk__acks_wait(sk__acks *a, const char *route_key, int argc, const char **argv, sk__reply_fn fn, void *priv);
/* sk__acks_wait's decision for a WAIT the caller sends on a connection of
 * its own (a batch's data connection): 1 skip it (the master serving
 * route_key is known short of asked replicas), 0 send it to *slot_out's
 * master (-1: wherever a keyless command goes). */
int sk__acks_wait_slot(sk__acks *a, const char *route_key, long long asked, int *slot_out);
/* The master serving route_key lists no replica at all (its last INFO
 * replication): a promoted master whose replica is gone, or a server
 * without replicas. False when unknown, and for a master that still lists
 * a replica that does not acknowledge (cut off from it, as a master cut
 * off from Sentinel is): there a confirmed replay stays 202. */
bool sk__acks_master_alone(sk__acks *a, const char *route_key);
/* Replicas known in sync on the connected server (Cluster: the fewest of
 * the masters known), -1 unknown: the seckill_ack_replicas_in_sync gauge. */
int sk__acks_known(const sk__acks *a);
/* The periodic probe (every 250 ms, one at a time, not while muted):
 * the replicas online and in sync (INFO replication) while the plan is
 * WAIT, the AOF settings (CONFIG GET) of a standalone server while it is
 * not; on a Cluster INFO replication of each master known short. */
void sk__acks_tick(sk__acks *a);

#endif
