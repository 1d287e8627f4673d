/* config.h: seckilld's settings from (lowest to highest precedence)
 * built-in defaults, a `key value` config file, environment variables and
 * command-line flags. Every setting has one name used in all three places
 * (flag --name, file key name, env var listed in --help); the same table
 * prints --help and --check-config. */
#ifndef SECKILLD_CONFIG_H
#define SECKILLD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct seckilld_config {
    char *bind;
    int port;
    int workers;
    int threads; /* 0: one per CPU */
    bool reuseport;
    char *redis_url;
    char *database_url;
    char *admin_token;
    char *user_secret;
    char *user_secret_previous;
    bool user_signature_legacy;
    char *order_secret;
    int max_batch;
    int64_t linger_us;
    int64_t user_rate_limit, user_rate_window_ms;
    int64_t ip_rate_limit, ip_rate_window_ms;
    int64_t max_connections;
    int64_t idle_timeout_ms;
    int64_t head_timeout_ms, body_timeout_ms;
    int64_t max_conns_per_addr;
    int ipv6_prefix;
    int64_t max_body;
    int64_t max_headers;
    bool trust_forwarded; /* deprecated: trusted_proxies SK_TRUSTED_PRIVATE */
    char *trusted_proxies;
    int64_t soldout_poll_ms;
    int64_t redis_timeout_ms;
    int64_t shutdown_timeout_ms;
    int64_t degraded_after_ms, degraded_recover_ms, degraded_max_inflight;
    int replica_acks;
    int64_t replica_ack_timeout_ms;
    int64_t worker_lease_ms;
    char *log_level;
    bool check_only; /* --check-config */
    bool help, version;
    const char *config_file; /* --config (points into argv) */
    const char *env_file;    /* --env-file (points into argv): read before the environment */
} seckilld_config;

/* Fills c. Returns 0, 1 when --help/--version was printed (exit 0), or -1
 * after printing one line on stderr (exit 2). */
int seckilld_config_load(seckilld_config *c, int argc, char **argv);
void seckilld_config_free(seckilld_config *c);
/* Prints the effective settings as a config file (secrets masked). */
void seckilld_config_print(const seckilld_config *c, FILE *f);
void seckilld_config_usage(FILE *f);

#endif
