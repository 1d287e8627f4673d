/* evhttp_user_lock.c: an example of libdlock on an event loop. A libevent
 * HTTP server (evhttp) whose requests for one user id never overlap, in
 * this process or in any other running it against the same Redis: each
 * request takes the asynchronous lock "example:user:<id>" (dlock/async.h)
 * with its own owner value, does its work (a timer standing for a slow
 * backend call), then unlocks. The loop never blocks; requests for other
 * users run meanwhile.
 *
 *   evhttp_user_lock --redis redis://127.0.0.1:6379 --port 8080
 *                    [--work-ms 100] [--journal FILE]
 *   curl 'http://127.0.0.1:8080/work?user=42'   -> "user=42 fence=..."
 *   curl 'http://127.0.0.1:8080/quit'           -> stops the server
 *
 * --journal appends "<user> start|end <monotonic ms> <fence>" lines (one
 * write each, O_APPEND), so a test can check that no two holds of a user
 * overlapped across processes. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlock/async.h>
#include <dlock/async_libevent.h>

typedef struct app {
    struct event_base *base;
    dlock_async_client *client;
    int64_t work_ms;
    int journal; /* -1: none */
    unsigned long next_req;
} app;

typedef struct job {
    app *a;
    struct evhttp_request *req;
    dlock_async_lock *lock;
    struct event *work;
    char user[64];
    char owner[64];
} job;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void journal(const job *j, const char *what)
{
    if (j->a->journal < 0) return;
    char line[160];
    int n = snprintf(line, sizeof(line), "%s %s %lld %llu\n", j->user, what, (long long)mono_ms(),
                     (unsigned long long)dlock_async_lock_fence(j->lock));
    if (n > 0 && write(j->a->journal, line, (size_t)n) != n) perror("journal");
}

static void reply(job *j, int code, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "%s\n", text);
    evhttp_send_reply(j->req, code, code == 200 ? "OK" : "Unavailable", b);
    evbuffer_free(b);
}

static void job_free(job *j)
{
    if (j->work) event_free(j->work);
    dlock_async_lock_free(j->lock); /* may be inside its own callback */
    free(j);
}

static void on_unlocked(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    job *j = ud;
    char text[160];
    snprintf(text, sizeof(text), "user=%s fence=%llu%s", j->user,
             (unsigned long long)dlock_async_lock_fence(j->lock), rc ? " (unlock failed)" : "");
    reply(j, 200, text);
    job_free(j);
}

static void on_work_done(evutil_socket_t fd, short what, void *ud)
{
    (void)fd;
    (void)what;
    job *j = ud;
    journal(j, "end");
    int rc = dlock_async_lock_unlock(j->lock, on_unlocked, j);
    if (rc) on_unlocked(j->lock, rc, j);
}

static void on_acquired(dlock_async_lock *l, int rc, void *ud)
{
    (void)l;
    job *j = ud;
    if (rc) {
        char text[160];
        snprintf(text, sizeof(text), "user=%s busy: %s", j->user, dlock_strerror(rc));
        reply(j, 503, text);
        job_free(j);
        return;
    }
    journal(j, "start");
    struct timeval tv = {(time_t)(j->a->work_ms / 1000), (suseconds_t)(j->a->work_ms % 1000) * 1000};
    j->work = evtimer_new(j->a->base, on_work_done, j);
    evtimer_add(j->work, &tv);
}

static void handle_work(app *a, struct evhttp_request *req, const char *user)
{
    job *j = calloc(1, sizeof(*j));
    if (!j) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    j->a = a;
    j->req = req;
    snprintf(j->user, sizeof(j->user), "%s", user);
    /* the owner is this request, not the thread that serves every request */
    snprintf(j->owner, sizeof(j->owner), "pid%ld-req%lu", (long)getpid(), ++a->next_req);
    char name[96];
    snprintf(name, sizeof(name), "example:user:%s", user);
    dlock_async_lock_options lo;
    dlock_async_lock_options_init(&lo);
    lo.owner_id = j->owner;
    int rc = dlock_async_lock_new(a->client, name, &lo, &j->lock);
    if (rc == 0) rc = dlock_async_lock_acquire(j->lock, 10000, 0, on_acquired, j);
    if (rc) on_acquired(j->lock, rc, j);
}

static void on_request(struct evhttp_request *req, void *ud)
{
    app *a = ud;
    const char *uri = evhttp_request_get_uri(req);
    if (strncmp(uri, "/quit", 5) == 0) {
        evhttp_send_reply(req, 200, "OK", NULL);
        struct timeval flush = {0, 100000}; /* lets the answer go out first */
        event_base_loopexit(a->base, &flush);
        return;
    }
    struct evkeyvalq q;
    const char *query = strchr(uri, '?');
    const char *user = NULL;
    if (strncmp(uri, "/work", 5) == 0 && query && evhttp_parse_query_str(query + 1, &q) == 0) {
        user = evhttp_find_header(&q, "user");
        if (user && *user && strlen(user) < 64) handle_work(a, req, user);
        evhttp_clear_headers(&q);
    }
    if (!user) evhttp_send_error(req, 404, "GET /work?user=ID or /quit");
}

static int serve(app *a, const char *url, int port)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = url;
    dlock_async_loop loop;
    dlock_async_libevent(&loop, a->base);
    int rc = dlock_async_client_new(&loop, &o, &a->client);
    if (rc) {
        fprintf(stderr, "evhttp_user_lock: %s: %s\n", url, dlock_strerror(rc));
        return 1;
    }
    struct evhttp *http = evhttp_new(a->base);
    if (!http || evhttp_bind_socket(http, "127.0.0.1", (ev_uint16_t)port) != 0) {
        fprintf(stderr, "evhttp_user_lock: cannot listen on 127.0.0.1:%d\n", port);
        return 1;
    }
    evhttp_set_gencb(http, on_request, a);
    printf("listening on 127.0.0.1:%d\n", port);
    fflush(stdout);
    event_base_dispatch(a->base);
    dlock_async_client_free(a->client); /* pending requests end ECLOSED */
    evhttp_free(http);
    return 0;
}

int main(int argc, char **argv)
{
    app a = {.work_ms = 100, .journal = -1};
    const char *url = "redis://127.0.0.1:6379";
    int port = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--redis") == 0) url = argv[i + 1];
        else if (strcmp(argv[i], "--port") == 0) port = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--work-ms") == 0) a.work_ms = strtoll(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--journal") == 0)
            a.journal = open(argv[i + 1], O_WRONLY | O_CREAT | O_APPEND, 0644);
    }
    if (port <= 0 || port > 65535 || a.work_ms < 0) {
        fprintf(stderr, "usage: evhttp_user_lock --redis URL --port PORT [--work-ms MS] [--journal FILE]\n");
        return 2;
    }
    a.base = event_base_new();
    int rc = a.base ? serve(&a, url, port) : 1;
    if (a.base) event_base_free(a.base);
    if (a.journal >= 0) close(a.journal);
    return rc;
}
