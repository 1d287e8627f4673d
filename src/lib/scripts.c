/* scripts.c: the shared libdlock scripts as dlock__script values (see
 * scripts.h). The SHA cache keys on the embedded source, so each script
 * exists once here and everyone points at the same value. */
#include "scripts.h"

extern const unsigned char dlock__lua_lock_acquire[], dlock__lua_lock_release[],
    dlock__lua_lock_renew[], dlock__lua_rlock_acquire[], dlock__lua_rlock_release[],
    dlock__lua_rlock_renew[];

const dlock__script dlock__script_lock_acquire = {"lock_acquire", dlock__lua_lock_acquire};
const dlock__script dlock__script_lock_release = {"lock_release", dlock__lua_lock_release};
const dlock__script dlock__script_lock_renew = {"lock_renew", dlock__lua_lock_renew};
const dlock__script dlock__script_rlock_acquire = {"rlock_acquire", dlock__lua_rlock_acquire};
const dlock__script dlock__script_rlock_release = {"rlock_release", dlock__lua_rlock_release};
const dlock__script dlock__script_rlock_renew = {"rlock_renew", dlock__lua_rlock_renew};

const dlock__script *const dlock__preload_scripts[] = {
    &dlock__script_lock_acquire,  &dlock__script_rlock_acquire, &dlock__script_lock_release,
    &dlock__script_rlock_release, &dlock__script_lock_renew,    &dlock__script_rlock_renew,
    NULL};
