/* resp_batch.c: purchase.lua's batch arguments as RESP (resp_batch.h).
 * Invariant: the bytes are exactly the bulk strings an argv call of the
 * same arguments would send, and out->slot is the slot of every key
 * written (they all carry the bucket's hash tag). */
#include "resp_batch.h"

#include <string.h>

#include "resp_write.h"
#include "slot.h"

#define OV DLOCK__RESP_BULK_OVERHEAD
#define INT DLOCK__RESP_INT_MAX

size_t sk__rb_bound(size_t pn, int n)
{
    size_t camp = 14 * OV + 4 * (pn + 8) + 65 + 6 * INT + 41 + 2 * INT;
    size_t per = 10 * OV + (pn + 6 + 65) + (pn + 6 + INT) + (pn + 5 + 65) + (pn + 6 + 64) + INT + 65 + INT +
                 65 + 64 + 1;
    return camp + per * (size_t)(n > 0 ? n : 0);
}

static char *w_str(char *p, const char *s) { return dlock__resp_bulk(p, s, strlen(s)); }

/* A key of the bucket: prefix + a fixed part + a variable part. */
static char *w_key(char *p, const sk__rb_camp *c, size_t cpn, const char *part, const char *var, size_t vn)
{
    return dlock__resp_bulk3(p, c->prefix, cpn, part, strlen(part), var, vn);
}

static char *w_keys(char *p, const sk__rb_camp *c, size_t cpn, const sk__rb_buyer *q)
{
    char num[24], *d = dlock__resp_digits(num + sizeof(num), q->order_id);
    p = w_key(p, c, cpn, "idem:", q->idem, strlen(q->idem));
    p = w_key(p, c, cpn, "order:", d, (size_t)(num + sizeof(num) - d));
    p = w_key(p, c, cpn, "rl:u:", q->user, strlen(q->user));
    return w_key(p, c, cpn, "rl:ip:", q->ip, strlen(q->ip));
}

static char *w_argv(char *p, const sk__rb_buyer *q)
{
    p = dlock__resp_bulk_u64(p, q->order_id);
    p = w_str(p, q->user);
    p = dlock__resp_bulk_i64(p, q->qty);
    p = w_str(p, q->idem);
    p = w_str(p, q->ip);
    return w_str(p, q->resent ? "1" : "");
}

void sk__rb_write(char *buf, const sk__rb_camp *c, const sk__rb_buyer *const *b, int n, sk__resp_args *out)
{
    size_t cpn = strlen(c->prefix);
    char *p = dlock__resp_bulk_i64(buf, 4 + 4 * (int64_t)n);
    p = w_key(p, c, cpn, "meta", "", 0);
    p = w_key(p, c, cpn, "stock", "", 0);
    p = w_key(p, c, cpn, "buyers", "", 0);
    p = w_key(p, c, cpn, "orders", "", 0);
    for (int i = 0; i < n; i++) p = w_keys(p, c, cpn, b[i]);
    p = w_str(p, c->campaign);
    p = dlock__resp_bulk_i64(p, n);
    for (int k = 0; k < 6; k++) p = dlock__resp_bulk_i64(p, c->limits[k]);
    p = w_str(p, c->runid);
    p = dlock__resp_bulk_i64(p, c->k);
    for (int i = 0; i < n; i++) p = w_argv(p, b[i]);
    *out = (sk__resp_args){.resp = buf, .len = (size_t)(p - buf), .nargs = 1 + (4 + 4 * n) + 10 + 6 * n,
                           .slot = (int)dlock__key_slot(c->prefix, cpn)};
}
