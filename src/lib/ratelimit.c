/* ratelimit.c: GCRA rate limiter per subject (see dlock/ratelimit.h).
 *
 * Design: each subject's bucket is one string key holding its theoretical
 * arrival time (TAT) in microseconds of *server* time; lua/rl_acquire.lua
 * reads TIME, decides and stores the new TAT in one step, so concurrent
 * clients and skewed client clocks cannot over-admit. The key expires when
 * the bucket would be full again, so idle subjects cost no memory.
 * Invariant: over any window of T ms a subject is allowed at most
 * burst + T * rate / period tokens.
 */
#include "dlock/ratelimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "family.h"
#include "opts_read.h"

/* lua/<name>.lua, embedded with its SHA1 at build time (script.h) */
extern const dlock__script dlock__script_rl_acquire;
extern const dlock__script dlock__script_rl_peek;

struct dlock_ratelimit {
    dlock_client *c;
    char base[DLOCK__KEY_MAX]; /* prefix + name */
    char interval[40];         /* emission interval, microseconds */
    char burst[24];
    int64_t burst_n;
    dlock__waitctl ctl;
};

DLOCK_API void dlock_ratelimit_options_init(dlock_ratelimit_options *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof(*opts));
    opts->size = sizeof(*opts);
    opts->rate = 10;
    opts->period_ms = 1000;
}

int dlock__ratelimit_params(const dlock_ratelimit_options *opts, char interval[40], char burst[24],
                            int64_t *burst_n_out)
{
    dlock_ratelimit_options o;
    dlock_ratelimit_options_init(&o);
    if (opts && dlock__opts_read(&o, sizeof(o), DLOCK__SIZE_TO(dlock_ratelimit_options, burst), opts)) return DLOCK_EINVAL;
    if (o.burst == 0) o.burst = o.rate;
    if (o.rate < 1 || o.period_ms < 1 || o.burst < 1 || o.burst > 1000000000 ||
        o.period_ms > 86400000LL * 366)
        return DLOCK_EINVAL;
    double interval_us = (double)o.period_ms * 1000.0 / (double)o.rate;
    if (interval_us < 1.0) return DLOCK_EINVAL; /* finer than TIME resolution */
    snprintf(interval, 40, "%.6f", interval_us);
    snprintf(burst, 24, "%lld", (long long)o.burst);
    *burst_n_out = o.burst;
    return 0;
}

DLOCK_API int dlock_ratelimit_new(dlock_client *client, const char *name,
                                  const dlock_ratelimit_options *opts, dlock_ratelimit **rl_out)
{
    if (!client || !rl_out) return DLOCK_EINVAL;
    *rl_out = NULL;
    int offered = dlock__client_offers(client, DLOCK__OBJ_RATELIMIT, "rate limiter");
    if (offered) return offered;
    char interval[40], burst[24];
    int64_t burst_n;
    int rc = dlock__ratelimit_params(opts, interval, burst, &burst_n);
    if (rc) return rc;
    rc = dlock__client_check_name(client, "rate limiter", name);
    if (rc) return rc;
    dlock_ratelimit *rl = calloc(1, sizeof(*rl));
    if (!rl) return DLOCK_ENOMEM;
    rl->c = client;
    rc = dlock__client_key(client, name, rl->base, sizeof(rl->base));
    if (rc == 0) rc = dlock__waitctl_init(&rl->ctl);
    if (rc) {
        free(rl);
        return rc;
    }
    memcpy(rl->interval, interval, sizeof(interval));
    memcpy(rl->burst, burst, sizeof(burst));
    rl->burst_n = burst_n;
    *rl_out = rl;
    return 0;
}

static int subject_key(const dlock_ratelimit *rl, const char *subject, char *out, size_t len)
{
    if (dlock__check_name(subject) != 0) return DLOCK_EINVAL;
    int n = snprintf(out, len, "%s:%s", rl->base, subject);
    return n > 0 && (size_t)n < len ? 0 : DLOCK_EINVAL;
}

DLOCK_API int dlock_ratelimit_try_acquire(dlock_ratelimit *rl, const char *subject, int64_t n,
                                          dlock_ratelimit_result *result_out)
{
    if (!rl || !result_out || n < 1) return DLOCK_EINVAL;
    memset(result_out, 0, sizeof(*result_out));
    if (n > rl->burst_n) return DLOCK_ELIMIT;
    char key[DLOCK__KEY_MAX], num[24];
    int rc = subject_key(rl, subject, key, sizeof(key));
    if (rc) return rc;
    dlock__fam_fmt_i64(num, sizeof(num), n);
    const char *keys[1] = {key};
    const char *args[3] = {rl->interval, rl->burst, num};
    long long code = 0, val = 0;
    rc = dlock__fam_eval(rl->c, &dlock__script_rl_acquire, 1, keys, 3, args, &code, &val, NULL);
    if (rc) return rc;
    if (code < 0) return DLOCK_ELIMIT;
    result_out->allowed = code == 1;
    if (code == 1)
        result_out->remaining = val;
    else
        result_out->retry_after_ms = val < 1 ? 1 : val;
    return 0;
}

typedef struct rl_try {
    dlock_ratelimit *rl;
    const char *subject;
    int64_t n;
} rl_try;

static int rl_attempt(void *ctx, int64_t *hint_ms)
{
    rl_try *t = ctx;
    dlock_ratelimit_result r;
    int rc = dlock_ratelimit_try_acquire(t->rl, t->subject, t->n, &r);
    if (rc) return rc;
    *hint_ms = r.retry_after_ms;
    return r.allowed ? 1 : 0;
}

DLOCK_API int dlock_ratelimit_acquire(dlock_ratelimit *rl, const char *subject, int64_t n,
                                      int64_t wait_ms)
{
    if (!rl || n < 1 || wait_ms < -1) return DLOCK_EINVAL;
    rl_try t = {rl, subject, n};
    /* No pub/sub: the script's retry hint is exact, so plain sleeps suffice;
     * the nap cap only bounds how stale a hint can get. */
    dlock__wait_spec sp = {.c = rl->c, .ctl = &rl->ctl, .attempt = rl_attempt, .ctx = &t,
                           .wait_ms = wait_ms, .max_nap_ms = 60000};
    return dlock__fam_wait(&sp);
}

DLOCK_API int dlock_ratelimit_peek(dlock_ratelimit *rl, const char *subject,
                                   int64_t *available_out, int64_t *full_in_ms_out)
{
    if (!rl) return DLOCK_EINVAL;
    char key[DLOCK__KEY_MAX];
    int rc = subject_key(rl, subject, key, sizeof(key));
    if (rc) return rc;
    const char *keys[1] = {key};
    const char *args[2] = {rl->interval, rl->burst};
    long long avail = 0, full = 0;
    rc = dlock__fam_eval(rl->c, &dlock__script_rl_peek, 1, keys, 2, args, &avail, &full, NULL);
    if (rc) return rc;
    if (available_out) *available_out = avail;
    if (full_in_ms_out) *full_in_ms_out = full;
    return 0;
}

DLOCK_API int dlock_ratelimit_reset(dlock_ratelimit *rl, const char *subject)
{
    if (!rl) return DLOCK_EINVAL;
    char key[DLOCK__KEY_MAX];
    int rc = subject_key(rl, subject, key, sizeof(key));
    if (rc) return rc;
    const char *argv[2] = {"DEL", key};
    dlock__reply *r = NULL;
    rc = dlock__client_cmd(rl->c, 2, argv, NULL, &r);
    if (rc == 0 && dlock__reply_kind(r) == DLOCK__R_ERROR) rc = DLOCK_ESERVER;
    dlock__reply_free(r);
    return rc;
}

DLOCK_API void dlock_ratelimit_cancel(dlock_ratelimit *rl)
{
    if (rl) dlock__waitctl_cancel(&rl->ctl);
}

DLOCK_API void dlock_ratelimit_free(dlock_ratelimit *rl)
{
    if (!rl) return;
    dlock__waitctl_destroy(&rl->ctl);
    free(rl);
}
