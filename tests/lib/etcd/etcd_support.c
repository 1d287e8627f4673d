/* etcd_support.c: see etcd_support.h. The log buffer is guarded by a mutex
 * since the library logs from its own threads. */
#include "etcd_support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "servers.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[65536];
static size_t log_len;

static void capture(dlock_log_level level, const char *msg, void *ud)
{
    (void)ud;
    pthread_mutex_lock(&log_mu);
    int n = snprintf(log_text + log_len, sizeof(log_text) - log_len, "[%d] %s\n", (int)level, msg);
    if (n > 0 && log_len + (size_t)n < sizeof(log_text)) log_len += (size_t)n;
    pthread_mutex_unlock(&log_mu);
    if (getenv("DLOCK_TEST_VERBOSE")) fprintf(stderr, "log[%d]: %s\n", (int)level, msg);
}

bool es_log_contains(const char *needle)
{
    pthread_mutex_lock(&log_mu);
    bool found = strstr(log_text, needle) != NULL;
    pthread_mutex_unlock(&log_mu);
    return found;
}

void es_log_clear(void)
{
    pthread_mutex_lock(&log_mu);
    log_len = 0;
    log_text[0] = '\0';
    pthread_mutex_unlock(&log_mu);
}

int es_client_rc(const char *url, int64_t watchdog_ms, dlock_client **out)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = url;
    o.watchdog_timeout_ms = watchdog_ms > 0 ? watchdog_ms : 3000;
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 2000;
    o.retry_attempts = 2;
    o.key_prefix = test_prefix();
    o.log_fn = capture;
    o.log_level = DLOCK_LOG_DEBUG;
    *out = NULL;
    return dlock_client_create(&o, out);
}

dlock_client *es_client(const char *url, int64_t watchdog_ms)
{
    dlock_client *c = NULL;
    int rc = es_client_rc(url, watchdog_ms, &c);
    if (rc) fprintf(stderr, "dlock_client_create(%s): %s\n", url, dlock_strerror(rc));
    return c;
}

dlock_lock *es_lock(dlock_client *c, const char *name, dlock_lost_fn on_lost, void *ud)
{
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.on_lost = on_lost;
    lo.on_lost_ud = ud;
    dlock_lock *l = NULL;
    int rc = dlock_lock_new(c, name, &lo, &l);
    if (rc) {
        fprintf(stderr, "dlock_lock_new(%s): %s\n", name, dlock_strerror(rc));
        abort();
    }
    return l;
}

long long es_metric(dlock_client *c, const char *name)
{
    char *text = NULL;
    if (dlock_metrics_render(c, &text) != 0) return -1;
    long long v = -1;
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && p[n] == ' ') {
            v = strtoll(p + n + 1, NULL, 10);
            break;
        }
    }
    dlock_free(text);
    return v;
}

int es_contenders(const test_etcd *e, const dlock_lock *l)
{
    char dir[2400], end[2400], k64[3300], e64[3300], body[7000], out[4096];
    snprintf(dir, sizeof(dir), "%s/", dlock_lock_key(l));
    snprintf(end, sizeof(end), "%s", dir);
    end[strlen(end) - 1] = '0';
    dlock__b64_encode(dir, strlen(dir), k64);
    dlock__b64_encode(end, strlen(end), e64);
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"range_end\":\"%s\",\"count_only\":true}", k64, e64);
    if (test_etcd_post(e, 0, "/v3/kv/range", body, out, sizeof(out)) != 200) return -1;
    const char *c = strstr(out, "\"count\":\"");
    return c ? (int)strtol(c + 9, NULL, 10) : 0;
}
