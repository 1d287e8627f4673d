/* etcd_support.c: see etcd_support.h. Messages are kept by tests/support/logcap.c. */
#include "etcd_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "logcap.h"
#include "servers.h"

bool es_log_contains(const char *needle) { return test_log_contains(needle); }

void es_log_clear(void) { test_log_clear(); }

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
    o.log_fn = test_log_capture;
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
