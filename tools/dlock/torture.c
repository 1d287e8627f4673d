/* torture.c: `dlock torture`, checking a deployment the way the fault suite
 * checks the library: --workers processes take one lock under --prefix and
 * increment a fenced counter; this process, the nemesis, SIGSTOPs the
 * current holder for --pause (past the lease by default) every
 * --pause-every, then SIGCONTs it; at the end torture_check.c judges the
 * history and the keys are deleted.
 *
 * Keys: only prefix + "{torture}:lock", its fence key "...:lock:fence",
 * "...:counter", "...:highest", "...:accepted" (torture_keys_make), on the
 * lock's deployment and on --store-url. Without --force a prefix under which
 * any key exists is refused before anything is written; with --force the
 * run's own keys are deleted first and nobody else's are touched.
 * Processes: only the workers forked here are ever signalled, by PID.
 * Interrupted (INT, TERM, HUP): workers stopped, keys deleted, exit 128+N.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "etcd_url.h"
#include "options.h"
#include "torture.h"
#include "util.h"

#define OFF(f) offsetof(torture_opts, f)
#define DUR(n, f, lo_ms, a, h) \
    {.name = n, .type = OPT_DURATION, .off = OFF(f), .lo = lo_ms, .hi = OPT_MAX_MS, .unit = OPT_UNIT_S, .arg = a, .help = h}

static const opt_spec specs[] = {
    {.name = "url", .short_name = 'u', .type = OPT_STR, .off = OFF(url), .arg = "URL",
     .help = "the deployment to check (default $DLOCK_URL, else " CLI_DEFAULT_URL ")"},
    {.name = "prefix", .type = OPT_STR, .off = OFF(prefix), .arg = "P",
     .help = "required: every key of the run starts with P"},
    {.name = "store-url", .type = OPT_STR, .off = OFF(store_url), .arg = "URL",
     .help = "Redis holding the fenced counter (default: --url; required\nwhen --url is etcd)"},
    {.name = "workers", .type = OPT_INT, .off = OFF(workers), .lo = 2, .hi = TORTURE_MAX_WORKERS, .arg = "N",
     .def = "3", .help = "worker processes on the lock (default 3)"},
    DUR("duration", duration_ms, 1000, "DUR", "how long the nemesis runs (default 30s)"),
    DUR("lease", lease_ms, 300, "DUR", "the workers' watchdog lease (default 1s, at least 300ms)"),
    DUR("pause", pause_ms, 1, "DUR", "how long a holder is stopped (default 2.5 leases)"),
    DUR("pause-every", pause_every_ms, 10, "DUR", "time between pauses, +-30% (default 1s)"),
    {.name = "no-fence", .type = OPT_FLAG, .off = OFF(no_fence),
     .help = "the storage ignores fencing tokens (unsafe: with --pause\nabove --lease, updates get lost)"},
    {.name = "history", .type = OPT_STR, .off = OFF(history), .arg = "FILE",
     .help = "write every holding and pause to FILE"},
    {.name = "json", .type = OPT_FLAG, .off = OFF(json), .help = "print the verdict as one JSON object"},
    {.name = "force", .type = OPT_FLAG, .off = OFF(force),
     .help = "run although keys exist under P (only the run's own are\ndeleted)"},
    {.name = "verbose", .short_name = 'v', .type = OPT_FLAG, .off = OFF(verbose), .help = "show the library's log"},
    {.name = "help", .short_name = 'h', .type = OPT_FLAG, .off = OFF(help), .help = "show this help"},
};

static void usage(FILE *f)
{
    fputs("Usage: dlock torture --prefix P [--url URL] [options]\n"
          "\n"
          "Check a lock deployment: N worker processes take one lock under P and\n"
          "increment a fenced counter while this process pauses the holder (SIGSTOP)\n"
          "past its lease; then a verdict on overlaps of unpaused holders, lost\n"
          "updates and token order. Touches only keys starting with P, and deletes them.\n"
          "\n"
          "Options:\n",
          f);
    opt_print_help(f, specs, OPT_COUNT(specs));
    fputs("\nDUR is a duration: 250ms, 1.5s, 30s, 2m; a bare number is seconds\n"
          "(deprecated: give a unit).\n"
          "\n"
          "Exit codes: 0 SAFE; 2 UNSAFE (a violation was found); 3 INCONCLUSIVE\n"
          "(the run proved nothing); 4 keys exist under P (see --force); 64 usage;\n"
          "69 unreachable; 70 server or internal error; 71 OS error; 77 credentials;\n"
          "78 bad URL; 128+N interrupted by signal N. See dlock(1).\n",
          f);
}

static int usage_error(const char *msg)
{
    cli_err("torture: %s", msg);
    fputs("Try 'dlock torture --help' for more information.\n", stderr);
    return CLI_EXIT_USAGE;
}

static int parse(int argc, char **argv, torture_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->duration_ms = 30000;
    o->lease_ms = 1000;
    o->pause_every_ms = 1000;
    const char *env = getenv("DLOCK_URL");
    o->url = env && *env ? env : CLI_DEFAULT_URL; /* as in every dlock command */
    char err[512];
    if (opt_load(specs, OPT_COUNT(specs), argc, argv, o, NULL, err, sizeof(err)) != 0) return usage_error(err);
    if (o->help) return 0;
    if (!o->prefix || !*o->prefix)
        return usage_error("--prefix is required: every key of the run starts with it (e.g. --prefix torture:)");
    if (!o->url || !*o->url) return usage_error("--url must not be empty");
    if (!o->store_url && dlock__etcd_url_is(o->url))
        return usage_error("--url is etcd: give --store-url redis://... for the fenced counter "
                           "(a Redis script; etcd holds only the lock)");
    if (!o->store_url) o->store_url = o->url;
    if (dlock__etcd_url_is(o->store_url))
        return usage_error("--store-url must name a Redis (the fenced counter is a Redis script)");
    if (o->pause_ms == 0) o->pause_ms = o->lease_ms * 5 / 2;
    return 0;
}

/* ---- the run ------------------------------------------------------------ */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Sleeps ms in short slices; false when interrupted meanwhile. */
static bool nap(int64_t ms)
{
    int64_t end = dlock__now_ms() + ms;
    for (int64_t left = ms; left > 0 && !interrupted; left = end - dlock__now_ms())
        dlock__sleep_ms(left < 10 ? left : 10);
    return !interrupted;
}

typedef struct run {
    const torture_opts *o;
    torture_keys k;
    torture_shared *sh;
    size_t sh_len;
    pid_t pids[TORTURE_MAX_WORKERS];
    int n_pids;
    torture_pause *pauses;
    size_t np, max_pauses;
} run;

static int setup_shared(run *r)
{
    /* room for ~200 holdings a second of a run, plus slack */
    size_t cap = (size_t)(r->o->duration_ms / 1000) * 200 + 1000;
    if (cap > 1000000) cap = 1000000;
    r->sh_len = sizeof(torture_shared) + cap * sizeof(torture_hold);
    r->sh = mmap(NULL, r->sh_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    r->max_pauses = (size_t)(r->o->duration_ms / r->o->pause_every_ms) * 2 + 16;
    r->pauses = calloc(r->max_pauses, sizeof(torture_pause));
    if (r->sh == MAP_FAILED || !r->pauses) {
        cli_err("torture: out of memory");
        return CLI_EXIT_OSERR;
    }
    memset(r->sh, 0, sizeof(torture_shared));
    r->sh->cap = cap;
    return 0;
}

static int spawn_workers(run *r)
{
    for (int i = 0; i < r->o->workers; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            cli_err("torture: fork: cannot start worker %d", i);
            return CLI_EXIT_OSERR;
        }
        if (pid == 0) _exit(torture_worker_main(r->o, &r->k, r->sh, i));
        r->pids[r->n_pids++] = pid;
    }
    return 0;
}

/* The holder to pause, or -1 if nobody holds the lock within 200 ms. */
static int pick_victim(const run *r)
{
    for (int tries = 0; tries < 200 && !interrupted; tries++) {
        for (int i = 0; i < r->n_pids; i++)
            if (r->sh->holding[i]) return i;
        dlock__sleep_ms(1);
    }
    return -1;
}

static void nemesis(run *r)
{
    int64_t end = dlock__now_ms() + r->o->duration_ms;
    int64_t every = r->o->pause_every_ms;
    while (dlock__now_ms() < end && r->np < r->max_pauses) {
        if (!nap(every * 7 / 10 + (int64_t)dlock__random_below((uint64_t)every * 6 / 10 + 1))) return;
        int victim = pick_victim(r);
        if (victim < 0) continue;
        pid_t pid = r->pids[victim];
        if (pid <= 0) continue; /* never kill(0) or kill(-1) */
        torture_pause *p = &r->pauses[r->np++];
        p->worker = victim;
        p->from_us = dlock__now_us();
        kill(pid, SIGSTOP);
        nap(r->o->pause_ms);
        kill(pid, SIGCONT);
        p->to_us = dlock__now_us();
    }
}

/* Stops the workers and reaps them; returns how many failed. */
static int stop_workers(run *r)
{
    r->sh->stop = 1;
    int failed = 0;
    for (int i = 0; i < r->n_pids; i++) {
        kill(r->pids[i], SIGCONT);
        int st = 0;
        if (waitpid(r->pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            cli_err("torture: worker %d failed%s%s", i, r->sh->worker_err[i][0] ? ": " : "", r->sh->worker_err[i]);
            failed++;
        }
    }
    r->n_pids = 0;
    return failed;
}

/* Refuses a used prefix (without --force) on conn; 0 or an exit code. */
static int check_prefix(const run *r, dlock__conn *c, const char *which)
{
    char example[600] = "";
    int used = torture_prefix_used(c, r->o->prefix, example, sizeof(example));
    if (used != 1) return used;
    if (r->o->force) return torture_store_clean(c, &r->k);
    cli_err("torture: keys exist under prefix '%s' on %s (e.g. '%s'): choose an unused prefix, "
            "or --force to run beside them", r->o->prefix, which, example);
    return TORTURE_EXIT_PREFIX_IN_USE;
}

/* Connects to the lock's deployment and the storage, checks the prefix
 * on both. 0 or an exit code; *lock_c and *store_c (maybe the same). */
static int open_both(const run *r, dlock__conn **lock_c, dlock__conn **store_c)
{
    if (dlock__etcd_url_is(r->o->url)) { /* the lock's keys end with their leases */
        *lock_c = NULL;
        int code = torture_store_open(r->o->store_url, store_c);
        return code != 0 ? code : check_prefix(r, *store_c, "--store-url");
    }
    int code = torture_store_open(r->o->url, lock_c);
    if (code == 0) code = check_prefix(r, *lock_c, "the lock's deployment");
    if (code != 0) return code;
    if (strcmp(r->o->store_url, r->o->url) == 0) {
        *store_c = *lock_c;
        return 0;
    }
    code = torture_store_open(r->o->store_url, store_c);
    return code != 0 ? code : check_prefix(r, *store_c, "--store-url");
}

/* Judges, prints, writes the history. The verdict's exit code. */
static int conclude(run *r, dlock__conn *store, int failed)
{
    torture_store_state st;
    int code = torture_store_read(store, &r->k, &st);
    if (code != 0) return code;
    torture_verdict v;
    torture_judge(r->o, r->sh, r->pauses, r->np, &st, failed, &v);
    if (r->o->history && torture_write_history(r->o->history, r->o, r->sh, r->pauses, r->np) != 0) {
        cli_err("torture: cannot write the history to '%s'", r->o->history);
        if (v.code == TORTURE_EXIT_SAFE) v.code = CLI_EXIT_OSERR;
    }
    torture_print(stdout, r->o, &r->k, &v);
    fflush(stdout);
    return v.code;
}

static int torture_run(run *r)
{
    dlock__conn *lock_c = NULL, *store_c = NULL;
    int code = open_both(r, &lock_c, &store_c);
    if (code == 0) code = setup_shared(r);
    if (code == 0) {
        catch_signals();
        code = spawn_workers(r);
        if (code == 0) nemesis(r);
        int failed = stop_workers(r);
        if (code == 0 && interrupted) code = 128 + interrupted;
        if (code == 0) code = conclude(r, store_c, failed);
        int clean = torture_store_clean(store_c, &r->k);
        if (clean == 0 && lock_c && lock_c != store_c) clean = torture_store_clean(lock_c, &r->k);
        if (code == 0) code = clean;
        if (interrupted) cli_err("torture: interrupted by signal %d; keys deleted", (int)interrupted);
    }
    if (store_c != lock_c) dlock__conn_close(store_c);
    dlock__conn_close(lock_c);
    return code;
}

int cli_cmd_torture(int argc, char **argv)
{
    torture_opts o;
    int code = parse(argc, argv, &o);
    if (code != 0) return code;
    if (o.help) {
        usage(stdout);
        return 0;
    }
    run r = {.o = &o};
    char err[512];
    if (torture_keys_make(o.prefix, &r.k, err, sizeof(err)) != 0) return usage_error(err);
    code = torture_run(&r);
    if (r.sh && r.sh != MAP_FAILED) munmap(r.sh, r.sh_len);
    free(r.pauses);
    return code;
}
