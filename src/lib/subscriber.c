/* subscriber.c: the client's pub/sub connections (one per master it
 * needs), its dispatcher thread and the waiters that sleep on channels
 * (dlock__wait_*).
 *
 * Design note. Only the dispatcher thread touches the subscriber
 * connections (sub_node). Waiters register a channel under sub_mu and wake
 * the dispatcher through a pipe; it finds the channel's node
 * (dlock__pool_node_for: the master on standalone/Sentinel, the master of
 * the channel's slot on a routing Cluster client), connects to it if
 * needed, sends SUBSCRIBE (SSUBSCRIBE for a sharded channel) and marks the
 * channel confirmed when the server's reply arrives (wait_begin waits for
 * that, bounded, so a publish after it is never missed). A channel nobody
 * waits on stays subscribed for LINGER_MS, so hot locks do not
 * SUBSCRIBE/UNSUBSCRIBE on every contended acquire. A message wakes every
 * broadcast waiter and the oldest idle wake-one waiter. A channel loses its
 * node when the node's connection breaks (CLIENT KILL, restart, failover),
 * when the server drops a sharded subscription (Redis sends `sunsubscribe`
 * when the slot moves away) or refuses it (MOVED: the redirect is used);
 * its waiters are woken (messages may have been lost: callers re-check and
 * cap sleeps by TTLs anyway), it is placed again with backoff, and its
 * waiters are woken once more when the new subscription is confirmed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_priv.h"
#include "slot.h"
#include "util.h"

#define LINGER_MS 5000
#define CONFIRM_WAIT_MAX_MS 1000

typedef struct dlock__sub_node {
    dlock__url url;  /* the master (its host:port, the client's credentials) */
    dlock__conn *conn;
    bool broken;     /* a send failed: closed on the next round */
    struct dlock__sub_node *next;
} sub_node;

struct dlock__chan {
    char *name;
    bool sharded;   /* SSUBSCRIBE / smessage (dlock__client_sharded) */
    int refs;
    sub_node *node; /* where it is (to be) subscribed; NULL: to be placed */
    char *moved_to; /* "host:port" of a MOVED answer, used by the next placing */
    bool stale;     /* taken off its node: the slot map may be stale too */
    bool sent;      /* SUBSCRIBE sent on node's connection */
    bool confirmed; /* the server confirmed it */
    bool ever;      /* confirmed once: a later confirmation wakes the waiters */
    unsigned skip;  /* messages already delivered locally (dlock__wait_notify_local) */
    int64_t idle_since_ms;
    dlock__waiter *head, *tail;
    dlock__chan *next;
};

struct dlock__waiter {
    dlock_client *c;
    dlock__chan *ch;
    bool one;
    bool canceled;
    unsigned pending;
    pthread_cond_t cv;
    dlock__waiter *prev, *next;
};

static void wake_dispatcher(dlock_client *c)
{
    char b = 1;
    ssize_t n = write(c->wake_pipe[1], &b, 1);
    (void)n; /* pipe full means a wake is pending anyway */
}

static struct timespec deadline_ts(int64_t ms)
{
    struct timespec ts;
    dlock__abstime_ms(ms, &ts);
    return ts;
}

/* ---- waiter side (any thread) ---------------------------------------- */

static dlock__chan *chan_find(dlock_client *c, const char *name)
{
    for (dlock__chan *ch = c->chans; ch; ch = ch->next)
        if (strcmp(ch->name, name) == 0) return ch;
    return NULL;
}

static int begin(dlock_client *c, const char *channel, bool sharded, bool one, dlock__waiter **out)
{
    *out = NULL;
    if (!channel || !*channel) return DLOCK_EINVAL;
    dlock__waiter *w = calloc(1, sizeof(*w));
    if (!w) return DLOCK_ENOMEM;
    if (dlock__cond_init(&w->cv) != 0) {
        free(w);
        return DLOCK_ENOMEM;
    }
    w->c = c;
    w->one = one;
    pthread_mutex_lock(&c->sub_mu);
    dlock__chan *ch = chan_find(c, channel);
    if (!ch) {
        ch = calloc(1, sizeof(*ch));
        if (ch) ch->name = strdup(channel);
        if (ch) ch->sharded = sharded;
        if (!ch || !ch->name) {
            pthread_mutex_unlock(&c->sub_mu);
            if (ch) free(ch);
            pthread_cond_destroy(&w->cv);
            free(w);
            return DLOCK_ENOMEM;
        }
        ch->next = c->chans;
        c->chans = ch;
        wake_dispatcher(c);
    }
    ch->refs++;
    w->ch = ch;
    w->prev = ch->tail;
    if (ch->tail) ch->tail->next = w;
    else ch->head = w;
    ch->tail = w;
    /* Bounded: with the subscriber down we still return; the caller's
     * sleeps are capped by TTLs and recheck intervals. */
    int64_t wait_ms = c->opts.command_timeout_ms < CONFIRM_WAIT_MAX_MS ? c->opts.command_timeout_ms
                                                                       : CONFIRM_WAIT_MAX_MS;
    struct timespec ts = deadline_ts(wait_ms);
    while (!ch->confirmed && !c->sub_stop) {
        if (pthread_cond_timedwait(&c->sub_cv, &c->sub_mu, &ts) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&c->sub_mu);
    *out = w;
    return 0;
}

int dlock__wait_begin(dlock_client *c, const char *channel, bool sharded, dlock__waiter **out)
{
    return begin(c, channel, sharded, false, out);
}

int dlock__wait_begin_one(dlock_client *c, const char *channel, bool sharded, dlock__waiter **out)
{
    return begin(c, channel, sharded, true, out);
}

int dlock__wait(dlock__waiter *w, int64_t timeout_ms)
{
    dlock_client *c = w->c;
    pthread_mutex_lock(&c->sub_mu);
    struct timespec ts = deadline_ts(timeout_ms < 0 ? 0 : timeout_ms);
    while (!w->pending && !w->canceled && !c->sub_stop) {
        if (pthread_cond_timedwait(&w->cv, &c->sub_mu, &ts) == ETIMEDOUT) break;
    }
    int rc = w->canceled ? DLOCK_ECANCELED
             : w->pending ? 0
             : c->sub_stop ? DLOCK_ECLOSED
                           : DLOCK_ETIMEOUT;
    if (rc == 0) w->pending = 0;
    pthread_mutex_unlock(&c->sub_mu);
    return rc;
}

void dlock__wait_cancel(dlock__waiter *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->c->sub_mu);
    w->canceled = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->c->sub_mu);
}

/* Gives one wake to the oldest wake-one waiter that has none. sub_mu held. */
static void hand_one(dlock__chan *ch)
{
    for (dlock__waiter *w = ch->head; w; w = w->next) {
        if (w->one && !w->pending) {
            w->pending = 1;
            pthread_cond_signal(&w->cv);
            return;
        }
    }
}

void dlock__wait_end(dlock__waiter *w)
{
    if (!w) return;
    dlock_client *c = w->c;
    pthread_mutex_lock(&c->sub_mu);
    dlock__chan *ch = w->ch;
    if (w->prev) w->prev->next = w->next;
    else ch->head = w->next;
    if (w->next) w->next->prev = w->prev;
    else ch->tail = w->prev;
    if (w->one && w->pending) hand_one(ch); /* an unconsumed wake moves on */
    if (--ch->refs == 0) ch->idle_since_ms = dlock__now_ms();
    pthread_mutex_unlock(&c->sub_mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

/* ---- dispatcher thread ------------------------------------------------- */

/* Every waiter of ch re-checks (sub_mu held). */
static void wake_chan(dlock__chan *ch)
{
    for (dlock__waiter *w = ch->head; w; w = w->next) {
        w->pending++;
        pthread_cond_signal(&w->cv);
    }
}

void dlock__wait_notify_local(dlock_client *c, const char *channel)
{
    pthread_mutex_lock(&c->sub_mu);
    dlock__chan *ch = chan_find(c, channel);
    bool idle_one = false;
    for (dlock__waiter *w = ch ? ch->head : NULL; w && !idle_one; w = w->next) idle_one = w->one && !w->pending;
    if (ch && ch->confirmed && idle_one) {
        hand_one(ch);
        ch->skip++; /* our own publish will arrive later: it was used here */
    }
    pthread_mutex_unlock(&c->sub_mu);
}

static void deliver(dlock_client *c, const char *channel)
{
    pthread_mutex_lock(&c->sub_mu);
    dlock__chan *ch = chan_find(c, channel);
    if (ch) {
        for (dlock__waiter *w = ch->head; w; w = w->next) {
            if (!w->one) { /* broadcast waiters see every message */
                w->pending++;
                pthread_cond_signal(&w->cv);
            }
        }
        if (ch->skip > 0) ch->skip--; /* handed out already by dlock__wait_notify_local */
        else hand_one(ch);
    }
    pthread_mutex_unlock(&c->sub_mu);
}

/* The server confirmed channel on n. A confirmation after an earlier one
 * (a resubscription) wakes the waiters: what they missed meanwhile is
 * visible to a re-check from now on. */
static void confirm(dlock_client *c, const sub_node *n, const char *channel)
{
    pthread_mutex_lock(&c->sub_mu);
    dlock__chan *ch = chan_find(c, channel);
    if (ch && ch->sent && ch->node == n && !ch->confirmed) {
        ch->confirmed = true;
        if (ch->ever) wake_chan(ch);
        ch->ever = true;
    }
    pthread_cond_broadcast(&c->sub_cv);
    pthread_mutex_unlock(&c->sub_mu);
}

/* Takes ch off its node (sub_mu held): the next round places it again; its
 * waiters re-check, since messages may have been lost. */
static void detach(dlock__chan *ch)
{
    ch->node = NULL;
    ch->stale = true;
    ch->sent = ch->confirmed = false;
    ch->skip = 0;
    wake_chan(ch);
}

/* The server dropped a sharded subscription on n (its slot moved away). */
static void dropped(dlock_client *c, const sub_node *n, const char *channel)
{
    pthread_mutex_lock(&c->sub_mu);
    dlock__chan *ch = chan_find(c, channel);
    if (ch && ch->node == n && ch->sent) {
        dlock__log(c, DLOCK_LOG_INFO, "subscriber: %s dropped by the server (slot moved): resubscribing",
                   channel);
        detach(ch);
    }
    pthread_mutex_unlock(&c->sub_mu);
}

/* An error answer to a (S)SUBSCRIBE sent on n. "MOVED <slot> <host:port>"
 * redirects the channels of that slot not confirmed on n yet; any other
 * error takes all of those off n (placed again after a backoff). Returns
 * false for the latter. */
static bool refused(dlock_client *c, const sub_node *n, const dlock__reply *r)
{
    const char *msg = dlock__reply_str(r, NULL);
    unsigned slot = 0;
    char to[300] = "";
    bool moved = sscanf(msg, "MOVED %u %299s", &slot, to) == 2;
    if (!moved) dlock__log(c, DLOCK_LOG_WARN, "subscriber: subscription refused: %s", msg);
    pthread_mutex_lock(&c->sub_mu);
    for (dlock__chan *ch = c->chans; ch; ch = ch->next) {
        if (ch->node != n || !ch->sent || ch->confirmed) continue;
        if (moved && dlock__key_slot(ch->name, strlen(ch->name)) != slot) continue;
        detach(ch);
        if (moved) {
            free(ch->moved_to);
            ch->moved_to = strdup(to);
        }
    }
    pthread_mutex_unlock(&c->sub_mu);
    return moved;
}

/* One pushed reply from n; false when it asks for a backoff. */
static bool handle_push(dlock_client *c, const sub_node *n, const dlock__reply *r)
{
    if (dlock__reply_kind(r) == DLOCK__R_ERROR) return refused(c, n, r);
    if (dlock__reply_count(r) < 3) return true;
    const char *kind = dlock__reply_str(dlock__reply_at(r, 0), NULL);
    const char *chan = dlock__reply_str(dlock__reply_at(r, 1), NULL);
    if (strcmp(kind, "message") == 0 || strcmp(kind, "smessage") == 0) deliver(c, chan);
    else if (strcmp(kind, "subscribe") == 0 || strcmp(kind, "ssubscribe") == 0) confirm(c, n, chan);
    else if (strcmp(kind, "sunsubscribe") == 0) dropped(c, n, chan);
    return true;
}

/* Sends one (S)SUBSCRIBE or (S)UNSUBSCRIBE for ch on its node. */
static int send_sub(dlock__chan *ch, bool subscribe)
{
    if (!ch->node || ch->node->broken) return DLOCK_ECONN;
    const char *cmd = subscribe ? (ch->sharded ? "SSUBSCRIBE" : "SUBSCRIBE")
                                : (ch->sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE");
    const char *argv[2] = {cmd, ch->name};
    int rc = dlock__err_from_common(dlock__conn_send(ch->node->conn, 2, argv, NULL));
    if (rc) ch->node->broken = true; /* the read side or the next round closes it */
    return rc;
}

static void chan_free(dlock__chan *ch)
{
    free(ch->moved_to);
    free(ch->name);
    free(ch);
}

/* Sends SUBSCRIBE for placed channels not sent yet and UNSUBSCRIBE for
 * long-idle ones (which are then forgotten). */
static void sync_subscriptions(dlock_client *c)
{
    int64_t now = dlock__now_ms();
    pthread_mutex_lock(&c->sub_mu);
    for (dlock__chan **pp = &c->chans; *pp;) {
        dlock__chan *ch = *pp;
        bool idle = ch->refs == 0 && now - ch->idle_since_ms >= LINGER_MS;
        if (idle && (ch->confirmed || !ch->sent)) {
            if (ch->confirmed) send_sub(ch, false);
            *pp = ch->next;
            chan_free(ch);
            continue;
        }
        if (!ch->sent && ch->node) ch->sent = send_sub(ch, true) == 0;
        pp = &ch->next;
    }
    pthread_mutex_unlock(&c->sub_mu);
}

/* ---- nodes (dispatcher thread) ------------------------------------------ */

static bool same_endpoint(const dlock__url *a, const dlock__url *b)
{
    if (a->kind != b->kind || a->port != b->port) return false;
    const char *x = a->host ? a->host : a->path, *y = b->host ? b->host : b->path;
    return x && y && strcmp(x, y) == 0;
}

/* Where ch goes: its MOVED redirect ("host:port", with the credentials of
 * dlock__pool_node_for's answer), else dlock__pool_node_for. */
static int resolve(dlock_client *c, const char *name, const char *moved_to, bool stale, dlock__url *out)
{
    int rc = dlock__pool_node_for(&c->pool, name, stale && !moved_to, out);
    const char *colon = moved_to ? strrchr(moved_to, ':') : NULL;
    if (rc || !colon || out->kind != DLOCK__URL_TCP) return rc;
    char *host = strndup(moved_to, (size_t)(colon - moved_to));
    long port = strtol(colon + 1, NULL, 10);
    if (!host || port <= 0 || port > 65535) {
        free(host);
        return 0; /* unusable redirect: the slot map's answer stands */
    }
    free(out->host);
    out->host = host;
    out->port = (int)port;
    return 0;
}

/* The node for endpoint u (taken over), connected if new; NULL when the
 * connection failed (logged). */
static sub_node *node_get(dlock_client *c, dlock__url *u)
{
    for (sub_node *n = c->sub_nodes; n; n = n->next) {
        if (same_endpoint(&n->url, u)) {
            dlock__url_free(u);
            return n;
        }
    }
    char err[256] = "";
    dlock__conn *conn = NULL;
    int rc = dlock__err_from_common(dlock__conn_open(u, &c->pool.copts, &conn, err, sizeof(err)));
    sub_node *n = rc == 0 ? calloc(1, sizeof(*n)) : NULL;
    if (!n) {
        char where[128];
        dlock__url_describe(u, where, sizeof(where));
        dlock__log(c, DLOCK_LOG_WARN, "subscriber: connect to %s: %s", where, rc ? err : "out of memory");
        if (rc == DLOCK_ECONN) dlock__pool_reresolve(&c->pool);
        dlock__conn_close(conn);
        dlock__url_free(u);
        return NULL;
    }
    n->url = *u;
    n->conn = conn;
    n->next = c->sub_nodes;
    c->sub_nodes = n;
    return n;
}

/* Finds a node for every channel someone waits on that has none; false
 * when one could not be placed (the caller backs off). Channels are freed
 * by this thread only, so ch stays valid while sub_mu is released. */
static bool place_channels(dlock_client *c)
{
    pthread_mutex_lock(&c->sub_mu);
    for (dlock__chan *ch = c->chans; ch; ch = ch->next) {
        if (ch->node || ch->refs == 0) continue;
        char *name = strdup(ch->name), *moved = ch->moved_to;
        bool stale = ch->stale;
        ch->moved_to = NULL;
        pthread_mutex_unlock(&c->sub_mu);
        dlock__url u;
        int rc = name ? resolve(c, name, moved, stale, &u) : DLOCK_ENOMEM;
        sub_node *n = rc == 0 ? node_get(c, &u) : NULL;
        free(name);
        free(moved);
        pthread_mutex_lock(&c->sub_mu);
        if (!n) {
            pthread_mutex_unlock(&c->sub_mu);
            return false;
        }
        ch->node = n;
        ch->stale = false;
    }
    pthread_mutex_unlock(&c->sub_mu);
    return true;
}

/* n's connection broke: its channels are placed again, n is freed. */
static void node_fail(dlock_client *c, sub_node *n)
{
    char where[128];
    dlock__url_describe(&n->url, where, sizeof(where));
    dlock__log(c, DLOCK_LOG_WARN, "subscriber: connection to %s lost: %s", where, dlock__conn_errstr(n->conn));
    pthread_mutex_lock(&c->sub_mu);
    for (dlock__chan *ch = c->chans; ch; ch = ch->next)
        if (ch->node == n) detach(ch);
    pthread_mutex_unlock(&c->sub_mu);
    for (sub_node **pp = &c->sub_nodes; *pp; pp = &(*pp)->next) {
        if (*pp == n) {
            *pp = n->next;
            break;
        }
    }
    dlock__conn_close(n->conn);
    dlock__url_free(&n->url);
    free(n);
    dlock__pool_reresolve(&c->pool);
}

static void drain_pipe(dlock_client *c)
{
    char buf[64];
    while (read(c->wake_pipe[0], buf, sizeof(buf)) > 0) {
    }
}

static bool stopping(dlock_client *c)
{
    pthread_mutex_lock(&c->sub_mu);
    bool s = c->sub_stop;
    pthread_mutex_unlock(&c->sub_mu);
    return s;
}

/* Reads everything available on n; false when the connection broke.
 * *backoff_out is set when the server refused a subscription. */
static bool read_pushes(dlock_client *c, sub_node *n, bool *backoff_out)
{
    for (;;) {
        dlock__reply *r = NULL;
        int rc = dlock__err_from_common(dlock__conn_read_push(n->conn, 0, &r));
        if (rc == DLOCK_ETIMEOUT) return true;
        if (rc) return false;
        if (!handle_push(c, n, r)) *backoff_out = true;
        dlock__reply_free(r);
    }
}

#define MAX_POLL 64 /* masters watched at once; a bigger cluster's extra nodes wait a round */

/* One round: waits for the pipe or the nodes (at most wait_ms) and reads
 * what came; false when a subscription was refused (back off). */
static bool poll_nodes(dlock_client *c, int64_t wait_ms)
{
    struct pollfd p[MAX_POLL + 1] = {{.fd = c->wake_pipe[0], .events = POLLIN}};
    sub_node *of[MAX_POLL + 1] = {NULL};
    int np = 1;
    for (sub_node *n = c->sub_nodes; n && np <= MAX_POLL; n = n->next) {
        p[np] = (struct pollfd){.fd = dlock__conn_fd(n->conn), .events = POLLIN};
        if (n->broken || p[np].fd < 0) p[np].fd = -1; /* read below reports it */
        of[np++] = n;
    }
    bool now = false;
    for (int i = 1; i < np; i++) now = now || p[i].fd < 0;
    if (poll(p, (nfds_t)np, now ? 0 : (int)wait_ms) < 0) return true;
    if (p[0].revents) drain_pipe(c);
    bool backoff = false;
    for (int i = 1; i < np; i++) {
        if (!p[i].revents && p[i].fd >= 0) continue;
        if (of[i]->broken || !read_pushes(c, of[i], &backoff)) node_fail(c, of[i]);
    }
    return !backoff;
}

/* On a routing client, closes the node connections no channel uses any
 * more (masters whose slots moved away); a standalone client keeps its one. */
static void drop_unused_nodes(dlock_client *c)
{
    if (!c->pool.routing) return;
    for (sub_node **pp = &c->sub_nodes; *pp;) {
        sub_node *n = *pp;
        bool used = false;
        pthread_mutex_lock(&c->sub_mu);
        for (dlock__chan *ch = c->chans; ch && !used; ch = ch->next) used = ch->node == n;
        pthread_mutex_unlock(&c->sub_mu);
        if (used) {
            pp = &n->next;
            continue;
        }
        *pp = n->next;
        dlock__conn_close(n->conn);
        dlock__url_free(&n->url);
        free(n);
    }
}

static void *dispatcher(void *arg)
{
    dlock_client *c = arg;
    int failures = 0;
    int64_t retry_at = 0;
    int64_t base = c->opts.retry_delay_ms > 0 ? c->opts.retry_delay_ms : 50;
    while (!stopping(c)) {
        int64_t now = dlock__now_ms();
        if (now >= retry_at) {
            if (place_channels(c)) failures = 0;
            else retry_at = now + dlock__backoff_ms(base, failures++, 1000);
        }
        sync_subscriptions(c);
        drop_unused_nodes(c);
        int64_t wait = retry_at > now && retry_at - now < 1000 ? retry_at - now : 1000;
        if (!poll_nodes(c, wait)) retry_at = dlock__now_ms() + dlock__backoff_ms(base, failures++, 1000);
    }
    return NULL;
}


int dlock__subscriber_start(dlock_client *c)
{
    if (pipe(c->wake_pipe) != 0) return DLOCK_EIO;
    for (int i = 0; i < 2; i++) {
        fcntl(c->wake_pipe[i], F_SETFL, fcntl(c->wake_pipe[i], F_GETFL) | O_NONBLOCK);
        fcntl(c->wake_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    if (pthread_create(&c->sub_thread, NULL, dispatcher, c) != 0) return DLOCK_ENOMEM;
    c->sub_started = true;
    return 0;
}

void dlock__subscriber_stop(dlock_client *c)
{
    pthread_mutex_lock(&c->sub_mu);
    c->sub_stop = true;
    for (dlock__chan *ch = c->chans; ch; ch = ch->next)
        for (dlock__waiter *w = ch->head; w; w = w->next) pthread_cond_signal(&w->cv);
    pthread_cond_broadcast(&c->sub_cv);
    pthread_mutex_unlock(&c->sub_mu);
    if (c->sub_started) {
        wake_dispatcher(c);
        pthread_join(c->sub_thread, NULL);
        c->sub_started = false;
    }
    while (c->sub_nodes) {
        sub_node *n = c->sub_nodes;
        c->sub_nodes = n->next;
        dlock__conn_close(n->conn);
        dlock__url_free(&n->url);
        free(n);
    }
    while (c->chans) {
        dlock__chan *ch = c->chans;
        c->chans = ch->next;
        chan_free(ch); /* waiters left are the caller's bug; they get ECLOSED */
    }
    for (int i = 0; i < 2; i++) {
        if (c->wake_pipe[i] >= 0) close(c->wake_pipe[i]);
        c->wake_pipe[i] = -1;
    }
}
