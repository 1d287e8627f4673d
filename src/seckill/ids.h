/* ids.h: the identifiers and quantities the flash sale accepts, one rule
 * each and one table of limits, used at every door (HTTP, the purchase
 * entry point, engine, degraded path, database, stream consumer) so what
 * one door takes is never refused by another. docs/http-api.md states the
 * same rules. Pure functions: safe from any thread. */
#ifndef SK_IDS_H
#define SK_IDS_H

#include <stdbool.h>
#include <stdint.h>

/* The limits: plain numbers, so that the messages quoting them
 * (SK_LIMIT_TEXT) say what is checked. */
#define SK_ID_MAX 64               /* bytes of a campaign id, user id or Idempotency-Key */
#define SK_QTY_MAX 1000000         /* units of one purchase: 1..SK_QTY_MAX */
#define SK_PER_USER_MAX 1000000    /* a campaign's per_user_limit: 1..SK_PER_USER_MAX */
#define SK_STOCK_MAX 1000000000    /* a campaign's stock: 0..SK_STOCK_MAX */
#define SK_TITLE_MAX 256           /* bytes of a campaign's title */
#define SK_LIMIT_TEXT(n) SK_LIMIT_TEXT_(n)
#define SK_LIMIT_TEXT_(n) #n

/* The rules in words, for error messages. */
#define SK_CAMPAIGN_ID_RULE "1-64 characters of [A-Za-z0-9_-]"
#define SK_USER_ID_RULE "1-64 characters of [A-Za-z0-9_.:-]"
#define SK_IDEM_KEY_RULE "1-64 printable characters"
#define SK_QTY_RULE "a positive integer"

/* Each is false for NULL. */
bool sk_valid_campaign_id(const char *s); /* SK_CAMPAIGN_ID_RULE */
bool sk_valid_user_id(const char *s);     /* SK_USER_ID_RULE */
bool sk_valid_idem_key(const char *s);    /* printable ASCII, no space */
bool sk_valid_qty(int64_t qty);           /* 1..SK_QTY_MAX */

/* Why a purchase of qty units of campaign by user (idem: its
 * Idempotency-Key, NULL for none) is refused, as the HTTP API says it; NULL
 * when every part is valid. The one check of a purchase's input. */
const char *sk_purchase_invalid(const char *campaign, const char *user, int64_t qty, const char *idem);

#endif
