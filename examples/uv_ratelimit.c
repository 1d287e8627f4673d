/* uv_ratelimit.c: an example of libdlock on a libuv loop. Runs --jobs jobs
 * as fast as a shared rate limit lets them: each job takes one token from
 * the asynchronous limiter "example:jobs" (dlock/async.h; the same GCRA
 * buckets as the blocking dlock_ratelimit, on the Redis server's clock),
 * and a refused job waits on a uv timer for the answer's retry_after_ms
 * and tries again. Several copies of this program against one Redis share
 * the limit.
 *
 *   uv_ratelimit --redis redis://127.0.0.1:6379 [--jobs 10] [--rate 5]
 *                [--period-ms 1000] [--subject batch]
 *
 * Prints one line per job and "SUMMARY jobs=N elapsed_ms=E refusals=R";
 * exits 0 when every job ran, 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <dlock/async.h>
#include <dlock/async_libuv.h>

typedef struct run {
    uv_loop_t *uv;
    dlock_async_client *client;
    dlock_async_ratelimit *rl;
    const char *subject;
    uint64_t t0;
    int jobs, done, refusals, failed;
} run;

typedef struct job {
    run *r;
    int id;
    uv_timer_t retry;
} job;

static void try_job(job *j);

static void on_retry(uv_timer_t *t)
{
    try_job(t->data);
}

static void finish(run *r)
{
    if (r->done + r->failed < r->jobs) return;
    dlock_async_ratelimit_free(r->rl);
    dlock_async_client_free(r->client); /* the loop ends once its handles are closed */
}

static void on_token(dlock_async_ratelimit *rl, int rc, const dlock_ratelimit_result *res, void *ud)
{
    (void)rl;
    job *j = ud;
    run *r = j->r;
    if (rc) {
        fprintf(stderr, "job %d: %s\n", j->id, dlock_strerror(rc));
        r->failed++;
        uv_close((uv_handle_t *)&j->retry, NULL);
        finish(r);
        return;
    }
    if (!res->allowed) {
        r->refusals++;
        uv_timer_start(&j->retry, on_retry, (uint64_t)res->retry_after_ms, 0);
        return;
    }
    printf("job %d ran at +%llu ms (%lld tokens left)\n", j->id, (unsigned long long)(uv_now(r->uv) - r->t0),
           (long long)res->remaining);
    r->done++;
    uv_close((uv_handle_t *)&j->retry, NULL);
    finish(r);
}

static void try_job(job *j)
{
    int rc = dlock_async_ratelimit_try_acquire(j->r->rl, j->r->subject, 1, on_token, j);
    if (rc) on_token(j->r->rl, rc, NULL, j);
}

static int start(run *r, const char *url, int64_t rate, int64_t period_ms)
{
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = url;
    dlock_async_loop loop;
    dlock_async_libuv(&loop, r->uv);
    int rc = dlock_async_client_new(&loop, &o, &r->client);
    dlock_ratelimit_options ro;
    dlock_ratelimit_options_init(&ro);
    ro.rate = rate;
    ro.period_ms = period_ms;
    if (rc == 0) rc = dlock_async_ratelimit_new(r->client, "example:jobs", &ro, &r->rl);
    if (rc) fprintf(stderr, "uv_ratelimit: %s: %s\n", url, dlock_strerror(rc));
    return rc;
}

int main(int argc, char **argv)
{
    const char *url = "redis://127.0.0.1:6379";
    run r = {.jobs = 10, .subject = "batch"};
    int64_t rate = 5, period_ms = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--redis") == 0) url = argv[i + 1];
        else if (strcmp(argv[i], "--jobs") == 0) r.jobs = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rate") == 0) rate = strtoll(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--period-ms") == 0) period_ms = strtoll(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--subject") == 0) r.subject = argv[i + 1];
    }
    if (r.jobs < 1 || r.jobs > 100000) {
        fprintf(stderr, "usage: uv_ratelimit --redis URL [--jobs N] [--rate R] [--period-ms P] [--subject S]\n");
        return 2;
    }
    r.uv = uv_default_loop();
    if (start(&r, url, rate, period_ms)) return 1;
    job *jobs = calloc((size_t)r.jobs, sizeof(*jobs));
    if (!jobs) return 1;
    r.t0 = uv_now(r.uv);
    for (int i = 0; i < r.jobs; i++) {
        jobs[i] = (job){.r = &r, .id = i};
        uv_timer_init(r.uv, &jobs[i].retry);
        jobs[i].retry.data = &jobs[i];
        try_job(&jobs[i]);
    }
    uv_run(r.uv, UV_RUN_DEFAULT);
    uv_update_time(r.uv);
    printf("SUMMARY jobs=%d elapsed_ms=%llu refusals=%d\n", r.done, (unsigned long long)(uv_now(r.uv) - r.t0),
           r.refusals);
    free(jobs);
    uv_loop_close(r.uv);
    return r.done == r.jobs ? 0 : 1;
}
