/* engine_server.h: the engine's part that learns what the connected
 * server is (run id, Cluster mode, replicas, persistence) from the probes
 * the engine sends at every connect (engine_server.c). Invariant: the
 * facts are complete only once every probe's reply is in (due == 0); they
 * come only from replies, which the engine hands to sk__server_read (the
 * last one tells it so: no callback), so a test feeds them on a fake wire.
 * Not thread-safe: the engine's loop only. */
#ifndef SK_ENGINE_SERVER_H
#define SK_ENGINE_SERVER_H

#include "engine_wire.h"

typedef struct sk__server {
    sk__wire *w;     /* muted, log */
    char runid[41];  /* INFO server run_id; "" unknown */
    int due;         /* connect-time replies still to come */
    int replicas;    /* INFO replication connected_slaves */
    int in_sync;     /* of those, online and in sync at connect; -1 unknown */
    int listed;      /* replicas listed in any state at connect; -1 unknown */
    bool aof_yes, fsync_always; /* CONFIG GET appendonly / appendfsync */
    bool cluster;    /* INFO cluster cluster_enabled:1: every node has its own run id */
    bool config_refused; /* CONFIG GET was refused on this connection (ACL, renamed) */
    bool config_refused_logged;
} sk__server;

/* The connect-time probes, in the order they are sent: INFO server, INFO
 * replication, INFO cluster, CONFIG GET append*. */
enum { SK__PROBES = 4 };

void sk__server_init(sk__server *s, sk__wire *w);
/* A new connection: forgets the facts (due 0; the caller counts each
 * probe it sends in due). */
void sk__server_forget(sk__server *s);
/* Probe i's command (0 <= i < SK__PROBES) into *argv_out: its argc. */
int sk__server_probe_argv(int i, const char ***argv_out);
/* Probe i's reply (or err) into the facts; true when it was the last one
 * due: the facts are complete. */
bool sk__server_read(sk__server *s, int i, const dlock__reply *r, int err);
/* The run id purchase.lua and campaign_heat.lua check against: the
 * connected server's, or "" on a Cluster (the script reads the run id of
 * the node it runs on: the engine does not track which node serves a slot
 * through a reshard or a failover). */
const char *sk__server_script_runid(const sk__server *s);
/* The reply (or err) of a CONFIG GET append* into the AOF facts; false
 * when refused (then both are false: not durable; logged once). */
bool sk__server_read_config(sk__server *s, const dlock__reply *r, int err);
/* Replicas online (state=online) and in sync (lag <= a bound) in an INFO
 * replication text; *listed_out (may be NULL) gets every replica it lists. */
int sk__info_replicas_in_sync(const char *info, int *listed_out);
/* The value of "field:" in an INFO text into out (cut to cap - 1); false
 * when absent. */
bool sk__info_field(const char *text, const char *field, char *out, size_t cap);

#endif
