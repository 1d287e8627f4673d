/* ids.c: the identifier rules of ids.h. Campaign and user ids end up in
 * Redis key names and SQL rows, so they are kept to a small ASCII set;
 * Idempotency-Keys are only stored as values and may be any printable
 * ASCII without spaces. */
#include "ids.h"

#include <string.h>

/* 1-64 bytes, each alphanumeric or one of extra. */
static bool valid_chars(const char *s, const char *extra)
{
    if (!s) return false;
    size_t n = strlen(s);
    if (n < 1 || n > SK_ID_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  strchr(extra, c) != NULL;
        if (!ok) return false;
    }
    return true;
}

bool sk_valid_campaign_id(const char *s) { return valid_chars(s, "_-"); }

bool sk_valid_user_id(const char *s) { return valid_chars(s, "_.:-"); }

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
