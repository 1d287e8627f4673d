/* redis_plain.h: one plain sync connection to one server (internal to
 * src/common). The door everything else uses is redis_io.h, whose
 * dlock__conn_* functions pick this file or the Cluster router
 * (cluster_conn.c); the router's per-node connections are plain ones, so
 * it calls this file and never redis_io.c. Contracts: as the matching
 * dlock__conn_* functions in redis_io.h, for a non-cluster URL.
 */
#ifndef DLOCK_COMMON_REDIS_PLAIN_H
#define DLOCK_COMMON_REDIS_PLAIN_H

#include "redis_io.h"

typedef struct dlock__cluster dlock__cluster;

/* A redis-cluster:// URL is refused here (EINVAL): open it with the router. */
int dlock__plain_open(const dlock__url *url, const dlock__conn_opts *opts, dlock__conn **out, char *err,
                      size_t errlen);
/* Frees the connection, not its router (the caller closes that first). */
void dlock__plain_close(dlock__conn *c);
void dlock__plain_set_timeouts(dlock__conn *c, const dlock__conn_opts *opts);
int dlock__plain_cmd(dlock__conn *c, int argc, const char **argv, const size_t *lens,
                     dlock__reply **reply_out);
int dlock__plain_pipeline(dlock__conn *c, size_t n, const int *argcs, const char *const *const *argvs,
                          const size_t *const *lens, dlock__reply **replies_out);
int dlock__plain_read_push(dlock__conn *c, int64_t timeout_ms, dlock__reply **reply_out);
int dlock__plain_send(dlock__conn *c, int argc, const char **argv, const size_t *lens);
int dlock__plain_fd(const dlock__conn *c);
const char *dlock__plain_errstr(const dlock__conn *c);
bool dlock__plain_is_open(const dlock__conn *c);

/* A connection object that carries a router instead of a socket (what
 * dlock__conn_open returns for a redis-cluster:// URL). 0 or ENOMEM. */
int dlock__plain_routing(const dlock__url *url, dlock__cluster *cl, dlock__conn **out);
/* The router of a routing connection, NULL for a plain one. */
dlock__cluster *dlock__plain_router(const dlock__conn *c);
const dlock__url *dlock__plain_url(const dlock__conn *c);

#endif
