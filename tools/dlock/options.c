/* options.c: dlock's command line: flock(1)-style options, the status and
 * release subcommands, and the help text. Parsing never exits or prints
 * more than one error line (plus a hint); every bad input is
 * CLI_EXIT_USAGE and changes nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"

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

/* The tail of the usage text: durations and exit codes. */
static void print_usage_tail(void)
{
    fputs("\n"
          "DUR is a duration: 250ms, 1.5s, 30s, 2m, 1h. A bare number still means\n"
          "seconds but is deprecated (a warning; refused from 2.0): give a unit.\n"
          "\n"
          "Exit codes: COMMAND's status; 1 (or -E) lock busy; 64 usage; 69 Redis\n"
          "unreachable; 70 internal/server error; 71 OS error; 75 lock lost while\n"
          "COMMAND ran; 77 authentication failed; 78 bad URL; 126/127 COMMAND not\n"
          "executable / not found; 128+N interrupted by signal N. See dlock(1).\n",
          stdout);
}

void cli_print_usage(void)
{
    fputs("Usage:\n"
          "  dlock [options] NAME -- COMMAND [ARGS...]\n"
          "  dlock [options] NAME -c SHELL-COMMAND\n"
          "  dlock [options] status [--json] [--semaphore N] [options] NAME\n"
          "  dlock [options] release --force [options] NAME\n"
          "  dlock [options] --standby NAME -- COMMAND [ARGS...]\n"
          "  dlock [options] leader [--watch] [options] NAME\n"
          "  dlock torture --prefix P [--url URL] [options]   (see dlock torture --help)\n"
          "\n"
          "Run COMMAND while holding the distributed lock NAME in Redis or etcd;\n"
          "release it when COMMAND exits. The exit status is COMMAND's (128+N if\n"
          "killed by signal N). Options go before NAME (after it comes COMMAND);\n"
          "for status, release and leader they may come before or after the\n"
          "subcommand. A lock named status, release or leader:\n"
          "dlock [options] -- status -- COMMAND.\n"
          "--standby starts COMMAND at once on every host and campaigns in the\n"
          "election NAME: COMMAND gets SIGUSR1 when it leads and SIGUSR2 when it\n"
          "must stop (its kill-grace before the leadership's validity ends), and\n"
          "reads its role in $DLOCK_STATE_FILE. 'leader' prints the leader.\n"
          "\n"
          "Options:\n"
          "  -w, --wait DUR            give up after DUR (e.g. 500ms, 10s, 2m);\n"
          "                            --timeout is the same option\n"
          "  -n, --nonblock, --nb      fail at once if the lock is held (same as -w 0)\n"
          "  -E, --conflict-exit-code N  exit code when -n/-w gives up (default 1)\n"
          "  -c, --command STRING      run STRING with /bin/sh -c\n"
          "      --lease DUR           fixed lease, no renewal (default: watchdog mode)\n"
          "      --watchdog-lease DUR  lease renewed every third of it (default 30s)\n"
          "  -u, --url URL             Redis URL: redis://, unix://, redis-sentinel://,\n"
          "                            redis-cluster://h:p[,h:p...], etcd://, etcds:// (default\n"
          "                            $DLOCK_URL, else redis://127.0.0.1:6379)\n"
          "      --prefix P            prepend P to every key\n"
          "      --reentrant           Redisson hash layout instead of the simple one\n"
          "      --fair                fair (first come, first served) lock\n"
          "      --read, --write       shared / exclusive side of a read-write lock\n"
          "      --semaphore N         at most N holders at once\n"
          "      --on-lost=term|kill|ignore  what to do to COMMAND if the lock is lost\n"
          "                            (default term)\n"
          "      --kill-grace DUR      SIGTERM this long before SIGKILL, which lands before\n"
          "                            the lock's validity ends (default 10s, or the most\n"
          "                            that fits: a third of the lease less a margin;\n"
          "                            half of a fixed --lease)\n"
          "      --wait-replicas N     Redis: a hold (and each renewal) counts only once N\n"
          "                            replicas have it, so a failover keeps it (with\n"
          "                            --standby on Sentinel or Cluster: at least 1)\n"
          "      --label L             name this holder for status/leader (default\n"
          "                            host:pid:command)\n"
          "      --standby             warm standby: run COMMAND now, tell it when it leads\n"
          "      --watch               leader: print every change of leader, in order\n"
          "      --json                status: print JSON\n"
          "      --force               release: confirm removing the lock whoever holds it\n"
          "  -v, --verbose             say what dlock is doing on stderr\n"
          "  -h, --help                show this help\n"
          "  -V, --version             show the version\n",
          stdout);
    print_usage_tail();
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

/* The parse in progress: the options and whether a kind option was seen. */
typedef struct parse_state {
    cli_options o;
    bool kind_set;
} parse_state;

static int set_kind(void *base, cli_kind k, const char *opt, char *err, size_t errlen)
{
    parse_state *ps = base;
    if (ps->kind_set && ps->o.kind != k) {
        snprintf(err, errlen, "%s conflicts with another lock kind option "
                              "(--reentrant, --fair, --read, --write, --semaphore)", opt);
        return -1;
    }
    ps->o.kind = k;
    ps->kind_set = true;
    return 0;
}

/* --reentrant, --fair, --read, --write (the trigger passes its name). */
static int on_kind(void *b, const char *name, char *e, size_t n)
{
    static const struct { const char *name; cli_kind kind; } kinds[] = {
        {"reentrant", CLI_KIND_REENTRANT}, {"fair", CLI_KIND_FAIR}, {"read", CLI_KIND_READ}, {"write", CLI_KIND_WRITE}};
    char opt[32];
    snprintf(opt, sizeof(opt), "--%s", name);
    for (size_t i = 0; i < OPT_COUNT(kinds); i++)
        if (strcmp(name, kinds[i].name) == 0) return set_kind(b, kinds[i].kind, opt, e, n);
    snprintf(e, n, "internal: %s is no lock kind", opt);
    return -1;
}

static int on_semaphore(void *b, const char *v, char *e, size_t n)
{
    int64_t permits = 0;
    if (opt_parse_int("--semaphore", v, 1, 1000000, &permits, e, n) != 0) return -1;
    ((parse_state *)b)->o.permits = (int)permits;
    return set_kind(b, CLI_KIND_SEMAPHORE, "--semaphore", e, n);
}

/* -n: the same as -w 0; the last of -n and -w wins. */
static int on_nonblock(void *b, const char *v, char *e, size_t n)
{
    (void)v;
    (void)e;
    (void)n;
    ((parse_state *)b)->o.wait_ms = 0;
    return 0;
}

static int on_lost(void *b, const char *v, char *e, size_t n)
{
    static const struct { const char *name; cli_on_lost v; } modes[] = {
        {"term", CLI_ON_LOST_TERM}, {"kill", CLI_ON_LOST_KILL}, {"ignore", CLI_ON_LOST_IGNORE}};
    for (size_t i = 0; i < OPT_COUNT(modes); i++)
        if (strcmp(v, modes[i].name) == 0) {
            ((parse_state *)b)->o.on_lost = modes[i].v;
            return 0;
        }
    snprintf(e, n, "invalid --on-lost '%s': expected term, kill or ignore", v);
    return -1;
}

#define OFF(f) offsetof(parse_state, o.f)
#define DUR(n, f, lo_ms) {.name = n, .type = OPT_DURATION, .off = OFF(f), .lo = lo_ms, .hi = OPT_MAX_MS, .unit = OPT_UNIT_S}
#define FLAG(n, s, f) {.name = n, .short_name = s, .type = OPT_FLAG, .off = OFF(f)}
#define TRIGGER(n, s, fn) {.name = n, .short_name = s, .type = OPT_TRIGGER, .call = fn}

/* Every option (cli_print_usage documents each; a test checks it). Bare
 * durations are seconds, as they always were. */
static const opt_spec specs[] = {
    {.name = "wait", .short_name = 'w', .type = OPT_DURATION, .off = OFF(wait_ms), .lo = 0, .hi = OPT_MAX_MS,
     .unit = OPT_UNIT_S},
    DUR("timeout", wait_ms, 0), /* flock(1) spells it both ways */
    TRIGGER("nonblock", 'n', on_nonblock),
    TRIGGER("nb", 0, on_nonblock),
    {.name = "conflict-exit-code", .short_name = 'E', .type = OPT_INT, .off = OFF(conflict_code), .lo = 0,
     .hi = 255},
    {.name = "command", .short_name = 'c', .type = OPT_STR, .off = OFF(shell_cmd)},
    DUR("lease", lease_ms, 1),
    DUR("watchdog-lease", watchdog_ms, 300),
    DUR("kill-grace", kill_grace_ms, 0),
    {.name = "wait-replicas", .type = OPT_INT, .off = OFF(wait_replicas), .lo = 0, .hi = 64},
    {.name = "url", .short_name = 'u', .type = OPT_STR, .off = OFF(url)},
    {.name = "prefix", .type = OPT_STR, .off = OFF(prefix)},
    TRIGGER("reentrant", 0, on_kind),
    TRIGGER("fair", 0, on_kind),
    TRIGGER("read", 0, on_kind),
    TRIGGER("write", 0, on_kind),
    {.name = "semaphore", .type = OPT_CALL, .call = on_semaphore},
    {.name = "on-lost", .type = OPT_CALL, .call = on_lost},
    FLAG("json", 0, json),
    {.name = "label", .type = OPT_STR, .off = OFF(label)},
    FLAG("standby", 0, standby),
    FLAG("watch", 0, watch),
    FLAG("force", 0, force),
    FLAG("verbose", 'v', verbose),
    FLAG("help", 'h', help),
    FLAG("version", 'V', version),
};

/* The subcommands' one operand: NAME. */
static int sub_operand(void *base, const char *arg, char *err, size_t errlen)
{
    parse_state *ps = base;
    if (ps->o.name) {
        snprintf(err, errlen, "unexpected argument '%s'", arg);
        return -1;
    }
    ps->o.name = arg;
    return 0;
}

static void defaults(cli_options *o)
{
    memset(o, 0, sizeof(*o));
    o->mode = CLI_MODE_RUN;
    o->kind = CLI_KIND_SIMPLE;
    o->wait_ms = -1;
    o->conflict_code = CLI_EXIT_CONFLICT;
    o->kill_grace_ms = -1; /* not given: fitted (fit_kill_grace) */
    o->on_lost = CLI_ON_LOST_TERM;
    const char *env = getenv("DLOCK_URL");
    o->url = (env && *env) ? env : CLI_DEFAULT_URL;
    o->prefix = "";
}

int64_t cli_lease_ms(const cli_options *o)
{
    if (o->lease_ms > 0) return o->lease_ms;
    return o->watchdog_ms > 0 ? o->watchdog_ms : CLI_DEFAULT_LEASE_MS;
}

int64_t cli_kill_margin_ms(int64_t lease_ms)
{
    int64_t m = lease_ms / 20;
    return m < 100 ? 100 : m > 1000 ? 1000 : m;
}

int64_t cli_kill_grace_max_ms(int64_t lease_ms, bool renewed)
{
    int64_t max = lease_ms / (renewed ? 3 : 2) - cli_kill_margin_ms(lease_ms);
    return max > 0 ? max : 0;
}

/* COMMAND must be gone before the lock's validity ends (child.c), so the
 * grace between SIGTERM and SIGKILL has to fit under the lease. A given
 * --kill-grace that does not fit is refused; the default is fitted. */
static int fit_kill_grace(cli_options *o)
{
    bool renewed = o->lease_ms <= 0; /* watchdog mode (--standby always is) */
    int64_t lease = cli_lease_ms(o), max = cli_kill_grace_max_ms(lease, renewed);
    if (o->kill_grace_ms < 0) {
        o->kill_grace_ms = CLI_DEFAULT_KILL_GRACE_MS < max ? CLI_DEFAULT_KILL_GRACE_MS : max;
        return 0;
    }
    if (o->kill_grace_ms <= max || o->on_lost != CLI_ON_LOST_TERM) return 0;
    return usage_error("--kill-grace %.3gs does not fit under the %.3gs lease: COMMAND must be gone "
                       "%.3gs before the lock's validity ends; use at most --kill-grace %lldms "
                       "(%s the lease less that margin), or a longer lease",
                       (double)o->kill_grace_ms / 1000.0, (double)lease / 1000.0,
                       (double)cli_kill_margin_ms(lease) / 1000.0, (long long)max,
                       renewed ? "a third of" : "half");
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
    if (o->mode != CLI_MODE_LEADER && o->watch)
        return usage_error("--watch is only for 'dlock leader'");
    if (o->mode != CLI_MODE_RUN && o->standby)
        return usage_error("--standby runs COMMAND: dlock [options] --standby NAME -- COMMAND");
    if (o->standby && (o->kind != CLI_KIND_SIMPLE || o->lease_ms > 0))
        return usage_error("--standby is an election: it takes no lock kind option and no --lease "
                           "(use --watchdog-lease)");
    if (o->label && (o->kind != CLI_KIND_SIMPLE && o->kind != CLI_KIND_REENTRANT))
        return usage_error("--label names a holder of a simple or --reentrant lock, or a --standby "
                           "candidate");
    if (o->label && !*o->label) return usage_error("--label must not be empty");
    if (o->standby && o->on_lost != CLI_ON_LOST_TERM)
        return usage_error("--standby tells COMMAND to stop leading with SIGUSR2; --on-lost does not apply");
    if (o->lease_ms > 0 && o->watchdog_ms > 0)
        return usage_error("--lease (fixed, never renewed) and --watchdog-lease (renewed) exclude each "
                           "other: give one of them");
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

/* The subcommand named by the first operand (argv[i]), or CLI_MODE_RUN. An
 * operand after "--" is always NAME: `dlock [options] -- status -- COMMAND`
 * runs COMMAND under a lock called "status". */
static cli_mode subcommand_at(int argc, char **argv, int i)
{
    if (i >= argc || (i > 1 && strcmp(argv[i - 1], "--") == 0)) return CLI_MODE_RUN;
    if (strcmp(argv[i], "status") == 0) return CLI_MODE_STATUS;
    if (strcmp(argv[i], "release") == 0) return CLI_MODE_RELEASE;
    if (strcmp(argv[i], "leader") == 0) return CLI_MODE_LEADER;
    return CLI_MODE_RUN;
}

/* Options may come before a subcommand and after it; in run mode they stop
 * at NAME: COMMAND's own options must stay COMMAND's. */
static int parse_words(int argc, char **argv, parse_state *ps, int *next_out)
{
    char err[512];
    int next = argc;
    if (opt_parse_from(specs, OPT_COUNT(specs), argc, argv, 1, true, ps, NULL, &next, err, sizeof(err)) != 0)
        return usage_error("%s", err);
    ps->o.mode = subcommand_at(argc, argv, next);
    if (ps->o.mode != CLI_MODE_RUN &&
        opt_parse_from(specs, OPT_COUNT(specs), argc, argv, next + 1, false, ps, sub_operand, NULL, err,
                       sizeof(err)) != 0)
        return usage_error("%s", err);
    *next_out = next;
    return 0;
}

int cli_parse(int argc, char **argv, cli_options *o)
{
    parse_state ps = {.kind_set = false};
    defaults(&ps.o);
    int next = argc;
    int rc = parse_words(argc, argv, &ps, &next);
    if (rc != 0) return rc;
    *o = ps.o;
    if (o->help || o->version) {
        o->mode = o->help ? CLI_MODE_HELP : CLI_MODE_VERSION;
        return 0;
    }
    if (o->mode == CLI_MODE_RUN) {
        if (next >= argc) return usage_error("no lock NAME given");
        o->name = argv[next];
        rc = parse_command(argc, argv, next + 1, o);
        if (rc != 0) return rc;
    } else if (!o->name) {
        return usage_error(o->mode == CLI_MODE_LEADER ? "no election NAME given: dlock leader [--watch] NAME"
                                                      : "no lock NAME given");
    }
    rc = check_mode(o);
    return rc ? rc : fit_kill_grace(o);
}

const char *cli_label(const cli_options *o)
{
    static char label[257]; /* DLOCK_LABEL_MAX + 1 */
    if (label[0]) return label;
    if (o->label) {
        snprintf(label, sizeof(label), "%s", o->label);
    } else {
        char host[128] = "?";
        if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "?");
        host[sizeof(host) - 1] = '\0';
        const char *cmd = o->shell_cmd ? "sh" : o->cmd && o->cmd[0] ? o->cmd[0] : "dlock";
        const char *slash = strrchr(cmd, '/');
        snprintf(label, sizeof(label), "%s:%ld:%s", host, (long)getpid(), slash && slash[1] ? slash + 1 : cmd);
    }
    for (char *p = label; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return label;
}
