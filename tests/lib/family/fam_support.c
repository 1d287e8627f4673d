/* fam_support.c: helpers for the lock-family tests (see fam_support.h). */
#include "fam_support.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static char child_prefix[64];

const char *fam_prefix(void)
{
    return child_prefix[0] ? child_prefix : test_prefix();
}

dlock_client *fam_client(const test_server *s, int64_t watchdog_ms)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = s->url;
    o.key_prefix = fam_prefix();
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 2000;
    o.watchdog_timeout_ms = watchdog_ms > 0 ? watchdog_ms : 900;
    o.retry_attempts = 1;
    o.retry_delay_ms = 20;
    dlock_client *c = NULL;
    int rc = dlock_client_create(&o, &c);
    if (rc) fprintf(stderr, "fam_client: %s\n", dlock_strerror(rc));
    return c;
}

long long fam_int(const test_server *s, int argc, const char **argv)
{
    char out[64];
    if (lt_cmd(s, out, sizeof(out), argc, argv) != 0) return LLONG_MIN;
    char *end = NULL;
    long long v = strtoll(out, &end, 10);
    return end && end != out ? v : (out[0] == '\0' ? 0 : LLONG_MIN);
}

const char *fam_key(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", fam_prefix(), name);
    return buf;
}

int fam_wait_child(pid_t pid)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int64_t fam_frozen_until_called(test_server *s, atomic_int *calls, int64_t bound_ms)
{
    test_server_pause(s, true);
    int64_t cut = dlock__now_ms();
    while (atomic_load(calls) == 0 && dlock__now_ms() - cut < bound_ms) dlock__sleep_ms(5);
    int64_t took = dlock__now_ms() - cut;
    test_server_pause(s, false);
    return took;
}

void fam_kill_child(pid_t pid)
{
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
}

typedef struct spawn_req {
    const char *role;
    char port[16];
    const char *url;
    const char *arg;
} spawn_req;

static int exec_child(void *p)
{
    spawn_req *r = p;
    char *argv[8] = {"fam-child", "--fam-child", (char *)r->role, r->port, (char *)fam_prefix(),
                     (char *)(r->arg ? r->arg : ""), (char *)r->url, NULL};
    execv("/proc/self/exe", argv);
    return 126;
}

pid_t fam_spawn(const char *role, const test_server *s, const char *arg)
{
    spawn_req r = {.role = role, .url = s->url, .arg = arg};
    snprintf(r.port, sizeof(r.port), "%d", s->port);
    return test_fork(exec_child, &r);
}

void fam_child_dispatch(int argc, char **argv, const fam_role *roles)
{
    if (argc < 7 || strcmp(argv[1], "--fam-child") != 0) return;
    snprintf(child_prefix, sizeof(child_prefix), "%s", argv[4]);
    test_server s;
    memset(&s, 0, sizeof(s));
    s.port = (int)strtol(argv[3], NULL, 10);
    snprintf(s.url, sizeof(s.url), "%s", argv[6]); /* the parent's: redis:// or redis-cluster:// */
    for (const fam_role *r = roles; r->name; r++)
        if (strcmp(r->name, argv[2]) == 0) exit(r->fn(&s, argv[5]));
    fprintf(stderr, "fam-child: unknown role %s\n", argv[2]);
    exit(125);
}

test_server fam_srv;
dlock_client *fam_cli;

int fam_setup(void **state)
{
    (void)state;
    if (lt_start(&fam_srv) != 0) return -1;
    fam_cli = fam_client(&fam_srv, 0);
    return fam_cli ? 0 : -1;
}

int fam_teardown(void **state)
{
    (void)state;
    dlock_client_destroy(fam_cli);
    lt_stop(&fam_srv);
    return 0;
}
