/* ids.c: the identifier rules of ids.h. Campaign and user ids end up in
 * Redis key names and SQL rows, so they are kept to a small ASCII set;
 * Idempotency-Keys are only stored as values and may be any printable
 * ASCII without spaces. */
#include "ids.h"

#include <string.h>

/* The characters of each id, by byte: bit 1 a campaign id's
 * ([A-Za-z0-9_-]), bit 2 a user id's (those and '.' ':'); bytes from 128
 * on are neither. A table, not strchr: every purchase checks both ids on
 * its way in, at each door. */
enum { CAMPAIGN_CH = 1, USER_CH = 2 };
static const unsigned char id_chars[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 2, 0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 0, 0, 0, 0, 0,
    0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 3,
    0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0,
};

/* 1-64 bytes, each of class cls. */
static bool valid_chars(const char *s, unsigned char cls)
{
    if (!s) return false;
    size_t n = 0;
    for (; s[n]; n++)
        if (n == SK_ID_MAX || !(id_chars[(unsigned char)s[n]] & cls)) return false;
    return n >= 1;
}

bool sk_valid_campaign_id(const char *s) { return valid_chars(s, CAMPAIGN_CH); }

bool sk_valid_user_id(const char *s) { return valid_chars(s, USER_CH); }

bool sk_valid_idem_key(const char *s)
{
    if (!s) return false;
    size_t n = strlen(s);
    if (n < 1 || n > SK_ID_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) return false;
    return true;
}

bool sk_valid_qty(int64_t qty) { return qty >= 1 && qty <= SK_QTY_MAX; }

const char *sk_purchase_invalid(const char *campaign, const char *user, int64_t qty, const char *idem)
{
    if (!sk_valid_campaign_id(campaign)) return "campaign id must be " SK_CAMPAIGN_ID_RULE;
    if (!sk_valid_user_id(user)) return "X-User-Id must be " SK_USER_ID_RULE;
    if (idem && !sk_valid_idem_key(idem)) return "Idempotency-Key must be " SK_IDEM_KEY_RULE;
    if (!sk_valid_qty(qty)) return "quantity must be " SK_QTY_RULE;
    return NULL;
}
