/* cluster_router.c: a Redis Cluster router's state and its decisions (see
 * cluster_router.h). Invariant: owner[] only names nodes of the table, and
 * a node's index never changes once given, so a driver's connection array
 * stays aligned with it; the map is replaced only by a whole parsed reply
 * (or one slot, by MOVED). */
#include "cluster_router.h"

#include <stdlib.h>
#include <string.h>

#include "common_err.h"

#define NONE DLOCK__CMAP_NONE

void dlock__router_init(dlock__router *rt)
{
    memset(rt, 0, sizeof(*rt));
    for (size_t s = 0; s < DLOCK__SLOTS; s++)
        rt->owner[s] = NONE;
    rt->last = rt->suspect = -1;
}

void dlock__router_free(dlock__router *rt)
{
    for (size_t i = 0; i < rt->n_nodes; i++)
        free(rt->nodes[i].host);
    rt->n_nodes = 0;
}

int dlock__router_node(dlock__router *rt, const char *host, int port)
{
    for (size_t i = 0; i < rt->n_nodes; i++)
        if (rt->nodes[i].port == port && strcmp(rt->nodes[i].host, host) == 0) return (int)i;
    if (rt->n_nodes >= DLOCK__ROUTER_MAX_NODES) return -1;
    char *h = strdup(host);
    if (!h) return -1;
    rt->nodes[rt->n_nodes] = (dlock__hostport){.host = h, .port = port};
    return (int)rt->n_nodes++;
}

int dlock__router_apply(dlock__router *rt, const dlock__cmap *m)
{
    int idx[DLOCK__CMAP_MAX_NODES];
    for (size_t i = 0; i < m->n_nodes; i++)
        if ((idx[i] = dlock__router_node(rt, m->nodes[i].host, m->nodes[i].port)) < 0) return DLOCK__ENOMEM;
    for (size_t s = 0; s < DLOCK__SLOTS; s++)
        rt->owner[s] = m->owner[s] == NONE ? NONE : (uint16_t)idx[m->owner[s]];
    return 0;
}

int dlock__router_target(const dlock__router *rt, int slot)
{
    if (slot >= 0) return rt->owner[slot] == NONE ? -1 : rt->owner[slot];
    if (rt->last >= 0) return rt->last;
    for (size_t s = 0; s < DLOCK__SLOTS; s++)
        if (rt->owner[s] != NONE) return rt->owner[s];
    return -1;
}

size_t dlock__router_masters(const dlock__router *rt, int *nodes_out, unsigned *slots_out, size_t max)
{
    bool seen[DLOCK__ROUTER_MAX_NODES] = {false};
    size_t n = 0;
    for (size_t s = 0; s < DLOCK__SLOTS && n < max; s++) {
        int o = rt->owner[s] == NONE ? -1 : rt->owner[s];
        if (o < 0 || seen[o]) continue;
        seen[o] = true;
        if (nodes_out) nodes_out[n] = o;
        if (slots_out) slots_out[n] = (unsigned)s;
        n++;
    }
    return n;
}

size_t dlock__router_refresh_order(dlock__router *rt, const dlock__url *url, int *order)
{
    bool seen[DLOCK__ROUTER_MAX_NODES] = {false};
    size_t n = 0;
    if (rt->suspect >= 0) seen[rt->suspect] = true;
    for (size_t s = 0; s < DLOCK__SLOTS; s++) {
        int o = rt->owner[s] == NONE ? -1 : rt->owner[s];
        if (o >= 0 && !seen[o]) seen[o] = true, order[n++] = o;
    }
    for (size_t i = 0; i < url->n_seeds; i++) {
        int o = dlock__router_node(rt, url->seeds[i].host, url->seeds[i].port);
        if (o >= 0 && !seen[o]) seen[o] = true, order[n++] = o;
    }
    if (rt->suspect >= 0) order[n++] = rt->suspect;
    return n;
}

bool dlock__router_refresh_allowed(const dlock__router *rt, int64_t now_ms)
{
    return rt->refresh_due && now_ms - rt->refreshed_at_ms >= DLOCK__CLUSTER_REFRESH_GAP_MS;
}

void dlock__router_refresh_begins(dlock__router *rt, int64_t now_ms)
{
    rt->refreshed_at_ms = now_ms;
}

void dlock__router_refreshed(dlock__router *rt)
{
    rt->refresh_due = false;
    rt->suspect = -1;
}

void dlock__router_lost(dlock__router *rt, int i)
{
    rt->suspect = i;
    rt->refresh_due = true;
}

bool dlock__router_no_reply(dlock__router *rt, dlock__hop *h, int node, bool written, bool may_move)
{
    dlock__router_lost(rt, node);
    if (written || !may_move || h->redirects >= DLOCK__CLUSTER_MAX_REDIRECTS) return false;
    h->redirects++;
    h->asking = false;
    return true;
}

int64_t dlock__router_refresh_wait_ms(const dlock__router *rt, int64_t now_ms)
{
    int64_t since = now_ms - rt->refreshed_at_ms;
    return since < DLOCK__CLUSTER_REFRESH_GAP_MS ? DLOCK__CLUSTER_REFRESH_GAP_MS - since : 0;
}

void dlock__rwalk_begin(dlock__router *rt, const dlock__url *url, dlock__rwalk *w, int64_t now_ms)
{
    w->n = dlock__router_refresh_order(rt, url, w->order);
    w->i = 0;
    w->node = -1;
    w->second = w->answered = false;
    dlock__router_refresh_begins(rt, now_ms);
}

int dlock__rwalk_next(dlock__rwalk *w, const char **sub_out)
{
    w->node = w->i < w->n ? w->order[w->i++] : -1;
    w->second = false;
    *sub_out = DLOCK__CMAP_FIRST;
    return w->node;
}

dlock__rwalk_step dlock__rwalk_reply(dlock__router *rt, dlock__rwalk *w, const dlock__reply *r,
                                     const char **sub_out)
{
    if (r) w->answered = true;
    if (!r || w->node < 0) return DLOCK__RWALK_NEXT;
    dlock__cmap m;
    const char *sub = w->second ? DLOCK__CMAP_SECOND : DLOCK__CMAP_FIRST;
    int rc = dlock__cmap_parse(sub, r, rt->nodes[w->node].host, &m, NULL, 0);
    if (rc == DLOCK__ESERVER && !w->second) {
        w->second = true;
        *sub_out = DLOCK__CMAP_SECOND;
        return DLOCK__RWALK_AGAIN;
    }
    if (rc == 0) {
        rc = dlock__router_apply(rt, &m);
        dlock__cmap_free(&m);
    }
    if (rc) return DLOCK__RWALK_NEXT;
    dlock__router_refreshed(rt);
    return DLOCK__RWALK_DONE;
}

dlock__hop_step dlock__router_follow(dlock__router *rt, dlock__hop *h, int slot, const dlock__reply *r,
                                     int64_t *wait_ms, dlock__next *next_out)
{
    dlock__redirect rd;
    dlock__next next = dlock__cluster_next(r, h->redirects, h->busy, &rd, wait_ms);
    if (next_out) *next_out = next;
    if (next == DLOCK__NEXT_DONE) return DLOCK__HOP_FINAL;
    if (next == DLOCK__NEXT_BUSY || next == DLOCK__NEXT_DOWN || next == DLOCK__NEXT_DEMOTED) {
        h->busy++;
        bool remap = next != DLOCK__NEXT_BUSY;
        if (remap) rt->refresh_due = true;
        h->reroute = remap && slot >= 0;
        return DLOCK__HOP_RESEND;
    }
    const char *host = rd.host[0] || h->target < 0 ? rd.host : rt->nodes[h->target].host;
    int to = host[0] ? dlock__router_node(rt, host, rd.port) : -1;
    if (to < 0) {
        if (next_out) *next_out = DLOCK__NEXT_DONE;
        return DLOCK__HOP_FINAL;
    }
    h->redirects++;
    h->asking = next == DLOCK__NEXT_ASK;
    if (next == DLOCK__NEXT_MOVED) {
        rt->owner[rd.slot] = (uint16_t)to;
        rt->refresh_due = true;
    }
    h->target = to;
    return DLOCK__HOP_RESEND;
}
