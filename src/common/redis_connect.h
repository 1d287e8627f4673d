/* redis_connect.h: a sync connection from a URL string, the way the
 * programs and the pipeline open one (parse, connect, free the parsed URL).
 * Invariant: a sentinel URL stays a sentinel connection (the sentinels are
 * asked for the master again at every reconnect, so a failover is
 * followed); nothing is left open on failure. Thread-safety: as redis_io.h. */
#ifndef DLOCK_COMMON_REDIS_CONNECT_H
#define DLOCK_COMMON_REDIS_CONNECT_H

#include <stddef.h>
#include <stdint.h>

#include "redis_io.h"

/* Parses url (url.h) and opens a connection with a 2 s connect timeout and
 * command_timeout_ms per command (it must exceed any BLOCK used on the
 * connection). Returns 0 with *out, or the dlock__url_parse /
 * dlock__conn_open code (err says why) with *out NULL. */
int dlock__conn_open_url(const char *url, int64_t command_timeout_ms, dlock__conn **out, char *err,
                         size_t errlen);

#endif
