/* options.c: the programs' one integer parser, one duration syntax and the
 * table-driven argument parser (options.h). Invariant: a value is stored
 * only when all of it is valid; every refusal leaves one message naming the
 * option and what it accepts.
 */
#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Every refusal: the message into err, and this file's error code. */
#define fail(err, errlen, ...) dlock__errf(-1, err, errlen, __VA_ARGS__)

int opt_parse_int(const char *name, const char *s, int64_t lo, int64_t hi, int64_t *out, char *err,
                  size_t errlen)
{
    char *end = NULL;
    errno = 0;
    /* strtoll alone would also take leading spaces and a '+' */
    bool plain = s && ((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9'));
    long long v = plain ? strtoll(s, &end, 10) : 0;
    if (!s || !end || end == s || *end || errno || v < lo || v > hi)
        return fail(err, errlen, "invalid %s '%s': expected an integer from %lld to %lld", name,
                    s ? s : "", (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return 0;
}

/* A plain decimal at the start of s: digits with at most one '.', at least
 * one digit. Returns the value and where it ends, or -1. */
static int parse_decimal(const char *s, double *v_out, const char **end_out)
{
    const char *p = s;
    int digits = 0, dots = 0;
    for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
        if (*p == '.') dots++;
        else digits++;
    }
    if (digits == 0 || dots > 1) return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end != p || errno == EINVAL) return -1; /* ERANGE: huge, refused by the range check */
    *v_out = v;
    *end_out = p;
    return 0;
}

int opt_append(const char **list, int *n, int max, const char *v, const char *full_msg, char *err,
               size_t errlen)
{
    if (*n >= max) return fail(err, errlen, "%s", full_msg);
    list[(*n)++] = v;
    return 0;
}

void opt_format_duration(int64_t ms, char *out, size_t outlen)
{
    static const struct { int64_t ms; const char *suffix; } units[] = {
        {3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}};
    if (ms == 0) {
        snprintf(out, outlen, "0");
        return;
    }
    for (size_t i = 0; i < OPT_COUNT(units); i++)
        if (ms % units[i].ms == 0) {
            snprintf(out, outlen, "%lld%s", (long long)(ms / units[i].ms), units[i].suffix);
            return;
        }
}

/* Up to three examples inside [lo_ms, hi_ms], so a message never suggests
 * a value it would refuse ("250ms" to an option that starts at 300ms). */
static void examples(int64_t lo_ms, int64_t hi_ms, char *out, size_t outlen)
{
    static const int64_t picks[] = {250, 1500, 120000, 3600000};
    size_t len = 0;
    int n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < OPT_COUNT(picks) && n < 3; i++) {
        if (picks[i] < lo_ms || picks[i] > hi_ms) continue;
        char one[32];
        if (picks[i] == 1500) snprintf(one, sizeof(one), "1.5s");
        else opt_format_duration(picks[i], one, sizeof(one));
        len += (size_t)snprintf(out + len, len < outlen ? outlen - len : 0, "%s%s", n ? ", " : "", one);
        n++;
    }
    if (n == 0) opt_format_duration(lo_ms ? lo_ms : hi_ms, out, outlen);
}

static int bad_duration(const char *name, const char *s, opt_unit bare, int64_t lo_ms, int64_t hi_ms,
                        const char *why, char *err, size_t errlen)
{
    char lo[32], hi[32], eg[96];
    opt_format_duration(lo_ms, lo, sizeof(lo));
    opt_format_duration(hi_ms, hi, sizeof(hi));
    examples(lo_ms, hi_ms, eg, sizeof(eg));
    return fail(err, errlen, "invalid %s '%s': %sexpected a duration from %s to %s (e.g. %s; "
                "a bare number is %s)", name, s ? s : "", why, lo, hi, eg,
                bare == OPT_UNIT_S ? "seconds" : "milliseconds");
}

int opt_parse_duration(const char *name, const char *s, opt_unit bare, int64_t lo_ms, int64_t hi_ms,
                       int64_t *ms_out, char *err, size_t errlen)
{
    double v = 0;
    const char *unit = NULL;
    if (!s || parse_decimal(s, &v, &unit) != 0) return bad_duration(name, s, bare, lo_ms, hi_ms, "", err, errlen);
    double mul = 0;
    if (*unit == '\0') mul = (double)bare;
    else if (strcmp(unit, "ms") == 0) mul = 1;
    else if (strcmp(unit, "s") == 0) mul = 1000;
    else if (strcmp(unit, "m") == 0) mul = 60000;
    else if (strcmp(unit, "h") == 0) mul = 3600000;
    else return bad_duration(name, s, bare, lo_ms, hi_ms, "", err, errlen);
    double ms = v * mul;
    if (!(ms <= (double)hi_ms + 0.5)) return bad_duration(name, s, bare, lo_ms, hi_ms, "", err, errlen);
    int64_t whole = (int64_t)(ms + 0.5);
    if (ms > 0 && whole == 0)
        return bad_duration(name, s, bare, lo_ms, hi_ms, "finer than 1ms; ", err, errlen);
    if (whole < lo_ms || whole > hi_ms) return bad_duration(name, s, bare, lo_ms, hi_ms, "", err, errlen);
    *ms_out = whole;
    return 0;
}

int opt_parse_number(const char *name, const char *s, double lo, double hi, double *out, char *err,
                     size_t errlen)
{
    double v = 0;
    const char *end = NULL;
    if (!s || parse_decimal(s, &v, &end) != 0 || *end || v < lo || v > hi)
        return fail(err, errlen, "invalid %s '%s': expected a number from %g to %g", name, s ? s : "", lo, hi);
    *out = v;
    return 0;
}

static int set_bool(const char *name, const char *v, bool *p, char *err, size_t errlen)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < OPT_COUNT(yes); i++) {
        if (strcmp(v, yes[i]) == 0) return *p = true, 0;
        if (strcmp(v, no[i]) == 0) return *p = false, 0;
    }
    return fail(err, errlen, "invalid %s '%s': expected true or false (also 1/0, yes/no, on/off)", name, v);
}

/* A string setting's own rule (opt_spec.check). */
static int check_str(const opt_spec *spec, const char *name, const char *value, char *err, size_t errlen)
{
    char why[384] = "";
    if (!spec->check || spec->check(value, why, sizeof(why)) == 0) return 0;
    return fail(err, errlen, "invalid %s: %s", name, why[0] ? why : "refused");
}

static opt_warn_fn warn_fn;

void opt_set_warn(opt_warn_fn fn) { warn_fn = fn; }

bool opt_names_unit(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && (strcmp(name + n - 3, "-ms") == 0 || strcmp(name + n - 3, "_MS") == 0);
}

/* A bare number other than 0 reads differently by program (seconds in
 * dlock, milliseconds in the seckill programs): deprecated, so warn, unless
 * the option's own name says the unit ("--worker-lease-ms 250"). */
static void warn_bare(const opt_spec *spec, const char *name, const char *value)
{
    if ((spec->type != OPT_DURATION && spec->type != OPT_SECONDS) || !warn_fn || opt_names_unit(name)) return;
    double v = 0;
    const char *end = NULL;
    if (parse_decimal(value, &v, &end) != 0 || *end || v == 0) return;
    char msg[256];
    snprintf(msg, sizeof(msg), "warning: %s %s: a bare number is %s here but %s in other programs of "
             "dlock; write %s%s (bare numbers are deprecated and will be refused in 2.0)", name, value,
             spec->unit == OPT_UNIT_S ? "seconds" : "milliseconds",
             spec->unit == OPT_UNIT_S ? "milliseconds" : "seconds", value, spec->unit == OPT_UNIT_S ? "s" : "ms");
    warn_fn(msg);
}

static int set_value(const opt_spec *spec, const char *name, void *base, const char *value, char *err,
                     size_t errlen);

int opt_set_named(const opt_spec *spec, const char *name, void *base, const char *value, char *err,
                  size_t errlen)
{
    int rc = set_value(spec, name, base, value, err, errlen);
    if (rc == 0 && value) warn_bare(spec, name, value);
    return rc;
}

/* opt_set_named without the warning: defaults are the program's own. */
static int set_value(const opt_spec *spec, const char *name, void *base, const char *value, char *err,
                     size_t errlen)
{
    void *p = (char *)base + spec->off;
    int64_t v = 0;
    if ((spec->type == OPT_STR || spec->type == OPT_STRDUP) && check_str(spec, name, value, err, errlen)) return -1;
    switch (spec->type) {
    case OPT_FLAG: *(bool *)p = true; return 0;
    case OPT_STR: *(const char **)p = value; return 0;
    case OPT_STRDUP: {
        char *copy = strdup(value);
        if (!copy) return fail(err, errlen, "%s: out of memory", name);
        free(*(char **)p);
        *(char **)p = copy;
        return 0;
    }
    case OPT_BOOL: return set_bool(name, value, p, err, errlen);
    case OPT_INT:
        if (opt_parse_int(name, value, spec->lo, spec->hi, &v, err, errlen)) return -1;
        *(int *)p = (int)v;
        return 0;
    case OPT_I64: return opt_parse_int(name, value, spec->lo, spec->hi, p, err, errlen);
    case OPT_DURATION: return opt_parse_duration(name, value, spec->unit, spec->lo, spec->hi, p, err, errlen);
    case OPT_SECONDS:
        if (opt_parse_duration(name, value, spec->unit, spec->lo, spec->hi, &v, err, errlen)) return -1;
        *(double *)p = (double)v / 1000.0;
        return 0;
    case OPT_NUMBER: return opt_parse_number(name, value, (double)spec->lo, (double)spec->hi, p, err, errlen);
    case OPT_CALL: return spec->call(base, value, err, errlen);
    case OPT_TRIGGER: return spec->call(base, spec->name, err, errlen);
    }
    return fail(err, errlen, "%s: unknown option type", name);
}

int opt_set(const opt_spec *spec, void *base, const char *value, char *err, size_t errlen)
{
    char name[72];
    snprintf(name, sizeof(name), "--%s", spec->name);
    return opt_set_named(spec, name, base, value, err, errlen);
}

int opt_set_defaults(const opt_spec *specs, size_t n, void *base, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char name[72];
        snprintf(name, sizeof(name), "--%s", specs[i].name);
        if (specs[i].def && set_value(&specs[i], name, base, specs[i].def, err, errlen)) return -1;
    }
    return 0;
}

int opt_load_env(const opt_spec *specs, size_t n, void *base, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = specs[i].env ? getenv(specs[i].env) : NULL;
        if (v && opt_set_named(&specs[i], specs[i].env, base, v, err, errlen)) return -1;
    }
    return 0;
}

const opt_spec *opt_find(const opt_spec *specs, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(specs[i].name) == len && strncmp(specs[i].name, name, len) == 0) return &specs[i];
    return NULL;
}

static const opt_spec *find_short(const opt_spec *specs, size_t n, char c)
{
    for (size_t i = 0; i < n; i++)
        if (specs[i].short_name && specs[i].short_name == c) return &specs[i];
    return NULL;
}

static bool takes_value(const opt_spec *s)
{
    return s->type != OPT_FLAG && s->type != OPT_TRIGGER;
}

/* "--name", "--name=value" or "--name value" at argv[*i]; advances *i past
 * a separate value. */
static int parse_long(const opt_spec *specs, size_t n, int argc, char **argv, int *i, void *base, char *err,
                      size_t errlen)
{
    const char *a = argv[*i], *eq = strchr(a + 2, '=');
    const opt_spec *s = opt_find(specs, n, a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
    if (!s) return fail(err, errlen, "unknown option '%.*s'", eq ? (int)(eq - a) : (int)strlen(a), a);
    if (!takes_value(s)) {
        if (eq) return fail(err, errlen, "option '--%s' takes no value", s->name);
        return opt_set(s, base, NULL, err, errlen);
    }
    const char *val = eq ? eq + 1 : NULL;
    bool next_is_opt = *i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0;
    if (!val && s->type == OPT_BOOL && next_is_opt) val = "true";
    if (!val) {
        if (*i + 1 >= argc) return fail(err, errlen, "option '%s' needs a value", a);
        val = argv[++*i];
    }
    return opt_set(s, base, val, err, errlen);
}

/* Short options at argv[*i], clustered as getopt allows: "-nv" is -n -v,
 * "-w5" and "-w 5" give -w the value 5. */
static int parse_short(const opt_spec *specs, size_t n, int argc, char **argv, int *i, void *base, char *err,
                       size_t errlen)
{
    for (const char *p = argv[*i] + 1; *p; p++) {
        const opt_spec *s = find_short(specs, n, *p);
        if (!s) return fail(err, errlen, "unknown option '-%c'", *p);
        if (!takes_value(s)) {
            if (opt_set(s, base, NULL, err, errlen)) return -1;
            continue;
        }
        const char *val = p[1] ? p + 1 : NULL;
        if (!val) {
            if (*i + 1 >= argc) return fail(err, errlen, "option '-%c' needs a value", *p);
            val = argv[++*i];
        }
        return opt_set(s, base, val, err, errlen);
    }
    return 0;
}

int opt_parse_from(const opt_spec *specs, size_t n, int argc, char **argv, int first, bool stop_at_operand,
                   void *base, opt_operand_fn operand, int *next_out, char *err, size_t errlen)
{
    bool only_operands = false;
    int i = first;
    for (; i < argc; i++) {
        const char *a = argv[i];
        int rc;
        if (!only_operands && strcmp(a, "--") == 0) {
            only_operands = true;
            continue;
        }
        bool is_opt = !only_operands && a[0] == '-' && a[1] != '\0';
        if (!is_opt && stop_at_operand) break;
        if (is_opt) rc = a[1] == '-' ? parse_long(specs, n, argc, argv, &i, base, err, errlen)
                                     : parse_short(specs, n, argc, argv, &i, base, err, errlen);
        else if (operand) rc = operand(base, a, err, errlen);
        else rc = fail(err, errlen, "unexpected argument '%s'", a);
        if (rc) return rc;
    }
    if (next_out) *next_out = i;
    return 0;
}

int opt_parse_args(const opt_spec *specs, size_t n, int argc, char **argv, void *base,
                   opt_operand_fn operand, char *err, size_t errlen)
{
    return opt_parse_from(specs, n, argc, argv, 1, false, base, operand, NULL, err, errlen);
}

int opt_load(const opt_spec *specs, size_t n, int argc, char **argv, void *base, opt_operand_fn operand,
             char *err, size_t errlen)
{
    if (opt_set_defaults(specs, n, base, err, errlen) || opt_load_env(specs, n, base, err, errlen)) return -1;
    return opt_parse_args(specs, n, argc, argv, base, operand, err, errlen);
}

void opt_print_help(FILE *f, const opt_spec *specs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const opt_spec *s = &specs[i];
        char sh[8] = "", left[80];
        if (s->short_name) snprintf(sh, sizeof(sh), "-%c, ", s->short_name);
        snprintf(left, sizeof(left), "%s--%s%s%s", sh, s->name, s->arg ? " " : "", s->arg ? s->arg : "");
        if (strlen(left) > 24) fprintf(f, "  %s\n  %-24s ", left, "");
        else fprintf(f, "  %-24s ", left);
        /* continuation lines of the help text line up under its first */
        for (const char *h = s->help ? s->help : ""; *h; h++) {
            fputc(*h, f);
            if (*h == '\n') fprintf(f, "  %-24s ", "");
        }
        fputc('\n', f);
    }
}
