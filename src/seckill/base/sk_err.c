/* sk_err.c: messages for sk_err (dlock_err codes are named by libdlock)
 * and the engine's edge to the common layer's codes. */
#include "sk_err.h"

#include "common_err.h"
#include "dlock/dlock.h"

int sk_err_from_common(int rc)
{
    switch ((dlock__err)rc) {
    case DLOCK__OK: return SK_OK;
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
    case DLOCK__ECROSSSLOT: return SK_EINVAL;
    }
    return DLOCK_EIO; /* not a common code: never produced by src/common */
}

const char *sk_strerror(int err)
{
    switch (err) {
    case SK_EINVAL: return "invalid input";
    case SK_ENOTFOUND: return "not found";
    case SK_EEXIST: return "already exists";
    case SK_ESOLDOUT: return "sold out";
    case SK_ELIMIT: return "per-user limit reached";
    case SK_ENOTSTARTED: return "campaign has not started";
    case SK_EENDED: return "campaign has ended";
    case SK_ECONFLICT: return "order status forbids it";
    case SK_EFORBIDDEN: return "forbidden";
    case SK_EDB: return "database error";
    case SK_ERATE: return "rate limited";
    case SK_EUNAVAIL: return "service unavailable";
    case SK_EGUARD: return "database guard refused the order";
    case SK_ELIVE: return "campaign is live";
    case SK_EIDEMPOTENCY: return "Idempotency-Key used by another user";
    case SK_EQUEUEFULL: return "too many purchases waiting";
    case SK_EBARRIER: return "campaign recovering after a change of master";
    case SK_EIDEMWAIT: return "purchases with an Idempotency-Key wait for Redis";
    case SK_ERESERVE: return "database reserve used up while Redis is unavailable";
    case DLOCK__ECROSSSLOT: return dlock__strerror(err); /* internal: mapped at the edge, named anyway */
    default: return dlock_strerror(err);
    }
}
