/* common_err.c: names of the common layer's error codes (common_err.h). */
#include "common_err.h"

static const int codes[] = {DLOCK__OK,      DLOCK__EINVAL,   DLOCK__EURL,     DLOCK__ETLS,
                            DLOCK__EAUTH,   DLOCK__ECONN,    DLOCK__ETIMEOUT, DLOCK__EIO,
                            DLOCK__ESERVER, DLOCK__EUNKNOWN, DLOCK__ENOMEM,   DLOCK__ECROSSSLOT};

const int *dlock__err_codes(size_t *n_out)
{
    *n_out = sizeof(codes) / sizeof(codes[0]);
    return codes;
}

const char *dlock__strerror(int err)
{
    switch (err) {
    case DLOCK__OK: return "ok";
    case DLOCK__EINVAL: return "invalid argument";
    case DLOCK__EURL: return "malformed URL";
    case DLOCK__ETLS: return "TLS is not available in this build";
    case DLOCK__EAUTH: return "authentication refused";
    case DLOCK__ECONN: return "could not connect";
    case DLOCK__ETIMEOUT: return "timed out";
    case DLOCK__EIO: return "I/O error";
    case DLOCK__ESERVER: return "server error";
    case DLOCK__EUNKNOWN: return "outcome unknown";
    case DLOCK__ENOMEM: return "out of memory";
    case DLOCK__ECROSSSLOT: return "keys of one command are in different cluster slots";
    default: return "unknown error";
    }
}
