/* camp_table.c: the per-campaign table of camp_table.h: FNV-1a buckets with
 * chains. An entry lives while its campaign has traffic; one whose campaign
 * was "not found" is dropped once idle, so ids that do not exist cannot
 * grow the table without bound. */
#include "camp_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

static unsigned hash_id(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h % SK__CAMP_BUCKETS;
}

static void camp_free(sk__camp *c)
{
    if (c->linger) event_free(c->linger);
    free(c->pending);
    free(c);
}

sk__camp *sk__camp_find(sk__camp_table *t, const char *id, bool create)
{
    unsigned b = hash_id(id);
    for (sk__camp *c = t->buckets[b]; c; c = c->next)
        if (strcmp(c->id, id) == 0) return c;
    if (!create) return NULL;
    sk__camp *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->co = t->owner;
    snprintf(c->id, sizeof(c->id), "%s", id);
    snprintf(c->prefix, sizeof(c->prefix), "{c:%s}:", id);
    c->pending = calloc((size_t)t->max_batch, sizeof(*c->pending));
    if (!c->pending) {
        free(c);
        return NULL;
    }
    c->next = t->buckets[b];
    t->buckets[b] = c;
    return c;
}

void sk__camp_drop(sk__camp_table *t, sk__camp *c)
{
    sk__camp **pp = &t->buckets[hash_id(c->id)];
    while (*pp && *pp != c) pp = &(*pp)->next;
    if (*pp) *pp = c->next;
    camp_free(c);
}

void sk__camp_each(sk__camp_table *t, void (*fn)(sk__camp *c, void *ud), void *ud)
{
    for (int b = 0; b < SK__CAMP_BUCKETS; b++)
        for (sk__camp *c = t->buckets[b]; c; c = c->next) fn(c, ud);
}

void sk__camp_table_clear(sk__camp_table *t)
{
    for (int b = 0; b < SK__CAMP_BUCKETS; b++) {
        sk__camp *c = t->buckets[b];
        while (c) {
            sk__camp *n = c->next;
            camp_free(c);
            c = n;
        }
        t->buckets[b] = NULL;
    }
}
