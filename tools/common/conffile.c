/* conffile.c: `name value` configuration files (conffile.h). Invariant: a
 * line's value reaches opt_set_named exactly as the file spells it (quotes
 * removed, escapes resolved) or not at all; a bad line stops the reading
 * with one message naming PATH:LINE and the setting.
 */
#define _POSIX_C_SOURCE 200809L
#include "conffile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define fail(err, errlen, ...) dlock__errf(-1, err, errlen, __VA_ARGS__)

static bool blank(char c) { return c == ' ' || c == '\t'; }

/* The quoted value starting at q (on its opening '"'), unquoted in place.
 * 0, or -1 with why set. */
static int unquote(char *q, const char **why)
{
    char *w = q;
    const char *r = q + 1;
    for (; *r && *r != '"'; r++) {
        if (*r == '\\' && (r[1] == '"' || r[1] == '\\')) r++;
        *w++ = *r;
    }
    if (*r != '"') {
        *why = "unterminated quote (a value starting with \" ends with \")";
        return -1;
    }
    for (r++; blank(*r); r++) {}
    if (*r) {
        *why = "text after the closing quote";
        return -1;
    }
    *w = '\0';
    return 0;
}

/* One line (without its newline) of a file: skipped, stored, or refused
 * with err "WHERE: message". */
static int load_line(const opt_spec *specs, size_t n, char *line, const char *where, void *base, char *err,
                     size_t errlen)
{
    char *k = line;
    while (blank(*k)) k++;
    if (*k == '#' || *k == '\0') return 0;
    size_t klen = strcspn(k, " \t");
    char *v = k + klen;
    while (blank(*v)) v++;
    char *e = v + strlen(v);
    while (e > v && blank(e[-1])) *--e = '\0';
    const opt_spec *o = opt_find(specs, n, k, klen);
    if (!o || !o->env) return fail(err, errlen, "%s: unknown setting \"%.*s\"", where, (int)klen, k);
    char name[72], msg[512];
    snprintf(name, sizeof(name), "%.*s", (int)klen, k);
    const char *why = NULL;
    if (*v == '"' && unquote(v, &why) != 0) return fail(err, errlen, "%s: %s: %s", where, name, why);
    if (opt_set_named(o, name, base, v, msg, sizeof(msg)) != 0) return fail(err, errlen, "%s: %s", where, msg);
    return 0;
}

int opt_load_file(const opt_spec *specs, size_t n, const char *path, void *base, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) return fail(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
    char *line = NULL, where[600];
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        snprintf(where, sizeof(where), "%s:%d", path, lineno);
        if (memchr(line, '\0', (size_t)len)) {
            rc = fail(err, errlen, "%s: NUL byte in the line", where);
            break;
        }
        line[strcspn(line, "\r\n")] = '\0';
        rc = load_line(specs, n, line, where, base, err, errlen);
    }
    if (rc == 0 && ferror(f)) rc = fail(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    return rc;
}

/* Appends [s, s+len) to out (room outlen, *used written so far). */
static void put(char *out, size_t outlen, size_t *used, const char *s, size_t len)
{
    if (*used + 1 >= outlen) return;
    size_t room = outlen - 1 - *used;
    if (len > room) len = room;
    memcpy(out + *used, s, len);
    *used += len;
    out[*used] = '\0';
}

/* The query string q (after '?'), with the values of *password= masked. */
static void put_query(char *out, size_t outlen, size_t *used, const char *q)
{
    while (*q) {
        size_t plen = strcspn(q, "&"), nlen = strcspn(q, "=");
        if (nlen < plen && nlen >= 8 && strncmp(q + nlen - 8, "password", 8) == 0) {
            put(out, outlen, used, q, nlen + 1);
            put(out, outlen, used, "****", 4);
        } else {
            put(out, outlen, used, q, plen);
        }
        q += plen;
        if (*q == '&') put(out, outlen, used, q++, 1);
    }
}

void opt_mask_url(const char *url, char *out, size_t outlen)
{
    size_t used = 0;
    if (!outlen) return;
    out[0] = '\0';
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    size_t alen = strcspn(auth, "/?#");
    const char *at = NULL;
    for (const char *p = auth; p < auth + alen; p++)
        if (*p == '@') at = p;
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    const char *rest = auth;
    if (colon) {
        put(out, outlen, &used, url, (size_t)(colon + 1 - url));
        put(out, outlen, &used, "****", 4);
        rest = at;
    } else {
        rest = url;
    }
    const char *q = strchr(rest, '?');
    put(out, outlen, &used, rest, q ? (size_t)(q + 1 - rest) : strlen(rest));
    if (q) put_query(out, outlen, &used, q + 1);
}
