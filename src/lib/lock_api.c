/* lock_api.c: the public lock API of include/dlock/lock.h. It checks the
 * arguments once, for every backend alike, then calls the lock operations
 * of the table of the client's backend (backend.h). The public handle is
 * the table and the backend's own handle; the table is a constant that
 * outlives every client, so a handle can be freed after its client. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "opts_read.h"

struct dlock_lock {
    const dlock__lock_ops *ops;
    void *impl;
};

/* A label: 1..DLOCK_LABEL_MAX bytes, no control characters (it is shown
 * on one line by `dlock status` and stored after a space on etcd). */
static int check_label(const char *label)
{
    if (!label) return DLOCK_EINVAL;
    size_t n = strnlen(label, DLOCK_LABEL_MAX + 1);
    if (n == 0 || n > DLOCK_LABEL_MAX) return DLOCK_EINVAL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)label[i] < 0x20 || label[i] == 0x7f) return DLOCK_EINVAL;
    return 0;
}

DLOCK_API void dlock_lock_options_init(dlock_lock_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
}

DLOCK_API int dlock_lock_new(dlock_client *c, const char *name, const dlock_lock_options *opts,
                             dlock_lock **lock_out)
{
    if (!lock_out) return DLOCK_EINVAL;
    *lock_out = NULL;
    dlock_lock_options o;
    dlock_lock_options_init(&o);
    if (opts && dlock__opts_read(&o, sizeof(o), DLOCK__SIZE_TO(dlock_lock_options, on_lost_ud), opts))
        return DLOCK_EINVAL;
    opts = &o;
    if (!c || dlock__client_check_name(c, "lock", name) != 0) return DLOCK_EINVAL;
    if (opts->kind != DLOCK_LOCK_SIMPLE && opts->kind != DLOCK_LOCK_REENTRANT) return DLOCK_EINVAL;
    const dlock__lock_ops *ops = dlock__client_backend(c)->lock;
    if (!ops) return DLOCK_ENOTSUP;
    dlock_lock *l = calloc(1, sizeof(*l));
    if (!l) return DLOCK_ENOMEM;
    l->ops = ops;
    int rc = ops->lock_new(c, name, opts, l, &l->impl);
    if (rc) {
        free(l);
        return rc;
    }
    *lock_out = l;
    return 0;
}

DLOCK_API int dlock_lock_try_lock(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, uint64_t *fence_out)
{
    if (fence_out) *fence_out = 0;
    if (!l || lease_ms < 0 || wait_ms < DLOCK_WAIT_FOREVER) return DLOCK_EINVAL;
    return l->ops->try_lock(l->impl, wait_ms, lease_ms, fence_out);
}

DLOCK_API int dlock_lock_unlock(dlock_lock *l)
{
    return l ? l->ops->unlock(l->impl) : DLOCK_EINVAL;
}

DLOCK_API int dlock_lock_set_label(dlock_lock *l, const char *label)
{
    if (!l || check_label(label) != 0) return DLOCK_EINVAL;
    return l->ops->set_label(l->impl, label);
}

DLOCK_API void dlock_lock_cancel(dlock_lock *l)
{
    if (l) l->ops->cancel(l->impl);
}

DLOCK_API bool dlock_lock_is_held(dlock_lock *l)
{
    return l ? l->ops->validity_ms(l->impl) > 0 : false;
}

DLOCK_API int64_t dlock_lock_validity_ms(dlock_lock *l)
{
    return l ? l->ops->validity_ms(l->impl) : 0;
}

DLOCK_API int dlock_lock_hold_count(dlock_lock *l, int64_t *count_out)
{
    if (count_out) *count_out = 0;
    if (!l || !count_out) return DLOCK_EINVAL;
    return l->ops->hold_count(l->impl, count_out);
}

DLOCK_API int dlock_lock_is_held_by_me(dlock_lock *l, bool *held_out)
{
    if (held_out) *held_out = false;
    if (!l || !held_out) return DLOCK_EINVAL;
    int64_t n = 0;
    int rc = l->ops->hold_count(l->impl, &n);
    *held_out = rc == 0 && n > 0;
    return rc;
}

DLOCK_API int dlock_lock_is_locked(dlock_lock *l, bool *locked_out)
{
    if (locked_out) *locked_out = false;
    if (!l || !locked_out) return DLOCK_EINVAL;
    return l->ops->is_locked(l->impl, locked_out);
}

DLOCK_API int dlock_lock_remaining_ttl(dlock_lock *l, int64_t *ttl_ms_out)
{
    if (ttl_ms_out) *ttl_ms_out = -2;
    if (!l || !ttl_ms_out) return DLOCK_EINVAL;
    return l->ops->remaining_ttl(l->impl, ttl_ms_out);
}

DLOCK_API int dlock_lock_extend(dlock_lock *l, int64_t lease_ms)
{
    if (!l || lease_ms <= 0) return DLOCK_EINVAL;
    return l->ops->extend(l->impl, lease_ms);
}

DLOCK_API const char *dlock_lock_name(const dlock_lock *l)
{
    return l ? l->ops->name(l->impl) : "";
}

DLOCK_API const char *dlock_lock_key(const dlock_lock *l)
{
    return l ? l->ops->key(l->impl) : "";
}

DLOCK_API const char *dlock_lock_owner(const dlock_lock *l)
{
    return l ? l->ops->owner(l->impl) : "";
}

DLOCK_API uint64_t dlock_lock_fence(const dlock_lock *l)
{
    return l ? l->ops->fence(l->impl) : 0;
}

DLOCK_API void dlock_lock_free(dlock_lock *l)
{
    if (!l) return;
    l->ops->free(l->impl);
    free(l);
}

/* ---- admin and fencing ------------------------------------------------------ */

DLOCK_API int dlock_force_unlock(dlock_client *c, const char *name, dlock_lock_kind kind, bool *removed_out)
{
    if (removed_out) *removed_out = false;
    if (!c || dlock__client_check_name(c, "lock", name) ||
        (kind != DLOCK_LOCK_SIMPLE && kind != DLOCK_LOCK_REENTRANT))
        return DLOCK_EINVAL;
    const dlock__lock_ops *ops = dlock__client_backend(c)->lock;
    return ops ? ops->force_unlock(c, name, kind, removed_out) : DLOCK_ENOTSUP;
}

DLOCK_API int dlock_lock_status_get(dlock_client *c, const char *name, dlock_lock_status *st)
{
    if (!st) return DLOCK_EINVAL;
    memset(st, 0, sizeof(*st));
    st->ttl_ms = -2;
    if (!c || dlock__client_check_name(c, "lock", name)) return DLOCK_EINVAL;
    const dlock__lock_ops *ops = dlock__client_backend(c)->lock;
    return ops ? ops->status_get(c, name, st, NULL) : DLOCK_ENOTSUP;
}

DLOCK_API int dlock_lock_label_get(dlock_client *c, const char *name, char **label_out)
{
    if (!label_out) return DLOCK_EINVAL;
    *label_out = NULL;
    if (!c || dlock__client_check_name(c, "lock", name)) return DLOCK_EINVAL;
    const dlock__lock_ops *ops = dlock__client_backend(c)->lock;
    if (!ops) return DLOCK_ENOTSUP;
    dlock__holder_extra x;
    dlock_lock_status st;
    memset(&st, 0, sizeof(st));
    int rc = ops->status_get(c, name, &st, &x);
    if (rc) return rc;
    *label_out = strdup(x.label);
    return *label_out ? 0 : DLOCK_ENOMEM;
}

DLOCK_API int dlock_fence_guard(dlock_client *c, const char *resource, uint64_t token, uint64_t *highest_out)
{
    if (highest_out) *highest_out = 0;
    if (!c || dlock__client_check_name(c, "fence-guard resource", resource) || token == 0)
        return DLOCK_EINVAL;
    const dlock__lock_ops *ops = dlock__client_backend(c)->lock;
    return ops ? ops->fence_guard(c, resource, token, highest_out) : DLOCK_ENOTSUP;
}

DLOCK_API int dlock_fence_compare(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}
