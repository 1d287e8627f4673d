/* auth.h: who a request speaks for: the admin bearer token, and the
 * buyer's identity (X-User-Id, signed by X-User-Signature when a user
 * secret is set; docs/http-api.md, "Signed identities"). Secrets are
 * compared in constant time; nothing here keeps state between requests
 * (an sk_auth holds its secrets' keyed MAC states, used by one thread at a
 * time). */
#ifndef SK_AUTH_H
#define SK_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hmac_key.h"

/* The leeway after a signature's exp during which it is still accepted
 * (clocks of the signer and seckilld may differ by this much). */
#define SK_SIG_SKEW_S 30
/* The latest exp read (9999-12-31T23:59:59Z): like every time seckilld
 * reads, within what RFC 3339 writes; a later one is malformed. */
#define SK_SIG_EXP_MAX_S INT64_C(253402300799)

typedef struct sk_auth {
    char *admin_token;      /* "": the admin API answers 401 */
    char *user_secret;      /* "": unsigned mode (X-User-Id believed as is) */
    char *user_secret_prev; /* "": no previous secret (key rotation) */
    bool legacy;            /* the unexpiring form (hex HMAC of the user id) accepted too */
    sk_hmac_key mac, mac_prev; /* user_secret's and user_secret_prev's (when set) */
} sk_auth;

/* Copies the strings (NULL = ""). 0 or DLOCK_ENOMEM (a freed a). */
int sk_auth_init(sk_auth *a, const char *admin_token, const char *user_secret, const char *user_secret_prev,
                 bool legacy);
void sk_auth_free(sk_auth *a);

/* What a check of X-User-Signature found. */
typedef enum sk_sig_result {
    SK_SIG_OK = 0,
    SK_SIG_MISSING,   /* no header */
    SK_SIG_MALFORMED, /* not v1=<hex>;exp=<unix s>[;c=<campaign>] */
    SK_SIG_LEGACY,    /* the unexpiring form, not accepted here */
    SK_SIG_BAD,       /* no active secret made this MAC */
    SK_SIG_EXPIRED,   /* a true MAC, past exp + SK_SIG_SKEW_S */
    SK_SIG_CAMPAIGN,  /* a true MAC bound to another campaign than the route's */
} sk_sig_result;

/* Checks sig (may be NULL) for user at now_s (unix seconds). campaign: the
 * route's campaign, or NULL where the route has none. A campaign-bound
 * signature's campaign is written to bound (65 bytes; "" when unbound). */
sk_sig_result sk_auth_check_sig(const sk_auth *a, const char *user, const char *sig, const char *campaign,
                                int64_t now_s, char bound[65]);

/* The v1 form for user, valid until exp (unix s), bound to campaign when
 * not NULL, into out (cap >= SK_SIG_MAX). 0, or -1 when it does not fit. */
#define SK_SIG_MAX 160
int sk_auth_sign(const char *secret, const char *user, int64_t exp, const char *campaign, char *out, size_t cap);

/* Whether authorization (an Authorization header, or NULL) is the admin
 * bearer token. */
bool sk_auth_is_admin(const sk_auth *a, const char *authorization);

#endif
