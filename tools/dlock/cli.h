/* cli.h: the dlock program's shared declarations: parsed options, the
 * documented exit codes (kept in step with dlock.1 and docs/cli.md) and the
 * entry points of its parts (options.c, child.c, locking.c, admin.c).
 * Invariant: every path out of the program maps to exactly one code below.
 */
#ifndef DLOCK_TOOLS_CLI_H
#define DLOCK_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit codes. COMMAND's own status passes through unchanged (128+N when
 * it died of signal N); these are the codes dlock itself uses. They follow
 * sysexits(3) so they rarely collide with a job's own codes. */
enum {
    CLI_EXIT_CONFLICT = 1,     /* default for -n / -w giving up (-E changes it) */
    CLI_EXIT_USAGE = 64,       /* bad option or argument */
    CLI_EXIT_UNAVAILABLE = 69, /* Redis unreachable, timed out, outcome unknown */
    CLI_EXIT_SOFTWARE = 70,    /* unexpected server reply or internal error */
    CLI_EXIT_OSERR = 71,       /* fork/pipe/signal set-up failed */
    CLI_EXIT_LOST = 75,        /* the lock was lost while COMMAND ran */
    CLI_EXIT_NOPERM = 77,      /* Redis refused AUTH */
    CLI_EXIT_CONFIG = 78,      /* malformed --url / DLOCK_URL */
    CLI_EXIT_NOEXEC = 126,     /* COMMAND found but could not be executed */
    CLI_EXIT_NOTFOUND = 127,   /* COMMAND not found */
};

typedef enum cli_mode {
    CLI_MODE_RUN = 0, /* dlock [options] NAME -- COMMAND... */
    CLI_MODE_STATUS,  /* dlock status NAME */
    CLI_MODE_RELEASE, /* dlock release --force NAME */
    CLI_MODE_LEADER,  /* dlock leader [--watch] NAME */
    CLI_MODE_HELP,
    CLI_MODE_VERSION,
} cli_mode;

typedef enum cli_kind {
    CLI_KIND_SIMPLE = 0, /* SET NX PX token: redis-py Lock / node redlock layout */
    CLI_KIND_REENTRANT,  /* Redisson hash layout */
    CLI_KIND_FAIR,
    CLI_KIND_READ,
    CLI_KIND_WRITE,
    CLI_KIND_SEMAPHORE,
} cli_kind;

typedef enum cli_on_lost {
    CLI_ON_LOST_TERM = 0, /* SIGTERM, SIGKILL after the grace period */
    CLI_ON_LOST_KILL,     /* SIGKILL at once */
    CLI_ON_LOST_IGNORE,   /* warn only; COMMAND runs on */
} cli_on_lost;

typedef struct cli_options {
    cli_mode mode;
    cli_kind kind;
    int64_t wait_ms;        /* -1: wait forever (default); 0: -n */
    int conflict_code;      /* -E */
    int64_t lease_ms;       /* --lease; 0: watchdog mode */
    int64_t watchdog_ms;    /* --watchdog-lease; 0: library default */
    int64_t kill_grace_ms;  /* --kill-grace; fitted under the lease (cli_parse) */
    int wait_replicas;      /* --wait-replicas; 0: off (Redis only) */
    cli_on_lost on_lost;
    const char *url;        /* --url, else $DLOCK_URL, else the default */
    const char *prefix;     /* --prefix */
    const char *name;       /* NAME */
    int permits;            /* --semaphore N */
    bool verbose;
    bool json;              /* status --json */
    bool force;             /* release --force */
    bool watch;             /* leader --watch */
    bool standby;           /* --standby: warm standby of the election NAME */
    const char *label;      /* --label; NULL: cli_label's default */
    bool help, version;     /* --help, --version (--help wins) */
    const char *shell_cmd;  /* -c STRING: run via /bin/sh -c */
    char **cmd;             /* COMMAND [ARGS...], NULL-terminated (points into argv) */
} cli_options;

#define CLI_DEFAULT_URL "redis://127.0.0.1:6379"
/* Every scheme --url takes, for messages. */
#define CLI_URL_SCHEMES "redis://, unix://, redis-sentinel://, redis-cluster://, etcd:// or etcds://"
#define CLI_DEFAULT_LEASE_MS 30000      /* the library's watchdog lease */
#define CLI_DEFAULT_KILL_GRACE_MS 10000

/* The lease COMMAND runs under: --lease, else --watchdog-lease, else 30 s. */
int64_t cli_lease_ms(const cli_options *o);
/* How long before the lock's validity deadline COMMAND must already be
 * gone: SIGKILL lands at deadline - margin, SIGTERM kill-grace before that.
 * A twentieth of the lease, within 100 ms..1 s: time for SIGKILL to be
 * delivered and COMMAND reaped on a loaded machine. */
int64_t cli_kill_margin_ms(int64_t lease_ms);
/* The longest --kill-grace that fits under the lease, or 0: with
 * renewals (watchdog mode), a third of the lease less the margin; a
 * healthy watchdog renews a third of the lease after its last send, so
 * validity stays near two thirds and SIGTERM (at grace + margin) keeps a
 * third of the lease of slack for a slow renewal. With a fixed --lease,
 * half the lease less the margin. */
int64_t cli_kill_grace_max_ms(int64_t lease_ms, bool renewed);

/* The holder label: --label, else "host:pid:command" (command: COMMAND's
 * first word, "sh" for -c, the subcommand otherwise), cut to fit the
 * library's maximum and with control characters replaced by '?'. */
const char *cli_label(const cli_options *o);

/* options.c */
/* Parses argv into *o. Returns 0, or CLI_EXIT_USAGE after printing one
 * "dlock: ..." line (plus a hint) on stderr. Never exits. */
int cli_parse(int argc, char **argv, cli_options *o);
void cli_print_usage(void);

/* locking.c: the lock kinds behind one face; returns an exit code. */
int cli_cmd_run(const cli_options *o);

/* standby.c: --standby NAME -- COMMAND; election.c: leader [--watch]. */
int cli_cmd_standby(const cli_options *o);
int cli_cmd_leader(const cli_options *o);

/* admin.c: status / release --force; return an exit code. */
int cli_cmd_status(const cli_options *o);
int cli_cmd_release(const cli_options *o);

/* Prints "dlock: " + message on stderr. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints on stderr only with -v. */
void cli_verbose(const cli_options *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
