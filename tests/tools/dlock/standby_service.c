/* standby_service.c: the singleton service of test_cli_standby.sh and
 * tests/fault/election_partition.sh, run as the COMMAND of
 * `dlock --standby`: standby_service LOG ID appends one line per event to
 * LOG, "ID EVENT TIME ROLE", TIME the CLOCK_MONOTONIC ms at which the
 * signal arrived (read in the handler: clock_gettime is
 * async-signal-safe) and ROLE the line of $DLOCK_STATE_FILE read then:
 * "start" (after its handlers are installed), "lead" (SIGUSR1), "stop"
 * (SIGUSR2); the first line is "ID state PATH PID". Ends on SIGTERM. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int ev_pipe[2];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One record per signal: the signal and when it came. */
typedef struct ev {
    int sig;
    int64_t at;
} ev;

static void on_signal(int sig)
{
    ev e = {.sig = sig, .at = now_ms()};
    ssize_t n = write(ev_pipe[1], &e, sizeof(e));
    (void)n;
}

static void note(const char *log, const char *id, const char *what, int64_t at)
{
    char role[128] = "";
    const char *path = getenv("DLOCK_STATE_FILE");
    FILE *s = path ? fopen(path, "r") : NULL;
    if (s) {
        if (!fgets(role, sizeof(role), s)) role[0] = '\0';
        fclose(s);
    }
    role[strcspn(role, "\n")] = '\0';
    FILE *f = fopen(log, "a");
    if (!f) return;
    fprintf(f, "%s %s %lld %s\n", id, what, (long long)at, role);
    fclose(f);
}

int main(int argc, char **argv)
{
    if (pipe(ev_pipe) != 0) return 71;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (argc != 3) {
        fputs("usage: standby_service LOG ID\n", stderr);
        return 64;
    }
    FILE *f = fopen(argv[1], "a");
    if (!f) return 73;
    const char *path = getenv("DLOCK_STATE_FILE");
    fprintf(f, "%s state %s %ld\n", argv[2], path ? path : "-", (long)getpid());
    fclose(f);
    note(argv[1], argv[2], "start", now_ms());
    for (;;) {
        ev e;
        ssize_t n = read(ev_pipe[0], &e, sizeof(e));
        if (n != (ssize_t)sizeof(e)) continue;
        if (e.sig == SIGTERM) return 0;
        note(argv[1], argv[2], e.sig == SIGUSR1 ? "lead" : "stop", e.at);
    }
}
