/* async_harness.c: the test loop of async_harness.h on libevent or libuv. */
#include "async_harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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
    ah_proxy_stop();
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

/* ---- the freezing proxy ------------------------------------------------------------ */

static pid_t proxy_pid;

int ah_proxy_start(int target_port, int *pid_out)
{
    const char *dir = getenv("DLOCK_BUILD_DIR");
    char bin[1024], port[16];
    snprintf(bin, sizeof(bin), "%s/tests/dl_freeze_proxy", dir ? dir : ".");
    snprintf(port, sizeof(port), "%d", target_port);
    int fds[2];
    if (pipe(fds) != 0) abort();
    pid_t pid = fork();
    if (pid < 0) abort();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(bin, bin, "127.0.0.1", port, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    proxy_pid = pid;
    char line[32] = {0};
    ssize_t n = read(fds[0], line, sizeof(line) - 1);
    close(fds[0]);
    int listen_port = n > 0 ? (int)strtol(line, NULL, 10) : 0;
    if (listen_port <= 0) {
        fprintf(stderr, "async_harness: %s did not start\n", bin);
        ah_proxy_stop();
        abort();
    }
    *pid_out = pid;
    return listen_port;
}

void ah_proxy_stop(void)
{
    if (proxy_pid <= 0) return;
    kill(proxy_pid, SIGCONT);
    kill(proxy_pid, SIGTERM);
    waitpid(proxy_pid, NULL, 0);
    proxy_pid = 0;
}
