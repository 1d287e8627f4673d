/* engine_lease.c: the order-id worker lease seckill:worker:<n> with its
 * fencing token (sk_worker_lease.lua). Invariant: an id is issued only
 * while the last successful take/renew was *sent* less than
 * worker_lease_ms - margin ago, checked at the moment of issue (not only
 * by the tick: after SIGSTOP the loop may serve requests before any
 * timer runs), so the instance stops before Redis can let the key expire.
 *
 * Why ids cannot collide. Redis starts a lease's expiry when it runs the
 * command, which is after we sent it; we stop issuing margin (lease/6)
 * earlier on our monotonic clock. So every id of a holder H has
 * ms <= H's wall clock at (Redis's expiry - margin). A new holder N takes
 * the key only after it expired, and the take returns Redis's clock
 * (server_ms); N issues no id with ms below server_ms (the generator's
 * floor), whatever N's own wall clock says. So H's and N's ids are apart
 * as long as H's wall clock is less than margin ahead of Redis's (10 s
 * with the default 60 s lease). An instance resumed after a pause past
 * its lease finds its fence gone at the next renewal, stops (503), and
 * takes a new lease - possibly another worker id - under the same floor
 * rule. Left: a holder that issued more than 4096 ids/ms borrows future
 * ms; at our rates that stays far below the margin. */
#include <stdio.h>
#include <stdlib.h>

#include "dlock/dlock.h"
#include "engine_internal.h"
#include "util.h"

static int64_t margin_ms(const sk_engine *e) { return e->o.worker_lease_ms / 6; }

bool sk__lease_valid(const sk_engine *e, int64_t now_ms)
{
    return e->lease_held && e->gen.worker >= 0 &&
           now_ms - e->lease_ok_ms < e->o.worker_lease_ms - margin_ms(e);
}

/* No id of this generator goes below server_ms (see the file comment). */
static void floor_ids(sk_orderid_gen *g, int64_t server_ms)
{
    int64_t ms = server_ms - SK_ORDERID_EPOCH_MS - 1;
    if (ms > g->last_ms) {
        g->last_ms = ms;
        g->seq = (1u << SK_ORDERID_SEQ_BITS) - 1; /* the next id is at server_ms */
    }
}

static void lease_gone(sk_engine *e)
{
    if (e->lease_held) e->st.lease_lost++;
    e->lease_held = false;
    e->gen.worker = -1;
}

static void on_lease_reply(const dlock__reply *r, int err, void *priv)
{
    sk_engine *e = priv;
    e->lease_busy = false;
    if (err || dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != 2) return; /* the tick retries */
    uint64_t fence = (uint64_t)dlock__reply_int(dlock__reply_at(r, 0));
    int64_t server_ms = dlock__reply_int(dlock__reply_at(r, 1));
    bool renewal = e->lease_sent_fence != 0;
    if (fence > 0) {
        if (!renewal) {
            floor_ids(&e->gen, server_ms);
            sk__log(e, DLOCK_LOG_INFO, "order-id worker id %d leased (fence %llu)", e->lease_n,
                    (unsigned long long)fence);
        }
        e->lease_fence = fence;
        e->lease_held = true;
        e->lease_ok_ms = e->lease_sent_ms;
        e->gen.worker = e->lease_n; /* keeps last_ms: ids never go back */
        e->lease_tries = 0;
        return;
    }
    if (renewal) {
        sk__log(e, DLOCK_LOG_WARN, "worker id %d lease (fence %llu) is no longer ours: no order ids "
                                   "until a new lease is taken", e->lease_n, (unsigned long long)e->lease_sent_fence);
        e->lease_fence = 0; /* take anew: the same id first, it may be free */
    } else {
        e->lease_n = (e->lease_n + 1) % (SK_ORDERID_MAX_WORKER + 1);
    }
    lease_gone(e);
    if (++e->lease_tries <= SK_ORDERID_MAX_WORKER) sk__lease_step(e);
}

void sk__lease_step(sk_engine *e)
{
    if (e->lease_busy || !e->up) return;
    char key[48], fkey[56], ttl[24], fence[24];
    snprintf(key, sizeof(key), "seckill:worker:%d", e->lease_n);
    /* {seckill:worker:<n>} hashes like seckill:worker:<n>: one Cluster slot */
    snprintf(fkey, sizeof(fkey), "{seckill:worker:%d}:fence", e->lease_n);
    snprintf(ttl, sizeof(ttl), "%lld", (long long)e->o.worker_lease_ms);
    snprintf(fence, sizeof(fence), "%llu", (unsigned long long)e->lease_fence);
    const char *args[] = {"2", key, fkey, e->instance, ttl, fence};
    e->lease_sent_ms = dlock__now_ms();
    e->lease_sent_fence = e->lease_fence;
    if (sk__call_script(e, SK__LUA_LEASE, 6, args, NULL, on_lease_reply, e) == 0) e->lease_busy = true;
}

void sk__lease_tick(sk_engine *e, int64_t now_ms)
{
    if (e->lease_held && !sk__lease_valid(e, now_ms)) {
        sk__log(e, DLOCK_LOG_WARN, "worker lease not renewed for %lld ms: no new order ids until it is",
                (long long)(now_ms - e->lease_ok_ms));
        lease_gone(e); /* the fence is kept: a renewal still finds out whether it is ours */
    }
    if (!e->up || e->lease_busy) return;
    if (!e->lease_held) {
        if (e->lease_tries > SK_ORDERID_MAX_WORKER) e->lease_tries = 0;
        sk__lease_step(e);
    } else if (now_ms - e->lease_ok_ms >= e->o.worker_lease_ms / 3) {
        sk__lease_step(e);
    }
}
