/* async_ratelimit.c: dlock_async_ratelimit (async.h), the GCRA limiter of
 * ratelimit.h on an event loop: the same bucket keys (key_prefix + name +
 * ":" + subject), the same script (lua/rl_acquire.lua, on the server's
 * clock) and options, so blocking and asynchronous limiters of one name
 * share buckets. A limiter has no per-call state: any number of tries may
 * be in flight; each is a record on the limiter's list until its answer,
 * so freeing the limiter or the client ends each one once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/ratelimit.h"
#include "async_internal.h"
#include "family.h"

extern const dlock__script dlock__script_rl_acquire;

typedef struct rl_call {
    dlock_async_ratelimit *rl;
    dlock_async_ratelimit_fn cb;
    void *ud;
    bool done; /* ended by a free: the answer, when it comes, is dropped */
    struct rl_call *prev, *next;
} rl_call;

struct dlock_async_ratelimit {
    dlock__aobj obj;
    dlock_async_client *c;
    char *base; /* prefix + name */
    char interval[40], burst[24];
    int64_t burst_n;
    rl_call *calls;
    int refs;
    bool orphaned, freed;
};

#define RL_OF_OBJ(p) ((dlock_async_ratelimit *)(void *)((char *)(p)-offsetof(dlock_async_ratelimit, obj)))

static void unref(dlock_async_ratelimit *rl)
{
    if (--rl->refs) return;
    free(rl->base);
    free(rl);
}

static void unlink_call(rl_call *k)
{
    if (k->prev) k->prev->next = k->next;
    else if (k->rl->calls == k) k->rl->calls = k->next;
    if (k->next) k->next->prev = k->prev;
    k->prev = k->next = NULL;
}

/* Ends every call in flight with rc (their answers will be dropped). */
static void end_calls(dlock_async_ratelimit *rl, int rc)
{
    rl->refs++;
    while (rl->calls) {
        rl_call *k = rl->calls;
        unlink_call(k);
        k->done = true;
        k->cb(rl, rc, NULL, k->ud);
    }
    unref(rl);
}

static void on_answer(void *priv, const dlock__reply *reply, int rc, uint64_t tag)
{
    (void)tag;
    rl_call *k = priv;
    dlock_async_ratelimit *rl = k->rl;
    if (!k->done) {
        unlink_call(k);
        dlock_ratelimit_result res = {0};
        if (rc == 0 && dlock__reply_kind(reply) == DLOCK__R_ARRAY) {
            long long code = dlock__reply_int(dlock__reply_at(reply, 0));
            long long val = dlock__reply_int(dlock__reply_at(reply, 1));
            res.allowed = code == 1;
            if (code == 1) res.remaining = val;
            else res.retry_after_ms = val < 1 ? 1 : val;
            if (code < 0) rc = DLOCK_ELIMIT;
        } else if (rc == 0) {
            rc = DLOCK_ESERVER;
        }
        rl->refs++;
        k->cb(rl, rc, rc == 0 ? &res : NULL, k->ud);
        unref(rl);
    }
    free(k);
    unref(rl);
}

static void orphan(dlock__aobj *o)
{
    dlock_async_ratelimit *rl = RL_OF_OBJ(o);
    rl->orphaned = true;
    end_calls(rl, DLOCK_ECLOSED);
}

DLOCK_API int dlock_async_ratelimit_new(dlock_async_client *c, const char *name, const dlock_ratelimit_options *opts,
                                        dlock_async_ratelimit **rl_out)
{
    if (!c || !rl_out) return DLOCK_EINVAL;
    *rl_out = NULL;
    if (dlock__ac_closing(c)) return DLOCK_ECLOSED;
    dlock_async_ratelimit *rl = calloc(1, sizeof(*rl));
    if (!rl) return DLOCK_ENOMEM;
    int rc = dlock__ratelimit_params(opts, rl->interval, rl->burst, &rl->burst_n);
    if (rc == 0 && dlock__check_name(name) != 0) rc = DLOCK_EINVAL;
    const char *prefix = dlock__ac_options(c)->key_prefix;
    size_t n = rc ? 0 : strlen(prefix) + strlen(name) + 1;
    if (rc == 0 && !(rl->base = malloc(n))) rc = DLOCK_ENOMEM;
    if (rc) {
        free(rl);
        return rc;
    }
    snprintf(rl->base, n, "%s%s", prefix, name);
    rl->c = c;
    rl->refs = 1;
    rl->obj.orphan = orphan;
    dlock__ac_add_obj(c, &rl->obj);
    *rl_out = rl;
    return 0;
}

DLOCK_API int dlock_async_ratelimit_try_acquire(dlock_async_ratelimit *rl, const char *subject, int64_t n,
                                                dlock_async_ratelimit_fn cb, void *ud)
{
    if (!rl || !cb || n < 1 || dlock__check_name(subject) != 0) return DLOCK_EINVAL;
    if (rl->orphaned) return DLOCK_ECLOSED;
    if (n > rl->burst_n) return DLOCK_ELIMIT;
    size_t klen = strlen(rl->base) + strlen(subject) + 2;
    char *key = malloc(klen);
    rl_call *k = calloc(1, sizeof(*k));
    if (!key || !k) {
        free(key);
        free(k);
        return DLOCK_ENOMEM;
    }
    snprintf(key, klen, "%s:%s", rl->base, subject);
    char num[24];
    snprintf(num, sizeof(num), "%lld", (long long)n);
    const char *keys[1] = {key};
    const char *args[3] = {rl->interval, rl->burst, num};
    *k = (rl_call){.rl = rl, .cb = cb, .ud = ud};
    int rc = dlock__ac_eval(rl->c, &dlock__script_rl_acquire, 1, keys, 3, args, on_answer, k, 0);
    free(key);
    if (rc) {
        free(k);
        return rc;
    }
    rl->refs++;
    k->next = rl->calls;
    if (rl->calls) rl->calls->prev = k;
    rl->calls = k;
    return 0;
}

DLOCK_API void dlock_async_ratelimit_free(dlock_async_ratelimit *rl)
{
    if (!rl || rl->freed) return;
    rl->freed = true;
    if (!rl->orphaned) {
        end_calls(rl, DLOCK_ECANCELED);
        dlock__ac_remove_obj(rl->c, &rl->obj);
    }
    unref(rl);
}
