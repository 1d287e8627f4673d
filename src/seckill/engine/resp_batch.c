/* resp_batch.c: purchase.lua's batch arguments as RESP (resp_batch.h).
 * Invariant: the bytes are exactly the bulk strings an argv call of the
 * same arguments would send, and out->slot is the slot of every key
 * written (they all carry the bucket's hash tag). A purchase's keys are
 * those the script will touch, in the order it reads them (purchase.lua's
 * header): its flags digit says which rate keys follow. */
#include "resp_batch.h"

#include <string.h>

#include "resp_write.h"
#include "slot.h"

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
