/* torture.h: `dlock torture`, the lock nemesis and its history checker as a
 * command users run against their own deployment (torture.c: options, the
 * run and the nemesis; torture_store.c: the fenced counter and the keys;
 * torture_worker.c: one worker process; torture_check.c: the verdict).
 * Invariant: every key it creates starts with --prefix (torture_keys), and
 * the only processes it signals are the workers it forked.
 */
#ifndef DLOCK_TOOLS_TORTURE_H
#define DLOCK_TOOLS_TORTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "redis_io.h"

/* Exit codes of `dlock torture` besides the shared ones of cli.h (64 usage,
 * 69 unreachable, 70 server or internal error, 71 OS error, 77 credentials,
 * 78 bad URL, 128+N interrupted). Chosen apart from dlock's own 1 and 75. */
enum {
    TORTURE_EXIT_SAFE = 0,         /* no violation, and the run exercised the lock */
    TORTURE_EXIT_UNSAFE = 2,       /* overlap, lost update or token order violated */
    TORTURE_EXIT_INCONCLUSIVE = 3, /* no violation seen, but the run proves nothing */
    TORTURE_EXIT_PREFIX_IN_USE = 4 /* --prefix already has keys (without --force) */
};

#define TORTURE_MAX_WORKERS 64

typedef struct torture_opts {
    const char *url;       /* the lock's deployment */
    const char *store_url; /* where the fenced counter lives (default: url) */
    const char *prefix;    /* required, non-empty */
    const char *history;   /* --history FILE, or NULL */
    int workers;
    int64_t duration_ms, lease_ms, pause_ms, pause_every_ms;
    bool no_fence, json, force, verbose, help;
} torture_opts;

/* One holding of the lock by a worker, as the worker saw it. */
typedef enum torture_outcome {
    TORTURE_WRITE_ACCEPTED = 0,
    TORTURE_READ_REFUSED = 1,
    TORTURE_WRITE_REFUSED = 2,
    TORTURE_STORE_ERROR = 3,
} torture_outcome;

typedef struct torture_hold {
    int worker;
    uint64_t token;
    /* monotonic clock, shared by the processes of one host: the acquire was
     * asked for at try_us, returned at acq_us; released at rel_us */
    int64_t try_us, acq_us, rel_us;
    int outcome;            /* torture_outcome */
} torture_hold;

typedef struct torture_pause {
    int worker;
    int64_t from_us, to_us;
} torture_pause;

/* Memory shared by the torture process and its workers (MAP_SHARED). */
typedef struct torture_shared {
    volatile int holding[TORTURE_MAX_WORKERS]; /* 1 while worker i holds the lock */
    volatile int stop;
    int n_holds;                 /* atomically incremented; may pass cap */
    int lost_callbacks;          /* atomically incremented */
    char worker_err[TORTURE_MAX_WORKERS][160];
    size_t cap;                  /* room in holds[] */
    torture_hold holds[];
} torture_shared;

/* The keys of a run, each prefix + "{torture}:...": one hash tag, so one
 * Cluster slot, whatever the prefix; fence is the library's fence key of
 * lock (the lock key carries a hash tag, so it is lock + ":fence"). */
typedef struct torture_keys {
    char lock_name[16]; /* the lock's name, without the prefix */
    char lock[600], fence[600], counter[600], highest[600], accepted[600];
} torture_keys;

/* Fills k for prefix. 0, or -1 with err filled when a key would not start
 * with the prefix (a prefix whose "{}" leaves the lock key untagged). */
int torture_keys_make(const char *prefix, torture_keys *k, char *err, size_t errlen);

/* ---- torture_store.c: the fenced counter -------------------------------- */

/* Opens a connection to url (standalone, unix or sentinel). 0, or an exit
 * code after printing why. */
int torture_store_open(const char *url, dlock__conn **c_out);
/* One operation of fenced_store.lua: 1 accepted (a read's value in
 * *value), 0 refused (token lower than one seen), -1 error. fenced false:
 * the storage accepts every token (records it for the checker only). */
int torture_store_op(dlock__conn *c, const torture_keys *k, bool write, uint64_t token, bool fenced,
                     long long *value);
/* Whether any key starts with prefix (SCAN MATCH, glob characters escaped):
 * 0 none, 1 some (one name in example), or an exit code after printing. */
int torture_prefix_used(dlock__conn *c, const char *prefix, char *example, size_t exlen);
/* Deletes the run's keys (and nothing else). 0 or an exit code. */
int torture_store_clean(dlock__conn *c, const torture_keys *k);

/* What the storage holds at the end. */
typedef struct torture_store_state {
    long long counter;
    size_t n_accepted;   /* writes the storage accepted */
    size_t out_of_order; /* accepted tokens not above the previous one */
} torture_store_state;
int torture_store_read(dlock__conn *c, const torture_keys *k, torture_store_state *st);

/* ---- torture_worker.c ----------------------------------------------------- */

/* Body of worker w (in the forked child): take the lock, read the counter,
 * linger, write it + 1, release; until sh->stop. Returns the child's exit
 * status (0, or non-zero with sh->worker_err[w] filled). */
int torture_worker_main(const torture_opts *o, const torture_keys *k, torture_shared *sh, int w);

/* ---- torture_check.c: the verdict ------------------------------------------ */

typedef struct torture_verdict {
    int code; /* TORTURE_EXIT_* */
    size_t holds, pauses, accepted_events, refused_reads, refused_writes, store_errors;
    int lost_callbacks, failed_workers;
    long long lost_updates; /* accepted writes - counter */
    size_t overlaps;        /* pairs of unpaused holdings that overlap */
    bool truncated;         /* more holdings than the history had room for */
    torture_store_state store;
    char reasons[4][200];
    int n_reasons;
} torture_verdict;

/* Sorts the holdings by acquisition and judges the run. */
void torture_judge(const torture_opts *o, torture_shared *sh, const torture_pause *p, size_t np,
                   const torture_store_state *st, int failed_workers, torture_verdict *v);
/* Writes the history (one line a holding, one a pause) to path. 0 or -1. */
int torture_write_history(const char *path, const torture_opts *o, const torture_shared *sh,
                          const torture_pause *p, size_t np);
/* Prints the verdict as text or (o->json) one JSON object on stdout. */
void torture_print(FILE *f, const torture_opts *o, const torture_keys *k, const torture_verdict *v);

/* ---- torture.c -------------------------------------------------------------- */

/* `dlock torture ARGS`: argv[0] is "torture". Returns the exit code. */
int cli_cmd_torture(int argc, char **argv);

#endif
