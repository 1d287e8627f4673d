/* degraded.c: the database path of seckilld while Redis is down, and the
 * mode switch with hysteresis (design in degraded.h, docs/seckill.md).
 * Invariant: the Redis path resumes only after a check, queued behind
 * every database-path purchase of this instance and with new purchases
 * held, found no path=db order still unmirrored in the database; so Redis's
 * stock already counts every unit the database path sold.
 *
 * A refusal for stock is sold_out only when the campaign has nothing left
 * at all; while units remain outside the reserve (Redis's share, which
 * this path never sells) it is SK_ERESERVE: 503, retry once Redis is back.
 *
 * Threads: the loop owns the mode, the hold list and the sold-out and
 * reserve-empty flags;
 * the worker thread owns the sk_db handle. They share two job lists under
 * one mutex; the worker wakes the loop through a non-blocking pipe. */
#define _GNU_SOURCE
#include "degraded.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "db.h"
#include "dlock/dlock.h"
#include "rulebook.h"
#include "sk_log.h"
#include "soldout.h"
#include "util.h"

enum { M_REDIS = 0, M_DEGRADED = 1, M_SWITCHING = 2 };
enum { JOB_BUY = 0, JOB_CHECK = 1 };
#define TICK_MS 50
#define CHECK_EVERY_MS 250
#define EEXIST_RETRIES 8

typedef struct job {
    struct job *next;
    int kind;
    int tries;
    uint64_t order_id;
    char campaign[65], user[65], ip[64];
    int64_t qty;
    sk_purchase_cb cb;
    void *arg;
    /* written by the worker */
    int err;
    int64_t remaining, value, found;
    bool empty; /* SK_ESOLDOUT or SK_ERESERVE, and the reserve read back as 0 */
} job;

typedef struct jlist {
    job *head, *tail;
} jlist;

struct sk_degraded {
    struct event_base *base;
    sk_engine *engine;
    sk_degraded_opts o;
    /* shared with the worker, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    jlist todo, done;
    bool stop;
    /* worker only (after start) */
    sk_db *db;
    pthread_t th;
    bool th_started;
    int wake[2];
    struct event *wake_ev, *tick_ev;
    /* loop only */
    int mode;
    int64_t down_since_ms, up_since_ms, last_check_ms;
    bool check_inflight;
    size_t queued;
    jlist held;
    size_t nheld;
    sk_soldout sold;
    sk_soldout drained; /* campaigns whose reserve read back as 0 while stock remained */
    sk_degraded_stats st;
};

void sk_degraded_opts_init(sk_degraded_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->after_ms = 1000;
    o->recover_ms = 2000;
    o->max_inflight = 64;
}

#define dlog(d, level, ...) sk_logf((d)->o.log, (d)->o.log_ud, level, __VA_ARGS__)

static void jpush(jlist *l, job *j)
{
    j->next = NULL;
    if (l->tail) l->tail->next = j;
    else l->head = j;
    l->tail = j;
}

static job *jtake_all(jlist *l)
{
    job *h = l->head;
    l->head = l->tail = NULL;
    return h;
}

/* ---- worker thread ------------------------------------------------------- */

static void count_row(const sk_order_row *row, void *ud)
{
    (void)row;
    (void)ud;
}

static void run_buy(sk_degraded *d, job *j)
{
    int64_t now = dlock__wall_ms();
    int rc = sk_db_purchase_direct(d->db, j->order_id, j->campaign, j->user, j->qty, now);
    sk_campaign c;
    int64_t rem = 0;
    if (rc != SK_EDB && rc != SK_EEXIST && sk_db_campaign_get(d->db, j->campaign, &c, &rem) == 0) {
        j->remaining = rem;
        sk_db_handback hb;
        /* refused for stock: what this path could still sell (the reserve),
         * not Redis's share; sold out only when no unit is left at all */
        if (rc == SK_ESOLDOUT) {
            bool read = sk_db_handback_get(d->db, j->campaign, &hb) == 0;
            j->remaining = read ? hb.reserve_remaining : 0;
            j->empty = read && hb.reserve_remaining == 0;
            if (rem > 0) rc = SK_ERESERVE;
        }
        if (rc == SK_ENOTSTARTED) j->value = c.starts_at_ms - now;
        else if (rc == SK_EINVAL) j->value = c.per_user_limit;
        else if (rc == SK_ELIMIT) j->value = -1;
    } else if (rc == SK_ELIMIT) {
        j->value = -1;
    }
    j->err = rc;
}

static void *worker_main(void *arg)
{
    sk_degraded *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && !d->todo.head) pthread_cond_wait(&d->cv, &d->mu);
        if (d->stop) break;
        job *j = d->todo.head;
        d->todo.head = j->next;
        if (!d->todo.head) d->todo.tail = NULL;
        pthread_mutex_unlock(&d->mu);
        if (j->kind == JOB_BUY) {
            run_buy(d, j);
        } else {
            int n = sk_db_orders_mirror_pending(d->db, NULL, 1, count_row, NULL);
            j->err = n < 0 ? n : 0;
            j->found = n < 0 ? 0 : n;
        }
        pthread_mutex_lock(&d->mu);
        jpush(&d->done, j);
        /* a full pipe already holds a wake-up: the loop drains every job */
        ssize_t w = write(d->wake[1], "x", 1);
        (void)w;
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ---- loop side ------------------------------------------------------------ */

static void submit(sk_degraded *d, job *j)
{
    pthread_mutex_lock(&d->mu);
    jpush(&d->todo, j);
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* A database-path acceptance is tentative (stored pending until the
 * persister finalises it, docs/design/promise.md): answered 202. */
static void answer(job *j, int err)
{
    sk_purchase_result r = {.err = err, .order_id = j->order_id, .qty = j->qty,
                            .remaining = j->remaining, .value = j->value, .pending = err == 0};
    j->cb(&r, j->arg);
}

static void deliver_buy(sk_degraded *d, job *j, bool freeing)
{
    d->queued--;
    int err = j->err;
    if (err == SK_EEXIST && !freeing && ++j->tries < EEXIST_RETRIES &&
        sk_engine_next_order_id(d->engine, &j->order_id) == 0) {
        d->queued++;
        submit(d, j); /* the id was taken: decide again with the next one */
        return;
    }
    if (err == SK_EDB || err == SK_EEXIST) err = SK_EUNAVAIL;
    /* only a reserve seen empty flags the campaign: a quantity above what
     * is left is refused ("only N left") and the next smaller one may
     * still sell, as on the Redis path (coalesce.c flags at remaining 0) */
    if (err == SK_ESOLDOUT && j->empty) sk_soldout_mark(&d->sold, j->campaign);
    if (err == SK_ERESERVE && j->empty) sk_soldout_mark(&d->drained, j->campaign);
    d->st.outcomes[sk_outcome_metric(sk_outcome_of_err(err, false))]++;
    answer(j, err);
    free(j);
}

/* Held purchases go to Redis (switched back) or to the database. */
static void release_held(sk_degraded *d, bool to_redis)
{
    job *j = jtake_all(&d->held);
    d->nheld = 0;
    while (j) {
        job *next = j->next;
        if (to_redis) {
            int rc = sk_engine_purchase(d->engine, j->campaign, j->user, j->qty, NULL,
                                        j->ip[0] ? j->ip : NULL, j->cb, j->arg);
            if (rc) answer(j, rc);
            free(j);
        } else if (sk_engine_next_order_id(d->engine, &j->order_id) == 0) {
            d->queued++;
            submit(d, j);
        } else {
            answer(j, SK_EUNAVAIL);
            free(j);
        }
        j = next;
    }
}

static void deliver_check(sk_degraded *d, job *j)
{
    d->check_inflight = false;
    if (d->mode == M_SWITCHING) {
        if (j->err == 0 && j->found == 0 && sk_engine_ready(d->engine)) {
            d->mode = M_REDIS;
            d->st.mode = 0;
            d->down_since_ms = 0;
            sk_soldout_reset(&d->sold);
            sk_soldout_reset(&d->drained);
            dlog(d, DLOCK_LOG_WARN, "redis healthy and every database-path order mirrored: "
                                    "back to the Redis path");
            release_held(d, true);
        } else {
            d->mode = M_DEGRADED;
            if (j->err) dlog(d, DLOCK_LOG_WARN, "mirror check failed: %s", sk_strerror(j->err));
            release_held(d, false);
        }
    }
    free(j);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    sk_degraded *d = arg;
    char buf[256];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    pthread_mutex_lock(&d->mu);
    job *j = jtake_all(&d->done);
    pthread_mutex_unlock(&d->mu);
    while (j) {
        job *next = j->next;
        if (j->kind == JOB_BUY) deliver_buy(d, j, false);
        else deliver_check(d, j);
        j = next;
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sk_degraded *d = arg;
    int64_t now = dlock__now_ms();
    bool ready = sk_engine_ready(d->engine);
    if (d->mode == M_REDIS) {
        if (ready) {
            d->down_since_ms = 0;
        } else if (!d->down_since_ms) {
            d->down_since_ms = now;
        } else if (now - d->down_since_ms >= d->o.after_ms) {
            d->mode = M_DEGRADED;
            d->st.mode = 1;
            d->st.entered++;
            d->up_since_ms = 0;
            sk_soldout_reset(&d->sold);
            sk_soldout_reset(&d->drained);
            dlog(d, DLOCK_LOG_WARN, "redis unreachable for %lld ms: purchases take the database path",
                 (long long)(now - d->down_since_ms));
        }
    } else if (d->mode == M_DEGRADED) {
        if (!ready) {
            d->up_since_ms = 0;
        } else if (!d->up_since_ms) {
            d->up_since_ms = now;
        } else if (now - d->up_since_ms >= d->o.recover_ms && !d->check_inflight &&
                   now - d->last_check_ms >= CHECK_EVERY_MS) {
            job *j = calloc(1, sizeof(*j));
            if (!j) return;
            j->kind = JOB_CHECK;
            d->mode = M_SWITCHING; /* from now on purchases are held */
            d->check_inflight = true;
            d->last_check_ms = now;
            submit(d, j);
        }
    }
}

int sk_degraded_purchase(sk_degraded *d, const char *campaign, const char *user, int64_t qty,
                         const char *ip, sk_purchase_cb cb, void *arg)
{
    if (sk_purchase_invalid(campaign, user, qty, NULL)) return SK_EINVAL; /* direct callers too (tests) */
    /* the database keeps no Idempotency-Keys: every purchase here is unkeyed */
    int rc = sk_soldout_answer(sk_soldout_has(&d->sold, campaign), false, &d->st.soldout_local, d->st.outcomes);
    if (rc) return rc;
    if (sk_soldout_has(&d->drained, campaign)) { /* a cache too: cleared when the authority changes */
        d->st.outcomes[SK_OUT_UNAVAILABLE]++;
        return SK_ERESERVE;
    }
    rc = sk_throttle_admit(d->mode == M_SWITCHING ? d->nheld : d->queued, (size_t)d->o.max_inflight,
                           &d->st.throttled);
    if (rc) return rc;
    job *j = calloc(1, sizeof(*j));
    if (!j) return DLOCK_ENOMEM;
    j->kind = JOB_BUY;
    snprintf(j->campaign, sizeof(j->campaign), "%s", campaign);
    snprintf(j->user, sizeof(j->user), "%s", user);
    if (ip) snprintf(j->ip, sizeof(j->ip), "%s", ip);
    j->qty = qty;
    j->cb = cb;
    j->arg = arg;
    if (d->mode == M_SWITCHING) {
        jpush(&d->held, j);
        d->nheld++;
        return 0;
    }
    if (sk_engine_next_order_id(d->engine, &j->order_id) != 0) {
        free(j);
        return SK_EUNAVAIL;
    }
    d->queued++;
    submit(d, j);
    return 0;
}

bool sk_degraded_active(const sk_degraded *d) { return d && d->mode != M_REDIS; }

void sk_degraded_get_stats(const sk_degraded *d, sk_degraded_stats *out)
{
    *out = d->st;
    out->queued = d->queued + d->nheld;
}

int sk_degraded_new(struct event_base *base, sk_engine *engine, const char *db_url,
                    const sk_degraded_opts *opts, sk_degraded **out, char *err, size_t errlen)
{
    *out = NULL;
    sk_degraded *d = calloc(1, sizeof(*d));
    if (!d) return DLOCK_ENOMEM;
    d->base = base;
    d->engine = engine;
    if (opts) d->o = *opts;
    else sk_degraded_opts_init(&d->o);
    if (d->o.max_inflight < 1) d->o.max_inflight = 1;
    d->wake[0] = d->wake[1] = -1;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    int rc = sk_db_open(db_url, &d->db, err, errlen);
    if (rc) {
        sk_degraded_free(d);
        return rc;
    }
    rc = DLOCK_ENOMEM;
    if (pipe2(d->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        goto fail;
    }
    d->wake_ev = event_new(base, d->wake[0], EV_READ | EV_PERSIST, on_wake, d);
    d->tick_ev = event_new(base, -1, EV_PERSIST, on_tick, d);
    if (!d->wake_ev || !d->tick_ev) goto fail;
    struct timeval tv = {.tv_sec = 0, .tv_usec = TICK_MS * 1000};
    event_add(d->wake_ev, NULL);
    event_add(d->tick_ev, &tv);
    if (pthread_create(&d->th, NULL, worker_main, d) != 0) {
        snprintf(err, errlen, "cannot start the database thread");
        goto fail;
    }
    d->th_started = true;
    *out = d;
    return 0;
fail:
    sk_degraded_free(d);
    return rc;
}

void sk_degraded_free(sk_degraded *d)
{
    if (!d) return;
    if (d->th_started) {
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_signal(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->th, NULL);
    }
    /* the thread is gone: decided purchases get their answer, the rest 503 */
    job *j = jtake_all(&d->done);
    while (j) {
        job *next = j->next;
        if (j->kind == JOB_BUY) deliver_buy(d, j, true);
        else free(j);
        j = next;
    }
    j = jtake_all(&d->todo);
    while (j) {
        job *next = j->next;
        if (j->kind == JOB_BUY) answer(j, SK_EUNAVAIL);
        free(j);
        j = next;
    }
    j = jtake_all(&d->held);
    while (j) {
        job *next = j->next;
        answer(j, SK_EUNAVAIL);
        free(j);
        j = next;
    }
    if (d->wake_ev) event_free(d->wake_ev);
    if (d->tick_ev) event_free(d->tick_ev);
    if (d->wake[0] >= 0) close(d->wake[0]);
    if (d->wake[1] >= 0) close(d->wake[1]);
    sk_db_close(d->db);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    sk_soldout_free(&d->sold);
    sk_soldout_free(&d->drained);
    free(d);
}
