/* standby.c: `dlock --standby NAME -- COMMAND`, a warm standby of a
 * singleton service: COMMAND starts at once on every host while dlock
 * campaigns in the election NAME (election.h) with its label. COMMAND is
 * told its role by a signal to its process (not its group: workers that
 * do not handle SIGUSR1 would die of it), the state file
 * ($DLOCK_STATE_FILE: "leader TERM UNTIL" or "standby") being written
 * first: SIGUSR1 when it leads, SIGUSR2 when it must stop leading. UNTIL
 * is the CLOCK_MONOTONIC time in ms at which the SIGUSR2 is due if no
 * renewal succeeds; dlock moves it forward after renewals, so a COMMAND
 * that checks it before acting stops believing on time even when dlock
 * itself is frozen (SIGSTOP) and cannot signal. The stop lands
 * kill-grace + margin before the leadership's validity deadline
 * (cli_kill_margin_ms, as for a lost lock in child.c), so COMMAND has its
 * kill-grace to stop leader work before anyone else can lead; dlock then
 * resigns and campaigns again. COMMAND has STARTUP_MS after its start to
 * install its handlers before the first signal can come. Invariant: at most one SIGUSR1 is
 * outstanding (each is followed by a SIGUSR2 before the next), and the
 * leadership is resigned only after COMMAND was told to stop or exited.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "cli.h"
#include "dlock/election.h"
#include "events.h"
#include "lockface.h"

#define RETRY_MS 1000 /* a campaign that failed (server unreachable) runs again after this */
/* The first campaign starts this long after COMMAND was started: a
 * SIGUSR1 before COMMAND installed its handler would kill it (the
 * default action), and a standby that starts late costs nothing. */
#define STARTUP_MS 200

typedef struct standby {
    const cli_options *o;
    dlock_client *c;
    dlock_election *e;
    pid_t pid;
    char state[512];     /* $DLOCK_STATE_FILE */
    bool campaigning;    /* the campaign thread runs */
    pthread_t camp;
    int camp_rc;
    uint64_t camp_term;
    bool leading;        /* COMMAND was told to lead and not yet to stop */
    int64_t resign_at;   /* after a stop: resign (and campaign again) then; 0 none */
    int64_t retry_at;    /* campaign again then; 0 none */
    int status;          /* COMMAND's exit status */
    int64_t until;       /* the UNTIL last written */
} standby;

static void *campaign_main(void *arg)
{
    standby *s = arg;
    s->camp_rc = dlock_election_campaign(s->e, cli_label(s->o), DLOCK_WAIT_FOREVER, &s->camp_term);
    cli_events_post(CLI_EV_ACQUIRED);
    return NULL;
}

static void campaign_start(standby *s)
{
    s->retry_at = 0;
    if (pthread_create(&s->camp, NULL, campaign_main, s) != 0) {
        s->retry_at = cli_now_ms() + RETRY_MS;
        return;
    }
    s->campaigning = true;
}

/* Writes "leader TERM" or "standby" to the state file, atomically (a
 * reader sees the old or the new role, never a torn one). */
static void write_state(const standby *s, uint64_t term, int64_t until)
{
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.new", s->state);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        cli_err("cannot write %s: %s", tmp, strerror(errno));
        return;
    }
    if (term) fprintf(f, "leader %" PRIu64 " %" PRId64 "\n", term, until);
    else fprintf(f, "standby\n");
    if (fclose(f) != 0 || rename(tmp, s->state) != 0) cli_err("cannot write %s: %s", s->state, strerror(errno));
}

static int64_t stop_below_ms(const cli_options *o)
{
    return o->kill_grace_ms + cli_kill_margin_ms(cli_lease_ms(o));
}

/* While leading: UNTIL follows the renewals (written when it moved). */
static void refresh_until(standby *s)
{
    int64_t until = cli_now_ms() + dlock_election_validity_ms(s->e) - stop_below_ms(s->o);
    if (!s->leading || until <= s->until + 5) return; /* moves only forward */
    s->until = until;
    write_state(s, dlock_election_term(s->e), until);
}

/* The campaign thread ended: COMMAND leads now, or campaign again later. */
static void campaign_done(standby *s)
{
    pthread_join(s->camp, NULL);
    s->campaigning = false;
    if (s->camp_rc == 0 && dlock_election_validity_ms(s->e) > stop_below_ms(s->o)) {
        s->until = cli_now_ms() + dlock_election_validity_ms(s->e) - stop_below_ms(s->o);
        write_state(s, s->camp_term, s->until);
        s->leading = true;
        kill(s->pid, SIGUSR1);
        cli_verbose(s->o, "leading election '%s' (term %" PRIu64 "): sent SIGUSR1 to COMMAND at %" PRId64,
                    s->o->name, s->camp_term, cli_now_ms());
        return;
    }
    if (s->camp_rc == 0) { /* won with too little validity to tell COMMAND: give it back */
        dlock_election_resign(s->e);
        s->retry_at = cli_now_ms();
        return;
    }
    if (s->camp_rc != DLOCK_ECANCELED) {
        cli_err("campaign in election '%s' failed (%s); trying again in %d ms", s->o->name,
                dlock_strerror(s->camp_rc), RETRY_MS);
        s->retry_at = cli_now_ms() + RETRY_MS;
    }
}

/* COMMAND must stop leading now: left_ms of validity remain. */
static void stop_leading(standby *s, int64_t left_ms)
{
    s->leading = false;
    write_state(s, 0, 0);
    kill(s->pid, SIGUSR2);
    int64_t grace = left_ms - cli_kill_margin_ms(cli_lease_ms(s->o));
    if (grace > s->o->kill_grace_ms) grace = s->o->kill_grace_ms;
    s->resign_at = cli_now_ms() + (grace > 0 ? grace : 0);
    cli_err("election '%s': %s; sent SIGUSR2 to COMMAND at %" PRId64 " (%lld ms of validity left)", s->o->name,
            left_ms > 0 ? "no renewal succeeded in time" : "leadership lost", cli_now_ms(), (long long)left_ms);
}

/* True when COMMAND exited (status recorded). */
static bool reaped(standby *s)
{
    int ws;
    pid_t r = waitpid(s->pid, &ws, WNOHANG);
    if (r != s->pid) return false;
    s->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    return true;
}

/* Milliseconds until something is due (-1: nothing). */
static int64_t next_due(const standby *s)
{
    int64_t now = cli_now_ms(), t = INT64_MAX;
    if (s->leading) t = dlock_election_validity_ms(s->e) - stop_below_ms(s->o);
    if (s->leading && cli_lease_ms(s->o) / 6 < t) t = cli_lease_ms(s->o) / 6; /* refresh UNTIL */
    if (s->resign_at && s->resign_at - now < t) t = s->resign_at - now;
    if (s->retry_at && s->retry_at - now < t) t = s->retry_at - now;
    return t == INT64_MAX ? -1 : t < 0 ? 0 : t;
}

/* One event (or timeout) of the loop. */
static void step(standby *s, int ev)
{
    /* SIGUSR1/SIGUSR2 are the roles dlock gives: never passed on */
    if (ev > 0 && ev < CLI_EV_ACQUIRED && ev != SIGCHLD && ev != SIGUSR1 && ev != SIGUSR2) {
        cli_verbose(s->o, "forwarding signal %d to COMMAND", ev);
        kill(-s->pid, ev);
    }
    if (ev == CLI_EV_ACQUIRED) campaign_done(s);
    int64_t left = dlock_election_validity_ms(s->e);
    if (s->leading && (ev == CLI_EV_LOST || left <= stop_below_ms(s->o))) stop_leading(s, left);
    refresh_until(s);
    int64_t now = cli_now_ms();
    if (s->resign_at && now >= s->resign_at) {
        s->resign_at = 0;
        int rc = dlock_election_resign(s->e);
        cli_verbose(s->o, "resigned election '%s': %s", s->o->name, rc ? dlock_strerror(rc) : "ok");
        s->retry_at = now;
    }
    if (s->retry_at && now >= s->retry_at && !s->campaigning) campaign_start(s);
}

static void post_lost(dlock_election *e, int reason, void *ud)
{
    (void)e;
    (void)reason;
    (void)ud;
    cli_events_post(CLI_EV_LOST);
}

static int export_env(standby *s)
{
    const char *dir = getenv("RUNTIME_DIRECTORY"); /* systemd's RuntimeDirectory= */
    if (!dir || !*dir) dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    snprintf(s->state, sizeof(s->state), "%s/dlock-standby.XXXXXX", dir);
    int fd = mkstemp(s->state);
    if (fd < 0) {
        cli_err("cannot create the state file in %s: %s", dir, strerror(errno));
        s->state[0] = '\0';
        return CLI_EXIT_OSERR;
    }
    close(fd);
    write_state(s, 0, 0);
    char lease[32], grace[32];
    snprintf(lease, sizeof(lease), "%lld", (long long)cli_lease_ms(s->o));
    snprintf(grace, sizeof(grace), "%lld", (long long)s->o->kill_grace_ms);
    if (cli_child_setenv("DLOCK_NAME", s->o->name) || cli_child_setenv("DLOCK_STATE_FILE", s->state) ||
        cli_child_setenv("DLOCK_LEASE_MS", lease) || cli_child_setenv("DLOCK_KILL_GRACE_MS", grace) ||
        cli_child_setenv("DLOCK_LABEL", cli_label(s->o)) || cli_child_setenv("DLOCK_FENCE", NULL)) {
        cli_err("cannot set the environment for COMMAND");
        return CLI_EXIT_OSERR;
    }
    return 0;
}

/* Connects, makes the election and the state file, starts COMMAND. */
static int open_all(standby *s)
{
    int code = cli_client_open(s->o, &s->c);
    if (code != 0) return code;
    dlock_election_options eo;
    dlock_election_options_init(&eo);
    eo.on_lost = post_lost;
    int rc = dlock_election_new(s->c, s->o->name, &eo, &s->e);
    if (rc != 0) return cli_fail_name(s->o, rc, "cannot open election");
    code = export_env(s);
    if (code != 0) return code;
    pid_t pid = cli_child_start(s->o);
    if (pid < 0) return (int)-pid;
    s->pid = pid;
    cli_verbose(s->o, "started COMMAND, pid %ld; campaigning in election '%s' as %s", (long)pid, s->o->name,
                cli_label(s->o));
    return 0;
}

static void close_all(standby *s)
{
    if (s->campaigning) {
        dlock_election_cancel(s->e);
        pthread_join(s->camp, NULL);
        if (s->camp_rc == 0) dlock_election_resign(s->e); /* won as COMMAND exited */
    }
    if (s->leading || s->resign_at) dlock_election_resign(s->e); /* COMMAND is gone */
    if (s->state[0]) {
        char tmp[600];
        snprintf(tmp, sizeof(tmp), "%s.new", s->state);
        unlink(tmp);
        unlink(s->state);
    }
    dlock_election_free(s->e);
    if (s->c) dlock_client_destroy(s->c);
}

int cli_cmd_standby(const cli_options *o)
{
    cli_child_snapshot_fds();
    if (cli_events_init() != 0) {
        cli_err("cannot set up signal handling");
        return CLI_EXIT_OSERR;
    }
    standby s;
    memset(&s, 0, sizeof(s));
    s.o = o;
    int code = open_all(&s);
    if (code == 0) {
        s.retry_at = cli_now_ms() + STARTUP_MS;
        while (!reaped(&s)) step(&s, cli_events_next(next_due(&s)));
        cli_verbose(o, "COMMAND exited with status %d", s.status);
        code = s.status;
    }
    close_all(&s);
    return code;
}
