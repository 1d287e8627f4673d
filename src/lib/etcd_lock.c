/* etcd_lock.c: the mutex on etcd, the way etcd's own concurrency.Mutex
 * works, behind the public dlock_lock_* API (reached through
 * lock_dispatch.c when the client was made from an etcd URL).
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
 * mode the client's watchdog thread sends one keepalive per lease every
 * timeout/3; a keepalive finding the lease gone, or none succeeding for a
 * whole timeout, marks the lock lost exactly as on Redis.
 * States: free -> held -> free, or held -> lost (is_held false, the next
 * unlock says ELOST); unknown (the acquire's last answer was lost and the
 * clean-up failed too): the lease is kept so queries and unlock resolve it.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "util.h"

#define KEY_MAX DLOCK__ETCD_KEY_MAX
#define TICK_MS 100 /* how often a waiter checks whether a keepalive is due */

static const char lock_magic = 'E';

typedef struct etcd_lock {
    const void *magic; /* must stay first: &lock_magic (see dlock__etcd_is_lock) */
    dlock_client *c;
    dlock__gw *gw;
    char *name, *dir, *key; /* key: dir without its trailing '/' */
    dlock_lost_fn on_lost;
    void *on_lost_ud;
    dlock__renewable rn;
    dlock__held hd;
    dlock__gw_wait *wait;

    pthread_mutex_t mu; /* guards everything below */
    bool held, lost, canceled, watched, orphaned, unknown;
    int64_t lease;      /* lease of the current / last acquisition, 0 none */
    char owner[17];     /* the lease as 16 hex digits ("" if never) */
    char mykey[KEY_MAX];
    uint64_t fence;
    int64_t acquired_ms, lease_ms, expires_ms;
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

#define ETCD_OF(p, field) ((etcd_lock *)(void *)((char *)(p)-offsetof(etcd_lock, field)))

static etcd_lock *of(const dlock_lock *l)
{
    return (etcd_lock *)(void *)l;
}

bool dlock__etcd_is_lock(const dlock_lock *l)
{
    const void *first = NULL;
    if (l) memcpy(&first, l, sizeof(first)); /* both lock structs start with a pointer */
    return first == &lock_magic;
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
    const char *id = dlock_client_id(l->c);
    dlock__gw_put_b64(&b, "value", id, strlen(id));
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

static int lock_renew(dlock__renewable *r, int64_t lease_ms)
{
    (void)lease_ms; /* the lease's TTL was fixed when it was granted */
    etcd_lock *l = ETCD_OF(r, rn);
    pthread_mutex_lock(&l->mu);
    int64_t lease = l->lease;
    pthread_mutex_unlock(&l->mu);
    /* last_ok_ms is the watchdog's, and this runs on its thread */
    return keepalive(l->gw, lease, r->last_ok_ms + dlock__client_watchdog_ms(l->c));
}

static void lock_lost(dlock__renewable *r, int reason)
{
    etcd_lock *l = ETCD_OF(r, rn);
    pthread_mutex_lock(&l->mu);
    bool was = l->held;
    if (was) {
        l->held = l->watched = false;
        l->lost = true;
    }
    pthread_mutex_unlock(&l->mu);
    if (!was) return;
    dlock__log(l->c, DLOCK_LOG_ERROR, "lock %s (etcd) was lost while held: %s", l->name, dlock_strerror(reason));
    if (l->on_lost) l->on_lost((dlock_lock *)(void *)l, reason, l->on_lost_ud);
}

/* ---- try_lock ------------------------------------------------------------------------ */

static void became_holder(etcd_lock *l, const session *s, int64_t lease_ms, int64_t sent_ms)
{
    pthread_mutex_lock(&l->mu);
    l->held = true;
    l->lost = l->unknown = l->canceled = false;
    l->lease = s->lease;
    snprintf(l->owner, sizeof(l->owner), "%016" PRIx64, (uint64_t)s->lease);
    snprintf(l->mykey, sizeof(l->mykey), "%s", s->key);
    l->fence = (uint64_t)s->rev;
    l->acquired_ms = sent_ms;
    l->lease_ms = lease_ms;
    l->expires_ms = s->ka_sent_ms + lease_ms;
    l->watched = lease_ms == 0;
    pthread_mutex_unlock(&l->mu);
    if (lease_ms == 0) {
        l->rn.last_ok_ms = s->ka_sent_ms;
        dlock__watchdog_add(l->c, &l->rn);
    }
}

int dlock__etcd_lock_try_lock(dlock_lock *ll, int64_t wait_ms, int64_t lease_ms, uint64_t *fence_out)
{
    etcd_lock *l = of(ll);
    if (fence_out) *fence_out = 0;
    if (lease_ms < 0 || wait_ms < DLOCK_WAIT_FOREVER) return DLOCK_EINVAL;
    pthread_mutex_lock(&l->mu);
    bool was_canceled = l->canceled, held = l->held;
    bool lapsed = held && l->lease_ms > 0 && dlock__now_ms() >= l->expires_ms;
    l->canceled = false;
    if (lapsed) l->held = false; /* the explicit lease ran out while "held" */
    pthread_mutex_unlock(&l->mu);
    if (was_canceled) return DLOCK_ECANCELED;
    if (lapsed) {
        dlock__log(l->c, DLOCK_LOG_WARN, "lock %s: lease ran out before unlock", l->name);
        dlock__metrics_lost(l->c);
    } else if (held) {
        return DLOCK_EALREADY;
    }
    int64_t ttl_ms = lease_ms > 0 ? lease_ms : dlock__client_watchdog_ms(l->c);
    session s = {.l = l, .ttl_s = (ttl_ms + 999) / 1000, .period_ms = ttl_ms / 3 > 1 ? ttl_ms / 3 : 1};
    int64_t sent = dlock__now_ms();
    int rc = acquire(l, wait_ms, &s);
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
        pthread_mutex_lock(&l->mu);
        l->unknown = true;
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

/* Ends a hold (released, or found lost by us). */
static void end_hold(etcd_lock *l, bool released)
{
    pthread_mutex_lock(&l->mu);
    bool watched = l->watched;
    pthread_mutex_unlock(&l->mu);
    if (watched) dlock__watchdog_remove(l->c, &l->rn);
    pthread_mutex_lock(&l->mu);
    int64_t held_ms = dlock__now_ms() - l->acquired_ms;
    l->held = l->lost = l->watched = false;
    pthread_mutex_unlock(&l->mu);
    if (released) dlock__metrics_hold(l->c, held_ms);
}

/* Unlock of a handle holding nothing: a lost hold (its lease is revoked,
 * in case it still lives) or an acquire whose outcome was unknown. */
static int unlock_unheld(etcd_lock *l)
{
    pthread_mutex_lock(&l->mu);
    bool was_lost = l->lost, unknown = l->unknown;
    int64_t lease = l->lease;
    l->lost = false;
    pthread_mutex_unlock(&l->mu);
    if (!was_lost && !unknown) return DLOCK_ENOTHELD;
    int rc = revoke_resolved(l->gw, lease);
    if (was_lost) return DLOCK_ELOST;
    if (rc == 0 || rc == DLOCK_ELOST) {
        pthread_mutex_lock(&l->mu);
        l->unknown = false;
        pthread_mutex_unlock(&l->mu);
    }
    return rc == DLOCK_ELOST ? DLOCK_ENOTHELD : rc;
}

int dlock__etcd_lock_unlock(dlock_lock *ll)
{
    etcd_lock *l = of(ll);
    pthread_mutex_lock(&l->mu);
    bool held = l->held, watched = l->watched;
    int64_t lease = l->lease;
    pthread_mutex_unlock(&l->mu);
    if (!held) return unlock_unheld(l);
    /* Out of the watchdog first, so no keepalive finds the revoked lease
     * and reports a loss after a good unlock. */
    if (watched) dlock__watchdog_remove(l->c, &l->rn);
    int rc = revoke_resolved(l->gw, lease);
    if (rc != 0 && rc != DLOCK_ELOST) { /* EUNKNOWN: still held; see is_held_by_me */
        if (watched) dlock__watchdog_add(l->c, &l->rn);
        return rc;
    }
    if (rc == DLOCK_ELOST) {
        pthread_mutex_lock(&l->mu);
        bool counted = l->lost; /* the watchdog got there first */
        pthread_mutex_unlock(&l->mu);
        if (!counted) dlock__metrics_lost(l->c);
        dlock__log(l->c, DLOCK_LOG_WARN, "lock %s: release found its lease gone: it was lost while held", l->name);
    }
    end_hold(l, rc == 0);
    return rc;
}

void dlock__etcd_lock_cancel(dlock_lock *ll)
{
    etcd_lock *l = of(ll);
    pthread_mutex_lock(&l->mu);
    l->canceled = true;
    pthread_mutex_unlock(&l->mu);
    dlock__gw_wait_cancel(l->wait);
}

bool dlock__etcd_lock_is_held(dlock_lock *ll)
{
    etcd_lock *l = of(ll);
    pthread_mutex_lock(&l->mu);
    bool h = l->held && (l->lease_ms == 0 || dlock__now_ms() < l->expires_ms);
    pthread_mutex_unlock(&l->mu);
    return h;
}

int dlock__etcd_lock_extend(dlock_lock *ll, int64_t lease_ms)
{
    (void)ll;
    (void)lease_ms;
    return DLOCK_ENOTSUP; /* an etcd lease's TTL is fixed when granted */
}

/* ---- queries ------------------------------------------------------------------------ */

int dlock__etcd_lock_hold_count(dlock_lock *ll, int64_t *count_out)
{
    etcd_lock *l = of(ll);
    if (!count_out) return DLOCK_EINVAL;
    *count_out = 0;
    pthread_mutex_lock(&l->mu);
    bool known = l->held || l->unknown;
    char mine[KEY_MAX];
    snprintf(mine, sizeof(mine), "%s", l->mykey);
    pthread_mutex_unlock(&l->mu);
    if (!known) return 0;
    dlock__etcd_holder h;
    int rc = dlock__etcd_holder_get(l->gw, l->dir, &h);
    if (rc == 0) *count_out = h.found && strcmp(h.key, mine) == 0;
    return rc;
}

int dlock__etcd_lock_is_held_by_me(dlock_lock *ll, bool *held_out)
{
    if (!held_out) return DLOCK_EINVAL;
    int64_t n = 0;
    int rc = dlock__etcd_lock_hold_count(ll, &n);
    *held_out = rc == 0 && n > 0;
    return rc;
}

int dlock__etcd_lock_is_locked(dlock_lock *ll, bool *locked_out)
{
    if (!locked_out) return DLOCK_EINVAL;
    dlock__etcd_holder h;
    int rc = dlock__etcd_holder_get(of(ll)->gw, of(ll)->dir, &h);
    *locked_out = rc == 0 && h.found;
    return rc;
}

int dlock__etcd_lock_remaining_ttl(dlock_lock *ll, int64_t *ttl_ms_out)
{
    if (!ttl_ms_out) return DLOCK_EINVAL;
    *ttl_ms_out = -2;
    dlock__etcd_holder h;
    int rc = dlock__etcd_holder_get(of(ll)->gw, of(ll)->dir, &h);
    if (rc == 0 && h.found) {
        *ttl_ms_out = -1;
        if (h.lease) rc = dlock__etcd_lease_ttl(of(ll)->gw, h.lease, ttl_ms_out);
    }
    return rc;
}

const char *dlock__etcd_lock_name(const dlock_lock *l)
{
    return of(l)->name;
}

const char *dlock__etcd_lock_key(const dlock_lock *l)
{
    return of(l)->key;
}

const char *dlock__etcd_lock_owner(const dlock_lock *l)
{
    return of(l)->owner;
}

uint64_t dlock__etcd_lock_fence(const dlock_lock *l)
{
    return of(l)->fence;
}

/* ---- construction --------------------------------------------------------------------- */

static void describe_held(const dlock__held *h, char *buf, size_t len)
{
    etcd_lock *l = ETCD_OF(h, hd);
    pthread_mutex_lock(&l->mu);
    bool held = l->held;
    pthread_mutex_unlock(&l->mu);
    if (held) snprintf(buf, len, "lock %s (etcd)", l->name);
    else if (len) buf[0] = '\0';
}

static void orphan_held(dlock__held *h)
{
    etcd_lock *l = ETCD_OF(h, hd);
    pthread_mutex_lock(&l->mu);
    l->held = l->watched = false;
    l->orphaned = true;
    pthread_mutex_unlock(&l->mu);
}

static void free_fields(etcd_lock *l)
{
    dlock__gw_wait_free(l->wait);
    free(l->name);
    free(l->dir);
    free(l->key);
    free(l);
}

int dlock__etcd_lock_new(dlock_client *c, const char *name, const dlock_lock_options *opts, dlock_lock **out)
{
    if (opts->kind == DLOCK_LOCK_REENTRANT || opts->owner_id) return DLOCK_ENOTSUP;
    if (opts->kind != DLOCK_LOCK_SIMPLE) return DLOCK_EINVAL;
    etcd_lock *l = calloc(1, sizeof(*l));
    if (!l) return DLOCK_ENOMEM;
    l->magic = &lock_magic;
    l->c = c;
    l->gw = dlock__etcd_gw(c);
    l->on_lost = opts->on_lost;
    l->on_lost_ud = opts->on_lost_ud;
    int rc = 0;
    l->dir = dlock__etcd_lock_dir(c, name, &rc);
    l->name = strdup(name);
    l->key = l->dir ? strndup(l->dir, strlen(l->dir) - 1) : NULL;
    if (!rc && (!l->name || !l->key || dlock__gw_wait_new(&l->wait) != 0)) rc = DLOCK_ENOMEM;
    if (!rc && pthread_mutex_init(&l->mu, NULL) != 0) rc = DLOCK_ENOMEM;
    if (rc) {
        free_fields(l);
        return rc;
    }
    l->rn.renew = lock_renew;
    l->rn.lost = lock_lost;
    l->hd.describe = describe_held;
    l->hd.orphan = orphan_held;
    dlock__held_add(c, &l->hd);
    *out = (dlock_lock *)(void *)l;
    return 0;
}

void dlock__etcd_lock_free(dlock_lock *ll)
{
    etcd_lock *l = of(ll);
    pthread_mutex_lock(&l->mu);
    bool held = l->held, orphaned = l->orphaned;
    pthread_mutex_unlock(&l->mu);
    if (!orphaned) {
        dlock__watchdog_remove(l->c, &l->rn); /* a lost-lock callback may still run */
        dlock__held_remove(l->c, &l->hd);
    }
    if (held && !orphaned)
        dlock__log(l->c, DLOCK_LOG_WARN, "lock %s (etcd) freed while held: not released, it expires on its lease",
                   l->name);
    pthread_mutex_destroy(&l->mu);
    free_fields(l);
}
