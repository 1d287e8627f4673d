/* backend.c: the three backend tables (backend.h) and the choice among
 * them. The Redis tables attach the URL, the connection pool (which routes
 * a Cluster itself) and the subscriber; the etcd table attaches the etcd
 * gateway (etcd_client.c). Both Redis tables use lock.c's lock operations;
 * etcd offers the lock only. */
#include <string.h>

#include "backend.h"
#include "client_priv.h"
#include "etcd.h"

static int redis_attach(dlock_client *c)
{
    char err[256] = "";
    int rc = dlock__err_from_common(dlock__url_parse(c->url_copy, &c->url, err, sizeof(err)));
    if (rc == DLOCK_EURL || rc == DLOCK_ETLS) dlock__log(c, DLOCK_LOG_ERROR, "url: %s", err);
    if (rc == 0) rc = dlock__pool_start(&c->pool, &c->opts, &c->url);
    if (rc == 0) rc = dlock__subscriber_start(c);
    return rc;
}

static void redis_quiesce(dlock_client *c)
{
    dlock__subscriber_stop(c);
}

static void redis_detach(dlock_client *c)
{
    dlock__subscriber_stop(c); /* a no-op when already stopped */
}

#define REDIS_OBJECTS                                                                          \
    (DLOCK__OBJ_FAIRLOCK | DLOCK__OBJ_RWLOCK | DLOCK__OBJ_SEMAPHORE | DLOCK__OBJ_LATCH |       \
     DLOCK__OBJ_RATELIMIT | DLOCK__OBJ_MULTILOCK)

const dlock__backend dlock__backend_redis = {
    .name = "redis", .attach = redis_attach, .quiesce = redis_quiesce, .detach = redis_detach,
    .lock = &dlock__redis_lock_ops, .objects = REDIS_OBJECTS};

const dlock__backend dlock__backend_cluster = {
    .name = "redis-cluster", .attach = redis_attach, .quiesce = redis_quiesce,
    .detach = redis_detach, .lock = &dlock__redis_lock_ops, .objects = REDIS_OBJECTS};

const dlock__backend dlock__backend_etcd = {
    .name = "etcd", .attach = dlock__etcd_attach, .quiesce = NULL, .detach = dlock__etcd_detach,
    .lock = &dlock__etcd_lock_ops, .objects = 0};

const dlock__backend *dlock__backend_for_url(const char *url)
{
    if (dlock__etcd_url_is(url)) return &dlock__backend_etcd;
    if (url && strncmp(url, "redis-cluster://", 16) == 0) return &dlock__backend_cluster;
    return &dlock__backend_redis;
}
