/* sk_err.c: messages for sk_err; dlock_err codes are named by libdlock. */
#include "sk_err.h"

#include "dlock/dlock.h"

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
    default: return dlock_strerror(err);
    }
}
