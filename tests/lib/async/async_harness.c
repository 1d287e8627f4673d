/* async_harness.c: the test loop of async_harness.h on libevent or libuv. */
#include "async_harness.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "servers.h"
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

/* ---- shared by the tests ------------------------------------------------------------ */

int ah_setup(void **state)
{
    (void)state;
    ah_init();
    return 0;
}

int ah_teardown(void **state)
{
    (void)state;
    ah_proxy_stop();
    ah_fini();
    return 0;
}

void ah_client_options(dlock_client_options *o, const char *url, int64_t command_timeout_ms)
{
    dlock_client_options_init(o);
    o->url = url;
    o->key_prefix = test_prefix();
    o->watchdog_timeout_ms = AH_WATCHDOG_MS;
    o->command_timeout_ms = command_timeout_ms;
    o->connect_timeout_ms = 1000;
}

dlock_async_client *ah_client(const dlock_client_options *o)
{
    dlock_async_client *c = NULL;
    assert_int_equal(dlock_async_client_new(&ah_loop, o, &c), 0);
    return c;
}

dlock_client *ah_blocking_client(const char *url)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = url;
    o.key_prefix = test_prefix();
    o.watchdog_timeout_ms = AH_WATCHDOG_MS;
    dlock_client *bc = NULL;
    assert_int_equal(dlock_client_create(&o, &bc), 0);
    return bc;
}

int ah_completions;

static void record(void *ud, int rc)
{
    ah_rec *r = ud;
    r->calls++;
    r->rc = rc;
    r->at_ms = dlock__now_ms();
    r->order = ++ah_completions;
}

void ah_on_lock(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    record(ud, rc);
}

void ah_on_rw(dlock_async_rwlock *rw, int rc, void *ud)
{
    (void)rw;
    record(ud, rc);
}

void ah_on_sem(dlock_async_semaphore *s, int rc, void *ud)
{
    (void)s;
    record(ud, rc);
}

int ah_wait_rec(ah_rec *r, int64_t bound_ms)
{
    ah_run_until(&r->calls, bound_ms);
    assert_int_equal(r->calls, 1);
    return r->rc;
}

int ah_acquire_now(dlock_async_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    ah_rec r = {0};
    int rc = dlock_async_lock_acquire(l, wait_ms, lease_ms, ah_on_lock, &r);
    return rc ? rc : ah_wait_rec(&r, (wait_ms > 0 ? wait_ms : 0) + 5000);
}

int ah_unlock_now(dlock_async_lock *l)
{
    ah_rec r = {0};
    int rc = dlock_async_lock_unlock(l, ah_on_lock, &r);
    return rc ? rc : ah_wait_rec(&r, 5000);
}

int ah_rw_now(dlock_async_rwlock *rw, bool write, bool lock, int64_t wait_ms)
{
    ah_rec r = {0};
    int rc = lock ? (write ? dlock_async_rwlock_write_lock : dlock_async_rwlock_read_lock)(rw, wait_ms, ah_on_rw, &r)
                  : (write ? dlock_async_rwlock_write_unlock : dlock_async_rwlock_read_unlock)(rw, ah_on_rw, &r);
    return rc ? rc : ah_wait_rec(&r, (wait_ms > 0 ? wait_ms : 0) + 5000);
}

int ah_sem_now(dlock_async_semaphore *s, bool take, int64_t k, int64_t wait_ms)
{
    ah_rec r = {0};
    int rc = take ? dlock_async_semaphore_acquire(s, k, wait_ms, ah_on_sem, &r)
                  : dlock_async_semaphore_release(s, k, ah_on_sem, &r);
    return rc ? rc : ah_wait_rec(&r, (wait_ms > 0 ? wait_ms : 0) + 5000);
}

static void release_blocking(void *arg)
{
    ah_later *u = arg;
    u->at_ms = dlock__now_ms();
    if (u->bl) assert_int_equal(dlock_lock_unlock(u->bl), 0);
    if (u->brw) assert_int_equal(dlock_rwlock_read_unlock(u->brw), 0);
    if (u->bsem) assert_int_equal(dlock_semaphore_release(u->bsem, 1), 0);
    u->done = 1;
}

void ah_release_later(ah_later *u, int64_t ms)
{
    u->timer = ah_loop.timer_new(ah_loop.ud, release_blocking, u);
    assert_non_null(u->timer);
    ah_loop.timer_start(u->timer, ms);
}

void ah_later_free(ah_later *u)
{
    ah_loop.timer_free(u->timer);
    u->timer = NULL;
}
