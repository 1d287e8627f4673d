/* fam_support.h: small helpers shared by the lock-family tests: a client on
 * a test server with short timeouts, Redis look-behind queries and child
 * processes safe under TSan. Every helper fails the test loudly. */
#ifndef DLOCK_TEST_FAM_SUPPORT_H
#define DLOCK_TEST_FAM_SUPPORT_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlock/dlock.h"
#include "lib_target.h"
#include "servers.h"

/* The key prefix of this test: test_prefix(), or in a spawned child the
 * parent's prefix (so both see the same keys). */
const char *fam_prefix(void);

/* Slack added to every upper time bound in these tests: they must hold on
 * a loaded 2-core CI machine under sanitizers, while still failing when a
 * wait falls back to a long poll or a serial path. */
#define FAM_SLACK_MS 400

/* A client on s with key prefix fam_prefix() and a watchdog lease of
 * watchdog_ms (0: 900 ms). NULL on failure (message on stderr). */
dlock_client *fam_client(const test_server *s, int64_t watchdog_ms);

/* Group fixture shared by the single-server family tests: a private
 * redis-server (or the test cluster, lib_target.h) in fam_srv and a
 * fam_client() on it in fam_cli. */
extern test_server fam_srv;
extern dlock_client *fam_cli;
int fam_setup(void **state);
int fam_teardown(void **state);

/* Integer result of a command on s (argv style); LLONG_MIN on error. */
long long fam_int(const test_server *s, int argc, const char **argv);

/* Key as the library builds it: fam_prefix() + name. */
const char *fam_key(const char *name, char *buf, size_t len);

/* Freezes s (SIGSTOP: sockets open, nothing answers) until *calls is
 * non-zero or bound_ms passed, then thaws it; returns the ms from the
 * freeze to the first call seen (or to the bound). For loss callbacks. */
int64_t fam_frozen_until_called(test_server *s, atomic_int *calls, int64_t bound_ms);

/* Waits for a forked child and returns its exit status (or 128+signal). */
int fam_wait_child(pid_t pid);

/* Kills a forked child with SIGKILL and reaps it. */
void fam_kill_child(pid_t pid);

/* Child processes that are safe under ThreadSanitizer: the child is a
 * fresh exec of this test program (a fork of a threaded process may not
 * start threads under TSan), running role fn with a server on s's port and
 * the parent's key prefix. main() calls fam_child_dispatch first. */
typedef int (*fam_role_fn)(const test_server *s, const char *arg);
typedef struct fam_role {
    const char *name;
    fam_role_fn fn;
} fam_role;
/* Starts role (arg may be NULL); returns the child's pid or -1. */
pid_t fam_spawn(const char *role, const test_server *s, const char *arg);
/* If this process is a spawned child, runs its role and exits with its
 * result; otherwise returns. roles ends with {NULL, NULL}. */
void fam_child_dispatch(int argc, char **argv, const fam_role *roles);

#endif
