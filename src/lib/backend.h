/* backend.h: a backend of libdlock (Redis standalone or Sentinel, Redis
 * Cluster, etcd) is one table, chosen once by dlock_client_create from the
 * URL's scheme. The client attaches and detaches it; lock_api.c sends every
 * dlock_lock_* call through the table's lock operations; the other objects
 * ask dlock__client_offers first. An object a backend does not offer is
 * DLOCK_ENOTSUP from the table, before any work. Internal only. */
#ifndef DLOCK_LIB_BACKEND_H
#define DLOCK_LIB_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "client_internal.h"
#include "dlock/lock.h"

/* What status_get tells beyond dlock_lock_status, from the same read (so
 * both describe one holder): its label and the fencing token of its own
 * hold (Redis: kept with the label, so it outlives the fence key's expiry;
 * etcd: its key's create_revision). */
typedef struct dlock__holder_extra {
    char label[DLOCK_LABEL_MAX + 1]; /* "" none */
    uint64_t fence;                  /* 0: not known */
} dlock__holder_extra;

/* The lock operations of one backend. impl is the backend's own handle,
 * made by lock_new; arguments were checked by lock_api.c (handle non-NULL,
 * out-pointers non-NULL, name valid, leases and waits in range). */
typedef struct dlock__lock_ops {
    int (*lock_new)(dlock_client *c, const char *name, const dlock_lock_options *o, dlock_lock *pub,
                    void **impl_out);
    int (*try_lock)(void *impl, int64_t wait_ms, int64_t lease_ms, uint64_t *fence_out);
    int (*unlock)(void *impl);
    void (*cancel)(void *impl);
    int64_t (*validity_ms)(void *impl); /* the hold's (hold.h); 0: not held */
    int (*hold_count)(void *impl, int64_t *count_out);
    int (*is_locked)(void *impl, bool *locked_out);
    int (*remaining_ttl)(void *impl, int64_t *ttl_ms_out);
    int (*extend)(void *impl, int64_t lease_ms);
    const char *(*name)(const void *impl);
    const char *(*key)(const void *impl);
    const char *(*owner)(const void *impl);
    uint64_t (*fence)(const void *impl);
    void (*free)(void *impl);
    int (*force_unlock)(dlock_client *c, const char *name, dlock_lock_kind kind, bool *removed_out);
    /* x may be NULL. */
    int (*status_get)(dlock_client *c, const char *name, dlock_lock_status *st, dlock__holder_extra *x);
    int (*set_label)(void *impl, const char *label); /* label checked */
    int (*fence_guard)(dlock_client *c, const char *resource, uint64_t token, uint64_t *highest_out);
} dlock__lock_ops;

/* The objects beyond the lock; a backend offers a set of them. */
typedef enum dlock__object {
    DLOCK__OBJ_FAIRLOCK = 1 << 0,
    DLOCK__OBJ_RWLOCK = 1 << 1,
    DLOCK__OBJ_SEMAPHORE = 1 << 2,
    DLOCK__OBJ_LATCH = 1 << 3,
    DLOCK__OBJ_RATELIMIT = 1 << 4,
    DLOCK__OBJ_MULTILOCK = 1 << 5,
} dlock__object;

typedef struct dlock__backend {
    const char *name;               /* "redis", "redis-cluster", "etcd" */
    /* Opens what the backend needs (connections, threads of its own) once
     * the client's options are copied and its id is set; 0 or a code
     * (logged). detach undoes it after the client's threads stopped; it is
     * also called after a failed attach. quiesce (optional) stops the
     * backend's own threads first, before the watchdog stops and held
     * objects are reported. */
    int (*attach)(dlock_client *c);
    void (*quiesce)(dlock_client *c);
    void (*detach)(dlock_client *c);
    const dlock__lock_ops *lock;
    unsigned objects;               /* dlock__object bits offered */
} dlock__backend;

extern const dlock__backend dlock__backend_redis;
extern const dlock__backend dlock__backend_cluster;
extern const dlock__backend dlock__backend_etcd;
extern const dlock__lock_ops dlock__redis_lock_ops;
extern const dlock__lock_ops dlock__etcd_lock_ops;

/* The table for url (by scheme: etcd:// etcds:// -> etcd, redis-cluster://
 * -> Cluster, anything else -> Redis, whose URL parser then judges it: a
 * rediss:// is refused there with DLOCK_ETLS). */
const dlock__backend *dlock__backend_for_url(const char *url);
/* The table the client was created with (client.c, like the next). */
const dlock__backend *dlock__client_backend(const dlock_client *c);
/* 0 when c's backend offers object, else DLOCK_ENOTSUP (logged). */
int dlock__client_offers(const dlock_client *c, dlock__object object, const char *what);

#endif
