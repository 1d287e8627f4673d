/* ids.h: the identifiers the flash sale accepts, one rule each, used at
 * every door (HTTP, engine, degraded path, database, stream consumer) so an
 * id one door takes is never refused by another. docs/http-api.md states
 * the same rules. Pure functions: safe from any thread. */
#ifndef SK_IDS_H
#define SK_IDS_H

#include <stdbool.h>

/* The rules in words, for error messages. */
#define SK_CAMPAIGN_ID_RULE "1-64 characters of [A-Za-z0-9_-]"
#define SK_USER_ID_RULE "1-64 characters of [A-Za-z0-9_.:-]"
#define SK_IDEM_KEY_RULE "1-64 printable characters"

/* Each is false for NULL. */
bool sk_valid_campaign_id(const char *s); /* SK_CAMPAIGN_ID_RULE */
bool sk_valid_user_id(const char *s);     /* SK_USER_ID_RULE */
bool sk_valid_idem_key(const char *s);    /* printable ASCII, no space */

#endif
