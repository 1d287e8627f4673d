/* redis_async.c: the async door (see redis_async.h), and a dlock__script
 * run on it (script.h). A dlock__aconn is either a plain connection
 * (redis_aplain.c) or a routing one that carries the async Cluster router
 * (cluster_async.c); each function here picks one. This file only calls
 * down: neither of those calls back into it. A script call keeps a copy of
 * its arguments so that a NOSCRIPT answer can be followed by EVAL once;
 * its callback runs exactly once. */
#include "redis_async.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_async.h"
#include "common_err.h"
#include "redis_aplain.h"
#include "script.h"

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

/* ---- scripts on the async door (script.h) ------------------------------ */

typedef struct acall {
    const dlock__script *s;
    dlock__acb cb;
    void *priv;
    int argc;
    bool by_source; /* NOSCRIPT was answered: EVAL sent */
    char nk[16];
    const char **argv; /* argc entries, after the struct */
    size_t *lens;
} acall;

static void on_reply(dlock__aconn *ac, dlock__reply *reply, int err, void *priv)
{
    acall *a = priv;
    if (reply && !a->by_source && dlock__script_missing(reply)) {
        a->by_source = true;
        a->argv[0] = "EVAL";
        a->lens[0] = 4;
        a->argv[1] = a->s->src;
        a->lens[1] = a->s->len;
        if (dlock__aconn_cmd(ac, on_reply, a, a->argc, a->argv, a->lens) == 0) return;
        reply = NULL;
        err = DLOCK__ECONN; /* nothing of it ran */
    }
    a->cb(ac, reply, err, a->priv);
    free(a);
}

/* The call with its argv, lens and a copy of the keys and arguments
 * after it (one allocation). */
static acall *acall_new(const dlock__script *s, int nkeys, const char *const *keys, int nargs,
                        const char *const *args)
{
    size_t n = (size_t)nkeys + (size_t)nargs + 3, bytes = 0;
    for (int i = 0; i < nkeys; i++)
        bytes += strlen(keys[i]) + 1;
    for (int i = 0; i < nargs; i++)
        bytes += strlen(args[i]) + 1;
    acall *a = calloc(1, sizeof(*a) + n * (sizeof(char *) + sizeof(size_t)) + bytes);
    if (!a) return NULL;
    a->argv = (const char **)(void *)(a + 1);
    a->lens = (size_t *)(void *)(a->argv + n);
    char *p = (char *)(a->lens + n);
    const char **copy = a->argv + 3; /* the copies sit where script_argv puts them */
    for (int i = 0; i < nkeys + nargs; i++) {
        const char *v = i < nkeys ? keys[i] : args[i - nkeys];
        size_t len = strlen(v) + 1;
        memcpy(p, v, len);
        copy[i] = p;
        p += len;
    }
    a->s = s;
    a->argc = dlock__script_argv(s, false, nkeys, copy, nargs, copy + nkeys, a->argv, a->lens, a->nk);
    return a;
}

int dlock__script_acall(dlock__aconn *ac, const dlock__script *s, int nkeys, const char *const *keys,
                        int nargs, const char *const *args, dlock__acb cb, void *priv)
{
    if (nkeys < 0 || nargs < 0 || nkeys > INT_MAX - 3 - nargs) return DLOCK__EINVAL;
    acall *a = acall_new(s, nkeys, keys, nargs, args);
    if (!a) return DLOCK__ENOMEM;
    a->cb = cb;
    a->priv = priv;
    int rc = dlock__aconn_cmd(ac, on_reply, a, a->argc, a->argv, a->lens);
    if (rc) free(a);
    return rc;
}

/* ---- calls whose arguments come written as RESP ------------------------- */

int dlock__script_rcall_send(dlock__aconn *ac, const dlock__script_rcall *c, dlock__acb cb, void *priv)
{
    if (!c->by_source) {
        char head[DLOCK__SCRIPT_HEAD_ROOM];
        size_t hn = (size_t)(dlock__script_resp_head(c->s, false, c->nargs, head) - head);
        char *start = c->args - hn;
        memcpy(start, head, hn);
        return dlock__aconn_cmd_resp_slot(ac, c->slot, cb, priv, start, hn + c->len);
    }
    char *buf = malloc(DLOCK__SCRIPT_HEAD_ROOM + c->s->len + c->len);
    if (!buf) return DLOCK__ENOMEM;
    char *p = dlock__script_resp_head(c->s, true, c->nargs, buf);
    memcpy(p, c->args, c->len);
    int rc = dlock__aconn_cmd_resp_slot(ac, c->slot, cb, priv, buf, (size_t)(p - buf) + c->len);
    free(buf); /* the door copied it */
    return rc;
}

bool dlock__script_rcall_retry(dlock__script_rcall *c, const dlock__reply *reply)
{
    if (c->by_source || !reply || !dlock__script_missing(reply)) return false;
    c->by_source = true;
    return true;
}
