/* seckill-persist: runs one persistence worker (src/seckill/pipeline/persist.h):
 * accepted orders from Redis streams into the database, reclaim of dead
 * workers' entries, dead letters, payment-timeout cancellation. Several
 * may run at once. SIGINT/SIGTERM stop it after the current batch.
 * Exit codes: 0 ok (or --drain finished), 1 runtime failure, 2 usage.
 * Log lines go through one limiter (log_limit.h): a line repeated within
 * 10 s is counted, not printed again. */
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlock/dlock.h"
#include "log_limit.h"
#include "options.h"
#include "persist.h"
#include "envfile.h"
#include "seckill_urls.h"
#include "sk_err.h"

typedef struct args {
    sk_persist_opts o;
    bool help, version, quiet;
    const char *env_file; /* read by opt_env_file_apply before the rest */
} args;

#define OFF(f) offsetof(args, f)

static const opt_spec specs[] = {
    OPT_ENV_FILE_SPEC(OFF(env_file)),
    {.name = "redis-url", .type = OPT_STR, .off = OFF(o.redis_url), .arg = "URL", .env = "REDIS_URL",
     .def = "redis://127.0.0.1:6379", .check = skurl_check_redis, .help = "Redis: redis://, unix://, redis-sentinel:// or redis-cluster://\n(env REDIS_URL; default redis://127.0.0.1:6379)"},
    {.name = "database-url", .type = OPT_STR, .off = OFF(o.database_url), .arg = "URL", .env = "DATABASE_URL",
     .check = skurl_check_database, .help = "sqlite:///abs/path.db, a file path, or postgresql://...\n(env DATABASE_URL; required)"},
    {.name = "campaign", .type = OPT_STR, .off = OFF(o.campaign), .arg = "ID",
     .help = "only this campaign (default: all in seckill:campaigns and the database)"},
    {.name = "consumer", .type = OPT_STR, .off = OFF(o.consumer), .arg = "NAME",
     .help = "consumer name in group seckill-persist (default host-pid-random)"},
    {.name = "batch", .type = OPT_INT, .off = OFF(o.batch), .lo = 1, .hi = 10000, .arg = "N",
     .help = "entries per transaction (default 1000)"},
    {.name = "block", .type = OPT_DURATION, .off = OFF(o.block_ms), .lo = 0, .hi = 60000, .unit = OPT_UNIT_MS,
     .arg = "DUR", .help = "XREADGROUP BLOCK, at most 60s (default 500ms)"},
    {.name = "claim-idle", .type = OPT_DURATION, .off = OFF(o.claim_idle_ms), .lo = 1, .hi = OPT_MAX_MS,
     .unit = OPT_UNIT_MS, .arg = "DUR", .help = "reclaim entries idle this long on other consumers (default 30s)"},
    {.name = "max-deliveries", .type = OPT_INT, .off = OFF(o.max_deliveries), .lo = 1, .hi = 1000, .arg = "N",
     .help = "then move the entry to {c:<id>}:orders:dead (default 5)"},
    {.name = "pay-timeout", .type = OPT_DURATION, .off = OFF(o.pay_timeout_ms), .lo = 0, .hi = OPT_MAX_MS,
     .unit = OPT_UNIT_MS, .arg = "DUR", .env = "SECKILL_PAY_TIMEOUT",
     .help = "cancel unpaid orders after DUR; 0 = never\n(env SECKILL_PAY_TIMEOUT; default 15m)"},
    {.name = "sweep-interval", .type = OPT_DURATION, .off = OFF(o.sweep_interval_ms), .lo = 0, .hi = OPT_MAX_MS,
     .unit = OPT_UNIT_MS, .arg = "DUR", .help = "how often to look for unpaid orders (default 1s)"},
    {.name = "drain", .type = OPT_FLAG, .off = OFF(o.drain), .help = "exit 0 once every stream is drained"},
    {.name = "quiet", .type = OPT_FLAG, .off = OFF(quiet), .help = "no log lines"},
    {.name = "help", .short_name = 'h', .type = OPT_FLAG, .off = OFF(help), .help = "show this help"},
    {.name = "version", .type = OPT_FLAG, .off = OFF(version), .help = "show the version"},
};

static atomic_int stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, 1);
}

static void print_line(int level, const char *line, void *ud)
{
    (void)level;
    (void)ud;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ seckill-persist: %s\n", tm.tm_year + 1900, tm.tm_mon + 1,
            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, line);
}

static dlock__loglimit log_limit = DLOCK__LOGLIMIT_INIT(DLOCK__LOGLIMIT_WINDOW_MS, print_line, NULL);

static void log_line(const char *line, void *ud)
{
    (void)ud;
    dlock__loglimit_line(&log_limit, DLOCK_LOG_INFO, line);
}

static void usage(FILE *f)
{
    fputs("usage: seckill-persist [options]\n", f);
    opt_print_help(f, specs, OPT_COUNT(specs));
    fputs("Durations: 250ms, 1.5s, 30s, 15m, 2h (a bare number is milliseconds, deprecated).\n"
          "Exit status: 0 ok, 1 runtime failure, 2 usage or configuration error.\n", f);
}

/* Defaults < environment (after --env-file) < flags, then the checks across options.
 * Returns 0, or 2 after printing one line. */
static int parse(args *a, int argc, char **argv)
{
    char err[256];
    sk_persist_opts_init(&a->o);
    if (opt_env_file_apply(specs, OPT_COUNT(specs), argc, argv, err, sizeof(err)) ||
        opt_load(specs, OPT_COUNT(specs), argc, argv, a, NULL, err, sizeof(err))) {
        fprintf(stderr, "seckill-persist: %s (see --help)\n", err);
        return 2;
    }
    if (a->help || a->version) return 0;
    if (!a->o.database_url || !*a->o.database_url) {
        fprintf(stderr, "seckill-persist: no database: set --database-url or DATABASE_URL (the units' "
                        "is in /etc/dlock/seckill.env: --env-file /etc/dlock/seckill.env)\n");
        return 2;
    }
    if (a->o.campaign && !sk_db_id_valid(a->o.campaign)) {
        fprintf(stderr, "seckill-persist: bad campaign id '%s'\n", a->o.campaign);
        return 2;
    }
    a->o.log = a->quiet ? NULL : log_line;
    return 0;
}

static int run(sk_persist_opts *o)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    o->stop = &stop_flag;
    char err[512] = "";
    sk_persist_stats st;
    int rc = sk_persist_run(o, &st, err, sizeof(err));
    dlock__loglimit_flush(&log_limit);
    if (rc) {
        fprintf(stderr, "seckill-persist: %s: %s\n", sk_strerror(rc), err);
        return 1;
    }
    return 0;
}

/* The options module's deprecation warnings (a bare duration). */
static void warn_line(const char *msg) { fprintf(stderr, "seckill-persist: %s\n", msg); }

int main(int argc, char **argv)
{
    args a = {0};
    opt_set_warn(warn_line);
    int rc = parse(&a, argc, argv);
    if (rc) return rc;
    if (a.help) usage(stdout);
    else if (a.version) printf("seckill-persist %s\n", DLOCK_VERSION);
    else rc = run(&a.o);
    return rc;
}
