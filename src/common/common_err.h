/* common_err.h: the error codes of the common layer (src/common). Layer 1
 * includes nothing from the layers above, so it has its own small set, the
 * one internal error enum: libdlock maps it to dlock_err at its edge
 * (dlock__err_from_common, src/lib/errors.c), the engine to its codes at
 * its edge (sk_err_from_common, src/seckill/base/sk_err.c); no code relies on a
 * value being equal across the enums. "Outcome unknown" (sent, then the reply was lost) is kept
 * apart from every "not applied" code, as everywhere in dlock. */
#ifndef DLOCK_COMMON_ERR_H
#define DLOCK_COMMON_ERR_H

#include <stddef.h>

typedef enum dlock__err {
    DLOCK__OK = 0,
    DLOCK__EINVAL = -1,   /* bad argument or malformed input */
    DLOCK__EURL = -2,     /* malformed URL */
    DLOCK__ETLS = -3,     /* TLS asked for, not available with this hiredis */
    DLOCK__EAUTH = -4,    /* AUTH refused */
    DLOCK__ECONN = -5,    /* could not connect */
    DLOCK__ETIMEOUT = -6, /* a bounded wait ran out */
    DLOCK__EIO = -7,      /* I/O error before anything was sent */
    DLOCK__ESERVER = -8,  /* the server answered an error, or bad protocol */
    DLOCK__EUNKNOWN = -9, /* sent, then lost or timed out: outcome unknown */
    DLOCK__ENOMEM = -10,  /* out of memory */
    /* Cluster: one command's keys hash to different slots (nothing sent). Far
     * from the dlock_err values on purpose: libdlock maps it to DLOCK_EINVAL. */
    DLOCK__ECROSSSLOT = -64,
} dlock__err;

/* Short English description of a dlock__err; never NULL. */
const char *dlock__strerror(int err);
/* Every dlock__err value (*n_out of them), so the layers above can check
 * that their edges map and name each one. */
const int *dlock__err_codes(size_t *n_out);

#endif
