/* metrics.c: the client's lock metrics and their Prometheus text rendering.
 * Counters only grow. lock_hold_seconds is a summary whose quantiles are
 * computed over the most recent DLOCK__HOLD_WINDOW (1024) hold times (a
 * bounded window, so it follows the current behaviour), while _sum and
 * _count cover the client's whole life. Names match the three lock alerts
 * of docs/ops/alerts.yml (lock_acquire_fail_total / lock_acquire_total,
 * lock_hold_seconds{quantile="0.99"}, lock_watchdog_renew_fail_total).
 */
#include <stdlib.h>
#include <string.h>

#include "client_priv.h"
#include "util.h"

void dlock__metrics_init(dlock_client *c)
{
    c->m_acquire = c->m_renew = c->m_renew_fail = c->m_lost = c->m_hold_count = 0;
    memset(c->m_fail, 0, sizeof(c->m_fail));
    c->m_hold_sum_s = 0;
    c->m_hold_next = 0;
}

void dlock__metrics_acquire(dlock_client *c, int rc)
{
    pthread_mutex_lock(&c->m_mu);
    c->m_acquire++;
    if (rc == DLOCK_ETIMEOUT) c->m_fail[DLOCK__FAIL_TIMEOUT]++;
    else if (rc == DLOCK_EBUSY) c->m_fail[DLOCK__FAIL_BUSY]++;
    else if (rc != 0) c->m_fail[DLOCK__FAIL_ERROR]++;
    pthread_mutex_unlock(&c->m_mu);
}

void dlock__metrics_hold(dlock_client *c, int64_t held_ms)
{
    pthread_mutex_lock(&c->m_mu);
    c->m_hold[c->m_hold_next % DLOCK__HOLD_WINDOW] = held_ms < 0 ? 0 : held_ms;
    c->m_hold_next++;
    c->m_hold_count++;
    c->m_hold_sum_s += (double)held_ms / 1000.0;
    pthread_mutex_unlock(&c->m_mu);
}

void dlock__metrics_renew(dlock_client *c, bool ok)
{
    pthread_mutex_lock(&c->m_mu);
    if (ok) c->m_renew++;
    else c->m_renew_fail++;
    pthread_mutex_unlock(&c->m_mu);
}

void dlock__metrics_lost(dlock_client *c)
{
    pthread_mutex_lock(&c->m_mu);
    c->m_lost++;
    pthread_mutex_unlock(&c->m_mu);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void counter(dlock__buf *b, const char *name, const char *help, uint64_t v)
{
    dlock__buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
                      (unsigned long long)v);
}

DLOCK_API int dlock_metrics_render(dlock_client *c, char **text_out)
{
    if (!c || !text_out) return DLOCK_EINVAL;
    *text_out = NULL;
    int64_t win[DLOCK__HOLD_WINDOW];
    pthread_mutex_lock(&c->m_mu);
    uint64_t acq = c->m_acquire, renew = c->m_renew, renew_fail = c->m_renew_fail, lost = c->m_lost;
    uint64_t fail[3] = {c->m_fail[0], c->m_fail[1], c->m_fail[2]};
    uint64_t hold_count = c->m_hold_count;
    double hold_sum = c->m_hold_sum_s;
    size_t n = c->m_hold_next < DLOCK__HOLD_WINDOW ? c->m_hold_next : DLOCK__HOLD_WINDOW;
    memcpy(win, c->m_hold, n * sizeof(int64_t));
    pthread_mutex_unlock(&c->m_mu);
    qsort(win, n, sizeof(int64_t), cmp_i64);

    dlock__buf b = {0};
    counter(&b, "lock_acquire_total", "Lock acquire attempts (acquired or not).", acq);
    dlock__buf_printf(&b, "# HELP lock_acquire_fail_total Lock acquire attempts that failed, by reason.\n"
                          "# TYPE lock_acquire_fail_total counter\n");
    static const char *const reasons[3] = {"timeout", "busy", "error"};
    for (int i = 0; i < 3; i++)
        dlock__buf_printf(&b, "lock_acquire_fail_total{reason=\"%s\"} %llu\n", reasons[i],
                          (unsigned long long)fail[i]);
    dlock__buf_printf(&b, "# HELP lock_hold_seconds Lock hold time, first acquire to final release "
                          "(quantiles over the last %d releases).\n# TYPE lock_hold_seconds summary\n",
                      DLOCK__HOLD_WINDOW);
    static const double qs[3] = {0.5, 0.9, 0.99};
    for (int i = 0; i < 3; i++) {
        double v = 0;
        if (n > 0) {
            size_t idx = (size_t)(qs[i] * (double)n);
            v = (double)win[idx >= n ? n - 1 : idx] / 1000.0;
        }
        dlock__buf_printf(&b, "lock_hold_seconds{quantile=\"%g\"} %.3f\n", qs[i], v);
    }
    dlock__buf_printf(&b, "lock_hold_seconds_sum %.3f\nlock_hold_seconds_count %llu\n", hold_sum,
                      (unsigned long long)hold_count);
    counter(&b, "lock_watchdog_renew_total", "Successful watchdog renewals.", renew);
    counter(&b, "lock_watchdog_renew_fail_total", "Failed watchdog renewals.", renew_fail);
    counter(&b, "lock_lost_total", "Held locks found lost (expired or taken).", lost);
    if (b.oom || !b.data) {
        dlock__buf_free(&b);
        return DLOCK_ENOMEM;
    }
    *text_out = b.data; /* malloc'd by dlock__buf: released with dlock_free */
    return 0;
}
