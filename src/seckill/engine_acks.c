/* engine_acks.c: the acknowledgement plan of each purchase batch, which
 * follows the server rather than the connect (docs/design/promise.md,
 * "Acknowledgements"). Invariant: what is known here only decides whether
 * a batch's WAIT is worth sending; a 201 still needs a WAIT that reported
 * replica-acks replicas (coalesce.c), so a wrong guess costs time, never
 * a promise.
 *
 * One mechanism for one server, Sentinel and Cluster: each master WAITs
 * go to has an entry with the replicas known online and in sync. The
 * periodic probe (engine_server.c, INFO replication every 250 ms) sets
 * it; a WAIT that came back short lowers it at once to what it reported,
 * one that came back full raises it. While an entry knows fewer replicas
 * than replica-acks, a batch on that master sends no WAIT: its
 * acceptances answer 202 at once instead of each batch blocking the
 * connection for replica-ack-timeout-ms (a promoted master whose replica
 * is gone, a replica down). Entry 0 is the connected server; on a Cluster
 * entries are made by the first short WAIT of a master (until then WAIT
 * is sent) and probed on that master's slot. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "engine_internal.h"
#include "slot.h"
#include "util.h"

/* The default replica-acks (-1): the replicas the master reports at
 * connect. Behind Sentinel or in a Cluster the master's own disk is no
 * acknowledgement (a failover abandons it), so there the default is at
 * least 1: a master that has no replica yet answers 202 until one
 * acknowledges, instead of 201 on its fsync. */
static int default_acks(const sk_engine *e)
{
    bool failover = e->url.kind == DLOCK__URL_SENTINEL || e->url.kind == DLOCK__URL_CLUSTER;
    return failover && e->srv_replicas < 1 ? 1 : e->srv_replicas;
}

int sk__ack_plan(const sk_engine *e, int *replicas_out, int64_t *timeout_ms_out)
{
    int n = e->o.replica_acks >= 0 ? e->o.replica_acks : default_acks(e);
    *replicas_out = n;
    *timeout_ms_out = e->o.replica_ack_timeout_ms;
    if (n > 0) return SK__ACK_WAIT;
    /* On a Cluster a failover promotes a replica: the master's own disk
     * does not keep a decision through it, only a replica's copy does. */
    if (e->srv_cluster) return SK__ACK_NONE;
    return e->srv_aof_yes && e->srv_fsync_always ? SK__ACK_REPLY : SK__ACK_NONE;
}

void sk__acks_reset(sk_engine *e)
{
    memset(e->acks, 0, sizeof(e->acks));
    for (int i = 0; i < SK_STAT_NODES; i++) {
        e->acks[i].known = -1;
        e->acks[i].listed = -1;
        e->acks[i].slot = -1;
    }
}

static int needed(const sk_engine *e)
{
    int n = 0;
    int64_t t = 0;
    return sk__ack_plan(e, &n, &t) == SK__ACK_WAIT ? n : 0;
}

void sk__acks_set(sk_engine *e, int i, int known, const char *why)
{
    struct sk__acks *a = &e->acks[i];
    int n = needed(e);
    bool was_short = a->known >= 0 && a->known < n, now_short = known < n;
    a->known = known;
    a->seen_ms = dlock__now_ms();
    if (n <= 0 || was_short == now_short) return;
    const char *node = i == 0 ? "the master" : a->node;
    if (now_short)
        sk__log(e, DLOCK_LOG_WARN, "redis %s: %d of %d replica(s) in sync (%s): acceptances answer 202 at once, "
                "without WAIT", node, known, n, why);
    else
        sk__log(e, DLOCK_LOG_INFO, "redis %s: %d replica(s) in sync again (%s): batches WAIT for them (201)",
                node, known, why);
}

/* The entry of a Cluster node (add: a free one, else the least recently
 * seen), or -1. Entry 0 stays the connected server's. */
static int cluster_entry(sk_engine *e, const char *node, int slot, bool add)
{
    int oldest = 1;
    for (int i = 1; i < SK_STAT_NODES; i++) {
        if (e->acks[i].node[0] && strcmp(e->acks[i].node, node) == 0) return i;
        if (e->acks[i].seen_ms < e->acks[oldest].seen_ms) oldest = i;
    }
    if (!add) return -1;
    struct sk__acks *a = &e->acks[oldest];
    snprintf(a->node, sizeof(a->node), "%s", node);
    a->slot = slot;
    a->known = -1;
    a->listed = -1;
    return oldest;
}

/* The entry that WAITs for slot go to: 0 off a Cluster; -1 when none. */
static int entry_of(sk_engine *e, int slot, bool add)
{
    if (!e->srv_cluster) return 0;
    char node[64];
    if (slot < 0 || sk__node_of_slot(e, slot, node, sizeof(node)) != 0) return -1;
    return cluster_entry(e, node, slot, add);
}

void sk__acks_note_wait(sk_engine *e, int slot, long long asked, long long got)
{
    if (asked <= 0 || got < 0) return;
    int i = entry_of(e, slot, got < asked);
    if (i < 0) return;
    sk__acks_set(e, i, (int)(got < 1000 ? got : 1000), "WAIT's answer");
    if (i > 0) e->acks[i].slot = slot;
}

int sk__acks_send_wait(sk_engine *e, const char *route_key, int argc, const char **argv, sk__reply_fn fn,
                       void *priv)
{
    int slot = e->srv_cluster ? (int)dlock__key_slot(route_key, strlen(route_key)) : -1;
    int i = entry_of(e, slot, false);
    long long asked = strtoll(argv[1], NULL, 10);
    if (i >= 0 && e->acks[i].known >= 0 && e->acks[i].known < asked) return 1; /* 202 now, no WAIT */
    return sk__call_cmd_slot(e, slot, argc, argv, NULL, fn, priv);
}

bool sk__acks_alone(sk_engine *e, const char *route_key)
{
    int slot = e->srv_cluster ? (int)dlock__key_slot(route_key, strlen(route_key)) : -1;
    int i = entry_of(e, slot, false);
    return i >= 0 && e->acks[i].listed == 0;
}

int sk__acks_known(const sk_engine *e)
{
    if (!e->srv_cluster) return e->acks[0].known;
    int k = -1;
    for (int i = 1; i < SK_STAT_NODES; i++)
        if (e->acks[i].node[0] && e->acks[i].known >= 0 && (k < 0 || e->acks[i].known < k)) k = e->acks[i].known;
    return k;
}
