/* config.c: the settings table of seckilld and its three sources. One
 * table drives parsing, --help and --check-config; a test loads
 * etc/seckilld.conf with --check-config so the example stays valid. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_STR, T_INT, T_BOOL } opt_type;

typedef struct opt {
    const char *name;
    const char *env;
    opt_type type;
    const char *def;
    size_t off;
    const char *help;
} opt;

#define OFF(f) offsetof(seckilld_config, f)

static const opt opts[] = {
    {"port", "SECKILL_PORT", T_INT, "8080", OFF(port), "TCP port to listen on"},
    {"bind", "SECKILL_BIND", T_STR, "0.0.0.0", OFF(bind), "address to listen on"},
    {"workers", "SECKILL_WORKERS", T_INT, "1", OFF(workers),
     "worker processes sharing the port with SO_REUSEPORT (1 = single process)"},
    {"reuseport", "SECKILL_REUSEPORT", T_BOOL, "false", OFF(reuseport),
     "set SO_REUSEPORT so separately started instances can share one port"},
    {"redis-url", "REDIS_URL", T_STR, "redis://127.0.0.1:6379", OFF(redis_url),
     "Redis: redis://[user:pass@]host:port[/db], unix:///path, redis-sentinel://h:p/master"},
    {"database-url", "DATABASE_URL", T_STR, "", OFF(database_url),
     "system of record: sqlite:///abs/path.db, a file path, or postgresql://...; empty = Redis only"},
    {"admin-token", "SECKILL_ADMIN_TOKEN", T_STR, "", OFF(admin_token),
     "bearer token of the admin API (empty: admin API refused)"},
    {"user-secret", "SECKILL_USER_SECRET", T_STR, "", OFF(user_secret),
     "HMAC-SHA256 key: when set, purchases need X-User-Signature = hex HMAC(secret, user id)"},
    {"max-batch", "SECKILL_MAX_BATCH", T_INT, "64", OFF(max_batch),
     "purchases coalesced into one script call (1 = one by one)"},
    {"linger-us", "SECKILL_LINGER_US", T_INT, "1000", OFF(linger_us),
     "max wait (microseconds) to fill a batch while one is in flight"},
    {"user-rate-limit", "SECKILL_USER_RATE_LIMIT", T_INT, "0", OFF(user_rate_limit),
     "purchase attempts per user per window per campaign (0 = off)"},
    {"user-rate-window-ms", "SECKILL_USER_RATE_WINDOW_MS", T_INT, "1000", OFF(user_rate_window_ms),
     "window of the user rate limit"},
    {"ip-rate-limit", "SECKILL_IP_RATE_LIMIT", T_INT, "0", OFF(ip_rate_limit),
     "purchase attempts per client address per window per campaign (0 = off)"},
    {"ip-rate-window-ms", "SECKILL_IP_RATE_WINDOW_MS", T_INT, "1000", OFF(ip_rate_window_ms),
     "window of the ip rate limit"},
    {"trust-forwarded", "SECKILL_TRUST_FORWARDED", T_BOOL, "false", OFF(trust_forwarded),
     "take the client address from X-Forwarded-For (only behind a proxy you run)"},
    {"max-connections", "SECKILL_MAX_CONNECTIONS", T_INT, "10000", OFF(max_connections),
     "open client connections per process (accepting pauses at the limit)"},
    {"idle-timeout-ms", "SECKILL_IDLE_TIMEOUT_MS", T_INT, "10000", OFF(idle_timeout_ms),
     "a connection silent (reading or writing) this long is closed"},
    {"max-body", "SECKILL_MAX_BODY", T_INT, "8192", OFF(max_body), "request body limit in bytes (413 above)"},
    {"max-headers", "SECKILL_MAX_HEADERS", T_INT, "8192", OFF(max_headers), "request header limit in bytes"},
    {"soldout-poll-ms", "SECKILL_SOLDOUT_POLL_MS", T_INT, "500", OFF(soldout_poll_ms),
     "re-check period of a locally sold-out campaign (stock may come back)"},
    {"redis-timeout-ms", "SECKILL_REDIS_TIMEOUT_MS", T_INT, "2000", OFF(redis_timeout_ms),
     "a Redis reply later than this drops and reopens the connection"},
    {"shutdown-timeout-ms", "SECKILL_SHUTDOWN_TIMEOUT_MS", T_INT, "10000", OFF(shutdown_timeout_ms),
     "on SIGTERM, longest wait for in-flight requests"},
    {"degraded-after-ms", "SECKILL_DEGRADED_AFTER_MS", T_INT, "1000", OFF(degraded_after_ms),
     "with a database-url: Redis unreachable this long -> purchases take the database path"},
    {"degraded-recover-ms", "SECKILL_DEGRADED_RECOVER_MS", T_INT, "2000", OFF(degraded_recover_ms),
     "Redis healthy this long (and every database-path order mirrored) -> back to Redis"},
    {"degraded-max-inflight", "SECKILL_DEGRADED_MAX_INFLIGHT", T_INT, "64", OFF(degraded_max_inflight),
     "database-path purchases queued or running per process; beyond: 503 at once"},
    {"log-level", "SECKILL_LOG_LEVEL", T_STR, "info", OFF(log_level), "debug, info, warn or error"},
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static int set_opt(seckilld_config *c, const opt *o, const char *val, const char *where)
{
    void *p = (char *)c + o->off;
    char *end = NULL;
    switch (o->type) {
    case T_STR: {
        char *s = strdup(val);
        if (!s) return -1;
        free(*(char **)p);
        *(char **)p = s;
        return 0;
    }
    case T_BOOL:
        if (!strcmp(val, "1") || !strcmp(val, "true") || !strcmp(val, "yes") || !strcmp(val, "on"))
            *(bool *)p = true;
        else if (!strcmp(val, "0") || !strcmp(val, "false") || !strcmp(val, "no") || !strcmp(val, "off"))
            *(bool *)p = false;
        else break;
        return 0;
    case T_INT: {
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno || end == val || *end || v < 0) break;
        if (o->off == OFF(port) || o->off == OFF(workers) || o->off == OFF(max_batch)) {
            if (v > 65535) break;
            *(int *)p = (int)v;
        } else {
            *(int64_t *)p = v;
        }
        return 0;
    }
    }
    fprintf(stderr, "seckilld: %s: bad value \"%s\" for %s\n", where, val, o->name);
    return -1;
}

static const opt *find_opt(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) return &opts[i];
    return NULL;
}

static int load_file(seckilld_config *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "seckilld: cannot read config file %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[4096], where[600];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        lineno++;
        size_t n = strcspn(line, "\r\n");
        line[n] = '\0';
        char *k = line;
        while (*k == ' ' || *k == '\t') k++;
        if (*k == '#' || *k == '\0') continue;
        size_t klen = strcspn(k, " \t");
        char *v = k + klen;
        while (*v == ' ' || *v == '\t') v++;
        char *e = v + strlen(v);
        while (e > v && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
        if (!strcmp(v, "\"\"")) *v = '\0'; /* "" = empty */
        snprintf(where, sizeof(where), "%s:%d", path, lineno);
        const opt *o = find_opt(k, klen);
        if (!o || !strncmp(k, "config", klen)) {
            fprintf(stderr, "seckilld: %s: unknown setting \"%.*s\"\n", where, (int)klen, k);
            rc = -1;
        } else {
            rc = set_opt(c, o, v, where);
        }
    }
    fclose(f);
    return rc;
}

void seckilld_config_usage(FILE *f)
{
    fprintf(f, "usage: seckilld [--config FILE] [--name value ...]\n\n"
               "The flash-sale HTTP service (docs/http-api.md, docs/seckill.md).\n"
               "Settings come from defaults < config file (`name value` lines) <\n"
               "environment < flags. Flags take `--name value` or `--name=value`;\n"
               "boolean flags may be given alone (--reuseport).\n\n"
               "  --config FILE (env SECKILL_CONFIG)\n      read settings from FILE\n");
    for (size_t i = 0; i < NOPTS; i++)
        fprintf(f, "  --%s (env %s, default \"%s\")\n      %s\n", opts[i].name, opts[i].env,
                opts[i].def, opts[i].help);
    fprintf(f, "  --check-config\n      load and check the settings, print them (secrets masked), exit\n"
               "  --help, --version\n\nSignals: SIGTERM/SIGINT stop accepting, finish in-flight "
               "requests and exit 0.\nExit codes: 0 ok, 1 runtime failure, 2 bad configuration.\n");
}

int seckilld_config_load(seckilld_config *c, int argc, char **argv)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < NOPTS; i++)
        if (set_opt(c, &opts[i], opts[i].def, "default")) return -1;
    const char *cfile = getenv("SECKILL_CONFIG");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            seckilld_config_usage(stdout);
            return 1;
        }
        if (!strcmp(argv[i], "--check-config")) c->check_only = true;
        if (!strcmp(argv[i], "--version")) {
            printf("seckilld 0.1.0\n");
            return 1;
        }
        if (!strcmp(argv[i], "--config") && i + 1 < argc) cfile = argv[i + 1];
        else if (!strncmp(argv[i], "--config=", 9)) cfile = argv[i] + 9;
    }
    if (cfile && *cfile && load_file(c, cfile)) return -1;
    for (size_t i = 0; i < NOPTS; i++) {
        const char *v = getenv(opts[i].env);
        if (v && set_opt(c, &opts[i], v, opts[i].env)) return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "seckilld: unexpected argument \"%s\" (see --help)\n", a);
            return -1;
        }
        a += 2;
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len == 6 && !strncmp(a, "config", 6)) {
            if (!eq) i++;
            continue;
        }
        if (len == 12 && !strncmp(a, "check-config", 12)) continue;
        const opt *o = find_opt(a, len);
        if (!o) {
            fprintf(stderr, "seckilld: unknown option --%.*s (see --help)\n", (int)len, a);
            return -1;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val && o->type == T_BOOL && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))) val = "true";
        if (!val) {
            if (i + 1 >= argc) {
                fprintf(stderr, "seckilld: --%s needs a value\n", o->name);
                return -1;
            }
            val = argv[++i];
        }
        if (set_opt(c, o, val, "command line")) return -1;
    }
    if (c->port < 0 || c->workers < 1 || c->workers > 256 || c->max_batch < 1 || c->max_batch > 512 ||
        c->max_connections < 1 || c->max_body < 1 || c->max_headers < 256 ||
        c->degraded_max_inflight < 1 || c->degraded_max_inflight > 100000) {
        fprintf(stderr, "seckilld: out-of-range setting (workers 1..256, max-batch 1..512, "
                        "max-connections >= 1, max-headers >= 256, degraded-max-inflight 1..100000)\n");
        return -1;
    }
    if (strcmp(c->log_level, "debug") && strcmp(c->log_level, "info") && strcmp(c->log_level, "warn") &&
        strcmp(c->log_level, "error")) {
        fprintf(stderr, "seckilld: log-level must be debug, info, warn or error\n");
        return -1;
    }
    return 0;
}

void seckilld_config_print(const seckilld_config *c, FILE *f)
{
    for (size_t i = 0; i < NOPTS; i++) {
        const void *p = (const char *)c + opts[i].off;
        const char *name = opts[i].name;
        if (opts[i].type == T_STR) {
            const char *v = *(char *const *)p;
            bool secret = !strcmp(name, "admin-token") || !strcmp(name, "user-secret");
            if (secret && v && *v) v = "(set)";
            else if (!strcmp(name, "redis-url") || !strcmp(name, "database-url")) {
                if (v && strchr(v, '@')) v = "(set, has credentials)";
            }
            fprintf(f, "%s %s\n", name, v && *v ? v : "\"\"");
        } else if (opts[i].type == T_BOOL) {
            fprintf(f, "%s %s\n", name, *(const bool *)p ? "true" : "false");
        } else if (opts[i].off == OFF(port) || opts[i].off == OFF(workers) || opts[i].off == OFF(max_batch)) {
            fprintf(f, "%s %d\n", name, *(const int *)p);
        } else {
            fprintf(f, "%s %lld\n", name, (long long)*(const int64_t *)p);
        }
    }
}

void seckilld_config_free(seckilld_config *c)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (opts[i].type == T_STR) {
            char **p = (char **)(void *)((char *)c + opts[i].off);
            free(*p);
            *p = NULL;
        }
}
