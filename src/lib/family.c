/* family.c: helpers shared by the lock family (see family.h): owner ids,
 * companion keys, {code, value} script replies, per-handle cancellation and
 * the subscribe-then-try wait loop. Invariant: every wait is bounded by the
 * caller's wait_ms and wakes on cancel within one scheduling delay.
 */
#include "family.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

int dlock__fam_owner(const dlock_client *c, char out[DLOCK__FAM_OWNER_LEN])
{
    char rnd[17];
    int rc = dlock__err_from_common(dlock__random_hex(rnd, 8));
    if (rc) return rc;
    int n = snprintf(out, DLOCK__FAM_OWNER_LEN, "%s:%s", dlock_client_id(c), rnd);
    return n > 0 && n < DLOCK__FAM_OWNER_LEN ? 0 : DLOCK_EINVAL;
}

int dlock__fam_keys(const dlock_client *c, const char *name, int n, const char *const *suffixes,
                    char (*out)[DLOCK__KEY_MAX])
{
    int rc = dlock__client_check_name(c, "object", name);
    if (rc) return rc;
    rc = dlock__client_key(c, name, out[0], DLOCK__KEY_MAX);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = dlock__companion_key(out[0], suffixes[i], out[i + 1], DLOCK__KEY_MAX);
    return rc;
}

static bool reply_ll(const dlock__reply *r, long long *v)
{
    if (!r) return false;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER) {
        *v = dlock__reply_int(r);
        return true;
    }
    if (dlock__reply_kind(r) == DLOCK__R_NIL) {
        *v = 0;
        return true;
    }
    return false;
}

int dlock__fam_eval(dlock_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                    int nargs, const char *const *args, long long *code_out, long long *val_out,
                    long long *val2_out)
{
    dlock__reply *r = NULL;
    int rc = dlock__client_eval(c, s, nkeys, keys, nargs, args, &r);
    if (rc) return rc;
    long long code = 0, val = 0, val2 = 0;
    bool ok;
    if (dlock__reply_kind(r) == DLOCK__R_ARRAY) {
        size_t n = dlock__reply_count(r);
        ok = n >= 2 && reply_ll(dlock__reply_at(r, 0), &code) &&
             reply_ll(dlock__reply_at(r, 1), &val) &&
             (n < 3 || reply_ll(dlock__reply_at(r, 2), &val2));
    } else {
        ok = reply_ll(r, &code);
    }
    if (!ok) {
        const char *msg = dlock__reply_kind(r) == DLOCK__R_ERROR ? dlock__reply_str(r, NULL)
                                                                 : "unexpected reply shape";
        dlock__log(c, DLOCK_LOG_ERROR, "script %s: %s", s->name, msg);
        dlock__reply_free(r);
        return DLOCK_ESERVER;
    }
    dlock__reply_free(r);
    *code_out = code;
    if (val_out) *val_out = val;
    if (val2_out) *val2_out = val2;
    return 0;
}

int dlock__fam_renew(dlock_client *c, const dlock__script *s, int nkeys, const char *const *keys,
                     const char *owner, int64_t lease_ms, long long *code_out)
{
    char lease[24];
    dlock__fam_fmt_i64(lease, sizeof(lease), lease_ms);
    const char *args[2] = {owner, lease};
    return dlock__fam_eval(c, s, nkeys, keys, 2, args, code_out, NULL, NULL);
}

int dlock__fam_fmt_i64(char *buf, size_t len, int64_t v)
{
    int n = snprintf(buf, len, "%lld", (long long)v);
    return n > 0 && (size_t)n < len ? 0 : DLOCK_EINVAL;
}

int dlock__fam_hcount(dlock_client *c, const char *key, const char *owner, int64_t *count_out)
{
    *count_out = 0;
    const char *argv[3] = {"HGET", key, owner};
    dlock__reply *r = NULL;
    int rc = dlock__client_cmd(c, 3, argv, NULL, &r);
    if (rc) return rc;
    if (dlock__reply_kind(r) == DLOCK__R_STRING) *count_out = strtoll(dlock__reply_str(r, NULL), NULL, 10);
    else if (dlock__reply_kind(r) == DLOCK__R_ERROR && !dlock__reply_is_error(r, "WRONGTYPE")) rc = DLOCK_ESERVER;
    dlock__reply_free(r);
    return rc;
}

/* ---- cancellation ------------------------------------------------------ */

int dlock__waitctl_init(dlock__waitctl *ctl)
{
    memset(ctl, 0, sizeof(*ctl));
    if (pthread_mutex_init(&ctl->mu, NULL) != 0) return DLOCK_ENOMEM;
    if (dlock__cond_init(&ctl->cv) != 0) {
        pthread_mutex_destroy(&ctl->mu);
        return DLOCK_ENOMEM;
    }
    return 0;
}

void dlock__waitctl_destroy(dlock__waitctl *ctl)
{
    pthread_cond_destroy(&ctl->cv);
    pthread_mutex_destroy(&ctl->mu);
}

void dlock__waitctl_cancel(dlock__waitctl *ctl)
{
    pthread_mutex_lock(&ctl->mu);
    ctl->gen++;
    if (ctl->active == 0) ctl->cancel_next = true; /* nobody waits: the next wait returns */
    for (dlock__wnode *n = ctl->head; n; n = n->next) dlock__wait_cancel(n->w);
    pthread_cond_broadcast(&ctl->cv);
    pthread_mutex_unlock(&ctl->mu);
}

uint64_t dlock__waitctl_start(dlock__waitctl *ctl)
{
    pthread_mutex_lock(&ctl->mu);
    uint64_t g = ctl->gen;
    ctl->active++;
    if (ctl->cancel_next) {
        ctl->cancel_next = false;
        g--; /* already stale: this wait reports ECANCELED */
    }
    pthread_mutex_unlock(&ctl->mu);
    return g;
}

void dlock__waitctl_end(dlock__waitctl *ctl)
{
    pthread_mutex_lock(&ctl->mu);
    ctl->active--;
    pthread_mutex_unlock(&ctl->mu);
}

bool dlock__waitctl_take_pending(dlock__waitctl *ctl)
{
    pthread_mutex_lock(&ctl->mu);
    bool pending = ctl->cancel_next;
    ctl->cancel_next = false;
    pthread_mutex_unlock(&ctl->mu);
    return pending;
}

bool dlock__waitctl_canceled(dlock__waitctl *ctl, uint64_t gen)
{
    pthread_mutex_lock(&ctl->mu);
    bool c = ctl->gen != gen;
    pthread_mutex_unlock(&ctl->mu);
    return c;
}

int dlock__waitctl_sleep(dlock__waitctl *ctl, uint64_t gen, int64_t ms)
{
    struct timespec ts;
    dlock__abstime_ms(ms, &ts);
    pthread_mutex_lock(&ctl->mu);
    int rc = 0;
    while (ctl->gen == gen && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&ctl->cv, &ctl->mu, &ts);
    bool canceled = ctl->gen != gen;
    pthread_mutex_unlock(&ctl->mu);
    return canceled ? DLOCK_ECANCELED : 0;
}

static void ctl_link(dlock__waitctl *ctl, dlock__wnode *n, uint64_t gen)
{
    pthread_mutex_lock(&ctl->mu);
    n->next = ctl->head;
    ctl->head = n;
    if (ctl->gen != gen) dlock__wait_cancel(n->w); /* cancel raced the subscribe */
    pthread_mutex_unlock(&ctl->mu);
}

static void ctl_unlink(dlock__waitctl *ctl, dlock__wnode *n)
{
    pthread_mutex_lock(&ctl->mu);
    for (dlock__wnode **p = &ctl->head; *p; p = &(*p)->next) {
        if (*p == n) {
            *p = n->next;
            break;
        }
    }
    pthread_mutex_unlock(&ctl->mu);
}

/* ---- the wait loop ----------------------------------------------------- */

typedef struct wait_state {
    const dlock__wait_spec *spec;
    dlock__wnode node;
    char chan[DLOCK__KEY_MAX];
    bool subscribed;
} wait_state;

static void unsubscribe(wait_state *st)
{
    if (!st->subscribed) return;
    ctl_unlink(st->spec->ctl, &st->node);
    dlock__wait_end(st->node.w);
    st->node.w = NULL;
    st->subscribed = false;
}

/* Subscribes to the attempt's current channel; *changed tells the caller
 * to retry at once (a release may have happened before the subscription). */
static int follow_channel(wait_state *st, uint64_t gen, bool *changed)
{
    *changed = false;
    bool sharded = false;
    const char *want = st->spec->channel(st->spec->ctx, &sharded);
    if (st->subscribed && strcmp(want, st->chan) == 0) return 0;
    unsubscribe(st);
    snprintf(st->chan, sizeof(st->chan), "%s", want);
    int rc = st->spec->wake_one ? dlock__wait_begin_one(st->spec->c, st->chan, sharded, &st->node.w)
                                : dlock__wait_begin(st->spec->c, st->chan, sharded, &st->node.w);
    if (rc) return rc;
    st->subscribed = true;
    ctl_link(st->spec->ctl, &st->node, gen);
    *changed = true;
    return 0;
}

static int64_t nap_ms(int64_t recheck, int64_t hint, int64_t deadline)
{
    int64_t nap = recheck;
    if (hint >= 0 && hint + 1 < nap) nap = hint + 1;
    if (deadline >= 0) {
        int64_t left = deadline - dlock__now_ms();
        if (left < nap) nap = left;
    }
    return nap < 1 ? 1 : nap;
}

static int wait_loop(const dlock__wait_spec *sp, uint64_t gen)
{
    int64_t deadline = sp->wait_ms < 0 ? -1 : dlock__now_ms() + sp->wait_ms;
    int64_t hint = -1;
    if (dlock__waitctl_canceled(sp->ctl, gen)) return DLOCK_ECANCELED;
    int rc = sp->attempt(sp->ctx, &hint);
    if (rc != 0) return rc > 0 ? 0 : rc;
    if (sp->wait_ms == 0) return DLOCK_EBUSY;
    wait_state st = {.spec = sp};
    int64_t max_nap = sp->max_nap_ms > 0 ? sp->max_nap_ms : 1000;
    int64_t recheck = sp->min_nap_ms > 0 && sp->min_nap_ms < max_nap ? sp->min_nap_ms : max_nap;
    for (;;) {
        if (dlock__waitctl_canceled(sp->ctl, gen)) {
            rc = DLOCK_ECANCELED;
            break;
        }
        if (deadline >= 0 && dlock__now_ms() >= deadline) {
            rc = DLOCK_ETIMEOUT;
            break;
        }
        bool changed = false;
        if (sp->channel) {
            rc = follow_channel(&st, gen, &changed);
            if (rc) break;
        }
        if (!changed) {
            int64_t nap = nap_ms(recheck, hint, deadline);
            rc = st.subscribed ? dlock__wait(st.node.w, nap) : dlock__waitctl_sleep(sp->ctl, gen, nap);
            if (rc == DLOCK_ECANCELED || rc == DLOCK_ECLOSED) break;
            if (rc != 0 || !st.subscribed) recheck = recheck * 2 < max_nap ? recheck * 2 : max_nap;
        }
        rc = sp->attempt(sp->ctx, &hint);
        if (rc != 0) {
            if (rc > 0) rc = 0;
            break;
        }
    }
    unsubscribe(&st);
    return rc;
}

int dlock__fam_wait(const dlock__wait_spec *sp)
{
    uint64_t gen = dlock__waitctl_start(sp->ctl);
    int rc = wait_loop(sp, gen);
    dlock__waitctl_end(sp->ctl);
    return rc;
}

