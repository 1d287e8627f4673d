/* persist_ctx.h: what every part of one persistence worker shares (the
 * scheduler persist.c composes discovery, the stream consumer and the
 * backlog around it): options, the database and Redis handles, the
 * consumer name, the figures, and what any command may learn (a Cluster,
 * a lost consumer group). Invariant: one worker, one thread; every Redis
 * error reply is counted once (redis_errors) and logged, by sk__pctx_cmd.
 * Internal to the pipeline. */
#ifndef SK_PERSIST_CTX_H
#define SK_PERSIST_CTX_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "persist_opts.h"
#include "redis_io.h"

typedef struct sk_pctx {
    const sk_persist_opts *o;
    sk_db *db;
    dlock__conn *rc;
    char consumer[128];
    sk_persist_stats st;
    bool cluster; /* a Cluster (INFO cluster): one read per stream, short blocks */
    bool nogroup; /* Redis lost a stream or group (restart, failover): re-create */
} sk_pctx;

/* A line to the options' log hook (nothing without one). */
__attribute__((format(printf, 2, 3))) void sk__pctx_log(sk_pctx *w, const char *fmt, ...);

/* Runs one command; 0 with *r (caller frees) or the transport code mapped
 * at the engine's edge (sk_err_from_common). A Redis error reply is
 * returned as ESERVER (and freed); NOGROUP sets w->nogroup. */
int sk__pctx_cmd(sk_pctx *w, int argc, const char **argv, dlock__reply **r);

/* A string or status reply's text; "" for anything else or NULL. */
const char *sk__pctx_rstr(const dlock__reply *r);
/* Decimal int64, -1 when s is not one. */
int64_t sk__pctx_i64(const char *s);
/* An integer reply, or a string one read as decimal (-1 if not); 0 for NULL. */
int64_t sk__pctx_rint(const dlock__reply *r);

#endif
