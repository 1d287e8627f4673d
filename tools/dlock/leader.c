/* leader.c: `dlock leader [--watch] NAME`: who leads the election NAME
 * (the one `dlock --standby NAME` campaigns in), as one line
 * "leader TERM LABEL" or "no leader"; with --watch, one line per change,
 * in the order the changes happened, until SIGINT/SIGTERM/SIGHUP.
 * Read-only: it never campaigns.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dlock/election.h"
#include "events.h"
#include "lockface.h"

static void print_leader(const dlock_leader *ld)
{
    if (ld->present) printf("leader %" PRIu64 " %s\n", ld->term, ld->value[0] ? ld->value : "-");
    else printf("no leader\n");
    fflush(stdout);
}

/* The observer thread's callback: lines go out in the observer's order. */
static void on_change(dlock_election *e, const dlock_leader *ld, void *ud)
{
    (void)e;
    (void)ud;
    print_leader(ld);
}

static int watch(const cli_options *o, dlock_election *e)
{
    if (cli_events_init() != 0) {
        cli_err("cannot set up signal handling");
        return CLI_EXIT_OSERR;
    }
    int rc = dlock_election_observe(e, on_change, NULL);
    if (rc != 0) return cli_fail_name(o, rc, "cannot watch election");
    for (;;) {
        int ev = cli_events_next(-1);
        if (ev == SIGINT || ev == SIGTERM || ev == SIGHUP || ev == SIGQUIT) break;
    }
    dlock_election_observe_stop(e);
    return 0;
}

int cli_cmd_leader(const cli_options *o)
{
    dlock_client *c = NULL;
    int code = cli_client_open(o, &c);
    if (code != 0) return code;
    dlock_election *e = NULL;
    int rc = dlock_election_new(c, o->name, NULL, &e);
    if (rc != 0) {
        code = cli_fail_name(o, rc, "cannot open election");
    } else if (o->watch) {
        code = watch(o, e);
    } else {
        dlock_leader ld;
        rc = dlock_election_leader(e, &ld);
        if (rc != 0) code = cli_fail_name(o, rc, "cannot read the leader of election");
        else print_leader(&ld);
        if (rc == 0 && !ld.present) code = CLI_EXIT_CONFLICT;
    }
    dlock_election_free(e);
    dlock_client_destroy(c);
    return code;
}
