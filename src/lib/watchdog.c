/* watchdog.c: the client's watchdog: two threads over one list of objects
 * held in watchdog mode, which together keep the validity rule (dlock.h):
 * renew while renewing can help, declare the loss at the deadline.
 *
 * Design note. The renewal thread sleeps until the next object falls due:
 * its last attempt timeout/3 old. It then takes every still-valid object
 * that is due, pipelines the batchable ones (prepare/finish) on one
 * connection and calls renew() for the rest, every call bounded by an I/O deadline
 * (dlock__pool_io_deadline): the latest validity deadline in the round,
 * past which no answer can save anything in it. A success sent at t moves
 * the object's deadline to dlock__client_valid_until(t); the server saying
 * "gone" (ELOST) drops the object and declares the loss.
 * The deadline thread does no I/O at all: it sleeps until the earliest
 * validity deadline and at it drops every object whose deadline passed,
 * so a loss is declared on time however long the renewal thread is
 * blocked, and one object's renewal never delays another's loss. A
 * renewal whose answer comes after the deadline is not applied: once an
 * object stopped believing it never believes again under that hold.
 * Whoever drops an object (unlinks it under wd_mu) declares its loss,
 * once. Callbacks run outside wd_mu with the object marked (renewing,
 * in_lost); dlock__watchdog_remove waits until it is not, except on the
 * thread that runs it (an unlock inside a lost callback), so a removed
 * object is never touched again.
 */
#include <stdlib.h>
#include <time.h>

#include "client_priv.h"
#include "util.h"

int dlock__watchdog_add(dlock_client *c, dlock__renewable *r)
{
    if (!c || !r || (!r->renew && !(r->prepare && r->finish)) || !r->lost) return DLOCK_EINVAL;
    pthread_mutex_lock(&c->wd_mu);
    r->last_try_ms = r->last_ok_ms;
    r->removed = false;
    r->next = c->wd_list;
    c->wd_list = r;
    pthread_cond_signal(&c->wd_cv);
    pthread_cond_signal(&c->wd_dl_cv); /* its deadline may be the earliest */
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

static bool on_thread(bool started, pthread_t t)
{
    return started && pthread_equal(pthread_self(), t);
}

void dlock__watchdog_remove(dlock_client *c, dlock__renewable *r)
{
    if (!c || !r) return;
    pthread_mutex_lock(&c->wd_mu);
    unlink_locked(c, r);
    bool renewer = on_thread(c->wd_started, c->wd_thread);
    bool keeper = on_thread(c->wd_dl_started, c->wd_dl_thread);
    while ((r->renewing && !renewer) || (r->in_lost && !keeper)) pthread_cond_wait(&c->wd_cv, &c->wd_mu);
    pthread_mutex_unlock(&c->wd_mu);
}

/* Logs, counts and reports the loss of r, which the caller unlinked. */
static void declare_lost(dlock_client *c, dlock__renewable *r, const char *why)
{
    char desc[300] = "";
    if (r->describe) r->describe(r, desc, sizeof(desc));
    int64_t late = dlock__now_ms() - r->last_ok_ms;
    dlock__log(c, DLOCK_LOG_ERROR,
               "watchdog: %s: %s: lost (last good renewal sent %lld ms ago; lease %lld ms)",
               desc[0] ? desc : "held object", why, (long long)late, (long long)c->opts.watchdog_timeout_ms);
    dlock__metrics_lost(c);
    r->lost(r, DLOCK_ELOST);
}

/* Applies a renewal result to r (renewal thread, outside wd_mu). */
static void settle(dlock_client *c, dlock__renewable *r, int rc, int64_t sent_ms)
{
    pthread_mutex_lock(&c->wd_mu);
    bool gone = r->removed;
    bool late = rc == 0 && dlock__now_ms() >= atomic_load(&r->valid_until_ms);
    if (!gone && rc == 0 && !late) {
        r->last_ok_ms = sent_ms;
        int64_t v = dlock__client_valid_until(c, sent_ms, c->opts.watchdog_timeout_ms);
        if (v > atomic_load(&r->valid_until_ms)) atomic_store(&r->valid_until_ms, v);
    }
    if (!gone && (rc == DLOCK_ELOST || late)) unlink_locked(c, r);
    int64_t left = atomic_load(&r->valid_until_ms) - dlock__now_ms();
    pthread_mutex_unlock(&c->wd_mu);
    dlock__metrics_renew(c, rc == 0 && !late && !gone); /* an answer too late to help failed */
    if (gone || (rc == 0 && !late)) return;
    if (rc != 0 && rc != DLOCK_ELOST) {
        char desc[300] = "";
        if (r->describe) r->describe(r, desc, sizeof(desc));
        dlock__log(c, DLOCK_LOG_WARN, "watchdog: %s: renewal failed (%s); retrying, valid for %lld ms more",
                   desc[0] ? desc : "held object", dlock_strerror(rc), (long long)(left > 0 ? left : 0));
        return;
    }
    declare_lost(c, r, late ? "the renewal answered after its validity deadline"
                            : "the renewal found it gone");
}

/* One renewal of r on its own, its I/O bounded by r's own deadline. */
static void renew_one(dlock_client *c, dlock__renewable *r)
{
    dlock__pool_io_deadline(atomic_load(&r->valid_until_ms));
    int64_t sent = dlock__now_ms(); /* before the send: validity counts from no later */
    settle(c, r, r->renew(r, c->opts.watchdog_timeout_ms), sent);
    dlock__pool_io_deadline(0);
}

/* Pipelines the renewals of batch[0..nb) (prepared in cmds); settles each.
 * Renewals are owner-checked and idempotent, so when the pipeline as a
 * whole failed (a node of a Cluster that did not answer makes it
 * EUNKNOWN) each is sent again on its own: the ones whose server answers
 * are renewed, one frozen node costs the others one bounded call. */
static void renew_batch(dlock_client *c, dlock__renewable **batch, dlock__renew_cmd *cmds,
                        dlock__reply **replies, size_t nb, int64_t until)
{
    dlock__pool_io_deadline(until);
    int64_t sent = dlock__now_ms();
    int rc = dlock__pool_pipeline_eval(&c->pool, nb, cmds, replies);
    dlock__pool_io_deadline(0);
    for (size_t i = 0; i < nb; i++) {
        if (rc == 0 && !dlock__reply_is_error(replies[i], "NOSCRIPT"))
            settle(c, batch[i], batch[i]->finish(batch[i], replies[i]), sent);
        else if (rc == 0 || rc == DLOCK_ECONN || rc == DLOCK_EUNKNOWN || rc == DLOCK_ETIMEOUT)
            renew_one(c, batch[i]);
        else
            settle(c, batch[i], rc, sent);
        dlock__reply_free(replies[i]);
    }
}

/* Renews the due objects in items[0..n): batchable ones in one pipeline
 * (its calls bounded by the latest validity deadline among them), the rest
 * one by one, each bounded by its own deadline. */
static void renew_round(dlock_client *c, dlock__renewable **items, size_t n)
{
    int64_t lease = c->opts.watchdog_timeout_ms, until = 0;
    dlock__renew_cmd *cmds = calloc(n, sizeof(*cmds));
    dlock__renewable **batch = calloc(n, sizeof(*batch));
    dlock__reply **replies = calloc(n, sizeof(*replies));
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        dlock__renewable *r = items[i];
        if (cmds && batch && replies && r->prepare && r->finish && r->prepare(r, lease, &cmds[nb]) == 0) {
            batch[nb++] = r;
            if (atomic_load(&r->valid_until_ms) > until) until = atomic_load(&r->valid_until_ms);
            continue;
        }
        renew_one(c, r);
    }
    if (nb > 0) renew_batch(c, batch, cmds, replies, nb, until);
    free(cmds);
    free(batch);
    free(replies);
}

/* The due, still valid objects (marked renewing), and *next_out = when the
 * next of the others falls due (INT64_MAX: none); wd_mu held. */
static dlock__renewable **take_due(dlock_client *c, int64_t period, size_t *n_out, int64_t *next_out)
{
    int64_t now = dlock__now_ms();
    size_t n = 0;
    *next_out = INT64_MAX;
    for (dlock__renewable *r = c->wd_list; r; r = r->next) {
        if (atomic_load(&r->valid_until_ms) <= now) continue;
        if (now - r->last_try_ms >= period) n++;
        else if (r->last_try_ms + period < *next_out) *next_out = r->last_try_ms + period;
    }
    dlock__renewable **items = n ? calloc(n, sizeof(*items)) : NULL;
    size_t k = 0;
    for (dlock__renewable *r = c->wd_list; r && items; r = r->next) {
        if (now - r->last_try_ms >= period && atomic_load(&r->valid_until_ms) > now) {
            r->last_try_ms = now;
            r->renewing = true;
            items[k++] = r;
        }
    }
    *n_out = k;
    return items;
}

static void *renewal_main(void *arg)
{
    dlock_client *c = arg;
    int64_t period = c->opts.watchdog_timeout_ms / 3;
    pthread_mutex_lock(&c->wd_mu);
    while (!c->wd_stop) {
        size_t k = 0;
        int64_t next_due = INT64_MAX;
        dlock__renewable **items = take_due(c, period, &k, &next_due);
        if (k > 0) {
            pthread_mutex_unlock(&c->wd_mu);
            renew_round(c, items, k);
            pthread_mutex_lock(&c->wd_mu);
            for (size_t i = 0; i < k; i++) items[i]->renewing = false;
            pthread_cond_broadcast(&c->wd_cv);
        }
        free(items);
        if (c->wd_stop) break;
        if (k > 0) continue; /* the round took time: look again before sleeping */
        /* until the next object falls due (an added one wakes us), so a
         * renewal starts period after the last try, not up to a tick later:
         * validity stays near two thirds of the lease on a healthy server */
        int64_t wait = next_due == INT64_MAX ? period : next_due - dlock__now_ms();
        struct timespec ts;
        dlock__abstime_ms(wait < 1 ? 1 : wait > period ? period : wait, &ts);
        pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &ts);
    }
    pthread_mutex_unlock(&c->wd_mu);
    return NULL;
}

/* The first registered object whose deadline passed, or NULL with
 * *next_out = the earliest deadline to come (INT64_MAX: none); wd_mu held. */
static dlock__renewable *first_expired(dlock_client *c, int64_t *next_out)
{
    int64_t now = dlock__now_ms(), next = INT64_MAX;
    for (dlock__renewable *r = c->wd_list; r; r = r->next) {
        int64_t v = atomic_load(&r->valid_until_ms);
        if (v <= now) return r;
        if (v < next) next = v;
    }
    *next_out = next;
    return NULL;
}

static void *deadline_main(void *arg)
{
    dlock_client *c = arg;
    pthread_mutex_lock(&c->wd_mu);
    while (!c->wd_stop) {
        int64_t next = INT64_MAX;
        dlock__renewable *r = first_expired(c, &next);
        if (r) {
            unlink_locked(c, r);
            r->in_lost = true;
            pthread_mutex_unlock(&c->wd_mu);
            declare_lost(c, r, "no renewal succeeded before its validity deadline");
            pthread_mutex_lock(&c->wd_mu);
            r->in_lost = false;
            pthread_cond_broadcast(&c->wd_cv);
            continue;
        }
        if (next == INT64_MAX) {
            pthread_cond_wait(&c->wd_dl_cv, &c->wd_mu);
            continue;
        }
        struct timespec ts;
        dlock__abstime_ms(next - dlock__now_ms(), &ts);
        pthread_cond_timedwait(&c->wd_dl_cv, &c->wd_mu, &ts);
    }
    pthread_mutex_unlock(&c->wd_mu);
    return NULL;
}

int dlock__watchdog_start(dlock_client *c)
{
    if (pthread_create(&c->wd_thread, NULL, renewal_main, c) != 0) return DLOCK_ENOMEM;
    pthread_mutex_lock(&c->wd_mu);
    c->wd_started = true;
    pthread_mutex_unlock(&c->wd_mu);
    if (pthread_create(&c->wd_dl_thread, NULL, deadline_main, c) != 0) return DLOCK_ENOMEM;
    pthread_mutex_lock(&c->wd_mu);
    c->wd_dl_started = true;
    pthread_mutex_unlock(&c->wd_mu);
    return 0;
}

void dlock__watchdog_stop(dlock_client *c)
{
    pthread_mutex_lock(&c->wd_mu);
    c->wd_stop = true;
    bool started = c->wd_started, dl_started = c->wd_dl_started;
    pthread_cond_broadcast(&c->wd_cv);
    pthread_cond_broadcast(&c->wd_dl_cv);
    pthread_mutex_unlock(&c->wd_mu);
    if (started) pthread_join(c->wd_thread, NULL);
    if (dl_started) pthread_join(c->wd_dl_thread, NULL);
    pthread_mutex_lock(&c->wd_mu);
    c->wd_started = c->wd_dl_started = false;
    c->wd_list = NULL;
    pthread_mutex_unlock(&c->wd_mu);
}
