/* servers.c: real-server fixtures for tests (see servers.h).
 * Invariant: every process started here is recorded by PID, and only those
 * PIDs are ever signalled; an atexit hook and fatal-signal handlers stop
 * whatever is still running, and PR_SET_PDEATHSIG covers kill -9 where the
 * kernel delivers it (some sandboxes accept it and never send it). */
#include "servers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock/dlock.h"
#include "redis_io.h"
#include "util.h"

#define MAX_TRACKED 64
static volatile pid_t tracked[MAX_TRACKED];
static int hooks_installed;

static void stop_all_tracked(void)
{
    for (int i = 0; i < MAX_TRACKED; i++) {
        pid_t p = tracked[i];
        if (p > 0) {
            kill(p, SIGKILL);
            tracked[i] = 0;
        }
    }
}

static void on_fatal_signal(int sig)
{
    stop_all_tracked();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void track(pid_t pid, bool on)
{
    if (!hooks_installed) {
        hooks_installed = 1;
        atexit(stop_all_tracked);
        signal(SIGINT, on_fatal_signal);
        signal(SIGTERM, on_fatal_signal);
        signal(SIGABRT, on_fatal_signal);
        signal(SIGSEGV, on_fatal_signal);
        signal(SIGPIPE, SIG_IGN);
    }
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (on && tracked[i] == 0) {
            tracked[i] = pid;
            return;
        }
        if (!on && tracked[i] == pid) {
            tracked[i] = 0;
            return;
        }
    }
}

/* The low end of the kernel's ephemeral range (ports it gives to outgoing
 * connections and to bind(port 0)). */
static int ephemeral_low(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int low = 32768;
    if (f) {
        if (fscanf(f, "%d", &low) != 1) low = 32768;
        fclose(f);
    }
    return low;
}

static bool port_bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

/* A free loopback port below the ephemeral range, never 6379 or 2379: a
 * port from bind(port 0) lies in that range, where any client's outgoing
 * connection may take it before the server binds it (scripts/lib.sh's
 * dl_free_port follows the same rule). */
int test_free_port(void)
{
    int top = ephemeral_low() - 1;
    if (top < 10000) return -1;
    static unsigned seed; /* one sequence per process: two calls never repeat a pick */
    if (!seed) seed = ((unsigned)getpid() << 16) ^ (unsigned)dlock__now_ms() ^ 1u;
    for (int attempt = 0; attempt < 200; attempt++) {
        int port = 10000 + (int)(rand_r(&seed) % (unsigned)(top - 10000 + 1));
        if (port == 6379 || port == 2379) continue;
        if (port_bindable(port)) return port;
    }
    return -1;
}

static pid_t spawn(char *const argv[], const char *log_path, uid_t as_uid, gid_t as_gid)
{
    pid_t pid = fork();
    if (pid != 0) {
        if (pid > 0) track(pid, true);
        return pid;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    if (as_uid != (uid_t)-1) {
        if (setgroups(0, NULL) != 0 || setgid(as_gid) != 0 || setuid(as_uid) != 0) _exit(126);
    }
    execvp(argv[0], argv);
    _exit(127);
}

static int make_dir(test_server *s, const char *kind)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof(s->dir), "%s/dlock-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", kind);
    if (!mkdtemp(s->dir)) {
        fprintf(stderr, "fixture: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    snprintf(s->kind, sizeof(s->kind), "%s", kind);
    return 0;
}

static int ping_until_up(const test_server *s, int64_t budget_ms)
{
    dlock__url u = {.kind = DLOCK__URL_TCP, .host = "127.0.0.1", .port = s->port};
    dlock__conn_opts o = {.connect_timeout_ms = 200, .command_timeout_ms = 1000};
    int64_t deadline = dlock__now_ms() + budget_ms;
    while (dlock__now_ms() < deadline) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            track(s->pid, false);
            return -1;
        }
        dlock__conn *c = NULL;
        int rc = dlock__conn_open(&u, &o, &c, NULL, 0);
        if (rc == DLOCK_EAUTH) return 0; /* answered: it is up (and wants a password) */
        if (rc == 0) {
            const char *argv[1] = {"PING"};
            dlock__reply *r = NULL;
            rc = dlock__conn_cmd(c, 1, argv, NULL, &r);
            dlock__reply_free(r);
            dlock__conn_close(c);
            if (rc == 0) return 0;
        }
        dlock__sleep_ms(20);
    }
    return -1;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static int redis_launch(test_server *s, const char *const *extra, const char *binary)
{
    char conf[4096], path[400], log[400];
    int n = snprintf(conf, sizeof(conf),
                     "port %d\nbind 127.0.0.1\ndir %s\ndaemonize no\nsave \"\"\n"
                     "appendonly no\nprotected-mode no\nenable-debug-command local\n",
                     s->port, s->dir);
    if (strcmp(binary, "redis-sentinel") == 0)
        n = snprintf(conf, sizeof(conf), "port %d\nbind 127.0.0.1\ndir %s\ndaemonize no\n"
                                         "protected-mode no\n", s->port, s->dir);
    for (size_t i = 0; extra && extra[i]; i++)
        n += snprintf(conf + n, sizeof(conf) - (size_t)n, "%s\n", extra[i]);
    snprintf(path, sizeof(path), "%s/%s.conf", s->dir, s->kind);
    snprintf(log, sizeof(log), "%s/%s.log", s->dir, s->kind);
    if (write_file(path, conf) != 0) return -1;
    char *argv[] = {(char *)binary, path, NULL};
    s->pid = spawn(argv, log, (uid_t)-1, (gid_t)-1);
    if (s->pid < 0) return -1;
    snprintf(s->url, sizeof(s->url), "redis://127.0.0.1:%d", s->port);
    if (ping_until_up(s, 5000) == 0) return 0;
    fprintf(stderr, "fixture: %s on port %d did not come up (log %s)\n", binary, s->port, log);
    test_server_kill(s);
    return -1;
}

int test_redis_start(test_server *s, const char *const *extra_conf)
{
    memset(s, 0, sizeof(*s));
    if (make_dir(s, "redis") != 0) return -1;
    for (int attempt = 0; attempt < 5; attempt++) {
        s->port = test_free_port();
        if (redis_launch(s, extra_conf, "redis-server") == 0) return 0;
    }
    return -1;
}

int test_redis_restart(test_server *s, const char *const *extra_conf)
{
    return redis_launch(s, extra_conf, "redis-server");
}

/* Whether a write on the master is acknowledged by a replica: SET, then
 * WAIT on the same connection. (A WAIT on a connection that wrote nothing
 * counts a replica still waiting to send its first REPLCONF ACK; after a
 * diskless sync the master streams to it only from then on.) */
static bool write_replicated(const test_server *master)
{
    dlock__url u = {.kind = DLOCK__URL_TCP, .host = "127.0.0.1", .port = master->port};
    dlock__conn_opts o = {.connect_timeout_ms = 1000, .command_timeout_ms = 5000};
    dlock__conn *c = NULL;
    if (dlock__conn_open(&u, &o, &c, NULL, 0) != 0) return false;
    const char *set[3] = {"SET", "dlock:test:replicated", "1"}, *wait[3] = {"WAIT", "1", "100"};
    dlock__reply *r = NULL;
    bool ok = dlock__conn_cmd(c, 3, set, NULL, &r) == 0 && dlock__reply_kind(r) != DLOCK__R_ERROR;
    dlock__reply_free(r);
    r = NULL;
    ok = ok && dlock__conn_cmd(c, 3, wait, NULL, &r) == 0 && dlock__reply_kind(r) == DLOCK__R_INTEGER &&
         dlock__reply_int(r) >= 1;
    dlock__reply_free(r);
    dlock__conn_close(c);
    return ok;
}

int test_redis_replicate(test_server *replica, const test_server *master)
{
    char port[16], info[4096];
    snprintf(port, sizeof(port), "%d", master->port);
    const char *argv[3] = {"REPLICAOF", "127.0.0.1", port};
    if (test_redis_cmd(replica, NULL, 0, 3, argv) != 0) return -1;
    int64_t deadline = dlock__now_ms() + 10000;
    while (dlock__now_ms() < deadline) {
        const char *q[2] = {"INFO", "replication"};
        if (test_redis_cmd(replica, info, sizeof(info), 2, q) == 0 && strstr(info, "master_link_status:up") &&
            write_replicated(master))
            return 0;
        dlock__sleep_ms(50);
    }
    fprintf(stderr, "fixture: replica %d never linked to %d\n", replica->port, master->port);
    return -1;
}

int test_sentinel_start(test_server *s, const test_server *master, const char *name, int quorum)
{
    memset(s, 0, sizeof(*s));
    if (make_dir(s, "sentinel") != 0) return -1;
    char mon[256], down[128], fo[128];
    snprintf(mon, sizeof(mon), "sentinel monitor %s 127.0.0.1 %d %d", name, master->port, quorum);
    snprintf(down, sizeof(down), "sentinel down-after-milliseconds %s 1000", name);
    snprintf(fo, sizeof(fo), "sentinel failover-timeout %s 5000", name);
    const char *extra[] = {mon, down, fo, NULL};
    for (int attempt = 0; attempt < 5; attempt++) {
        s->port = test_free_port();
        if (redis_launch(s, extra, "redis-sentinel") == 0) return 0;
    }
    return -1;
}

static int run_wait(char *const argv[], const char *log, uid_t uid, gid_t gid)
{
    pid_t pid = spawn(argv, log, uid, gid);
    if (pid < 0) return -1;
    int st = 0;
    waitpid(pid, &st, 0);
    track(pid, false);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static const char *pg_bindir(void)
{
    static const char *dirs[] = {"/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin",
                                 "/usr/lib/postgresql/15/bin", NULL};
    for (int i = 0; dirs[i]; i++) {
        char p[300];
        snprintf(p, sizeof(p), "%s/initdb", dirs[i]);
        if (access(p, X_OK) == 0) return dirs[i];
    }
    return NULL;
}

/* Runs postgres on s->dir/data and s->port as uid/gid; waits (<= 15 s) for
 * its socket. 0, or -1 with the process gone. */
/* True when the postgres log, from byte from on, says the server accepts
 * connections. */
static bool log_says_ready(const char *log, off_t from)
{
    FILE *f = fopen(log, "r");
    if (!f) return false;
    bool ready = false;
    char line[1024];
    if (fseeko(f, from, SEEK_SET) == 0)
        while (!ready && fgets(line, sizeof(line), f))
            ready = strstr(line, "ready to accept connections") != NULL;
    fclose(f);
    return ready;
}

static int pg_launch(test_server *s, const char *bin, uid_t uid, gid_t gid)
{
    char postgres[320], data[320], log[320], port[16], probe[400];
    snprintf(postgres, sizeof(postgres), "%s/postgres", bin);
    snprintf(data, sizeof(data), "%s/data", s->dir);
    snprintf(log, sizeof(log), "%s/postgres.log", s->dir);
    snprintf(port, sizeof(port), "%d", s->port);
    snprintf(probe, sizeof(probe), "%s/.s.PGSQL.%d", s->dir, s->port);
    unlink(probe); /* a socket left by an earlier run would look alive */
    struct stat before;
    off_t log_from = stat(log, &before) == 0 ? before.st_size : 0; /* the log is appended to */
    char *argv[] = {postgres, "-D", data, "-p", port, "-k", s->dir,
                    "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                    "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                    "-c", "max_connections=200", NULL};
    s->pid = spawn(argv, log, uid, gid);
    snprintf(s->url, sizeof(s->url), "postgresql://postgres@127.0.0.1:%d/postgres", s->port);
    for (int i = 0; i < 300; i++) { /* <= 15 s for the socket to appear */
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) break;
        /* The socket appears before recovery ends ("the database system is
         * starting up"); ready is the server's own line in this run's log. */
        if (access(probe, F_OK) == 0 && log_says_ready(log, log_from)) return 0;
        dlock__sleep_ms(50);
    }
    test_server_kill(s);
    return -1;
}

/* The user postgres runs as: the owner of s->dir (root cannot run it). */
static void pg_user(const test_server *s, uid_t *uid, gid_t *gid)
{
    struct stat st;
    *uid = (uid_t)-1;
    *gid = (gid_t)-1;
    if (geteuid() == 0 && stat(s->dir, &st) == 0 && st.st_uid != 0) {
        *uid = st.st_uid;
        *gid = st.st_gid;
    }
}

int test_postgres_start(test_server *s)
{
    memset(s, 0, sizeof(*s));
    const char *bin = pg_bindir();
    if (!bin) {
        fprintf(stderr, "fixture: PostgreSQL binaries not found (Debian package postgresql)\n");
        return -1;
    }
    if (make_dir(s, "postgres") != 0) return -1;
    if (geteuid() == 0) { /* initdb refuses root: run as the postgres user */
        struct passwd *pw = getpwnam("postgres");
        if (!pw) pw = getpwnam("nobody");
        if (!pw) return -1;
        if (chown(s->dir, pw->pw_uid, pw->pw_gid) != 0) return -1;
    }
    uid_t uid;
    gid_t gid;
    pg_user(s, &uid, &gid);
    char initdb[320], data[320], log[320];
    snprintf(initdb, sizeof(initdb), "%s/initdb", bin);
    snprintf(data, sizeof(data), "%s/data", s->dir);
    snprintf(log, sizeof(log), "%s/postgres.log", s->dir);
    char *init_argv[] = {initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync",
                         "-E", "UTF8", "--locale=C", NULL};
    if (run_wait(init_argv, log, uid, gid) != 0) {
        fprintf(stderr, "fixture: initdb failed (log %s)\n", log);
        return -1;
    }
    for (int attempt = 0; attempt < 5; attempt++) {
        s->port = test_free_port();
        if (pg_launch(s, bin, uid, gid) == 0) return 0;
    }
    fprintf(stderr, "fixture: postgres did not start (log %s)\n", log);
    return -1;
}

int test_postgres_restart(test_server *s)
{
    const char *bin = pg_bindir();
    if (!bin || !s->dir[0]) return -1;
    if (s->pid > 0) { /* fast shutdown: committed data survives */
        kill(s->pid, SIGCONT);
        kill(s->pid, SIGINT);
        waitpid(s->pid, NULL, 0);
        track(s->pid, false);
        s->pid = 0;
    }
    uid_t uid;
    gid_t gid;
    pg_user(s, &uid, &gid);
    for (int attempt = 0; attempt < 3; attempt++)
        if (pg_launch(s, bin, uid, gid) == 0) return 0;
    fprintf(stderr, "fixture: postgres did not restart (log %s/postgres.log)\n", s->dir);
    return -1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void test_server_kill(test_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        track(s->pid, false);
    }
    s->pid = 0;
}

void test_server_stop(test_server *s)
{
    if (s->pid > 0) {
        /* postgres: SIGINT is "fast shutdown"; redis: SIGTERM. */
        kill(s->pid, strcmp(s->kind, "postgres") == 0 ? SIGINT : SIGTERM);
        kill(s->pid, SIGCONT);
        int64_t deadline = dlock__now_ms() + 5000;
        while (waitpid(s->pid, NULL, WNOHANG) == 0) {
            if (dlock__now_ms() > deadline) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, NULL, 0);
                break;
            }
            dlock__sleep_ms(10);
        }
        track(s->pid, false);
        s->pid = 0;
    }
    if (s->dir[0] && !getenv("DLOCK_TEST_KEEP")) nftw(s->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    s->dir[0] = '\0';
}

void test_server_pause(test_server *s, bool paused)
{
    if (s->pid > 0) kill(s->pid, paused ? SIGSTOP : SIGCONT);
}

int test_redis_cmd(const test_server *s, char *out, size_t outlen, int argc, const char **argv)
{
    dlock__url u = {.kind = DLOCK__URL_TCP, .host = "127.0.0.1", .port = s->port};
    dlock__conn_opts o = {.connect_timeout_ms = 1000, .command_timeout_ms = 5000};
    dlock__conn *c = NULL;
    if (dlock__conn_open(&u, &o, &c, NULL, 0) != 0) return -1;
    dlock__reply *r = NULL;
    int rc = dlock__conn_cmd(c, argc, argv, NULL, &r);
    if (rc == 0 && out && outlen) {
        if (dlock__reply_kind(r) == DLOCK__R_INTEGER)
            snprintf(out, outlen, "%lld", dlock__reply_int(r));
        else
            snprintf(out, outlen, "%s", dlock__reply_str(r, NULL));
    }
    if (rc == 0 && dlock__reply_kind(r) == DLOCK__R_ERROR) rc = -1;
    dlock__reply_free(r);
    dlock__conn_close(c);
    return rc == 0 ? 0 : -1;
}

const char *test_prefix(void)
{
    static char p[32];
    if (!p[0]) snprintf(p, sizeof(p), "t%ld:", (long)getpid());
    return p;
}

pid_t test_fork(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* The servers belong to the parent: this child must never stop them. */
        for (int i = 0; i < MAX_TRACKED; i++) tracked[i] = 0;
        _exit(fn(arg));
    }
    return pid;
}

int test_exit_code(int pid)
{
    int st = 0;
    if (waitpid((pid_t)pid, &st, 0) != (pid_t)pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void test_sqlite_dir_remove(const char *dir, const char *const *dbs)
{
    static const char *const orders_only[] = {"orders.db", NULL};
    static const char *const suffix[] = {"", "-wal", "-shm"};
    if (!dir[0] || getenv("DLOCK_TEST_KEEP")) return;
    for (const char *const *db = dbs ? dbs : orders_only; *db; db++) {
        for (int i = 0; i < 3; i++) {
            char p[600];
            snprintf(p, sizeof(p), "%s/%s%s", dir, *db, suffix[i]);
            unlink(p);
        }
    }
    rmdir(dir);
}
