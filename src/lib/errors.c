/* errors.c: names for dlock_err codes; the one table every program and the
 * docs refer to. Invariant: every enumerator has a distinct message. */
#include <stdlib.h>

#include "dlock/dlock.h"

DLOCK_API const char *dlock_strerror(int err)
{
    switch ((dlock_err)err) {
    case DLOCK_OK: return "success";
    case DLOCK_EINVAL: return "invalid argument";
    case DLOCK_EURL: return "malformed Redis URL";
    case DLOCK_ETLS: return "TLS (rediss://) needs hiredis >= 1.0";
    case DLOCK_EAUTH: return "authentication failed";
    case DLOCK_ECONN: return "could not connect to Redis";
    case DLOCK_ETIMEOUT: return "timed out waiting";
    case DLOCK_EIO: return "I/O error";
    case DLOCK_ESERVER: return "Redis server error";
    case DLOCK_EUNKNOWN: return "outcome unknown (sent, then the connection failed or timed out)";
    case DLOCK_ENOMEM: return "out of memory";
    case DLOCK_EBUSY: return "held by another owner";
    case DLOCK_ENOTOWNER: return "not the owner";
    case DLOCK_ELOST: return "lock was lost while held";
    case DLOCK_ENOTREPL: return "too few replicas acknowledged; released";
    case DLOCK_ECANCELED: return "wait cancelled";
    case DLOCK_EALREADY: return "already held through this handle";
    case DLOCK_ENOTHELD: return "not held through this handle";
    case DLOCK_EUPGRADE: return "read-to-write upgrade refused";
    case DLOCK_ENOQUORUM: return "no quorum of RedLock nodes";
    case DLOCK_ELIMIT: return "limit exceeded";
    case DLOCK_ECLOSED: return "client is closing";
    case DLOCK_ESTALE: return "stale fencing token";
    case DLOCK_ENOTSUP: return "not supported by this backend";
    }
    return "unknown error code";
}

DLOCK_API void dlock_free(void *p)
{
    free(p);
}
