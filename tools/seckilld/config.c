/* config.c: the settings table of seckilld and its three sources. One
 * table drives parsing, validation, --help and --check-config: every value
 * is checked (range, URL syntax, choice) where it is read, whichever
 * source gives it, so --check-config refuses exactly what the start
 * refuses before opening anything. A test loads etc/seckilld.conf with
 * --check-config so the example stays valid. */
#include "client_addr.h"
#include "config.h"

#include "conffile.h"
#include "envfile.h"
#include "dlock/dlock.h"
#include "options.h"
#include "seckill_urls.h"

#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define OFF(f) offsetof(seckilld_config, f)
#define BIG 1000000000LL
#define STR(n, e, d, f, h) {.name = n, .type = OPT_STRDUP, .off = OFF(f), .env = e, .def = d, .help = h}
#define CHK(n, e, d, f, c, h) {.name = n, .type = OPT_STRDUP, .off = OFF(f), .env = e, .def = d, .check = c, .help = h}
#define BOOL(n, e, d, f, h) {.name = n, .type = OPT_BOOL, .off = OFF(f), .env = e, .def = d, .help = h}
#define INT(n, e, d, f, l, u, h) {.name = n, .type = OPT_INT, .off = OFF(f), .lo = l, .hi = u, .env = e, .def = d, .help = h}
#define I64(n, e, d, f, l, u, h) {.name = n, .type = OPT_I64, .off = OFF(f), .lo = l, .hi = u, .env = e, .def = d, .help = h}
#define MSR(n, e, d, f, l, h) {.name = n, .type = OPT_DURATION, .off = OFF(f), .lo = l, .hi = OPT_MAX_MS, .unit = OPT_UNIT_MS, .env = e, .def = d, .help = h}
#define MS(n, e, d, f, h) MSR(n, e, d, f, 0, h)

/* bind: resolved as the listener will resolve it (getaddrinfo, passive). */
static int check_bind(const char *v, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int rc = getaddrinfo(*v ? v : NULL, "0", &hints, &ai);
    if (ai) freeaddrinfo(ai);
    if (rc == 0) return 0;
    snprintf(err, errlen, "not an address to listen on ('%s': %s)", v, gai_strerror(rc));
    return -1;
}

static int check_proxies(const char *v, char *err, size_t errlen)
{
    sk_trusted t;
    return sk_trusted_parse(v, &t, err, errlen);
}

static int check_log_level(const char *v, char *err, size_t errlen)
{
    static const char *const levels[] = {"debug", "info", "warn", "error"};
    for (size_t i = 0; i < OPT_COUNT(levels); i++)
        if (strcmp(v, levels[i]) == 0) return 0;
    snprintf(err, errlen, "'%s': expected debug, info, warn or error", v);
    return -1;
}

/* A row with an environment variable is a setting (flag, file key, env);
 * the others (--env-file, --config, --check-config, --help, --version) are
 * flags only. */
static const opt_spec opts[] = {
    OPT_ENV_FILE_SPEC(OFF(env_file)),
    {.name = "config", .type = OPT_STR, .off = OFF(config_file), .arg = "FILE",
     .help = "read settings from FILE (env SECKILL_CONFIG)"},
    INT("port", "SECKILL_PORT", "8080", port, 0, 65535, "TCP port to listen on"),
    CHK("bind", "SECKILL_BIND", "0.0.0.0", bind, check_bind, "address to listen on"),
    INT("workers", "SECKILL_WORKERS", "1", workers, 1, 256,
        "worker processes sharing the port with SO_REUSEPORT (1 = single process)"),
    INT("threads", "SECKILL_THREADS", "0", threads, 0, 256,
        "event loops in this process, each with its own SO_REUSEPORT listener and Redis connection (0 = one per CPU)"),
    BOOL("reuseport", "SECKILL_REUSEPORT", "false", reuseport,
         "set SO_REUSEPORT so separately started instances can share one port"),
    CHK("redis-url", "REDIS_URL", "redis://127.0.0.1:6379", redis_url, skurl_check_redis,
        "Redis: redis://[user:pass@]host:port[/db], unix:///path, redis-sentinel://h:p/master,\n"
        "      or a Cluster: redis-cluster://h:p[,h:p...]"),
    CHK("database-url", "DATABASE_URL", "", database_url, skurl_check_database,
        "system of record: sqlite:///abs/path.db, a file path, or postgresql://...; empty = Redis only"),
    STR("admin-token", "SECKILL_ADMIN_TOKEN", "", admin_token,
        "bearer token of the admin API (empty: admin API refused)"),
    STR("user-secret", "SECKILL_USER_SECRET", "", user_secret,
        "HMAC-SHA256 key: when set, buyers need X-User-Signature: v1=<hex>;exp=<unix s>[;c=<campaign>]\n"
        "      over user\\nexp[\\ncampaign] (docs/http-api.md, \"Signed identities\")"),
    STR("user-secret-previous", "SECKILL_USER_SECRET_PREVIOUS", "", user_secret_previous,
        "the previous user-secret, still accepted while signers move to the new one (key rotation)"),
    BOOL("user-signature-legacy", "SECKILL_USER_SIGNATURE_LEGACY", "false", user_signature_legacy,
         "also accept the old unexpiring X-User-Signature (hex HMAC(secret, user id)); a warning at start"),
    STR("order-secret", "SECKILL_ORDER_SECRET", "", order_secret,
        "key of the order ids buyers see (<id>-<tag>); the same on every instance (empty: the\n"
        "      admin token's, else the user secret's, else a random one valid on this process only)"),
    INT("max-batch", "SECKILL_MAX_BATCH", "64", max_batch, 1, 512,
        "purchases coalesced into one script call (1 = one by one; at most 512)"),
    I64("linger-us", "SECKILL_LINGER_US", "1000", linger_us, 0, BIG,
        "max wait (microseconds) to fill a batch while one is in flight"),
    I64("user-rate-limit", "SECKILL_USER_RATE_LIMIT", "0", user_rate_limit, 0, BIG,
        "purchase attempts per user per window per campaign (0 = off)"),
    MS("user-rate-window-ms", "SECKILL_USER_RATE_WINDOW_MS", "1000", user_rate_window_ms,
       "window of the user rate limit"),
    I64("ip-rate-limit", "SECKILL_IP_RATE_LIMIT", "0", ip_rate_limit, 0, BIG,
        "purchase attempts per client address per window per campaign (0 = off)"),
    MS("ip-rate-window-ms", "SECKILL_IP_RATE_WINDOW_MS", "1000", ip_rate_window_ms, "window of the ip rate limit"),
    CHK("trusted-proxies", "SECKILL_TRUSTED_PROXIES", "", trusted_proxies, check_proxies,
        "CIDR[,CIDR...] of your proxies: from such a peer the client address is the rightmost\n"
        "      X-Forwarded-For (or Forwarded: for=) entry outside these ranges; not an address: 400"),
    BOOL("trust-forwarded", "SECKILL_TRUST_FORWARDED", "false", trust_forwarded,
         "deprecated (a warning at start): trusted-proxies of the loopback and private ranges"),
    I64("max-connections", "SECKILL_MAX_CONNECTIONS", "10000", max_connections, 1, BIG,
        "open client connections per process (at the limit the one waiting longest for a request makes room, else accepting pauses)"),
    MS("idle-timeout-ms", "SECKILL_IDLE_TIMEOUT_MS", "10000", idle_timeout_ms,
       "a connection silent (reading or writing) this long is closed"),
    MS("head-timeout-ms", "SECKILL_HEAD_TIMEOUT_MS", "5000", head_timeout_ms,
       "a request head not complete this long after its first byte: 408, closed (whatever its pace)"),
    MS("body-timeout-ms", "SECKILL_BODY_TIMEOUT_MS", "10000", body_timeout_ms,
       "a request body not complete this long after its head: 408, closed"),
    I64("max-connections-per-address", "SECKILL_MAX_CONNECTIONS_PER_ADDRESS", "1024", max_conns_per_addr, 0, BIG,
        "open connections from one client address (0 = no cap; beyond: 503, closed)"),
    INT("ipv6-prefix", "SECKILL_IPV6_PREFIX", "64", ipv6_prefix, 1, 128,
        "per-address limits (connections, ip-rate-limit) count an IPv6 client by its network of this many bits "
        "(128: each address); ::ffff:a.b.c.d counts as a.b.c.d"),
    I64("max-body", "SECKILL_MAX_BODY", "8192", max_body, 1, BIG, "request body limit in bytes (413 above)"),
    I64("max-headers", "SECKILL_MAX_HEADERS", "8192", max_headers, 256, BIG,
        "request header limit in bytes (at least 256)"),
    MS("soldout-poll-ms", "SECKILL_SOLDOUT_POLL_MS", "500", soldout_poll_ms,
       "re-check period of a locally sold-out campaign (stock may come back)"),
    MS("redis-timeout-ms", "SECKILL_REDIS_TIMEOUT_MS", "2000", redis_timeout_ms,
       "a Redis reply (or connect) later than this drops and reopens the connection"),
    INT("replica-acks", "SECKILL_REPLICA_ACKS", "-1", replica_acks, -1, 1000,
        "replicas that must acknowledge (WAIT) a decision before it is answered 201, else 202;\n"
        "      -1 = the connected replicas the master reports at every connect (at least 1 on a\n"
        "      redis-sentinel:// or redis-cluster:// URL); 0 = standalone:\n"
        "      201 only with appendonly yes + appendfsync always (docs/http-api.md)"),
    MSR("replica-ack-timeout-ms", "SECKILL_REPLICA_ACK_TIMEOUT_MS", "100", replica_ack_timeout_ms, 1,
       "WAIT's timeout: longer means fewer 202s on a slow replica, but a replica that stops\n"
       "      answering stalls each batch already waiting (and the connection behind it) this\n"
       "      long; with fewer replicas in sync than replica-acks no WAIT is sent (202 at once)"),
    MSR("worker-lease-ms", "SECKILL_WORKER_LEASE_MS", "60000", worker_lease_ms, 300,
       "order-id worker-id lease: renewed at 1/3, no ids issued past 5/6 without renewal"),
    MS("shutdown-timeout-ms", "SECKILL_SHUTDOWN_TIMEOUT_MS", "10000", shutdown_timeout_ms,
       "on SIGTERM, longest wait for in-flight requests"),
    MS("degraded-after-ms", "SECKILL_DEGRADED_AFTER_MS", "1000", degraded_after_ms,
       "with a database-url: Redis unreachable this long -> purchases take the database path"),
    MS("degraded-recover-ms", "SECKILL_DEGRADED_RECOVER_MS", "2000", degraded_recover_ms,
       "Redis healthy this long (and every database-path order mirrored) -> back to Redis"),
    I64("degraded-max-inflight", "SECKILL_DEGRADED_MAX_INFLIGHT", "64", degraded_max_inflight, 1, 100000,
        "database-path purchases queued or running per process; beyond: 503 at once"),
    CHK("log-level", "SECKILL_LOG_LEVEL", "info", log_level, check_log_level, "debug, info, warn or error"),
    {.name = "check-config", .type = OPT_FLAG, .off = OFF(check_only),
     .help = "check the settings as the start does (opening nothing), print them (secrets masked), exit"},
    {.name = "help", .short_name = 'h', .type = OPT_FLAG, .off = OFF(help), .help = "show this help"},
    {.name = "version", .type = OPT_FLAG, .off = OFF(version), .help = "show the version"},
};
#define NOPTS OPT_COUNT(opts)

void seckilld_config_usage(FILE *f)
{
    fprintf(f, "usage: seckilld [--env-file FILE] [--config FILE] [--name value ...]\n\n"
               "The flash-sale HTTP service (docs/http-api.md, docs/seckill.md).\n"
               "Settings come from defaults < config file (`name value` lines) <\n"
               "environment (with --env-file FILE: the environment once FILE's\n"
               "variables are set, as the units' EnvironmentFile= sets them) < flags.\n"
               "Flags take `--name value` or `--name=value`; boolean flags may be\n"
               "given alone (--reuseport). Settings ending in -ms\n"
               "are durations: 250ms, 1.5s, 30s, 2m; a bare number is milliseconds.\n\n");
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_spec *o = &opts[i];
        if (o->env)
            fprintf(f, "  --%s (env %s, default \"%s\")\n      %s\n", o->name, o->env, o->def, o->help);
        else
            fprintf(f, "  --%s%s%s\n      %s\n", o->name, o->arg ? " " : "", o->arg ? o->arg : "", o->help);
    }
    fprintf(f, "\nSignals: SIGTERM/SIGINT stop accepting, finish in-flight "
               "requests and exit 0.\nExit codes: 0 ok, 1 runtime failure, 2 bad configuration,\n77 Redis refused the credentials at start-up.\n");
}

/* Flags are read twice: first for --config / --help / --version, then
 * again after the file and the environment, so that flags win. */
int seckilld_config_load(seckilld_config *c, int argc, char **argv)
{
    char err[512];
    memset(c, 0, sizeof(*c));
    if (opt_set_defaults(opts, NOPTS, c, err, sizeof(err)) ||
        opt_parse_args(opts, NOPTS, argc, argv, c, NULL, err, sizeof(err))) {
        fprintf(stderr, "seckilld: %s (see --help)\n", err);
        return -1;
    }
    if (c->help || c->version) {
        if (c->help) seckilld_config_usage(stdout);
        else printf("seckilld %s\n", DLOCK_VERSION);
        return 1;
    }
    if (c->env_file && opt_env_file_load(c->env_file, err, sizeof(err)) != 0) {
        fprintf(stderr, "seckilld: %s\n", err);
        return -1;
    }
    const char *cfile = c->config_file ? c->config_file : getenv("SECKILL_CONFIG");
    if ((cfile && *cfile && opt_load_file(opts, NOPTS, cfile, c, err, sizeof(err))) ||
        opt_load_env(opts, NOPTS, c, err, sizeof(err)) ||
        opt_parse_args(opts, NOPTS, argc, argv, c, NULL, err, sizeof(err))) {
        fprintf(stderr, "seckilld: %s\n", err);
        return -1;
    }
    /* signing settings that mean nothing without a current secret */
    bool secret = c->user_secret && *c->user_secret;
    if (!secret && ((c->user_secret_previous && *c->user_secret_previous) || c->user_signature_legacy)) {
        fprintf(stderr, "seckilld: user-secret-previous and user-signature-legacy need user-secret\n");
        return -1;
    }
    return 0;
}

/* The value of a string setting as --check-config shows it: secrets as
 * ****, URLs with their password masked, "" for empty. */
static const char *shown(const opt_spec *o, const char *v, char *buf, size_t len)
{
    if (!v || !*v) return "\"\"";
    if (!strcmp(o->name, "admin-token") || !strcmp(o->name, "user-secret") ||
        !strcmp(o->name, "user-secret-previous") || !strcmp(o->name, "order-secret"))
        return "****";
    if (o->check == skurl_check_redis || o->check == skurl_check_database) {
        opt_mask_url(v, buf, len);
        return buf;
    }
    return v;
}

void seckilld_config_print(const seckilld_config *c, FILE *f)
{
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_spec *o = &opts[i];
        const void *p = (const char *)c + o->off;
        if (!o->env) continue;
        char buf[1024];
        if (o->type == OPT_STRDUP) fprintf(f, "%s %s\n", o->name, shown(o, *(char *const *)p, buf, sizeof(buf)));
        else if (o->type == OPT_BOOL) fprintf(f, "%s %s\n", o->name, *(const bool *)p ? "true" : "false");
        else if (o->type == OPT_INT) fprintf(f, "%s %d\n", o->name, *(const int *)p);
        else fprintf(f, "%s %lld\n", o->name, (long long)*(const int64_t *)p);
    }
}

void seckilld_config_free(seckilld_config *c)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (opts[i].type == OPT_STRDUP) {
            char **p = (char **)(void *)((char *)c + opts[i].off);
            free(*p);
            *p = NULL;
        }
}
