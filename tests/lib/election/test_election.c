/* test_election.c: elections and holder labels (election.h, lock.h) on a
 * private redis-server and a private etcd, with real processes: a label
 * read by another process, the observed sequence of leaders in order, a
 * standby taking over after kill -9 of the leader (never before the old
 * leader's stated deadline), resume with the same id (and the same term
 * after the fence key expired), and a leader cut
 * off by the freezing proxy told to stop before the standby is told it
 * leads (CLOCK_MONOTONIC times taken in the processes).
 * A third group runs through a redis-sentinel:// URL (the same server
 * with a replica and 3 sentinels) and ends with a failover the election
 * follows: after it, exactly one candidate leads, on the new master.
 * With DLOCK_TEST_CLUSTER=1 (test_election_cluster) the Redis group runs
 * on a 3-master Cluster (lib_target.h) and the etcd and Sentinel groups
 * are left out.
 * ELECTION_ONLY=PATTERN runs only the matching tests (cmocka filter):
 * tests/fault/election_partition.sh runs the partition case that way. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlock/election.h"
#include "dlock/lock.h"
#include "etcd_fixture.h"
#include "lib_target.h"
#include "logcap.h"
#include "servers.h"

#define LEASE_MS 1000
#define SLACK_MS 1500 /* loaded 2-core CI under sanitizers */

static test_server redis, replica, sentinels[3];
static test_etcd etcd;
static const char *url;      /* the current group's server */
static bool on_etcd, on_sentinel;
static char sentinel_url[256];
static char proxy_bin[1024];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A client of u; wait_replicas > 0: acquisitions and renewals wait for
 * that many replicas (docs/locks.md, "Replica safety"). */
static dlock_client *client_with(const char *u, int wait_replicas)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = u;
    o.wait_replicas = wait_replicas;
    o.watchdog_timeout_ms = LEASE_MS;
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 500;
    o.retry_attempts = 1;
    o.key_prefix = test_prefix();
    o.log_fn = test_log_capture;
    o.log_level = DLOCK_LOG_DEBUG;
    dlock_client *c = NULL;
    int rc = dlock_client_create(&o, &c);
    if (rc) fprintf(stderr, "dlock_client_create(%s): %s\n", u, dlock_strerror(rc));
    return c;
}

static dlock_client *client_on(const char *u) { return client_with(u, 0); }

static dlock_election *election(dlock_client *c, const char *name, dlock_election_lost_fn lost, void *ud)
{
    dlock_election_options o;
    dlock_election_options_init(&o);
    o.on_lost = lost;
    o.on_lost_ud = ud;
    o.poll_ms = 50;
    dlock_election *e = NULL;
    assert_int_equal(dlock_election_new(c, name, &o, &e), 0);
    return e;
}

/* ---- labels ---------------------------------------------------------------- */

typedef struct label_arg {
    int fd;
    dlock_lock_kind kind;
} label_arg;

/* Another process: holds "labels" with a label, says 'y', waits to be killed. */
static int label_holder(void *arg)
{
    label_arg *a = arg;
    dlock_client *c = client_on(url);
    dlock_lock_options o;
    dlock_lock_options_init(&o);
    o.kind = a->kind;
    dlock_lock *l = NULL;
    char ok = c && dlock_lock_new(c, "labels", &o, &l) == 0 &&
                      dlock_lock_set_label(l, "hostA:4242:nightly-report") == 0 &&
                      dlock_lock_try_lock(l, 2000, 0, NULL) == 0
                  ? 'y'
                  : 'n';
    if (write(a->fd, &ok, 1) != 1) return 3;
    for (;;) pause();
}

static void label_seen_from_another_process(dlock_lock_kind kind)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    label_arg a = {.fd = p[1], .kind = kind};
    pid_t pid = test_fork(label_holder, &a);
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    assert_int_equal(ok, 'y');
    dlock_client *c = client_on(url);
    char *label = NULL;
    assert_int_equal(dlock_lock_label_get(c, "labels", &label), 0);
    assert_string_equal(label, "hostA:4242:nightly-report");
    dlock_free(label);
    dlock_lock_status st;
    assert_int_equal(dlock_lock_status_get(c, "labels", &st), 0);
    assert_true(st.locked);
    assert_int_equal(st.kind, kind); /* the lock key's layout did not change */
    kill(pid, SIGKILL);
    test_exit_code(pid);
    /* the label ends with the lease (etcd expires leases a little late) */
    for (int i = 0; i < 40; i++) {
        assert_int_equal(dlock_lock_label_get(c, "labels", &label), 0);
        bool gone = label[0] == '\0';
        dlock_free(label);
        if (gone) break;
        sleep_ms(100);
    }
    assert_int_equal(dlock_lock_label_get(c, "labels", &label), 0);
    assert_string_equal(label, "");
    dlock_free(label);
    dlock_client_destroy(c);
    close(p[0]);
    close(p[1]);
}

static void test_label_is_read_by_another_process(void **state)
{
    (void)state;
    label_seen_from_another_process(DLOCK_LOCK_SIMPLE);
    if (!on_etcd) label_seen_from_another_process(DLOCK_LOCK_REENTRANT);
}

static void test_label_follows_set_label_and_release(void **state)
{
    (void)state;
    dlock_client *c = client_on(url);
    dlock_lock_options o;
    dlock_lock_options_init(&o);
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(c, "relabel", &o, &l), 0);
    assert_int_equal(dlock_lock_set_label(l, "first"), 0); /* not held: no I/O */
    assert_int_equal(dlock_lock_set_label(l, "x\ny"), DLOCK_EINVAL); /* one line */
    assert_int_equal(dlock_lock_set_label(l, "second"), 0);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    char *label = NULL;
    assert_int_equal(dlock_lock_label_get(c, "relabel", &label), 0);
    assert_string_equal(label, "second"); /* the label stored last was used */
    dlock_free(label);
    assert_int_equal(dlock_lock_set_label(l, "third"), 0);
    assert_int_equal(dlock_lock_label_get(c, "relabel", &label), 0);
    assert_string_equal(label, "third");
    dlock_free(label);
    sleep_ms(LEASE_MS); /* renewals keep the label alive with the lock */
    assert_int_equal(dlock_lock_label_get(c, "relabel", &label), 0);
    assert_string_equal(label, "third");
    dlock_free(label);
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_int_equal(dlock_lock_label_get(c, "relabel", &label), 0);
    assert_string_equal(label, "");
    dlock_free(label);
    dlock_lock_free(l);
    dlock_client_destroy(c);
}

/* ---- the observed sequence --------------------------------------------------- */

#define MAX_SEEN 32
typedef struct seen {
    pthread_mutex_t mu;
    int n;
    dlock_leader v[MAX_SEEN];
} seen;

static void record(dlock_election *e, const dlock_leader *leader, void *ud)
{
    (void)e;
    seen *s = ud;
    pthread_mutex_lock(&s->mu);
    if (s->n < MAX_SEEN) s->v[s->n++] = *leader;
    pthread_mutex_unlock(&s->mu);
}

/* Waits (<= 3 s) until the observer saw n changes. */
static int seen_wait(seen *s, int n)
{
    for (int i = 0; i < 300; i++) {
        pthread_mutex_lock(&s->mu);
        int have = s->n;
        pthread_mutex_unlock(&s->mu);
        if (have >= n) return have;
        sleep_ms(10);
    }
    return -1;
}

static void expect(const seen *s, int i, bool present, uint64_t term, const char *value)
{
    const dlock_leader *v = &s->v[i];
    if (v->present != present || (present && (v->term != term || strcmp(v->value, value) != 0)))
        fail_msg("change %d: got %s term %llu value '%s', expected %s term %llu value '%s'", i,
                 v->present ? "leader" : "none", (unsigned long long)v->term, v->value,
                 present ? "leader" : "none", (unsigned long long)term, value);
}

static void test_observer_sees_every_change_in_order(void **state)
{
    (void)state;
    dlock_client *c = client_on(url);
    dlock_election *obs = election(c, "order", NULL, NULL);
    dlock_election *a = election(c, "order", NULL, NULL);
    dlock_election *b = election(c, "order", NULL, NULL);
    seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    assert_int_equal(dlock_election_observe(obs, record, &s), 0);
    assert_int_equal(seen_wait(&s, 1), 1);
    uint64_t t1 = 0, t2 = 0;
    assert_int_equal(dlock_election_campaign(a, "alpha", 0, &t1), 0);
    assert_int_equal(seen_wait(&s, 2), 2);
    assert_int_equal(dlock_election_campaign(b, "beta", 0, NULL), DLOCK_EBUSY);
    assert_int_equal(dlock_election_campaign(a, "alpha", 0, NULL), DLOCK_EALREADY);
    assert_int_equal(dlock_election_proclaim(a, "alpha-2"), 0);
    assert_int_equal(seen_wait(&s, 3), 3);
    assert_int_equal(dlock_election_resign(a), 0);
    assert_int_equal(seen_wait(&s, 4), 4);
    assert_int_equal(dlock_election_campaign(b, "beta", 1000, &t2), 0);
    assert_true(t2 > t1); /* a term is a fencing token */
    assert_int_equal(seen_wait(&s, 5), 5);
    assert_int_equal(dlock_election_resign(b), 0);
    assert_int_equal(seen_wait(&s, 6), 6);
    sleep_ms(200); /* nothing more comes */
    dlock_election_observe_stop(obs);
    assert_int_equal(s.n, 6);
    expect(&s, 0, false, 0, "");
    expect(&s, 1, true, t1, "alpha");
    expect(&s, 2, true, t1, "alpha-2");
    expect(&s, 3, false, 0, "");
    expect(&s, 4, true, t2, "beta");
    expect(&s, 5, false, 0, "");
    assert_int_equal(dlock_election_resign(b), DLOCK_ENOTHELD);
    dlock_election_free(a);
    dlock_election_free(b);
    dlock_election_free(obs);
    dlock_client_destroy(c);
}

/* ---- kill -9 of the leader ------------------------------------------------------ */

typedef struct shared {
    _Atomic int64_t led_ms, deadline_ms, stop_ms;
    _Atomic uint64_t term;
} shared;

static shared *shared_new(void)
{
    shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    return sh;
}

static void leader_stopped(dlock_election *e, int reason, void *ud)
{
    (void)e;
    (void)reason;
    shared *sh = ud;
    int64_t zero = 0;
    atomic_compare_exchange_strong(&sh->stop_ms, &zero, now_ms());
}

typedef struct leader_arg {
    shared *sh;
    const char *url;
    int64_t drift_ms; /* > 0: the client's fixed drift allowance */
    int wait_replicas;
} leader_arg;

/* Another process: leads, then states its validity deadline every 5 ms
 * until it stops leading or is killed; its lost callback ("stop
 * leading") writes stop_ms. */
static int leader_process(void *arg)
{
    leader_arg *a = arg;
    dlock_client *c = client_with(a->url, a->wait_replicas);
    if (!c) return 2;
    if (a->drift_ms > 0 && dlock_client_set_clock_drift(c, DLOCK_DRIFT_PPM_DEFAULT, a->drift_ms) != 0) return 2;
    dlock_election *e = election(c, "takeover", leader_stopped, a->sh);
    uint64_t term = 0;
    if (dlock_election_campaign(e, "old", 2000, &term) != 0) return 3;
    atomic_store(&a->sh->term, term);
    atomic_store(&a->sh->deadline_ms, now_ms() + dlock_election_validity_ms(e));
    atomic_store(&a->sh->led_ms, now_ms());
    for (;;) {
        int64_t left = dlock_election_validity_ms(e);
        if (left <= 0) break;
        atomic_store(&a->sh->deadline_ms, now_ms() + left);
        sleep_ms(5);
    }
    for (;;) pause(); /* stop_ms: only what the lost callback said */
}

static void wait_led(shared *sh)
{
    for (int i = 0; i < 500 && !atomic_load(&sh->led_ms); i++) sleep_ms(10);
    assert_true(atomic_load(&sh->led_ms) > 0);
}

static void test_kill9_leader_standby_leads_after_its_deadline(void **state)
{
    (void)state;
    shared *sh = shared_new();
    leader_arg a = {.sh = sh, .url = url};
    pid_t pid = test_fork(leader_process, &a);
    wait_led(sh);
    sleep_ms(LEASE_MS / 2); /* a renewal went through */
    dlock_client *c = client_on(url);
    dlock_election *standby = election(c, "takeover", NULL, NULL);
    assert_int_equal(dlock_election_campaign(standby, "new", 0, NULL), DLOCK_EBUSY);
    kill(pid, SIGKILL);
    int64_t killed = now_ms();
    assert_int_equal(test_exit_code(pid), 128 + SIGKILL);
    uint64_t term = 0;
    assert_int_equal(dlock_election_campaign(standby, "new", 10000, &term), 0);
    int64_t led = now_ms();
    int64_t old_deadline = atomic_load(&sh->deadline_ms);
    print_message("# killed at 0, old leader's last stated deadline %+lld ms, standby leads %+lld ms\n",
                  (long long)(old_deadline - killed), (long long)(led - killed));
    if (led < old_deadline) fail_msg("the standby led %lld ms before the old leader's deadline",
                                     (long long)(old_deadline - led));
    /* within one lease (and the etcd lease's whole-second rounding) plus the wait's recheck */
    int64_t bound = (on_etcd ? 1000 : LEASE_MS) + SLACK_MS;
    if (led - killed > bound) fail_msg("the standby led %lld ms after kill -9 (bound %lld)",
                                       (long long)(led - killed), (long long)bound);
    assert_true(term > atomic_load(&sh->term));
    assert_int_equal(dlock_election_resign(standby), 0);
    dlock_election_free(standby);
    dlock_client_destroy(c);
    munmap(sh, sizeof(*sh));
}

/* ---- resume ---------------------------------------------------------------------- */

static void test_resume_with_the_same_id(void **state)
{
    (void)state;
    dlock_client *c = client_on(url);
    dlock_election_options o;
    dlock_election_options_init(&o);
    o.id = "candidate-7";
    dlock_election *e = NULL;
    char id[DLOCK_OWNER_MAX + 1] = "candidate-7";
    if (on_etcd) { /* the id is the lease, known after the campaign */
        assert_int_equal(dlock_election_new(c, "resume", &o, &e), DLOCK_ENOTSUP);
        e = election(c, "resume", NULL, NULL);
    } else {
        assert_int_equal(dlock_election_new(c, "resume", &o, &e), 0);
    }
    uint64_t t1 = 0, t2 = 0;
    assert_int_equal(dlock_election_campaign(e, "v1", 0, &t1), 0);
    if (on_etcd) snprintf(id, sizeof(id), "%s", dlock_election_id(e));
    assert_string_equal(dlock_election_id(e), id);
    o.id = id;
    dlock_election_free(e); /* "crashed": the leadership lives on its lease */
    if (!on_etcd) { /* a long leadership outlives its fence key (1 h): the term stays */
        char fk[256];
        snprintf(fk, sizeof(fk), "%selection:{resume}:fence", test_prefix());
        const char *del[2] = {"DEL", fk};
        char out[64];
        assert_int_equal(lt_cmd(&redis, out, sizeof(out), 2, del), 0);
        assert_string_equal(out, "1");
    }
    dlock_client_destroy(c);
    c = client_on(url);
    dlock_election *other = election(c, "resume", NULL, NULL);
    assert_int_equal(dlock_election_campaign(other, "x", 0, NULL), DLOCK_EBUSY);
    assert_int_equal(dlock_election_new(c, "resume", &o, &e), 0);
    assert_int_equal(dlock_election_campaign(e, "v2", 0, &t2), 0);
    assert_int_equal(t2, t1); /* the same leadership */
    dlock_leader ld;
    assert_int_equal(dlock_election_leader(other, &ld), 0);
    assert_true(ld.present);
    assert_int_equal(ld.term, t1);
    assert_string_equal(ld.value, "v2");
    assert_int_equal(dlock_election_resign(e), 0);
    dlock_election_free(e);
    dlock_election_free(other);
    dlock_client_destroy(c);
}

static void test_bad_input_is_refused(void **state)
{
    (void)state;
    dlock_client *c = client_on(url);
    dlock_election *e = NULL;
    assert_int_equal(dlock_election_new(c, "", NULL, &e), DLOCK_EINVAL);
    assert_int_equal(dlock_election_new(NULL, "x", NULL, &e), DLOCK_EINVAL);
    dlock_election_options o;
    dlock_election_options_init(&o);
    o.poll_ms = 1;
    assert_int_equal(dlock_election_new(c, "x", &o, &e), DLOCK_EINVAL);
    e = election(c, "bad", NULL, NULL);
    assert_int_equal(dlock_election_campaign(e, "", 0, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_campaign(e, NULL, 0, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_proclaim(e, "v"), DLOCK_ENOTHELD);
    assert_int_equal(dlock_election_observe(e, NULL, NULL), DLOCK_EINVAL);
    assert_false(dlock_election_is_leader(e));
    dlock_leader ld;
    assert_int_equal(dlock_election_leader(e, &ld), 0);
    assert_false(ld.present);
    dlock_election_free(e);
    dlock_election_free(NULL);
    dlock_client_destroy(c);
}

/* ---- the leader cut off by the freezing proxy -------------------------------------- */

/* Starts dl_freeze_proxy to port; returns its pid, *proxy_port_out. */
static pid_t start_proxy(int port, int *proxy_port_out)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        char ps[16];
        snprintf(ps, sizeof(ps), "%d", port);
        execl(proxy_bin, proxy_bin, "127.0.0.1", ps, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char line[32] = "";
    ssize_t n = read(p[0], line, sizeof(line) - 1);
    close(p[0]);
    assert_true(n > 0);
    *proxy_port_out = (int)strtol(line, NULL, 10);
    assert_true(*proxy_port_out > 0);
    return pid;
}

static void test_partition_old_leader_stops_before_new_leads(void **state)
{
    (void)state;
    if (on_sentinel) skip(); /* the proxy stands in front of one server: the Redis group's case */
    if (!on_etcd) LT_STANDALONE_ONLY("a Cluster names its nodes: no proxy in between");
    int port = on_etcd ? etcd.client_port[0] : redis.port, pport = 0;
    pid_t proxy = start_proxy(port, &pport);
    char purl[128];
    snprintf(purl, sizeof(purl), "%s://127.0.0.1:%d", on_etcd ? "etcd" : "redis", pport);
    shared *sh = shared_new();
    /* the lost callback runs on a thread of a process that a loaded CI
     * machine may schedule late: 50 ms of drift allowance, not 2, keeps
     * that from passing for a late deadline */
    leader_arg a = {.sh = sh, .url = purl, .drift_ms = 50};
    pid_t pid = test_fork(leader_process, &a);
    wait_led(sh);
    sleep_ms(LEASE_MS / 2);
    dlock_client *c = client_on(url);
    dlock_election *standby = election(c, "takeover", NULL, NULL);
    kill(proxy, SIGSTOP); /* the cut: sockets open, no byte moves */
    int64_t cut = now_ms();
    assert_int_equal(dlock_election_campaign(standby, "new", 10000, NULL), 0);
    int64_t led = now_ms();
    for (int i = 0; i < 100 && !atomic_load(&sh->stop_ms); i++) sleep_ms(10);
    int64_t stopped = atomic_load(&sh->stop_ms);
    print_message("# cut at 0: old leader told to stop %+lld ms, standby leads %+lld ms\n",
                  (long long)(stopped ? stopped - cut : -1), (long long)(led - cut));
    kill(pid, SIGKILL);
    test_exit_code(pid);
    kill(proxy, SIGCONT);
    kill(proxy, SIGKILL);
    test_exit_code(proxy);
    if (!stopped) fail_msg("the old leader was never told to stop");
    if (stopped >= led) fail_msg("the old leader was told to stop %lld ms after the standby led",
                                 (long long)(stopped - led));
    if (stopped - cut > LEASE_MS + SLACK_MS) fail_msg("told to stop %lld ms after the cut", (long long)(stopped - cut));
    assert_int_equal(dlock_election_resign(standby), 0);
    dlock_election_free(standby);
    dlock_client_destroy(c);
    munmap(sh, sizeof(*sh));
}

/* ---- a Sentinel failover ------------------------------------------------------------ */

/* Another process: campaigns (waiting up to 30 s; a master without a
 * replica to acknowledge answers DLOCK_ENOTREPL: campaign again) and
 * states when it led. */
static int standby_process(void *arg)
{
    leader_arg *a = arg;
    dlock_client *c = client_with(a->url, a->wait_replicas);
    if (!c) return 2;
    dlock_election *e = election(c, "takeover", leader_stopped, a->sh);
    uint64_t term = 0;
    int64_t end = now_ms() + 30000;
    int rc;
    while ((rc = dlock_election_campaign(e, "standby", end - now_ms(), &term)) == DLOCK_ENOTREPL && now_ms() < end)
        sleep_ms(100);
    if (rc != 0) return 3;
    atomic_store(&a->sh->term, term);
    atomic_store(&a->sh->led_ms, now_ms());
    for (;;) pause();
}

/* Waits (<= 30 s) until s reports role (INFO replication). */
static void wait_role(const test_server *s, const char *role, const char *what)
{
    const char *argv[2] = {"INFO", "replication"};
    char info[4096] = "";
    for (int i = 0; i < 300; i++) {
        if (test_redis_cmd(s, info, sizeof(info), 2, argv) == 0 && strstr(info, role)) return;
        sleep_ms(100);
    }
    fail_msg("%s did not happen within 30 s", what);
}

/* The election follows a Sentinel failover, and with wait_replicas = 1
 * the old leader is told to stop before the standby leads. SENTINEL
 * FAILOVER promotes the replica; until the sentinels demote the old
 * master (their next INFO of it, ~10 s) there are two masters. The old
 * leader's renewals still succeed on the old one, but no replica
 * acknowledges them any more, so they no longer move its validity
 * deadline: it ends by the lease the promoted replica keeps. The standby
 * leads on the new master once that lease ran out and, with
 * wait_replicas, once the demoted master replicates from it. Without
 * wait_replicas the standby led 0.7-0.9 s before the old leader was told
 * to stop (docs/locks.md, "Elections"); this test then fails. */
static void test_failover_is_followed(void **state)
{
    (void)state;
    if (!on_sentinel) skip();
    shared *old = shared_new(), *next = shared_new();
    leader_arg a = {.sh = old, .url = url, .wait_replicas = 1}, b = {.sh = next, .url = url, .wait_replicas = 1};
    pid_t leader = test_fork(leader_process, &a);
    wait_led(old);
    pid_t standby = test_fork(standby_process, &b);
    sleep_ms(LEASE_MS / 2);
    const char *fo[3] = {"SENTINEL", "FAILOVER", "electmaster"};
    char out[256] = "";
    int64_t t0 = now_ms();
    /* a sentinel just started may not know the replica yet (NOGOODSLAVE) */
    while (test_redis_cmd(&sentinels[0], out, sizeof(out), 3, fo) != 0 || strcmp(out, "OK") != 0) {
        if (now_ms() - t0 > 15000) fail_msg("SENTINEL FAILOVER kept failing: %s", out);
        sleep_ms(200);
    }
    wait_role(&replica, "role:master", "the replica's promotion");
    int64_t promoted = now_ms();
    wait_role(&redis, "role:slave", "the old master's demotion");
    int64_t demoted = now_ms();
    /* settle: the old leader's renewals now fail on a replica or find the
     * key gone; a leadership told to stop expires on its lease */
    int64_t stopped = 0, led = 0;
    for (int i = 0; i < 2000; i++) { /* the demoted master's resync can take seconds */
        stopped = atomic_load(&old->stop_ms);
        led = atomic_load(&next->led_ms);
        if (i >= 3 * LEASE_MS / 10 && (stopped != 0) == (led != 0)) break;
        sleep_ms(10);
    }
    dlock_client *c = client_on(url);
    dlock_election *obs = election(c, "takeover", NULL, NULL);
    dlock_leader ld;
    assert_int_equal(dlock_election_leader(obs, &ld), 0); /* read from the new master */
    print_message("# SENTINEL FAILOVER at 0: promoted %+lld ms, old master demoted %+lld ms; old leader told "
                  "to stop %+lld ms, standby led %+lld ms (0: not); leader read: %s\n",
                  (long long)(promoted - t0), (long long)(demoted - t0), (long long)(stopped ? stopped - t0 : 0),
                  (long long)(led ? led - t0 : 0), ld.present ? ld.value : "none");
    kill(leader, SIGKILL);
    test_exit_code(leader);
    kill(standby, SIGKILL);
    test_exit_code(standby);
    if (led && (!stopped || stopped >= led))
        fail_msg("the standby led %s the old leader was told to stop", stopped ? "before" : "and never");
    if (!led && stopped) fail_msg("the old leader was told to stop, yet the standby never led");
    assert_true(ld.present);
    assert_string_equal(ld.value, led ? "standby" : "old");
    dlock_election_free(obs);
    dlock_client_destroy(c);
    munmap(old, sizeof(*old));
    munmap(next, sizeof(*next));
}

/* ---- groups ---------------------------------------------------------------------- */

static int redis_setup(void **state)
{
    (void)state;
    url = redis.url;
    on_etcd = on_sentinel = false;
    return 0;
}

static int etcd_setup(void **state)
{
    (void)state;
    url = etcd.url;
    on_etcd = true;
    on_sentinel = false;
    return 0;
}

/* The Redis group's server becomes a Sentinel-watched master. */
static int sentinel_setup(void **state)
{
    (void)state;
    if (test_redis_start(&replica, NULL) || test_redis_replicate(&replica, &redis)) return -1;
    for (int i = 0; i < 3; i++)
        if (test_sentinel_start(&sentinels[i], &redis, "electmaster", 2)) return -1;
    snprintf(sentinel_url, sizeof(sentinel_url),
             "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/electmaster", sentinels[0].port,
             sentinels[1].port, sentinels[2].port);
    url = sentinel_url;
    on_etcd = false;
    on_sentinel = true;
    return 0;
}

static int sentinel_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) test_server_stop(&sentinels[i]);
    test_server_stop(&replica);
    return 0;
}

int main(void)
{
    const char *b = getenv("DLOCK_BUILD_DIR");
    snprintf(proxy_bin, sizeof(proxy_bin), "%s/tests/dl_freeze_proxy", b ? b : "build");
    const char *only = getenv("ELECTION_ONLY");
    if (only && *only) cmocka_set_test_filter(only);
    test_prefix(); /* fixed before forking, so children share it */
    if (lt_start(&redis) != 0) return 1;
    if (!lt_cluster() && test_etcd_start(&etcd, 1) != 0) {
        lt_stop(&redis);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_is_read_by_another_process),
        cmocka_unit_test(test_label_follows_set_label_and_release),
        cmocka_unit_test(test_observer_sees_every_change_in_order),
        cmocka_unit_test(test_kill9_leader_standby_leads_after_its_deadline),
        cmocka_unit_test(test_resume_with_the_same_id),
        cmocka_unit_test(test_bad_input_is_refused),
        cmocka_unit_test(test_partition_old_leader_stops_before_new_leads),
        cmocka_unit_test(test_failover_is_followed), /* last: it moves the master */
    };
    int failed = cmocka_run_group_tests_name("election on redis", tests, redis_setup, NULL);
    if (!lt_cluster()) {
        failed += cmocka_run_group_tests_name("election on etcd", tests, etcd_setup, NULL);
        test_etcd_stop(&etcd);
        failed += cmocka_run_group_tests_name("election through sentinel", tests, sentinel_setup,
                                              sentinel_teardown);
    }
    lt_stop(&redis);
    return failed ? 1 : 0;
}
