/* engine_health.h: the engine's part that knows what /healthz is told
 * about Redis, and why (states and rules: engine_health.c). Invariant: it
 * learns only from what the engine tells it (replies, connection up and
 * down) and reaches Redis only through the wire (engine_wire.h), so a test
 * drives it on a fake wire and clock. Not thread-safe: the engine's loop only. */
#ifndef SK_ENGINE_HEALTH_H
#define SK_ENGINE_HEALTH_H

#include "engine.h"
#include "engine_wire.h"
#include "url.h"

typedef struct sk__health {
    sk__wire *w;              /* cmd (the write probe), log, clock */
    const dlock__url *url;    /* names the user in a refusal (never the password); outlives the part */
    int64_t reconnect_max_ms; /* said in the refusal's log line */
    char probe_key[64];       /* seckill:health:<instance> */
    bool proven;              /* this connection answered a command without an error */
    bool auth_refused;        /* until a connection is proven */
    bool drop_due;            /* this connection's credentials were refused: the tick drops it */
    bool writes_refused;      /* until a write succeeds */
    bool probe_busy;          /* the write probe is in flight */
    int64_t probe_ms;         /* when it was last sent */
    char down_why[200];       /* why the last connection failed or went down */
    char auth_why[300];
    char writes_why[300];
} sk__health;

void sk__health_init(sk__health *h, sk__wire *w, const dlock__url *url,
                     const char *instance, int64_t reconnect_max_ms);
/* An error reply msg on the current connection, whose refused AUTH or
 * SELECT said conn_refusal (NULL: none). True when it is a refused
 * credential (logged once as the state, not per command): the connection
 * must go. */
bool sk__health_error(sk__health *h, const char *msg, const char *conn_refusal);
/* A reply without error on a connection whose AUTH or SELECT was refused
 * (conn_refused) or not. True when it proves the connection (its first
 * good reply): the reconnect backoff starts again from its shortest. */
bool sk__health_good(sk__health *h, bool conn_refused);
void sk__health_up(sk__health *h); /* a new connection is open (not proven yet) */
/* The connection is gone (or could not open) for why; refusal is its
 * refused AUTH/SELECT (NULL: none), auth when that was the AUTH. Logs
 * "what: why". */
void sk__health_down(sk__health *h, const char *refusal, bool auth, const char *what, const char *why);
/* Sends the write probe while writes are refused. True when the open
 * connection must be dropped (its credentials were refused). */
bool sk__health_tick(sk__health *h, bool connected);
/* The state /healthz reports, with its one-line reason. */
sk_redis_health sk__health_state(const sk__health *h, bool connected, const char **why_out);

#endif
