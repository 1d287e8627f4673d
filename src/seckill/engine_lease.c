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
#include <string.h>

#include "dlock/dlock.h"
#include "engine_lease.h"
#include "redis_io.h"

static int64_t margin_ms(const sk__lease *l) { return l->lease_ms / 6; }

void sk__lease_init(sk__lease *l, sk__wire *w, const char *instance,
                    int first_worker, int64_t lease_ms)
{
    memset(l, 0, sizeof(*l));
    l->w = w;
    snprintf(l->instance, sizeof(l->instance), "%s", instance);
    l->n = first_worker;
    l->lease_ms = lease_ms;
    sk_orderid_init(&l->gen, -1);
}

/* The monotonic ms from which no id is issued: the send time of the last
 * successful take/renew + lease - margin, whatever the I/O is doing (a
 * frozen Redis answers nothing, and nothing here waits for it). */
static int64_t valid_until(const sk__lease *l) { return l->ok_ms + l->lease_ms - margin_ms(l); }

static bool valid_at(const sk__lease *l, int64_t now_ms)
{
    return l->held && l->gen.worker >= 0 && now_ms < valid_until(l);
}

bool sk__lease_valid(const sk__lease *l) { return valid_at(l, sk__wire_now_ms(l->w)); }

int sk__lease_worker(const sk__lease *l) { return sk__lease_valid(l) ? l->gen.worker : -1; }

int sk__lease_next_id(sk__lease *l, uint64_t *id_out)
{
    /* the wall clock before the check: an id's ms is never later than the
     * check that let it out, even if this process pauses in between */
    int64_t wall = sk__wire_wall_ms(l->w);
    if (!sk__lease_valid(l)) return SK_EUNAVAIL;
    return sk_orderid_next(&l->gen, wall, id_out);
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

static void lease_gone(sk__lease *l)
{
    if (l->held) l->lost++;
    l->held = false;
    l->gen.worker = -1;
}

static void lease_taken(sk__lease *l, uint64_t fence, int64_t server_ms)
{
    if (l->sent_fence == 0) {
        floor_ids(&l->gen, server_ms);
        sk__wire_log(l->w, DLOCK_LOG_INFO, "order-id worker id %d leased (fence %llu) at %lld ms "
                     "(Redis clock)", l->n, (unsigned long long)fence, (long long)server_ms);
    }
    l->fence = fence;
    l->held = true;
    l->ok_ms = l->sent_ms;
    l->gen.worker = l->n; /* keeps last_ms: ids never go back */
    l->tries = 0;
}

static void on_lease_reply(const dlock__reply *r, int err, void *priv)
{
    sk__lease *l = priv;
    l->busy = false;
    if (err || dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != 2) return; /* the tick retries */
    uint64_t fence = (uint64_t)dlock__reply_int(dlock__reply_at(r, 0));
    int64_t server_ms = dlock__reply_int(dlock__reply_at(r, 1));
    if (fence > 0) {
        lease_taken(l, fence, server_ms);
        return;
    }
    if (l->sent_fence != 0) {
        sk__wire_log(l->w, DLOCK_LOG_WARN, "worker id %d lease (fence %llu) is no longer ours: no order ids "
                     "until a new lease is taken", l->n, (unsigned long long)l->sent_fence);
        l->fence = 0; /* take anew: the same id first, it may be free */
    } else {
        l->n = (l->n + 1) % (SK_ORDERID_MAX_WORKER + 1);
    }
    lease_gone(l);
    if (++l->tries <= SK_ORDERID_MAX_WORKER) sk__lease_step(l);
}

void sk__lease_step(sk__lease *l)
{
    if (l->busy) return;
    char key[48], fkey[56], ttl[24], fence[24];
    snprintf(key, sizeof(key), "seckill:worker:%d", l->n);
    /* {seckill:worker:<n>} hashes like seckill:worker:<n>: one Cluster slot */
    snprintf(fkey, sizeof(fkey), "{seckill:worker:%d}:fence", l->n);
    snprintf(ttl, sizeof(ttl), "%lld", (long long)l->lease_ms);
    snprintf(fence, sizeof(fence), "%llu", (unsigned long long)l->fence);
    const char *args[] = {"2", key, fkey, l->instance, ttl, fence};
    l->sent_ms = sk__wire_now_ms(l->w);
    l->sent_fence = l->fence;
    if (sk__wire_script(l->w, SK__LUA_LEASE, 6, args, on_lease_reply, l) == 0) l->busy = true;
}

void sk__lease_tick(sk__lease *l, bool connected)
{
    int64_t now = sk__wire_now_ms(l->w);
    if (l->held && !valid_at(l, now)) {
        /* the end on the wall clock too, to set beside other processes' */
        int64_t end = valid_until(l), end_wall = sk__wire_wall_ms(l->w) - (now - end);
        sk__wire_log(l->w, DLOCK_LOG_WARN, "worker id %d: worker lease not renewed for %lld ms: no new order ids "
                     "since its validity ended at %lld ms (wall clock) until it is", l->n,
                     (long long)(now - l->ok_ms), (long long)end_wall);
        lease_gone(l); /* the fence is kept: a renewal still finds out whether it is ours */
    }
    if (!connected || l->busy) return;
    if (!l->held) {
        if (l->tries > SK_ORDERID_MAX_WORKER) l->tries = 0;
        sk__lease_step(l);
    } else if (now - l->ok_ms >= l->lease_ms / 3) {
        sk__lease_step(l);
    }
}

void sk__lease_disconnected(sk__lease *l) { l->busy = false; }
