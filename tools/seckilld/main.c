/* main.c: seckilld: parse settings, then run one event loop, or --threads
 * N loops in this process (threads.c), or fork --workers processes sharing
 * the port with SO_REUSEPORT, supervised by the parent. SIGTERM/SIGINT:
 * stop accepting, finish in-flight requests, exit 0. Exit codes: 0 ok, 1
 * runtime failure, 2 bad configuration, 77 Redis refused the credentials at
 * start-up (as dlock(1); later refusals are retried with backoff). Log
 * lines go through one limiter (log_limit.h): a warning or error repeated
 * within 10 s is counted, not printed again; info lines are events
 * (start-up, state changes) and are each printed when they happen. With
 * --threads every line of a loop starts "loop N: ". */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include <openssl/rand.h>

#include "client_addr.h"
#include "config.h"
#include "db.h"
#include "degraded.h"
#include "dlock/dlock.h"
#include "engine.h"
#include "relay.h"
#include "http.h"
#include "log_limit.h"
#include "threads.h"
#include "url.h"
#include "util.h"

enum { EXIT_AUTH = 77 }; /* dlock(1)'s code for refused credentials */

static int min_level = DLOCK_LOG_INFO;

static void print_line(int level, const char *msg, void *ud)
{
    (void)ud;
    static const char *const names[] = {"debug", "info", "warn", "error"};
    char ts[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(stderr, "%s seckilld[%d] %s: %s\n", ts, (int)getpid(), names[level & 3], msg);
}

static dlock__loglimit log_limit = DLOCK__LOGLIMIT_INIT(DLOCK__LOGLIMIT_WINDOW_MS, print_line, NULL);

typedef struct worker worker;
static void log_line(int level, const char *msg, void *ud);

struct worker {
    const seckilld_config *c;
    struct event_base *base;
    sk_engine *engine;
    sk_http *http;
    sk_db *db;
    sk_degraded *dg;
    sk_relay_door *relay;  /* loops 2..n: purchases go to loop 1's engine */
    bool serves_relay;     /* loop 1 of several: decides every loop's purchases */
    const seckilld_shared *sh; /* --threads: what the loops share; NULL: the only loop */
    struct event *drain_ev, *sigterm, *sigint, *stop_ev, *log_ev;
    int64_t drain_deadline_ms;
    int64_t flush_deadline_ms; /* once nothing is in flight: wait for writes */
    bool draining;
    bool listen_fd_taken; /* sh->listen_fd handed to the server (which closes it) */
};

/* ud: the loop's worker, or NULL (the only loop, or the supervisor). Info
 * lines (listening, redis connected, a lease taken, stock again) are
 * events: never folded into a later summary, which would read as if they
 * happened again at the summary's time. */
static void log_line(int level, const char *msg, void *ud)
{
    const worker *w = ud;
    if (level < min_level) return;
    char line[DLOCK__LOGLIMIT_LINE + 16];
    if (w && w->sh) {
        snprintf(line, sizeof(line), "loop %d: %s", w->sh->loop, msg);
        msg = line;
    }
    if (level == DLOCK_LOG_INFO) dlock__loglimit_event(&log_limit, level, msg);
    else dlock__loglimit_line(&log_limit, level, msg);
}

static void on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    worker *w = arg;
    int64_t now = dlock__now_ms();
    size_t busy = sk_http_inflight(w->http) + sk_engine_pending(w->engine) + sk_relay_door_pending(w->relay) +
                  (w->serves_relay ? sk_relay_pending(w->sh->relay) : 0);
    if (busy && now >= w->drain_deadline_ms) {
        log_line(DLOCK_LOG_WARN, "shutdown timeout: answering the rest with errors", w);
        event_base_loopexit(w->base, NULL);
        return;
    }
    if (busy) return;
    /* every request is answered; let the answers reach the sockets */
    if (!w->flush_deadline_ms) w->flush_deadline_ms = now + 1000;
    if (sk_http_unflushed(w->http) == 0 || now >= w->flush_deadline_ms) event_base_loopexit(w->base, NULL);
}

/* A flood's count line comes out soon after the flood stops. */
static void on_log_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    dlock__loglimit_tick(&log_limit);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    worker *w = arg;
    if (w->sh) { /* sig is the stop pipe: empty it, or it stays readable */
        char b[16];
        while (read(sig, b, sizeof(b)) > 0) {
        }
    }
    if (w->draining) return;
    char msg[96];
    if (w->sh) snprintf(msg, sizeof(msg), "stopping: stop accepting, finishing %zu in-flight requests",
                        sk_http_inflight(w->http));
    else snprintf(msg, sizeof(msg), "signal %d: stop accepting, finishing %zu in-flight requests", (int)sig,
                  sk_http_inflight(w->http));
    log_line(DLOCK_LOG_INFO, msg, w);
    w->draining = true;
    sk_http_stop_accepting(w->http);
    w->drain_deadline_ms = dlock__now_ms() + w->c->shutdown_timeout_ms;
    struct timeval tv = {0, 20000};
    event_add(w->drain_ev, &tv);
}

static void limit_connections(int64_t max_conn)
{
    /* The HTTP layer caps connections at max_conn itself; RLIMIT_NOFILE
     * is the backstop (accepting beyond it fails with EMFILE and the
     * listener pauses). 64 fds are kept for Redis, the database, the
     * listener and the loop. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t want = (rlim_t)max_conn + 64;
    if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max) {
        log_line(DLOCK_LOG_WARN, "max-connections above the hard fd limit: using the hard limit", NULL);
        want = rl.rlim_max;
    }
    rl.rlim_cur = want;
    setrlimit(RLIMIT_NOFILE, &rl);
}

static void engine_opts_from(const seckilld_config *c, sk_engine_opts *eo)
{
    sk_engine_opts_init(eo);
    eo->max_batch = c->max_batch;
    eo->linger_us = c->linger_us;
    eo->soldout_poll_ms = c->soldout_poll_ms;
    eo->user_rate_limit = c->user_rate_limit;
    eo->user_rate_window_ms = c->user_rate_window_ms ? c->user_rate_window_ms : 1000;
    eo->ip_rate_limit = c->ip_rate_limit;
    eo->ip_rate_window_ms = c->ip_rate_window_ms ? c->ip_rate_window_ms : 1000;
    eo->command_timeout_ms = c->redis_timeout_ms;
    eo->replica_acks = c->replica_acks;
    eo->replica_ack_timeout_ms = c->replica_ack_timeout_ms;
    eo->worker_lease_ms = c->worker_lease_ms;
    /* test hook of the fault suite only (a mover killed between a
     * transfer's take and its give): not an option, never in a config */
    const char *pause = getenv("SECKILLD_TEST_XFER_PAUSE_MS");
    eo->xfer_pause_ms = pause ? strtoll(pause, NULL, 10) : 0;
    eo->log = log_line;
}

static void http_opts_from(const seckilld_config *c, const seckilld_shared *sh, sk_db *db, sk_degraded *dg,
                           sk_relay_door *relay, sk_http_opts *ho)
{
    sk_http_opts_init(ho);
    if (sh) {
        ho->group = sh->group;
        ho->door = sh->door;
    }
    ho->relay = relay;
    ho->admin_token = c->admin_token;
    ho->user_secret = c->user_secret;
    ho->user_secret_previous = c->user_secret_previous;
    ho->user_signature_legacy = c->user_signature_legacy;
    ho->order_secret = c->order_secret;
    ho->idle_timeout_ms = c->idle_timeout_ms;
    ho->head_timeout_ms = c->head_timeout_ms;
    ho->body_timeout_ms = c->body_timeout_ms;
    ho->max_connections = (size_t)c->max_connections;
    ho->max_conns_per_addr = (size_t)c->max_conns_per_addr;
    ho->ipv6_prefix = c->ipv6_prefix;
    ho->max_body = (size_t)c->max_body;
    ho->max_headers = (size_t)c->max_headers;
    ho->trusted_proxies = c->trusted_proxies;
    ho->db = db;
    ho->degraded = dg;
}

/* --threads: loop 1's engine decides the purchases of every loop, so
 * that they share its batches (relay.h); the others hand theirs in. */
static int join_relay(worker *w)
{
    if (!w->sh || !w->sh->relay) return 0;
    if (w->sh->loop != 1) return sk_relay_door_new(w->sh->relay, w->base, &w->relay);
    int rc = sk_relay_serve(w->sh->relay, w->base, w->engine);
    w->serves_relay = rc == 0;
    return rc;
}

/* The database (if any), the engine and the database path. 0, or 2 after
 * printing why (a bad URL or an unreachable store is a configuration error). */
static int open_backends(worker *w)
{
    const seckilld_config *c = w->c;
    char err[256] = "";
    if (c->database_url && *c->database_url && sk_db_open(c->database_url, &w->db, err, sizeof(err)) != 0) {
        fprintf(stderr, "seckilld: database: %s\n", err);
        return 2;
    }
    sk_engine_opts eo;
    engine_opts_from(c, &eo);
    eo.log_ud = w;
    if (sk_engine_new(w->base, c->redis_url, &eo, &w->engine, err, sizeof(err)) != 0) {
        fprintf(stderr, "seckilld: redis-url: %s\n", err);
        return 2;
    }
    if (join_relay(w) != 0) return 1;
    if (!w->db) return 0;
    sk_degraded_opts dopt;
    sk_degraded_opts_init(&dopt);
    dopt.after_ms = c->degraded_after_ms;
    dopt.recover_ms = c->degraded_recover_ms;
    dopt.max_inflight = (int)c->degraded_max_inflight;
    dopt.log = log_line;
    dopt.log_ud = w;
    if (sk_degraded_new(w->base, w->engine, c->database_url, &dopt, &w->dg, err, sizeof(err)) != 0) {
        fprintf(stderr, "seckilld: database path: %s\n", err);
        return 2;
    }
    return 0;
}

static void log_listening(worker *w, int port)
{
    const seckilld_config *c = w->c;
    char where[160] = "?", msg[512];
    dlock__url u;
    if (dlock__url_parse(c->redis_url, &u, NULL, 0) == 0) {
        dlock__url_describe(&u, where, sizeof(where)); /* no password in logs */
        dlock__url_free(&u);
    }
    snprintf(msg, sizeof(msg), "listening on %s:%d (redis %s, database %s)", c->bind, port, where,
             w->db ? sk_db_kind(w->db) : "none");
    log_line(DLOCK_LOG_INFO, msg, w);
}

/* --threads: a loop starts accepting once its engine is ready (Redis
 * connected, scripts loaded, lease held), or after max_ms so that a Redis
 * down at start is answered 503 as with one loop. Without the wait, the
 * first loop to be ready makes /healthz say ok while connections the
 * kernel hands to another loop still get 503 "not ready". Connections
 * meanwhile wait in the loop's listen backlog. */
static void wait_engine_ready(worker *w, int64_t max_ms)
{
    int64_t end = dlock__now_ms() + max_ms;
    while (!sk_engine_ready(w->engine) && dlock__now_ms() < end) {
        struct timeval tv = {0, 10000};
        event_base_loopexit(w->base, &tv);
        event_base_dispatch(w->base);
    }
}

/* HTTP, the listener and the signal events. 0, 1 or 2 (printed). */
static int start_serving(worker *w)
{
    const seckilld_config *c = w->c;
    sk_http_opts ho;
    http_opts_from(c, w->sh, w->db, w->dg, w->relay, &ho);
    if (sk_http_new(w->base, w->engine, &ho, &w->http) != 0) return 1;
    int port = 0;
    char err[256] = "";
    if (w->sh) {
        int fd = w->sh->listen_fd;
        w->listen_fd_taken = true;
        port = w->sh->port;
        wait_engine_ready(w, 1000);
        if (sk_http_listen_fd(w->http, fd) != 0) return 1;
    } else if (sk_http_listen(w->http, c->bind, c->port, c->reuseport || c->workers > 1, &port, err,
                              sizeof(err)) != 0) {
        fprintf(stderr, "seckilld: %s\n", err);
        return 2;
    }
    w->drain_ev = event_new(w->base, -1, EV_PERSIST, on_drain_tick, w);
    w->log_ev = event_new(w->base, -1, EV_PERSIST, on_log_tick, NULL);
    if (!w->drain_ev || !w->log_ev) return 1;
    struct timeval second = {1, 0};
    event_add(w->log_ev, &second);
    if (w->sh) { /* the main thread takes the signals and tells us */
        w->stop_ev = event_new(w->base, w->sh->stop_fd, EV_READ | EV_PERSIST, on_signal, w);
        if (!w->stop_ev || event_add(w->stop_ev, NULL) != 0) return 1;
    } else {
        w->sigterm = evsignal_new(w->base, SIGTERM, on_signal, w);
        w->sigint = evsignal_new(w->base, SIGINT, on_signal, w);
        if (!w->sigterm || !w->sigint) return 1;
        event_add(w->sigterm, NULL);
        event_add(w->sigint, NULL);
    }
    log_listening(w, port);
    return 0;
}

static void stop_worker(worker *w)
{
    /* Shutting down: a second SIGTERM must not kill the clean-up (freeing
     * the signal events gives the default action back). */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigaddset(&term, SIGINT);
    sigprocmask(SIG_BLOCK, &term, NULL);
    /* other loops ask this one for /metrics figures until it leaves */
    sk_http_leave_group(w->http);
    if (w->sh && !w->listen_fd_taken) close(w->sh->listen_fd);
    /* engine first: its pending callbacks still answer through http; what
     * the relay holds goes before the engine (relay.h) */
    sk_relay_door_free(w->relay);
    if (w->serves_relay) sk_relay_unserve(w->sh->relay);
    sk_engine_free(w->engine);
    sk_degraded_free(w->dg); /* before http too: it answers what it still holds */
    sk_http_free(w->http);
    if (w->drain_ev) event_free(w->drain_ev);
    if (w->sigterm) event_free(w->sigterm);
    if (w->sigint) event_free(w->sigint);
    if (w->stop_ev) event_free(w->stop_ev);
    if (w->log_ev) event_free(w->log_ev);
    sk_db_close(w->db);
    if (w->base) event_base_free(w->base);
}

static int run_loop(const seckilld_config *c, const seckilld_shared *sh)
{
    worker w = {.c = c, .sh = sh};
    signal(SIGPIPE, SIG_IGN);
    limit_connections(c->max_connections);
    w.base = event_base_new();
    if (!w.base) return 1;
    int rc = open_backends(&w);
    if (rc == 0) rc = start_serving(&w);
    if (rc == 0) event_base_dispatch(w.base);
    stop_worker(&w);
    dlock__loglimit_flush(&log_limit); /* a worker ends with _exit: no atexit */
    return rc;
}

/* One process: one loop, or --threads loops. */
static int run_worker(const seckilld_config *c)
{
    int n = seckilld_threads_wanted(c);
    return n > 1 ? seckilld_threads_run(c, n, run_loop) : run_loop(c, NULL);
}

/* ---- --workers N: a small supervisor ------------------------------------ */

static volatile sig_atomic_t got_term;
static void note_term(int sig)
{
    (void)sig;
    got_term = 1;
}

static pid_t spawn(const seckilld_config *c, sigset_t *old)
{
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        sigprocmask(SIG_SETMASK, old, NULL);
        _exit(run_worker(c));
    }
    return pid;
}

static int supervise(const seckilld_config *c)
{
    int n = c->workers;
    pid_t *pids = calloc((size_t)n, sizeof(pid_t));
    if (!pids) return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = note_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);
    for (int i = 0; i < n; i++) pids[i] = spawn(c, &old);
    sigprocmask(SIG_SETMASK, &old, NULL);
    int rc = 0, alive = n;
    bool stopping = false;
    while (alive > 0) {
        if (got_term && !stopping) {
            stopping = true;
            for (int i = 0; i < n; i++)
                if (pids[i] > 0) kill(pids[i], SIGTERM);
        }
        int st;
        pid_t p = waitpid(-1, &st, 0);
        if (p < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < n; i++) {
            if (pids[i] != p) continue;
            pids[i] = -1;
            alive--;
            int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
            if (stopping) {
                if (code) rc = 1;
            } else if (code == 2) {
                /* bad configuration: restarting would fail the same way */
                got_term = 1;
                rc = 2;
            } else {
                log_line(DLOCK_LOG_WARN, "worker exited unexpectedly: restarting it in 1 s", NULL);
                dlock__sleep_ms(1000);
                sigprocmask(SIG_BLOCK, &block, NULL);
                pids[i] = spawn(c, &old);
                sigprocmask(SIG_SETMASK, &old, NULL);
                if (pids[i] > 0) alive++;
            }
        }
    }
    free(pids);
    return rc;
}

/* Start-up only: a password the server refuses is a configuration error
 * to fix, so say so and exit (EXIT_AUTH). An unreachable server is not:
 * the engine keeps trying. Once running, a refusal (the password rotated
 * on the server) is retried with backoff and reported by /healthz. */
static int check_credentials(const seckilld_config *c)
{
    char err[384] = "";
    int rc = sk_engine_check_auth(c->redis_url, c->redis_timeout_ms, err, sizeof(err));
    if (rc == DLOCK_EAUTH) {
        fprintf(stderr, "seckilld: %s\n", err);
        return EXIT_AUTH;
    }
    if (rc) {
        fprintf(stderr, "seckilld: redis-url: %s\n", err);
        return 2;
    }
    return 0;
}

/* Without any secret to derive the order-id key from, one random key for
 * the whole process (every loop, every --workers child): made before the
 * fork, so the instance reads the ids it hands out. 0 or -1. */
static int order_secret_default(seckilld_config *c)
{
    if ((c->order_secret && *c->order_secret) || (c->admin_token && *c->admin_token) ||
        (c->user_secret && *c->user_secret))
        return 0;
    unsigned char k[32];
    char *hex = malloc(2 * sizeof(k) + 1);
    if (!hex || RAND_bytes(k, sizeof(k)) != 1) {
        free(hex);
        return -1;
    }
    for (size_t i = 0; i < sizeof(k); i++) snprintf(hex + 2 * i, 3, "%02x", k[i]);
    free(c->order_secret);
    c->order_secret = hex;
    log_line(DLOCK_LOG_WARN,
             "no order-secret, admin-token or user-secret: the order ids handed out are valid on this "
             "instance only until it restarts (set the same --order-secret on every instance)",
             NULL);
    return 0;
}

/* The legacy signature form is accepted with a warning (config.c refuses
 * it, and a previous secret, without a current secret). 0. */
static int check_signing(const seckilld_config *c)
{
    if (c->user_signature_legacy)
        log_line(DLOCK_LOG_WARN,
                 "user-signature-legacy: the unexpiring X-User-Signature form (hex HMAC of the user id) is "
                 "accepted; it never expires: move signers to v1=<hex>;exp=<unix s> and turn this off",
                 NULL);
    return 0;
}

int main(int argc, char **argv)
{
    seckilld_config c;
    int r = seckilld_config_load(&c, argc, argv);
    if (r != 0) {
        seckilld_config_free(&c);
        return r > 0 ? 0 : 2;
    }
    if (c.check_only) {
        seckilld_config_print(&c, stdout);
        seckilld_config_free(&c);
        return 0;
    }
    if (!strcmp(c.log_level, "debug")) min_level = DLOCK_LOG_DEBUG;
    else if (!strcmp(c.log_level, "warn")) min_level = DLOCK_LOG_WARN;
    else if (!strcmp(c.log_level, "error")) min_level = DLOCK_LOG_ERROR;
    int rc = check_credentials(&c);
    if (rc == 0 && c.trust_forwarded && (!c.trusted_proxies || !*c.trusted_proxies)) {
        log_line(DLOCK_LOG_WARN,
                 "trust-forwarded is deprecated: it now means trusted-proxies " SK_TRUSTED_PRIVATE
                 " (the rightmost untrusted X-Forwarded-For entry); set trusted-proxies instead",
                 NULL);
        free(c.trusted_proxies);
        c.trusted_proxies = strdup(SK_TRUSTED_PRIVATE);
        if (!c.trusted_proxies) rc = 1;
    }
    if (rc == 0) rc = check_signing(&c);
    if (rc == 0 && order_secret_default(&c) != 0) {
        fprintf(stderr, "seckilld: no random bytes for the order-id key\n");
        rc = 1;
    }
    if (rc == 0) rc = c.workers > 1 ? supervise(&c) : run_worker(&c);
    dlock__loglimit_flush(&log_limit);
    seckilld_config_free(&c);
    return rc;
}
