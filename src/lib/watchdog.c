/* watchdog.c: the client's watchdog thread, which keeps watchdog-mode
 * objects alive by renewing them every watchdog_timeout/3.
 *
 * Design note. The thread ticks every timeout/6. Each tick it takes the
 * objects whose last renewal attempt is at least timeout/3 old, pipelines
 * the batchable ones (prepare/finish) on one connection and calls renew()
 * for the rest. Renewal failure is never silent: the server saying "gone"
 * (ELOST), or no successful renewal for a whole lease (counted from the
 * moment the last good renewal was sent, so the server-side expiry has
 * certainly passed), removes the object and calls lost(). Callbacks run
 * outside wd_mu with wd_round set; dlock__watchdog_remove waits for the
 * round to end (except from the watchdog thread itself, e.g. an unlock
 * inside a lost-lock callback), so a removed object is never touched again.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "client_priv.h"
#include "util.h"

int dlock__watchdog_add(dlock_client *c, dlock__renewable *r)
{
    if (!c || !r || (!r->renew && !(r->prepare && r->finish)) || !r->lost) return DLOCK_EINVAL;
    int64_t now = dlock__now_ms();
    pthread_mutex_lock(&c->wd_mu);
    if (r->last_ok_ms == 0) r->last_ok_ms = now;
    r->last_try_ms = r->last_ok_ms;
    r->removed = false;
    r->next = c->wd_list;
    c->wd_list = r;
    pthread_cond_signal(&c->wd_cv);
    pthread_mutex_unlock(&c->wd_mu);
    return 0;
}

/* Unlinks r; wd_mu held. */
static void unlink_locked(dlock_client *c, dlock__renewable *r)
{
    for (dlock__renewable **pp = &c->wd_list; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    }
    r->next = NULL;
    r->removed = true;
}

void dlock__watchdog_remove(dlock_client *c, dlock__renewable *r)
{
    if (!c || !r) return;
    pthread_mutex_lock(&c->wd_mu);
    unlink_locked(c, r);
    bool self = c->wd_started && pthread_equal(pthread_self(), c->wd_thread);
    while (c->wd_round && !self) pthread_cond_wait(&c->wd_cv, &c->wd_mu);
    pthread_mutex_unlock(&c->wd_mu);
}

/* Applies a renewal result to r (watchdog thread, outside wd_mu). */
static void settle(dlock_client *c, dlock__renewable *r, int rc, int64_t sent_ms)
{
    pthread_mutex_lock(&c->wd_mu);
    bool gone = r->removed;
    int64_t lease = c->opts.watchdog_timeout_ms;
    bool expired = rc != 0 && rc != DLOCK_ELOST && dlock__now_ms() - r->last_ok_ms >= lease;
    if (!gone && rc == 0) r->last_ok_ms = sent_ms;
    if (!gone && (rc == DLOCK_ELOST || expired)) unlink_locked(c, r);
    pthread_mutex_unlock(&c->wd_mu);
    if (gone) return;
    dlock__metrics_renew(c, rc == 0);
    if (rc == 0) return;
    if (rc != DLOCK_ELOST && !expired) {
        dlock__log(c, DLOCK_LOG_WARN, "watchdog: renewal failed (%s); retrying", dlock_strerror(rc));
        return;
    }
    dlock__log(c, DLOCK_LOG_ERROR, "watchdog: %s",
               rc == DLOCK_ELOST ? "renewal found the lock gone: lost"
                                 : "no successful renewal for a whole lease: lost");
    dlock__metrics_lost(c);
    r->lost(r, DLOCK_ELOST);
}

/* Renews the due objects in items[0..n): batchable ones in one pipeline. */
static void renew_round(dlock_client *c, dlock__renewable **items, size_t n)
{
    int64_t lease = c->opts.watchdog_timeout_ms;
    dlock__renew_cmd *cmds = calloc(n, sizeof(*cmds));
    dlock__renewable **batch = calloc(n, sizeof(*batch));
    dlock__reply **replies = calloc(n, sizeof(*replies));
    size_t nb = 0;
    int64_t sent = dlock__now_ms();
    for (size_t i = 0; i < n; i++) {
        dlock__renewable *r = items[i];
        if (cmds && batch && replies && r->prepare && r->finish && r->prepare(r, lease, &cmds[nb]) == 0)
            batch[nb++] = r;
        else
            settle(c, r, r->renew(r, lease), sent);
    }
    if (nb > 0) {
        int rc = dlock__pool_pipeline_eval(&c->pool, nb, cmds, replies);
        for (size_t i = 0; i < nb; i++) {
            int rr;
            if (rc == 0 && !dlock__reply_is_error(replies[i], "NOSCRIPT")) rr = batch[i]->finish(batch[i], replies[i]);
            else if (rc == 0 || rc == DLOCK_ECONN) rr = batch[i]->renew(batch[i], lease); /* not applied: redo singly */
            else rr = rc;
            settle(c, batch[i], rr, sent);
            dlock__reply_free(replies[i]);
        }
    }
    free(cmds);
    free(batch);
    free(replies);
}

static void *watchdog_main(void *arg)
{
    dlock_client *c = arg;
    int64_t period = c->opts.watchdog_timeout_ms / 3;
    int64_t tick = period / 2 > 5 ? period / 2 : 5;
    pthread_mutex_lock(&c->wd_mu);
    while (!c->wd_stop) {
        int64_t now = dlock__now_ms();
        size_t n = 0;
        for (dlock__renewable *r = c->wd_list; r; r = r->next)
            if (now - r->last_try_ms >= period) n++;
        dlock__renewable **items = n ? calloc(n, sizeof(*items)) : NULL;
        size_t k = 0;
        for (dlock__renewable *r = c->wd_list; r && items; r = r->next) {
            if (now - r->last_try_ms >= period) {
                r->last_try_ms = now;
                items[k++] = r;
            }
        }
        if (k > 0) {
            c->wd_round = true;
            pthread_mutex_unlock(&c->wd_mu);
            renew_round(c, items, k);
            pthread_mutex_lock(&c->wd_mu);
            c->wd_round = false;
            pthread_cond_broadcast(&c->wd_cv);
        }
        free(items);
        if (c->wd_stop) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + (tick % 1000) * 1000000L;
        ts.tv_sec += tick / 1000 + ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &ts);
    }
    pthread_mutex_unlock(&c->wd_mu);
    return NULL;
}

int dlock__watchdog_start(dlock_client *c)
{
    if (pthread_create(&c->wd_thread, NULL, watchdog_main, c) != 0) return DLOCK_ENOMEM;
    pthread_mutex_lock(&c->wd_mu);
    c->wd_started = true;
    pthread_mutex_unlock(&c->wd_mu);
    return 0;
}

void dlock__watchdog_stop(dlock_client *c)
{
    pthread_mutex_lock(&c->wd_mu);
    c->wd_stop = true;
    bool started = c->wd_started;
    pthread_cond_broadcast(&c->wd_cv);
    pthread_mutex_unlock(&c->wd_mu);
    if (started) pthread_join(c->wd_thread, NULL);
    pthread_mutex_lock(&c->wd_mu);
    c->wd_started = false;
    c->wd_list = NULL;
    pthread_mutex_unlock(&c->wd_mu);
}
