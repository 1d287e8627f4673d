/* etcd_url.c: the strict etcd:// / etcds:// parser of etcd_url.h. Host,
 * port and user-info rules are url.c's (shared helpers), so a host a
 * redis:// URL accepts is accepted here too. Invariant: on success every
 * endpoint has a host and a port in 1..65535, the prefix starts with '/'
 * and does not end with one. */
#include "etcd_url.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_err.h"

#define ETCD_URL_MAX_LEN 4096

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return DLOCK__EURL;
}

bool dlock__etcd_url_is(const char *s)
{
    return s && (strncmp(s, "etcd://", 7) == 0 || strncmp(s, "etcds://", 8) == 0);
}

static int parse_endpoints(const char *auth, size_t alen, dlock__etcd_url *u, char *err, size_t errlen)
{
    size_t cap = 1;
    for (size_t i = 0; i < alen; i++) cap += auth[i] == ',';
    u->endpoints = calloc(cap, sizeof(*u->endpoints));
    if (!u->endpoints) return DLOCK__ENOMEM;
    const char *p = auth, *end = auth + alen;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        int rc = dlock__url_hostport(p, (size_t)(stop - p), &u->endpoints[u->n_endpoints],
                                     DLOCK__ETCD_DEFAULT_PORT, err, errlen);
        if (rc) return rc == DLOCK__ENOMEM ? rc : DLOCK__EURL;
        u->n_endpoints++;
        p = stop + 1;
    }
    return 0;
}

/* "/a/b" path: percent-decoded, no empty segment, no trailing '/'. */
static int parse_prefix(const char *path, size_t n, dlock__etcd_url *u, char *err, size_t errlen)
{
    while (n > 1 && path[n - 1] == '/') n--;
    if (n <= 1) {
        u->prefix = strdup(DLOCK__ETCD_DEFAULT_PREFIX);
        return u->prefix ? 0 : DLOCK__ENOMEM;
    }
    int bad = 0;
    u->prefix = dlock__url_decode(path, n, &bad);
    if (bad) return fail(err, errlen, "bad percent-escape in the key prefix");
    if (!u->prefix) return DLOCK__ENOMEM;
    if (strstr(u->prefix, "//")) return fail(err, errlen, "empty segment in the key prefix");
    return 0;
}

/* One "name=value" TLS option of etcds://. */
static int parse_option(const char *s, size_t n, dlock__etcd_url *u, char *err, size_t errlen)
{
    static const char *const names[3] = {"cacert", "cert", "key"};
    char **slots[3] = {&u->cacert, &u->cert, &u->key};
    const char *eq = memchr(s, '=', n);
    for (int i = 0; eq && i < 3; i++) {
        size_t kl = strlen(names[i]);
        if ((size_t)(eq - s) != kl || memcmp(s, names[i], kl) != 0) continue;
        if (!u->tls) return fail(err, errlen, "%s= needs etcds:// (TLS)", names[i]);
        if (*slots[i]) return fail(err, errlen, "%s= given twice", names[i]);
        int bad = 0;
        *slots[i] = dlock__url_decode(eq + 1, (size_t)(s + n - eq - 1), &bad);
        if (bad) return fail(err, errlen, "bad percent-escape in %s=", names[i]);
        if (!*slots[i]) return DLOCK__ENOMEM;
        if (!**slots[i]) return fail(err, errlen, "empty %s=", names[i]);
        return 0;
    }
    return fail(err, errlen, "unknown query parameter (etcds:// takes cacert=, cert=, key=)");
}

static int parse_query(const char *q, dlock__etcd_url *u, char *err, size_t errlen)
{
    while (*q) {
        size_t n = strcspn(q, "&");
        int rc = parse_option(q, n, u, err, errlen);
        if (rc) return rc;
        q += n + (q[n] == '&');
    }
    if ((u->cert == NULL) != (u->key == NULL)) return fail(err, errlen, "cert= and key= go together");
    return 0;
}

static int parse_rest(const char *rest, dlock__etcd_url *u, char *err, size_t errlen)
{
    const char *end = rest + strcspn(rest, "/?");
    const char *auth = rest;
    size_t alen = (size_t)(end - rest);
    int rc = dlock__url_userinfo(&auth, &alen, &u->user, &u->password, err, errlen);
    if (rc) return rc == DLOCK__ENOMEM ? rc : DLOCK__EURL;
    if (u->password && !u->user) return fail(err, errlen, "etcd needs a user name with the password (user:password@)");
    if (alen == 0) return fail(err, errlen, "no etcd endpoint (host:port)");
    rc = parse_endpoints(auth, alen, u, err, errlen);
    if (rc) return rc;
    size_t plen = *end == '/' ? strcspn(end, "?") : 0;
    rc = parse_prefix(plen ? end : "/", plen ? plen : 1, u, err, errlen);
    if (rc) return rc;
    end += plen;
    return *end == '?' ? parse_query(end + 1, u, err, errlen) : 0;
}

int dlock__etcd_url_parse(const char *s, dlock__etcd_url *out, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!s || !out) return DLOCK__EINVAL;
    memset(out, 0, sizeof(*out));
    size_t n = strnlen(s, ETCD_URL_MAX_LEN + 1);
    if (n > ETCD_URL_MAX_LEN) return fail(err, errlen, "URL longer than %d bytes", ETCD_URL_MAX_LEN);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return fail(err, errlen, "URL contains a space or control character");
    int rc;
    if (strncmp(s, "etcd://", 7) == 0) {
        rc = parse_rest(s + 7, out, err, errlen);
    } else if (strncmp(s, "etcds://", 8) == 0) {
        out->tls = true;
        rc = parse_rest(s + 8, out, err, errlen);
    } else {
        rc = fail(err, errlen, "not an etcd URL (expected etcd:// or etcds://)");
    }
    if (rc) dlock__etcd_url_free(out);
    return rc;
}

static void free_secret(char *s)
{
    if (!s) return;
    memset(s, 0, strlen(s));
    free(s);
}

void dlock__etcd_url_free(dlock__etcd_url *u)
{
    if (!u) return;
    for (size_t i = 0; i < u->n_endpoints; i++) free(u->endpoints[i].host);
    free(u->endpoints);
    free(u->user);
    free_secret(u->password);
    free(u->prefix);
    free(u->cacert);
    free(u->cert);
    free(u->key);
    memset(u, 0, sizeof(*u));
}
