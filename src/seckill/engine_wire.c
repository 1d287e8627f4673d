/* engine_wire.c: the engine's connections as the senders see them (see
 * engine_wire.h): each call goes to one reconnecting connection
 * (src/common/redis_rconn.h) and only down; what a reply means for the
 * engine (codes, health, per-node counts) is decided by the engine's
 * on_reply, which every connection was made with (engine.c). */
#include "engine_wire.h"

#include <stdlib.h>
#include <string.h>

#include "common_err.h"
#include "dlock/dlock.h"
#include "redis_rconn.h"
#include "resp_write.h"
#include "sk_err.h"
#include "slot.h"
#include "util.h"

/* lua/<name>.lua, with its SHA-1, fixed at build time (script.h) */
extern const dlock__script sk_script_purchase, sk_script_campaign_heat, sk_script_campaign_info,
    sk_script_sk_worker_lease, sk_script_transfer;

static const dlock__script *const lua[SK__NLUA] = {&sk_script_purchase, &sk_script_campaign_heat,
                                                   &sk_script_campaign_info, &sk_script_sk_worker_lease,
                                                   &sk_script_transfer};

/* The connection conn if it may take a command now. */
static dlock__rconn *conn_of(const sk__wire *w, int conn)
{
    if (conn < 0 || conn >= SK__CONNS || !dlock__rconn_is_up(w->conns[conn])) return NULL;
    return w->conns[conn];
}

/* A send's code (dlock__err) as the engine's: the command did not go. */
static int send_err(int rc)
{
    return rc == 0 ? 0 : rc == DLOCK__ENOMEM ? DLOCK_ENOMEM : SK_EUNAVAIL;
}

bool sk__wire_up(const sk__wire *w, int conn) { return conn_of(w, conn) != NULL; }

int sk__wire_cmd(sk__wire *w, int conn, int slot, int argc, const char **argv, sk__reply_fn fn, void *priv)
{
    dlock__rconn *rc = conn_of(w, conn);
    return rc ? send_err(dlock__rconn_cmd(rc, slot, argc, argv, NULL, fn, priv)) : SK_EUNAVAIL;
}

int sk__wire_batch(sk__wire *w, int conn, int script, const sk__resp_args *a, sk__reply_fn fn, void *priv)
{
    dlock__rconn *rc = conn_of(w, conn);
    if (!rc) return SK_EUNAVAIL;
    if (script < 0 || script >= SK__NLUA) return SK_EINVAL;
    return send_err(dlock__rconn_script(rc, lua[script], a->resp, a->len, a->nargs, a->slot, fn, priv));
}

int sk__wire_script(sk__wire *w, int script, int nargs, const char **args, sk__reply_fn fn, void *priv)
{
    if (!conn_of(w, 0)) return SK_EUNAVAIL;
    if (nargs < 1) return SK_EINVAL;
    size_t bytes = 0;
    for (int i = 0; i < nargs; i++) bytes += strlen(args[i]) + DLOCK__RESP_BULK_OVERHEAD;
    char *buf = malloc(bytes);
    if (!buf) return DLOCK_ENOMEM;
    char *p = buf;
    for (int i = 0; i < nargs; i++) p = dlock__resp_bulk(p, args[i], strlen(args[i]));
    bool keyed = nargs >= 2 && strcmp(args[0], "0") != 0;
    sk__resp_args a = {.resp = buf, .len = (size_t)(p - buf), .nargs = nargs,
                       .slot = keyed ? (int)dlock__key_slot(args[1], strlen(args[1])) : -1};
    int rc = sk__wire_batch(w, 0, script, &a, fn, priv);
    free(buf);
    return rc;
}

int sk__wire_wait(sk__wire *w, int conn, int slot, int replicas, int64_t timeout_ms, sk__reply_fn fn, void *priv)
{
    dlock__rconn *rc = conn_of(w, conn);
    if (!rc) return SK_EUNAVAIL;
    if (timeout_ms <= 0 || replicas < 0) return SK_EINVAL; /* WAIT with timeout 0 blocks forever */
    return send_err(dlock__rconn_wait(rc, slot, replicas, timeout_ms, fn, priv));
}

int sk__wire_node_of_slot(const sk__wire *w, int slot, char *out, size_t cap)
{
    dlock__aconn *ac = dlock__rconn_aconn(w->conns[0]);
    if (!ac || slot < 0 || dlock__aconn_node_of_slot(ac, (unsigned)slot, out, cap) != 0) return -1;
    char *db = w->strip_db ? strrchr(out, '/') : NULL; /* "host:port/db" */
    if (db) *db = '\0';
    return 0;
}

int64_t sk__wire_now_ms(const sk__wire *w)
{
    (void)w;
    return dlock__now_ms();
}

int64_t sk__wire_wall_ms(const sk__wire *w)
{
    (void)w;
    return dlock__wall_ms();
}
