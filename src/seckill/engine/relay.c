/* relay.c: the purchases of a process's loops decided by one engine
 * (relay.h). A message lives from sk_relay_purchase until its callback
 * has run on its door's loop: queued on the serving loop's intake, then
 * taken by the serving engine, then on the door's answer FIFO. Every
 * message not yet delivered is also on its door's outstanding list, so a
 * door that leaves can answer them all (what came back, as it came).
 * Invariant: every field a second thread reads or writes is changed
 * under r->mu; callbacks and the engine are called with it released. */
#define _GNU_SOURCE
#include "relay.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dlock/dlock.h"

typedef struct rmsg {
    struct rmsg *next;             /* intake or answer FIFO */
    struct rmsg *oprev, *onext;    /* the door's outstanding list */
    sk_relay_door *door;           /* NULL once the door left: freed, never delivered */
    sk_relay *relay;
    bool taken;                    /* given to the serving engine: it may be decided */
    sk_purchase_cb cb;
    void *arg;
    sk_purchase_result res;        /* once on the door's answer FIFO */
    int64_t qty;
    const char *campaign, *user, *idem, *ip; /* into text[] (idem, ip may be NULL) */
    char text[];
} rmsg;

/* A FIFO of messages with the eventfd that wakes its reader; `woken`: a
 * wake-up is written and not yet taken, so the next writer need not. */
typedef struct mqueue {
    rmsg *head, *tail;
    bool woken;
    int efd;
    struct event *ev;
} mqueue;

struct sk_relay_door {
    sk_relay *r;
    mqueue answers;
    rmsg *out;     /* outstanding, newest first */
    size_t n_out;  /* read by the door's own thread only: see pending */
};

struct sk_relay {
    pthread_mutex_t mu;
    bool serving;
    sk_engine *e;
    mqueue intake;
    size_t inflight; /* handed in, not yet answered by the engine */
};

/* ---- the queues ---------------------------------------------------- */

static int mq_open(mqueue *q, struct event_base *base, event_callback_fn fn, void *arg)
{
    memset(q, 0, sizeof(*q));
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0) return DLOCK_EIO;
    q->ev = event_new(base, q->efd, EV_READ | EV_PERSIST, fn, arg);
    if (!q->ev || event_add(q->ev, NULL) != 0) {
        if (q->ev) event_free(q->ev);
        close(q->efd);
        q->ev = NULL;
        q->efd = -1;
        return DLOCK_ENOMEM;
    }
    return 0;
}

/* Under the mutex (see mq_put); event_free needs no lock of ours. */
static void mq_close(mqueue *q, pthread_mutex_t *mu)
{
    if (q->ev) event_free(q->ev);
    q->ev = NULL;
    pthread_mutex_lock(mu);
    if (q->efd >= 0) close(q->efd);
    q->efd = -1;
    pthread_mutex_unlock(mu);
}

/* Appends m and wakes the reader unless a wake-up is pending; under the
 * mutex, so the eventfd cannot be closed (it is closed under it) between
 * the check and the write. */
static void mq_put(mqueue *q, rmsg *m)
{
    m->next = NULL;
    if (q->tail) q->tail->next = m;
    else q->head = m;
    q->tail = m;
    if (q->woken) return;
    q->woken = true;
    uint64_t one = 1;
    ssize_t w = write(q->efd, &one, sizeof(one));
    (void)w; /* a counter at its maximum is readable already */
}

/* The whole FIFO (under the mutex). */
static rmsg *mq_take(mqueue *q)
{
    rmsg *m = q->head;
    q->head = q->tail = NULL;
    q->woken = false;
    return m;
}

static void mq_drain_efd(int fd)
{
    uint64_t v;
    ssize_t n = read(fd, &v, sizeof(v));
    (void)n; /* EAGAIN: a wake-up another turn already took */
}

/* ---- the serving loop ------------------------------------------------ */

/* The engine's answer (serving loop): onto the door's FIFO, or freed when
 * the door left. */
static void on_engine_answer(const sk_purchase_result *res, void *arg)
{
    rmsg *m = arg;
    sk_relay *r = m->relay;
    pthread_mutex_lock(&r->mu);
    r->inflight--;
    sk_relay_door *d = m->door;
    if (d) {
        m->res = *res;
        mq_put(&d->answers, m);
    }
    pthread_mutex_unlock(&r->mu);
    if (!d) free(m);
}

/* Gives one taken message to the engine; an answer at once goes back the
 * same way as a later one. */
static void decide(sk_relay *r, rmsg *m)
{
    int rc = sk_engine_purchase(r->e, m->campaign, m->user, m->qty, m->idem, m->ip, on_engine_answer, m);
    if (rc) {
        sk_purchase_result res = {.err = rc};
        on_engine_answer(&res, m);
    }
}

/* Takes the intake: messages whose door left are dropped (they are
 * answered already and will not be sent); the rest are taken. */
static rmsg *take_intake(sk_relay *r)
{
    pthread_mutex_lock(&r->mu);
    rmsg *m = mq_take(&r->intake), *keep = NULL, **tail = &keep, *gone = NULL;
    while (m) {
        rmsg *next = m->next;
        m->next = NULL;
        if (m->door) {
            m->taken = true;
            *tail = m;
            tail = &m->next;
        } else {
            r->inflight--;
            m->next = gone;
            gone = m;
        }
        m = next;
    }
    pthread_mutex_unlock(&r->mu);
    while (gone) {
        rmsg *next = gone->next;
        free(gone);
        gone = next;
    }
    return keep;
}

static void on_intake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    sk_relay *r = arg;
    mq_drain_efd(fd);
    for (rmsg *m = take_intake(r); m;) {
        rmsg *next = m->next; /* m may be on a door's FIFO once decided */
        decide(r, m);
        m = next;
    }
}

int sk_relay_new(sk_relay **out)
{
    sk_relay *r = calloc(1, sizeof(*r));
    if (!r) return DLOCK_ENOMEM;
    pthread_mutex_init(&r->mu, NULL);
    r->intake.efd = -1;
    *out = r;
    return 0;
}

void sk_relay_free(sk_relay *r)
{
    if (!r) return;
    sk_relay_unserve(r);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

int sk_relay_serve(sk_relay *r, struct event_base *base, sk_engine *e)
{
    pthread_mutex_lock(&r->mu);
    bool taken = r->serving || r->intake.ev;
    pthread_mutex_unlock(&r->mu);
    if (taken) return SK_EINVAL;
    int rc = mq_open(&r->intake, base, on_intake, r);
    if (rc) return rc;
    pthread_mutex_lock(&r->mu);
    r->e = e;
    r->serving = true;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* Answers the messages not taken with SK_EUNAVAIL (under the mutex). */
static void refuse_queued(sk_relay *r)
{
    for (rmsg *m = mq_take(&r->intake); m;) {
        rmsg *next = m->next;
        r->inflight--;
        sk_relay_door *d = m->door;
        if (!d) {
            free(m);
        } else {
            m->res = (sk_purchase_result){.err = SK_EUNAVAIL};
            mq_put(&d->answers, m);
        }
        m = next;
    }
}

void sk_relay_unserve(sk_relay *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->serving = false;
    refuse_queued(r);
    pthread_mutex_unlock(&r->mu);
    mq_close(&r->intake, &r->mu);
}

size_t sk_relay_pending(sk_relay *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->inflight;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* ---- a door ---------------------------------------------------------- */

static void out_unlink(sk_relay_door *d, rmsg *m)
{
    if (m->oprev) m->oprev->onext = m->onext;
    else d->out = m->onext;
    if (m->onext) m->onext->oprev = m->oprev;
    m->oprev = m->onext = NULL;
    d->n_out--;
}

/* The answers that came back, off the outstanding list (under the mutex). */
static rmsg *take_answers(sk_relay_door *d)
{
    rmsg *m = mq_take(&d->answers);
    for (rmsg *k = m; k; k = k->next) out_unlink(d, k);
    return m;
}

/* Calls their callbacks in order and frees them (mutex released). */
static void answer_list(rmsg *m)
{
    while (m) {
        rmsg *next = m->next;
        m->cb(&m->res, m->arg);
        free(m);
        m = next;
    }
}

static void deliver(sk_relay_door *d)
{
    pthread_mutex_lock(&d->r->mu);
    rmsg *m = take_answers(d);
    pthread_mutex_unlock(&d->r->mu);
    answer_list(m);
}

static void on_answers(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    mq_drain_efd(fd);
    deliver(arg);
}

int sk_relay_door_new(sk_relay *r, struct event_base *base, sk_relay_door **out)
{
    sk_relay_door *d = calloc(1, sizeof(*d));
    if (!d) return DLOCK_ENOMEM;
    d->r = r;
    int rc = mq_open(&d->answers, base, on_answers, d);
    if (rc) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

size_t sk_relay_door_pending(const sk_relay_door *d) { return d ? d->n_out : 0; }

/* A message for a purchase of d (strings copied into its text). */
static rmsg *msg_new(sk_relay_door *d, const char *campaign, const char *user, const char *idem, const char *ip)
{
    const char *s[4] = {campaign ? campaign : "", user ? user : "", idem, ip};
    size_t len[4], total = 0;
    for (int i = 0; i < 4; i++) total += len[i] = s[i] ? strlen(s[i]) + 1 : 0;
    rmsg *m = malloc(sizeof(*m) + total);
    if (!m) return NULL;
    *m = (rmsg){.door = d, .relay = d->r};
    const char **dst[4] = {&m->campaign, &m->user, &m->idem, &m->ip};
    char *p = m->text;
    for (int i = 0; i < 4; i++) {
        if (!s[i]) continue;
        memcpy(p, s[i], len[i]);
        *dst[i] = p;
        p += len[i];
    }
    return m;
}

int sk_relay_purchase(sk_relay_door *d, const char *campaign, const char *user, int64_t qty,
                      const char *idem, const char *ip, sk_purchase_cb cb, void *arg)
{
    sk_relay *r = d->r;
    rmsg *m = msg_new(d, campaign, user, idem, ip);
    if (!m) return DLOCK_ENOMEM;
    m->cb = cb;
    m->arg = arg;
    m->qty = qty;
    pthread_mutex_lock(&r->mu);
    if (!r->serving) {
        pthread_mutex_unlock(&r->mu);
        free(m);
        return SK_EUNAVAIL;
    }
    r->inflight++;
    m->onext = d->out;
    if (d->out) d->out->oprev = m;
    d->out = m;
    d->n_out++;
    mq_put(&r->intake, m);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

typedef struct later {
    sk_purchase_cb cb;
    void *arg;
    int err;
} later;

/* Detaches the messages still out (under the mutex): their serving side
 * frees them; their answers, oldest first, go into l (n_out of them). */
static size_t detach_out(sk_relay_door *d, later *l)
{
    size_t k = d->n_out;
    for (rmsg *m = d->out; m; m = m->onext) { /* newest first */
        l[--k] = (later){m->cb, m->arg, m->taken ? DLOCK_EUNKNOWN : SK_EUNAVAIL};
        m->door = NULL;
    }
    size_t n = d->n_out;
    d->out = NULL;
    d->n_out = 0;
    return n;
}

static void answer_all(const later *l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sk_purchase_result res = {.err = l[i].err};
        l[i].cb(&res, l[i].arg);
    }
}

void sk_relay_door_free(sk_relay_door *d)
{
    if (!d) return;
    /* n_out changes on this thread only: the size holds until the lock */
    later one[64], *l = d->n_out <= 64 ? one : malloc(d->n_out * sizeof(*l));
    pthread_mutex_lock(&d->r->mu);
    rmsg *back = take_answers(d); /* what came back is answered as it came */
    size_t n = 0;
    if (l) {
        n = detach_out(d, l);
    } else { /* out of memory: answer under the mutex (a callback never calls the relay) */
        later tmp[1];
        while (d->out) {
            rmsg *m = d->out;
            tmp[0] = (later){m->cb, m->arg, m->taken ? DLOCK_EUNKNOWN : SK_EUNAVAIL};
            out_unlink(d, m);
            m->door = NULL;
            answer_all(tmp, 1);
        }
    }
    pthread_mutex_unlock(&d->r->mu);
    answer_list(back);
    answer_all(l, n);
    if (l != one) free(l);
    mq_close(&d->answers, &d->r->mu);
    free(d);
}
