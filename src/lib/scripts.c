/* scripts.c: the scripts dlock__pool_start loads when a client is created
 * (see scripts.h). The dlock__script values themselves are generated at
 * build time from lua/ (cmake/embed_run.cmake), each once. */
#include "scripts.h"

const dlock__script *const dlock__preload_scripts[] = {
    &dlock__script_lock_acquire,  &dlock__script_rlock_acquire, &dlock__script_lock_release,
    &dlock__script_rlock_release, &dlock__script_lock_renew,    &dlock__script_rlock_renew,
    NULL};
