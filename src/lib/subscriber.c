/* subscriber.c: the client's one pub/sub connection, its dispatcher thread
 * and the waiters that sleep on channels (dlock__wait_*).
 *
 * Design note. Only the dispatcher thread touches the subscriber
 * connection. Waiters register a channel under sub_mu and wake the
 * dispatcher through a pipe; it sends SUBSCRIBE and marks the channel
 * confirmed when the server's "subscribe" reply arrives (wait_begin waits
 * for that, bounded, so a publish after it is never missed). A channel
 * nobody waits on stays subscribed for LINGER_MS, so hot locks do not
 * SUBSCRIBE/UNSUBSCRIBE on every contended acquire. A message wakes every
 * broadcast waiter and the oldest idle wake-one waiter. When the connection
 * breaks (CLIENT KILL, restart, failover) the dispatcher reconnects with
 * backoff, resubscribes, and wakes every waiter, since messages may have
 * been lost meanwhile; callers re-check and cap sleeps by TTLs anyway.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_priv.h"
#include "util.h"

#define LINGER_MS 5000
#define CONFIRM_WAIT_MAX_MS 1000

struct dlock__chan {
    char *name;
    int refs;
    bool sent;      /* SUBSCRIBE sent on the current connection */
    bool confirmed; /* the server confirmed it */
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
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* ---- waiter side (any thread) ---------------------------------------- */

static dlock__chan *chan_find(dlock_client *c, const char *name)
{
    for (dlock__chan *ch = c->chans; ch; ch = ch->next)
        if (strcmp(ch->name, name) == 0) return ch;
    return NULL;
}

static int begin(dlock_client *c, const char *channel, bool one, dlock__waiter **out)
{
    *out = NULL;
    if (!channel || !*channel) return DLOCK_EINVAL;
    dlock__waiter *w = calloc(1, sizeof(*w));
    if (!w) return DLOCK_ENOMEM;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    w->c = c;
    w->one = one;
    pthread_mutex_lock(&c->sub_mu);
    dlock__chan *ch = chan_find(c, channel);
    if (!ch) {
        ch = calloc(1, sizeof(*ch));
        if (ch) ch->name = strdup(channel);
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

int dlock__wait_begin(dlock_client *c, const char *channel, dlock__waiter **out)
{
    return begin(c, channel, false, out);
}

int dlock__wait_begin_one(dlock_client *c, const char *channel, dlock__waiter **out)
{
    return begin(c, channel, true, out);
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
    if (ch && ch->skip > 0) {
        ch->skip--; /* broadcast waiters still see every message */
        for (dlock__waiter *w = ch->head; w; w = w->next) {
            if (!w->one) {
                w->pending++;
                pthread_cond_signal(&w->cv);
            }
        }
    } else if (ch) {
        for (dlock__waiter *w = ch->head; w; w = w->next) {
            if (!w->one) {
                w->pending++;
                pthread_cond_signal(&w->cv);
            }
        }
        hand_one(ch);
    }
    pthread_mutex_unlock(&c->sub_mu);
}

static void confirm(dlock_client *c, const char *channel)
{
    pthread_mutex_lock(&c->sub_mu);
    dlock__chan *ch = chan_find(c, channel);
    if (ch && ch->sent) ch->confirmed = true;
    pthread_cond_broadcast(&c->sub_cv);
    pthread_mutex_unlock(&c->sub_mu);
}

static void wake_everyone(dlock_client *c)
{
    pthread_mutex_lock(&c->sub_mu);
    for (dlock__chan *ch = c->chans; ch; ch = ch->next) {
        ch->sent = ch->confirmed = false;
        ch->skip = 0;
        for (dlock__waiter *w = ch->head; w; w = w->next) {
            w->pending++;
            pthread_cond_signal(&w->cv);
        }
    }
    pthread_mutex_unlock(&c->sub_mu);
}

static void handle_push(dlock_client *c, const dlock__reply *r)
{
    if (dlock__reply_count(r) < 3) return;
    const char *kind = dlock__reply_str(dlock__reply_at(r, 0), NULL);
    const char *chan = dlock__reply_str(dlock__reply_at(r, 1), NULL);
    if (strcmp(kind, "message") == 0) deliver(c, chan);
    else if (strcmp(kind, "subscribe") == 0) confirm(c, chan);
}

/* Sends SUBSCRIBE for new channels and UNSUBSCRIBE for long-idle ones. */
static void sync_subscriptions(dlock_client *c)
{
    int64_t now = dlock__now_ms();
    pthread_mutex_lock(&c->sub_mu);
    for (dlock__chan **pp = &c->chans; *pp;) {
        dlock__chan *ch = *pp;
        int rc = 0;
        if (ch->refs == 0 && now - ch->idle_since_ms >= LINGER_MS && (ch->confirmed || !c->sub_conn)) {
            const char *argv[2] = {"UNSUBSCRIBE", ch->name};
            if (ch->confirmed) rc = dlock__err_from_common(dlock__conn_send(c->sub_conn, 2, argv, NULL));
            *pp = ch->next;
            free(ch->name);
            free(ch);
        } else {
            if (!ch->sent && c->sub_conn) {
                const char *argv[2] = {"SUBSCRIBE", ch->name};
                rc = dlock__err_from_common(dlock__conn_send(c->sub_conn, 2, argv, NULL));
                ch->sent = rc == 0;
            }
            pp = &ch->next;
        }
        if (rc) break; /* connection broke: the read side notices */
    }
    pthread_mutex_unlock(&c->sub_mu);
}

static bool sub_connect(dlock_client *c)
{
    dlock__url m;
    if (dlock__pool_master(&c->pool, &m, NULL) != 0) return false;
    char err[256] = "";
    dlock__conn *conn = NULL;
    int rc = dlock__err_from_common(dlock__conn_open(&m, &c->pool.copts, &conn, err, sizeof(err)));
    dlock__url_free(&m);
    if (rc) {
        dlock__log(c, DLOCK_LOG_WARN, "subscriber: connect: %s", err);
        if (rc == DLOCK_ECONN) dlock__pool_reresolve(&c->pool);
        return false;
    }
    c->sub_conn = conn;
    return true;
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

/* Reads everything available; false when the connection broke. */
static bool read_pushes(dlock_client *c)
{
    for (;;) {
        dlock__reply *r = NULL;
        int rc = dlock__err_from_common(dlock__conn_read_push(c->sub_conn, 0, &r));
        if (rc == DLOCK_ETIMEOUT) return true;
        if (rc) return false;
        handle_push(c, r);
        dlock__reply_free(r);
    }
}

static void *dispatcher(void *arg)
{
    dlock_client *c = arg;
    int failures = 0;
    bool ever_up = false;
    while (!stopping(c)) {
        if (!c->sub_conn) {
            if (!sub_connect(c)) {
                int64_t d = dlock__backoff_ms(c->opts.retry_delay_ms > 0 ? c->opts.retry_delay_ms : 50,
                                              failures++, 1000);
                struct pollfd p = {.fd = c->wake_pipe[0], .events = POLLIN};
                poll(&p, 1, (int)d);
                drain_pipe(c);
                continue;
            }
            if (ever_up) dlock__log(c, DLOCK_LOG_INFO, "subscriber: reconnected");
            ever_up = true;
            failures = 0;
            wake_everyone(c); /* messages may have been missed */
        }
        sync_subscriptions(c);
        struct pollfd p[2] = {{.fd = c->wake_pipe[0], .events = POLLIN},
                              {.fd = dlock__conn_fd(c->sub_conn), .events = POLLIN}};
        if (p[1].fd < 0 || poll(p, 2, 1000) < 0) p[1].revents = POLLIN; /* let the read report it */
        if (p[0].revents) drain_pipe(c);
        if (p[1].revents && !read_pushes(c)) {
            dlock__log(c, DLOCK_LOG_WARN, "subscriber: connection lost: %s",
                       dlock__conn_errstr(c->sub_conn));
            dlock__conn_close(c->sub_conn);
            c->sub_conn = NULL;
            wake_everyone(c);
        }
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
    dlock__conn_close(c->sub_conn);
    c->sub_conn = NULL;
    while (c->chans) {
        dlock__chan *ch = c->chans;
        c->chans = ch->next;
        free(ch->name);
        free(ch); /* waiters left are the caller's bug; they get ECLOSED */
    }
    for (int i = 0; i < 2; i++) {
        if (c->wake_pipe[i] >= 0) close(c->wake_pipe[i]);
        c->wake_pipe[i] = -1;
    }
}
