/* redis_io.c: the sync door (see redis_io.h). A dlock__conn is either a
 * plain connection (redis_plain.c) or a routing one that carries the
 * Cluster router (cluster_conn.c); each function here picks one. This file
 * only calls down: neither of those two calls back into it. */
#include "redis_io.h"

#include <stdio.h>

#include "cluster_conn.h"
#include "common_err.h"
#include "redis_plain.h"
#include "slot.h"

int dlock__conn_open(const dlock__url *url, const dlock__conn_opts *opts, dlock__conn **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    if (url->kind != DLOCK__URL_CLUSTER) return dlock__plain_open(url, opts, out, err, errlen);
    dlock__cluster *cl = NULL;
    char why[256] = "";
    int rc = dlock__cluster_open(url, opts, &cl, why, sizeof(why));
    if (rc == 0) rc = dlock__plain_routing(url, cl, out);
    if (rc && cl) dlock__cluster_close(cl);
    if (rc && err && errlen) snprintf(err, errlen, "%s", why[0] ? why : dlock__strerror(rc));
    return rc;
}

void dlock__conn_close(dlock__conn *c)
{
    if (!c) return;
    dlock__cluster_close(dlock__plain_router(c));
    dlock__plain_close(c);
}

void dlock__conn_set_timeouts(dlock__conn *c, const dlock__conn_opts *opts)
{
    dlock__cluster *cl = dlock__plain_router(c);
    if (cl) dlock__cluster_set_timeouts(cl, opts);
    dlock__plain_set_timeouts(c, opts);
}

int dlock__conn_cmd(dlock__conn *c, int argc, const char **argv, const size_t *lens, dlock__reply **reply_out)
{
    dlock__cluster *cl = dlock__plain_router(c);
    if (cl) return dlock__cluster_cmd(cl, argc, argv, lens, reply_out);
    return dlock__plain_cmd(c, argc, argv, lens, reply_out);
}

int dlock__conn_pipeline(dlock__conn *c, size_t n, const int *argcs, const char *const *const *argvs,
                         const size_t *const *lens, dlock__reply **replies_out)
{
    dlock__cluster *cl = dlock__plain_router(c);
    if (cl) return dlock__cluster_pipeline(cl, n, argcs, argvs, lens, replies_out);
    return dlock__plain_pipeline(c, n, argcs, argvs, lens, replies_out);
}

int dlock__conn_read_push(dlock__conn *c, int64_t timeout_ms, dlock__reply **reply_out)
{
    return dlock__plain_read_push(c, timeout_ms, reply_out);
}

int dlock__conn_send(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
    return dlock__plain_send(c, argc, argv, lens);
}

int dlock__conn_fd(const dlock__conn *c)
{
    return dlock__plain_fd(c);
}

const char *dlock__conn_errstr(const dlock__conn *c)
{
    dlock__cluster *cl = dlock__plain_router(c);
    return cl ? dlock__cluster_errstr(cl) : dlock__plain_errstr(c);
}

bool dlock__conn_is_open(const dlock__conn *c)
{
    return dlock__plain_is_open(c);
}

bool dlock__conn_is_cluster(const dlock__conn *c)
{
    return dlock__plain_router(c) != NULL;
}

int dlock__conn_master_of_key(dlock__conn *c, const char *key, size_t len, dlock__url *out)
{
    dlock__cluster *cl = dlock__plain_router(c);
    if (!cl) return dlock__url_copy(dlock__plain_url(c), out);
    return dlock__cluster_master_of_slot(cl, dlock__key_slot(key, len), out);
}

int dlock__conn_cmd_slot(dlock__conn *c, unsigned slot, int argc, const char **argv, const size_t *lens,
                         dlock__reply **reply_out)
{
    dlock__cluster *cl = dlock__plain_router(c);
    if (!cl) return dlock__plain_cmd(c, argc, argv, lens, reply_out);
    return dlock__cluster_cmd_slot(cl, slot, argc, argv, lens, reply_out);
}

size_t dlock__conn_cluster_slots(dlock__conn *c, unsigned *slots_out, size_t max)
{
    dlock__cluster *cl = dlock__plain_router(c);
    if (cl) return dlock__cluster_master_slots(cl, slots_out, max);
    if (max) slots_out[0] = 0;
    return max ? 1 : 0;
}
