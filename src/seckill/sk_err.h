/* sk_err.h: error codes of the flash-sale engine (negative, 0 = ok), shared
 * by the decision side and the order pipeline; sk_strerror names them.
 * Transport codes are libdlock's (dlock_err) and pass through unchanged. */
#ifndef SK_ERR_H
#define SK_ERR_H

typedef enum sk_err {
    SK_OK = 0,
    /* -1 .. -99: dlock_err values, passed through (connection, timeout...) */
    SK_EINVAL = -100,    /* malformed input (id, quantity, JSON, URL) */
    SK_ENOTFOUND = -101, /* no such campaign / order */
    SK_EEXIST = -102,    /* campaign already exists */
    SK_ESOLDOUT = -103,
    SK_ELIMIT = -104,    /* per-user limit reached */
    SK_ENOTSTARTED = -105,
    SK_EENDED = -106,
    SK_ECONFLICT = -107, /* state conflict (pay a cancelled order, live campaign re-heat) */
    SK_EFORBIDDEN = -108,/* not this user's order */
    SK_EDB = -109,       /* database error */
    SK_ERATE = -110,     /* rate limited */
    SK_EUNAVAIL = -111,  /* Redis (and the degraded path) unavailable */
    SK_EGUARD = -112,    /* database guard refused (stock or per-user total) */
} sk_err;

const char *sk_strerror(int err);

#endif
