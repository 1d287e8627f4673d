/* coalesce.c: the purchase path. Concurrent purchases of one campaign are
 * queued and sent as one purchase.lua call (at most max_batch, in arrival
 * order); the script decides them one after another, so a batch answers
 * exactly as the same requests sent one by one would. A queue is sent at
 * once when nothing of its campaign is in flight (no added latency when
 * idle); under load it waits for the in-flight call to return or for
 * linger_us, whichever comes first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "engine_internal.h"
#include "outcome.h"
#include "util.h"

struct sk__preq {
    sk_purchase_cb cb;
    void *arg;
    int64_t qty;
    char user[65];
    char idem[65];
    char ip[64];
    uint64_t order_id;
};

typedef struct sk__batch {
    sk__camp *camp;
    struct sk__batch *next; /* on e->failed */
    int err;
    int n;
    sk__preq *reqs[];
} sk__batch;

const int64_t sk_batch_bucket_le[SK_STAT_BATCH_BUCKETS] = {1, 2, 4, 8, 16, 32, 64, 128, INT64_MAX};

static void count_outcome(sk_engine *e, const sk_purchase_result *r)
{
    e->st.outcomes[sk_outcome_of_err(r->err, r->replay)]++;
}

static void maybe_drop_camp(sk_engine *e, sk__camp *c)
{
    if (!e->freeing && c->unknown && !c->npending && !c->inflight && !c->polling)
        sk__camp_drop(e, c);
}

/* ---- failing batches from the loop ----------------------------------- */

static void deliver_batch_error(sk_engine *e, sk__batch *b, int err)
{
    for (int i = 0; i < b->n; i++) {
        sk_purchase_result r = {.err = err, .qty = b->reqs[i]->qty, .order_id = b->reqs[i]->order_id};
        count_outcome(e, &r);
        b->reqs[i]->cb(&r, b->reqs[i]->arg);
        free(b->reqs[i]);
    }
    e->pending -= (size_t)b->n;
}

void sk__deliver_failed(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk_engine *e = arg;
    while (e->failed) {
        sk__batch *b = e->failed;
        e->failed = b->next;
        sk__camp *c = b->camp;
        c->inflight--;
        deliver_batch_error(e, b, b->err);
        free(b);
        maybe_drop_camp(e, c);
    }
}

static void fail_later(sk_engine *e, sk__batch *b, int err)
{
    b->err = err;
    b->next = e->failed;
    e->failed = b;
    if (e->freeing) {
        sk__deliver_failed(-1, 0, e);
        return;
    }
    struct timeval zero = {0, 0};
    event_add(e->fail_ev, &zero);
}

/* ---- sending ------------------------------------------------------------ */

static void on_batch_reply(sk_engine *e, const dlock__reply *r, int err, void *priv);
static void flush(sk__camp *c);

static void on_linger(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk__camp *c = arg;
    c->linger_armed = false;
    if (c->npending) flush(c);
}

/* Appends s + NUL to buf and records its offset. */
static void put_arg(dlock__buf *buf, size_t *offs, int *na, const char *s)
{
    offs[(*na)++] = buf->len;
    dlock__buf_append(buf, s, strlen(s) + 1);
}

static void put_argf(dlock__buf *buf, size_t *offs, int *na, const char *pfx, const char *s)
{
    offs[(*na)++] = buf->len;
    dlock__buf_append(buf, pfx, strlen(pfx));
    dlock__buf_append(buf, s, strlen(s) + 1);
}

static int send_batch(sk_engine *e, sk__camp *c, sk__batch *b)
{
    int n = b->n, nkeys = 4 + 4 * n, nargs = 1 + nkeys + 8 + 5 * n, na = 0;
    size_t *offs = malloc((size_t)nargs * sizeof(size_t));
    const char **args = malloc((size_t)nargs * sizeof(char *));
    dlock__buf buf = {0};
    int rc = DLOCK_ENOMEM;
    if (!offs || !args) goto out;
    char num[32], pfx[120];
    snprintf(num, sizeof(num), "%d", nkeys);
    put_arg(&buf, offs, &na, num);
    put_argf(&buf, offs, &na, c->prefix, "meta");
    put_argf(&buf, offs, &na, c->prefix, "stock");
    put_argf(&buf, offs, &na, c->prefix, "buyers");
    put_argf(&buf, offs, &na, c->prefix, "orders");
    for (int i = 0; i < n; i++) {
        sk__preq *q = b->reqs[i];
        snprintf(pfx, sizeof(pfx), "%sidem:", c->prefix);
        put_argf(&buf, offs, &na, pfx, q->idem);
        snprintf(pfx, sizeof(pfx), "%sorder:%llu", c->prefix, (unsigned long long)q->order_id);
        put_arg(&buf, offs, &na, pfx);
        snprintf(pfx, sizeof(pfx), "%srl:u:", c->prefix);
        put_argf(&buf, offs, &na, pfx, q->user);
        snprintf(pfx, sizeof(pfx), "%srl:ip:", c->prefix);
        put_argf(&buf, offs, &na, pfx, q->ip);
    }
    put_arg(&buf, offs, &na, c->id);
    snprintf(num, sizeof(num), "%d", n);
    put_arg(&buf, offs, &na, num);
    const int64_t lim[6] = {e->o.user_rate_limit, e->o.user_rate_window_ms, e->o.ip_rate_limit,
                            e->o.ip_rate_window_ms, e->o.idem_ttl_ms, e->o.order_ttl_ms};
    for (int k = 0; k < 6; k++) {
        snprintf(num, sizeof(num), "%lld", (long long)lim[k]);
        put_arg(&buf, offs, &na, num);
    }
    for (int i = 0; i < n; i++) {
        sk__preq *q = b->reqs[i];
        snprintf(num, sizeof(num), "%llu", (unsigned long long)q->order_id);
        put_arg(&buf, offs, &na, num);
        put_arg(&buf, offs, &na, q->user);
        snprintf(num, sizeof(num), "%lld", (long long)q->qty);
        put_arg(&buf, offs, &na, num);
        put_arg(&buf, offs, &na, q->idem);
        put_arg(&buf, offs, &na, q->ip);
    }
    if (buf.oom) goto out;
    for (int k = 0; k < na; k++) args[k] = buf.data + offs[k];
    rc = sk__call_script(e, SK__LUA_PURCHASE, na, args, NULL, on_batch_reply, b);
out:
    dlock__buf_free(&buf);
    free(offs);
    free(args);
    return rc;
}

static void flush(sk__camp *c)
{
    sk_engine *e = c->e;
    if (c->linger_armed) {
        event_del(c->linger);
        c->linger_armed = false;
    }
    int n = c->npending;
    if (!n) return;
    sk__batch *b = malloc(sizeof(*b) + (size_t)n * sizeof(sk__preq *));
    if (!b) return; /* stays queued: the next arrival or reply retries */
    b->camp = c;
    b->n = n;
    b->next = NULL;
    memcpy(b->reqs, c->pending, (size_t)n * sizeof(sk__preq *));
    c->npending = 0;
    c->inflight++;
    int rc = 0;
    int64_t wall = dlock__wall_ms();
    for (int i = 0; i < n && !rc; i++) rc = sk_orderid_next(&e->gen, wall, &b->reqs[i]->order_id);
    if (!rc) rc = send_batch(e, c, b);
    if (rc) {
        fail_later(e, b, rc == DLOCK_ENOMEM ? rc : SK_EUNAVAIL);
        return;
    }
    e->st.batched_purchases += (uint64_t)n;
    for (int k = 0; k < SK_STAT_BATCH_BUCKETS; k++)
        if (n <= sk_batch_bucket_le[k]) {
            e->st.batches[k]++;
            break;
        }
}

static void on_batch_reply(sk_engine *e, const dlock__reply *r, int err, void *priv)
{
    sk__batch *b = priv;
    sk__camp *c = b->camp;
    c->inflight--;
    if (!err && (dlock__reply_kind(r) != DLOCK__R_ARRAY ||
                 dlock__reply_count(r) != (size_t)(4 * b->n))) {
        sk__log(e, DLOCK_LOG_ERROR, "purchase script: unexpected reply shape");
        err = DLOCK_ESERVER;
    }
    if (err) {
        /* Sent and unanswered: the decision may have been made. */
        deliver_batch_error(e, b, err == DLOCK_EUNKNOWN ? DLOCK_EUNKNOWN : SK_EUNAVAIL);
    } else {
        for (int i = 0; i < b->n; i++) {
            sk__preq *q = b->reqs[i];
            sk_outcome_id id = sk_outcome_of_script(dlock__reply_int(dlock__reply_at(r, (size_t)(4 * i))));
            sk_purchase_result res = {.err = sk_outcome_get(id)->err, .replay = id == SK_OUT_REPLAY};
            long long v = dlock__reply_int(dlock__reply_at(r, (size_t)(4 * i + 1)));
            const char *oid = dlock__reply_str(dlock__reply_at(r, (size_t)(4 * i + 2)), NULL);
            res.order_id = strtoull(oid, NULL, 10);
            res.qty = dlock__reply_int(dlock__reply_at(r, (size_t)(4 * i + 3)));
            bool stock_value = id == SK_OUT_ACCEPTED || id == SK_OUT_REPLAY || id == SK_OUT_SOLD_OUT;
            if (stock_value) res.remaining = v;
            else res.value = v;
            if ((id == SK_OUT_ACCEPTED || id == SK_OUT_SOLD_OUT) && v == 0) c->soldout = true;
            c->unknown = id == SK_OUT_NOT_FOUND;
            count_outcome(e, &res);
            q->cb(&res, q->arg);
            free(q);
        }
        e->pending -= (size_t)b->n;
    }
    free(b);
    if (c->npending && !e->freeing) flush(c);
    maybe_drop_camp(e, c);
}

/* ---- public entry ------------------------------------------------------- */

int sk_engine_purchase(sk_engine *e, const char *campaign, const char *user, int64_t qty,
                       const char *idem, const char *ip, sk_purchase_cb cb, void *arg)
{
    if (!e || !cb || !sk_valid_campaign_id(campaign) || !sk_valid_user_id(user) || qty < 1 ||
        qty > 1000000 || (idem && !sk_valid_idem_key(idem)))
        return SK_EINVAL;
    if (!sk__ready(e)) {
        e->st.outcomes[SK_OUT_UNAVAILABLE]++;
        return SK_EUNAVAIL;
    }
    sk__camp *c = sk__camp_find(e, campaign, true);
    if (!c) return DLOCK_ENOMEM;
    if (c->soldout && !idem) {
        e->st.soldout_local++;
        e->st.outcomes[SK_OUT_SOLD_OUT]++;
        return SK_ESOLDOUT;
    }
    if (c->npending >= e->o.max_batch) {
        flush(c); /* only left full by an allocation failure */
        if (c->npending >= e->o.max_batch) return SK_EQUEUEFULL;
    }
    sk__preq *q = calloc(1, sizeof(*q));
    if (!q) return DLOCK_ENOMEM;
    q->cb = cb;
    q->arg = arg;
    q->qty = qty;
    snprintf(q->user, sizeof(q->user), "%s", user);
    snprintf(q->idem, sizeof(q->idem), "%s", idem ? idem : "");
    if (ip && strlen(ip) < sizeof(q->ip)) snprintf(q->ip, sizeof(q->ip), "%s", ip);
    c->pending[c->npending++] = q;
    e->pending++;
    if (c->npending >= e->o.max_batch || c->inflight == 0) {
        flush(c);
    } else if (!c->linger_armed) {
        if (!c->linger) c->linger = event_new(e->base, -1, 0, on_linger, c);
        if (c->linger) {
            int64_t us = e->o.linger_us > 0 ? e->o.linger_us : 0;
            struct timeval tv = {.tv_sec = (time_t)(us / 1000000), .tv_usec = (suseconds_t)(us % 1000000)};
            event_add(c->linger, &tv);
            c->linger_armed = true;
        }
    }
    return 0;
}

void sk__coalesce_fail_all(sk_engine *e, int err)
{
    sk__deliver_failed(-1, 0, e);
    for (int k = 0; k < SK__CAMP_BUCKETS; k++)
        for (sk__camp *c = e->camps[k]; c; c = c->next) {
            if (c->linger_armed) {
                event_del(c->linger);
                c->linger_armed = false;
            }
            int n = c->npending;
            c->npending = 0;
            for (int i = 0; i < n; i++) {
                sk_purchase_result r = {.err = err, .qty = c->pending[i]->qty};
                c->pending[i]->cb(&r, c->pending[i]->arg);
                free(c->pending[i]);
            }
            e->pending -= (size_t)n;
        }
}

/* ---- local sold-out flag ------------------------------------------------ */

static void on_poll_reply(sk_engine *e, const dlock__reply *r, int err, void *priv)
{
    sk__camp *c = priv;
    c->polling = false;
    if (!err) {
        const char *s = dlock__reply_str(r, NULL);
        long long v = dlock__reply_kind(r) == DLOCK__R_STRING ? strtoll(s, NULL, 10) : 0;
        if (v > 0 && c->soldout) {
            sk__log(e, DLOCK_LOG_INFO, "campaign %s has stock again (%lld)", c->id, v);
            c->soldout = false;
        }
    }
    maybe_drop_camp(e, c);
}

void sk__soldout_poll(sk_engine *e)
{
    for (int k = 0; k < SK__CAMP_BUCKETS; k++)
        for (sk__camp *c = e->camps[k]; c; c = c->next) {
            if (!c->soldout || c->polling) continue;
            char key[96];
            snprintf(key, sizeof(key), "%sstock", c->prefix);
            const char *argv[] = {"GET", key};
            if (sk__call_cmd(e, 2, argv, NULL, on_poll_reply, c) == 0) c->polling = true;
        }
}
