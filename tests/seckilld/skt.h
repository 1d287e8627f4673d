/* skt.h: helpers of the seckilld tests: start/stop real seckilld
 * processes (by PID), one blocking HTTP/1.1 request over a plain socket,
 * and many concurrent requests driven by a libevent loop. */
#ifndef SKT_H
#define SKT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct skt_daemon {
    pid_t pid;
    int port;
    char log[256];
} skt_daemon;

/* Starts build/tools/seckilld/seckilld on a free port with --redis-url and
 * the extra "--flag", "value" arguments (NULL-terminated); waits until
 * GET /healthz answers 200 (<= 5 s). 0 or -1. */
int skt_daemon_start(skt_daemon *d, const char *redis_url, const char *const *extra);
/* SIGTERM, wait (<= 10 s, then SIGKILL); returns the exit status or -1. */
/* Copies the instance's log to stderr (a failing test's evidence: the
 * log file goes when the instance stops cleanly). */
void skt_daemon_print_log(const skt_daemon *d);
int skt_daemon_stop(skt_daemon *d);

/* One request; headers is "Name: value\r\n..." or NULL. Returns the
 * status (0 on transport failure); the body goes to body_out. */
int skt_http(int port, const char *method, const char *path, const char *headers,
             const char *body, size_t body_len, char *body_out, size_t cap);

/* Raw text (status line, headers, body) of the last skt_http answer. */
const char *skt_last_response(void);

typedef struct skt_req {
    int port;
    const char *method;  /* "POST" / "GET" */
    char path[128];
    char headers[512];   /* "Name: value\r\n..." */
    char body[128];
    int status;          /* filled: 0 on transport failure */
    char resp[512];      /* filled */
} skt_req;

/* Runs all n requests at once (one connection each); 0 when every one got
 * an answer within timeout_ms. */
int skt_run_concurrent(skt_req *reqs, size_t n, int timeout_ms);

/* Pulls "key":"string" or "key":number out of a flat JSON answer. */
bool skt_json_str(const char *json, const char *key, char *out, size_t cap);

#endif
