/* etcd_fixture.c: real etcd members for tests (see etcd_fixture.h).
 * Invariant: every process started here is recorded by PID and only those
 * PIDs are signalled; an atexit hook kills whatever is still running, and
 * PR_SET_PDEATHSIG covers a test killed with -9 where the kernel sends it.
 * Timings are short so failover is quick: a single member uses a 10 ms
 * heartbeat / 100 ms election timeout, a cluster 50 ms / 500 ms. */
#include "etcd_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "servers.h"
#include "util.h"

static pid_t started[16];
static int hooks;

static void kill_started(void)
{
    for (int i = 0; i < 16; i++) {
        if (started[i] > 0) kill(started[i], SIGKILL);
        started[i] = 0;
    }
}

static void note(pid_t pid, bool on)
{
    if (!hooks) {
        hooks = 1;
        atexit(kill_started);
        signal(SIGPIPE, SIG_IGN);
    }
    for (int i = 0; i < 16; i++) {
        if (on && started[i] == 0) {
            started[i] = pid;
            return;
        }
        if (!on && started[i] == pid) {
            started[i] = 0;
            return;
        }
    }
}

static int port_pair(int *client, int *peer)
{
    for (int tries = 0; tries < 50; tries++) {
        *client = test_free_port();
        *peer = test_free_port();
        bool reserved = *client == 2379 || *client == 2380 || *peer == 2379 || *peer == 2380;
        if (*client > 0 && *peer > 0 && *client != *peer && !reserved) return 0;
    }
    return -1;
}

/* The --initial-cluster value for all members. */
static void cluster_spec(const test_etcd *e, char *out, size_t len)
{
    size_t off = 0;
    out[0] = '\0';
    for (int i = 0; i < e->n && off < len; i++)
        off += (size_t)snprintf(out + off, len - off, "%sm%d=http://127.0.0.1:%d", i ? "," : "", i, e->peer_port[i]);
}

static int launch(test_etcd *e, int i)
{
    char name[16], data[300], log[300], curls[64], purls[64], cluster[512], hb[16], el[16];
    snprintf(name, sizeof(name), "m%d", i);
    snprintf(data, sizeof(data), "%s/m%d.etcd", e->dir, i);
    snprintf(log, sizeof(log), "%s/m%d.log", e->dir, i);
    snprintf(curls, sizeof(curls), "%s://127.0.0.1:%d", e->tls ? "https" : "http", e->client_port[i]);
    snprintf(purls, sizeof(purls), "http://127.0.0.1:%d", e->peer_port[i]);
    snprintf(hb, sizeof(hb), "%d", e->n == 1 ? 10 : 50);
    snprintf(el, sizeof(el), "%d", e->n == 1 ? 100 : 500);
    cluster_spec(e, cluster, sizeof(cluster));
    char *argv[] = {"etcd", "--name", name, "--data-dir", data, "--listen-client-urls", curls,
                    "--advertise-client-urls", curls, "--listen-peer-urls", purls,
                    "--initial-advertise-peer-urls", purls, "--initial-cluster", cluster,
                    "--initial-cluster-state", "new", "--initial-cluster-token", e->dir,
                    "--heartbeat-interval", hb, "--election-timeout", el, "--logger", "zap",
                    "--log-level", "warn", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    char ca[400], crt[400], key[400];
    if (e->tls) {
        snprintf(ca, sizeof(ca), "%s/ca.pem", e->certs);
        snprintf(crt, sizeof(crt), "%s/member.pem", e->certs);
        snprintf(key, sizeof(key), "%s/member.key", e->certs);
        char *tls[] = {"--cert-file", crt, "--key-file", key, "--trusted-ca-file", ca, "--client-cert-auth"};
        size_t at = sizeof(argv) / sizeof(argv[0]) - 8;
        for (size_t k = 0; k < 7; k++) argv[at + k] = tls[k];
    }
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    note(pid, true);
    e->pid[i] = pid;
    return 0;
}

/* ---- HTTP ---------------------------------------------------------------------- */

typedef struct sink {
    char *out;
    size_t cap, len;
} sink;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    sink *s = ud;
    size_t len = size * n;
    size_t room = s->cap > s->len + 1 ? s->cap - s->len - 1 : 0;
    size_t take = len < room ? len : room;
    if (take) memcpy(s->out + s->len, p, take);
    s->len += take;
    if (s->cap) s->out[s->len] = '\0';
    return len;
}

int test_etcd_post(const test_etcd *e, int i, const char *path, const char *body, char *out, size_t outlen)
{
    char url[128], ca[400], crt[400], key[400];
    snprintf(url, sizeof(url), "%s://127.0.0.1:%d%s", e->tls ? "https" : "http", e->client_port[i], path);
    char dummy[1];
    sink s = {out ? out : dummy, out ? outlen : sizeof(dummy), 0};
    s.out[0] = '\0';
    CURL *h = curl_easy_init();
    if (!h) return -1;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 3000L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 500L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    if (e->tls) {
        snprintf(ca, sizeof(ca), "%s/ca.pem", e->certs);
        snprintf(crt, sizeof(crt), "%s/member.pem", e->certs);
        snprintf(key, sizeof(key), "%s/member.key", e->certs);
        curl_easy_setopt(h, CURLOPT_CAINFO, ca);
        curl_easy_setopt(h, CURLOPT_SSLCERT, crt);
        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
    }
    long status = -1;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    return (int)status;
}

/* member_id of member i and the leader it reports ("" when none). */
static int member_status(const test_etcd *e, int i, char *id, char *leader)
{
    char out[2048];
    id[0] = leader[0] = '\0';
    if (e->pid[i] <= 0 || test_etcd_post(e, i, "/v3/maintenance/status", "{}", out, sizeof(out)) != 200) return -1;
    const char *m = strstr(out, "\"member_id\":\"");
    const char *l = strstr(out, "\"leader\":\"");
    if (m) sscanf(m + 13, "%31[0-9]", id);
    if (l) sscanf(l + 10, "%31[0-9]", leader);
    return id[0] ? 0 : -1;
}

int test_etcd_leader(const test_etcd *e)
{
    char ids[TEST_ETCD_MAX][32], leader[32] = "";
    for (int i = 0; i < e->n; i++) {
        char l[32];
        if (member_status(e, i, ids[i], l) == 0 && l[0]) snprintf(leader, sizeof(leader), "%s", l);
    }
    for (int i = 0; leader[0] && i < e->n; i++)
        if (e->pid[i] > 0 && strcmp(ids[i], leader) == 0) return i;
    return -1;
}

int test_etcd_wait_leader(const test_etcd *e, int budget_ms)
{
    int64_t deadline = dlock__now_ms() + budget_ms;
    while (dlock__now_ms() < deadline) {
        if (test_etcd_leader(e) >= 0) return 0;
        dlock__sleep_ms(50);
    }
    return -1;
}

/* ---- start / stop ---------------------------------------------------------------- */

/* Waits until every running member answers a read. */
static int wait_up(const test_etcd *e, int64_t budget_ms)
{
    int64_t deadline = dlock__now_ms() + budget_ms;
    for (int i = 0; i < e->n; i++) {
        while (e->pid[i] > 0) {
            int st;
            if (waitpid(e->pid[i], &st, WNOHANG) == e->pid[i]) {
                fprintf(stderr, "etcd fixture: member %d exited (see %s/m%d.log)\n", i, e->dir, i);
                return -1;
            }
            if (test_etcd_post(e, i, "/v3/kv/range", "{\"key\":\"AA==\"}", NULL, 0) == 200) break;
            if (dlock__now_ms() > deadline) {
                fprintf(stderr, "etcd fixture: member %d not answering\n", i);
                return -1;
            }
            dlock__sleep_ms(20);
        }
    }
    return test_etcd_wait_leader(e, (int)(deadline - dlock__now_ms() > 0 ? deadline - dlock__now_ms() : 1));
}

static int make_dir(test_etcd *e)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(e->dir, sizeof(e->dir), "%s/dlock-etcd-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(e->dir)) return 0;
    fprintf(stderr, "etcd fixture: mkdtemp: %s\n", strerror(errno));
    return -1;
}

/* Starts e->n members (dir made, tls set); the URL lists them all. */
static int start_members(test_etcd *e)
{
    size_t off = (size_t)snprintf(e->url, sizeof(e->url), "%s://", e->tls ? "etcds" : "etcd");
    for (int i = 0; i < e->n; i++) {
        if (port_pair(&e->client_port[i], &e->peer_port[i]) != 0) return -1;
        off += (size_t)snprintf(e->url + off, sizeof(e->url) - off, "%s127.0.0.1:%d", i ? "," : "",
                                e->client_port[i]);
    }
    if (e->tls)
        snprintf(e->url + off, sizeof(e->url) - off, "?cacert=%s/ca.pem&cert=%s/member.pem&key=%s/member.key",
                 e->certs, e->certs, e->certs);
    for (int i = 0; i < e->n; i++)
        if (launch(e, i) != 0) return -1;
    if (wait_up(e, 15000) != 0) {
        test_etcd_stop(e);
        return -1;
    }
    return 0;
}

int test_etcd_start(test_etcd *e, int members)
{
    if (members != 1 && members != TEST_ETCD_MAX) return -1;
    /* A port found free can be taken by a parallel test before etcd binds
     * it (the member then exits at once): start again on fresh ports. */
    for (int attempt = 1; attempt <= 3; attempt++) {
        memset(e, 0, sizeof(*e));
        e->n = members;
        if (make_dir(e) != 0) return -1;
        if (start_members(e) == 0) return 0;
        fprintf(stderr, "etcd fixture: start %d of 3 failed; fresh ports\n", attempt);
    }
    return -1;
}

int test_etcd_start_tls(test_etcd *e)
{
    memset(e, 0, sizeof(*e));
    e->n = 1;
    e->tls = true;
    if (make_dir(e) != 0) return -1;
    snprintf(e->certs, sizeof(e->certs), "%s", e->dir);
    char cmd[3000];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && E='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes' &&"
             " openssl req -x509 $E -keyout ca.key -out ca.pem -days 1 -subj /CN=dlock-test-ca &&"
             " openssl req $E -keyout member.key -out member.csr -subj /CN=127.0.0.1 &&"
             " printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ext.cnf &&"
             " openssl x509 -req -in member.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out member.pem"
             " -days 1 -extfile ext.cnf",
             e->certs);
    char full[3400];
    snprintf(full, sizeof(full), "(%s) >'%s/openssl.log' 2>&1", cmd, e->dir);
    if (system(full) != 0) {
        fprintf(stderr, "etcd fixture: openssl failed (see %s/openssl.log)\n", e->dir);
        return -1;
    }
    return start_members(e);
}

int test_etcd_restart(test_etcd *e, int i)
{
    if (e->pid[i] > 0) return 0;
    if (launch(e, i) != 0) return -1;
    int64_t deadline = dlock__now_ms() + 15000;
    while (test_etcd_post(e, i, "/v3/kv/range", "{\"key\":\"AA==\"}", NULL, 0) != 200) {
        if (dlock__now_ms() > deadline) return -1;
        dlock__sleep_ms(20);
    }
    return 0;
}

void test_etcd_kill(test_etcd *e, int i)
{
    if (e->pid[i] <= 0) return;
    kill(e->pid[i], SIGKILL);
    waitpid(e->pid[i], NULL, 0);
    note(e->pid[i], false);
    e->pid[i] = 0;
}

void test_etcd_pause(test_etcd *e, int i, bool paused)
{
    if (e->pid[i] > 0) kill(e->pid[i], paused ? SIGSTOP : SIGCONT);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void test_etcd_stop(test_etcd *e)
{
    for (int i = 0; i < e->n; i++) {
        if (e->pid[i] <= 0) continue;
        kill(e->pid[i], SIGTERM);
        kill(e->pid[i], SIGCONT);
    }
    int64_t deadline = dlock__now_ms() + 5000;
    for (int i = 0; i < e->n; i++) {
        while (e->pid[i] > 0 && waitpid(e->pid[i], NULL, WNOHANG) == 0) {
            if (dlock__now_ms() > deadline) {
                kill(e->pid[i], SIGKILL);
                waitpid(e->pid[i], NULL, 0);
                break;
            }
            dlock__sleep_ms(10);
        }
        if (e->pid[i] > 0) note(e->pid[i], false);
        e->pid[i] = 0;
    }
    if (e->dir[0] && !getenv("DLOCK_TEST_KEEP")) nftw(e->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    e->dir[0] = '\0';
}

int test_etcd_enable_auth(const test_etcd *e, const char *password)
{
    char body[256];
    snprintf(body, sizeof(body), "{\"name\":\"root\",\"password\":\"%s\"}", password);
    if (test_etcd_post(e, 0, "/v3/auth/user/add", body, NULL, 0) != 200) return -1;
    if (test_etcd_post(e, 0, "/v3/auth/role/add", "{\"name\":\"root\"}", NULL, 0) != 200) return -1;
    if (test_etcd_post(e, 0, "/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}", NULL, 0) != 200)
        return -1;
    return test_etcd_post(e, 0, "/v3/auth/enable", "{}", NULL, 0) == 200 ? 0 : -1;
}
