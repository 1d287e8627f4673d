/* servers.h: test fixtures that start real servers: redis-server (alone,
 * with replicas), redis-sentinel and PostgreSQL, each in its own temp dir
 * on a free 127.0.0.1 port, and stop them by the PID they started. Never
 * port 6379, never a server the test did not start. Child servers get
 * PR_SET_PDEATHSIG, so a test killed with -9 leaves none behind where the
 * kernel delivers that signal (a best effort: some sandboxes do not). */
#ifndef DLOCK_TEST_SERVERS_H
#define DLOCK_TEST_SERVERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct test_server {
    pid_t pid;
    int port;
    char dir[256];  /* temp dir (removed on stop) */
    char url[512];  /* redis://127.0.0.1:port or postgresql://... */
    char kind[16];  /* "redis", "sentinel", "postgres" */
} test_server;

/* Returns a TCP port on 127.0.0.1 that was free a moment ago (never 6379). */
int test_free_port(void);

/* Waits for child pid: its exit status, 128 + the signal that ended it, or
 * -1 if waitpid failed. */
int test_exit_code(int pid);

/* Starts redis-server with `save ""`, appendonly no, enable-debug-command
 * local, plus extra "key value" config lines (NULL-terminated, may be
 * NULL). Waits until PING answers (<= 5 s). 0 or -1 (message on stderr). */
int test_redis_start(test_server *s, const char *const *extra_conf);
/* Same, reusing s->port and s->dir (a restart after test_server_kill). */
int test_redis_restart(test_server *s, const char *const *extra_conf);
/* Makes replica follow master (REPLICAOF) and waits (<= 10 s) for the
 * link and for the master's WAIT to count it. */
int test_redis_replicate(test_server *replica, const test_server *master);
/* Starts a sentinel monitoring master as `name` with quorum, short
 * down-after (1000 ms) and failover timeouts. */
int test_sentinel_start(test_server *s, const test_server *master, const char *name, int quorum);
/* initdb + pg_ctl into a temp dir; url is postgresql://postgres@127.0.0.1:port/postgres. */
int test_postgres_start(test_server *s);
/* Fast shutdown (SIGINT, committed data kept) if running, then starts it
 * again on the same data dir and port. 0 or -1. */
int test_postgres_restart(test_server *s);

/* SIGTERM (SIGKILL after 5 s) by PID, wait, remove the temp dir. */
void test_server_stop(test_server *s);

/* Removes the SQLite databases named in dbs (NULL-terminated, e.g.
 * "orders.db"; NULL: just "orders.db") with their -wal and -shm files
 * from dir, then dir itself; keeps everything when DLOCK_TEST_KEEP is
 * set (to look at after a failure), or when dir is "". */
void test_sqlite_dir_remove(const char *dir, const char *const *dbs);
/* kill -9 by PID and reap; keeps dir and port for test_redis_restart. */
void test_server_kill(test_server *s);
/* SIGSTOP / SIGCONT by PID. */
void test_server_pause(test_server *s, bool paused);

/* Runs a redis-cli-free command on a test server through a fresh
 * connection (argv style); returns the integer/status/string reply in out
 * (may be NULL). 0 or -1. Used by tests to look behind the library. */
int test_redis_cmd(const test_server *s, char *out, size_t outlen, int argc, const char **argv);

/* A key prefix unique to this test process, e.g. "t12345:". */
const char *test_prefix(void);

/* Forks a process running fn(arg); returns its pid (reap with waitpid). */
pid_t test_fork(int (*fn)(void *), void *arg);

#endif
