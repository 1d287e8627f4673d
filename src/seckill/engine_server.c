/* engine_server.c: what the engine learns about the server at every
 * (re)connect, and the acknowledgement plan it gives each purchase batch.
 * Invariant: the engine is not ready until every probe reply is in, so no
 * batch is sent without a run id for the barrier check and a plan.
 *
 * Probes, pipelined behind SCRIPT LOAD on the new connection: INFO server
 * (run_id: the barrier of purchase.lua), INFO cluster (cluster_enabled:
 * on a Cluster the scripts compare with their own node's run id, and
 * WAIT goes to the slot's master), INFO replication
 * (connected_slaves: the default replica-acks, like Redisson's syncSlaves
 * default), CONFIG GET appendonly / appendfsync (standalone: with
 * appendonly yes + appendfsync always Redis fsyncs the AOF before it
 * replies, so the reply itself is the acknowledgement). A refused CONFIG
 * (renamed command, ACL) is logged once and counts as "not durable". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "engine_internal.h"

/* The value of "field:" in an INFO text into out; false when absent. */
static bool info_field(const char *text, const char *field, char *out, size_t cap)
{
    size_t fl = strlen(field);
    for (const char *p = text; p && *p; p = strchr(p, '\n')) {
        if (*p == '\n') p++;
        if (strncmp(p, field, fl) == 0 && p[fl] == ':') {
            size_t n = strcspn(p + fl + 1, "\r\n");
            if (n >= cap) n = cap - 1;
            memcpy(out, p + fl + 1, n);
            out[n] = '\0';
            return true;
        }
    }
    return false;
}

static void probe_done(sk_engine *e)
{
    /* with refused credentials the probes say nothing about the server */
    if (e->info_due > 0 && --e->info_due == 0 && !e->auth_refused) {
        int n = 0;
        int64_t t = 0;
        int plan = sk__ack_plan(e, &n, &t);
        sk__log(e, DLOCK_LOG_INFO, "redis run id %s, %d replica(s) connected: %s", e->runid[0] ? e->runid : "?",
                e->srv_replicas,
                plan == SK__ACK_WAIT    ? "201 after WAIT by the replicas"
                : plan == SK__ACK_REPLY ? "201 on the reply (appendfsync always)"
                                        : "no acknowledgement possible: acceptances answer 202");
    }
}

static void on_info_server(const dlock__reply *r, int err, void *priv)
{
    sk_engine *e = priv;
    bool ok = !err && dlock__reply_kind(r) == DLOCK__R_STRING &&
              info_field(dlock__reply_str(r, NULL), "run_id", e->runid, sizeof(e->runid));
    if (!ok && err != DLOCK_EUNKNOWN && err != SK_EUNAVAIL && !e->auth_refused)
        sk__log(e, DLOCK_LOG_ERROR, "INFO server gave no run_id: every campaign answers 503 recovering");
    probe_done(e);
}

static void on_info_repl(const dlock__reply *r, int err, void *priv)
{
    sk_engine *e = priv;
    char v[32];
    if (!err && dlock__reply_kind(r) == DLOCK__R_STRING &&
        info_field(dlock__reply_str(r, NULL), "connected_slaves", v, sizeof(v)))
        e->srv_replicas = (int)strtol(v, NULL, 10);
    probe_done(e);
}

static void on_info_cluster(const dlock__reply *r, int err, void *priv)
{
    sk_engine *e = priv;
    char v[8];
    e->srv_cluster = !err && dlock__reply_kind(r) == DLOCK__R_STRING &&
                     info_field(dlock__reply_str(r, NULL), "cluster_enabled", v, sizeof(v)) && strcmp(v, "1") == 0;
    probe_done(e);
}

const char *sk__script_runid(const sk_engine *e) { return e->srv_cluster ? "" : e->runid; }

/* CONFIG GET <name> -> ["<name>", "<value>"]; false when refused. */
static bool config_value(sk_engine *e, const dlock__reply *r, int err, const char *want)
{
    if (err || dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) < 2) {
        if (!e->config_refused_logged && err != DLOCK_EUNKNOWN && err != SK_EUNAVAIL && !e->auth_refused) {
            sk__log(e, DLOCK_LOG_WARN, "CONFIG GET refused: the server's persistence is unknown, "
                                       "so a standalone server's acceptances answer 202");
            e->config_refused_logged = true;
        }
        return false;
    }
    const char *v = dlock__reply_str(dlock__reply_at(r, 1), NULL);
    return v && strcmp(v, want) == 0;
}

static void on_config_aof(const dlock__reply *r, int err, void *priv)
{
    sk_engine *e = priv;
    e->srv_aof_yes = config_value(e, r, err, "yes");
    probe_done(e);
}

static void on_config_fsync(const dlock__reply *r, int err, void *priv)
{
    sk_engine *e = priv;
    e->srv_fsync_always = config_value(e, r, err, "always");
    probe_done(e);
}

void sk__server_probe(sk_engine *e)
{
    e->runid[0] = '\0';
    e->srv_replicas = 0;
    e->srv_aof_yes = e->srv_fsync_always = e->srv_cluster = false;
    e->info_due = 0;
    const char *srv[] = {"INFO", "server"}, *repl[] = {"INFO", "replication"}, *cl[] = {"INFO", "cluster"};
    const char *aof[] = {"CONFIG", "GET", "appendonly"}, *fs[] = {"CONFIG", "GET", "appendfsync"};
    struct {
        int argc;
        const char **argv;
        sk__reply_fn fn;
    } probes[] = {{2, srv, on_info_server}, {2, repl, on_info_repl}, {2, cl, on_info_cluster}, {3, aof, on_config_aof},
                  {3, fs, on_config_fsync}};
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
        if (sk__call_cmd(e, probes[i].argc, probes[i].argv, NULL, probes[i].fn, e) == 0) e->info_due++;
}

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
