/* hold.c: the one hold state machine (hold.h): the states of a handle that
 * holds server state, its watchdog registration and its place in the
 * client's registry, including what happens when the client is destroyed
 * first. Every lock-like object of libdlock goes through here. */
#include <stdio.h>
#include <string.h>

#include "hold.h"
#include "util.h"

dlock__hold *dlock__hold_of(dlock__renewable *wd)
{
    return (dlock__hold *)(void *)((char *)wd - offsetof(dlock__hold, wd));
}

const dlock__hold *dlock__hold_of_reg(const dlock__held *reg)
{
    return (const dlock__hold *)(const void *)((const char *)reg - offsetof(dlock__hold, reg));
}

static int hold_renew(dlock__renewable *wd, int64_t lease_ms)
{
    dlock__hold *h = dlock__hold_of(wd);
    return h->ops->renew(h, lease_ms);
}

static int hold_prepare(dlock__renewable *wd, int64_t lease_ms, dlock__renew_cmd *cmd)
{
    dlock__hold *h = dlock__hold_of(wd);
    return h->ops->prepare(h, lease_ms, cmd);
}

static int hold_finish(dlock__renewable *wd, const dlock__reply *reply)
{
    dlock__hold *h = dlock__hold_of(wd);
    return h->ops->finish(h, reply);
}

static void hold_wd_describe(dlock__renewable *wd, char *buf, size_t len)
{
    dlock__hold *h = dlock__hold_of(wd);
    h->ops->describe(h, buf, len);
}

/* The watchdog dropped wd (it already logged and counted the loss). */
static void hold_lost(dlock__renewable *wd, int reason)
{
    dlock__hold *h = dlock__hold_of(wd);
    pthread_mutex_lock(&h->mu);
    bool was = h->state == DLOCK__HOLD_HELD && !h->orphaned;
    if (was) h->state = DLOCK__HOLD_LOST;
    h->watched = false;
    h->dropped = true;
    pthread_mutex_unlock(&h->mu);
    if (was && h->ops->lost) h->ops->lost(h, reason);
}

static void hold_describe(const dlock__held *reg, char *buf, size_t len)
{
    dlock__hold *h = (dlock__hold *)dlock__hold_of_reg(reg);
    pthread_mutex_lock(&h->mu);
    bool held = h->state == DLOCK__HOLD_HELD;
    pthread_mutex_unlock(&h->mu);
    if (held) h->ops->describe(h, buf, len);
    else if (len) buf[0] = '\0';
}

/* The client is being destroyed (its threads already stopped): forget the
 * hold, which expires on its lease, and never touch the client again. */
static void hold_orphan(dlock__held *reg)
{
    dlock__hold *h = (dlock__hold *)dlock__hold_of_reg(reg);
    pthread_mutex_lock(&h->mu);
    h->state = DLOCK__HOLD_FREE;
    h->watched = h->dropped = false;
    h->orphaned = true;
    pthread_mutex_unlock(&h->mu);
}

int dlock__hold_init(dlock__hold *h, dlock_client *c, const dlock__hold_ops *ops)
{
    memset(h, 0, sizeof(*h));
    if (pthread_mutex_init(&h->mu, NULL) != 0) return DLOCK_ENOMEM;
    h->c = c;
    h->ops = ops;
    h->wd.renew = ops->renew ? hold_renew : NULL;
    h->wd.prepare = ops->prepare ? hold_prepare : NULL;
    h->wd.finish = ops->finish ? hold_finish : NULL;
    h->wd.lost = hold_lost;
    h->wd.describe = hold_wd_describe;
    h->reg.describe = hold_describe;
    h->reg.orphan = hold_orphan;
    dlock__held_add(c, &h->reg);
    return 0;
}

void dlock__hold_begin(dlock__hold *h, bool watchdog, int64_t sent_ms, int64_t lease_ms)
{
    pthread_mutex_lock(&h->mu);
    bool noop = h->state == DLOCK__HOLD_HELD || h->orphaned;
    bool dropped = !noop && h->dropped;
    pthread_mutex_unlock(&h->mu);
    if (noop) return;
    /* a watchdog that dropped us after a loss must be done with us first */
    if (dropped) dlock__watchdog_remove(h->c, &h->wd);
    pthread_mutex_lock(&h->mu);
    h->state = DLOCK__HOLD_HELD;
    h->dropped = false;
    h->since_ms = sent_ms;
    h->watched = watchdog;
    h->wd.last_ok_ms = sent_ms;
    atomic_store(&h->wd.valid_until_ms, dlock__client_valid_until(h->c, sent_ms, lease_ms));
    pthread_mutex_unlock(&h->mu);
    if (watchdog) {
        if (dlock__watchdog_add(h->c, &h->wd) != 0) {
            pthread_mutex_lock(&h->mu);
            h->watched = false;
            pthread_mutex_unlock(&h->mu);
        }
    }
}

void dlock__hold_end(dlock__hold *h, bool released)
{
    pthread_mutex_lock(&h->mu);
    bool orphaned = h->orphaned, unwatch = h->watched || h->dropped;
    pthread_mutex_unlock(&h->mu);
    if (orphaned) return;
    if (unwatch) dlock__watchdog_remove(h->c, &h->wd);
    pthread_mutex_lock(&h->mu);
    bool was_held = h->state == DLOCK__HOLD_HELD;
    int64_t held_ms = dlock__now_ms() - h->since_ms;
    h->state = DLOCK__HOLD_FREE;
    h->watched = h->dropped = false;
    pthread_mutex_unlock(&h->mu);
    if (released && was_held) dlock__metrics_hold(h->c, held_ms);
}

bool dlock__hold_take_lost(dlock__hold *h)
{
    pthread_mutex_lock(&h->mu);
    bool lost = h->state == DLOCK__HOLD_LOST;
    pthread_mutex_unlock(&h->mu);
    if (lost) dlock__hold_end(h, false);
    return lost;
}

void dlock__hold_set_unknown(dlock__hold *h, bool unknown)
{
    pthread_mutex_lock(&h->mu);
    if (unknown && h->state == DLOCK__HOLD_FREE) h->state = DLOCK__HOLD_UNKNOWN;
    if (!unknown && h->state == DLOCK__HOLD_UNKNOWN) h->state = DLOCK__HOLD_FREE;
    pthread_mutex_unlock(&h->mu);
}

void dlock__hold_renewed(dlock__hold *h, int64_t sent_ms, int64_t lease_ms)
{
    pthread_mutex_lock(&h->mu);
    int64_t old = atomic_load(&h->wd.valid_until_ms);
    int64_t v = dlock__client_valid_until(h->c, sent_ms, lease_ms);
    bool live = h->state == DLOCK__HOLD_HELD && !h->orphaned && dlock__now_ms() < old;
    if (live && (!h->watched || v > old)) atomic_store(&h->wd.valid_until_ms, v);
    pthread_mutex_unlock(&h->mu);
}

bool dlock__hold_valid(dlock__hold *h)
{
    return dlock__hold_validity_ms(h) > 0;
}

int64_t dlock__hold_validity_ms(dlock__hold *h)
{
    pthread_mutex_lock(&h->mu);
    bool held = h->state == DLOCK__HOLD_HELD && !h->orphaned;
    int64_t left = atomic_load(&h->wd.valid_until_ms) - dlock__now_ms();
    pthread_mutex_unlock(&h->mu);
    return held && left > 0 ? left : 0;
}

void dlock__hold_set_user_lost(dlock__hold *h, dlock__any_fn fn, void *ud)
{
    pthread_mutex_lock(&h->mu);
    h->user_lost = fn;
    h->user_lost_ud = ud;
    pthread_mutex_unlock(&h->mu);
}

dlock__any_fn dlock__hold_user_lost(dlock__hold *h, void **ud_out)
{
    pthread_mutex_lock(&h->mu);
    dlock__any_fn fn = h->user_lost;
    *ud_out = h->user_lost_ud;
    pthread_mutex_unlock(&h->mu);
    return fn;
}

dlock__hold_state dlock__hold_get(dlock__hold *h)
{
    pthread_mutex_lock(&h->mu);
    dlock__hold_state s = h->state;
    pthread_mutex_unlock(&h->mu);
    return s;
}

bool dlock__hold_watched(dlock__hold *h)
{
    pthread_mutex_lock(&h->mu);
    bool w = h->watched;
    pthread_mutex_unlock(&h->mu);
    return w;
}

bool dlock__hold_unwatch(dlock__hold *h)
{
    pthread_mutex_lock(&h->mu);
    bool w = h->watched && !h->orphaned;
    h->watched = false;
    pthread_mutex_unlock(&h->mu);
    if (w) dlock__watchdog_remove(h->c, &h->wd);
    return w;
}

void dlock__hold_rewatch(dlock__hold *h)
{
    pthread_mutex_lock(&h->mu);
    bool w = h->state == DLOCK__HOLD_HELD && !h->watched && !h->orphaned;
    h->watched = h->watched || w;
    pthread_mutex_unlock(&h->mu);
    if (w) dlock__watchdog_add(h->c, &h->wd);
}

void dlock__hold_free(dlock__hold *h, const char *what)
{
    pthread_mutex_lock(&h->mu);
    bool held = h->state == DLOCK__HOLD_HELD, orphaned = h->orphaned;
    pthread_mutex_unlock(&h->mu);
    if (!orphaned) {
        /* also when not watched: a lost-hold callback may still be running */
        dlock__watchdog_remove(h->c, &h->wd);
        dlock__held_remove(h->c, &h->reg);
    }
    if (held && !orphaned) {
        char desc[512] = "";
        h->ops->describe(h, desc, sizeof(desc));
        dlock__log(h->c, DLOCK_LOG_WARN, "%s freed while held: not released, it expires on its lease",
                   desc[0] ? desc : what);
    }
    pthread_mutex_destroy(&h->mu);
}
