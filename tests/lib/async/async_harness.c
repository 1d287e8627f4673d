/* async_harness.c: the test loop of async_harness.h on libevent or libuv. */
#include "async_harness.h"

#include <stdlib.h>

#include "util.h"

#ifdef ASYNC_LOOP_LIBUV
#include "dlock/async_libuv.h"
static uv_loop_t uvl;
static void turn(void)
{
    uv_run(&uvl, UV_RUN_ONCE);
}
#else
#include "dlock/async_libevent.h"
static struct event_base *base;
static void turn(void)
{
    event_base_loop(base, EVLOOP_ONCE);
}
#endif

dlock_async_loop ah_loop;
static void *tick;

static void on_tick(void *arg)
{
    (void)arg;
    ah_loop.timer_start(tick, 5);
}

void ah_init(void)
{
#ifdef ASYNC_LOOP_LIBUV
    uv_loop_init(&uvl);
    dlock_async_libuv(&ah_loop, &uvl);
#else
    base = event_base_new();
    dlock_async_libevent(&ah_loop, base);
#endif
    tick = ah_loop.timer_new(ah_loop.ud, on_tick, NULL);
    ah_loop.timer_start(tick, 5);
}

int64_t ah_run_until(const volatile int *flag, int64_t bound_ms)
{
    int64_t t0 = dlock__now_ms();
    while (!*flag && dlock__now_ms() - t0 < bound_ms) turn();
    return dlock__now_ms() - t0;
}

void ah_run_for(int64_t ms)
{
    static const int never = 0;
    ah_run_until(&never, ms);
}

void ah_fini(void)
{
    ah_loop.timer_free(tick);
    tick = NULL;
#ifdef ASYNC_LOOP_LIBUV
    /* the close callbacks; bounded, so a test that failed with handles
     * still open does not hang here */
    for (int i = 0; i < 10 && uv_loop_alive(&uvl); i++) uv_run(&uvl, UV_RUN_NOWAIT);
    uv_loop_close(&uvl);
#else
    event_base_free(base);
    base = NULL;
#endif
}

const char *ah_name(void)
{
#ifdef ASYNC_LOOP_LIBUV
    return "libuv";
#else
    return "libevent";
#endif
}
