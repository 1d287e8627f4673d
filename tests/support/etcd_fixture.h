/* etcd_fixture.h: test fixtures that start real etcd (Debian's
 * etcd-server, /usr/bin/etcd) as a single member or a 3-member cluster on
 * free 127.0.0.1 client and peer ports (never 2379/2380), with every
 * member's data dir and log in one temp dir, and stop them by the PIDs
 * they started. Members get PR_SET_PDEATHSIG and are killed at exit.
 * Not thread-safe: one test thread drives a fixture. */
#ifndef DLOCK_TEST_ETCD_FIXTURE_H
#define DLOCK_TEST_ETCD_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define TEST_ETCD_MAX 3

typedef struct test_etcd {
    int n;                               /* members */
    pid_t pid[TEST_ETCD_MAX];            /* 0 while stopped */
    int client_port[TEST_ETCD_MAX];
    int peer_port[TEST_ETCD_MAX];
    char dir[256];                       /* temp dir (removed on stop) */
    char url[1024];                      /* etcd://127.0.0.1:p1[,127.0.0.1:p2,...] */
    bool tls;                            /* https only, client certificates required */
    char certs[300];                     /* tls: dir with ca.pem, member.pem, member.key */
} test_etcd;

/* Starts members (1 or 3) and waits (<= 15 s) until every member answers
 * and the cluster has a leader. 0 or -1 (message on stderr). */
int test_etcd_start(test_etcd *e, int members);
/* One member serving only HTTPS and requiring a client certificate: makes
 * a throw-away CA and a certificate for 127.0.0.1 (server and client use)
 * with openssl(1) in the temp dir; url is etcds://127.0.0.1:p?cacert=...
 * &cert=...&key=... 0 or -1. */
int test_etcd_start_tls(test_etcd *e);
/* SIGTERM every member (SIGKILL after 5 s), wait, remove the temp dir. */
void test_etcd_stop(test_etcd *e);
/* kill -9 of member i (its data dir stays, for test_etcd_restart). */
void test_etcd_kill(test_etcd *e, int i);
/* Starts member i again on its data dir and ports; 0 or -1. */
int test_etcd_restart(test_etcd *e, int i);
/* SIGSTOP / SIGCONT member i. */
void test_etcd_pause(test_etcd *e, int i, bool paused);
/* Index of the current leader (asked of the running members), or -1. */
int test_etcd_leader(const test_etcd *e);
/* Waits (<= budget_ms) until a running member reports a leader. 0 or -1. */
int test_etcd_wait_leader(const test_etcd *e, int budget_ms);

/* POSTs body to path on member i through a fresh connection; the answer
 * (NUL-terminated, maybe truncated) in out. Returns the HTTP status, or -1
 * when the request failed. Lets tests look behind the library. */
int test_etcd_post(const test_etcd *e, int i, const char *path, const char *body, char *out, size_t outlen);
/* Enables authentication with user root / password (etcd's own rules:
 * the root user and role). 0 or -1. */
int test_etcd_enable_auth(const test_etcd *e, const char *password);

#endif
