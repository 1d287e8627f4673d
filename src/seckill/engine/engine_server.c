/* engine_server.c: what the engine learns about the server at every
 * (re)connect. Invariant: the engine is not ready until every connect-time
 * probe reply is in (due == 0), so no batch is sent without a run id for
 * the barrier check and the facts the acknowledgement plan follows
 * (engine_acks.c).
 *
 * Probes, pipelined behind SCRIPT LOAD on the new connection (the engine
 * sends them and hands each reply to sk__server_read, which says when the
 * last one is in): INFO server
 * (run_id: the barrier of purchase.lua), INFO cluster (cluster_enabled:
 * on a Cluster the scripts compare with their own node's run id, and
 * WAIT goes to the slot's master), INFO replication
 * (connected_slaves: the default replica-acks, like Redisson's syncSlaves
 * default; the replicas online and in sync), CONFIG GET append* (standalone: with
 * appendonly yes + appendfsync always Redis fsyncs the AOF before it
 * replies, so the reply itself is the acknowledgement). A refused CONFIG
 * (renamed command, ACL) is logged once and counts as "not durable".
 * The periodic re-reading of replication and persistence while connected
 * is the acknowledgement plan's (engine_acks.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "engine_server.h"
#include "redis_io.h"

/* The value of "field:" in an INFO text into out; false when absent (engine_server.h). */
bool sk__info_field(const char *text, const char *field, char *out, size_t cap)
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

void sk__server_init(sk__server *s, sk__wire *w)
{
    memset(s, 0, sizeof(*s));
    s->w = w;
    s->in_sync = s->listed = -1;
}

/* A probe's failure is worth a line unless the connection went (its
 * replacement probes again) or the credentials were refused. */
static bool news(const sk__server *s, int err)
{
    return err != DLOCK_EUNKNOWN && err != SK_EUNAVAIL && !sk__wire_muted(s->w);
}

static void read_info_server(sk__server *s, const dlock__reply *r, int err)
{
    bool ok = !err && dlock__reply_kind(r) == DLOCK__R_STRING &&
              sk__info_field(dlock__reply_str(r, NULL), "run_id", s->runid, sizeof(s->runid));
    if (!ok && news(s, err))
        sk__wire_log(s->w, DLOCK_LOG_ERROR, "INFO server gave no run_id: every campaign answers 503 recovering");
}

static void read_info_repl(sk__server *s, const dlock__reply *r, int err)
{
    char v[32];
    if (!err && dlock__reply_kind(r) == DLOCK__R_STRING) {
        const char *text = dlock__reply_str(r, NULL);
        if (sk__info_field(text, "connected_slaves", v, sizeof(v))) s->replicas = (int)strtol(v, NULL, 10);
        s->in_sync = sk__info_replicas_in_sync(text, &s->listed);
    }
}

static void read_info_cluster(sk__server *s, const dlock__reply *r, int err)
{
    char v[8];
    s->cluster = !err && dlock__reply_kind(r) == DLOCK__R_STRING &&
                 sk__info_field(dlock__reply_str(r, NULL), "cluster_enabled", v, sizeof(v)) && strcmp(v, "1") == 0;
}

const char *sk__server_script_runid(const sk__server *s) { return s->cluster ? "" : s->runid; }

bool sk__server_read_config(sk__server *s, const dlock__reply *r, int err)
{
    s->aof_yes = s->fsync_always = false;
    if (err || dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) < 2) {
        if (err == DLOCK_ESERVER) s->config_refused = true; /* not asked again on this connection */
        if (!s->config_refused_logged && news(s, err)) {
            sk__wire_log(s->w, DLOCK_LOG_WARN, "CONFIG GET refused: the server's persistence is unknown, "
                                                   "so a standalone server's acceptances answer 202");
            s->config_refused_logged = true;
        }
        return false;
    }
    for (size_t i = 0; i + 1 < dlock__reply_count(r); i += 2) {
        const char *k = dlock__reply_str(dlock__reply_at(r, i), NULL);
        const char *v = dlock__reply_str(dlock__reply_at(r, i + 1), NULL);
        if (!k || !v) continue;
        if (strcmp(k, "appendonly") == 0) s->aof_yes = strcmp(v, "yes") == 0;
        if (strcmp(k, "appendfsync") == 0) s->fsync_always = strcmp(v, "always") == 0;
    }
    return true;
}

void sk__server_forget(sk__server *s)
{
    s->runid[0] = '\0';
    s->replicas = 0;
    s->in_sync = s->listed = -1;
    s->aof_yes = s->fsync_always = s->cluster = false;
    s->due = 0;
    s->config_refused = false;
}

int sk__server_probe_argv(int i, const char ***argv_out)
{
    static const char *srv[] = {"INFO", "server"}, *repl[] = {"INFO", "replication"}, *cl[] = {"INFO", "cluster"};
    static const char *aof[] = {"CONFIG", "GET", "append*"};
    static const char **const argv[SK__PROBES] = {srv, repl, cl, aof};
    *argv_out = argv[i];
    return i == SK__PROBES - 1 ? 3 : 2;
}

bool sk__server_read(sk__server *s, int i, const dlock__reply *r, int err)
{
    switch (i) {
    case 0: read_info_server(s, r, err); break;
    case 1: read_info_repl(s, r, err); break;
    case 2: read_info_cluster(s, r, err); break;
    default: sk__server_read_config(s, r, err); break;
    }
    return s->due > 0 && --s->due == 0;
}

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
