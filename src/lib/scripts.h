/* scripts.h: the Lua scripts (src/lib/lua/, embedded at build time)
 * that more than one file of libdlock runs: the lock scripts, which the
 * pool loads with SCRIPT LOAD when a client is created, and the owner-count
 * renewal that the reentrant and the fair lock share (same hash layout).
 * A script only one object runs stays static in that object's file. */
#ifndef DLOCK_LIB_SCRIPTS_H
#define DLOCK_LIB_SCRIPTS_H

#include "client_internal.h"

extern const dlock__script dlock__script_lock_acquire;  /* lua/lock_acquire.lua */
extern const dlock__script dlock__script_lock_release;  /* lua/lock_release.lua */
extern const dlock__script dlock__script_lock_renew;    /* lua/lock_renew.lua */
extern const dlock__script dlock__script_rlock_acquire; /* lua/rlock_acquire.lua */
extern const dlock__script dlock__script_rlock_release; /* lua/rlock_release.lua */
extern const dlock__script dlock__script_rlock_renew;   /* lua/rlock_renew.lua (also the fair lock's) */

/* The scripts dlock__pool_start loads; NULL-terminated. */
extern const dlock__script *const dlock__preload_scripts[];

#endif
