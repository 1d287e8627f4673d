/* errors.c: how libdlock reports: names for dlock_err codes (the one table
 * every program and the docs refer to), the edge where the common layer's
 * codes (common_err.h) become dlock_err, and the log hook. Invariant: every
 * enumerator has a distinct message. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "client_priv.h"
#include "common_err.h"

DLOCK_API const char *dlock_strerror(int err)
{
    switch ((dlock_err)err) {
    case DLOCK_OK: return "success";
    case DLOCK_EINVAL: return "invalid argument";
    case DLOCK_EURL: return "malformed URL";
    case DLOCK_ETLS: return "TLS to Redis (rediss://) is not available in this build: use redis:// through a local TLS tunnel (docs/ops/tls.md)";
    case DLOCK_EAUTH: return "authentication failed";
    case DLOCK_ECONN: return "could not connect to the server";
    case DLOCK_ETIMEOUT: return "timed out waiting";
    case DLOCK_EIO: return "I/O error";
    case DLOCK_ESERVER: return "the server answered an error";
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

int dlock__err_from_common(int rc)
{
    switch ((dlock__err)rc) {
    case DLOCK__OK: return DLOCK_OK;
    case DLOCK__EINVAL: return DLOCK_EINVAL;
    case DLOCK__EURL: return DLOCK_EURL;
    case DLOCK__ETLS: return DLOCK_ETLS;
    case DLOCK__EAUTH: return DLOCK_EAUTH;
    case DLOCK__ECONN: return DLOCK_ECONN;
    case DLOCK__ETIMEOUT: return DLOCK_ETIMEOUT;
    case DLOCK__EIO: return DLOCK_EIO;
    case DLOCK__ESERVER: return DLOCK_ESERVER;
    case DLOCK__EUNKNOWN: return DLOCK_EUNKNOWN;
    case DLOCK__ENOMEM: return DLOCK_ENOMEM;
    case DLOCK__ECROSSSLOT: return DLOCK_EINVAL; /* a key layout error: nothing was sent */
    }
    return DLOCK_EIO; /* not a common code: never produced by src/common */
}

void dlock__vlog_opts(const dlock_client_options *o, dlock_log_level level, const char *fmt, va_list ap)
{
    if (!o || !o->log_fn || level < o->log_level) return;
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    o->log_fn(level, msg, o->log_ud);
}

void dlock__log_opts(const dlock_client_options *o, dlock_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dlock__vlog_opts(o, level, fmt, ap);
    va_end(ap);
}

void dlock__log(const dlock_client *c, dlock_log_level level, const char *fmt, ...)
{
    if (!c) return;
    va_list ap;
    va_start(ap, fmt);
    dlock__vlog_opts(&c->opts, level, fmt, ap);
    va_end(ap);
}
