/* sk_err.h: error codes of the flash-sale engine (negative, 0 = ok), shared
 * by the decision side and the order pipeline; sk_strerror names them.
 * Transport codes are libdlock's (dlock_err) and pass through unchanged;
 * codes from src/common are mapped at the edge (sk_err_from_common).
 *
 * How errors are reported, everywhere in src/seckill and src/seckilld:
 * every function returns a code (0 or negative) and the code alone says
 * what happened. Where a person needs the detail, it is one line of text:
 * a function that sets something up (open, new, listen, run) or checks
 * input writes it into the caller's (char *err, size_t errlen), since no
 * handle exists yet to keep it; an operation on an open database handle
 * leaves the text of its last failure on the handle, like hiredis's
 * ctx->errstr (sk_db_errmsg). Asynchronous results carry the code alone.
 * A text never replaces a code. */
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
    SK_ECONFLICT = -107, /* the order's status forbids it (pay a cancelled order, cancel a paid one) */
    SK_EFORBIDDEN = -108,/* not this user's order */
    SK_EDB = -109,       /* database error */
    SK_ERATE = -110,     /* rate limited */
    SK_EUNAVAIL = -111,  /* Redis (and the degraded path) unavailable */
    SK_EGUARD = -112,    /* database guard refused (stock or per-user total) */
    SK_ELIVE = -113,     /* campaign is live: re-heat needs force */
    SK_EIDEMPOTENCY = -114, /* Idempotency-Key first used by another user */
    SK_EQUEUEFULL = -115,/* too many purchases waiting (coalescer or database path): retry */
    SK_EBARRIER = -116,  /* the campaign waits for the barrier after a change of master: retry */
    SK_EIDEMWAIT = -117, /* degraded: a purchase under an Idempotency-Key waits for Redis */
    SK_ERESERVE = -118,  /* degraded: the reserve cannot cover it; units may remain in Redis's share */
    SK_E_LAST = SK_ERESERVE, /* the last code: a new one moves this (tests walk the range) */
} sk_err;

/* Names every code an engine function returns: sk_err, dlock_err, and
 * the common layer's internal codes (src/common/common_err.h); never NULL. */
const char *sk_strerror(int err);

/* The engine's edge to the common layer: a dlock__err (what dlock__conn_*,
 * dlock__aconn_* and dlock__script_* return) as the engine's code of the
 * same meaning: transport codes as the dlock_err of the same name, a
 * cross-slot refusal as SK_EINVAL (a key-layout error, nothing sent). The
 * engine passes on what this returns, never a raw common code. */
int sk_err_from_common(int rc);

#endif
