/* conffile.h: `name value` configuration files for the option tables of
 * options.h, and a URL shown without its password. A file's values go
 * through the same opt_set_named as flags and environment variables, so a
 * value is refused (or accepted) the same whichever source gives it; every
 * refusal names PATH:LINE and the setting. Nothing here prints.
 *
 * Format: one `name value` per line; blank lines and lines whose first
 * non-blank character is '#' are skipped. name is the long name of a spec
 * that has an environment variable (a setting: flag-only rows such as
 * --check-config are unknown in a file). value is the rest of the line
 * without surrounding blanks, taken literally ('#' and quotes inside it
 * too), or a double-quoted string when it starts with '"': "" is empty,
 * \" and \\ stand for " and \, and the closing quote ends the value (only
 * blanks may follow). An unterminated quote is an error, never part of the
 * value. Thread-safety: reentrant.
 */
#ifndef DLOCK_TOOLS_CONFFILE_H
#define DLOCK_TOOLS_CONFFILE_H

#include <stddef.h>

#include "options.h"

/* Reads path into base. Returns 0, or -1 with err "PATH:LINE: message" for
 * the first bad line ("cannot read config file PATH: reason" when it cannot
 * be opened); the values of the lines before it stay stored. */
int opt_load_file(const opt_spec *specs, size_t n, const char *path, void *base, char *err,
                  size_t errlen);

/* Writes url with the password of its user-info replaced by "****"
 * (redis://app:****@host:7000, redis://:****@host) and the value of every
 * query parameter whose name ends in "password" too. A URL without a
 * password is copied unchanged (redis://bob@host names a user only). */
void opt_mask_url(const char *url, char *out, size_t outlen);

#endif
