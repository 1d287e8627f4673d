/* options.c: dlock's command line: flock(1)-style options, the status and
 * release subcommands, and the help text. Parsing never exits or prints
 * more than one error line (plus a hint); every bad input is
 * CLI_EXIT_USAGE and changes nothing.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"

enum {
    OPT_LEASE = 256,
    OPT_WATCHDOG_LEASE,
    OPT_URL,
    OPT_PREFIX,
    OPT_REENTRANT,
    OPT_FAIR,
    OPT_READ,
    OPT_WRITE,
    OPT_SEMAPHORE,
    OPT_KILL_GRACE,
    OPT_ON_LOST,
    OPT_JSON,
    OPT_FORCE,
};

static const struct option long_opts[] = {
    {"wait", required_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, 'w'}, /* flock(1) spells it both ways */
    {"nonblock", no_argument, NULL, 'n'},
    {"nb", no_argument, NULL, 'n'},
    {"conflict-exit-code", required_argument, NULL, 'E'},
    {"command", required_argument, NULL, 'c'},
    {"lease", required_argument, NULL, OPT_LEASE},
    {"watchdog-lease", required_argument, NULL, OPT_WATCHDOG_LEASE},
    {"url", required_argument, NULL, OPT_URL},
    {"prefix", required_argument, NULL, OPT_PREFIX},
    {"reentrant", no_argument, NULL, OPT_REENTRANT},
    {"fair", no_argument, NULL, OPT_FAIR},
    {"read", no_argument, NULL, OPT_READ},
    {"write", no_argument, NULL, OPT_WRITE},
    {"semaphore", required_argument, NULL, OPT_SEMAPHORE},
    {"kill-grace", required_argument, NULL, OPT_KILL_GRACE},
    {"on-lost", required_argument, NULL, OPT_ON_LOST},
    {"json", no_argument, NULL, OPT_JSON},
    {"force", no_argument, NULL, OPT_FORCE},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void vsay(const char *fmt, va_list ap)
{
    fputs("dlock: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

void cli_verbose(const cli_options *o, const char *fmt, ...)
{
    if (!o->verbose) return;
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

void cli_print_usage(void)
{
    fputs("Usage:\n"
          "  dlock [options] NAME -- COMMAND [ARGS...]\n"
          "  dlock [options] NAME -c SHELL-COMMAND\n"
          "  dlock status [--json] [--semaphore N] [options] NAME\n"
          "  dlock release --force [options] NAME\n"
          "\n"
          "Run COMMAND while holding the distributed lock NAME in Redis; release it\n"
          "when COMMAND exits. The exit status is COMMAND's (128+N if killed by signal N).\n"
          "\n"
          "Options:\n"
          "  -w, --wait DUR            give up after DUR (e.g. 0.5, 10, 250ms, 2m);\n"
          "                            --timeout is the same option\n"
          "  -n, --nonblock, --nb      fail at once if the lock is held (same as -w 0)\n"
          "  -E, --conflict-exit-code N  exit code when -n/-w gives up (default 1)\n"
          "  -c, --command STRING      run STRING with /bin/sh -c\n"
          "      --lease DUR           fixed lease, no renewal (default: watchdog mode)\n"
          "      --watchdog-lease DUR  lease renewed every third of it (default 30s)\n"
          "      --url URL             Redis URL (default $DLOCK_URL, else\n"
          "                            redis://127.0.0.1:6379)\n"
          "      --prefix P            prepend P to every key\n"
          "      --reentrant           Redisson hash layout instead of the simple one\n"
          "      --fair                fair (first come, first served) lock\n"
          "      --read, --write       shared / exclusive side of a read-write lock\n"
          "      --semaphore N         at most N holders at once\n"
          "      --on-lost=term|kill|ignore  what to do to COMMAND if the lock is lost\n"
          "                            (default term)\n"
          "      --kill-grace DUR      SIGKILL this long after SIGTERM (default 10s)\n"
          "      --json                status: print JSON\n"
          "      --force               release: confirm removing the lock whoever holds it\n"
          "  -v, --verbose             say what dlock is doing on stderr\n"
          "  -h, --help                show this help\n"
          "  -V, --version             show the version\n"
          "\n"
          "DUR is a duration: 250ms, 1.5s, 30s, 2m, 1h; a bare number is seconds.\n"
          "\n"
          "Exit codes: COMMAND's status; 1 (or -E) lock busy; 64 usage; 69 Redis\n"
          "unreachable; 70 internal/server error; 71 OS error; 75 lock lost while\n"
          "COMMAND ran; 77 authentication failed; 78 bad URL; 126/127 COMMAND not\n"
          "executable / not found; 128+N interrupted by signal N. See dlock(1).\n",
          stdout);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    fputs("Try 'dlock --help' for more information.\n", stderr);
    return CLI_EXIT_USAGE;
}

static int set_kind(cli_options *o, cli_kind k, const char *opt, bool *kind_set)
{
    if (*kind_set && o->kind != k)
        return usage_error("%s conflicts with another lock kind option "
                           "(--reentrant, --fair, --read, --write, --semaphore)", opt);
    o->kind = k;
    *kind_set = true;
    return 0;
}

#define OFF(f) offsetof(cli_options, f)

/* The options with a number or duration value, by getopt code: parsed by
 * the shared options module (bare durations are seconds, as always). */
static const struct {
    int code;
    opt_spec spec;
} valued[] = {
    {'w', {.name = "wait", .type = OPT_DURATION, .off = OFF(wait_ms), .lo = 0, .hi = OPT_MAX_MS, .unit = OPT_UNIT_S}},
    {'E', {.name = "conflict-exit-code", .type = OPT_INT, .off = OFF(conflict_code), .lo = 0, .hi = 255}},
    {OPT_LEASE, {.name = "lease", .type = OPT_DURATION, .off = OFF(lease_ms), .lo = 1, .hi = OPT_MAX_MS,
                 .unit = OPT_UNIT_S}},
    {OPT_WATCHDOG_LEASE, {.name = "watchdog-lease", .type = OPT_DURATION, .off = OFF(watchdog_ms), .lo = 300,
                          .hi = OPT_MAX_MS, .unit = OPT_UNIT_S}},
    {OPT_KILL_GRACE, {.name = "kill-grace", .type = OPT_DURATION, .off = OFF(kill_grace_ms), .lo = 0,
                      .hi = OPT_MAX_MS, .unit = OPT_UNIT_S}},
    {OPT_SEMAPHORE, {.name = "semaphore", .type = OPT_INT, .off = OFF(permits), .lo = 1, .hi = 1000000}},
};

/* Parses a valued option into o; 1 when c is not one of them. */
static int apply_valued(cli_options *o, int c, const char *arg)
{
    for (size_t i = 0; i < OPT_COUNT(valued); i++) {
        if (valued[i].code != c) continue;
        char err[256];
        if (opt_set(&valued[i].spec, o, arg, err, sizeof(err)) != 0) return usage_error("%s", err);
        return 0;
    }
    return 1;
}

/* One option (getopt's c and optarg) into o. */
static int apply_opt(cli_options *o, int c, const char *arg, bool *kind_set)
{
    int rc = apply_valued(o, c, arg);
    if (rc == 0 && c == OPT_SEMAPHORE) return set_kind(o, CLI_KIND_SEMAPHORE, "--semaphore", kind_set);
    if (rc != 1) return rc;
    switch (c) {
    case 'n': o->wait_ms = 0; return 0;
    case 'c': o->shell_cmd = arg; return 0;
    case OPT_URL: o->url = arg; return 0;
    case OPT_PREFIX: o->prefix = arg; return 0;
    case OPT_REENTRANT: return set_kind(o, CLI_KIND_REENTRANT, "--reentrant", kind_set);
    case OPT_FAIR: return set_kind(o, CLI_KIND_FAIR, "--fair", kind_set);
    case OPT_READ: return set_kind(o, CLI_KIND_READ, "--read", kind_set);
    case OPT_WRITE: return set_kind(o, CLI_KIND_WRITE, "--write", kind_set);
    case OPT_ON_LOST:
        if (strcmp(arg, "term") == 0) o->on_lost = CLI_ON_LOST_TERM;
        else if (strcmp(arg, "kill") == 0) o->on_lost = CLI_ON_LOST_KILL;
        else if (strcmp(arg, "ignore") == 0) o->on_lost = CLI_ON_LOST_IGNORE;
        else return usage_error("invalid --on-lost '%s': expected term, kill or ignore", arg);
        return 0;
    case OPT_JSON: o->json = true; return 0;
    case OPT_FORCE: o->force = true; return 0;
    case 'v': o->verbose = true; return 0;
    case 'h': o->mode = CLI_MODE_HELP; return 0;
    case 'V': o->mode = CLI_MODE_VERSION; return 0;
    default: return usage_error("internal: unhandled option %d", c);
    }
}

/* Runs getopt over argv from optind; stops at the first operand when
 * in_order (run mode: COMMAND's own options must stay COMMAND's). */
static int parse_opts(int argc, char **argv, cli_options *o, bool in_order, bool *kind_set)
{
    const char *optstring = in_order ? "+:w:nE:c:vhV" : ":w:nE:c:vhV";
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, optstring, long_opts, NULL);
        if (c == -1) return 0;
        /* The argument getopt just looked at (after any permutation). */
        int at = optind > 1 ? optind - 1 : 1;
        const char *bad = argv[at < argc ? at : argc - 1];
        /* optopt names a short option only when bad is "-x..." (a long
         * option's optopt is its value, e.g. OPT_JSON for "--json=1"). */
        bool short_opt = bad[0] == '-' && bad[1] != '-' && optopt > 0 && optopt < 128;
        if (c == '?') {
            if (short_opt) return usage_error("unknown option '-%c'", optopt);
            return usage_error("unknown option or value '%s'", bad);
        }
        if (c == ':') {
            if (short_opt) return usage_error("option '-%c' needs a value", optopt);
            return usage_error("option '%s' needs a value", bad);
        }
        int rc = apply_opt(o, c, optarg, kind_set);
        if (rc != 0) return rc;
    }
}

static void defaults(cli_options *o)
{
    memset(o, 0, sizeof(*o));
    o->mode = CLI_MODE_RUN;
    o->kind = CLI_KIND_SIMPLE;
    o->wait_ms = -1;
    o->conflict_code = CLI_EXIT_CONFLICT;
    o->kill_grace_ms = 10000;
    o->on_lost = CLI_ON_LOST_TERM;
    const char *env = getenv("DLOCK_URL");
    o->url = (env && *env) ? env : CLI_DEFAULT_URL;
    o->prefix = "";
}

/* Checks options that only make sense in some modes. */
static int check_mode(const cli_options *o)
{
    if (o->mode != CLI_MODE_STATUS && o->json)
        return usage_error("--json is only for 'dlock status'");
    if (o->mode != CLI_MODE_RELEASE && o->force)
        return usage_error("--force is only for 'dlock release'");
    if (o->mode == CLI_MODE_RELEASE && !o->force)
        return usage_error("'release' removes the lock whoever holds it: "
                           "confirm with --force");
    if (o->mode != CLI_MODE_RUN && o->shell_cmd)
        return usage_error("-c is only for running a command");
    if (o->name && !*o->name) return usage_error("NAME must not be empty");
    if (o->url && !*o->url) return usage_error("--url must not be empty");
    return 0;
}

/* After NAME in run mode: [--] COMMAND..., or -c STRING. */
static int parse_command(int argc, char **argv, int i, cli_options *o)
{
    if (i < argc && (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--command") == 0)) {
        if (o->shell_cmd) return usage_error("-c given twice");
        if (i + 1 >= argc) return usage_error("option '-c' needs a value");
        o->shell_cmd = argv[i + 1];
        i += 2;
    }
    if (o->shell_cmd) {
        if (i < argc) return usage_error("unexpected '%s' after -c STRING", argv[i]);
        return 0;
    }
    if (i < argc && strcmp(argv[i], "--") == 0) i++;
    if (i >= argc) return usage_error("no COMMAND given: dlock [options] NAME -- COMMAND [ARGS...]");
    o->cmd = &argv[i];
    return 0;
}

int cli_parse(int argc, char **argv, cli_options *o)
{
    defaults(o);
    bool kind_set = false;
    optind = 1;
    if (argc >= 2 && strcmp(argv[1], "status") == 0) o->mode = CLI_MODE_STATUS;
    if (argc >= 2 && strcmp(argv[1], "release") == 0) o->mode = CLI_MODE_RELEASE;
    bool sub = o->mode != CLI_MODE_RUN;
    if (sub) optind = 2;
    cli_mode sub_mode = o->mode;

    int rc = parse_opts(argc, argv, o, !sub, &kind_set);
    if (rc != 0) return rc;
    if (o->mode == CLI_MODE_HELP || o->mode == CLI_MODE_VERSION) return 0;
    o->mode = sub_mode;

    if (optind >= argc) return usage_error("no lock NAME given");
    o->name = argv[optind++];
    if (sub) {
        if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    } else {
        rc = parse_command(argc, argv, optind, o);
        if (rc != 0) return rc;
    }
    return check_mode(o);
}
