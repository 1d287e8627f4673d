/* httpload.h: an event-driven HTTP/1.1 load engine: N keep-alive
 * connections spread over several targets, closed-loop (each connection
 * keeps one request in flight) or open-loop (requests start on a fixed
 * schedule; latency counts from the scheduled time, so a slow server cannot
 * hide queueing). Requests come from a caller-supplied generator; every
 * response goes back to the caller. Single-threaded (one libevent loop). */
#ifndef SECKILL_BENCH_HTTPLOAD_H
#define SECKILL_BENCH_HTTPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "histogram.h"

typedef struct hl_target {
    char host[128];
    int port;
} hl_target;

/* One request: raw bytes of the request line + headers + body, built by
 * the generator (it must include Host and Content-Length where needed). */
typedef struct hl_request {
    char *bytes;
    size_t len;
    void *tag; /* returned in the response callback */
} hl_request;

/* Next request into *req (bytes malloc'ed, freed by the engine). Returns 1
 * when a request was produced, 0 when the workload is finished. */
typedef int (*hl_next_fn)(void *ud, hl_request *req);
/* status = HTTP status, or 0 when the request got no complete answer: the
 * connection failed (reset, closed) or the request timed out after it was
 * written, or (at the end of a run) it was still queued, never written. */
typedef void (*hl_done_fn)(void *ud, void *tag, int status, const char *body, size_t body_len,
                           uint64_t latency_us);

typedef struct hl_options {
    hl_target *targets;
    size_t n_targets;
    int connections;     /* concurrent keep-alive connections */
    double rate;         /* requests/s for open loop; 0 = closed loop */
    double duration_s;   /* stop issuing after this long; 0 = until next() ends */
    double warmup_s;     /* responses in the first warmup_s are not recorded */
    double progress_s;   /* progress callback interval; 0 = none */
    int retries;         /* resend a request whose connection failed or that was
                            answered 503 (or what resend() asks), up to this many times, on any
                            connection (clients retrying on another instance),
                            after a backoff: 50 ms doubling to 2 s, each drawn
                            at random in [half, full] (jitter), at least the
                            answer's Retry-After (at most 1 s, plus up to a
                            quarter more); 0 = report the failure at once */
    double timeout_s;    /* a request with no complete answer this long after it
                            was written: the connection is dropped, as on a
                            reset (status 0 to resend(), then done()); 0 = none */
    void (*progress)(void *ud, double elapsed_s);
    /* Optional: called for every answer before done(); returning 1 resends
     * the request (while retries remain) instead of finishing it, so the
     * caller may note an interim answer (a 202 it wants to see become
     * 201). NULL: resend on 503 only. A Retry-After of the answer stretches
     * the backoff (at most 1 s). Also asked, with status 0, when the
     * connection failed with the request in flight (0: report it). */
    int (*resend)(void *ud, void *tag, int status, const char *body, size_t body_len);
    hl_next_fn next;
    hl_done_fn done;
    void *ud;
} hl_options;

typedef struct hl_result {
    uint64_t sent, completed, failed; /* failed: connection errors (after retries) */
    uint64_t retried;                 /* resends after a connection failure or a 503 */
    double elapsed_s;                 /* measured part (after warm-up) */
    dlock__hist latency;              /* measured responses only */
} hl_result;

/* Runs the workload to completion: after next() ends, until every request
 * is answered or given up, or no answer came for 15 s; or until no target
 * has been reachable for 5 s (the rest are reported with status 0). 0, or -1 when no target accepted a connection
 * (message on stderr). */
int hl_run(const hl_options *opts, hl_result *out);

#endif
