/* camp_table.c: the per-campaign table of camp_table.h: FNV-1a hash chains
 * (by campaign id). An entry lives while its campaign has traffic; one whose campaign
 * was "not found" is dropped once idle, so ids that do not exist cannot
 * grow the table without bound. */
#include "camp_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "dlock/dlock.h"
#include "layout.h"
#include "slot.h"

static unsigned hash_id(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h % SK__CAMP_CHAINS;
}

static void lane_free(sk__lane *l)
{
    if (!l) return;
    if (l->linger) event_free(l->linger);
    free(l->pending);
    free(l);
}

static void camp_free(sk__camp *c)
{
    for (int j = 0; j < c->nlanes; j++) lane_free(c->lanes[j]);
    free(c);
}

static sk__lane *lane_new(sk__camp_table *t, sk__camp *c, int j, const char *tag)
{
    sk__lane *l = calloc(1, sizeof(*l));
    if (!l) return NULL;
    l->pending = calloc((size_t)t->max_batch, sizeof(*l->pending));
    if (!l->pending) {
        free(l);
        return NULL;
    }
    l->camp = c;
    l->j = j;
    sk_tag_key(tag, "", l->prefix, sizeof(l->prefix));
    l->slot = (int)dlock__key_slot(l->prefix, strlen(l->prefix));
    l->parked_tail = &l->parked;
    l->known = INT64_MAX;
    return l;
}

int sk__camp_grow(sk__camp_table *t, sk__camp *c, const sk_buckets *b)
{
    int had = c->nlanes;
    for (int j = had; j < b->k; j++) {
        c->lanes[j] = lane_new(t, c, j, b->tag[j]);
        if (!c->lanes[j]) {
            while (j > had) lane_free(c->lanes[--j]);
            return DLOCK_ENOMEM;
        }
    }
    if (b->k > had) c->nlanes = b->k;
    c->k = b->k;
    return 0;
}

bool sk__camp_idle(const sk__camp *c)
{
    if (c->polling || c->busy || c->loading || c->rerouted) return false;
    for (int j = 0; j < c->nlanes; j++) {
        const sk__lane *l = c->lanes[j];
        if (l->npending || l->inflight || l->parked || l->again || l->pull) return false;
    }
    return true;
}

sk__camp *sk__camp_find(sk__camp_table *t, const char *id, bool create)
{
    unsigned b = hash_id(id);
    for (sk__camp *c = t->chains[b]; c; c = c->next)
        if (strcmp(c->id, id) == 0) return c;
    if (!create) return NULL;
    sk__camp *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->co = t->owner;
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->rerouted_tail = &c->rerouted;
    sk_buckets one;
    sk_buckets_single(id, &one);
    if (sk__camp_grow(t, c, &one) != 0) {
        free(c);
        return NULL;
    }
    c->next = t->chains[b];
    t->chains[b] = c;
    return c;
}

void sk__camp_drop(sk__camp_table *t, sk__camp *c)
{
    sk__camp **pp = &t->chains[hash_id(c->id)];
    while (*pp && *pp != c) pp = &(*pp)->next;
    if (*pp) *pp = c->next;
    camp_free(c);
}

void sk__camp_settle(sk__camp_table *t, sk__camp *c)
{
    if (!t->closing && c->unknown && sk__camp_idle(c)) sk__camp_drop(t, c);
}

void sk__camp_each(sk__camp_table *t, void (*fn)(sk__camp *c, void *ud), void *ud)
{
    for (int b = 0; b < SK__CAMP_CHAINS; b++)
        for (sk__camp *c = t->chains[b]; c; c = c->next) fn(c, ud);
}

void sk__camp_table_clear(sk__camp_table *t)
{
    for (int b = 0; b < SK__CAMP_CHAINS; b++) {
        sk__camp *c = t->chains[b];
        while (c) {
            sk__camp *n = c->next;
            camp_free(c);
            c = n;
        }
        t->chains[b] = NULL;
    }
}
