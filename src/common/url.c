/* url.c: strict parser for redis://, unix://, redis-sentinel:// and
 * redis-cluster:// URLs.
 * Invariant: on success every field is valid (port 1..65535, db 0..INT_MAX,
 * non-empty host/path); on failure *out holds nothing to free. */
#include "url.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_err.h"
#include "util.h"

#define URL_MAX_LEN 4096

/* Every refusal: the message into err, and this file's error code. */
#define fail(err, errlen, ...) dlock__errf(DLOCK__EURL, err, errlen, __VA_ARGS__)

static char *dup_range(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Percent-decodes [s, s+n) into a new string; NULL on a bad escape or %00. */
static char *decode_range(const char *s, size_t n, int *bad)
{
    char *out = malloc(n + 1);
    size_t j = 0;
    *bad = 0;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[j++] = s[i];
            continue;
        }
        int hi = i + 2 < n ? hexval((unsigned char)s[i + 1]) : -1;
        int lo = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            free(out);
            *bad = 1;
            return NULL;
        }
        out[j++] = (char)(hi * 16 + lo);
        i += 2;
    }
    out[j] = '\0';
    return out;
}

/* Parses a decimal in [lo, hi] from exactly [s, s+n). */
static int parse_int_range(const char *s, size_t n, long lo, long hi, int *out)
{
    if (n == 0 || n > 10) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* host[:port] or [v6]:port into hp; default port 6379. */
static int parse_hostport(const char *s, size_t n, dlock__hostport *hp, int default_port,
                          char *err, size_t errlen)
{
    const char *host = s, *colon = NULL;
    size_t hlen;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close) return fail(err, errlen, "unterminated '[' in host");
        host = s + 1;
        hlen = (size_t)(close - host);
        if (close + 1 < s + n) {
            if (close[1] != ':') return fail(err, errlen, "junk after ']' in host");
            colon = close + 1;
        }
    } else {
        colon = memchr(s, ':', n);
        hlen = colon ? (size_t)(colon - s) : n;
        if (colon && memchr(colon + 1, ':', (size_t)(s + n - colon - 1)))
            return fail(err, errlen, "IPv6 addresses must be in brackets");
    }
    if (hlen == 0) return fail(err, errlen, "empty host");
    for (size_t i = 0; i < hlen; i++) {
        unsigned char c = (unsigned char)host[i];
        if (!(isalnum(c) || c == '.' || c == '-' || c == '_' || c == ':'))
            return fail(err, errlen, "invalid character in host");
    }
    int port = default_port;
    if (colon) {
        size_t plen = (size_t)(s + n - colon - 1);
        if (parse_int_range(colon + 1, plen, 1, 65535, &port) != 0)
            return fail(err, errlen, "port must be a number in 1..65535");
    }
    hp->host = dup_range(host, hlen);
    hp->port = port;
    return hp->host ? 0 : DLOCK__ENOMEM;
}

/* "?db=N" query; anything else is refused so typos are not ignored. */
static int parse_query(const char *q, int *db, char *err, size_t errlen)
{
    if (!*q) return 0;
    if (strncmp(q, "db=", 3) != 0) return fail(err, errlen, "unknown query parameter (only db=N)");
    if (parse_int_range(q + 3, strlen(q + 3), 0, INT_MAX, db) != 0)
        return fail(err, errlen, "db must be a non-negative number");
    return 0;
}

/* [user[:password]@] prefix of an authority; advances *auth past it. */
static int parse_userinfo(const char **auth, size_t *alen, dlock__url *u, char *err, size_t errlen)
{
    const char *at = NULL;
    for (size_t i = 0; i < *alen; i++)
        if ((*auth)[i] == '@') at = *auth + i; /* last '@' ends userinfo */
    if (!at) return 0;
    const char *ui = *auth;
    size_t ulen = (size_t)(at - ui);
    const char *colon = memchr(ui, ':', ulen);
    int bad = 0;
    size_t namelen = colon ? (size_t)(colon - ui) : ulen;
    if (namelen) {
        u->user = decode_range(ui, namelen, &bad);
        if (bad) return fail(err, errlen, "bad percent-escape in user name");
        if (!u->user) return DLOCK__ENOMEM;
    }
    if (colon) {
        u->password = decode_range(colon + 1, (size_t)(at - colon - 1), &bad);
        if (bad) return fail(err, errlen, "bad percent-escape in password");
        if (!u->password) return DLOCK__ENOMEM;
        if (!u->user && !*u->password) {
            free(u->password);
            u->password = NULL;
        }
    }
    /* A bare "user@" is a user name without a password (the Redis URI
     * convention, as redis-py reads it); a password alone is ":pass@". */
    *alen -= (size_t)(at + 1 - *auth);
    *auth = at + 1;
    return 0;
}

static int parse_tcp(const char *rest, dlock__url *u, char *err, size_t errlen)
{
    const char *end = rest + strcspn(rest, "/?");
    const char *auth = rest;
    size_t alen = (size_t)(end - rest);
    int rc = parse_userinfo(&auth, &alen, u, err, errlen);
    if (rc) return rc;
    dlock__hostport hp = {0};
    rc = parse_hostport(auth, alen, &hp, 6379, err, errlen);
    if (rc) return rc;
    u->host = hp.host;
    u->port = hp.port;
    if (*end == '/') {
        const char *dbs = end + 1;
        size_t dlen = strcspn(dbs, "?");
        if (dlen && parse_int_range(dbs, dlen, 0, INT_MAX, &u->db) != 0)
            return fail(err, errlen, "database must be a non-negative number");
        end = dbs + dlen;
    }
    if (*end == '?') return parse_query(end + 1, &u->db, err, errlen);
    return 0;
}

static int parse_unix(const char *rest, dlock__url *u, char *err, size_t errlen)
{
    if (rest[0] != '/') return fail(err, errlen, "unix:// needs an absolute path (unix:///path)");
    size_t plen = strcspn(rest, "?");
    if (plen < 2) return fail(err, errlen, "empty socket path");
    int bad = 0;
    u->path = decode_range(rest, plen, &bad);
    if (bad) return fail(err, errlen, "bad percent-escape in path");
    if (!u->path) return DLOCK__ENOMEM;
    return rest[plen] == '?' ? parse_query(rest + plen + 1, &u->db, err, errlen) : 0;
}

/* "h:p[,h:p...]" of [s, s+n) into a new array (*out, *n_out). */
static int parse_hostlist(const char *s, size_t n, int default_port, dlock__hostport **out,
                          size_t *n_out, char *err, size_t errlen)
{
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) cap += s[i] == ',';
    *out = calloc(cap, sizeof(**out));
    if (!*out) return DLOCK__ENOMEM;
    const char *p = s, *end = s + n;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        int rc = parse_hostport(p, (size_t)(stop - p), &(*out)[*n_out], default_port, err, errlen);
        if (rc) return rc;
        (*n_out)++;
        p = stop + 1;
    }
    return 0;
}

static int parse_sentinel(const char *rest, dlock__url *u, char *err, size_t errlen)
{
    const char *slash = strchr(rest, '/');
    if (!slash) return fail(err, errlen, "sentinel URL needs /<master-name>");
    const char *auth = rest;
    size_t alen = (size_t)(slash - rest);
    int rc = parse_userinfo(&auth, &alen, u, err, errlen);
    if (rc) return rc;
    rc = parse_hostlist(auth, alen, 26379, &u->sentinels, &u->n_sentinels, err, errlen);
    if (rc) return rc;
    const char *name = slash + 1;
    size_t nlen = strcspn(name, "?/");
    if (nlen == 0) return fail(err, errlen, "empty sentinel master name");
    if (name[nlen] == '/') return fail(err, errlen, "junk after the master name");
    u->master_name = dup_range(name, nlen);
    if (!u->master_name) return DLOCK__ENOMEM;
    return name[nlen] == '?' ? parse_query(name + nlen + 1, &u->db, err, errlen) : 0;
}

/* A Cluster has database 0 only: "/0" or "?db=0" are accepted (so a URL
 * copied from a standalone setup keeps working), any other db is refused. */
static int parse_cluster(const char *rest, dlock__url *u, char *err, size_t errlen)
{
    const char *end = rest + strcspn(rest, "/?");
    const char *auth = rest;
    size_t alen = (size_t)(end - rest);
    int rc = parse_userinfo(&auth, &alen, u, err, errlen);
    if (rc) return rc;
    rc = parse_hostlist(auth, alen, 6379, &u->seeds, &u->n_seeds, err, errlen);
    if (rc) return rc;
    if (*end == '/') {
        const char *dbs = end + 1;
        size_t dlen = strcspn(dbs, "?");
        if (dlen && parse_int_range(dbs, dlen, 0, INT_MAX, &u->db) != 0)
            return fail(err, errlen, "database must be a non-negative number");
        end = dbs + dlen;
    }
    if (*end == '?') rc = parse_query(end + 1, &u->db, err, errlen);
    if (rc == 0 && u->db != 0)
        rc = fail(err, errlen, "Redis Cluster has only database 0 (redis-cluster:// refuses db %d)", u->db);
    return rc;
}

int dlock__url_parse(const char *s, dlock__url *out, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!s || !out) return DLOCK__EINVAL;
    memset(out, 0, sizeof(*out));
    size_t n = strnlen(s, URL_MAX_LEN + 1);
    if (n == 0) return fail(err, errlen, "empty URL");
    if (n > URL_MAX_LEN) return fail(err, errlen, "URL longer than %d bytes", URL_MAX_LEN);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return fail(err, errlen, "URL contains a space or control character");
    int rc;
    if (strncmp(s, "redis://", 8) == 0) {
        out->kind = DLOCK__URL_TCP;
        rc = parse_tcp(s + 8, out, err, errlen);
    } else if (strncmp(s, "unix://", 7) == 0) {
        out->kind = DLOCK__URL_UNIX;
        rc = parse_unix(s + 7, out, err, errlen);
    } else if (strncmp(s, "redis-sentinel://", 17) == 0) {
        out->kind = DLOCK__URL_SENTINEL;
        rc = parse_sentinel(s + 17, out, err, errlen);
    } else if (strncmp(s, "redis-cluster://", 16) == 0) {
        out->kind = DLOCK__URL_CLUSTER;
        rc = parse_cluster(s + 16, out, err, errlen);
    } else if (strncmp(s, "rediss://", 9) == 0) {
        fail(err, errlen, "rediss:// (TLS to Redis) is not available in this build: use redis:// through a local TLS tunnel (docs/ops/tls.md)");
        rc = DLOCK__ETLS;
    } else {
        rc = fail(err, errlen, "unknown scheme (expected redis://, unix://, redis-sentinel:// or redis-cluster://)");
    }
    if (rc) dlock__url_free(out);
    return rc;
}

static char *dup_or_null(const char *s, int *oom)
{
    if (!s) return NULL;
    char *p = strdup(s);
    if (!p) *oom = 1;
    return p;
}

static dlock__hostport *copy_hostlist(const dlock__hostport *src, size_t n, size_t *n_out, int *oom)
{
    *n_out = 0;
    if (!n) return NULL;
    dlock__hostport *dst = calloc(n, sizeof(*dst));
    if (!dst) *oom = 1;
    for (size_t i = 0; dst && i < n; i++) {
        dst[i].host = dup_or_null(src[i].host, oom);
        dst[i].port = src[i].port;
        (*n_out)++;
    }
    return dst;
}

int dlock__url_copy(const dlock__url *src, dlock__url *dst)
{
    int oom = 0;
    memset(dst, 0, sizeof(*dst));
    dst->kind = src->kind;
    dst->port = src->port;
    dst->db = src->db;
    dst->host = dup_or_null(src->host, &oom);
    dst->path = dup_or_null(src->path, &oom);
    dst->user = dup_or_null(src->user, &oom);
    dst->password = dup_or_null(src->password, &oom);
    dst->master_name = dup_or_null(src->master_name, &oom);
    dst->sentinels = copy_hostlist(src->sentinels, src->n_sentinels, &dst->n_sentinels, &oom);
    dst->seeds = copy_hostlist(src->seeds, src->n_seeds, &dst->n_seeds, &oom);
    if (oom) {
        dlock__url_free(dst);
        return DLOCK__ENOMEM;
    }
    return 0;
}

int dlock__url_auth_argv(const dlock__url *u, const char *argv[3])
{
    argv[0] = "AUTH";
    if (u->user) {
        argv[1] = u->user;
        argv[2] = u->password ? u->password : "";
        return 3;
    }
    argv[1] = u->password;
    return u->password ? 2 : 0;
}

void dlock__url_free(dlock__url *u)
{
    if (!u) return;
    free(u->host);
    free(u->path);
    free(u->user);
    if (u->password) {
        memset(u->password, 0, strlen(u->password));
        free(u->password);
    }
    for (size_t i = 0; i < u->n_sentinels; i++) free(u->sentinels[i].host);
    free(u->sentinels);
    for (size_t i = 0; i < u->n_seeds; i++) free(u->seeds[i].host);
    free(u->seeds);
    free(u->master_name);
    memset(u, 0, sizeof(*u));
}

void dlock__url_describe(const dlock__url *u, char *buf, size_t len)
{
    switch (u->kind) {
    case DLOCK__URL_TCP:
        snprintf(buf, len, "%s:%d/%d", u->host, u->port, u->db);
        break;
    case DLOCK__URL_UNIX:
        snprintf(buf, len, "unix:%s/%d", u->path, u->db);
        break;
    case DLOCK__URL_SENTINEL:
        snprintf(buf, len, "sentinel master %s", u->master_name);
        break;
    case DLOCK__URL_CLUSTER:
        snprintf(buf, len, "cluster %s:%d%s", u->seeds[0].host, u->seeds[0].port, u->n_seeds > 1 ? ",..." : "");
        break;
    }
}

/* ---- shared with etcd_url.c (etcd:// URLs reuse these rules) ---------- */

int dlock__url_hostport(const char *s, size_t n, dlock__hostport *hp, int default_port, char *err,
                        size_t errlen)
{
    return parse_hostport(s, n, hp, default_port, err, errlen);
}

int dlock__url_userinfo(const char **auth, size_t *alen, char **user_out, char **password_out,
                        char *err, size_t errlen)
{
    dlock__url u = {0};
    int rc = parse_userinfo(auth, alen, &u, err, errlen);
    *user_out = u.user;
    *password_out = u.password;
    u.user = u.password = NULL;
    if (rc) dlock__url_free(&u);
    return rc;
}

char *dlock__url_decode(const char *s, size_t n, int *bad)
{
    return decode_range(s, n, bad);
}
