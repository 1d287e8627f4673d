/* engine_acks.c: the acknowledgement plan of each purchase batch, which
 * follows the server rather than the connect (docs/design/promise.md,
 * "Acknowledgements"). Invariant: what is known here only decides whether
 * a batch's WAIT is worth sending; a 201 still needs a WAIT that reported
 * replica-acks replicas (coalesce.c), so a wrong guess costs time, never
 * a promise.
 *
 * One mechanism for one server, Sentinel and Cluster: each master WAITs
 * go to has an entry with the replicas known online and in sync. The
 * periodic probe (INFO replication every 250 ms, sent from here) sets
 * it; a WAIT that came back short lowers it at once to what it reported,
 * one that came back full raises it. While an entry knows fewer replicas
 * than replica-acks, a batch on that master sends no WAIT: its
 * acceptances answer 202 at once instead of each batch blocking the
 * connection for replica-ack-timeout-ms (a promoted master whose replica
 * is gone, a replica down). Entry 0 is the connected server; on a Cluster
 * entries are made by the first short WAIT of a master (until then WAIT
 * is sent) and probed on that master's slot. Off a Cluster, while the
 * plan is not WAIT, the same probe re-reads CONFIG GET append* (a CONFIG
 * SET appendfsync on a running server is followed without a reconnect).
 * A probe is a command that does not block, so purchases queue behind
 * it for microseconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "engine_acks.h"
#include "redis_io.h"
#include "slot.h"

#define ACK_PROBE_MS 250

void sk__acks_init(sk__acks *a, sk__wire *w, sk__server *srv, int replica_acks,
                   int64_t timeout_ms, bool failover)
{
    memset(a, 0, sizeof(*a));
    a->w = w;
    a->srv = srv;
    a->replica_acks = replica_acks;
    a->timeout_ms = timeout_ms;
    a->failover = failover;
    sk__acks_reset(a);
}

/* The default replica-acks (-1): the replicas the master reports at
 * connect. Behind Sentinel or in a Cluster the master's own disk is no
 * acknowledgement (a failover abandons it), so there the default is at
 * least 1: a master that has no replica yet answers 202 until one
 * acknowledges, instead of 201 on its fsync. */
static int default_acks(const sk__acks *a)
{
    return a->failover && a->srv->replicas < 1 ? 1 : a->srv->replicas;
}

int sk__acks_plan(const sk__acks *a, int *replicas_out, int64_t *timeout_ms_out)
{
    int n = a->replica_acks >= 0 ? a->replica_acks : default_acks(a);
    *replicas_out = n;
    *timeout_ms_out = a->timeout_ms;
    if (n > 0) return SK__ACK_WAIT;
    /* On a Cluster a failover promotes a replica: the master's own disk
     * does not keep a decision through it, only a replica's copy does. */
    if (a->srv->cluster) return SK__ACK_NONE;
    return a->srv->aof_yes && a->srv->fsync_always ? SK__ACK_REPLY : SK__ACK_NONE;
}

void sk__acks_reset(sk__acks *a)
{
    memset(a->nodes, 0, sizeof(a->nodes));
    for (int i = 0; i < SK_STAT_NODES; i++) {
        a->nodes[i].known = -1;
        a->nodes[i].listed = -1;
        a->nodes[i].slot = -1;
    }
    a->reprobe_off = false; /* probe_due stays: the replies of the last connection's probes still come */
}

void sk__acks_connected(sk__acks *a)
{
    const sk__server *s = a->srv;
    a->nodes[0].known = s->in_sync;
    a->nodes[0].listed = s->listed;
    a->reprobe_off = a->reprobe_off || s->config_refused;
    if (sk__wire_muted(a->w)) return; /* with refused credentials the probes say nothing about the server */
    int n = 0;
    int64_t t = 0;
    int plan = sk__acks_plan(a, &n, &t);
    bool short_now = plan == SK__ACK_WAIT && !s->cluster && a->nodes[0].known < n;
    sk__wire_log(a->w, DLOCK_LOG_INFO, "redis run id %s, %d replica(s) connected, %d in sync: %s",
                 s->runid[0] ? s->runid : "?", s->replicas, a->nodes[0].known,
                 short_now               ? "202 at once (no WAIT) until enough replicas are in sync, then 201 after WAIT"
                 : plan == SK__ACK_WAIT  ? "201 after WAIT by the replicas"
                 : plan == SK__ACK_REPLY ? "201 on the reply (appendfsync always)"
                                         : "no acknowledgement possible: acceptances answer 202");
}

static int needed(const sk__acks *a)
{
    int n = 0;
    int64_t t = 0;
    return sk__acks_plan(a, &n, &t) == SK__ACK_WAIT ? n : 0;
}

/* A probe or a WAIT's reply says node i has known replicas online and in
 * sync; logs a change across replica-acks. */
static void set_known(sk__acks *a, int i, int known, const char *why)
{
    sk__ack_node *nd = &a->nodes[i];
    int n = needed(a);
    bool was_short = nd->known >= 0 && nd->known < n, now_short = known < n;
    nd->known = known;
    nd->seen_ms = sk__wire_now_ms(a->w);
    if (n <= 0 || was_short == now_short) return;
    const char *node = i == 0 ? "the master" : nd->node;
    if (now_short)
        sk__wire_log(a->w, DLOCK_LOG_WARN, "redis %s: %d of %d replica(s) in sync (%s): acceptances answer 202 "
                     "at once, without WAIT", node, known, n, why);
    else
        sk__wire_log(a->w, DLOCK_LOG_INFO, "redis %s: %d replica(s) in sync again (%s): batches WAIT for them (201)",
                     node, known, why);
}

/* The entry of a Cluster node (add: a free one, else the least recently
 * seen), or -1. Entry 0 stays the connected server's. */
static int cluster_entry(sk__acks *a, const char *node, int slot, bool add)
{
    int oldest = 1;
    for (int i = 1; i < SK_STAT_NODES; i++) {
        if (a->nodes[i].node[0] && strcmp(a->nodes[i].node, node) == 0) return i;
        if (a->nodes[i].seen_ms < a->nodes[oldest].seen_ms) oldest = i;
    }
    if (!add) return -1;
    sk__ack_node *nd = &a->nodes[oldest];
    snprintf(nd->node, sizeof(nd->node), "%s", node);
    nd->slot = slot;
    nd->known = -1;
    nd->listed = -1;
    return oldest;
}

/* The entry that WAITs for slot go to: 0 off a Cluster; -1 when none. */
static int entry_of(sk__acks *a, int slot, bool add)
{
    if (!a->srv->cluster) return 0;
    char node[64];
    if (slot < 0 || sk__wire_node_of_slot(a->w, slot, node, sizeof(node)) != 0)
        return -1;
    return cluster_entry(a, node, slot, add);
}

void sk__acks_wait_answered(sk__acks *a, int slot, long long asked, long long got)
{
    if (asked <= 0 || got < 0) return;
    int i = entry_of(a, slot, got < asked);
    if (i < 0) return;
    set_known(a, i, (int)(got < 1000 ? got : 1000), "WAIT's answer");
    if (i > 0) a->nodes[i].slot = slot;
}

/* Where a keyless command for keys of slot goes: that slot's master on a
 * Cluster, else the one server (-1). */
static int route_slot(const sk__acks *a, int slot)
{
    return a->srv->cluster ? slot : -1;
}

int sk__acks_wait_slot(sk__acks *a, int slot, int asked, int *slot_out)
{
    int to = route_slot(a, slot);
    int i = entry_of(a, to, false);
    *slot_out = to;
    return i >= 0 && a->nodes[i].known >= 0 && a->nodes[i].known < asked; /* 1: 202 now, no WAIT */
}

typedef struct wait_req {
    sk__acks *a;
    int slot; /* where it went (-1: the one server) */
    int replicas;
    sk__reply_fn fn;
    void *priv;
} wait_req;

static void on_wait(const dlock__reply *r, int err, void *priv)
{
    wait_req *w = priv;
    if (!err && r && dlock__reply_kind(r) == DLOCK__R_INTEGER)
        sk__acks_wait_answered(w->a, w->slot, w->replicas, dlock__reply_int(r));
    w->fn(r, err, w->priv);
    free(w);
}

int sk__acks_send_wait(sk__acks *a, int conn, int slot, int replicas, int64_t timeout_ms, sk__reply_fn fn,
                       void *priv)
{
    int to = -1;
    if (sk__acks_wait_slot(a, slot, replicas, &to)) return 1;
    wait_req *w = malloc(sizeof(*w));
    if (!w) return DLOCK_ENOMEM;
    *w = (wait_req){.a = a, .slot = to, .replicas = replicas, .fn = fn, .priv = priv};
    int rc = sk__wire_wait(a->w, conn, to, replicas, timeout_ms, on_wait, w);
    if (rc) free(w);
    return rc;
}

bool sk__acks_master_alone(sk__acks *a, int slot)
{
    int i = entry_of(a, route_slot(a, slot), false);
    return i >= 0 && a->nodes[i].listed == 0;
}

int sk__acks_known(const sk__acks *a)
{
    if (!a->srv->cluster) return a->nodes[0].known;
    int k = -1;
    for (int i = 1; i < SK_STAT_NODES; i++)
        if (a->nodes[i].node[0] && a->nodes[i].known >= 0 && (k < 0 || a->nodes[i].known < k)) k = a->nodes[i].known;
    return k;
}

/* ---- the periodic probe ---------------------------------------------------- */

typedef struct reprobe {
    sk__acks *a;
    int entry;      /* the entry the answer is for */
    char node[64];  /* its node when sent (a Cluster entry may be reused meanwhile) */
} reprobe;

static void on_reprobe_repl(const dlock__reply *r, int err, void *priv)
{
    reprobe *p = priv;
    sk__acks *a = p->a;
    a->probe_due--;
    if (err == DLOCK_ESERVER) a->reprobe_off = true;
    if (!err && dlock__reply_kind(r) == DLOCK__R_STRING && strcmp(a->nodes[p->entry].node, p->node) == 0) {
        int listed = 0, known = sk__info_replicas_in_sync(dlock__reply_str(r, NULL), &listed);
        a->nodes[p->entry].listed = listed;
        set_known(a, p->entry, known, "INFO replication");
    }
    free(p);
}

static void on_reprobe_config(const dlock__reply *r, int err, void *priv)
{
    sk__acks *a = priv;
    a->probe_due--;
    int n = 0, was = sk__acks_plan(a, &n, &(int64_t){0});
    if (err == DLOCK_EUNKNOWN || err == SK_EUNAVAIL) return; /* the connection went: the next one reads it */
    sk__server_read_config(a->srv, r, err);
    if (a->srv->config_refused) a->reprobe_off = true;
    int now = sk__acks_plan(a, &n, &(int64_t){0});
    if (now != was)
        sk__wire_log(a->w, DLOCK_LOG_INFO, "redis persistence changed: %s",
                     now == SK__ACK_REPLY ? "appendfsync always: 201 on the reply"
                                          : "no acknowledgement: acceptances answer 202");
}

/* INFO replication of entry i (slot -1: the connected server). */
static void reprobe_repl(sk__acks *a, int i)
{
    reprobe *p = malloc(sizeof(*p));
    if (!p) return;
    *p = (reprobe){.a = a, .entry = i};
    memcpy(p->node, a->nodes[i].node, sizeof(p->node));
    const char *argv[] = {"INFO", "replication"};
    if (sk__wire_cmd(a->w, 0, i == 0 ? -1 : a->nodes[i].slot, 2, argv, on_reprobe_repl, p) == 0)
        a->probe_due++;
    else
        free(p);
}

void sk__acks_tick(sk__acks *a)
{
    int64_t now = sk__wire_now_ms(a->w);
    if (a->probe_due > 0 || now - a->probe_ms < ACK_PROBE_MS || sk__wire_muted(a->w) || a->reprobe_off) return;
    a->probe_ms = now;
    int n = 0, plan = sk__acks_plan(a, &n, &(int64_t){0});
    if (a->srv->cluster) {
        for (int i = 1; i < SK_STAT_NODES; i++)
            if (plan == SK__ACK_WAIT && a->nodes[i].node[0] && a->nodes[i].known >= 0 && a->nodes[i].known < n)
                reprobe_repl(a, i);
    } else if (plan == SK__ACK_WAIT) {
        reprobe_repl(a, 0);
    } else {
        const char *argv[] = {"CONFIG", "GET", "append*"};
        if (sk__wire_cmd(a->w, 0, -1, 3, argv, on_reprobe_config, a) == 0) a->probe_due++;
    }
}
