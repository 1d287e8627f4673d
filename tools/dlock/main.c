/* main.c: the dlock program, a distributed flock(1): parse the command
 * line and hand over to the run, status, release or torture command. Every
 * path returns one of the exit codes documented in cli.h, torture.h and
 * dlock.1.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dlock/dlock.h"
#include "options.h"
#include "torture.h"

/* The options module's deprecation warnings (a bare duration). */
static void warn_line(const char *msg) { fprintf(stderr, "dlock: %s\n", msg); }

int main(int argc, char **argv)
{
    opt_set_warn(warn_line);
    /* torture has options of its own (torture.c) */
    if (argc >= 2 && strcmp(argv[1], "torture") == 0) return cli_cmd_torture(argc - 1, argv + 1);
    cli_options o;
    int code = cli_parse(argc, argv, &o);
    if (code != 0) return code;
    switch (o.mode) {
    case CLI_MODE_HELP: cli_print_usage(); return 0;
    case CLI_MODE_VERSION: printf("dlock %s\n", DLOCK_VERSION); return 0;
    case CLI_MODE_STATUS: return cli_cmd_status(&o);
    case CLI_MODE_RELEASE: return cli_cmd_release(&o);
    case CLI_MODE_LEADER: return cli_cmd_leader(&o);
    case CLI_MODE_RUN: break;
    }
    return o.standby ? cli_cmd_standby(&o) : cli_cmd_run(&o);
}
