/* envfile.h: --env-file FILE, the systemd EnvironmentFile= of the seckill
 * units read by the programs themselves, so that a command run by hand
 * (`seckilld --env-file /etc/dlock/seckill.env --check-config`, `seckill
 * --env-file ... reconcile`) sees the environment the unit runs with.
 *
 * Format (the part of systemd's that the packaged file uses): one
 * NAME=VALUE per line (blanks around '=' allowed); blank lines and lines whose first non-blank
 * character is '#' or ';' are skipped; NAME is [A-Za-z_][A-Za-z0-9_]*;
 * VALUE is the rest of the line without surrounding blanks, or a single- or
 * double-quoted string (in "...", \" and \\ stand for " and \). Each
 * variable replaces the inherited one, as in the unit. Nothing here
 * prints. Not thread-safe (setenv): call it from main before any thread.
 */
#ifndef DLOCK_TOOLS_ENVFILE_H
#define DLOCK_TOOLS_ENVFILE_H

#include <stddef.h>

#include "options.h"

/* The spec row every program that takes --env-file puts in its table (the
 * value is read by opt_env_file_apply before the table is parsed). */
#define OPT_ENV_FILE_SPEC(offset)                                                                     \
    {.name = "env-file", .type = OPT_STR, .off = (offset), .arg = "FILE",                              \
     .help = "first set the variables of FILE (NAME=VALUE lines: the units' EnvironmentFile=)"}

/* Sets the variables of path. 0, or -1 with err "PATH:LINE: message" (or
 * "cannot read env file PATH: reason"); the lines before a bad one stay set. */
int opt_env_file_load(const char *path, char *err, size_t errlen);

/* Finds --env-file FILE (or --env-file=FILE) among argv's options, read
 * with specs' own rules for which options take a value (so an option's
 * value is never taken for it), and loads it. 0 (none given, or loaded), or
 * -1 with err filled. */
int opt_env_file_apply(const opt_spec *specs, size_t n, int argc, char **argv, char *err, size_t errlen);

#endif
