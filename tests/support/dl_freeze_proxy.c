/* dl_freeze_proxy.c: the partition tool of the lease tests, a freezing TCP
 * proxy. `dl_freeze_proxy TARGET_HOST TARGET_PORT` listens on one socket on
 * 127.0.0.1 (a port the kernel picks at bind, held from then on, so no other
 * process can take it), prints that port and a newline on stdout when
 * ready, and forwards every accepted connection to TARGET_HOST:TARGET_PORT,
 * both ways, with one poll() loop and no threads.
 *
 * The cut is done by the test, not by this program: `kill -STOP <pid>`
 * freezes it. Every socket stays open (nothing is closed, reset or shut
 * down), no byte moves in either direction, and a new connection is still
 * completed by the kernel (the listen backlog) but never answered. From the
 * client this is what a dead route, a dead switch port or an overloaded
 * server looks like: writes are buffered, replies never come, no error is
 * reported. `kill -CONT <pid>` thaws it and traffic flows again, including
 * whatever was queued meanwhile. SIGTERM ends it (every socket closed by the
 * kernel).
 *
 * Invariant: a byte read from one side is written to the other side before
 * more is read from that side (one buffer per direction), so nothing is
 * reordered or dropped; a side's EOF is passed on as shutdown(SHUT_WR)
 * once its buffer is flushed; an error on either side closes the pair.
 * Exit status: 0 on SIGTERM, 2 on bad usage or when it cannot listen. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PX_MAX_PAIRS 256
#define PX_BUF 65536

/* One direction of a pair: bytes read from `from` wait in buf to go to `to`. */
typedef struct px_dir {
    char buf[PX_BUF];
    size_t len;  /* bytes in buf */
    size_t off;  /* bytes of buf already written */
    bool eof;    /* `from` said EOF; shut `to` down once buf is flushed */
    bool shut;   /* shutdown(to, SHUT_WR) done */
} px_dir;

typedef struct px_pair {
    int fd[2];     /* 0: the client that connected to us; 1: the target */
    px_dir dir[2]; /* dir[i]: from fd[i] to fd[1 - i] */
} px_pair;

static px_pair *pairs[PX_MAX_PAIRS];

static int px_listen(int *port_out)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0; /* the kernel picks a free port and we hold it */
    socklen_t len = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 128) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        close(s);
        return -1;
    }
    *port_out = ntohs(a.sin_port);
    return s;
}

/* A blocking connect to the target (a loopback or local server: it answers
 * at once; while the proxy is frozen nothing runs here anyway). */
static int px_connect(const char *host, const char *port)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

static void px_close(int i)
{
    close(pairs[i]->fd[0]);
    close(pairs[i]->fd[1]);
    free(pairs[i]);
    pairs[i] = NULL;
}

static void px_accept(int ls, const char *host, const char *port)
{
    int c = accept(ls, NULL, NULL);
    if (c < 0) return;
    int slot = -1;
    for (int i = 0; i < PX_MAX_PAIRS && slot < 0; i++)
        if (!pairs[i]) slot = i;
    int t = slot < 0 ? -1 : px_connect(host, port);
    px_pair *p = t < 0 ? NULL : calloc(1, sizeof *p);
    if (!p) { /* full, target down or no memory: the client sees a close */
        close(c);
        if (t >= 0) close(t);
        return;
    }
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    p->fd[0] = c;
    p->fd[1] = t;
    pairs[slot] = p;
}

/* Moves bytes for one direction as poll reported; false: close the pair. */
static bool px_step(px_pair *p, int d, short rev_from, short rev_to)
{
    px_dir *x = &p->dir[d];
    int from = p->fd[d], to = p->fd[1 - d];
    if ((rev_to & (POLLOUT | POLLERR | POLLHUP)) && x->off < x->len) {
        ssize_t n = send(to, x->buf + x->off, x->len - x->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
        if (n > 0) x->off += (size_t)n;
        if (x->off == x->len) x->off = x->len = 0;
    }
    if ((rev_from & (POLLIN | POLLERR | POLLHUP)) && x->len == 0 && !x->eof) {
        ssize_t n = recv(from, x->buf, sizeof x->buf, MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
        if (n == 0) x->eof = true;
        if (n > 0) x->len = (size_t)n;
    }
    if (x->eof && x->len == 0 && !x->shut) {
        shutdown(to, SHUT_WR);
        x->shut = true;
    }
    return true;
}

static int px_run(int ls, const char *host, const char *port)
{
    struct pollfd fds[1 + 2 * PX_MAX_PAIRS];
    for (;;) {
        fds[0] = (struct pollfd){.fd = ls, .events = POLLIN};
        for (int i = 0; i < PX_MAX_PAIRS; i++) {
            for (int d = 0; d < 2; d++) {
                struct pollfd *f = &fds[1 + 2 * i + d];
                *f = (struct pollfd){.fd = -1};
                if (!pairs[i]) continue;
                f->fd = pairs[i]->fd[d];
                /* read when our buffer toward the other side is empty;
                 * write when the other side's buffer toward us has bytes */
                if (pairs[i]->dir[d].len == 0 && !pairs[i]->dir[d].eof) f->events |= POLLIN;
                if (pairs[i]->dir[1 - d].len > pairs[i]->dir[1 - d].off) f->events |= POLLOUT;
            }
        }
        if (poll(fds, 1 + 2 * PX_MAX_PAIRS, -1) < 0) {
            if (errno == EINTR) continue;
            return 2;
        }
        for (int i = 0; i < PX_MAX_PAIRS; i++) {
            if (!pairs[i]) continue;
            short r0 = fds[1 + 2 * i].revents, r1 = fds[2 + 2 * i].revents;
            if (!px_step(pairs[i], 0, r0, r1) || !px_step(pairs[i], 1, r1, r0) ||
                (pairs[i]->dir[0].shut && pairs[i]->dir[1].shut))
                px_close(i);
        }
        if (fds[0].revents & POLLIN) px_accept(ls, host, port);
    }
}

static void px_term(int sig)
{
    (void)sig;
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fputs("usage: dl_freeze_proxy TARGET_HOST TARGET_PORT\n"
              "  prints its listening port (127.0.0.1); kill -STOP freezes it, kill -CONT thaws it\n",
              stderr);
        return 2;
    }
    char *end = NULL;
    long tp = strtol(argv[2], &end, 10);
    if (!end || *end || tp < 1 || tp > 65535) {
        fprintf(stderr, "dl_freeze_proxy: bad target port '%s'\n", argv[2]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, px_term);
    int port = 0, ls = px_listen(&port);
    if (ls < 0) {
        fprintf(stderr, "dl_freeze_proxy: cannot listen on 127.0.0.1: %s\n", strerror(errno));
        return 2;
    }
    printf("%d\n", port);
    fflush(stdout);
    return px_run(ls, argv[1], argv[2]);
}
