/* engine_server.c: what the engine learns about the server at every
 * (re)connect, and again every ACK_PROBE_MS while it is connected.
 * Invariant: the engine is not ready until every connect-time probe reply
 * is in, so no batch is sent without a run id for the barrier check and a
 * plan (engine_acks.c).
 *
 * Probes, pipelined behind SCRIPT LOAD on the new connection: INFO server
 * (run_id: the barrier of purchase.lua), INFO cluster (cluster_enabled:
 * on a Cluster the scripts compare with their own node's run id, and
 * WAIT goes to the slot's master), INFO replication
 * (connected_slaves: the default replica-acks, like Redisson's syncSlaves
 * default; the replicas online and in sync), CONFIG GET append* (standalone: with
 * appendonly yes + appendfsync always Redis fsyncs the AOF before it
 * replies, so the reply itself is the acknowledgement). A refused CONFIG
 * (renamed command, ACL) is logged once and counts as "not durable".
 * Periodically, one probe at a time on the same connection (a command
 * that does not block, so purchases queue behind it for microseconds):
 * INFO replication while the plan is WAIT, CONFIG GET append* while it
 * is not (a CONFIG SET appendfsync on a running server is followed
 * without a reconnect); on a Cluster INFO replication of each master
 * known short, on its slot. */
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
        bool short_now = plan == SK__ACK_WAIT && !e->srv_cluster && e->acks[0].known < n;
        sk__log(e, DLOCK_LOG_INFO, "redis run id %s, %d replica(s) connected, %d in sync: %s",
                e->runid[0] ? e->runid : "?", e->srv_replicas, e->acks[0].known,
                short_now               ? "202 at once (no WAIT) until enough replicas are in sync, then 201 after WAIT"
                : plan == SK__ACK_WAIT  ? "201 after WAIT by the replicas"
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
    if (!err && dlock__reply_kind(r) == DLOCK__R_STRING) {
        const char *text = dlock__reply_str(r, NULL);
        if (info_field(text, "connected_slaves", v, sizeof(v))) e->srv_replicas = (int)strtol(v, NULL, 10);
        e->acks[0].known = sk__info_replicas_in_sync(text, &e->acks[0].listed);
    }
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

/* CONFIG GET append* -> [name, value, ...]: sets the AOF flags; false
 * when refused (then both are false: not durable). */
static bool config_read(sk_engine *e, const dlock__reply *r, int err)
{
    e->srv_aof_yes = e->srv_fsync_always = false;
    if (err || dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) < 2) {
        if (err == DLOCK_ESERVER) e->reprobe_off = true; /* refused: not asked again on this connection */
        if (!e->config_refused_logged && err != DLOCK_EUNKNOWN && err != SK_EUNAVAIL && !e->auth_refused) {
            sk__log(e, DLOCK_LOG_WARN, "CONFIG GET refused: the server's persistence is unknown, "
                                       "so a standalone server's acceptances answer 202");
            e->config_refused_logged = true;
        }
        return false;
    }
    for (size_t i = 0; i + 1 < dlock__reply_count(r); i += 2) {
        const char *k = dlock__reply_str(dlock__reply_at(r, i), NULL);
        const char *v = dlock__reply_str(dlock__reply_at(r, i + 1), NULL);
        if (!k || !v) continue;
        if (strcmp(k, "appendonly") == 0) e->srv_aof_yes = strcmp(v, "yes") == 0;
        if (strcmp(k, "appendfsync") == 0) e->srv_fsync_always = strcmp(v, "always") == 0;
    }
    return true;
}

static void on_config(const dlock__reply *r, int err, void *priv)
{
    sk_engine *e = priv;
    config_read(e, r, err);
    probe_done(e);
}

void sk__server_probe(sk_engine *e)
{
    e->runid[0] = '\0';
    e->srv_replicas = 0;
    e->srv_aof_yes = e->srv_fsync_always = e->srv_cluster = false;
    e->info_due = 0;
    e->reprobe_off = false;
    sk__acks_reset(e);
    const char *srv[] = {"INFO", "server"}, *repl[] = {"INFO", "replication"}, *cl[] = {"INFO", "cluster"};
    const char *aof[] = {"CONFIG", "GET", "append*"};
    struct {
        int argc;
        const char **argv;
        sk__reply_fn fn;
    } probes[] = {{2, srv, on_info_server}, {2, repl, on_info_repl}, {2, cl, on_info_cluster}, {3, aof, on_config}};
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
        if (sk__call_cmd(e, probes[i].argc, probes[i].argv, NULL, probes[i].fn, e) == 0) e->info_due++;
}

/* ---- the periodic probe ---------------------------------------------------- */

#define ACK_PROBE_MS 250
#define IN_SYNC_LAG_S 2 /* a replica acknowledges every second: older is not in sync */

int sk__info_replicas_in_sync(const char *info, int *listed_out)
{
    int n = 0, listed = 0;
    for (const char *p = info; p && *p; p = strchr(p, '\n')) {
        if (*p == '\n') p++;
        if (strncmp(p, "slave", 5) != 0 || p[5] < '0' || p[5] > '9') continue;
        listed++;
        char line[256];
        size_t len = strcspn(p, "\r\n");
        if (len >= sizeof(line)) len = sizeof(line) - 1;
        memcpy(line, p, len);
        line[len] = '\0';
        const char *lag = strstr(line, ",lag=");
        if (strstr(line, ",state=online,") && lag && strtol(lag + 5, NULL, 10) <= IN_SYNC_LAG_S) n++;
    }
    if (listed_out) *listed_out = listed;
    return n;
}

typedef struct reprobe {
    sk_engine *e;
    int entry;      /* the acks entry the answer is for */
    char node[64];  /* its node when sent (a Cluster entry may be reused meanwhile) */
} reprobe;

static void on_reprobe_repl(const dlock__reply *r, int err, void *priv)
{
    reprobe *p = priv;
    sk_engine *e = p->e;
    e->acks_probe_due--;
    if (err == DLOCK_ESERVER) e->reprobe_off = true;
    if (!err && dlock__reply_kind(r) == DLOCK__R_STRING && strcmp(e->acks[p->entry].node, p->node) == 0) {
        int listed = 0, known = sk__info_replicas_in_sync(dlock__reply_str(r, NULL), &listed);
        e->acks[p->entry].listed = listed;
        sk__acks_set(e, p->entry, known, "INFO replication");
    }
    free(p);
}

static void on_reprobe_config(const dlock__reply *r, int err, void *priv)
{
    sk_engine *e = priv;
    e->acks_probe_due--;
    int n = 0, was = sk__ack_plan(e, &n, &(int64_t){0});
    if (err == DLOCK_EUNKNOWN || err == SK_EUNAVAIL) return; /* the connection went: the next one reads it */
    config_read(e, r, err);
    int now = sk__ack_plan(e, &n, &(int64_t){0});
    if (now != was)
        sk__log(e, DLOCK_LOG_INFO, "redis persistence changed: %s",
                now == SK__ACK_REPLY ? "appendfsync always: 201 on the reply" : "no acknowledgement: acceptances answer 202");
}

/* INFO replication of entry i (slot -1: the connected server). */
static void reprobe_repl(sk_engine *e, int i)
{
    reprobe *p = malloc(sizeof(*p));
    if (!p) return;
    *p = (reprobe){.e = e, .entry = i};
    memcpy(p->node, e->acks[i].node, sizeof(p->node));
    const char *argv[] = {"INFO", "replication"};
    if (sk__call_cmd_slot(e, i == 0 ? -1 : e->acks[i].slot, 2, argv, NULL, on_reprobe_repl, p) == 0)
        e->acks_probe_due++;
    else
        free(p);
}

void sk__server_reprobe(sk_engine *e, int64_t now_ms)
{
    if (e->acks_probe_due > 0 || now_ms - e->acks_probe_ms < ACK_PROBE_MS || e->auth_refused || e->reprobe_off)
        return;
    e->acks_probe_ms = now_ms;
    int n = 0, plan = sk__ack_plan(e, &n, &(int64_t){0});
    if (e->srv_cluster) {
        for (int i = 1; i < SK_STAT_NODES; i++)
            if (plan == SK__ACK_WAIT && e->acks[i].node[0] && e->acks[i].known >= 0 && e->acks[i].known < n)
                reprobe_repl(e, i);
    } else if (plan == SK__ACK_WAIT) {
        reprobe_repl(e, 0);
    } else {
        const char *argv[] = {"CONFIG", "GET", "append*"};
        if (sk__call_cmd(e, 3, argv, NULL, on_reprobe_config, e) == 0) e->acks_probe_due++;
    }
}
