/* etcd_run.c: runs a command next to a private etcd (the fixture of
 * tests/support/etcd_fixture.c), so scripts and programs written for any
 * URL can be pointed at etcd: `etcd_run MEMBERS VAR COMMAND [ARGS...]`
 * starts MEMBERS (1 or 3) etcd members on free loopback ports, sets the
 * environment variable VAR to their etcd:// URL, runs COMMAND, stops etcd
 * by PID and exits with COMMAND's status (128+N if killed by signal N;
 * 2 if etcd did not start). Used by CTest, scripts/fault.sh and the
 * benchmarks. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_fixture.h"

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[1], "1") != 0 && strcmp(argv[1], "3") != 0)) {
        fprintf(stderr, "usage: etcd_run 1|3 VAR COMMAND [ARGS...]\n");
        return 2;
    }
    test_etcd e;
    if (test_etcd_start(&e, argv[1][0] - '0') != 0) {
        fprintf(stderr, "etcd_run: etcd did not start\n");
        return 2;
    }
    setenv(argv[2], e.url, 1);
    fprintf(stderr, "etcd_run: %s=%s\n", argv[2], e.url);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        execvp(argv[3], argv + 3);
        fprintf(stderr, "etcd_run: cannot run %s\n", argv[3]);
        _exit(127);
    }
    int st = 0;
    signal(SIGINT, SIG_IGN); /* the command decides; we clean up after it */
    while (pid > 0 && waitpid(pid, &st, 0) < 0) {
    }
    test_etcd_stop(&e);
    if (pid < 0) return 2;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
