/* redis_async.c: the async door (see redis_async.h). A dlock__aconn is
 * either a plain connection (redis_aplain.c) or a routing one that carries
 * the async Cluster router (cluster_async.c); each function here picks
 * one. This file only calls down: neither of those calls back into it. */
#include "redis_async.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "cluster_async.h"
#include "redis_aplain.h"

int dlock__aconn_open(struct event_base *base, const dlock__url *url, dlock__astate_cb on_state, void *priv,
                      dlock__aconn **out, char *err, size_t errlen)
{
    *out = NULL;
    if (url->kind != DLOCK__URL_CLUSTER)
        return dlock__aplain_open(base, url, on_state, priv, out, err, errlen);
    dlock__aconn *ac = NULL;
    int rc = dlock__aplain_routing(base, url, on_state, priv, &ac);
    if (rc) return rc;
    dlock__acluster *cl = NULL;
    rc = dlock__acluster_open(base, url, ac, &cl, err, errlen);
    if (rc) {
        dlock__aplain_close(ac);
        return rc;
    }
    dlock__aplain_set_router(ac, cl);
    *out = ac;
    return 0;
}

int dlock__aconn_cmd(dlock__aconn *ac, dlock__acb cb, void *priv, int argc, const char **argv,
                     const size_t *lens)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (cl) return dlock__acluster_cmd(cl, -1, cb, priv, argc, argv, lens);
    return dlock__aplain_cmd(ac, cb, priv, argc, argv, lens);
}

/* A routing aconn needs the keys: the request (a RESP array of bulk
 * strings) is read back into argv and routed as dlock__aconn_cmd. */
static int cluster_cmd_resp(dlock__acluster *cl, dlock__acb cb, void *priv, const char *cmd, size_t len)
{
    dlock__reply *req = NULL;
    int rc = dlock__reply_parse(cmd, len, &req);
    if (rc) return rc == DLOCK__ENOMEM ? rc : DLOCK__EINVAL;
    size_t n = dlock__reply_kind(req) == DLOCK__R_ARRAY ? dlock__reply_count(req) : 0;
    const char **argv = n ? calloc(n, sizeof(*argv)) : NULL;
    size_t *lens = n ? calloc(n, sizeof(*lens)) : NULL;
    rc = n == 0 || n > INT_MAX ? DLOCK__EINVAL : (!argv || !lens) ? DLOCK__ENOMEM : 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const dlock__reply *a = dlock__reply_at(req, i);
        if (dlock__reply_kind(a) != DLOCK__R_STRING)
            rc = DLOCK__EINVAL;
        else
            argv[i] = dlock__reply_str(a, &lens[i]);
    }
    if (rc == 0) rc = dlock__acluster_cmd(cl, -1, cb, priv, (int)n, argv, lens);
    free(argv);
    free(lens);
    dlock__reply_free(req);
    return rc;
}

int dlock__aconn_cmd_resp(dlock__aconn *ac, dlock__acb cb, void *priv, const char *cmd, size_t len)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (cl) return cluster_cmd_resp(cl, cb, priv, cmd, len);
    return dlock__aplain_cmd_resp(ac, cb, priv, cmd, len);
}

void dlock__aconn_close(dlock__aconn *ac)
{
    if (!ac) return;
    dlock__acluster_close(dlock__aplain_detach_router(ac)); /* pending callbacks run now, naming ac */
    dlock__aplain_close(ac);
}

bool dlock__aconn_is_up(const dlock__aconn *ac)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (cl) return dlock__acluster_is_up(cl);
    return dlock__aplain_is_up(ac);
}

const char *dlock__aconn_refusal(const dlock__aconn *ac, bool *auth_out)
{
    return dlock__aplain_refusal(ac, auth_out);
}

bool dlock__aconn_is_cluster(const dlock__aconn *ac)
{
    return dlock__aplain_router(ac) != NULL;
}

int dlock__aconn_cmd_slot(dlock__aconn *ac, unsigned slot, dlock__acb cb, void *priv, int argc,
                          const char **argv, const size_t *lens)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (!cl) return dlock__aplain_cmd(ac, cb, priv, argc, argv, lens);
    if (slot >= 16384) return DLOCK__EINVAL;
    return dlock__acluster_cmd(cl, (int)slot, cb, priv, argc, argv, lens);
}

int dlock__aconn_node_of_slot(dlock__aconn *ac, unsigned slot, char *buf, size_t len)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (cl) return dlock__acluster_node_of_slot(cl, slot, buf, len);
    snprintf(buf, len, "%s", dlock__aplain_addr(ac));
    return 0;
}
