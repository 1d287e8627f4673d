/* threads.c: seckilld --threads N (see threads.h). SIGTERM and SIGINT are
 * blocked in every thread; the calling thread takes them with
 * sigtimedwait and writes to each loop's stop pipe, and it also notices a
 * loop that ended by itself (a bad configuration, a runtime failure) and
 * stops the others, so the process exits as one. The shared objects are
 * freed only after every loop has returned (each frees its own server). */
#define _GNU_SOURCE /* pipe2 */
#include "threads.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dlock/dlock.h"
#include "relay.h"

typedef struct loop {
    pthread_t t;
    const seckilld_config *c;
    seckilld_loop_fn body;
    seckilld_shared sh;
    int stop_w; /* write end of the stop pipe */
    int rc;
    struct pool *pool;
} loop;

typedef struct pool {
    pthread_mutex_t mu;
    int finished; /* loops that returned */
    bool failed;  /* one returned non-zero */
} pool;

int seckilld_threads_wanted(const seckilld_config *c)
{
    if (c->threads > 0) return c->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

static void *loop_main(void *arg)
{
    loop *l = arg;
    l->rc = l->body(l->c, &l->sh);
    pthread_mutex_lock(&l->pool->mu);
    l->pool->finished++;
    if (l->rc) l->pool->failed = true;
    pthread_mutex_unlock(&l->pool->mu);
    return NULL;
}

static void stop_all(loop *loops, int n)
{
    for (int i = 0; i < n; i++) {
        ssize_t w = write(loops[i].stop_w, "s", 1);
        (void)w; /* one byte is enough; a full pipe is already readable */
    }
}

/* n listeners on one port (SO_REUSEPORT): 0, or 2 after printing why. */
static int bind_all(const seckilld_config *c, int n, int *fds, int *port_out)
{
    int port = c->port;
    char err[256] = "";
    for (int i = 0; i < n; i++) {
        fds[i] = sk_hs_bind(c->bind, port, true, &port, err, sizeof(err));
        if (fds[i] < 0) {
            fprintf(stderr, "seckilld: %s\n", err);
            while (i-- > 0) close(fds[i]);
            return 2;
        }
    }
    *port_out = port;
    return 0;
}

/* Starts the loops (each is handed its listener and owns it); returns how
 * many run. The listeners of loops not started are closed. */
static int start_loops(loop *loops, int n, const seckilld_config *c, seckilld_loop_fn body,
                       const seckilld_shared *sh, pool *p, int *fds)
{
    for (int i = 0; i < n; i++) {
        int fd[2];
        bool ok = pipe2(fd, O_CLOEXEC | O_NONBLOCK) == 0;
        if (ok) {
            loops[i] = (loop){.c = c, .body = body, .sh = *sh, .stop_w = fd[1], .pool = p};
            loops[i].sh.stop_fd = fd[0];
            loops[i].sh.listen_fd = fds[i];
            loops[i].sh.loop = i + 1;
            if (pthread_create(&loops[i].t, NULL, loop_main, &loops[i]) != 0) {
                close(fd[0]);
                close(fd[1]);
                ok = false;
            }
        }
        if (!ok) {
            for (int k = i; k < n; k++) close(fds[k]);
            return i;
        }
    }
    return n;
}

/* Until every loop has returned: forward a signal, or stop the others
 * when one failed. */
static void supervise_loops(loop *loops, int started, pool *p, const sigset_t *sigs)
{
    bool stopping = false;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int done = p->finished;
        bool failed = p->failed;
        pthread_mutex_unlock(&p->mu);
        if (done == started) return;
        if (failed && !stopping) {
            stopping = true;
            stop_all(loops, started);
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        int sig = sigtimedwait(sigs, NULL, &ts);
        if (sig > 0 && !stopping) {
            stopping = true;
            stop_all(loops, started);
        }
    }
}

int seckilld_threads_run(const seckilld_config *c, int n, seckilld_loop_fn body)
{
    seckilld_shared sh = {.stop_fd = -1, .listen_fd = -1};
    loop *loops = calloc((size_t)n, sizeof(*loops));
    int *fds = calloc((size_t)n, sizeof(int));
    pool p = {.finished = 0};
    int rc = !loops || !fds || sk_http_group_new(&sh.group) != 0 || sk_hs_door_new(&sh.door) != 0 ||
                     sk_relay_new(&sh.relay) != 0
                 ? 1
                 : 0;
    if (rc == 0) rc = bind_all(c, n, fds, &sh.port);
    if (rc) {
        free(loops);
        free(fds);
        sk_http_group_free(sh.group);
        sk_hs_door_free(sh.door);
        sk_relay_free(sh.relay);
        return rc;
    }
    pthread_mutex_init(&p.mu, NULL);
    sigset_t sigs, old;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, &old); /* the loops inherit it */
    int started = start_loops(loops, n, c, body, &sh, &p, fds);
    free(fds);
    if (started < n) {
        pthread_mutex_lock(&p.mu);
        p.failed = true; /* no thread or no pipe: stop the ones running */
        pthread_mutex_unlock(&p.mu);
    }
    supervise_loops(loops, started, &p, &sigs);
    rc = started < n ? 1 : 0;
    for (int i = 0; i < started; i++) {
        pthread_join(loops[i].t, NULL);
        if (loops[i].rc == 2 || (loops[i].rc && rc == 0)) rc = loops[i].rc;
        close(loops[i].sh.stop_fd);
        close(loops[i].stop_w);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_destroy(&p.mu);
    sk_hs_door_free(sh.door);
    sk_http_group_free(sh.group);
    sk_relay_free(sh.relay);
    free(loops);
    return rc;
}
