/* events.c: dlock's self-pipe. Signal handlers and the library's
 * lost-lock callback (on a watchdog thread) only write one byte to a
 * non-blocking pipe; the main thread reads the events in order. The lost
 * notice is never dropped, even when the pipe is full.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "events.h"

static int ev_pipe[2] = {-1, -1};
/* Backstop for a full pipe: the lost notice must never be dropped. */
static atomic_int ev_lost_pending;

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))
static bool caught[N_FORWARDED]; /* we installed a handler (not ignored on entry) */

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_events_post(unsigned char ev)
{
    int saved = errno;
    if (ev == CLI_EV_LOST) atomic_store(&ev_lost_pending, 1);
    ssize_t n = write(ev_pipe[1], &ev, 1);
    (void)n; /* a full pipe already holds a wake-up */
    errno = saved;
}

static void on_signal(int sig)
{
    cli_events_post((unsigned char)sig);
}

int cli_events_init(void)
{
    if (pipe(ev_pipe) != 0) return -1;
    for (int i = 0; i < 2; i++) {
        if (fcntl(ev_pipe[i], F_SETFD, FD_CLOEXEC) != 0) return -1;
        if (fcntl(ev_pipe[i], F_SETFL, O_NONBLOCK) != 0) return -1;
    }
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_FORWARDED; i++) {
        /* A signal ignored on entry (nohup, background jobs) stays ignored,
         * for us and for COMMAND, as a shell would do. */
        if (sigaction(forwarded[i], NULL, &old) != 0) return -1;
        if (old.sa_handler == SIG_IGN) continue;
        if (sigaction(forwarded[i], &sa, NULL) != 0) return -1;
        caught[i] = true;
    }
    /* Stops are reported too: see follow_stop(). */
    return sigaction(SIGCHLD, &sa, NULL);
}

int cli_events_next(int64_t timeout_ms)
{
    for (;;) {
        unsigned char ev;
        ssize_t n = read(ev_pipe[0], &ev, 1);
        if (n == 1) return ev;
        if (atomic_exchange(&ev_lost_pending, 0)) return CLI_EV_LOST;
        if (timeout_ms == 0) return 0;
        struct pollfd p = {.fd = ev_pipe[0], .events = POLLIN};
        int timeout = timeout_ms < 0 ? -1 : timeout_ms > 60000 ? 60000 : (int)timeout_ms;
        int rc = poll(&p, 1, timeout);
        if (rc == 0) return 0;
        if (rc < 0 && errno != EINTR) return 0;
    }
}

void cli_events_restore_defaults(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (size_t i = 0; i < N_FORWARDED; i++) {
        if (caught[i]) sigaction(forwarded[i], &sa, NULL);
    }
    sigaction(SIGCHLD, &sa, NULL);
}
