/* options.h: the one options module of every program in tools/ and bench/:
 * one integer parser, one duration syntax, one number parser, and a
 * table-driven `--name value` / `--name=value` parser that also prints the
 * option list of --help, so help and parsing cannot drift apart.
 * Nothing here prints or exits: every error is one message written into the
 * caller's buffer (naming the option and what it accepts), and the caller
 * prints it with its program name. Thread-safety: the parsers are
 * reentrant; opt_load_env / opt_load read the environment, so programs
 * call them from main before starting threads.
 *
 * Durations: a decimal number (digits, optionally one '.' and more digits)
 * followed by a unit, `ms`, `s`, `m` or `h`: `250ms`, `1.5s`, `30s`, `2m`,
 * `1h`. A bare number is in the option's historical unit (seconds for
 * dlock's -w/--lease, milliseconds for seckilld's *-ms settings), so old
 * spellings keep working; but since that unit differs between programs, a
 * bare number other than 0 is deprecated (refused from 2.0) and reported
 * through the warning sink (opt_set_warn), except for an option whose name
 * says its unit (`--worker-lease-ms`, `SECKILL_IDLE_TIMEOUT_MS`). The result is whole milliseconds; a value that is
 * not 0 but rounds to less than 1 ms, and anything outside the option's
 * range, is refused with a message naming the accepted range. No sign, no
 * exponent, no inf/nan.
 */
#ifndef DLOCK_TOOLS_OPTIONS_H
#define DLOCK_TOOLS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The longest duration any program accepts: 30 days (720h). */
#define OPT_MAX_MS (30LL * 24 * 3600 * 1000)

/* Unit of a bare number in a duration. */
typedef enum opt_unit {
    OPT_UNIT_MS = 1,
    OPT_UNIT_S = 1000,
} opt_unit;

/* Where deprecation warnings go (one line, without the program's name);
 * NULL (the default): nowhere. Set from main before parsing. */
typedef void (*opt_warn_fn)(const char *msg);
void opt_set_warn(opt_warn_fn fn);

/* Whether an option or variable name states its unit (ends in -ms / _MS). */
bool opt_names_unit(const char *name);

/* Parses a whole decimal integer in [lo, hi] (optional leading '-'; no
 * spaces, no trailing junk, no overflow). 0, or -1 with err filled:
 * "invalid NAME 'S': expected an integer from LO to HI". */
int opt_parse_int(const char *name, const char *s, int64_t lo, int64_t hi, int64_t *out,
                  char *err, size_t errlen);

/* Parses a duration (syntax above) in [lo_ms, hi_ms]; a bare number is in
 * `bare` units. 0 and *ms_out, or -1 with err filled. */
int opt_parse_duration(const char *name, const char *s, opt_unit bare, int64_t lo_ms, int64_t hi_ms,
                       int64_t *ms_out, char *err, size_t errlen);

/* Parses a plain non-negative decimal number (digits, optionally one '.')
 * in [lo, hi]. 0, or -1 with err filled. */
int opt_parse_number(const char *name, const char *s, double lo, double hi, double *out, char *err,
                     size_t errlen);

/* Appends v to list (n entries, room for max). 0, or -1 with err set to
 * full_msg when the list is full. For repeated options and operands. */
int opt_append(const char **list, int *n, int max, const char *v, const char *full_msg, char *err,
               size_t errlen);

/* Writes ms as the shortest exact duration: "0", "250ms", "30s", "2m", "1h". */
void opt_format_duration(int64_t ms, char *out, size_t outlen);

/* ---- option tables ---------------------------------------------------- */

typedef enum opt_type {
    OPT_FLAG,     /* no value: sets a bool to true */
    OPT_STR,      /* const char *, points into argv (or the value given) */
    OPT_STRDUP,   /* char *, a malloc'd copy; the previous value is freed */
    OPT_BOOL,     /* bool from 1/0, true/false, yes/no, on/off */
    OPT_INT,      /* int in [lo, hi] */
    OPT_I64,      /* int64_t in [lo, hi] */
    OPT_DURATION, /* int64_t milliseconds in [lo, hi], bare numbers in `unit` */
    OPT_NUMBER,   /* double in [lo, hi] (lo/hi taken as whole numbers) */
    OPT_SECONDS,  /* double seconds from a duration in [lo, hi] ms */
    OPT_CALL,     /* call(base, value, err, errlen) does the work */
    OPT_TRIGGER,  /* no value: call(base, name, err, errlen) with the option's long
                     name (one callback may serve several), in argument order */
} opt_type;

typedef struct opt_spec {
    const char *name;  /* long name without "--" */
    char short_name;   /* 'h' for -h, or 0 */
    opt_type type;
    size_t off;        /* offset of the field in the caller's struct */
    int64_t lo, hi;    /* OPT_INT / OPT_I64 / OPT_NUMBER range; OPT_DURATION, OPT_SECONDS in ms */
    opt_unit unit;     /* OPT_DURATION / OPT_SECONDS: unit of a bare number */
    int (*call)(void *base, const char *value, char *err, size_t errlen); /* OPT_CALL, OPT_TRIGGER: 0 or -1 */
    const char *arg;   /* value placeholder in --help ("N", "URL"); NULL for flags */
    const char *help;  /* --help text; a '\n' starts an aligned continuation line */
    const char *env;   /* environment variable read by opt_load_env, or NULL */
    const char *def;   /* default stored by opt_set_defaults, or NULL */
    /* OPT_STR / OPT_STRDUP: when not NULL, a value is stored only if check
     * returns 0; else check wrote why into err (without the value, which
     * may hold a password) and the refusal reads "invalid NAME: why". */
    int (*check)(const char *value, char *err, size_t errlen);
} opt_spec;

/* Stores value into the field spec describes inside base. 0, or -1 with err
 * filled (OPT_STRDUP: -1 also when out of memory). */
int opt_set(const opt_spec *spec, void *base, const char *value, char *err, size_t errlen);

/* opt_set with the option called `name` in messages ("max-batch" for a
 * config file's key, "SECKILL_MAX_BATCH" for an environment variable). */
int opt_set_named(const opt_spec *spec, const char *name, void *base, const char *value, char *err,
                  size_t errlen);

/* Stores every spec's def (where not NULL). 0, or -1 with err filled. */
int opt_set_defaults(const opt_spec *specs, size_t n, void *base, char *err, size_t errlen);

/* Stores the value of every spec's env variable that is set (an empty
 * value too); a message names the variable. 0, or -1 with err filled. */
int opt_load_env(const opt_spec *specs, size_t n, void *base, char *err, size_t errlen);

/* Finds the spec called name (len bytes, not NUL-terminated), or NULL. */
const opt_spec *opt_find(const opt_spec *specs, size_t n, const char *name, size_t len);

/* Called for each operand (an argument not starting with '-', or any after
 * "--"); 0 or -1 with err filled. */
typedef int (*opt_operand_fn)(void *base, const char *arg, char *err, size_t errlen);

/* Parses argv[1..argc) against specs into base: `--name value`,
 * `--name=value`, flags alone (OPT_BOOL may also be given alone: true),
 * short names as getopt takes them (`-x value`, `-xvalue`, `-ab` for two
 * flags). "--" ends the options. Operands go to operand (NULL: refused).
 * Returns 0, or -1 with one message in err ("unknown option '--x'",
 * "option '--x' needs a value", or the value's own message). */
int opt_parse_args(const opt_spec *specs, size_t n, int argc, char **argv, void *base,
                   opt_operand_fn operand, char *err, size_t errlen);

/* opt_parse_args from argv[first]; with stop_at_operand, stops at the first
 * operand (after "--" too) and writes its index (argc when none) to
 * *next_out (may be NULL): for programs whose operands start a command line
 * of their own (dlock NAME -- COMMAND). */
int opt_parse_from(const opt_spec *specs, size_t n, int argc, char **argv, int first, bool stop_at_operand,
                   void *base, opt_operand_fn operand, int *next_out, char *err, size_t errlen);

/* The usual order in one call: defaults < environment < argv (as
 * opt_set_defaults, opt_load_env, opt_parse_args). 0, or -1 with err filled. */
int opt_load(const opt_spec *specs, size_t n, int argc, char **argv, void *base, opt_operand_fn operand,
             char *err, size_t errlen);

/* Prints one line (or more) per spec: "  --name ARG   help", aligned. */
void opt_print_help(FILE *f, const opt_spec *specs, size_t n);

#define OPT_COUNT(a) (sizeof(a) / sizeof((a)[0]))

#endif
