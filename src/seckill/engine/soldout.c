/* soldout.c: the local sold-out cache and the throttle (soldout.h).
 * Invariant: a flag answers only unkeyed purchases; a throttle refusal
 * happens before anything is queued. */
#include "soldout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rulebook.h"
#include "sk_err.h"

bool sk_soldout_has(const sk_soldout *s, const char *campaign)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->ids[i], campaign) == 0) return true;
    return false;
}

void sk_soldout_mark(sk_soldout *s, const char *campaign)
{
    if (sk_soldout_has(s, campaign)) return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        char(*p)[65] = realloc(s->ids, cap * sizeof(*p));
        if (!p) return; /* only a cache: the authority still refuses */
        s->ids = p;
        s->cap = cap;
    }
    snprintf(s->ids[s->n++], sizeof(s->ids[0]), "%s", campaign);
}

void sk_soldout_reset(sk_soldout *s) { s->n = 0; }

void sk_soldout_free(sk_soldout *s)
{
    free(s->ids);
    memset(s, 0, sizeof(*s));
}

int sk_soldout_answer(bool flagged, bool keyed, uint64_t *hits, uint64_t *outcomes)
{
    if (!flagged || keyed) return 0;
    (*hits)++;
    outcomes[SK_OUT_SOLD_OUT]++;
    return SK_ESOLDOUT;
}

int sk_throttle_admit(size_t waiting, size_t limit, uint64_t *refused)
{
    if (waiting < limit) return 0;
    if (refused) (*refused)++;
    return SK_EQUEUEFULL;
}
