/* election.c: leader election (include/dlock/election.h) on either
 * backend, built on the lock of the client's backend table, so a
 * leadership is a hold of the one hold state machine (hold.h) and ends at
 * its validity deadline like every other hold.
 *
 * Design note (details in docs/locks.md, "Elections").
 * Keys: the election called N is the simple lock "election:{N}" (one key,
 * hash-tagged, so on a Cluster its companions share its slot): on Redis
 * the lock key holds the candidate id (the holder token), the term is the
 * lock's fencing token (INCR of "election:{N}:fence", same slot) and the
 * value is the holder's label ("election:{N}:label", a hash {id: value}
 * written by the acquire script with the lease, renewed and deleted with
 * the lock); on etcd the leader is the contender key with the lowest
 * create_revision under the lock's range, the term its create_revision,
 * the value stored in that key (lease-attached).
 * Changes: campaign, proclaim (lock_label.lua) and resign publish on the
 * lock's unlock channel; the observer thread subscribes to it (Redis) and
 * reads the leader after each message, at the leader's lease end, and at
 * least every poll_ms (etcd: polls only). Reads are sequential, so changes
 * are delivered in the order they happened; between two leaders a "no
 * leader" is always delivered (the key was gone in between).
 * Resume (Redis): the candidate id is the lock's explicit owner id, and
 * the acquire script accepts a lock already holding it (keeping its term).
 * Resume (etcd): the id is the lease of the earlier leadership, which the
 * etcd lock resumes while its key still leads (etcd_lock.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlock/election.h"
#include "backend.h"
#include "opts_read.h"
#include "util.h"

#define POLL_DEFAULT_MS 250
#define POLL_MIN_MS 10
#define POLL_MAX_MS 60000
#define ID_HEX_BYTES 16 /* generated ids: 128 random bits */

struct dlock_election {
    dlock_client *c;
    char *name;
    char *lock_name;   /* "election:{N}" */
    char *channel;     /* the lock's unlock channel (Redis), or NULL */
    bool sharded;
    bool redis;
    dlock_lock *lock;
    char id[DLOCK_OWNER_MAX + 1];
    dlock_election_lost_fn on_lost;
    void *on_lost_ud;
    int64_t poll_ms;

    pthread_mutex_t mu; /* guards the observer's fields below */
    pthread_cond_t cv;  /* the observer's naps on etcd; stop */
    bool observing, stop;
    pthread_t obs;
    dlock__waiter *w;   /* the observer's subscription (Redis) */
    dlock_observe_fn fn;
    void *fn_ud;
};

DLOCK_API void dlock_election_options_init(dlock_election_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->poll_ms = POLL_DEFAULT_MS;
}

/* The lock's loss is the leadership's: pass it on. */
static void lock_lost(dlock_lock *lock, int reason, void *ud)
{
    (void)lock;
    dlock_election *e = ud;
    dlock__log(e->c, DLOCK_LOG_ERROR, "election %s: this process stopped leading (%s)", e->name,
               dlock_strerror(reason));
    if (e->on_lost) e->on_lost(e, reason, e->on_lost_ud);
}

static void election_free_fields(dlock_election *e)
{
    dlock_lock_free(e->lock);
    free(e->channel);
    free(e->lock_name);
    free(e->name);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static int check_options(dlock_client *c, const char *name, const dlock_election_options *o)
{
    if (!c || dlock__client_check_name(c, "election", name)) return DLOCK_EINVAL;
    if (strlen(name) > DLOCK_ELECTION_NAME_MAX) {
        dlock__log(c, DLOCK_LOG_WARN, "election name of %zu bytes is longer than the maximum of %d bytes",
                   strlen(name), DLOCK_ELECTION_NAME_MAX);
        return DLOCK_EINVAL;
    }
    if (o->poll_ms < POLL_MIN_MS || o->poll_ms > POLL_MAX_MS) return DLOCK_EINVAL;
    if (o->id && (!*o->id || strnlen(o->id, DLOCK_OWNER_MAX + 1) > DLOCK_OWNER_MAX)) return DLOCK_EINVAL;
    return 0; /* an etcd id that is no lease id: ENOTSUP from the lock */
}

/* The lock under the election, and (Redis) its channel. */
static int open_lock(dlock_election *e)
{
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.owner_id = e->id[0] ? e->id : NULL; /* etcd: a lease to resume, or none */
    lo.on_lost = lock_lost;
    lo.on_lost_ud = e;
    int rc = dlock_lock_new(e->c, e->lock_name, &lo, &e->lock);
    if (rc || !e->redis) return rc;
    const char *key = dlock_lock_key(e->lock);
    e->channel = dlock__lock_channel("dlock_lock__channel:", key);
    if (!e->channel) return DLOCK_ENOMEM;
    e->sharded = dlock__client_sharded(e->c, key, e->channel);
    return 0;
}

DLOCK_API int dlock_election_new(dlock_client *c, const char *name, const dlock_election_options *opts,
                                 dlock_election **e_out)
{
    if (!e_out) return DLOCK_EINVAL;
    *e_out = NULL;
    dlock_election_options o;
    dlock_election_options_init(&o);
    if (opts && dlock__opts_read(&o, sizeof(o), DLOCK__SIZE_TO(dlock_election_options, poll_ms), opts))
        return DLOCK_EINVAL;
    int rc = check_options(c, name, &o);
    if (rc) return rc;
    dlock_election *e = calloc(1, sizeof(*e));
    if (!e) return DLOCK_ENOMEM;
    if (pthread_mutex_init(&e->mu, NULL) != 0) {
        free(e);
        return DLOCK_ENOMEM;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    e->c = c;
    e->redis = dlock__client_backend(c) != &dlock__backend_etcd;
    e->on_lost = o.on_lost;
    e->on_lost_ud = o.on_lost_ud;
    e->poll_ms = o.poll_ms;
    if (o.id) snprintf(e->id, sizeof(e->id), "%s", o.id);
    else if (e->redis) rc = dlock__err_from_common(dlock__random_hex(e->id, ID_HEX_BYTES));
    e->name = strdup(name);
    size_t n = strlen(name) + 12;
    e->lock_name = malloc(n);
    if (e->lock_name) snprintf(e->lock_name, n, "election:{%s}", name);
    if (!rc && (!e->name || !e->lock_name)) rc = DLOCK_ENOMEM;
    if (!rc) rc = open_lock(e);
    if (rc) {
        election_free_fields(e);
        return rc;
    }
    *e_out = e;
    return 0;
}

/* Wakes observers (every process's) after a change that published
 * nothing itself: a won campaign. Best effort: they also poll. */
static void publish_change(dlock_election *e)
{
    if (!e->channel) return;
    const char *argv[3] = {dlock__pub_cmd(e->sharded), e->channel, "leader"};
    dlock__reply *r = NULL;
    (void)dlock__client_cmd(e->c, 3, argv, NULL, &r);
    dlock__reply_free(r);
}

DLOCK_API int dlock_election_campaign(dlock_election *e, const char *value, int64_t wait_ms,
                                      uint64_t *term_out)
{
    if (term_out) *term_out = 0;
    if (!e || wait_ms < DLOCK_WAIT_FOREVER) return DLOCK_EINVAL;
    if (dlock_lock_is_held(e->lock)) return DLOCK_EALREADY;
    /* stores the value for the acquisition (nothing is held: no I/O) */
    int rc = dlock_lock_set_label(e->lock, value);
    if (rc) return rc;
    uint64_t term = 0;
    rc = dlock_lock_try_lock(e->lock, wait_ms, 0, &term);
    if (rc) return rc;
    publish_change(e);
    dlock__log(e->c, DLOCK_LOG_INFO, "election %s: leading, term %llu", e->name, (unsigned long long)term);
    if (term_out) *term_out = term;
    return 0;
}

DLOCK_API int dlock_election_proclaim(dlock_election *e, const char *value)
{
    if (!e) return DLOCK_EINVAL;
    if (!dlock_lock_is_held(e->lock)) return DLOCK_ENOTHELD;
    int rc = dlock_lock_set_label(e->lock, value);
    /* not leading when it ran: only stored for the next campaign */
    return rc == 0 && !dlock_lock_is_held(e->lock) ? DLOCK_ENOTHELD : rc;
}

DLOCK_API int dlock_election_resign(dlock_election *e)
{
    if (!e) return DLOCK_EINVAL;
    int rc = dlock_lock_unlock(e->lock);
    if (rc == 0) dlock__log(e->c, DLOCK_LOG_INFO, "election %s: resigned", e->name);
    return rc;
}

DLOCK_API void dlock_election_cancel(dlock_election *e)
{
    if (e) dlock_lock_cancel(e->lock);
}

DLOCK_API bool dlock_election_is_leader(dlock_election *e)
{
    return e ? dlock_lock_is_held(e->lock) : false;
}

DLOCK_API int64_t dlock_election_validity_ms(dlock_election *e)
{
    return e ? dlock_lock_validity_ms(e->lock) : 0;
}

DLOCK_API uint64_t dlock_election_term(dlock_election *e)
{
    return e ? dlock_lock_fence(e->lock) : 0;
}

DLOCK_API const char *dlock_election_id(const dlock_election *e)
{
    if (!e) return "";
    return e->redis || e->id[0] ? e->id : dlock_lock_owner(e->lock); /* etcd: the lease */
}

DLOCK_API int dlock_election_leader(dlock_election *e, dlock_leader *out)
{
    if (!out) return DLOCK_EINVAL;
    memset(out, 0, sizeof(*out));
    out->ttl_ms = -2;
    if (!e) return DLOCK_EINVAL;
    dlock_lock_status st;
    memset(&st, 0, sizeof(st));
    st.ttl_ms = -2;
    dlock__holder_extra x;
    int rc = dlock__client_backend(e->c)->lock->status_get(e->c, e->lock_name, &st, &x);
    if (rc) return rc;
    out->present = st.locked && st.holder[0];
    /* the holder's own term: the fence key may have expired under a long leadership */
    out->term = !out->present ? 0 : x.fence ? x.fence : st.last_fence;
    snprintf(out->value, sizeof(out->value), "%s", x.label);
    out->ttl_ms = out->present ? st.ttl_ms : -2;
    if (!out->present) out->value[0] = '\0';
    return 0;
}

/* ---- the observer ---------------------------------------------------------- */

static bool obs_stopping(dlock_election *e)
{
    pthread_mutex_lock(&e->mu);
    bool s = e->stop;
    pthread_mutex_unlock(&e->mu);
    return s;
}

/* Sleeps until a publish (Redis), ms, or stop. */
static void obs_nap(dlock_election *e, int64_t ms)
{
    if (e->w && dlock__wait(e->w, ms) != DLOCK_ECLOSED) return;
    /* etcd, or the subscriber is closing: a plain nap */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&e->mu);
    if (!e->stop) pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    pthread_mutex_unlock(&e->mu);
}

static bool same_leader(const dlock_leader *a, const dlock_leader *b)
{
    if (a->present != b->present) return false;
    return !a->present || (a->term == b->term && strcmp(a->value, b->value) == 0);
}

/* Delivers cur after last (the one delivered before; NULL: none yet). */
static void deliver(dlock_election *e, const dlock_leader *last, const dlock_leader *cur)
{
    if (last && last->present && cur->present && last->term != cur->term) {
        dlock_leader none; /* the old leader's key was gone before the new one's */
        memset(&none, 0, sizeof(none));
        none.ttl_ms = -2;
        e->fn(e, &none, e->fn_ud);
    }
    e->fn(e, cur, e->fn_ud);
}

static void *observer_main(void *arg)
{
    dlock_election *e = arg;
    dlock_leader last, cur;
    bool have = false;
    int fails = 0;
    while (!obs_stopping(e)) {
        int rc = dlock_election_leader(e, &cur);
        if (rc == 0 && (!have || !same_leader(&last, &cur))) {
            deliver(e, have ? &last : NULL, &cur);
            last = cur;
            have = true;
        }
        if (rc && fails++ % 20 == 0)
            dlock__log(e->c, DLOCK_LOG_WARN, "election %s: cannot read the leader (%s); retrying", e->name,
                       dlock_strerror(rc));
        if (rc == 0) fails = 0;
        int64_t nap = e->poll_ms;
        /* an expiry publishes nothing: read again just after it */
        if (rc == 0 && cur.present && cur.ttl_ms >= 0 && cur.ttl_ms + 1 < nap) nap = cur.ttl_ms + 1;
        obs_nap(e, nap);
    }
    return NULL;
}

DLOCK_API int dlock_election_observe(dlock_election *e, dlock_observe_fn fn, void *ud)
{
    if (!e || !fn) return DLOCK_EINVAL;
    if (e->observing) return DLOCK_EALREADY;
    e->fn = fn;
    e->fn_ud = ud;
    e->stop = false;
    e->w = NULL;
    if (e->channel && dlock__wait_begin(e->c, e->channel, e->sharded, &e->w) != 0) {
        e->w = NULL; /* no subscription: the poll alone still sees every change */
        dlock__log(e->c, DLOCK_LOG_WARN, "election %s: cannot subscribe; observing by polling", e->name);
    }
    if (pthread_create(&e->obs, NULL, observer_main, e) != 0) {
        if (e->w) dlock__wait_end(e->w);
        e->w = NULL;
        return DLOCK_ENOMEM;
    }
    e->observing = true;
    return 0;
}

DLOCK_API void dlock_election_observe_stop(dlock_election *e)
{
    if (!e || !e->observing) return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->w) dlock__wait_cancel(e->w);
    pthread_join(e->obs, NULL);
    if (e->w) dlock__wait_end(e->w);
    e->w = NULL;
    e->observing = false;
}

DLOCK_API void dlock_election_free(dlock_election *e)
{
    if (!e) return;
    dlock_election_observe_stop(e);
    election_free_fields(e);
}
