/* seckill-persist: runs one persistence worker (src/seckill/persist.h):
 * accepted orders from Redis streams into the database, reclaim of dead
 * workers' entries, dead letters, payment-timeout cancellation. Several
 * may run at once. SIGINT/SIGTERM stop it after the current batch. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "persist.h"
#include "sk_err.h"

static atomic_int stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, 1);
}

static void log_line(const char *line, void *ud)
{
    (void)ud;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ seckill-persist: %s\n", tm.tm_year + 1900, tm.tm_mon + 1,
            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, line);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: seckill-persist [options]\n"
            "  --redis-url URL        Redis (env REDIS_URL; default redis://127.0.0.1:6379)\n"
            "  --database-url URL     sqlite:///abs/path.db, a file path, or postgresql://... (env DATABASE_URL; required)\n"
            "  --campaign ID          only this campaign (default: all in seckill:campaigns and the database)\n"
            "  --consumer NAME        consumer name in group seckill-persist (default host-pid-random)\n"
            "  --batch N              entries per transaction (default 1000)\n"
            "  --block DUR            XREADGROUP BLOCK (default 500ms)\n"
            "  --claim-idle DUR       reclaim entries idle this long on other consumers (default 30s)\n"
            "  --max-deliveries N     then move the entry to {c:<id>}:orders:dead (default 5)\n"
            "  --pay-timeout DUR      cancel unpaid orders after DUR; 0 = never (env SECKILL_PAY_TIMEOUT; default 15m)\n"
            "  --sweep-interval DUR   how often to look for unpaid orders (default 1s)\n"
            "  --drain                exit 0 once every stream is drained\n"
            "  --quiet                no log lines\n"
            "Durations: 250ms, 30s, 15m, 2h (plain number = ms).\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    sk_persist_opts o;
    sk_persist_opts_init(&o);
    o.redis_url = getenv("REDIS_URL") ? getenv("REDIS_URL") : "redis://127.0.0.1:6379";
    o.database_url = getenv("DATABASE_URL");
    o.log = log_line;
    const char *pt = getenv("SECKILL_PAY_TIMEOUT");
    if (pt && sk_persist_parse_duration(pt, &o.pay_timeout_ms)) {
        fprintf(stderr, "seckill-persist: bad SECKILL_PAY_TIMEOUT '%s'\n", pt);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--drain") == 0) {
            o.drain = true;
            continue;
        } else if (strcmp(a, "--quiet") == 0) {
            o.log = NULL;
            continue;
        } else if (!v) {
            fprintf(stderr, "seckill-persist: %s needs a value (or is unknown; see --help)\n", a);
            return 2;
        } else if (strcmp(a, "--redis-url") == 0) o.redis_url = v;
        else if (strcmp(a, "--database-url") == 0) o.database_url = v;
        else if (strcmp(a, "--campaign") == 0) o.campaign = v;
        else if (strcmp(a, "--consumer") == 0) o.consumer = v;
        else if (strcmp(a, "--batch") == 0) bad = parse_int(v, 1, 10000, &o.batch);
        else if (strcmp(a, "--max-deliveries") == 0) bad = parse_int(v, 1, 1000, &o.max_deliveries);
        else if (strcmp(a, "--block") == 0) bad = sk_persist_parse_duration(v, &o.block_ms);
        else if (strcmp(a, "--claim-idle") == 0) bad = sk_persist_parse_duration(v, &o.claim_idle_ms);
        else if (strcmp(a, "--pay-timeout") == 0) bad = sk_persist_parse_duration(v, &o.pay_timeout_ms);
        else if (strcmp(a, "--sweep-interval") == 0) bad = sk_persist_parse_duration(v, &o.sweep_interval_ms);
        else {
            fprintf(stderr, "seckill-persist: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "seckill-persist: bad value for %s: '%s'\n", a, v);
            return 2;
        }
        i++;
    }
    if (!o.database_url) {
        fprintf(stderr, "seckill-persist: no database: set --database-url or DATABASE_URL\n");
        return 2;
    }
    if (o.campaign && !sk_db_id_valid(o.campaign)) {
        fprintf(stderr, "seckill-persist: bad campaign id '%s'\n", o.campaign);
        return 2;
    }
    if (o.block_ms > 60000 || o.claim_idle_ms < 1) {
        fprintf(stderr, "seckill-persist: --block must be <= 60s and --claim-idle > 0\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    o.stop = &stop_flag;
    char err[512] = "";
    sk_persist_stats st;
    int rc = sk_persist_run(&o, &st, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "seckill-persist: %s: %s\n", sk_strerror(rc), err);
        return 1;
    }
    return 0;
}
