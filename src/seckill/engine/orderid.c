/* orderid.c: the snowflake generator of orderid.h. Invariant: for one
 * generator, (last_ms, seq) strictly increases with every issued id. */
#include "orderid.h"

#include "sk_err.h"

void sk_orderid_init(sk_orderid_gen *g, int worker)
{
    g->worker = worker;
    g->last_ms = -1;
    g->seq = 0;
}

int sk_orderid_next(sk_orderid_gen *g, int64_t wall_ms, uint64_t *id_out)
{
    if (g->worker < 0 || g->worker > SK_ORDERID_MAX_WORKER) return SK_EUNAVAIL;
    int64_t ms = wall_ms - SK_ORDERID_EPOCH_MS;
    if (ms < 0 && g->last_ms < 0) return SK_EINVAL;
    if (ms <= g->last_ms) {
        /* Same ms, or the clock stepped back: stay on last_ms. */
        ms = g->last_ms;
        if (g->seq + 1 >= (1u << SK_ORDERID_SEQ_BITS)) {
            ms++; /* this ms is used up: borrow the next one */
            g->seq = 0;
        } else {
            g->seq++;
        }
    } else {
        g->seq = 0;
    }
    if (ms >= (INT64_C(1) << 41)) return SK_EINVAL;
    g->last_ms = ms;
    *id_out = ((uint64_t)ms << (SK_ORDERID_WORKER_BITS + SK_ORDERID_SEQ_BITS)) |
              ((uint64_t)g->worker << SK_ORDERID_SEQ_BITS) | g->seq;
    return 0;
}

void sk_orderid_decode(uint64_t id, int64_t *unix_ms_out, int *worker_out, int *seq_out)
{
    if (unix_ms_out)
        *unix_ms_out = (int64_t)(id >> (SK_ORDERID_WORKER_BITS + SK_ORDERID_SEQ_BITS)) + SK_ORDERID_EPOCH_MS;
    if (worker_out) *worker_out = (int)((id >> SK_ORDERID_SEQ_BITS) & SK_ORDERID_MAX_WORKER);
    if (seq_out) *seq_out = (int)(id & ((1u << SK_ORDERID_SEQ_BITS) - 1));
}
