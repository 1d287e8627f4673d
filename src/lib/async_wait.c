/* async_wait.c: the two state machines every asynchronous handle runs on
 * the loop's timers (async_internal.h).
 * The acquire driver: a try; when busy and asked to wait, a place in the
 * FIFO of the object's channel (async_sub.c); only the head tries again,
 * on its turn (subscription confirmed, a message, just became head) or on
 * its recheck timer (the holder's TTL, or a growing interval, whichever is
 * first: foreign holders may not publish); the wait's deadline ends it
 * whatever is in flight. Each acquire has a tag: a try's answer that comes
 * after its acquire ended is stale, and the object gives back what it got.
 * The hold: the validity rule of dlock.h on a timer that does no I/O: it
 * fires at the validity deadline and declares the loss then, whether or
 * not a renewal is in flight; in watchdog mode it also sends the renewal
 * every third of the lease, each moving the deadline from its send time. */
#include <stddef.h>

#include "async_internal.h"
#include "util.h"

#define RECHECK_MIN_MS 50
#define RENEW_RETRY_MS 100 /* after a failed renewal, while validity is left */

/* ---- the acquire driver -------------------------------------------------------- */

#define OP_OF(w) ((dlock__aop *)(void *)((char *)(w)-offsetof(dlock__aop, w)))

static void op_arm(dlock__aop *op)
{
    int64_t at = op->deadline_ms >= 0 ? op->deadline_ms : INT64_MAX;
    if (dlock__asub_is_head(&op->w) && !op->in_flight && op->next_try_ms < at) at = op->next_try_ms;
    const dlock_async_loop *l = dlock__ac_loop(op->c);
    if (!op->active || at == INT64_MAX) dlock__atimer_stop(l, op->timer);
    else dlock__atimer_start(l, op->timer, at - dlock__now_ms());
}

static void op_finish(dlock__aop *op, int rc)
{
    op->active = false;
    op->in_flight = op->again = false;
    if (rc == 0 && op->exclusive) dlock__asub_leave_holding(&op->w);
    else dlock__asub_leave(&op->w);
    dlock__atimer_stop(dlock__ac_loop(op->c), op->timer);
    op->ops->done(op, rc);
}

static bool transient(int rc)
{
    return rc == DLOCK_ECONN || rc == DLOCK_EIO;
}

/* Sends a try; a send that fails now counts as that try's answer. */
static void op_try(dlock__aop *op)
{
    op->again = false;
    int rc = op->ops->try_send(op, op->gen);
    if (rc == 0) {
        op->in_flight = true;
    } else if (!op->waits || !transient(rc)) {
        op_finish(op, rc);
        return;
    } else {
        op->next_try_ms = dlock__now_ms() + op->recheck_ms;
    }
    op_arm(op);
}

/* SEND: a try now, and a send that fails is tried again (or ends the
 * acquire) from the op's timer, never inside the caller's call. */
static void op_send_quietly(dlock__aop *op)
{
    op->again = false;
    if (op->ops->try_send(op, op->gen) == 0) op->in_flight = true;
    else op->next_try_ms = dlock__now_ms();
    op_arm(op);
}

/* WAIT: the head before this one holds the name now; trying would only
 * find it busy, so the recheck starts from here. */
static void op_turn(dlock__await *w, dlock__turn why)
{
    dlock__aop *op = OP_OF(w);
    if (!op->active) return;
    if (why == DLOCK__TURN_WAIT) {
        if (!op->in_flight) op->next_try_ms = dlock__now_ms() + op->recheck_ms;
        op_arm(op);
    } else if (op->in_flight) {
        op->again = true;
    } else if (why == DLOCK__TURN_SEND) {
        op_send_quietly(op);
    } else {
        op_try(op);
    }
}

static void op_timer(void *arg)
{
    dlock__aop *op = arg;
    dlock_async_client *c = op->c;
    dlock__ac_enter(c);
    int64_t now = dlock__now_ms();
    if (!op->active) {
        /* ended meanwhile */
    } else if (op->deadline_ms >= 0 && now >= op->deadline_ms) {
        op_finish(op, DLOCK_ETIMEOUT);
    } else if (dlock__asub_is_head(&op->w) && !op->in_flight && now >= op->next_try_ms) {
        op_try(op);
    } else {
        op_arm(op);
    }
    dlock__ac_leave(c);
}

void dlock__aop_init(dlock__aop *op, dlock_async_client *c, const dlock__aop_ops *ops, const char *channel,
                     bool sharded, int64_t recheck_max_ms)
{
    *op = (dlock__aop){
        .c = c, .ops = ops, .channel = channel, .sharded = sharded, .recheck_max_ms = recheck_max_ms};
    op->w.turn = op_turn;
}

int dlock__aop_start(dlock__aop *op, int64_t wait_ms)
{
    if (wait_ms != 0 && !op->timer) {
        op->timer = dlock__atimer_new(dlock__ac_loop(op->c), op_timer, op);
        if (!op->timer) return DLOCK_ENOMEM;
    }
    op->gen++;
    op->waits = wait_ms != 0;
    op->deadline_ms = wait_ms <= 0 ? -1 : dlock__now_ms() + wait_ms; /* 0: one try, its answer decides */
    op->recheck_ms = RECHECK_MIN_MS;
    op->again = false;
    int rc = op->ops->try_send(op, op->gen);
    if (rc) return rc;
    op->active = op->in_flight = true;
    op_arm(op);
    return 0;
}

/* Busy: wait in the queue; the head tries again at the holder's TTL or
 * the recheck interval, whichever is first. */
static void op_wait(dlock__aop *op, int64_t ttl_ms)
{
    if (!op->w.ch) {
        int rc = dlock__asub_join(dlock__ac_sub(op->c), op->channel, op->sharded, &op->w);
        if (rc) {
            op_finish(op, rc);
            return;
        }
    }
    int64_t gap = op->recheck_ms;
    if (ttl_ms >= 0 && ttl_ms + 1 < gap) gap = ttl_ms + 1;
    op->next_try_ms = dlock__now_ms() + gap;
    op->recheck_ms = op->recheck_ms * 2 > op->recheck_max_ms ? op->recheck_max_ms : op->recheck_ms * 2;
    if (op->again && dlock__asub_is_head(&op->w)) op_try(op);
    else op_arm(op);
}

bool dlock__aop_result(dlock__aop *op, uint64_t tag, int rc, int64_t ttl_ms)
{
    if (!op->active || tag != op->gen) return false;
    op->in_flight = false;
    if (rc == 0 || (rc == DLOCK_EBUSY && !op->waits) || (rc != DLOCK_EBUSY && !(op->waits && transient(rc)))) {
        op_finish(op, rc);
        return true;
    }
    if (rc != DLOCK_EBUSY) ttl_ms = -1; /* connection trouble: try again on the interval */
    op_wait(op, ttl_ms);
    return true;
}

bool dlock__aop_end(dlock__aop *op, int rc)
{
    if (!op->active) return false;
    op_finish(op, rc);
    return true;
}

void dlock__aop_dispose(dlock__aop *op)
{
    op->active = false;
    dlock__asub_leave(&op->w);
    dlock__atimer_free(dlock__ac_loop(op->c), op->timer);
    op->timer = NULL;
}

/* ---- the hold ------------------------------------------------------------------------- */

static void hold_arm(dlock__ahold *h)
{
    const dlock_async_loop *l = dlock__ac_loop(h->c);
    if (!h->held || !h->watchdog) {
        dlock__atimer_stop(l, h->timer);
        return;
    }
    int64_t at = h->valid_until_ms;
    if (!h->renewing && h->next_renew_ms < at) at = h->next_renew_ms;
    dlock__atimer_start(l, h->timer, at - dlock__now_ms());
}

static void hold_lose(dlock__ahold *h)
{
    h->held = false;
    h->renewing = false;
    h->gen++;
    dlock__atimer_stop(dlock__ac_loop(h->c), h->timer);
    h->ops->lost(h);
}

static void hold_timer(void *arg)
{
    dlock__ahold *h = arg;
    dlock_async_client *c = h->c;
    dlock__ac_enter(c);
    int64_t now = dlock__now_ms();
    if (h->held && now >= h->valid_until_ms) {
        hold_lose(h); /* the deadline: no reply is waited for */
    } else if (h->held && !h->renewing && now >= h->next_renew_ms) {
        h->renew_sent_ms = now;
        if (h->ops->renew_send(h, h->lease_ms, h->gen) == 0) h->renewing = true;
        else h->next_renew_ms = now + RENEW_RETRY_MS;
        hold_arm(h);
    } else {
        hold_arm(h);
    }
    dlock__ac_leave(c);
}

void dlock__ahold_init(dlock__ahold *h, dlock_async_client *c, const dlock__ahold_ops *ops)
{
    *h = (dlock__ahold){.c = c, .ops = ops};
}

int dlock__ahold_begin(dlock__ahold *h, bool watchdog, int64_t sent_ms, int64_t lease_ms)
{
    if (watchdog && !h->timer && !(h->timer = dlock__atimer_new(dlock__ac_loop(h->c), hold_timer, h)))
        return DLOCK_ENOMEM;
    int64_t until = dlock__ac_valid_until(h->c, sent_ms, lease_ms);
    if (h->held && h->watchdog) {
        if (until > h->valid_until_ms) h->valid_until_ms = until; /* re-entry: only later */
        hold_arm(h);
        return 0;
    }
    if (!h->held) {
        h->gen++;
        h->renewing = false;
    }
    h->held = true;
    h->watchdog = watchdog;
    h->lease_ms = lease_ms;
    h->valid_until_ms = until;
    h->next_renew_ms = sent_ms + lease_ms / 3;
    hold_arm(h);
    return 0;
}

void dlock__ahold_renewed(dlock__ahold *h, uint64_t tag, int rc)
{
    if (tag != h->gen || !h->held || !h->renewing) return;
    h->renewing = false;
    int64_t now = dlock__now_ms();
    if (rc == DLOCK_ELOST) {
        hold_lose(h);
        return;
    }
    if (rc == 0) {
        int64_t until = dlock__ac_valid_until(h->c, h->renew_sent_ms, h->lease_ms);
        if (until > h->valid_until_ms) h->valid_until_ms = until;
        h->next_renew_ms = h->renew_sent_ms + h->lease_ms / 3;
    } else {
        h->next_renew_ms = now + RENEW_RETRY_MS;
    }
    hold_arm(h);
}

void dlock__ahold_end(dlock__ahold *h)
{
    h->held = false;
    h->renewing = false;
    h->gen++;
    dlock__atimer_stop(dlock__ac_loop(h->c), h->timer);
}

bool dlock__ahold_valid(const dlock__ahold *h)
{
    return h->held && dlock__now_ms() < h->valid_until_ms;
}

int64_t dlock__ahold_validity_ms(const dlock__ahold *h)
{
    int64_t left = h->held ? h->valid_until_ms - dlock__now_ms() : 0;
    return left > 0 ? left : 0;
}

void dlock__ahold_dispose(dlock__ahold *h)
{
    h->held = false;
    dlock__atimer_free(dlock__ac_loop(h->c), h->timer);
    h->timer = NULL;
}
