/* hserver.c: the HTTP layer's server (see hserver.h): options, listening
 * sockets, accepting under the connection caps, and eviction.
 * Design: one server per event loop. A listener counts its connections
 * and those of each client address in its door (its own, or one shared
 * with the listeners of other loops: sk_hs_door, under a mutex); at its cap a new connection replaces
 * the connection that has waited longest for a complete head (the slow
 * or silent ones a slowloris flood is made of) once that one has waited
 * evict_after_ms; with nothing to evict it stops accepting and looks again
 * every 100 ms (or as soon as a connection closes). accept() errors
 * (EMFILE) pause it for 100 ms. Connections and their parsing: hs_conn.c. */
#include "hs_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client_addr.h"
#include "dlock/dlock.h"
#include "sk_err.h"
#include "util.h"

#define RECHECK_MS 100

void sk_hs_opts_init(sk_hs_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->max_head = 8192;
    o->max_url = 4096;
    o->max_headers_count = 100;
    o->max_body = 8192;
    o->head_timeout_ms = 5000;
    o->body_timeout_ms = 10000;
    o->idle_timeout_ms = 10000;
    o->max_pipeline = 64;
}

void sk_hs_listen_opts_init(sk_hs_listen_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->max_conns = 10000;
    o->max_conns_per_addr = 1024;
    o->ipv6_prefix = SK_IPV6_PREFIX_DEFAULT;
    o->evict_after_ms = 500;
}

#define M(x) (1u << (x))
static const unsigned default_methods =
    M(HTTP_GET) | M(HTTP_HEAD) | M(HTTP_POST) | M(HTTP_PUT) | M(HTTP_DELETE) | M(HTTP_OPTIONS) | M(HTTP_PATCH);

int sk_hs_new(struct event_base *base, const sk_hs_opts *opts, sk_hs **out)
{
    *out = NULL;
    if (!opts || !opts->on_request) return SK_EINVAL;
    sk_hs *s = calloc(1, sizeof(*s));
    if (!s) return DLOCK_ENOMEM;
    s->base = base;
    s->o = *opts;
    sk_hs_opts d;
    sk_hs_opts_init(&d);
    if (!s->o.max_head) s->o.max_head = d.max_head;
    if (!s->o.max_url) s->o.max_url = d.max_url;
    if (!s->o.max_headers_count) s->o.max_headers_count = d.max_headers_count;
    if (!s->o.max_body) s->o.max_body = d.max_body;
    if (s->o.head_timeout_ms <= 0) s->o.head_timeout_ms = d.head_timeout_ms;
    if (s->o.body_timeout_ms <= 0) s->o.body_timeout_ms = d.body_timeout_ms;
    if (s->o.idle_timeout_ms <= 0) s->o.idle_timeout_ms = d.idle_timeout_ms;
    if (!s->o.max_pipeline) s->o.max_pipeline = d.max_pipeline;
    if (!s->o.methods) s->o.methods = default_methods;
    hs__parser_settings(&s->ps);
    *out = s;
    return 0;
}

const char *hs__date(sk_hs *s)
{
    time_t now = time(NULL);
    if (now != s->date_at) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(s->date, sizeof(s->date), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        s->date_at = now;
    }
    return s->date;
}

size_t sk_hs_unflushed(const sk_hs *s) { return s->unflushed; }
size_t sk_hs_connections(const sk_hs *s) { return s->nconns; }

/* ---- connection counts (a door: the listener's own or shared) ------------ */

int sk_hs_door_new(sk_hs_door **out)
{
    *out = calloc(1, sizeof(**out));
    if (!*out) return DLOCK_ENOMEM;
    pthread_mutex_init(&(*out)->mu, NULL);
    return 0;
}

void sk_hs_door_free(sk_hs_door *d)
{
    if (!d) return;
    for (int i = 0; i < HS_ADDR_BUCKETS; i++)
        for (hs_addr_count *a = d->addrs[i], *an; a; a = an) {
            an = a->next;
            free(a);
        }
    pthread_mutex_destroy(&d->mu);
    free(d);
}

/* Under d->mu. */
static hs_addr_count **addr_slot(sk_hs_door *d, const char *addr)
{
    uint32_t h = 2166136261u;
    for (const char *p = addr; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    hs_addr_count **pp = &d->addrs[h % HS_ADDR_BUCKETS];
    while (*pp && strcmp((*pp)->addr, addr) != 0) pp = &(*pp)->next;
    return pp;
}

/* Under d->mu. */
static int addr_add(const hs_listener *l, sk_hs_door *d, const char *addr, int delta)
{
    if (!l->o.max_conns_per_addr) return 0;
    hs_addr_count **pp = addr_slot(d, addr);
    if (!*pp) {
        if (delta < 0) return 0;
        hs_addr_count *a = calloc(1, sizeof(*a));
        if (!a) return DLOCK_ENOMEM;
        snprintf(a->addr, sizeof(a->addr), "%s", addr);
        *pp = a;
    }
    hs_addr_count *a = *pp;
    if (delta < 0 && a->n <= 1) {
        *pp = a->next;
        free(a);
        return 0;
    }
    a->n = (size_t)((long)a->n + delta);
    return 0;
}

/* Counts a new connection from addr: 0, 1 when addr is at its cap, or
 * DLOCK_ENOMEM. */
static int door_enter(hs_listener *l, const char *peer)
{
    char addr[SK_ADDR_MAX]; /* the peer's count: its IPv6 network, a mapped IPv4 as IPv4 */
    sk_addr_group(peer, l->o.ipv6_prefix, addr);
    sk_hs_door *d = l->door;
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    if (l->o.max_conns_per_addr) {
        hs_addr_count *a = *addr_slot(d, addr);
        if (a && a->n >= l->o.max_conns_per_addr) rc = 1;
    }
    if (!rc) rc = addr_add(l, d, addr, 1);
    if (!rc) d->nconns++;
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static void door_leave(hs_listener *l, const char *peer)
{
    char addr[SK_ADDR_MAX];
    sk_addr_group(peer, l->o.ipv6_prefix, addr);
    sk_hs_door *d = l->door;
    pthread_mutex_lock(&d->mu);
    d->nconns--;
    addr_add(l, d, addr, -1);
    pthread_mutex_unlock(&d->mu);
}

static size_t door_conns(hs_listener *l)
{
    pthread_mutex_lock(&l->door->mu);
    size_t n = l->door->nconns;
    pthread_mutex_unlock(&l->door->mu);
    return n;
}

/* ---- accepting --------------------------------------------------------- */

static void pause_listener(hs_listener *l)
{
    if (!l->l) return;
    evconnlistener_disable(l->l);
    l->paused = true;
    struct timeval tv = {0, RECHECK_MS * 1000};
    event_add(l->recheck, &tv);
}

static void resume_listener(hs_listener *l)
{
    if (!l->l || !l->paused) return;
    l->paused = false;
    event_del(l->recheck);
    evconnlistener_enable(l->l);
}

/* Closes the connection waiting longest for a head if it waited enough. */
static bool evict_one(hs_listener *l)
{
    hs_conn *v = l->wait_head;
    if (!v || l->o.evict_after_ms <= 0 || v->in_read) return false;
    if (dlock__now_ms() - v->wait_since < l->o.evict_after_ms) return false;
    hs__conn_close(v);
    return true;
}

/* At the cap: make room for the next connection, or stop accepting. */
static void at_cap(hs_listener *l)
{
    if (door_conns(l) < l->o.max_conns) return;
    if (!evict_one(l)) pause_listener(l);
}

static void on_recheck(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hs_listener *l = arg;
    if (door_conns(l) >= l->o.max_conns && !evict_one(l)) {
        pause_listener(l);
        return;
    }
    resume_listener(l);
}

void hs__listener_conn_gone(hs_listener *l, const char *peer)
{
    door_leave(l, peer);
    /* (a listener of another loop sharing the door looks again within
     * RECHECK_MS) */
    if (l->paused && door_conns(l) < l->o.max_conns) resume_listener(l);
}

static void peer_name(const struct sockaddr *sa, char *out, size_t cap)
{
    snprintf(out, cap, "unix");
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, (socklen_t)cap);
}

/* Written whole at accept; the assertion keeps Content-Length the body's
 * length (a client reads exactly that many bytes). */
#define TOO_MANY_BODY "{\"error\":\"unavailable\",\"message\":\"too many connections from this address; retry\"}\n"
_Static_assert(sizeof(TOO_MANY_BODY) - 1 == 82, "Content-Length of too_many");
static const char too_many[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 82\r\n"
    "Connection: close\r\n\r\n" TOO_MANY_BODY;

static void on_accept(struct evconnlistener *el, evutil_socket_t fd, struct sockaddr *sa, int slen, void *arg)
{
    (void)el;
    (void)slen;
    hs_listener *l = arg;
    char peer[48];
    peer_name(sa, peer, sizeof(peer));
    int rc = door_enter(l, peer);
    if (rc == 1) {
        ssize_t w = send(fd, too_many, sizeof(too_many) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w; /* best effort: the client may not even read */
        close(fd);
        return;
    }
    if (rc) {
        close(fd);
        return;
    }
    if (hs__conn_new(l->s, l, fd, l->o.tag, peer) != 0) {
        close(fd);
        door_leave(l, peer);
        return;
    }
    at_cap(l);
}

/* accept() failed (EMFILE: the fd limit seckilld sets from max-connections):
 * pause instead of spinning on a listener that stays readable. */
static void on_accept_error(struct evconnlistener *el, void *arg)
{
    (void)el;
    pause_listener(arg);
}

int sk_hs_listen(sk_hs *s, int fd, const sk_hs_listen_opts *lo)
{
    hs_listener *l = calloc(1, sizeof(*l));
    if (!l) return DLOCK_ENOMEM;
    l->s = s;
    if (lo) l->o = *lo;
    else sk_hs_listen_opts_init(&l->o);
    if (!l->o.max_conns) l->o.max_conns = 10000;
    l->door = l->o.door;
    if (!l->door && sk_hs_door_new(&l->own_door) != 0) {
        free(l);
        return DLOCK_ENOMEM;
    }
    if (!l->door) l->door = l->own_door;
    l->recheck = evtimer_new(s->base, on_recheck, l);
    evutil_make_socket_nonblocking(fd);
    l->l = l->recheck ? evconnlistener_new(s->base, on_accept, l, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd) : NULL;
    if (!l->l) {
        if (l->recheck) event_free(l->recheck);
        sk_hs_door_free(l->own_door);
        free(l);
        return DLOCK_EIO;
    }
    evconnlistener_set_error_cb(l->l, on_accept_error);
    l->next = s->listeners;
    s->listeners = l;
    return 0;
}

int sk_hs_adopt(sk_hs *s, int fd, unsigned tag, const char *peer)
{
    if (evutil_make_socket_nonblocking(fd) != 0 || hs__conn_new(s, NULL, fd, tag, peer ? peer : "") != 0) {
        close(fd);
        return DLOCK_EIO;
    }
    return 0;
}

static int bind_one(const struct addrinfo *ai, bool reuseport)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if ((reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int sk_hs_bind(const char *addr, int port, bool reuseport, int *port_out, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    int rc = getaddrinfo(addr && *addr ? addr : NULL, ps, &hints, &ai);
    if (rc || !ai) {
        snprintf(err, errlen, "bad listen address %s: %s", addr ? addr : "*", gai_strerror(rc));
        return -1;
    }
    int fd = bind_one(ai, reuseport);
    freeaddrinfo(ai);
    if (fd < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", addr ? addr : "*", port, strerror(errno));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (port_out) *port_out = port;
    if (port_out && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) *port_out = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6) *port_out = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return fd;
}

/* ---- stopping ---------------------------------------------------------- */

void sk_hs_stop_accepting(sk_hs *s)
{
    s->draining = true;
    for (hs_listener *l = s->listeners; l; l = l->next) {
        if (l->l) evconnlistener_free(l->l); /* closes the socket */
        l->l = NULL;
        if (l->recheck) event_free(l->recheck);
        l->recheck = NULL;
    }
    for (hs_conn *c = s->conns, *n; c; c = n) {
        n = c->next;
        hs__conn_drain(c);
    }
}

void sk_hs_free(sk_hs *s)
{
    if (!s) return;
    sk_hs_stop_accepting(s);
    while (s->conns) hs__conn_free(s->conns);
    for (hs_listener *l = s->listeners, *n; l; l = n) {
        n = l->next;
        sk_hs_door_free(l->own_door);
        free(l);
    }
    hs__req_pool_free(s);
    free(s);
}
