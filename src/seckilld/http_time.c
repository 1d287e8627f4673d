/* http_time.c: RFC 3339 timestamps <-> unix ms for the campaign API, with
 * the civil-date arithmetic done here (no timegm, no TZ state). */
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "sk_err.h"

/* Days since 1970-01-01 of a proleptic Gregorian date. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int digits(const char *s, size_t n, int *out)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int sk_http_parse_time(const char *s, size_t len, int64_t *ms_out)
{
    int Y, M, D, h, mi, sec, ms = 0;
    if (len < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        s[13] != ':' || s[16] != ':')
        return SK_EINVAL;
    if (digits(s, 4, &Y) || digits(s + 5, 2, &M) || digits(s + 8, 2, &D) || digits(s + 11, 2, &h) ||
        digits(s + 14, 2, &mi) || digits(s + 17, 2, &sec))
        return SK_EINVAL;
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
    if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || (M == 2 && D == 29 && !leap) || h > 23 ||
        mi > 59 || sec > 60)
        return SK_EINVAL;
    if (sec == 60) sec = 59; /* leap second: clamp */
    size_t i = 19;
    if (i < len && s[i] == '.') {
        i++;
        size_t start = i;
        int scale = 100;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            ms += (s[i] - '0') * scale;
            scale /= 10;
            i++;
        }
        if (i == start || i - start > 9) return SK_EINVAL;
    }
    int64_t off_min = 0;
    if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh, om;
        if (digits(s + i + 1, 2, &oh) || digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return SK_EINVAL;
        off_min = (oh * 60 + om) * (s[i] == '-' ? -1 : 1);
        i += 6;
    } else {
        return SK_EINVAL;
    }
    if (i != len) return SK_EINVAL;
    int64_t secs = days_from_civil(Y, M, D) * 86400 + h * 3600 + mi * 60 + sec - off_min * 60;
    int64_t t = secs * 1000 + ms;
    if (t < SK_HTTP_TIME_MIN_MS || t > SK_HTTP_TIME_MAX_MS) return SK_EINVAL;
    *ms_out = t;
    return 0;
}

void sk_http_format_time(int64_t ms, char out[40])
{
    int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    int frac = (int)(ms - secs * 1000);
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    int64_t rem = secs - days * 86400;
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    int hh = (int)(rem / 3600), mm = (int)(rem % 3600 / 60), ss = (int)(rem % 60);
    if (frac)
        snprintf(out, 40, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m, d, hh, mm, ss, frac);
    else
        snprintf(out, 40, "%04lld-%02d-%02dT%02d:%02d:%02dZ", (long long)y, m, d, hh, mm, ss);
}
