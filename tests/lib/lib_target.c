/* lib_target.c: see lib_target.h. */
#include "lib_target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_io.h"
#include "slot.h"
#include "url.h"

test_cluster lt_cl;

bool lt_cluster(void)
{
    const char *e = getenv("DLOCK_TEST_CLUSTER");
    return e && strcmp(e, "1") == 0;
}

int lt_start(test_server *srv)
{
    memset(srv, 0, sizeof(*srv));
    if (!lt_cluster()) return test_redis_start(srv, NULL);
    if (test_cluster_start(&lt_cl, 3, 1) != 0) return -1;
    if (strlen(lt_cl.url) >= sizeof(srv->url)) {
        fprintf(stderr, "lib_target: cluster URL too long\n");
        test_cluster_stop(&lt_cl);
        return -1;
    }
    memcpy(srv->url, lt_cl.url, strlen(lt_cl.url) + 1);
    snprintf(srv->kind, sizeof(srv->kind), "cluster");
    srv->port = lt_cl.node[0].port;
    srv->pid = 0;
    return 0;
}

void lt_stop(test_server *srv)
{
    if (lt_cluster()) test_cluster_stop(&lt_cl);
    else test_server_stop(srv);
}

/* Opens a routing connection on srv's cluster URL. */
static dlock__conn *cluster_conn(const test_server *srv)
{
    dlock__url u;
    dlock__conn_opts o = {.connect_timeout_ms = 1000, .command_timeout_ms = 5000};
    dlock__conn *c = NULL;
    char err[256] = "";
    if (dlock__url_parse(srv->url, &u, err, sizeof(err)) != 0) return NULL;
    int rc = dlock__conn_open(&u, &o, &c, err, sizeof(err));
    dlock__url_free(&u);
    if (rc) fprintf(stderr, "lib_target: %s\n", err);
    return rc ? NULL : c;
}

/* The reply r (rc from the call) as lt_cmd reports it; frees r. */
static int finish(int rc, dlock__reply *r, char *out, size_t outlen)
{
    if (rc == 0 && out && outlen) {
        if (dlock__reply_kind(r) == DLOCK__R_INTEGER) snprintf(out, outlen, "%lld", dlock__reply_int(r));
        else snprintf(out, outlen, "%s", dlock__reply_str(r, NULL));
    }
    if (rc == 0 && dlock__reply_kind(r) == DLOCK__R_ERROR) rc = -1;
    dlock__reply_free(r);
    return rc == 0 ? 0 : -1;
}

static bool on_cluster(const test_server *srv)
{
    return strncmp(srv->url, "redis-cluster://", 16) == 0;
}

int lt_cmd(const test_server *srv, char *out, size_t outlen, int argc, const char **argv)
{
    if (!on_cluster(srv)) return test_redis_cmd(srv, out, outlen, argc, argv);
    dlock__conn *c = cluster_conn(srv);
    if (!c) return -1;
    dlock__reply *r = NULL;
    int rc = dlock__conn_cmd(c, argc, argv, NULL, &r);
    rc = finish(rc, r, out, outlen);
    dlock__conn_close(c);
    return rc;
}

int lt_cmd_at(const test_server *srv, const char *key, char *out, size_t outlen, int argc,
              const char **argv)
{
    if (!on_cluster(srv)) return test_redis_cmd(srv, out, outlen, argc, argv);
    dlock__conn *c = cluster_conn(srv);
    if (!c) return -1;
    dlock__reply *r = NULL;
    unsigned slot = dlock__key_slot(key, strlen(key));
    int rc = dlock__conn_cmd_slot(c, slot, argc, argv, NULL, &r);
    rc = finish(rc, r, out, outlen);
    dlock__conn_close(c);
    return rc;
}

int lt_cmd_each(const test_server *srv, long long *sum_out, int argc, const char **argv)
{
    char out[64] = "";
    *sum_out = 0;
    if (!on_cluster(srv)) {
        int rc = test_redis_cmd(srv, out, sizeof(out), argc, argv);
        *sum_out = strtoll(out, NULL, 10);
        return rc;
    }
    for (int i = 0; i < lt_cl.n; i++) {
        if (test_cluster_cmd(&lt_cl, i, out, sizeof(out), argc, argv) != 0) return -1;
        *sum_out += strtoll(out, NULL, 10);
    }
    return 0;
}
