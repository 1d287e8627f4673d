/* lock_dispatch.c: the public lock API of include/dlock/lock.h. Each call
 * goes to the etcd mutex (etcd_lock.c) when the handle or client belongs
 * to an etcd:// client, else to the Redis locks of lock.c (compiled under
 * the dlock__redis_* names, lock_backend.h). Arguments the etcd side needs
 * checked are checked here exactly as lock.c checks them, so both
 * backends give the same answers to bad input.
 */
#include <string.h>

#include "etcd.h"
#include "lock_backend.h"

DLOCK_API int dlock_lock_new(dlock_client *c, const char *name, const dlock_lock_options *opts,
                             dlock_lock **lock_out)
{
    if (!dlock__etcd_gw(c)) return dlock__redis_lock_new(c, name, opts, lock_out);
    if (!lock_out) return DLOCK_EINVAL;
    *lock_out = NULL;
    dlock_lock_options defaults;
    dlock_lock_options_init(&defaults);
    if (dlock__check_name(name) != 0) return DLOCK_EINVAL;
    return dlock__etcd_lock_new(c, name, opts ? opts : &defaults, lock_out);
}

DLOCK_API int dlock_lock_try_lock(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, uint64_t *fence_out)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_try_lock(l, wait_ms, lease_ms, fence_out)
                                  : dlock__redis_lock_try_lock(l, wait_ms, lease_ms, fence_out);
}

DLOCK_API int dlock_lock_unlock(dlock_lock *l)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_unlock(l) : dlock__redis_lock_unlock(l);
}

DLOCK_API void dlock_lock_cancel(dlock_lock *l)
{
    if (dlock__etcd_is_lock(l)) dlock__etcd_lock_cancel(l);
    else dlock__redis_lock_cancel(l);
}

DLOCK_API bool dlock_lock_is_held(dlock_lock *l)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_is_held(l) : dlock__redis_lock_is_held(l);
}

DLOCK_API int dlock_lock_is_held_by_me(dlock_lock *l, bool *held_out)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_is_held_by_me(l, held_out)
                                  : dlock__redis_lock_is_held_by_me(l, held_out);
}

DLOCK_API int dlock_lock_is_locked(dlock_lock *l, bool *locked_out)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_is_locked(l, locked_out)
                                  : dlock__redis_lock_is_locked(l, locked_out);
}

DLOCK_API int dlock_lock_hold_count(dlock_lock *l, int64_t *count_out)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_hold_count(l, count_out)
                                  : dlock__redis_lock_hold_count(l, count_out);
}

DLOCK_API int dlock_lock_remaining_ttl(dlock_lock *l, int64_t *ttl_ms_out)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_remaining_ttl(l, ttl_ms_out)
                                  : dlock__redis_lock_remaining_ttl(l, ttl_ms_out);
}

DLOCK_API int dlock_lock_extend(dlock_lock *l, int64_t lease_ms)
{
    if (dlock__etcd_is_lock(l)) return lease_ms <= 0 ? DLOCK_EINVAL : dlock__etcd_lock_extend(l, lease_ms);
    return dlock__redis_lock_extend(l, lease_ms);
}

DLOCK_API const char *dlock_lock_name(const dlock_lock *l)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_name(l) : dlock__redis_lock_name(l);
}

DLOCK_API const char *dlock_lock_key(const dlock_lock *l)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_key(l) : dlock__redis_lock_key(l);
}

DLOCK_API const char *dlock_lock_owner(const dlock_lock *l)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_owner(l) : dlock__redis_lock_owner(l);
}

DLOCK_API uint64_t dlock_lock_fence(const dlock_lock *l)
{
    return dlock__etcd_is_lock(l) ? dlock__etcd_lock_fence(l) : dlock__redis_lock_fence(l);
}

DLOCK_API void dlock_lock_free(dlock_lock *l)
{
    if (dlock__etcd_is_lock(l)) dlock__etcd_lock_free(l);
    else dlock__redis_lock_free(l);
}

/* ---- admin and fencing ------------------------------------------------------ */

DLOCK_API int dlock_force_unlock(dlock_client *c, const char *name, dlock_lock_kind kind, bool *removed_out)
{
    if (!dlock__etcd_gw(c)) return dlock__redis_force_unlock(c, name, kind, removed_out);
    if (removed_out) *removed_out = false;
    if (dlock__check_name(name) || (kind != DLOCK_LOCK_SIMPLE && kind != DLOCK_LOCK_REENTRANT))
        return DLOCK_EINVAL;
    return dlock__etcd_force_unlock(c, name, kind, removed_out);
}

DLOCK_API int dlock_lock_status_get(dlock_client *c, const char *name, dlock_lock_status *st)
{
    if (!dlock__etcd_gw(c)) return dlock__redis_lock_status_get(c, name, st);
    if (!st) return DLOCK_EINVAL;
    memset(st, 0, sizeof(*st));
    st->ttl_ms = -2;
    if (dlock__check_name(name)) return DLOCK_EINVAL;
    return dlock__etcd_status_get(c, name, st);
}

DLOCK_API int dlock_fence_guard(dlock_client *c, const char *resource, uint64_t token, uint64_t *highest_out)
{
    if (!dlock__etcd_gw(c)) return dlock__redis_fence_guard(c, resource, token, highest_out);
    if (highest_out) *highest_out = 0;
    if (dlock__check_name(resource) || token == 0) return DLOCK_EINVAL;
    return dlock__etcd_fence_guard(c, resource, token, highest_out);
}
