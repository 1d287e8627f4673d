/* transfer.c: moving units between the buckets of a sharded campaign
 * (docs/seckill.md, "Transfers"; lua/transfer.lua). Design:
 * - A lane whose purchases came back "short" (parked: park.h) pulls: it
 *   tries the other buckets, richest known first, with "take" (half of the source,
 *   at least what the parked purchases need, recorded in the source's
 *   journal), then "give" on its own bucket (gated by the transfer id),
 *   then "done" forgets the journal entry. Each half is acknowledged like
 *   a purchase (WAIT on its node when the plan asks for it); a half that
 *   is not acknowledged leaves the entry for recovery, never a second
 *   give. Then the park is told units arrived (its parked purchases go
 *   out again).
 * - Sold out: when no source had anything, every bucket is probed twice
 *   more (stock, journal size, gate size). Two probes that agree, with no
 *   journal entry anywhere and no source above zero, prove a moment at
 *   which the campaign had nothing left outside this bucket (gate sizes
 *   only grow, so an unchanged size means no give landed in between):
 *   only then is the lane reported empty (the park answers sold_out and
 *   sets the campaign's local flag). Otherwise it tries again.
 * - Recovery: every second, journal entries older than RECOVER_AGE_MS in
 *   any bucket of a known sharded campaign are given (gated) and done,
 *   each only after a WAIT on its source holds the take.
 * The mover answers no buyer itself: where a pull ends (units arrived,
 * proven empty, going round again) it calls the park (park.c), which owns
 * the parked purchases, their deadline and their answers; a campaign that
 * may have become idle goes to sk__camp_settle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "transfer.h"

#include "dlock/dlock.h"
#include "util.h"

#define RECOVER_AGE_MS 3000
#define RECOVER_EVERY_MS 1000
#define RETRY_MS 2       /* a collect that saw a move in progress */
#define RETRY_ERR_MS 50  /* a transport error or an unacknowledged half */
#define UNACKED_MS 1000  /* a source whose take was not acknowledged is only probed this long */

struct sk__xfer {
    struct event_base *base;
    sk__wire *w;              /* transfer.lua and its WAITs (connection 0), the log */
    sk__acks *acks;           /* the acknowledgement plan; NULL: none */
    sk__park *park;           /* the lanes' parked purchases (not owned) */
    sk__camp_table *camps;    /* recovery walks it (not owned) */
    int64_t pause_ms;         /* test hook: delay between take and give */
    bool stopping;
    struct sk__pull *pulls;   /* under way (to stop and free) */
    sk_engine_xfer_stats xs;
    char xid_base[17];        /* this mover's transfer ids: <xid_base>.<seq> */
    uint64_t xid_seq;
    int64_t last_recover_ms;
};

typedef struct snap {
    int64_t stock, hlen, scard;
    bool ok;
} snap;

struct sk__pull;
typedef struct probe_ctx {
    struct sk__pull *p;
    int j, which;
} probe_ctx;

typedef struct sk__pull {
    sk__xfer *x;
    struct sk__pull *lprev, *lnext; /* on x->pulls */
    sk__lane *dst;
    int order[SK_MAX_SHARDS];
    int norder, next;
    snap s1[SK_MAX_SHARDS], s2[SK_MAX_SHARDS];
    int due;            /* probe replies still to come */
    probe_ctx pc[2][SK_MAX_SHARDS];
    int src;
    int64_t n;          /* units taken */
    char xid[48];
    int acks;
    struct event *timer;
    void (*on_timer)(struct sk__pull *p);
} sk__pull;

static void start_scan(sk__pull *p);

/* ---- calls ------------------------------------------------------------- */

static void key_of(const sk__lane *l, const char *part, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", l->prefix, part);
}

static int send_take(sk__xfer *x, sk__lane *src, const char *xid, int dst, int64_t want, sk__reply_fn fn,
                     void *priv)
{
    char stock[SK_BUCKET_TAG_MAX + 16], xfer[SK_BUCKET_TAG_MAX + 16], xin[SK_BUCKET_TAG_MAX + 16];
    char d[16], w[24];
    key_of(src, "stock", stock, sizeof(stock));
    key_of(src, "xfer", xfer, sizeof(xfer));
    key_of(src, "xin", xin, sizeof(xin));
    snprintf(d, sizeof(d), "%d", dst);
    snprintf(w, sizeof(w), "%lld", (long long)want);
    const char *args[] = {"3", stock, xfer, xin, "take", xid, d, w};
    x->xs.script_calls++;
    return sk__wire_script(x->w, SK__LUA_TRANSFER, 8, args, fn, priv);
}

static int send_give(sk__xfer *x, sk__lane *dst, const char *xid, int64_t units, sk__reply_fn fn,
                     void *priv)
{
    char stock[SK_BUCKET_TAG_MAX + 16], xin[SK_BUCKET_TAG_MAX + 16], ev[SK_BUCKET_TAG_MAX + 16], u[24];
    key_of(dst, "stock", stock, sizeof(stock));
    key_of(dst, "xin", xin, sizeof(xin));
    key_of(dst, "events", ev, sizeof(ev));
    snprintf(u, sizeof(u), "%lld", (long long)units);
    const char *args[] = {"3", stock, xin, ev, "give", xid, u};
    x->xs.script_calls++;
    return sk__wire_script(x->w, SK__LUA_TRANSFER, 7, args, fn, priv);
}

typedef struct done_ctx {
    sk__xfer *x;
    sk__camp *camp;
} done_ctx;

static void ignore(const dlock__reply *r, int err, void *priv)
{
    (void)r;
    (void)err;
    done_ctx d = *(done_ctx *)priv;
    free(priv);
    d.camp->busy--;
    sk__camp_settle(d.x->camps, d.camp);
}

/* Forgets a journal entry whose give is durable (best effort: recovery
 * finds an entry left behind, and its give is gated). */
static void send_done(sk__xfer *x, sk__lane *src, const char *xid)
{
    char xfer[SK_BUCKET_TAG_MAX + 16];
    key_of(src, "xfer", xfer, sizeof(xfer));
    const char *args[] = {"1", xfer, "done", xid};
    done_ctx *d = malloc(sizeof(*d));
    if (!d) return; /* recovery finds the entry */
    *d = (done_ctx){.x = x, .camp = src->camp};
    x->xs.script_calls++;
    if (sk__wire_script(x->w, SK__LUA_TRANSFER, 4, args, ignore, d) == 0) src->camp->busy++;
    else free(d);
}

/* WAIT on the node of lane l when the plan asks for it: 1 sent (fn will
 * run), 0 nothing to wait for (the reply was the acknowledgement, or none
 * is possible), -1 could not be sent (treat as not acknowledged). */
static int send_ack(sk__xfer *x, sk__lane *l, int *acks_out, sk__reply_fn fn, void *priv)
{
    int64_t timeout = 0;
    if (!x->acks || sk__acks_plan(x->acks, acks_out, &timeout) != SK__ACK_WAIT) return 0;
    /* transfer.lua went on connection 0: its WAIT goes there too */
    return sk__acks_send_wait(x->acks, 0, l->slot, *acks_out, timeout, fn, priv) == 0 ? 1 : -1;
}

static bool acked(const dlock__reply *r, int err, int acks)
{
    return !err && dlock__reply_kind(r) == DLOCK__R_INTEGER && dlock__reply_int(r) >= acks;
}

static bool read_snap(const dlock__reply *r, int err, int64_t *n_out, snap *s)
{
    s->ok = !err && dlock__reply_kind(r) == DLOCK__R_ARRAY && dlock__reply_count(r) == 4;
    if (!s->ok) return false;
    *n_out = dlock__reply_int(dlock__reply_at(r, 0));
    s->stock = dlock__reply_int(dlock__reply_at(r, 1));
    s->hlen = dlock__reply_int(dlock__reply_at(r, 2));
    s->scard = dlock__reply_int(dlock__reply_at(r, 3));
    return true;
}

/* ---- the end of a pull --------------------------------------------------- */

static void pull_unlink(sk__pull *p)
{
    if (p->lprev) p->lprev->lnext = p->lnext;
    else p->x->pulls = p->lnext;
    if (p->lnext) p->lnext->lprev = p->lprev;
    p->dst->pull = NULL;
    if (p->timer) event_free(p->timer);
}

static void pull_free(sk__pull *p)
{
    sk__xfer *x = p->x;
    sk__camp *c = p->dst->camp;
    pull_unlink(p);
    free(p);
    sk__camp_settle(x->camps, c);
}

static void on_pull_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk__pull *p = arg;
    p->on_timer(p);
}

static void pull_later(sk__pull *p, int64_t ms, void (*fn)(sk__pull *p))
{
    if (p->x->stopping) {
        pull_free(p);
        return;
    }
    if (!p->timer) p->timer = evtimer_new(p->x->base, on_pull_timer, p);
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000 * 1000)};
    p->on_timer = fn;
    if (!p->timer || evtimer_add(p->timer, &tv) != 0) fn(p); /* no timer: go on at once */
}

/* Try again from the top (a move was in progress, or a call failed);
 * purchases parked past their deadline give up first. */
static void rescan(sk__pull *p)
{
    sk__park_expire(p->x->park, p->dst);
    if (sk__park_need(p->dst) == 0) {
        pull_free(p);
        return;
    }
    start_scan(p);
}

/* ---- moving units ------------------------------------------------------ */

/* The parked purchases go out again before the pull is freed (freeing may
 * drop an idle campaign, and the lane with it). */
static void after_move(sk__pull *p)
{
    sk__park_arrived(p->x->park, p->dst);
    pull_free(p);
}

static void on_wait_dst(const dlock__reply *r, int err, void *priv)
{
    sk__pull *p = priv;
    if (acked(r, err, p->acks)) send_done(p->x, p->dst->camp->lanes[p->src], p->xid);
    after_move(p); /* the units are there; their purchases are acknowledged on their own */
}

static void on_give(const dlock__reply *r, int err, void *priv)
{
    sk__pull *p = priv;
    sk__xfer *x = p->x;
    p->dst->camp->busy--;
    if (err || dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != 2) {
        pull_later(p, RETRY_ERR_MS, rescan); /* the entry stays: recovery gives it */
        return;
    }
    if (dlock__reply_int(dlock__reply_at(r, 0)) == 1) {
        x->xs.gives++;
        x->xs.units += (uint64_t)p->n;
    }
    p->dst->known = dlock__reply_int(dlock__reply_at(r, 1));
    int w = send_ack(x, p->dst, &p->acks, on_wait_dst, p);
    if (w == 0) {
        send_done(x, p->dst->camp->lanes[p->src], p->xid);
        after_move(p);
    } else if (w < 0) {
        after_move(p);
    }
}

static void give_now(sk__pull *p)
{
    if (send_give(p->x, p->dst, p->xid, p->n, on_give, p) == 0) p->dst->camp->busy++;
    else pull_later(p, RETRY_ERR_MS, rescan);
}

/* A take the source's replicas did not acknowledge is never given now: a
 * failover could lose it after the give landed, and the units would exist
 * twice. The entry waits for recovery (which asks again); the source is
 * only probed for a while. */
static void on_wait_src(const dlock__reply *r, int err, void *priv)
{
    sk__pull *p = priv;
    if (acked(r, err, p->acks)) {
        give_now(p);
        return;
    }
    p->dst->camp->lanes[p->src]->unacked_until_ms = dlock__now_ms() + UNACKED_MS;
    pull_later(p, RETRY_ERR_MS, rescan);
}

/* The take is in the source's journal: make it durable, then give. */
static void after_take(sk__pull *p)
{
    int w = send_ack(p->x, p->dst->camp->lanes[p->src], &p->acks, on_wait_src, p);
    if (w == 0) give_now(p);
    else if (w < 0) on_wait_src(NULL, SK_EUNAVAIL, p);
}

/* ---- the scan: takes from the other buckets, then the sold-out proof ---- */

static void take_next(sk__pull *p);
static void begin_collect(sk__pull *p);

static void on_take(const dlock__reply *r, int err, void *priv)
{
    sk__pull *p = priv;
    sk__xfer *x = p->x;
    sk__camp *c = p->dst->camp;
    c->busy--;
    int64_t n = 0;
    if (!read_snap(r, err, &n, &p->s1[p->src])) {
        take_next(p); /* unknown: this source counts as not clean */
        return;
    }
    c->lanes[p->src]->known = p->s1[p->src].stock;
    if (n <= 0) {
        x->xs.probes++;
        take_next(p);
        return;
    }
    x->xs.takes++;
    p->n = n;
    if (x->pause_ms > 0) pull_later(p, x->pause_ms, after_take);
    else after_take(p);
}

static void take_next(sk__pull *p)
{
    sk__xfer *x = p->x;
    sk__camp *c = p->dst->camp;
    while (p->next < p->norder) {
        p->src = p->order[p->next++];
        snprintf(p->xid, sizeof(p->xid), "%s.%llu", x->xid_base, (unsigned long long)++x->xid_seq);
        bool probe_only = dlock__now_ms() < c->lanes[p->src]->unacked_until_ms;
        int64_t need = sk__park_need(p->dst);
        int64_t want = probe_only ? 0 : need > 0 ? need : 1;
        if (send_take(x, c->lanes[p->src], p->xid, p->dst->j, want, on_take, p) == 0) {
            c->busy++;
            return;
        }
    }
    begin_collect(p);
}

/* Sources richest first (unknown counts as richest). */
static void start_scan(sk__pull *p)
{
    sk__camp *c = p->dst->camp;
    p->norder = 0;
    p->next = 0;
    memset(p->s1, 0, sizeof(p->s1));
    memset(p->s2, 0, sizeof(p->s2));
    for (int j = 0; j < c->k; j++) {
        if (j == p->dst->j) continue;
        int i = p->norder++;
        while (i > 0 && c->lanes[p->order[i - 1]]->known < c->lanes[j]->known) {
            p->order[i] = p->order[i - 1];
            i--;
        }
        p->order[i] = j;
    }
    take_next(p);
}

/* Every bucket's two probes agree, and nothing is anywhere but here. */
static bool proven_empty(const sk__pull *p)
{
    const sk__camp *c = p->dst->camp;
    for (int j = 0; j < c->k; j++) {
        const snap *a = &p->s1[j], *b = &p->s2[j];
        if (!a->ok || !b->ok || a->stock != b->stock || a->hlen != b->hlen || a->scard != b->scard) return false;
        if (b->hlen != 0 || (j != p->dst->j && b->stock > 0)) return false;
    }
    return true;
}

/* The campaign has nothing outside this bucket: reported empty. */
static void conclude(sk__pull *p)
{
    p->x->xs.soldout_checks++;
    sk__park_empty(p->x->park, p->dst, p->s2[p->dst->j].stock);
    pull_free(p);
}

static void on_probe(const dlock__reply *r, int err, void *priv);

/* Probes bucket j into collect 1 (which = 0) or 2. */
static int send_probe(sk__pull *p, int j, int which)
{
    sk__camp *c = p->dst->camp;
    probe_ctx *pc = &p->pc[which][j];
    *pc = (probe_ctx){.p = p, .j = j, .which = which};
    if (send_take(p->x, c->lanes[j], "probe", p->dst->j, 0, on_probe, pc) != 0) return -1;
    c->busy++;
    p->due++;
    return 0;
}

static void second_collect(sk__pull *p);

static void on_probe(const dlock__reply *r, int err, void *priv)
{
    probe_ctx *pc = priv;
    sk__pull *p = pc->p;
    p->dst->camp->busy--;
    p->due--;
    int64_t n = 0;
    read_snap(r, err, &n, pc->which ? &p->s2[pc->j] : &p->s1[pc->j]);
    if (p->due > 0) return;
    if (pc->which == 0) second_collect(p);
    else if (proven_empty(p)) conclude(p);
    else pull_later(p, RETRY_MS, rescan);
}

/* No source gave anything: the destination's own probe completes collect 1. */
static void begin_collect(sk__pull *p)
{
    if (sk__park_need(p->dst) == 0) { /* a pull for a drained lane with no buyer waiting: nothing to prove */
        pull_free(p);
        return;
    }
    p->due = 0;
    if (send_probe(p, p->dst->j, 0) != 0) pull_later(p, RETRY_ERR_MS, rescan);
}

/* Collect 2 starts only after every reply of collect 1 is in. */
static void second_collect(sk__pull *p)
{
    sk__camp *c = p->dst->camp;
    for (int j = 0; j < c->k; j++)
        if (!p->s1[j].ok || p->s1[j].hlen != 0) {
            pull_later(p, RETRY_MS, rescan); /* a move in progress, or unknown: not clean */
            return;
        }
    p->due = 0;
    for (int j = 0; j < c->k; j++)
        if (send_probe(p, j, 1) != 0) {
            /* the probes sent answer into a pull that retries */
            if (p->due == 0) pull_later(p, RETRY_ERR_MS, rescan);
            return;
        }
}

void sk__xfer_kick(sk__xfer *x, sk__lane *l)
{
    if (l->pull || l->camp->k < 2 || x->stopping) return;
    sk__pull *p = calloc(1, sizeof(*p));
    if (!p) return; /* the next short answer tries again */
    p->x = x;
    p->dst = l;
    p->lnext = x->pulls;
    if (x->pulls) x->pulls->lprev = p;
    x->pulls = p;
    l->pull = p;
    start_scan(p);
}

/* ---- recovery of journal entries a mover left --------------------------- */

typedef struct recov {
    sk__xfer *x;
    sk__camp *camp;
    int src, dst;
    int64_t units;
    int acks;
    char xid[48];
} recov;

static void recov_end(recov *rv)
{
    sk__camp *c = rv->camp;
    sk__xfer *x = rv->x;
    c->busy--;
    free(rv);
    sk__camp_settle(x->camps, c);
}

static void on_recov_wait(const dlock__reply *r, int err, void *priv)
{
    recov *rv = priv;
    if (acked(r, err, rv->acks)) send_done(rv->x, rv->camp->lanes[rv->src], rv->xid);
    recov_end(rv);
}

static void log_recovered(sk__xfer *x, const recov *rv)
{
    sk__wire_log(x->w, DLOCK_LOG_WARN, "campaign %s: transfer %s (%lld units, bucket %d -> %d) finished by recovery",
                 rv->camp->id, rv->xid, (long long)rv->units, rv->src, rv->dst);
}

static void on_recov_give(const dlock__reply *r, int err, void *priv)
{
    recov *rv = priv;
    sk__xfer *x = rv->x;
    if (err || dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != 2) {
        recov_end(rv);
        return;
    }
    if (dlock__reply_int(dlock__reply_at(r, 0)) == 1) {
        x->xs.recovered++;
        x->xs.units += (uint64_t)rv->units;
        log_recovered(x, rv);
    }
    sk__lane *d = rv->camp->lanes[rv->dst];
    d->known = dlock__reply_int(dlock__reply_at(r, 1));
    if (sk__park_need(d) > 0) sk__xfer_kick(x, d); /* no-op while a pull into d is under way */
    int w = send_ack(x, d, &rv->acks, on_recov_wait, rv);
    if (w == 0) send_done(x, rv->camp->lanes[rv->src], rv->xid);
    if (w != 1) recov_end(rv);
}

static void recov_give(recov *rv)
{
    if (send_give(rv->x, rv->camp->lanes[rv->dst], rv->xid, rv->units, on_recov_give, rv) != 0) recov_end(rv);
}

/* The entry is given only once the source's replicas hold it (see on_wait_src). */
static void on_recov_src(const dlock__reply *r, int err, void *priv)
{
    recov *rv = priv;
    if (acked(r, err, rv->acks)) recov_give(rv);
    else recov_end(rv); /* the next round asks again */
}

static void recover_entry(sk__xfer *x, sk__camp *c, int src, const dlock__reply *r, size_t i)
{
    const char *xid = dlock__reply_str(dlock__reply_at(r, i), NULL);
    long long dst = dlock__reply_int(dlock__reply_at(r, i + 1));
    long long units = dlock__reply_int(dlock__reply_at(r, i + 2));
    if (!xid || dst < 0 || dst >= c->k || dst == src || units <= 0 || strlen(xid) >= 48) return;
    recov *rv = calloc(1, sizeof(*rv));
    if (!rv) return;
    *rv = (recov){.x = x, .camp = c, .src = src, .dst = (int)dst, .units = units};
    snprintf(rv->xid, sizeof(rv->xid), "%s", xid);
    c->busy++;
    int w = send_ack(x, c->lanes[src], &rv->acks, on_recov_src, rv);
    if (w == 0) recov_give(rv);
    else if (w < 0) recov_end(rv);
}

typedef struct stale_q {
    sk__xfer *x;
    sk__camp *camp;
    int src;
} stale_q;

static void on_stale(const dlock__reply *r, int err, void *priv)
{
    stale_q *sq = priv;
    sk__camp *c = sq->camp;
    sk__xfer *x = sq->x;
    if (!err && dlock__reply_kind(r) == DLOCK__R_ARRAY && !x->stopping)
        for (size_t i = 0; i + 3 <= dlock__reply_count(r); i += 3)
            recover_entry(x, c, sq->src, r, i);
    free(sq);
    c->busy--;
    sk__camp_settle(x->camps, c);
}

static void recover_camp(sk__camp *c, void *ud)
{
    sk__xfer *x = ud;
    if (c->k < 2 || c->loading) return;
    char age[24];
    snprintf(age, sizeof(age), "%d", RECOVER_AGE_MS);
    for (int j = 0; j < c->k; j++) {
        stale_q *sq = malloc(sizeof(*sq));
        if (!sq) return;
        *sq = (stale_q){.x = x, .camp = c, .src = j};
        char xfer[SK_BUCKET_TAG_MAX + 16];
        key_of(c->lanes[j], "xfer", xfer, sizeof(xfer));
        const char *args[] = {"1", xfer, "stale", age};
        x->xs.script_calls++;
        if (sk__wire_script(x->w, SK__LUA_TRANSFER, 4, args, on_stale, sq) == 0) c->busy++;
        else free(sq);
    }
}

void sk__xfer_recover(sk__xfer *x)
{
    int64_t now = dlock__now_ms();
    if (x->stopping || now - x->last_recover_ms < RECOVER_EVERY_MS) return;
    x->last_recover_ms = now;
    sk__camp_each(x->camps, recover_camp, x);
}

/* ---- life cycle ---------------------------------------------------------- */

int sk__xfer_new(struct event_base *base, sk__wire *w, sk__acks *acks, sk__camp_table *camps, sk__park *park,
                 int64_t pause_ms, sk__xfer **out)
{
    sk__xfer *x = calloc(1, sizeof(*x));
    *out = x;
    if (!x) return DLOCK_ENOMEM;
    *x = (sk__xfer){.base = base, .w = w, .acks = acks, .park = park, .camps = camps, .pause_ms = pause_ms};
    dlock__random_hex(x->xid_base, (sizeof(x->xid_base) - 1) / 2); /* 16 hex digits + NUL */
    return 0;
}

void sk__xfer_stop(sk__xfer *x)
{
    x->stopping = true;
    for (sk__pull *p = x->pulls; p; p = p->lnext)
        if (p->timer) event_del(p->timer);
}

void sk__xfer_free(sk__xfer *x)
{
    if (!x) return;
    while (x->pulls) {
        sk__pull *p = x->pulls;
        pull_unlink(p);
        free(p);
    }
    free(x);
}

void sk__xfer_stats(const sk__xfer *x, sk_engine_xfer_stats *st) { *st = x->xs; }
