/* redis_async.c: the async door (see redis_async.h). A dlock__aconn is
 * either a plain connection (redis_aplain.c) or a routing one that carries
 * the async Cluster router (cluster_async.c); each function here picks
 * one. This file only calls down: neither of those calls back into it. */
#include "redis_async.h"

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

int dlock__aconn_cmd_resp(dlock__aconn *ac, dlock__acb cb, void *priv, const char *cmd, size_t len)
{
    return dlock__aconn_cmd_resp_slot(ac, -1, cb, priv, cmd, len);
}

int dlock__aconn_cmd_resp_slot(dlock__aconn *ac, int slot, dlock__acb cb, void *priv, const char *cmd,
                               size_t len)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    if (cl) return dlock__acluster_cmd_resp(cl, slot < 0 ? -1 : slot, cb, priv, cmd, len);
    return dlock__aplain_cmd_resp(ac, cb, priv, cmd, len);
}

uint64_t dlock__aconn_resp_parsed(const dlock__aconn *ac)
{
    dlock__acluster *cl = dlock__aplain_router(ac);
    return cl ? dlock__acluster_parsed(cl) : 0;
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
