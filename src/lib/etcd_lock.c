/* etcd_lock.c: the mutex on etcd, the way etcd's own concurrency.Mutex
 * works: the etcd backend's lock operations (dlock__etcd_lock_ops,
 * backend.h), which lock_api.c calls for a client made from an etcd URL.
 *
 * Design note. Every acquisition has its own lease (TTL = the lease, or
 * the client's watchdog_timeout_ms, rounded up to whole seconds: etcd's
 * unit). One txn creates  dir/<lease hex>  if absent (compare
 * create_revision == 0) and reads the lowest create_revision under dir
 * (the owner); the same txn resent after a lost answer finds the key and
 * reads it back, so it is idempotent. If we are not the owner we watch
 * the key with the next-lower create_revision (never the owner: no herd)
 * from the revision of that read, until it is deleted, then re-check; our
 * lease is kept alive meanwhile. The fencing token is our key's
 * create_revision: etcd revisions grow across the whole cluster, so tokens
 * never go back, whatever expires. Unlock revokes the lease (which deletes
 * the key at one revision and fires the next waiter's watch). In watchdog
 * mode the client's watchdog sends one keepalive per lease every
 * timeout/3, bounded by the hold's validity deadline; a keepalive finding
 * the lease gone, or the deadline passing first, marks the lock lost
 * exactly as on Redis.
 * States: the one hold state machine of hold.h: free -> held -> free, or
 * held -> lost (is_held false, the next unlock says ELOST); unknown (the
 * acquire's last answer was lost and the clean-up failed too): the lease is
 * kept so queries and unlock resolve it.
 * Resume: an owner id of 16 hex digits names the lease of an acquisition
 * made by an earlier process (dlock_lock_owner); the first try_lock
 * keeps that lease alive and holds again when its key still leads and the
 * lease's granted TTL covers this client's lease (else it revokes it and
 * acquires afresh). An election's resume on etcd is this.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "etcd.h"
#include "hold.h"
#include "util.h"

#define KEY_MAX DLOCK__ETCD_KEY_MAX
#define TICK_MS 100 /* how often a waiter checks whether a keepalive is due */

typedef struct etcd_lock {
    dlock_client *c;
    dlock_lock *pub; /* the public handle (for on_lost) */
    dlock__gw *gw;
    char *name, *dir, *key; /* key: dir without its trailing '/' */
    dlock_lost_fn on_lost;
    void *on_lost_ud;
    dlock__hold hold; /* held / lost / unknown / watched / orphaned (hold.h) */
    dlock__gw_wait *wait;

    pthread_mutex_t mu; /* guards everything below */
    bool canceled;
    int64_t lease;      /* lease of the current / last acquisition, 0 none */
    char owner[17];     /* the lease as 16 hex digits ("" if never) */
    char mykey[KEY_MAX];
    uint64_t fence;
    int64_t acquired_ms, lease_ms;
    char *label;        /* NULL: none; what each acquisition writes */
    int64_t resume_lease; /* an earlier process's lease to resume (owner id), 0 none */
} etcd_lock;

/* One acquisition attempt: our lease and key. */
typedef struct session {
    etcd_lock *l;
    int64_t lease, ttl_s, period_ms;
    char key[KEY_MAX];
    size_t keylen;
    int64_t rev;        /* our key's create_revision */
    int64_t ka_sent_ms; /* when the grant or last good keepalive was sent */
    int64_t next_ka_ms;
    bool waited;        /* we were not first: the lease ran while we waited */
} session;

#define ETCD_OF(p) ((etcd_lock *)(void *)((char *)(p)-offsetof(etcd_lock, hold)))

static etcd_lock *of(const void *impl)
{
    return (etcd_lock *)impl;
}

/* ---- lease calls -------------------------------------------------------- */

static int grant(dlock__gw *g, int64_t ttl_s, int64_t *lease_out)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"TTL\":\"%" PRId64 "\"}", ttl_s);
    dlock__gw_reply r;
    int rc = dlock__gw_call(g, "/v3/lease/grant", body, DLOCK__GW_RETRY, &r);
    *lease_out = rc == 0 ? dlock__gw_int(&r.doc, r.root, "ID") : 0;
    if (rc == 0 && *lease_out == 0) rc = DLOCK_ESERVER;
    dlock__gw_reply_free(&r);
    return rc;
}

/* One keepalive request (not a stream), given up at until_ms (when the
 * lease may have run out: too late to help). 0 alive, ELOST gone, else
 * transport. */
static int keepalive(dlock__gw *g, int64_t lease, int64_t until_ms)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", lease);
    dlock__gw_reply r;
    int rc = dlock__gw_call_until(g, "/v3/lease/keepalive", body, DLOCK__GW_RETRY, until_ms, &r);
    if (rc == 0 && dlock__gw_int(&r.doc, r.root, "TTL") <= 0) rc = DLOCK_ELOST;
    if (rc == DLOCK_ESERVER && r.code == DLOCK__GRPC_NOT_FOUND) rc = DLOCK_ELOST;
    dlock__gw_reply_free(&r);
    return rc;
}

/* Revokes our lease. When the answer was lost, the lease being gone
 * means the revoke happened (or, in a corner, the lease ran out just
 * before: the lock is not held either way); alive means it did not:
 * revoke again, a few times. So a leader change during unlock is not
 * EUNKNOWN. */
static int revoke_resolved(dlock__gw *g, int64_t lease)
{
    int rc = dlock__etcd_revoke(g, lease);
    for (int i = 0; rc == DLOCK_EUNKNOWN && i < 3; i++) {
        int64_t ttl = 0;
        if (dlock__etcd_lease_ttl(g, lease, &ttl) != 0) break;
        if (ttl == -2) return 0;
        dlock__sleep_ms(dlock__backoff_ms(100, i, 1000));
        rc = dlock__etcd_revoke(g, lease);
    }
    return rc;
}

/* Keeps the session's lease alive while waiting (watch tick). */
static int session_tick(void *ud)
{
    session *s = ud;
    int64_t now = dlock__now_ms();
    if (now < s->next_ka_ms) return 0;
    int rc = keepalive(s->l->gw, s->lease, s->ka_sent_ms + s->ttl_s * 1000);
    if (rc == 0) s->ka_sent_ms = now;
    s->next_ka_ms = now + s->period_ms;
    return rc == DLOCK_ELOST ? rc : 0; /* transient failures: next time */
}

/* ---- the txns --------------------------------------------------------------- */

static void put_owner_range(dlock__buf *b, const char *dir)
{
    DLOCK__BUF_LIT(b, "{\"request_range\":{");
    dlock__etcd_put_dir_range(b, dir);
    DLOCK__BUF_LIT(b, ",\"sort_order\":\"ASCEND\",\"sort_target\":\"CREATE\",\"limit\":\"1\",\"keys_only\":true}}");
}

static int64_t range_rev(const dlock__gw_reply *r, int i)
{
    const dlock__json_val *rr = dlock__gw_get(&r->doc, dlock__gw_at(&r->doc, r->root, "responses", i), "response_range");
    return dlock__gw_int(&r->doc, dlock__gw_at(&r->doc, rr, "kvs", 0), "create_revision");
}

/* Creates our key if absent and reads the owner's create_revision. */
static int create_txn(session *s, int64_t *owner_rev_out)
{
    const etcd_lock *l = s->l;
    dlock__buf b = {0};
    DLOCK__BUF_LIT(&b, "{\"compare\":[{\"target\":\"CREATE\",\"create_revision\":\"0\",");
    dlock__gw_put_b64(&b, "key", s->key, s->keylen);
    DLOCK__BUF_LIT(&b, "}],\"success\":[{\"request_put\":{");
    dlock__gw_put_b64(&b, "key", s->key, s->keylen);
    DLOCK__BUF_LIT(&b, ",");
    pthread_mutex_lock(&((etcd_lock *)l)->mu); /* the label may be replaced (set_label) */
    char *value = dlock__etcd_key_value(l->c, l->label);
    pthread_mutex_unlock(&((etcd_lock *)l)->mu);
    if (value) dlock__gw_put_b64(&b, "value", value, strlen(value));
    else b.oom = true;
    free(value);
    dlock__buf_printf(&b, ",\"lease\":\"%" PRId64 "\"}},", s->lease);
    put_owner_range(&b, l->dir);
    DLOCK__BUF_LIT(&b, "],\"failure\":[{\"request_range\":{");
    dlock__gw_put_b64(&b, "key", s->key, s->keylen);
    DLOCK__BUF_LIT(&b, "}},");
    put_owner_range(&b, l->dir);
    DLOCK__BUF_LIT(&b, "]}");
    dlock__gw_reply r;
    int rc = dlock__gw_call_buf(l->gw, "/v3/kv/txn", &b, DLOCK__GW_RETRY, &r);
    if (rc == 0) {
        bool created = dlock__gw_bool(&r.doc, r.root, "succeeded");
        s->rev = created ? dlock__gw_int(&r.doc, dlock__gw_get(&r.doc, r.root, "header"), "revision") : range_rev(&r, 0);
        *owner_rev_out = range_rev(&r, 1);
        if (s->rev <= 0 || *owner_rev_out <= 0) rc = DLOCK_ESERVER;
    }
    dlock__gw_reply_free(&r);
    return rc;
}

/* Reads the key just before ours (prev, "" if none), whether ours still
 * exists, and the revision of the read (to watch from). */
static int prev_check(session *s, char *prev, size_t *prevlen, bool *mine_out, int64_t *rev_out)
{
    const etcd_lock *l = s->l;
    dlock__buf b = {0};
    DLOCK__BUF_LIT(&b, "{\"success\":[{\"request_range\":{");
    dlock__etcd_put_dir_range(&b, l->dir);
    dlock__buf_printf(&b, ",\"max_create_revision\":\"%" PRId64 "\",", s->rev - 1);
    DLOCK__BUF_LIT(&b, "\"sort_order\":\"DESCEND\",\"sort_target\":\"CREATE\",\"limit\":\"1\",\"keys_only\":true}},");
    DLOCK__BUF_LIT(&b, "{\"request_range\":{\"keys_only\":true,");
    dlock__gw_put_b64(&b, "key", s->key, s->keylen);
    DLOCK__BUF_LIT(&b, "}}]}");
    dlock__gw_reply r;
    int rc = dlock__gw_call_buf(l->gw, "/v3/kv/txn", &b, DLOCK__GW_RETRY, &r);
    if (rc == 0) {
        const dlock__json_val *r0 = dlock__gw_get(&r.doc, dlock__gw_at(&r.doc, r.root, "responses", 0), "response_range");
        const dlock__json_val *r1 = dlock__gw_get(&r.doc, dlock__gw_at(&r.doc, r.root, "responses", 1), "response_range");
        rc = dlock__gw_b64(&r.doc, dlock__gw_at(&r.doc, r0, "kvs", 0), "key", prev, KEY_MAX, prevlen);
        *mine_out = dlock__gw_at(&r.doc, r1, "kvs", 0) != NULL;
        *rev_out = dlock__gw_int(&r.doc, dlock__gw_get(&r.doc, r.root, "header"), "revision");
        if (!r0 || !r1) rc = DLOCK_ESERVER;
    }
    dlock__gw_reply_free(&r);
    return rc;
}

/* ---- one acquisition ------------------------------------------------------------ */

/* Grants our lease and queues our key. *owner_rev_out: the owner's rev. */
static int session_start(etcd_lock *l, session *s, int64_t *owner_rev_out)
{
    int64_t sent = dlock__now_ms();
    int rc = grant(l->gw, s->ttl_s, &s->lease);
    if (rc) return rc;
    s->ka_sent_ms = sent;
    s->next_ka_ms = sent + s->period_ms;
    int n = snprintf(s->key, sizeof(s->key), "%s%016" PRIx64, l->dir, (uint64_t)s->lease);
    s->keylen = n > 0 && (size_t)n < sizeof(s->key) ? (size_t)n : 0;
    rc = s->keylen ? create_txn(s, owner_rev_out) : DLOCK_EINVAL;
    if (rc == 0) return 0;
    /* The txn's answer was lost (or bad): revoking the lease removes the
     * key if it was created. Only if that fails too is the outcome open. */
    int rv = revoke_resolved(l->gw, s->lease);
    if (rv != 0 && rv != DLOCK_ELOST) return DLOCK_EUNKNOWN;
    s->lease = 0;
    return rc == DLOCK_EUNKNOWN ? DLOCK_ECONN : rc;
}

/* Leaves the queue (best effort: the lease expires anyway). */
static void session_end(session *s)
{
    if (s->lease) dlock__etcd_revoke(s->l->gw, s->lease);
    s->lease = 0;
}

static bool canceled(etcd_lock *l)
{
    pthread_mutex_lock(&l->mu);
    bool c = l->canceled;
    pthread_mutex_unlock(&l->mu);
    return c;
}

/* Waits until no key before ours is left. 0 (our turn), ELOST (our key
 * vanished: the lease expired while we waited), ETIMEOUT, ECANCELED. */
static int wait_turn(etcd_lock *l, session *s, int64_t deadline)
{
    char prev[KEY_MAX];
    for (int attempt = 0;; attempt++) {
        if (canceled(l)) return DLOCK_ECANCELED;
        size_t plen = 0;
        bool mine = false;
        int64_t rev = 0;
        int rc = session_tick(s);
        if (rc == 0) rc = prev_check(s, prev, &plen, &mine, &rev);
        if (rc == 0 && !mine) return DLOCK_ELOST;
        if (rc == 0 && plen == 0) return 0;
        if (rc == 0) {
            int64_t tick = s->period_ms < TICK_MS ? s->period_ms : TICK_MS;
            rc = dlock__gw_watch_delete(l->gw, l->wait, prev, plen, rev + 1, deadline, tick, session_tick, s);
            if (rc == 0) attempt = -1; /* deleted: re-check at once */
        }
        if (rc == 0) continue;
        /* Only transport trouble is waited out (as on Redis); an answer
         * etcd or the gateway gives (ESERVER, EAUTH) ends the wait. */
        if (rc != DLOCK_ECONN && rc != DLOCK_EUNKNOWN) return rc;
        if (dlock__now_ms() >= deadline) return DLOCK_ETIMEOUT;
        /* the stream broke or a member was unreachable: back off, re-check */
        int64_t pause = dlock__backoff_ms(50, attempt, 1000);
        int64_t left = deadline - dlock__now_ms();
        dlock__sleep_ms(pause < left ? pause : left);
    }
}

/* Acquires within wait_ms: queue, then wait for our turn; queues again
 * when our lease expired while we waited (e.g. the process was stopped). */
static int acquire(etcd_lock *l, int64_t wait_ms, session *s)
{
    int64_t deadline = wait_ms < 0 ? INT64_MAX : dlock__now_ms() + wait_ms;
    for (int attempt = 0;; attempt++) {
        int64_t owner_rev = 0;
        int rc = session_start(l, s, &owner_rev);
        if (rc == 0 && owner_rev == s->rev) return 0;
        if (rc == 0 && wait_ms == 0) {
            session_end(s);
            return DLOCK_EBUSY;
        }
        if (rc == 0) {
            s->waited = true;
            rc = wait_turn(l, s, deadline);
        }
        if (rc == 0) return 0;
        if (rc != DLOCK_EUNKNOWN) session_end(s);
        bool again = (rc == DLOCK_ELOST || rc == DLOCK_ECONN) && wait_ms != 0 && dlock__now_ms() < deadline;
        if (!again) return rc == DLOCK_ELOST ? DLOCK_ETIMEOUT : rc;
        dlock__log(l->c, DLOCK_LOG_WARN, "lock %s: %s while waiting; queuing again", l->name,
                   rc == DLOCK_ELOST ? "our lease expired" : "etcd unreachable");
        int64_t pause = dlock__backoff_ms(50, attempt, 1000), left = deadline - dlock__now_ms();
        dlock__sleep_ms(pause < left ? pause : left);
    }
}

/* ---- watchdog hooks (watchdog thread) ------------------------------------------- */

static int lock_renew(dlock__hold *h, int64_t lease_ms)
{
    (void)lease_ms; /* the lease's TTL was fixed when it was granted */
    etcd_lock *l = ETCD_OF(h);
    pthread_mutex_lock(&l->mu);
    int64_t lease = l->lease;
    pthread_mutex_unlock(&l->mu);
    /* no answer can help past the validity deadline */
    return keepalive(l->gw, lease, atomic_load(&h->wd.valid_until_ms));
}

/* The hold went HELD -> LOST (hold.c; the watchdog logged and counted it). */
static void lock_lost(dlock__hold *h, int reason)
{
    etcd_lock *l = ETCD_OF(h);
    dlock__log(l->c, DLOCK_LOG_ERROR, "lock %s (etcd) was lost while held: %s", l->name, dlock_strerror(reason));
    if (l->on_lost) l->on_lost(l->pub, reason, l->on_lost_ud);
}

/* ---- try_lock ------------------------------------------------------------------------ */

static void became_holder(etcd_lock *l, const session *s, int64_t lease_ms, int64_t sent_ms)
{
    pthread_mutex_lock(&l->mu);
    l->canceled = false;
    l->lease = s->lease;
    snprintf(l->owner, sizeof(l->owner), "%016" PRIx64, (uint64_t)s->lease);
    snprintf(l->mykey, sizeof(l->mykey), "%s", s->key);
    l->fence = (uint64_t)s->rev;
    l->lease_ms = lease_ms;
    pthread_mutex_unlock(&l->mu);
    (void)sent_ms;
    /* the lease was granted (or last kept alive) by a request sent at
     * ka_sent_ms; its TTL is the requested one rounded up to seconds, so
     * the requested ms is a safe lease to count */
    dlock__hold_begin(&l->hold, lease_ms == 0, s->ka_sent_ms,
                      lease_ms > 0 ? lease_ms : dlock__client_watchdog_ms(l->c));
}

static int put_value(etcd_lock *l, const char *key, int64_t lease, int64_t rev);

/* The lease's granted TTL in ms (0: gone). */
static int granted_ms(dlock__gw *g, int64_t lease, int64_t *ms_out)
{
    char body[64];
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", lease);
    dlock__gw_reply r;
    int rc = dlock__gw_call(g, "/v3/lease/timetolive", body, DLOCK__GW_RETRY, &r);
    int64_t ttl = rc == 0 ? dlock__gw_int(&r.doc, r.root, "TTL") : -1;
    /* TTL is whole seconds left, rounded down: 0 is alive, -1 gone */
    *ms_out = ttl >= 0 ? dlock__gw_int(&r.doc, r.root, "grantedTTL") * 1000 : 0;
    dlock__gw_reply_free(&r);
    return rc;
}

/* Resumes l->resume_lease into *s (see top): 0 when its key still leads,
 * DLOCK_ENOTHELD when it cannot be resumed (a fresh acquisition follows). */
static int resume(etcd_lock *l, session *s)
{
    int64_t lease = l->resume_lease, granted = 0;
    l->resume_lease = 0; /* one attempt */
    int rc = granted_ms(l->gw, lease, &granted);
    if (rc == 0 && granted == 0) return DLOCK_ENOTHELD;
    int64_t sent = dlock__now_ms();
    if (rc == 0) rc = keepalive(l->gw, lease, INT64_MAX); /* its full TTL from sent on */
    if (rc == DLOCK_ELOST) return DLOCK_ENOTHELD;
    if (rc) return rc;
    int n = snprintf(s->key, sizeof(s->key), "%s%016" PRIx64, l->dir, (uint64_t)lease);
    s->keylen = n > 0 && (size_t)n < sizeof(s->key) ? (size_t)n : 0;
    dlock__etcd_holder h;
    rc = dlock__etcd_holder_get(l->gw, l->dir, &h);
    if (rc) return rc;
    bool leads = h.found && strcmp(h.key, s->key) == 0 && granted >= s->ttl_s * 1000;
    if (!leads) { /* queued behind another, or a shorter lease than ours: start afresh */
        revoke_resolved(l->gw, lease);
        return DLOCK_ENOTHELD;
    }
    rc = put_value(l, s->key, lease, h.create_rev); /* this process's label */
    if (rc == DLOCK_ELOST) revoke_resolved(l->gw, lease); /* gone meanwhile: start afresh */
    if (rc) return rc == DLOCK_ELOST ? DLOCK_ENOTHELD : rc;
    s->lease = lease;
    s->rev = h.create_rev;
    s->ka_sent_ms = sent;
    s->next_ka_ms = sent + s->period_ms;
    dlock__log(l->c, DLOCK_LOG_INFO, "lock %s: resumed lease %016" PRIx64 " of an earlier holder", l->name,
               (uint64_t)lease);
    return 0;
}

/* Arguments checked by lock_api.c; *fence_out (if any) is 0. */
static int etcd_try_lock(void *ll, int64_t wait_ms, int64_t lease_ms, uint64_t *fence_out)
{
    etcd_lock *l = of(ll);
    bool held = dlock__hold_get(&l->hold) == DLOCK__HOLD_HELD;
    pthread_mutex_lock(&l->mu);
    bool was_canceled = l->canceled;
    bool lapsed = held && l->lease_ms > 0 && !dlock__hold_valid(&l->hold);
    l->canceled = false;
    pthread_mutex_unlock(&l->mu);
    if (was_canceled) return DLOCK_ECANCELED;
    if (lapsed) { /* the explicit lease ran out while "held" */
        dlock__hold_end(&l->hold, false);
        dlock__log(l->c, DLOCK_LOG_WARN, "lock %s: lease ran out before unlock", l->name);
        dlock__metrics_lost(l->c);
    } else if (held) {
        return DLOCK_EALREADY;
    }
    int64_t ttl_ms = lease_ms > 0 ? lease_ms : dlock__client_watchdog_ms(l->c);
    session s = {.l = l, .ttl_s = (ttl_ms + 999) / 1000, .period_ms = ttl_ms / 3 > 1 ? ttl_ms / 3 : 1};
    int64_t sent = dlock__now_ms();
    int rc = l->resume_lease ? resume(l, &s) : DLOCK_ENOTHELD;
    if (rc == DLOCK_ENOTHELD) rc = acquire(l, wait_ms, &s);
    if (rc == 0 && lease_ms > 0 && s.waited) {
        /* we waited: restart the lease so lease_ms counts from now */
        int64_t ka = dlock__now_ms();
        if (keepalive(l->gw, s.lease, INT64_MAX) == 0) s.ka_sent_ms = ka;
    }
    if (rc != DLOCK_ECANCELED) dlock__metrics_acquire(l->c, rc);
    if (rc == DLOCK_ECANCELED) { /* this wait used the cancel up */
        pthread_mutex_lock(&l->mu);
        l->canceled = false;
        pthread_mutex_unlock(&l->mu);
    }
    if (rc == DLOCK_EUNKNOWN) {
        dlock__hold_set_unknown(&l->hold, true);
        pthread_mutex_lock(&l->mu);
        l->lease = s.lease;
        snprintf(l->owner, sizeof(l->owner), "%016" PRIx64, (uint64_t)s.lease);
        snprintf(l->mykey, sizeof(l->mykey), "%s", s.key);
        pthread_mutex_unlock(&l->mu);
    }
    if (rc) return rc;
    became_holder(l, &s, lease_ms, sent);
    if (fence_out) *fence_out = (uint64_t)s.rev;
    return 0;
}

/* ---- unlock, cancel, is_held ------------------------------------------------------ */

/* Unlock of a handle holding nothing: a lost hold (its lease is revoked,
 * in case it still lives) or an acquire whose outcome was unknown. */
static int unlock_unheld(etcd_lock *l)
{
    bool was_lost = dlock__hold_take_lost(&l->hold);
    bool unknown = dlock__hold_get(&l->hold) == DLOCK__HOLD_UNKNOWN;
    pthread_mutex_lock(&l->mu);
    int64_t lease = l->lease;
    pthread_mutex_unlock(&l->mu);
    if (!was_lost && !unknown) return DLOCK_ENOTHELD;
    int rc = revoke_resolved(l->gw, lease);
    if (was_lost) return DLOCK_ELOST;
    if (rc == 0 || rc == DLOCK_ELOST) dlock__hold_set_unknown(&l->hold, false);
    return rc == DLOCK_ELOST ? DLOCK_ENOTHELD : rc;
}

static int etcd_unlock(void *ll)
{
    etcd_lock *l = of(ll);
    if (dlock__hold_get(&l->hold) != DLOCK__HOLD_HELD) return unlock_unheld(l);
    pthread_mutex_lock(&l->mu);
    int64_t lease = l->lease;
    pthread_mutex_unlock(&l->mu);
    /* Out of the watchdog first, so no keepalive finds the revoked lease
     * and reports a loss after a good unlock. */
    bool watched = dlock__hold_unwatch(&l->hold);
    int rc = revoke_resolved(l->gw, lease);
    if (rc != 0 && rc != DLOCK_ELOST) { /* EUNKNOWN: still held; see is_held_by_me */
        if (watched) dlock__hold_rewatch(&l->hold);
        return rc;
    }
    if (rc == DLOCK_ELOST) {
        bool counted = dlock__hold_get(&l->hold) == DLOCK__HOLD_LOST; /* the watchdog got there first */
        if (!counted) dlock__metrics_lost(l->c);
        dlock__log(l->c, DLOCK_LOG_WARN, "lock %s: release found its lease gone: it was lost while held", l->name);
    }
    dlock__hold_end(&l->hold, rc == 0);
    return rc;
}

static void etcd_cancel(void *ll)
{
    etcd_lock *l = of(ll);
    pthread_mutex_lock(&l->mu);
    l->canceled = true;
    pthread_mutex_unlock(&l->mu);
    dlock__gw_wait_cancel(l->wait);
}

static int64_t etcd_validity_ms(void *ll)
{
    return dlock__hold_validity_ms(&of(ll)->hold);
}

/* Puts key again with the value of l's label, same lease, if it is still
 * the key created at revision rev. 0, DLOCK_ELOST (it is not), or a
 * transport code. */
static int put_value(etcd_lock *l, const char *key, int64_t lease, int64_t rev)
{
    pthread_mutex_lock(&l->mu);
    char *value = dlock__etcd_key_value(l->c, l->label);
    pthread_mutex_unlock(&l->mu);
    if (!value) return DLOCK_ENOMEM;
    dlock__buf b = {0};
    DLOCK__BUF_LIT(&b, "{\"compare\":[{\"target\":\"CREATE\",");
    dlock__buf_printf(&b, "\"create_revision\":\"%" PRId64 "\",", rev);
    dlock__gw_put_b64(&b, "key", key, strlen(key));
    DLOCK__BUF_LIT(&b, "}],\"success\":[{\"request_put\":{");
    dlock__gw_put_b64(&b, "key", key, strlen(key));
    DLOCK__BUF_LIT(&b, ",");
    dlock__gw_put_b64(&b, "value", value, strlen(value));
    dlock__buf_printf(&b, ",\"lease\":\"%" PRId64 "\"}}]}", lease);
    free(value);
    dlock__gw_reply r;
    int rc = dlock__gw_call_buf(l->gw, "/v3/kv/txn", &b, DLOCK__GW_RETRY, &r);
    if (rc == 0 && !dlock__gw_bool(&r.doc, r.root, "succeeded")) rc = DLOCK_ELOST;
    dlock__gw_reply_free(&r);
    return rc;
}

/* Stores the label for the next acquisitions and, when held, puts it in
 * our key. Label checked by lock_api.c. */
static int etcd_set_label(void *ll, const char *label)
{
    etcd_lock *l = of(ll);
    char *copy = strdup(label);
    if (!copy) return DLOCK_ENOMEM;
    pthread_mutex_lock(&l->mu);
    free(l->label);
    l->label = copy;
    char mykey[KEY_MAX];
    snprintf(mykey, sizeof(mykey), "%s", l->mykey);
    int64_t lease = l->lease, rev = (int64_t)l->fence;
    pthread_mutex_unlock(&l->mu);
    if (!dlock__hold_valid(&l->hold)) return 0; /* only the next acquisitions */
    return put_value(l, mykey, lease, rev);
}

static int etcd_extend(void *ll, int64_t lease_ms)
{
    (void)ll;
    (void)lease_ms;
    return DLOCK_ENOTSUP; /* an etcd lease's TTL is fixed when granted */
}

/* ---- queries ------------------------------------------------------------------------ */

static int etcd_hold_count(void *ll, int64_t *count_out)
{
    etcd_lock *l = of(ll);
    dlock__hold_state st = dlock__hold_get(&l->hold);
    bool known = st == DLOCK__HOLD_HELD || st == DLOCK__HOLD_UNKNOWN;
    pthread_mutex_lock(&l->mu);
    char mine[KEY_MAX];
    snprintf(mine, sizeof(mine), "%s", l->mykey);
    pthread_mutex_unlock(&l->mu);
    if (!known) return 0;
    dlock__etcd_holder h;
    int rc = dlock__etcd_holder_get(l->gw, l->dir, &h);
    if (rc == 0) *count_out = h.found && strcmp(h.key, mine) == 0;
    return rc;
}

static int etcd_is_locked(void *ll, bool *locked_out)
{
    dlock__etcd_holder h;
    int rc = dlock__etcd_holder_get(of(ll)->gw, of(ll)->dir, &h);
    *locked_out = rc == 0 && h.found;
    return rc;
}

static int etcd_remaining_ttl(void *ll, int64_t *ttl_ms_out)
{
    dlock__etcd_holder h;
    int rc = dlock__etcd_holder_get(of(ll)->gw, of(ll)->dir, &h);
    if (rc == 0 && h.found) {
        *ttl_ms_out = -1;
        if (h.lease) rc = dlock__etcd_lease_ttl(of(ll)->gw, h.lease, ttl_ms_out);
    }
    return rc;
}

static const char *etcd_name(const void *l)
{
    return of(l)->name;
}

static const char *etcd_key(const void *l)
{
    return of(l)->key;
}

static const char *etcd_owner(const void *l)
{
    return of(l)->owner;
}

static uint64_t etcd_fence(const void *l)
{
    return of(l)->fence;
}

/* ---- construction --------------------------------------------------------------------- */

static void etcd_describe(const dlock__hold *h, char *buf, size_t len)
{
    snprintf(buf, len, "lock %s (etcd)", ETCD_OF(h)->name);
}

static const dlock__hold_ops hold_ops = {.renew = lock_renew, .lost = lock_lost,
                                         .describe = etcd_describe};

static void free_fields(etcd_lock *l)
{
    dlock__gw_wait_free(l->wait);
    free(l->name);
    free(l->dir);
    free(l->key);
    free(l->label);
    free(l);
}

/* Arguments checked by lock_api.c (client, name, kind). */
static int etcd_lock_new(dlock_client *c, const char *name, const dlock_lock_options *opts,
                         dlock_lock *pub, void **out)
{
    int64_t resume_lease = 0;
    if (opts->owner_id) { /* only a lease to resume (see top) */
        char *end = NULL;
        bool hex = strlen(opts->owner_id) == 16 && strspn(opts->owner_id, "0123456789abcdef") == 16;
        resume_lease = hex ? (int64_t)strtoull(opts->owner_id, &end, 16) : 0;
        if (resume_lease <= 0) return DLOCK_ENOTSUP;
    }
    if (opts->kind == DLOCK_LOCK_REENTRANT) return DLOCK_ENOTSUP;
    if (opts->kind != DLOCK_LOCK_SIMPLE) return DLOCK_EINVAL;
    etcd_lock *l = calloc(1, sizeof(*l));
    if (!l) return DLOCK_ENOMEM;
    l->c = c;
    l->pub = pub;
    l->gw = dlock__etcd_gw(c);
    l->on_lost = opts->on_lost;
    l->on_lost_ud = opts->on_lost_ud;
    int rc = 0;
    l->dir = dlock__etcd_lock_dir(c, name, &rc);
    l->name = strdup(name);
    l->key = l->dir ? strndup(l->dir, strlen(l->dir) - 1) : NULL;
    l->resume_lease = resume_lease; /* a label comes by set_label */
    if (!rc && (!l->name || !l->key || dlock__gw_wait_new(&l->wait) != 0)) rc = DLOCK_ENOMEM;
    if (!rc && pthread_mutex_init(&l->mu, NULL) != 0) rc = DLOCK_ENOMEM;
    if (!rc && dlock__hold_init(&l->hold, c, &hold_ops) != 0) {
        pthread_mutex_destroy(&l->mu);
        rc = DLOCK_ENOMEM;
    }
    if (rc) {
        free_fields(l);
        return rc;
    }
    *out = l;
    return 0;
}

static void etcd_free(void *ll)
{
    etcd_lock *l = of(ll);
    dlock__hold_free(&l->hold, "lock (etcd)"); /* safe after the client is gone */
    pthread_mutex_destroy(&l->mu);
    free_fields(l);
}

const dlock__lock_ops dlock__etcd_lock_ops = {
    .lock_new = etcd_lock_new, .try_lock = etcd_try_lock, .unlock = etcd_unlock,
    .cancel = etcd_cancel, .validity_ms = etcd_validity_ms, .hold_count = etcd_hold_count,
    .is_locked = etcd_is_locked, .remaining_ttl = etcd_remaining_ttl, .extend = etcd_extend,
    .name = etcd_name, .key = etcd_key, .owner = etcd_owner, .fence = etcd_fence,
    .free = etcd_free, .force_unlock = dlock__etcd_force_unlock,
    .status_get = dlock__etcd_status_get, .set_label = etcd_set_label, .fence_guard = dlock__etcd_fence_guard};
