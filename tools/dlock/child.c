/* child.c: runs COMMAND under a held lock. Signals and the lost-lock
 * notice arrive as events (events.h); the main thread does the work
 * (forward, stop COMMAND, reap), so nothing unsafe runs in a handler.
 * COMMAND runs in its own process group so a lost lock stops the whole job,
 * not just its first process; it gets the terminal when dlock had it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

#include "child.h"
#include "events.h"

extern char **environ;

/* ---- the environment COMMAND gets ------------------------------------ */

/* NULL until the first cli_child_setenv: COMMAND then gets environ. */
static char **child_env;
static size_t n_child_env;

/* Whether entry is "name=...". */
static bool env_names(const char *entry, const char *name, size_t len)
{
    return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

static int copy_environ(void)
{
    size_t n = 0;
    while (environ[n]) n++;
    child_env = calloc(n + 1, sizeof(*child_env));
    if (!child_env) return -1;
    for (size_t i = 0; i < n; i++) {
        child_env[i] = strdup(environ[i]);
        if (!child_env[i]) {
            n_child_env = i;
            return -1;
        }
    }
    n_child_env = n;
    return 0;
}

int cli_child_setenv(const char *name, const char *value)
{
    if (!child_env && copy_environ() != 0) return -1;
    size_t len = strlen(name);
    size_t at = n_child_env;
    for (size_t i = 0; i < n_child_env; i++) {
        if (!env_names(child_env[i], name, len)) continue;
        at = i;
        break;
    }
    if (!value) {
        if (at == n_child_env) return 0;
        free(child_env[at]);
        memmove(&child_env[at], &child_env[at + 1], (n_child_env - at) * sizeof(*child_env));
        n_child_env--;
        return 0;
    }
    size_t size = len + 1 + strlen(value) + 1;
    char *entry = malloc(size);
    if (!entry) return -1;
    snprintf(entry, size, "%s=%s", name, value);
    if (at < n_child_env) {
        free(child_env[at]);
        child_env[at] = entry;
        return 0;
    }
    char **grown = realloc(child_env, (n_child_env + 2) * sizeof(*child_env));
    if (!grown) {
        free(entry);
        return -1;
    }
    child_env = grown;
    child_env[n_child_env++] = entry;
    child_env[n_child_env] = NULL;
    return 0;
}

/* ---- file descriptors COMMAND inherits ---------------------------------- */

/* The descriptors dlock was started with (above stderr), sorted: COMMAND
 * inherits these, as with flock(1), but not the library's Redis sockets. */
#define CLI_MAX_KEPT_FDS 256
static int kept_fds[CLI_MAX_KEPT_FDS];
static int n_kept_fds = -1; /* -1: unknown, close nothing */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void snapshot_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return;
    int dfd = dirfd(d), n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end = NULL;
        long fd = strtol(e->d_name, &end, 10);
        if (*end != '\0' || end == e->d_name || fd <= 2 || fd == dfd) continue;
        if (n == CLI_MAX_KEPT_FDS) {
            closedir(d);
            return; /* too many to track: leave all open */
        }
        kept_fds[n++] = (int)fd;
    }
    closedir(d);
    qsort(kept_fds, (size_t)n, sizeof(int), cmp_int);
    n_kept_fds = n;
}

/* Closes [lo, hi] in the forked child (async-signal-safe). */
static void close_span(int lo, int hi)
{
    if (lo > hi) return;
#if defined(__linux__) && defined(SYS_close_range)
    if (syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0u) == 0) return;
#endif
    int cap = hi < 65535 ? hi : 65535; /* no close_range: bounded loop */
    for (int fd = lo; fd <= cap; fd++) close(fd);
}

/* In the child: closes every descriptor above stderr that dlock did not
 * start with, except keep (the exec-error pipe). */
static void close_foreign_fds(int keep)
{
    if (n_kept_fds < 0) return;
    int lo = 3;
    for (int i = 0; i <= n_kept_fds; i++) {
        int next = i < n_kept_fds ? kept_fds[i] : INT_MAX;
        if (keep >= lo && keep < next) {
            close_span(lo, keep - 1);
            lo = keep + 1;
        }
        close_span(lo, next - 1);
        if (next == INT_MAX) break;
        lo = next + 1;
    }
}

void cli_child_snapshot_fds(void)
{
    snapshot_fds();
}

/* ---- starting COMMAND ------------------------------------------------ */

/* True when dlock runs in the terminal's foreground process group, so
 * COMMAND (in its own group) must be given the terminal to read it and to
 * get the keyboard's ^C directly. */
static bool owns_terminal(void)
{
    if (!isatty(STDIN_FILENO)) return false;
    pid_t fg = tcgetpgrp(STDIN_FILENO);
    return fg != -1 && fg == getpgrp();
}

/* Sets the terminal's foreground group with SIGTTOU held off (a background
 * group may not otherwise do it). */
static void give_terminal(pid_t pgid)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTTOU);
    sigprocmask(SIG_BLOCK, &block, &old);
    (void)tcsetpgrp(STDIN_FILENO, pgid);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* In the forked child: never returns. Reports exec failure's errno on
 * err_fd (close-on-exec, so a successful exec reports nothing). mask is
 * the signal mask dlock started with. */
static void exec_child(const cli_options *o, bool tty, pid_t parent, int err_fd,
                       const sigset_t *mask)
{
    setpgid(0, 0);
    if (tty) give_terminal(getpgrp());
    cli_events_restore_defaults();
    sigprocmask(SIG_SETMASK, mask, NULL);
    close_foreign_fds(err_fd);
#ifdef __linux__
    /* If dlock itself is killed (-9), COMMAND must not run on unlocked. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(CLI_EXIT_LOST);
#else
    (void)parent;
#endif
    /* The only thread of this process now: environ may change. */
    if (child_env) environ = child_env;
    if (o->shell_cmd) execl("/bin/sh", "sh", "-c", o->shell_cmd, (char *)NULL);
    else execvp(o->cmd[0], o->cmd);
    int e = errno;
    ssize_t n = write(err_fd, &e, sizeof(e));
    (void)n;
    _exit(e == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC);
}

/* Forks and execs COMMAND; returns its pid, or -exit_code on failure. */
static pid_t start_child(const cli_options *o, bool tty)
{
    int errp[2];
    if (pipe(errp) != 0) {
        cli_err("cannot create a pipe: %s", strerror(errno));
        return -CLI_EXIT_OSERR;
    }
    fcntl(errp[0], F_SETFD, FD_CLOEXEC);
    fcntl(errp[1], F_SETFD, FD_CLOEXEC);
    /* Signals wait until the child has dropped our handlers (which would
     * write into our pipe) and the parent has recorded its pid. */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        cli_err("cannot fork: %s", strerror(errno));
        close(errp[0]);
        close(errp[1]);
        return -CLI_EXIT_OSERR;
    }
    if (pid == 0) {
        close(errp[0]);
        exec_child(o, tty, parent, errp[1], &old);
    }
    close(errp[1]);
    setpgid(pid, pid); /* also here: no race with our first kill(-pid) */
    if (tty) give_terminal(pid);
    int e = 0;
    ssize_t n;
    do {
        n = read(errp[0], &e, sizeof(e));
    } while (n < 0 && errno == EINTR);
    close(errp[0]);
    if (n != (ssize_t)sizeof(e)) return pid; /* exec succeeded */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    const char *what = o->shell_cmd ? "/bin/sh" : o->cmd[0];
    if (e == ENOENT) {
        cli_err("%s: command not found", what);
        return -CLI_EXIT_NOTFOUND;
    }
    cli_err("%s: cannot execute: %s", what, strerror(e));
    return -CLI_EXIT_NOEXEC;
}

pid_t cli_child_start(const cli_options *o)
{
    return start_child(o, false);
}

/* ---- waiting for COMMAND --------------------------------------------- */

typedef struct run_state {
    const cli_options *o;
    pid_t pid;
    bool tty;            /* COMMAND was given the terminal */
    int64_t kill_at_ms;  /* SIGKILL deadline after a lost lock; 0: none */
    cli_child_result *res;
} run_state;

/* Stops COMMAND as --on-lost says; left_ms of validity remain (0: none). */
static void lock_lost(run_state *st, int64_t left_ms)
{
    if (st->res->lost) return;
    st->res->lost = true;
    const cli_options *o = st->o;
    char why[160];
    if (left_ms <= 0)
        snprintf(why, sizeof(why), "it was found gone, or no renewal succeeded before its validity ended");
    else if (o->lease_ms > 0)
        snprintf(why, sizeof(why), "its --lease ends in %lld ms", (long long)left_ms);
    else
        snprintf(why, sizeof(why), "no renewal succeeded: its validity ends in %lld ms", (long long)left_ms);
    switch (o->on_lost) {
    case CLI_ON_LOST_IGNORE:
        cli_err("lock '%s' lost (%s); COMMAND keeps running (--on-lost=ignore)", o->name, why);
        return;
    case CLI_ON_LOST_KILL:
        cli_err("lock '%s' lost (%s); killing COMMAND (pid %ld)", o->name, why, (long)st->pid);
        kill(-st->pid, SIGKILL);
        break;
    case CLI_ON_LOST_TERM: {
        /* SIGKILL a margin before the deadline; a lock found gone with no
         * validity left (revoked, removed) gives COMMAND that margin */
        int64_t margin = cli_kill_margin_ms(cli_lease_ms(o));
        int64_t grace = left_ms <= 0 ? margin : left_ms > margin ? left_ms - margin : 0;
        cli_err("lock '%s' lost (%s); sending SIGTERM to COMMAND (pid %ld), SIGKILL in %.3g s",
                o->name, why, (long)st->pid, (double)grace / 1000.0);
        kill(-st->pid, SIGTERM);
        kill(-st->pid, SIGCONT); /* a stopped (^Z) job must see it too */
        st->kill_at_ms = cli_now_ms() + (grace > 0 ? grace : 1);
        break;
    }
    }
    st->res->stopped_by_us = true;
}

/* ^Z on the terminal stopped COMMAND's group: give the terminal back and
 * stop dlock too, so the shell sees the job stopped; when continued in the
 * foreground ("fg"), hand the terminal to COMMAND again and wake it. */
static void follow_stop(const run_state *st)
{
    if (!st->tty) return;
    give_terminal(getpgrp());
    kill(getpid(), SIGSTOP);
    if (tcgetpgrp(STDIN_FILENO) == getpgrp()) give_terminal(st->pid);
    kill(-st->pid, SIGCONT);
}

/* Reaps COMMAND if it exited; true when it did. A job that lost its lock
 * must not leave workers behind: its group gets SIGKILL while the leader
 * is still unreaped, so the group id cannot have been reused. */
static bool reap(run_state *st)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)st->pid, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) != 0 ||
        si.si_pid == 0)
        return false;
    if (si.si_code != CLD_STOPPED && si.si_code != CLD_TRAPPED && st->res->stopped_by_us)
        kill(-st->pid, SIGKILL);
    int ws;
    pid_t r;
    while ((r = waitpid(st->pid, &ws, WUNTRACED)) < 0 && errno == EINTR) {
    }
    if (r != st->pid) return false;
    if (WIFSTOPPED(ws)) {
        follow_stop(st);
        return false;
    }
    if (WIFEXITED(ws)) st->res->status = WEXITSTATUS(ws);
    else st->res->status = 128 + WTERMSIG(ws);
    return true;
}

/* Validity below which COMMAND is stopped: SIGTERM then, SIGKILL margin
 * before the deadline. */
static int64_t stop_below_ms(const cli_options *o)
{
    int64_t margin = cli_kill_margin_ms(cli_lease_ms(o));
    return o->on_lost == CLI_ON_LOST_TERM ? o->kill_grace_ms + margin : margin;
}

/* Milliseconds until something is due (the stop point, SIGKILL). */
static int64_t next_timeout(const run_state *st, int64_t left_ms)
{
    int64_t t = -1;
    if (!st->res->lost) t = left_ms - stop_below_ms(st->o);
    if (st->kill_at_ms) {
        int64_t k = st->kill_at_ms - cli_now_ms();
        if (t < 0 || k < t) t = k;
    }
    if (t < 0 && !st->res->lost) t = 0;
    return t < 0 ? -1 : t;
}

int cli_child_run(const cli_options *o, cli_lock *lk, cli_child_result *res)
{
    memset(res, 0, sizeof(*res));
    bool tty = owns_terminal();
    pid_t pid = start_child(o, tty);
    if (pid < 0) return -pid;
    cli_verbose(o, "started COMMAND, pid %ld", (long)pid);
    run_state st = {.o = o, .pid = pid, .tty = tty, .res = res};
    while (!reap(&st)) {
        int ev = cli_events_next(next_timeout(&st, cli_lock_validity_ms(lk)));
        if (ev > 0 && ev != SIGCHLD && ev < CLI_EV_ACQUIRED) {
            cli_verbose(o, "forwarding signal %d to COMMAND", ev);
            kill(-pid, ev);
        }
        int64_t left = cli_lock_validity_ms(lk); /* read after any wake: renewals move it */
        if (!res->lost && left <= stop_below_ms(o)) lock_lost(&st, left);
        if (st.kill_at_ms && cli_now_ms() >= st.kill_at_ms) {
            cli_err("COMMAND still running at the end of its grace: sending SIGKILL");
            kill(-pid, SIGKILL);
            st.kill_at_ms = 0;
        }
    }
    if (tty) give_terminal(getpgrp());
    cli_verbose(o, "COMMAND exited with status %d", res->status);
    return 0;
}
