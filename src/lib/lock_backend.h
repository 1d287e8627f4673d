/* lock_backend.h: the Redis implementation of the lock API under internal
 * names (lock.c renames its public functions to these), so that
 * lock_dispatch.c can define the public dlock_lock_* functions and send
 * each call to the Redis or the etcd backend. Internal only. */
#ifndef DLOCK_LIB_LOCK_BACKEND_H
#define DLOCK_LIB_LOCK_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "dlock/lock.h"

int dlock__redis_lock_new(dlock_client *c, const char *name, const dlock_lock_options *opts, dlock_lock **out);
int dlock__redis_lock_try_lock(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, uint64_t *fence_out);
int dlock__redis_lock_unlock(dlock_lock *l);
void dlock__redis_lock_cancel(dlock_lock *l);
bool dlock__redis_lock_is_held(dlock_lock *l);
int dlock__redis_lock_is_held_by_me(dlock_lock *l, bool *held_out);
int dlock__redis_lock_is_locked(dlock_lock *l, bool *locked_out);
int dlock__redis_lock_hold_count(dlock_lock *l, int64_t *count_out);
int dlock__redis_lock_remaining_ttl(dlock_lock *l, int64_t *ttl_ms_out);
int dlock__redis_lock_extend(dlock_lock *l, int64_t lease_ms);
const char *dlock__redis_lock_name(const dlock_lock *l);
const char *dlock__redis_lock_key(const dlock_lock *l);
const char *dlock__redis_lock_owner(const dlock_lock *l);
uint64_t dlock__redis_lock_fence(const dlock_lock *l);
void dlock__redis_lock_free(dlock_lock *l);
int dlock__redis_force_unlock(dlock_client *c, const char *name, dlock_lock_kind kind, bool *removed_out);
int dlock__redis_lock_status_get(dlock_client *c, const char *name, dlock_lock_status *st);
int dlock__redis_fence_guard(dlock_client *c, const char *resource, uint64_t token, uint64_t *highest_out);

#endif
