/* http_group.c: the front ends of one process's loops (seckilld --threads
 * N), so that /metrics on any of them reports the whole process. Each
 * member has a mailbox (a queue under the group's mutex and a pipe that
 * wakes its loop); /metrics asks every other member for a snapshot of its
 * figures, taken on that member's own thread, and waits for them while
 * answering the requests addressed to itself, so two loops asking each
 * other at once both finish. A member leaves (answering what is queued)
 * before its engine goes; nothing is asked of a member that has left. */
#define _GNU_SOURCE /* pipe2 */
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "degraded.h"
#include "dlock/dlock.h"
#include "http_internal.h"

#define GROUP_MAX 256

typedef struct gather {
    int due; /* snapshots still to come (under the group's mutex) */
} gather;

typedef struct gmsg {
    struct gmsg *next;
    gather *g;
    sk__http_snap *slot;
} gmsg;

typedef struct member {
    sk_http *h;
    int fd[2];         /* wake-up pipe: read end watched by ev */
    struct event *ev;
    gmsg *q;           /* snapshots asked of this member */
    bool open;
} member;

struct sk_http_group {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a snapshot arrived, or a request was queued */
    member *m[GROUP_MAX];
    int n;
};

int sk_http_group_new(sk_http_group **out)
{
    *out = calloc(1, sizeof(**out));
    if (!*out) return DLOCK_ENOMEM;
    pthread_mutex_init(&(*out)->mu, NULL);
    pthread_cond_init(&(*out)->cv, NULL);
    return 0;
}

void sk_http_group_free(sk_http_group *g)
{
    if (!g) return;
    for (int i = 0; i < g->n; i++) free(g->m[i]);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* This loop's figures (on its own thread). */
static void snapshot(sk_http *h, sk__http_snap *s)
{
    memset(s, 0, sizeof(*s));
    s->m = h->m;
    sk_engine_get_stats(h->engine, &s->st);
    s->ready = sk_engine_ready(h->engine);
    s->inflight = h->inflight;
    if (h->o.degraded) sk_degraded_get_stats(h->o.degraded, &s->ds);
}

/* Answers every snapshot asked of me. */
static void serve(sk_http_group *g, member *me)
{
    pthread_mutex_lock(&g->mu);
    gmsg *q = me->q;
    me->q = NULL;
    pthread_mutex_unlock(&g->mu);
    while (q) {
        gmsg *next = q->next;
        snapshot(me->h, q->slot);
        pthread_mutex_lock(&g->mu);
        q->g->due--;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        free(q);
        q = next;
    }
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    member *me = arg;
    char buf[64];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    serve(me->h->o.group, me);
}

static void member_free(member *me)
{
    if (me->ev) event_free(me->ev);
    close(me->fd[0]);
    close(me->fd[1]);
    free(me);
}

int sk__http_group_join(sk_http *h)
{
    sk_http_group *g = h->o.group;
    member *me = calloc(1, sizeof(*me));
    if (!me) return DLOCK_ENOMEM;
    me->h = h;
    if (pipe2(me->fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        free(me);
        return DLOCK_EIO;
    }
    me->ev = event_new(h->base, me->fd[0], EV_READ | EV_PERSIST, on_wake, me);
    if (!me->ev || event_add(me->ev, NULL) != 0) {
        member_free(me);
        return DLOCK_ENOMEM;
    }
    pthread_mutex_lock(&g->mu);
    bool room = g->n < GROUP_MAX;
    if (room) {
        me->open = true;
        g->m[g->n++] = me;
    }
    pthread_mutex_unlock(&g->mu);
    if (!room) {
        member_free(me);
        return DLOCK_ENOMEM;
    }
    h->member = me;
    return 0;
}

void sk__http_group_leave(sk_http *h)
{
    sk_http_group *g = h->o.group;
    member *me = h->member;
    if (!g || !me || !me->open) return;
    pthread_mutex_lock(&g->mu);
    me->open = false;
    pthread_mutex_unlock(&g->mu);
    serve(g, me); /* nothing is queued for me after this */
    event_free(me->ev);
    me->ev = NULL;
    close(me->fd[0]);
    close(me->fd[1]);
    /* me stays in the group's array (freed with the group) */
}

static void add_metrics(sk_http_metrics *a, const sk_http_metrics *b)
{
    for (int r = 0; r < SK_ROUTE_COUNT; r++) {
        for (int k = 0; k < SK_METRIC_STATUSES; k++) a->requests[r][k] += b->requests[r][k];
        for (int k = 0; k < SK_METRIC_LAT_BUCKETS; k++) a->lat[r][k] += b->lat[r][k];
        a->lat_count[r] += b->lat_count[r];
        a->lat_sum_s[r] += b->lat_sum_s[r];
    }
}

/* Counters add up (the per-node calls by node name); gauges: ready and lease held only if every loop's are,
 * degraded if any loop is; ack mode, replicas, worker id and fence are the
 * asking loop's (each loop leases its own worker id). */
static void add_snap(sk__http_snap *a, const sk__http_snap *b)
{
    add_metrics(&a->m, &b->m);
    for (int k = 0; k < SK_STAT_OUTCOMES; k++) a->st.outcomes[k] += b->st.outcomes[k];
    for (int k = 0; k < SK_STAT_BATCH_BUCKETS; k++) a->st.batches[k] += b->st.batches[k];
    a->st.batched_purchases += b->st.batched_purchases;
    a->st.redis_errors += b->st.redis_errors;
    a->st.reconnects += b->st.reconnects;
    a->st.soldout_local += b->st.soldout_local;
    a->st.answered_acked += b->st.answered_acked;
    a->st.answered_pending += b->st.answered_pending;
    a->st.answered_confirmed += b->st.answered_confirmed;
    a->st.ack_waits += b->st.ack_waits;
    a->st.ack_failures += b->st.ack_failures;
    a->st.ack_skipped += b->st.ack_skipped;
    a->st.lease_lost += b->st.lease_lost;
    a->st.lease_held = a->st.lease_held && b->st.lease_held;
    /* by node: one loop decides the purchases (relay.h), another may
     * answer the scrape */
    for (int k = 0; k < b->st.nnodes; k++) sk_engine_stats_add_node(&a->st, b->st.nodes[k].node, b->st.nodes[k].calls);
    sk_engine_xfer_stats *x = &a->st.xfer;
    const sk_engine_xfer_stats *y = &b->st.xfer;
    x->takes += y->takes;
    x->units += y->units;
    x->gives += y->gives;
    x->recovered += y->recovered;
    x->probes += y->probes;
    x->soldout_checks += y->soldout_checks;
    x->script_calls += y->script_calls;
    for (int k = 0; k < SK_STAT_WAIT_BUCKETS; k++) x->waits[k] += y->waits[k];
    x->wait_ms_sum += y->wait_ms_sum;
    a->ready = a->ready && b->ready;
    a->inflight += b->inflight;
    a->ds.mode = a->ds.mode > b->ds.mode ? a->ds.mode : b->ds.mode;
    a->ds.entered += b->ds.entered;
    for (int k = 0; k < SK_STAT_OUTCOMES; k++) a->ds.outcomes[k] += b->ds.outcomes[k];
    a->ds.throttled += b->ds.throttled;
    a->ds.soldout_local += b->ds.soldout_local;
    a->ds.queued += b->ds.queued;
}

/* Asks every other open member; returns how many were asked. */
static int ask_others(sk_http_group *g, member *me, gather *gt, sk__http_snap *slots)
{
    int asked = 0;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n; i++) {
        member *o = g->m[i];
        if (o == me || !o->open) continue;
        gmsg *msg = calloc(1, sizeof(*msg));
        if (!msg) continue; /* out of memory: that loop's figures are missing */
        msg->g = gt;
        msg->slot = &slots[asked++];
        msg->next = o->q;
        o->q = msg;
        gt->due++;
        ssize_t w = write(o->fd[1], "x", 1);
        (void)w; /* a full pipe already wakes it */
    }
    pthread_cond_broadcast(&g->cv); /* a member waiting in its own gather serves it */
    pthread_mutex_unlock(&g->mu);
    return asked;
}

void sk__http_gather(sk_http *h, sk__http_snap *out)
{
    snapshot(h, out);
    sk_http_group *g = h->o.group;
    member *me = h->member;
    if (!g || !me) return;
    sk__http_snap *slots = calloc(GROUP_MAX, sizeof(*slots));
    if (!slots) return; /* out of memory: this loop's figures only */
    gather gt = {0};
    int asked = ask_others(g, me, &gt, slots);
    pthread_mutex_lock(&g->mu);
    while (gt.due > 0) {
        if (me->q) {
            pthread_mutex_unlock(&g->mu);
            serve(g, me);
            pthread_mutex_lock(&g->mu);
            continue;
        }
        pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < asked; i++) add_snap(out, &slots[i]);
    free(slots);
}
