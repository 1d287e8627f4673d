/* async_libuv.h: the libuv adapter of libdlock's asynchronous client
 * (async.h), header-only, so libdlock links no loop library: the program
 * that includes it links libuv itself.
 *
 *     uv_loop_t *uv = uv_default_loop();
 *     dlock_async_loop loop;
 *     dlock_async_libuv(&loop, uv);
 *     dlock_async_client_new(&loop, &opts, &client);
 *
 * The uv loop must outlive the client, and run after dlock_async_client_free
 * until its handles are closed (uv_run returns when they are): watchers and
 * timers are closed with uv_close, whose memory goes in the close callback.
 * Every call and callback happens on the thread that runs uv_run.
 */
#ifndef DLOCK_ASYNC_LIBUV_H
#define DLOCK_ASYNC_LIBUV_H

#include <stdlib.h>

#include <uv.h>

#include "dlock/async.h"

typedef struct dlock__luv_io {
    uv_poll_t h;
    dlock_async_io_fn fn;
    void *arg;
    int wanted;
} dlock__luv_io;

typedef struct dlock__luv_timer {
    uv_timer_t h;
    dlock_async_timer_fn fn;
    void *arg;
} dlock__luv_timer;

static inline void dlock__luv_close_cb(uv_handle_t *h)
{
    free(h->data);
}

static inline void dlock__luv_io_cb(uv_poll_t *h, int status, int events)
{
    dlock__luv_io *io = (dlock__luv_io *)h->data;
    int ev = 0;
    /* an error on the socket: let the connection read or write and see it */
    if (status < 0) ev = io->wanted;
    if (events & UV_READABLE) ev |= DLOCK_ASYNC_READ;
    if (events & UV_WRITABLE) ev |= DLOCK_ASYNC_WRITE;
    io->fn(io->arg, ev); /* io may be closed inside: nothing touches it afterwards */
}

static inline void *dlock__luv_io_new(void *ud, int fd, dlock_async_io_fn fn, void *arg)
{
    dlock__luv_io *io = (dlock__luv_io *)calloc(1, sizeof(*io));
    if (!io) return NULL;
    io->fn = fn;
    io->arg = arg;
    if (uv_poll_init((uv_loop_t *)ud, &io->h, fd) != 0) {
        free(io);
        return NULL;
    }
    io->h.data = io;
    return io;
}

static inline int dlock__luv_io_set(void *p, int events)
{
    dlock__luv_io *io = (dlock__luv_io *)p;
    io->wanted = events;
    if (!events) return uv_poll_stop(&io->h) == 0 ? 0 : -1;
    int uvev = ((events & DLOCK_ASYNC_READ) ? UV_READABLE : 0) | ((events & DLOCK_ASYNC_WRITE) ? UV_WRITABLE : 0);
    return uv_poll_start(&io->h, uvev, dlock__luv_io_cb) == 0 ? 0 : -1;
}

static inline void dlock__luv_io_free(void *p)
{
    dlock__luv_io *io = (dlock__luv_io *)p;
    uv_close((uv_handle_t *)&io->h, dlock__luv_close_cb);
}

static inline void dlock__luv_timer_cb(uv_timer_t *h)
{
    dlock__luv_timer *t = (dlock__luv_timer *)h->data;
    t->fn(t->arg);
}

static inline void *dlock__luv_timer_new(void *ud, dlock_async_timer_fn fn, void *arg)
{
    dlock__luv_timer *t = (dlock__luv_timer *)calloc(1, sizeof(*t));
    if (!t) return NULL;
    t->fn = fn;
    t->arg = arg;
    if (uv_timer_init((uv_loop_t *)ud, &t->h) != 0) {
        free(t);
        return NULL;
    }
    t->h.data = t;
    return t;
}

static inline int dlock__luv_timer_start(void *p, int64_t after_ms)
{
    dlock__luv_timer *t = (dlock__luv_timer *)p;
    /* uv's clock is cached per loop turn: refresh it so a deadline is from now */
    uv_update_time(t->h.loop);
    return uv_timer_start(&t->h, dlock__luv_timer_cb, (uint64_t)after_ms, 0) == 0 ? 0 : -1;
}

static inline void dlock__luv_timer_stop(void *p)
{
    uv_timer_stop(&((dlock__luv_timer *)p)->h);
}

static inline void dlock__luv_timer_free(void *p)
{
    dlock__luv_timer *t = (dlock__luv_timer *)p;
    uv_close((uv_handle_t *)&t->h, dlock__luv_close_cb);
}

/* Fills *loop for uv. Always succeeds (returns 0). */
static inline int dlock_async_libuv(dlock_async_loop *loop, uv_loop_t *uv)
{
    loop->size = sizeof(*loop);
    loop->ud = uv;
    loop->io_new = dlock__luv_io_new;
    loop->io_set = dlock__luv_io_set;
    loop->io_free = dlock__luv_io_free;
    loop->timer_new = dlock__luv_timer_new;
    loop->timer_start = dlock__luv_timer_start;
    loop->timer_stop = dlock__luv_timer_stop;
    loop->timer_free = dlock__luv_timer_free;
    return 0;
}

#endif
