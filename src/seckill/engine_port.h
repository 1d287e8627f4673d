/* engine_port.h: what a part of the engine (engine_health.h,
 * engine_lease.h, engine_server.h, engine_acks.h) may ask of the engine
 * that owns it: send a command or a script, name a slot's node, log, read
 * a clock. Given to the part at its init. Invariant: a part names no
 * function of engine.c, so it runs on a test's port and clock as on the
 * engine's connection. */
#ifndef SK_ENGINE_PORT_H
#define SK_ENGINE_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coalesce.h" /* sk__reply_fn: the one reply callback of the engine */
#include "sk_log.h"

/* The engine's scripts (lua/<name>.lua), by the number a port sends. */
enum { SK__LUA_PURCHASE = 0, SK__LUA_HEAT, SK__LUA_INFO, SK__LUA_LEASE, SK__LUA_TRANSFER, SK__NLUA };

typedef struct sk__port {
    void *ud; /* handed to every function below */
    /* Sends argv (NUL-terminated strings) to the master of slot (-1:
     * where a keyless command goes). 0: fn runs once, later, with the
     * reply as sk__reply_fn says; an error (SK_EUNAVAIL: not connected,
     * DLOCK_ENOMEM): fn will not run. */
    int (*cmd)(void *ud, int slot, int argc, const char **argv, sk__reply_fn fn, void *priv);
    /* The same for script SK__LUA_* with nargs arguments (numkeys, keys,
     * argv); the port adds EVALSHA and the sha. */
    int (*script)(void *ud, int script, int nargs, const char **args, sk__reply_fn fn, void *priv);
    /* "host:port" of the node serving slot now: 0, or -1 unknown. May be
     * NULL (always unknown). */
    int (*node_of_slot)(void *ud, int slot, char *out, size_t cap);
    /* True while the server refuses the credentials: replies then say
     * nothing about the server and failures are not news. May be NULL. */
    bool (*muted)(void *ud);
    sk_log_fn log; /* NULL: silent */
    void *log_ud;
} sk__port;

typedef struct sk__clock {
    void *ud;
    int64_t (*now_ms)(void *ud);  /* monotonic ms: every deadline */
    int64_t (*wall_ms)(void *ud); /* wall-clock unix ms: the ms of an order id */
} sk__clock;

#define sk__port_log(p, level, ...) sk_logf((p)->log, (p)->log_ud, level, __VA_ARGS__)

static inline bool sk__port_muted(const sk__port *p) { return p->muted && p->muted(p->ud); }

static inline int64_t sk__clock_now(const sk__clock *c) { return c->now_ms(c->ud); }

#endif
