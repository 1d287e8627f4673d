/* coalesce.c: the purchase path. Concurrent purchases of one campaign are
 * queued and sent as one purchase.lua call (at most max_batch, in arrival
 * order); the script decides them one after another, so a batch answers
 * exactly as the same requests sent one by one would. A queue is sent at
 * once when nothing of its campaign is in flight (no added latency when
 * idle); under load it waits for the in-flight call to return or for
 * linger_us, whichever comes first. Redis is reached only through the
 * hooks (coalesce.h); outcomes are read from the table of outcome.h.
 * Acknowledgement: when the plan is SK__ACK_WAIT, a WAIT is pipelined
 * right behind the script; a batch is decided by the script's reply and
 * answered when both replies are in: acceptances (and replays) are 201
 * only if WAIT reported enough replicas, else pending (202). The
 * campaign's next batch may be sent as soon as the script replied (it
 * queues behind the WAIT on the same connection). */
#include "coalesce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "camp_table.h"
#include "dlock/dlock.h"
#include "ids.h"
#include "outcome.h"
#include "util.h"

#define MAX_QTY 1000000

struct sk__preq {
    sk_purchase_cb cb;
    void *arg;
    int64_t qty;
    char user[65];
    char idem[65];
    char ip[64];
    uint64_t order_id;
    sk_purchase_result res; /* decided, waiting for the acknowledgement */
};

typedef struct sk__batch {
    sk__camp *camp;         /* until the script's reply */
    struct sk__batch *next; /* on co->failed */
    int err;                /* not sent (fail_later), or the script's transport error */
    int n;
    int ack;                /* SK__ACK_* when sent */
    int acks;               /* WAIT's replicas */
    int replies_due;        /* the script's and WAIT's replies still to come */
    bool acked;             /* WAIT reported >= acks */
    bool wait_later;        /* WAIT follows the script's reply (Cluster) */
    sk__coalescer *co;
    sk__preq *reqs[];
} sk__batch;

struct sk__coalescer {
    struct event_base *base;
    sk__coalesce_hooks h;
    int max_batch;
    int64_t linger_us;
    int64_t limits[6];      /* user rate, window; ip rate, window; idem ttl; order ttl */
    sk__camp_table camps;
    size_t pending;         /* purchases queued or in flight */
    bool freeing;
    sk__batch *failed;      /* batches to fail from the loop (fail_ev) */
    struct event *fail_ev;
    uint64_t outcomes[SK_STAT_OUTCOMES];
    uint64_t batches[SK_STAT_BATCH_BUCKETS];
    uint64_t batched_purchases;
    uint64_t soldout_local;
    uint64_t answered_acked, answered_pending, ack_waits, ack_failures;
    char *wire;             /* the last batch's RESP arguments (reused) */
    size_t wire_cap;
};

const int64_t sk_batch_bucket_le[SK_STAT_BATCH_BUCKETS] = {1, 2, 4, 8, 16, 32, 64, 128, INT64_MAX};

static void co_log(sk__coalescer *co, int level, const char *msg)
{
    if (co->h.log) co->h.log(co->h.ud, level, msg);
}

static void count_outcome(sk__coalescer *co, const sk_purchase_result *r)
{
    co->outcomes[sk_outcome_of_err(r->err, r->replay)]++;
}

static void maybe_drop_camp(sk__coalescer *co, sk__camp *c)
{
    if (!co->freeing && c->unknown && !c->npending && !c->inflight && !c->polling)
        sk__camp_drop(&co->camps, c);
}

/* ---- failing batches from the loop ----------------------------------- */

static void deliver_batch_error(sk__coalescer *co, sk__batch *b, int err)
{
    for (int i = 0; i < b->n; i++) {
        sk_purchase_result r = {.err = err, .qty = b->reqs[i]->qty, .order_id = b->reqs[i]->order_id};
        count_outcome(co, &r);
        b->reqs[i]->cb(&r, b->reqs[i]->arg);
        free(b->reqs[i]);
    }
    co->pending -= (size_t)b->n;
}

static void deliver_failed(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk__coalescer *co = arg;
    while (co->failed) {
        sk__batch *b = co->failed;
        co->failed = b->next;
        sk__camp *c = b->camp;
        c->inflight--;
        deliver_batch_error(co, b, b->err);
        free(b);
        maybe_drop_camp(co, c);
    }
}

/* A batch that could not be sent is answered from the loop, never from
 * inside sk__coalescer_purchase (whose caller expects no callback then). */
static void fail_later(sk__coalescer *co, sk__batch *b, int err)
{
    b->err = err;
    b->next = co->failed;
    co->failed = b;
    if (co->freeing) {
        deliver_failed(-1, 0, co);
        return;
    }
    struct timeval zero = {0, 0};
    event_add(co->fail_ev, &zero);
}

/* ---- sending ------------------------------------------------------------ */

static void on_batch_reply(const dlock__reply *r, int err, void *priv);
static void flush(sk__camp *c);

static void on_linger(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk__camp *c = arg;
    c->linger_armed = false;
    if (c->npending) flush(c);
}

/* ---- the batch's EVALSHA arguments, written as RESP ------------------------
 * One call of purchase.lua carries 13 + 9 per purchase arguments; they are
 * written straight into the wire format ("$<len>\r\n<bytes>\r\n" each)
 * in a buffer the coalescer keeps, with integers converted by hand: the
 * printf family and hiredis' argv formatting were ~40 % of seckilld's
 * instructions per purchase (docs/BENCHMARKS.md). The engine writes the
 * "*<argc>" header and the EVALSHA/sha arguments in front. */

/* Bytes the bulk string header "$<n>\r\n" and the trailing CRLF take at most. */
#define RESP_OVERHEAD 26

/* Decimal digits of v, written ending at end; returns where they start. */
static char *u64_digits(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

static char *w_bulk_head(char *p, size_t n)
{
    char num[24], *d = u64_digits(num + sizeof(num), n);
    *p++ = '$';
    size_t k = (size_t)(num + sizeof(num) - d);
    memcpy(p, d, k);
    p += k;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* One argument: pfx (may be empty) immediately followed by s. */
static char *w_arg(char *p, const char *pfx, size_t pn, const char *s, size_t sn)
{
    p = w_bulk_head(p, pn + sn);
    memcpy(p, pfx, pn);
    memcpy(p + pn, s, sn);
    p += pn + sn;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

static char *w_str(char *p, const char *s) { return w_arg(p, "", 0, s, strlen(s)); }

static char *w_int(char *p, int64_t v)
{
    char num[24], *d = u64_digits(num + sizeof(num), v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    if (v < 0) *--d = '-';
    return w_arg(p, "", 0, d, (size_t)(num + sizeof(num) - d));
}

/* A key of the campaign: prefix + a fixed part + a variable part. */
static char *w_key(char *p, const sk__camp *c, size_t cpn, const char *part, const char *var, size_t vn)
{
    size_t partn = strlen(part);
    p = w_bulk_head(p, cpn + partn + vn);
    memcpy(p, c->prefix, cpn);
    memcpy(p + cpn, part, partn);
    memcpy(p + cpn + partn, var, vn);
    p += cpn + partn + vn;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* Upper bound of the batch's RESP bytes: every string is bounded by its
 * array (user, idem, ip, prefix, id, run id) or is a 20-digit integer. */
static size_t batch_bound(const sk__batch *b)
{
    size_t camp = 13 * RESP_OVERHEAD + 4 * (80 + 8) + 65 + 6 * 20 + 41 + 20;
    size_t per = 9 * RESP_OVERHEAD + (80 + 6 + 65) + (80 + 6 + 20) + (80 + 5 + 65) + (80 + 6 + 64) +
                 20 + 65 + 20 + 65 + 64;
    return camp + per * (size_t)b->n;
}

/* purchase.lua's KEYS (numkeys, 4 of the campaign, then 4 per purchase)
 * and ARGV (campaign, N, the six limits, the server's run id, then 5 per
 * purchase). Returns the end. */
static char *w_batch(char *p, const sk__coalescer *co, const sk__camp *c, const sk__batch *b)
{
    size_t cpn = strlen(c->prefix);
    p = w_int(p, 4 + 4 * b->n);
    p = w_key(p, c, cpn, "meta", "", 0);
    p = w_key(p, c, cpn, "stock", "", 0);
    p = w_key(p, c, cpn, "buyers", "", 0);
    p = w_key(p, c, cpn, "orders", "", 0);
    for (int i = 0; i < b->n; i++) {
        const sk__preq *q = b->reqs[i];
        char num[24], *d = u64_digits(num + sizeof(num), q->order_id);
        p = w_key(p, c, cpn, "idem:", q->idem, strlen(q->idem));
        p = w_key(p, c, cpn, "order:", d, (size_t)(num + sizeof(num) - d));
        p = w_key(p, c, cpn, "rl:u:", q->user, strlen(q->user));
        p = w_key(p, c, cpn, "rl:ip:", q->ip, strlen(q->ip));
    }
    p = w_str(p, c->id);
    p = w_int(p, b->n);
    for (int k = 0; k < 6; k++) p = w_int(p, co->limits[k]);
    p = w_str(p, co->h.server_runid(co->h.ud));
    for (int i = 0; i < b->n; i++) {
        const sk__preq *q = b->reqs[i];
        char num[24], *d = u64_digits(num + sizeof(num), q->order_id);
        p = w_arg(p, "", 0, d, (size_t)(num + sizeof(num) - d));
        p = w_str(p, q->user);
        p = w_int(p, q->qty);
        p = w_str(p, q->idem);
        p = w_str(p, q->ip);
    }
    return p;
}

static void on_wait_reply(const dlock__reply *r, int err, void *priv);

/* WAIT right behind the script, on the same connection: it covers the
 * script's write (purchase.lua always writes when it decides). On a
 * Cluster it follows the script's reply, to the node serving the
 * campaign's slot (where the script ran). */
static void send_wait(sk__coalescer *co, const sk__camp *c, sk__batch *b)
{
    int64_t timeout = 0;
    b->ack = co->h.ack_plan(co->h.ud, &b->acks, &timeout);
    b->acked = b->ack == SK__ACK_REPLY;
    if (b->ack != SK__ACK_WAIT) return;
    char n[16], t[24];
    snprintf(n, sizeof(n), "%d", b->acks);
    snprintf(t, sizeof(t), "%lld", (long long)timeout);
    const char *argv[] = {"WAIT", n, t};
    co->ack_waits++;
    char route[96];
    snprintf(route, sizeof(route), "%smeta", c->prefix);
    if (co->h.send_wait(co->h.ud, route, 3, argv, on_wait_reply, b) == 0) b->replies_due++;
    else co->ack_failures++; /* decided, never acknowledged: pending */
}

static int send_batch(sk__coalescer *co, sk__camp *c, sk__batch *b)
{
    size_t need = batch_bound(b);
    if (need > co->wire_cap) {
        char *w = realloc(co->wire, need);
        if (!w) return DLOCK_ENOMEM;
        co->wire = w;
        co->wire_cap = need;
    }
    char *end = w_batch(co->wire, co, c, b);
    int nargs = 1 + (4 + 4 * b->n) + 9 + 5 * b->n;
    b->replies_due = 0;
    int rc = co->h.send_script(co->h.ud, nargs, co->wire, (size_t)(end - co->wire), on_batch_reply, b);
    if (rc == 0) {
        b->replies_due = 1;
        b->wait_later = co->h.wait_after_reply(co->h.ud);
        if (!b->wait_later) send_wait(co, c, b);
    }
    return rc;
}

static void count_batch(sk__coalescer *co, int n)
{
    co->batched_purchases += (uint64_t)n;
    for (int k = 0; k < SK_STAT_BATCH_BUCKETS; k++)
        if (n <= sk_batch_bucket_le[k]) {
            co->batches[k]++;
            break;
        }
}

static void flush(sk__camp *c)
{
    sk__coalescer *co = c->co;
    if (c->linger_armed) {
        event_del(c->linger);
        c->linger_armed = false;
    }
    int n = c->npending;
    if (!n) return;
    sk__batch *b = malloc(sizeof(*b) + (size_t)n * sizeof(sk__preq *));
    if (!b) return; /* stays queued: the next arrival or reply retries */
    *b = (sk__batch){.camp = c, .co = co, .n = n};
    memcpy(b->reqs, c->pending, (size_t)n * sizeof(sk__preq *));
    c->npending = 0;
    c->inflight++;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = co->h.next_order_id(co->h.ud, &b->reqs[i]->order_id);
    if (!rc) rc = send_batch(co, c, b);
    if (rc) fail_later(co, b, rc == DLOCK_ENOMEM ? rc : SK_EUNAVAIL);
    else count_batch(co, n);
}

/* Reads purchase i of a batch from its 4 reply entries into q->res; the
 * answer waits for the acknowledgement (deliver_decided). */
static void decide_one(sk__camp *c, const dlock__reply *r, int i, sk__preq *q)
{
    sk_outcome_id id = sk_outcome_of_script(dlock__reply_int(dlock__reply_at(r, (size_t)(4 * i))));
    sk_purchase_result res = {.err = sk_outcome_get(id)->err, .replay = id == SK_OUT_REPLAY};
    long long v = dlock__reply_int(dlock__reply_at(r, (size_t)(4 * i + 1)));
    const char *oid = dlock__reply_str(dlock__reply_at(r, (size_t)(4 * i + 2)), NULL);
    res.order_id = 0; /* the script's decimal string, read without strtoull */
    for (const char *p = oid ? oid : ""; *p >= '0' && *p <= '9'; p++)
        res.order_id = res.order_id * 10 + (uint64_t)(*p - '0');
    res.qty = dlock__reply_int(dlock__reply_at(r, (size_t)(4 * i + 3)));
    bool stock_value = id == SK_OUT_ACCEPTED || id == SK_OUT_REPLAY || id == SK_OUT_SOLD_OUT;
    if (stock_value) res.remaining = v;
    else res.value = v;
    if ((id == SK_OUT_ACCEPTED || id == SK_OUT_SOLD_OUT) && v == 0) c->soldout = true;
    c->unknown = id == SK_OUT_NOT_FOUND;
    q->res = res;
}

/* Answers a decided batch: an acceptance or replay is pending unless the
 * batch was acknowledged. */
static void deliver_decided(sk__coalescer *co, sk__batch *b)
{
    for (int i = 0; i < b->n; i++) {
        sk__preq *q = b->reqs[i];
        if (q->res.err == 0) {
            q->res.pending = !b->acked;
            if (q->res.pending) co->answered_pending++;
            else co->answered_acked++;
        }
        count_outcome(co, &q->res);
        q->cb(&q->res, q->arg);
        free(q);
    }
    co->pending -= (size_t)b->n;
}

/* The script's or WAIT's reply is in; the second one answers the batch. */
static void batch_reply_in(sk__coalescer *co, sk__batch *b)
{
    if (--b->replies_due > 0) return;
    if (b->err) deliver_batch_error(co, b, b->err);
    else deliver_decided(co, b);
    free(b);
}

static void on_wait_reply(const dlock__reply *r, int err, void *priv)
{
    sk__batch *b = priv;
    sk__coalescer *co = b->co;
    b->acked = !err && dlock__reply_kind(r) == DLOCK__R_INTEGER && dlock__reply_int(r) >= b->acks;
    if (!b->acked) co->ack_failures++;
    batch_reply_in(co, b);
}

static void on_batch_reply(const dlock__reply *r, int err, void *priv)
{
    sk__batch *b = priv;
    sk__camp *c = b->camp;
    sk__coalescer *co = c->co;
    c->inflight--;
    if (!err && (dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != (size_t)(4 * b->n))) {
        co_log(co, DLOCK_LOG_ERROR, "purchase script: unexpected reply shape");
        err = DLOCK_ESERVER;
    }
    if (err) {
        /* Sent and unanswered: the decision may have been made. */
        b->err = err == DLOCK_EUNKNOWN ? DLOCK_EUNKNOWN : SK_EUNAVAIL;
    } else {
        bool decided = false; /* an acceptance or replay: something to acknowledge */
        for (int i = 0; i < b->n; i++) {
            decide_one(c, r, i, b->reqs[i]);
            decided = decided || b->reqs[i]->res.err == 0;
        }
        /* no WAIT for a batch of refusals (a barrier, sold out): nothing to
         * acknowledge, and a promoted master without replicas would make
         * each such batch wait the whole timeout */
        if (b->wait_later && decided) send_wait(co, c, b);
    }
    b->camp = NULL; /* the campaign may go before the WAIT's reply */
    batch_reply_in(co, b);
    if (c->npending && !co->freeing) flush(c);
    maybe_drop_camp(co, c);
}

/* ---- public entry ------------------------------------------------------- */

static void arm_linger(sk__coalescer *co, sk__camp *c)
{
    if (c->linger_armed) return;
    if (!c->linger) c->linger = event_new(co->base, -1, 0, on_linger, c);
    if (!c->linger) return;
    int64_t us = co->linger_us > 0 ? co->linger_us : 0;
    struct timeval tv = {.tv_sec = (time_t)(us / 1000000), .tv_usec = (suseconds_t)(us % 1000000)};
    event_add(c->linger, &tv);
    c->linger_armed = true;
}

static bool purchase_valid(const char *campaign, const char *user, int64_t qty, const char *idem)
{
    return sk_valid_campaign_id(campaign) && sk_valid_user_id(user) && qty >= 1 && qty <= MAX_QTY &&
           (!idem || sk_valid_idem_key(idem));
}

int sk__coalescer_purchase(sk__coalescer *co, const char *campaign, const char *user, int64_t qty,
                           const char *idem, const char *ip, sk_purchase_cb cb, void *arg)
{
    if (!cb || !purchase_valid(campaign, user, qty, idem)) return SK_EINVAL;
    if (!co->h.ready(co->h.ud)) {
        co->outcomes[SK_OUT_UNAVAILABLE]++;
        return SK_EUNAVAIL;
    }
    sk__camp *c = sk__camp_find(&co->camps, campaign, true);
    if (!c) return DLOCK_ENOMEM;
    if (c->soldout && !idem) {
        co->soldout_local++;
        co->outcomes[SK_OUT_SOLD_OUT]++;
        return SK_ESOLDOUT;
    }
    if (c->npending >= co->max_batch) {
        flush(c); /* only left full by an allocation failure */
        if (c->npending >= co->max_batch) return SK_EQUEUEFULL;
    }
    sk__preq *q = calloc(1, sizeof(*q));
    if (!q) return DLOCK_ENOMEM;
    q->cb = cb;
    q->arg = arg;
    q->qty = qty;
    /* valid (purchase_valid): user and idem fit; an ip that does not is left out */
    memcpy(q->user, user, strlen(user) + 1);
    if (idem) memcpy(q->idem, idem, strlen(idem) + 1);
    size_t ipn = ip ? strlen(ip) : 0;
    if (ipn < sizeof(q->ip)) memcpy(q->ip, ip ? ip : "", ipn + 1);
    c->pending[c->npending++] = q;
    co->pending++;
    if (c->npending >= co->max_batch || c->inflight == 0) flush(c);
    else arm_linger(co, c);
    return 0;
}

static void fail_queue(sk__camp *c, void *ud)
{
    int err = *(const int *)ud;
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
    c->co->pending -= (size_t)n;
}

void sk__coalescer_fail_all(sk__coalescer *co, int err)
{
    co->freeing = true;
    deliver_failed(-1, 0, co);
    sk__camp_each(&co->camps, fail_queue, &err);
}

/* ---- local sold-out flag ------------------------------------------------ */

static void on_poll_reply(const dlock__reply *r, int err, void *priv)
{
    sk__camp *c = priv;
    c->polling = false;
    if (!err) {
        const char *s = dlock__reply_str(r, NULL);
        long long v = dlock__reply_kind(r) == DLOCK__R_STRING ? strtoll(s, NULL, 10) : 0;
        if (v > 0 && c->soldout) {
            char msg[128];
            snprintf(msg, sizeof(msg), "campaign %s has stock again (%lld)", c->id, v);
            co_log(c->co, DLOCK_LOG_INFO, msg);
            c->soldout = false;
        }
    }
    maybe_drop_camp(c->co, c);
}

static void poll_one(sk__camp *c, void *ud)
{
    (void)ud;
    if (!c->soldout || c->polling) return;
    char key[96];
    snprintf(key, sizeof(key), "%sstock", c->prefix);
    const char *argv[] = {"GET", key};
    if (c->co->h.send(c->co->h.ud, 2, argv, on_poll_reply, c) == 0) c->polling = true;
}

void sk__coalescer_poll_soldout(sk__coalescer *co) { sk__camp_each(&co->camps, poll_one, NULL); }

void sk__coalescer_restocked(sk__coalescer *co, const char *campaign)
{
    sk__camp *c = sk__camp_find(&co->camps, campaign, false);
    if (c) c->soldout = false;
}

/* ---- life cycle and figures --------------------------------------------- */

int sk__coalescer_new(struct event_base *base, const sk_engine_opts *o, const sk__coalesce_hooks *hooks,
                      sk__coalescer **out)
{
    *out = NULL;
    sk__coalescer *co = calloc(1, sizeof(*co));
    if (!co) return DLOCK_ENOMEM;
    co->base = base;
    co->h = *hooks;
    co->max_batch = o->max_batch;
    co->linger_us = o->linger_us;
    const int64_t lim[6] = {o->user_rate_limit, o->user_rate_window_ms, o->ip_rate_limit,
                            o->ip_rate_window_ms, o->idem_ttl_ms, o->order_ttl_ms};
    memcpy(co->limits, lim, sizeof(lim));
    co->camps.max_batch = o->max_batch;
    co->camps.owner = co;
    co->fail_ev = event_new(base, -1, 0, deliver_failed, co);
    if (!co->fail_ev) {
        free(co);
        return DLOCK_ENOMEM;
    }
    *out = co;
    return 0;
}

void sk__coalescer_free(sk__coalescer *co)
{
    if (!co) return;
    sk__camp_table_clear(&co->camps);
    event_free(co->fail_ev);
    free(co->wire);
    free(co);
}

size_t sk__coalescer_pending(const sk__coalescer *co) { return co->pending; }

void sk__coalescer_stats(const sk__coalescer *co, sk_engine_stats *st)
{
    memcpy(st->outcomes, co->outcomes, sizeof(st->outcomes));
    memcpy(st->batches, co->batches, sizeof(st->batches));
    st->batched_purchases = co->batched_purchases;
    st->soldout_local = co->soldout_local;
    st->answered_acked = co->answered_acked;
    st->answered_pending = co->answered_pending;
    st->ack_waits = co->ack_waits;
    st->ack_failures = co->ack_failures;
}
