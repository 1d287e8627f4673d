/* histogram.h: a fixed-size log-linear latency histogram (microseconds),
 * ~1.5% relative error from 1 us to ~1 hour, O(1) record, mergeable.
 * Not thread-safe: one writer at a time (callers lock or keep one each). */
#ifndef DLOCK_COMMON_HISTOGRAM_H
#define DLOCK_COMMON_HISTOGRAM_H

#include <stdint.h>

#define DLOCK__HIST_SUB 64 /* linear sub-buckets per power of two */
#define DLOCK__HIST_POW 32 /* powers of two covered (2^32 us ~ 71 min) */

typedef struct dlock__hist {
    uint64_t counts[DLOCK__HIST_POW * DLOCK__HIST_SUB];
    uint64_t total;
    uint64_t sum_us;
    uint64_t max_us;
    uint64_t min_us;
} dlock__hist;

void dlock__hist_reset(dlock__hist *h);
void dlock__hist_record(dlock__hist *h, uint64_t us);
void dlock__hist_merge(dlock__hist *into, const dlock__hist *from);
/* Value at quantile q in [0,1] (upper edge of its bucket); 0 when empty. */
uint64_t dlock__hist_quantile(const dlock__hist *h, double q);
/* Count of recorded values <= us (bucket resolution). */
uint64_t dlock__hist_count_le(const dlock__hist *h, uint64_t us);

#endif
