/* cluster_conn.h: the sync Redis Cluster router behind a dlock__conn opened
 * on a redis-cluster:// URL (redis_io.c delegates to it; callers see only
 * dlock__conn). Internal to src/common. Same threading rule as
 * dlock__conn: one thread at a time. Behaviour is documented at the
 * dlock__conn functions in redis_io.h and in cluster_conn.c's design note.
 */
#ifndef DLOCK_COMMON_CLUSTER_CONN_H
#define DLOCK_COMMON_CLUSTER_CONN_H

#include "cluster_map.h"
#include "redis_io.h"

typedef struct dlock__cluster dlock__cluster;

int dlock__cluster_open(const dlock__url *url, const dlock__conn_opts *opts, dlock__cluster **out, char *err,
                        size_t errlen);
void dlock__cluster_close(dlock__cluster *cl);
/* dlock__conn_set_timeouts for every node connection, open or not yet. */
void dlock__cluster_set_timeouts(dlock__cluster *cl, const dlock__conn_opts *opts);
int dlock__cluster_cmd(dlock__cluster *cl, int argc, const char **argv, const size_t *lens,
                       dlock__reply **reply_out);
int dlock__cluster_pipeline(dlock__cluster *cl, size_t n, const int *argcs, const char *const *const *argvs,
                            const size_t *const *lens, dlock__reply **replies_out);
int dlock__cluster_cmd_slot(dlock__cluster *cl, unsigned slot, int argc, const char **argv,
                            const size_t *lens, dlock__reply **reply_out);
int dlock__cluster_master_of_slot(dlock__cluster *cl, unsigned slot, dlock__url *out);
size_t dlock__cluster_master_slots(dlock__cluster *cl, unsigned *slots_out, size_t max);
const char *dlock__cluster_errstr(const dlock__cluster *cl);
/* CLUSTER SHARDS (CLUSTER SLOTS when the server lacks it) on a plain
 * connection to the node `host`, parsed into *out. 0, ESERVER (a bad or
 * error reply), a transport code; err says why. Shared with the async
 * router's bootstrap. */
int dlock__cluster_fetch_map(dlock__conn *c, const char *host, dlock__cmap *out, char *err, size_t errlen);

#endif
