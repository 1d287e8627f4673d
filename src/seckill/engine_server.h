/* engine_server.h: the engine's part that learns what the connected
 * server is (run id, Cluster mode, replicas, persistence) from the probes
 * it sends at every connect (engine_server.c). Invariant: the facts are
 * complete only once every probe's reply is in (due == 0); they come only
 * from replies, through the wire (engine_wire.h), so a test feeds them on
 * a fake wire. Not thread-safe: the engine's loop only. */
#ifndef SK_ENGINE_SERVER_H
#define SK_ENGINE_SERVER_H

#include "engine_wire.h"

typedef struct sk__server {
    sk__wire *w;     /* cmd (the probes), muted, log */
    void (*done)(void *ud); /* the engine's: called with done_ud when the last probe reply is in */
    void *done_ud;
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

void sk__server_init(sk__server *s, sk__wire *w, void (*done)(void *ud), void *done_ud);
/* A new connection: forgets the facts and sends INFO server, INFO
 * replication, INFO cluster and CONFIG GET append* (s->due counts their
 * replies; done runs after the last one). */
void sk__server_probe(sk__server *s);
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
