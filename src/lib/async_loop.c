/* async_loop.c: the host loop's table (async.h, dlock_async_loop) as the
 * rest of the asynchronous half uses it: checked once, timers with their
 * NULL and negative cases handled here, and the connection's view
 * (redis_loop.h) made from the same functions. Calls nothing else. */
#include <stddef.h>

#include "async_internal.h"

int dlock__aloop_check(const dlock_async_loop *l)
{
    if (!l || l->size < offsetof(dlock_async_loop, timer_free) + sizeof(l->timer_free)) return DLOCK_EINVAL;
    bool all = l->io_new && l->io_set && l->io_free && l->timer_new && l->timer_start && l->timer_stop &&
               l->timer_free;
    return all ? 0 : DLOCK_EINVAL;
}

void dlock__aloop_evloop(const dlock_async_loop *l, dlock__evloop *out)
{
    out->ud = l->ud;
    out->io_new = l->io_new;
    out->io_set = l->io_set;
    out->io_free = l->io_free;
}

void *dlock__atimer_new(const dlock_async_loop *l, dlock_async_timer_fn fn, void *arg)
{
    return l->timer_new(l->ud, fn, arg);
}

void dlock__atimer_start(const dlock_async_loop *l, void *t, int64_t after_ms)
{
    if (t) l->timer_start(t, after_ms < 0 ? 0 : after_ms);
}

void dlock__atimer_stop(const dlock_async_loop *l, void *t)
{
    if (t) l->timer_stop(t);
}

void dlock__atimer_free(const dlock_async_loop *l, void *t)
{
    if (t) l->timer_free(t);
}
