/* envfile.c: --env-file (envfile.h). Invariant: a variable is set exactly
 * as the file spells its value (quotes removed, escapes resolved) or not at
 * all; a bad line stops the reading with one message naming PATH:LINE.
 */
#define _POSIX_C_SOURCE 200809L
#include "envfile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define fail(err, errlen, ...) dlock__errf(-1, err, errlen, __VA_ARGS__)

static bool blank(char c) { return c == ' ' || c == '\t'; }
static bool name_char(char c, bool first)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (!first && c >= '0' && c <= '9');
}

/* Unquotes the value at v (on its opening quote q) in place; NULL or why not. */
static const char *unquote(char *v)
{
    char q = *v, *w = v;
    const char *r = v + 1;
    for (; *r && *r != q; r++) {
        if (q == '"' && *r == '\\' && (r[1] == '"' || r[1] == '\\')) r++;
        *w++ = *r;
    }
    if (*r != q) return "unterminated quote";
    for (r++; blank(*r); r++) {}
    if (*r) return "text after the closing quote";
    *w = '\0';
    return NULL;
}

/* One line (no newline): skipped, set, or refused with err "WHERE: why". */
static int env_line(char *line, const char *where, char *err, size_t errlen)
{
    char *k = line;
    while (blank(*k)) k++;
    if (*k == '#' || *k == ';' || *k == '\0') return 0;
    size_t klen = 0;
    while (name_char(k[klen], klen == 0)) klen++;
    char *eq = k + klen;
    while (blank(*eq)) eq++;
    if (klen == 0 || *eq != '=') return fail(err, errlen, "%s: expected NAME=VALUE", where);
    k[klen] = '\0';
    char *v = eq + 1;
    while (blank(*v)) v++;
    char *e = v + strlen(v);
    while (e > v && blank(e[-1])) *--e = '\0';
    const char *why = (*v == '"' || *v == '\'') ? unquote(v) : NULL;
    if (why) return fail(err, errlen, "%s: %s: %s", where, k, why);
    if (setenv(k, v, 1) != 0) return fail(err, errlen, "%s: %s: %s", where, k, strerror(errno));
    return 0;
}

int opt_env_file_load(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) return fail(err, errlen, "cannot read env file %s: %s", path, strerror(errno));
    char *line = NULL, where[600];
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        snprintf(where, sizeof(where), "%s:%d", path, ++lineno);
        if (memchr(line, '\0', (size_t)len)) rc = fail(err, errlen, "%s: NUL byte in the line", where);
        else {
            line[strcspn(line, "\r\n")] = '\0';
            rc = env_line(line, where, err, errlen);
        }
    }
    if (rc == 0 && ferror(f)) rc = fail(err, errlen, "cannot read env file %s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    return rc;
}

/* The option argv[i] names takes argv[i + 1] as its value (the rules of
 * opt_parse_args: a bool takes it unless it starts with "--"). */
static bool takes_next(const opt_spec *specs, size_t n, int argc, char **argv, int i)
{
    const char *arg = argv[i];
    const opt_spec *s = NULL;
    if (i + 1 >= argc) return false;
    if (arg[1] == '-') {
        if (strchr(arg, '=')) return false;
        s = opt_find(specs, n, arg + 2, strlen(arg + 2));
    } else {
        for (size_t k = 0; k < n && arg[2] == '\0'; k++)
            if (specs[k].short_name == arg[1]) s = &specs[k];
    }
    if (!s || s->type == OPT_FLAG || s->type == OPT_TRIGGER) return false;
    return s->type != OPT_BOOL || strncmp(argv[i + 1], "--", 2) != 0;
}

int opt_env_file_apply(const opt_spec *specs, size_t n, int argc, char **argv, char *err, size_t errlen)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) break;
        if (a[0] != '-' || a[1] == '\0') continue;
        if (strncmp(a, "--env-file=", 11) == 0) path = a + 11;
        else if (strcmp(a, "--env-file") == 0 && i + 1 < argc) path = argv[++i];
        else if (takes_next(specs, n, argc, argv, i)) i++;
    }
    if (!path) return 0;
    if (!*path) return fail(err, errlen, "--env-file must not be empty");
    return opt_env_file_load(path, err, errlen);
}
