/* histogram.c: see histogram.h. Bucket index = (exponent, top 6 bits of the
 * mantissa); values below 64 us map 1:1, so small latencies stay exact. */
#include "histogram.h"

#include <string.h>

static unsigned bucket_of(uint64_t v)
{
    if (v < DLOCK__HIST_SUB) return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v); /* >= 6 */
    unsigned shift = msb - 6u;
    unsigned exp = shift + 1u;
    if (exp >= DLOCK__HIST_POW) return DLOCK__HIST_POW * DLOCK__HIST_SUB - 1u;
    return exp * DLOCK__HIST_SUB + (unsigned)((v >> shift) - DLOCK__HIST_SUB);
}

/* Largest value that maps to bucket b. */
static uint64_t bucket_top(unsigned b)
{
    unsigned exp = b / DLOCK__HIST_SUB, sub = b % DLOCK__HIST_SUB;
    if (exp == 0) return sub;
    unsigned shift = exp - 1u;
    return (((uint64_t)(sub + DLOCK__HIST_SUB) + 1u) << shift) - 1u;
}

void dlock__hist_reset(dlock__hist *h)
{
    memset(h, 0, sizeof(*h));
}

void dlock__hist_record(dlock__hist *h, uint64_t us)
{
    h->counts[bucket_of(us)]++;
    if (h->total == 0 || us < h->min_us) h->min_us = us;
    if (us > h->max_us) h->max_us = us;
    h->total++;
    h->sum_us += us;
}

void dlock__hist_merge(dlock__hist *into, const dlock__hist *from)
{
    if (from->total == 0) return;
    for (size_t i = 0; i < DLOCK__HIST_POW * DLOCK__HIST_SUB; i++) into->counts[i] += from->counts[i];
    if (into->total == 0 || from->min_us < into->min_us) into->min_us = from->min_us;
    if (from->max_us > into->max_us) into->max_us = from->max_us;
    into->total += from->total;
    into->sum_us += from->sum_us;
}

uint64_t dlock__hist_quantile(const dlock__hist *h, double q)
{
    if (h->total == 0) return 0;
    if (q <= 0) return h->min_us;
    uint64_t rank = (uint64_t)(q * (double)h->total + 0.999999);
    if (rank < 1) rank = 1;
    if (rank >= h->total) return h->max_us;
    uint64_t seen = 0;
    for (unsigned b = 0; b < DLOCK__HIST_POW * DLOCK__HIST_SUB; b++) {
        seen += h->counts[b];
        if (seen >= rank) {
            uint64_t top = bucket_top(b);
            return top > h->max_us ? h->max_us : top;
        }
    }
    return h->max_us;
}

uint64_t dlock__hist_count_le(const dlock__hist *h, uint64_t us)
{
    uint64_t n = 0;
    unsigned last = bucket_of(us);
    for (unsigned b = 0; b <= last; b++) n += h->counts[b];
    return n;
}
