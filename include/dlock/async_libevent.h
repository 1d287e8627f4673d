/* async_libevent.h: the libevent 2.1 adapter of libdlock's asynchronous
 * client (async.h), header-only, so libdlock links no loop library: the
 * program that includes it links libevent itself.
 *
 *     struct event_base *base = event_base_new();
 *     dlock_async_loop loop;
 *     dlock_async_libevent(&loop, base);
 *     dlock_async_client_new(&loop, &opts, &client);
 *
 * The base must outlive the client; every call and callback happens on
 * the thread that runs event_base_dispatch(base). Timers use the base's
 * monotonic clock.
 */
#ifndef DLOCK_ASYNC_LIBEVENT_H
#define DLOCK_ASYNC_LIBEVENT_H

#include <stdlib.h>

#include <event2/event.h>

#include "dlock/async.h"

typedef struct dlock__lev_io {
    struct event *rev, *wev;
    dlock_async_io_fn fn;
    void *arg;
} dlock__lev_io;

typedef struct dlock__lev_timer {
    struct event *ev;
    dlock_async_timer_fn fn;
    void *arg;
} dlock__lev_timer;

static inline void dlock__lev_io_cb(evutil_socket_t fd, short what, void *p)
{
    dlock__lev_io *io = (dlock__lev_io *)p;
    (void)fd;
    /* io may be freed inside fn: nothing touches it afterwards */
    io->fn(io->arg, ((what & EV_READ) ? DLOCK_ASYNC_READ : 0) | ((what & EV_WRITE) ? DLOCK_ASYNC_WRITE : 0));
}

static inline void *dlock__lev_io_new(void *ud, int fd, dlock_async_io_fn fn, void *arg)
{
    dlock__lev_io *io = (dlock__lev_io *)calloc(1, sizeof(*io));
    if (!io) return NULL;
    io->fn = fn;
    io->arg = arg;
    io->rev = event_new((struct event_base *)ud, fd, EV_READ | EV_PERSIST, dlock__lev_io_cb, io);
    io->wev = event_new((struct event_base *)ud, fd, EV_WRITE | EV_PERSIST, dlock__lev_io_cb, io);
    if (!io->rev || !io->wev) {
        if (io->rev) event_free(io->rev);
        if (io->wev) event_free(io->wev);
        free(io);
        return NULL;
    }
    return io;
}

static inline int dlock__lev_io_set(void *p, int events)
{
    dlock__lev_io *io = (dlock__lev_io *)p;
    int rc = 0;
    if (events & DLOCK_ASYNC_READ) rc |= event_add(io->rev, NULL);
    else rc |= event_del(io->rev);
    if (events & DLOCK_ASYNC_WRITE) rc |= event_add(io->wev, NULL);
    else rc |= event_del(io->wev);
    return rc ? -1 : 0;
}

static inline void dlock__lev_io_free(void *p)
{
    dlock__lev_io *io = (dlock__lev_io *)p;
    event_free(io->rev);
    event_free(io->wev);
    free(io);
}

static inline void dlock__lev_timer_cb(evutil_socket_t fd, short what, void *p)
{
    dlock__lev_timer *t = (dlock__lev_timer *)p;
    (void)fd;
    (void)what;
    t->fn(t->arg);
}

static inline void *dlock__lev_timer_new(void *ud, dlock_async_timer_fn fn, void *arg)
{
    dlock__lev_timer *t = (dlock__lev_timer *)calloc(1, sizeof(*t));
    if (!t) return NULL;
    t->fn = fn;
    t->arg = arg;
    t->ev = evtimer_new((struct event_base *)ud, dlock__lev_timer_cb, t);
    if (!t->ev) {
        free(t);
        return NULL;
    }
    return t;
}

static inline int dlock__lev_timer_start(void *p, int64_t after_ms)
{
    dlock__lev_timer *t = (dlock__lev_timer *)p;
    struct timeval tv;
    tv.tv_sec = (time_t)(after_ms / 1000);
    tv.tv_usec = (suseconds_t)((after_ms % 1000) * 1000);
    return evtimer_add(t->ev, &tv) == 0 ? 0 : -1;
}

static inline void dlock__lev_timer_stop(void *p)
{
    evtimer_del(((dlock__lev_timer *)p)->ev);
}

static inline void dlock__lev_timer_free(void *p)
{
    dlock__lev_timer *t = (dlock__lev_timer *)p;
    event_free(t->ev);
    free(t);
}

/* Fills *loop for base. Always succeeds (returns 0). */
static inline int dlock_async_libevent(dlock_async_loop *loop, struct event_base *base)
{
    loop->size = sizeof(*loop);
    loop->ud = base;
    loop->io_new = dlock__lev_io_new;
    loop->io_set = dlock__lev_io_set;
    loop->io_free = dlock__lev_io_free;
    loop->timer_new = dlock__lev_timer_new;
    loop->timer_start = dlock__lev_timer_start;
    loop->timer_stop = dlock__lev_timer_stop;
    loop->timer_free = dlock__lev_timer_free;
    return 0;
}

#endif
