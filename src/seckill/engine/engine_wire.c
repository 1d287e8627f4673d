/* engine_wire.c: the engine's connections as the senders see them (see
 * engine_wire.h): each call goes to one reconnecting connection
 * (dlock__rconn, src/common/redis_async.h) and only down; what a reply
 * means for the engine (codes, health, per-node counts) is decided by the
 * engine's on_reply, which every connection was made with (engine.c). */
#include "engine_wire.h"

#include <stdlib.h>
#include <string.h>

#include "common_err.h"
#include "dlock/dlock.h"
#include "redis_async.h"
#include "resp_write.h"
#include "script.h"
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

/* ---- a purchase batch's bytes (sk__rb_write). Invariant: the bytes are
 * exactly the bulk strings an argv call of the same arguments would send,
 * and out->slot is the slot of every key written (they all carry the
 * bucket's hash tag). A purchase's keys are those the script will touch,
 * in the order it reads them (purchase.lua's header): its flags digit says
 * which rate keys follow. ------------------------------------------------ */

#define OV DLOCK__RESP_BULK_OVERHEAD
#define INT DLOCK__RESP_INT_MAX

size_t sk__rb_bound(size_t pn, int n)
{
    size_t camp = 15 * OV + 5 * (pn + 12) + 9 * INT + 41;
    /* keys idem:<key>, iu:<user>/<key>, rl:u:<user>, rl:ip:<addr>; argv id, user, qty, flags+key */
    size_t per = 8 * OV + (pn + 5 + 64) + (pn + 3 + 65 + 64) + (pn + 5 + 65) + (pn + 6 + 64) + INT + 65 +
                 INT + 66;
    return camp + per * (size_t)(n > 0 ? n : 0);
}

static char *w_str(char *p, const char *s) { return dlock__resp_bulk(p, s, strlen(s)); }

/* A key of the bucket: prefix + a fixed part + a variable part. */
static char *w_key(char *p, const sk__rb_camp *c, size_t cpn, const char *part, const char *var, size_t vn)
{
    return dlock__resp_bulk3(p, c->prefix, cpn, part, strlen(part), var, vn);
}

/* The flags digit: 1 the user's rate key follows, 2 the address's. */
static int flags_of(const sk__rb_camp *c, const sk__rb_buyer *q)
{
    if (q->resent) return 0;
    return (c->limits[0] > 0 ? 1 : 0) | (c->limits[2] > 0 && q->ip[0] ? 2 : 0);
}

static char *w_keys(char *p, const sk__rb_camp *c, size_t cpn, const sk__rb_buyer *q, int *nkeys)
{
    size_t ul = strlen(q->user), il = strlen(q->idem);
    int f = flags_of(c, q);
    if (il) {
        char uk[64 + 1 + 64];
        memcpy(uk, q->user, ul);
        uk[ul] = '/';
        memcpy(uk + ul + 1, q->idem, il);
        p = w_key(p, c, cpn, "idem:", q->idem, il);
        p = w_key(p, c, cpn, "iu:", uk, ul + 1 + il);
        *nkeys += 2;
    }
    if (f & 1) p = w_key(p, c, cpn, "rl:u:", q->user, ul), ++*nkeys;
    if (f & 2) p = w_key(p, c, cpn, "rl:ip:", q->ip, strlen(q->ip)), ++*nkeys;
    return p;
}

static char *w_argv(char *p, const sk__rb_camp *c, const sk__rb_buyer *q)
{
    p = dlock__resp_bulk_u64(p, q->order_id);
    p = w_str(p, q->user);
    p = dlock__resp_bulk_i64(p, q->qty);
    char fk[1 + 64];
    size_t il = strlen(q->idem);
    fk[0] = (char)('0' + flags_of(c, q));
    memcpy(fk + 1, q->idem, il);
    return dlock__resp_bulk(p, fk, 1 + il);
}

void sk__rb_write(char *buf, const sk__rb_camp *c, const sk__rb_buyer *const *b, int n, sk__resp_args *out)
{
    size_t cpn = strlen(c->prefix);
    int nkeys = 5;
    /* numkeys is written last, in front of the keys: its width is reserved */
    char *p = buf + OV + INT;
    char *keys = p;
    p = w_key(p, c, cpn, "meta", "", 0);
    p = w_key(p, c, cpn, "stock", "", 0);
    p = w_key(p, c, cpn, "buyers", "", 0);
    p = w_key(p, c, cpn, "orders", "", 0);
    p = w_key(p, c, cpn, "order_status", "", 0);
    for (int i = 0; i < n; i++) p = w_keys(p, c, cpn, b[i], &nkeys);
    p = dlock__resp_bulk_i64(p, n);
    for (int k = 0; k < 6; k++) p = dlock__resp_bulk_i64(p, c->limits[k]);
    p = w_str(p, c->runid);
    p = dlock__resp_bulk_i64(p, c->k);
    for (int i = 0; i < n; i++) p = w_argv(p, c, b[i]);
    char head[OV + INT];
    size_t hn = (size_t)(dlock__resp_bulk_i64(head, nkeys) - head);
    char *start = keys - hn;
    memcpy(start, head, hn);
    *out = (sk__resp_args){.resp = start, .len = (size_t)(p - start), .nargs = 1 + nkeys + 9 + 4 * n,
                           .slot = (int)dlock__key_slot(c->prefix, cpn)};
}
