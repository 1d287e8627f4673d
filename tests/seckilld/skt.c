/* skt.c: see skt.h. Daemons are children of the test (PR_SET_PDEATHSIG),
 * stopped by the PID that was started. */
#include "skt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "servers.h"
#include "util.h"

int skt_daemon_start(skt_daemon *d, const char *redis_url, const char *const *extra)
{
    const char *bdir = getenv("DLOCK_BUILD_DIR");
    char bin[512];
    snprintf(bin, sizeof(bin), "%s/tools/seckilld/seckilld", bdir ? bdir : ".");
    for (int attempt = 0; attempt < 3; attempt++) {
        d->port = test_free_port();
        snprintf(d->log, sizeof(d->log), "/tmp/seckilld-test-%d-%d.log", (int)getpid(), d->port);
        char port[16];
        snprintf(port, sizeof(port), "%d", d->port);
        const char *argv[64] = {bin, "--bind", "127.0.0.1", "--port", port, "--redis-url", redis_url};
        int n = 7;
        for (int i = 0; extra && extra[i] && n < 62; i++) argv[n++] = extra[i];
        argv[n] = NULL;
        pid_t pid = fork();
        if (pid < 0) return -1;
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
            }
            execv(bin, (char *const *)argv);
            _exit(127);
        }
        d->pid = pid;
        int64_t deadline = dlock__now_ms() + 5000;
        while (dlock__now_ms() < deadline) {
            char body[256];
            if (skt_http(d->port, "GET", "/healthz", NULL, NULL, 0, body, sizeof(body)) == 200) return 0;
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid) break; /* died (port taken?) */
            dlock__sleep_ms(30);
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "skt: seckilld on %d did not become healthy (log %s)\n", d->port, d->log);
    }
    return -1;
}

void skt_daemon_print_log(const skt_daemon *d)
{
    FILE *f = fopen(d->log, "r");
    if (!f) return;
    fprintf(stderr, "--- %s\n", d->log);
    char line[1024];
    while (fgets(line, sizeof(line), f)) fputs(line, stderr);
    fclose(f);
}

int skt_daemon_stop(skt_daemon *d)
{
    if (d->pid <= 0) return -1;
    kill(d->pid, SIGTERM);
    int st = 0;
    for (int i = 0; i < 1000; i++) {
        pid_t p = waitpid(d->pid, &st, WNOHANG);
        if (p == d->pid) {
            d->pid = 0;
            int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            if (code == 0 && !getenv("SKT_KEEP_LOGS")) unlink(d->log);
            else fprintf(stderr, "skt: seckilld exited with %d; its log: %s\n", code, d->log);
            return code;
        }
        dlock__sleep_ms(10);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return -1;
}

static char last_raw[16384];
const char *skt_last_response(void) { return last_raw; }

int skt_http(int port, const char *method, const char *path, const char *headers,
             const char *body, size_t body_len, char *body_out, size_t cap)
{
    if (body_out && cap) body_out[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return 0;
    }
    dlock__buf req = {0};
    dlock__buf_printf(&req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s", method, path,
                      headers ? headers : "");
    if (body) dlock__buf_printf(&req, "Content-Length: %zu\r\n", body_len);
    dlock__buf_append(&req, "\r\n", 2);
    if (body) dlock__buf_append(&req, body, body_len);
    size_t off = 0;
    while (off < req.len) {
        ssize_t w = send(fd, req.data + off, req.len - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    dlock__buf_free(&req);
    dlock__buf resp = {0};
    char chunk[4096];
    int64_t deadline = dlock__now_ms() + 5000;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - dlock__now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
        ssize_t r = recv(fd, chunk, sizeof(chunk), 0);
        if (r <= 0) break;
        dlock__buf_append(&resp, chunk, (size_t)r);
    }
    close(fd);
    int status = 0;
    snprintf(last_raw, sizeof(last_raw), "%s", resp.data ? resp.data : "");
    if (resp.data && sscanf(resp.data, "HTTP/1.%*d %d", &status) != 1) status = 0;
    if (resp.data && body_out && cap) {
        const char *b = strstr(resp.data, "\r\n\r\n");
        if (b) snprintf(body_out, cap, "%s", b + 4);
        else status = 0;
    }
    dlock__buf_free(&resp);
    return status;
}

typedef struct run_state {
    struct event_base *base;
    size_t left;
} run_state;

typedef struct one {
    skt_req *r;
    run_state *rs;
    struct evhttp_connection *conn;
} one;

static void on_done(struct evhttp_request *req, void *arg)
{
    one *o = arg;
    if (req) {
        o->r->status = evhttp_request_get_response_code(req);
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t n = evbuffer_get_length(in);
        if (n >= sizeof(o->r->resp)) n = sizeof(o->r->resp) - 1;
        evbuffer_copyout(in, o->r->resp, n);
        o->r->resp[n] = '\0';
    }
    if (--o->rs->left == 0) event_base_loopexit(o->rs->base, NULL);
}

int skt_run_concurrent(skt_req *reqs, size_t n, int timeout_ms)
{
    run_state rs = {.base = event_base_new(), .left = n};
    one *ones = calloc(n, sizeof(one));
    if (!rs.base || !ones) return -1;
    for (size_t i = 0; i < n; i++) {
        skt_req *r = &reqs[i];
        r->status = 0;
        r->resp[0] = '\0';
        ones[i] = (one){.r = r, .rs = &rs};
        ones[i].conn = evhttp_connection_base_new(rs.base, NULL, "127.0.0.1", (unsigned short)r->port);
        evhttp_connection_set_timeout(ones[i].conn, (timeout_ms + 999) / 1000);
        struct evhttp_request *req = evhttp_request_new(on_done, &ones[i]);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Host", "127.0.0.1");
        char hdrs[512];
        snprintf(hdrs, sizeof(hdrs), "%s", r->headers);
        for (char *line = hdrs; *line;) {
            char *end = strstr(line, "\r\n");
            if (!end) break;
            *end = '\0';
            char *colon = strchr(line, ':');
            if (colon) {
                *colon = '\0';
                evhttp_add_header(h, line, colon + 1 + (colon[1] == ' '));
            }
            line = end + 2;
        }
        if (r->body[0]) evbuffer_add(evhttp_request_get_output_buffer(req), r->body, strlen(r->body));
        evhttp_make_request(ones[i].conn, req,
                            strcmp(r->method, "GET") == 0 ? EVHTTP_REQ_GET : EVHTTP_REQ_POST, r->path);
    }
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    event_base_loopexit(rs.base, &tv);
    event_base_dispatch(rs.base);
    int rc = rs.left == 0 ? 0 : -1;
    for (size_t i = 0; i < n; i++) evhttp_connection_free(ones[i].conn);
    free(ones);
    event_base_free(rs.base);
    return rc;
}

bool skt_json_str(const char *json, const char *key, char *out, size_t cap)
{
    char pat[80];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p) return false;
    p += strlen(pat);
    size_t n;
    if (*p == '"') {
        p++;
        n = strcspn(p, "\"");
    } else {
        n = strcspn(p, ",}");
    }
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}
