/* util.c: see util.h. Random numbers come from the kernel (getrandom), so
 * tokens and ids cannot collide across processes forked from one parent. */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common_err.h"

static int64_t clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t dlock__now_ms(void) { return clock_us(CLOCK_MONOTONIC) / 1000; }
int64_t dlock__now_us(void) { return clock_us(CLOCK_MONOTONIC); }
int64_t dlock__wall_ms(void) { return clock_us(CLOCK_REALTIME) / 1000; }

int dlock__random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return DLOCK__EIO;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

int dlock__random_hex(char *out, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char raw[64];
    if (n > sizeof(raw)) return DLOCK__EINVAL;
    int rc = dlock__random_bytes(raw, n);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[raw[i] >> 4];
        out[2 * i + 1] = digits[raw[i] & 15];
    }
    out[2 * n] = '\0';
    return 0;
}

uint64_t dlock__random_below(uint64_t bound)
{
    uint64_t v = 0;
    if (bound <= 1 || dlock__random_bytes(&v, sizeof(v)) != 0) return 0;
    return v % bound;
}

int64_t dlock__backoff_ms(int64_t base_ms, int attempt, int64_t cap_ms)
{
    int64_t d = base_ms > 0 ? base_ms : 1;
    for (int i = 0; i < attempt && d < cap_ms; i++) d *= 2;
    if (d > cap_ms) d = cap_ms;
    return d / 2 + (int64_t)dlock__random_below((uint64_t)d + 1);
}

void dlock__sleep_ms(int64_t ms)
{
    if (ms <= 0) return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void dlock__abstime_ms(int64_t ms, struct timespec *out)
{
    if (ms < 0) ms = 0;
    clock_gettime(CLOCK_MONOTONIC, out);
    out->tv_sec += (time_t)(ms / 1000);
    out->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (out->tv_nsec >= 1000000000L) {
        out->tv_sec++;
        out->tv_nsec -= 1000000000L;
    }
}

int dlock__cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc) return rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (rc == 0) rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

void dlock__buf_append(dlock__buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void dlock__buf_printf(dlock__buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if ((size_t)n < sizeof(small)) {
        dlock__buf_append(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    dlock__buf_append(b, big, (size_t)n);
    free(big);
}

void dlock__buf_free(dlock__buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

int dlock__errf(int code, char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}
