/* rulebook.h: the purchase rulebook, written once and read at every door
 * (HTTP, the purchase route, the engine, the degraded path, the database,
 * the stream consumer), so that what one door takes is never refused by
 * another and every path answers alike:
 *
 * - what a purchase may ask: the identifiers and quantities the flash sale
 *   accepts, one rule each and one table of limits (docs/http-api.md
 *   states the same rules);
 * - what each answer is: the purchase outcomes and rejection reasons. Each
 *   row ties together what every layer says about one outcome:
 *   purchase.lua's code, the sk_err the engine reports, the metric label,
 *   the HTTP answer (status, error code, message) and, for a reason the
 *   database guard stores, its text. The engine, the degraded database
 *   path, the SQLite and PL/pgSQL guards (orders.reason_code holds the
 *   id), the metrics and the HTTP front end all read this table;
 *   purchase.lua names its codes by the same labels
 *   (tests/seckill/test_sk_unit.c, test_rulebook.c). Ids are stored in
 *   the database: never renumber a row, append.
 *
 * Pure functions and constant tables: safe from any thread. */
#ifndef SK_RULEBOOK_H
#define SK_RULEBOOK_H

#include <stdbool.h>
#include <stdint.h>

/* ---- what a purchase may ask ------------------------------------------ */

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

/* ---- what each answer is: the outcome table ---------------------------- */

typedef enum sk_outcome_id {
    SK_OUT_ACCEPTED = 0,
    SK_OUT_REPLAY,
    SK_OUT_SOLD_OUT,
    SK_OUT_LIMIT,
    SK_OUT_NOT_STARTED,
    SK_OUT_ENDED,
    SK_OUT_NOT_FOUND,
    SK_OUT_RATE,
    SK_OUT_BAD_QUANTITY,
    SK_OUT_IDEM_CONFLICT,
    SK_OUT_BARRIER,     /* meta.runid is not the connected master's: not decided */
    SK_OUT_QUEUE_FULL,
    SK_OUT_UNAVAILABLE, /* not decided; also every code no other row names */
    SK_OUT_UNKNOWN,     /* sent, no answer: the decision may have happened */
    SK_OUT_COUNT,       /* the purchase outcomes are the rows above (metrics count them) */
    /* rows past the metric rows; ids are stored in the database: append only */
    SK_OUT_STALE = SK_OUT_COUNT, /* guard only: an order of an old timeline (epoch below the campaign's) */
    SK_OUT_IDEM_DEGRADED,        /* degraded path: the database keeps no Idempotency-Keys, so a keyed
                                    purchase waits for Redis (never a second order) */
    SK_OUT_RESERVE_EMPTY,        /* degraded path: the reserve cannot cover the purchase while the
                                    campaign still has units outside it (Redis's share): not sold
                                    out, retry once Redis is back. Counted as unavailable */
    SK_OUT_ROWS
} sk_outcome_id;

/* Which result field the detailed message prints (sk_purchase_result). */
typedef enum sk_outcome_field { SK_FIELD_NONE = 0, SK_FIELD_REMAINING, SK_FIELD_VALUE } sk_outcome_field;

typedef struct sk_outcome {
    int script_code;        /* purchase.lua's code; -1: decided outside the script */
    int err;                /* what the engine reports (0: accepted or replay) */
    const char *label;      /* metric label, and the name purchase.lua gives the code */
    int http_status;
    const char *error;      /* JSON "error" (NULL when accepted) */
    const char *message;    /* JSON "message" */
    /* The detailed message, when the field is >= detail_min:
     * detail_pre <field as a decimal> detail_post. */
    sk_outcome_field field;
    int64_t detail_min;
    const char *detail_pre, *detail_post;
    int retry_after_s;      /* > 0: the answer carries Retry-After (429 takes it from value) */
    const char *stored;     /* orders.reason of an order the guard refuses for it (NULL: never stored) */
} sk_outcome;

/* Row of an outcome id, SK_OUT_STALE included (SK_OUT_UNAVAILABLE's row
 * for ids out of range). */
const sk_outcome *sk_outcome_get(int id);
/* The outcome of an engine result code; replay marks an accepted replay.
 * A code no row names (DLOCK_ENOMEM, DLOCK_ECLOSED...) is SK_OUT_UNAVAILABLE:
 * the purchase was not decided. Of the rows past the metric rows only
 * SK_OUT_RESERVE_EMPTY (for SK_ERESERVE) and SK_OUT_IDEM_DEGRADED (for
 * SK_EIDEMWAIT) are returned: a counter indexes with sk_outcome_metric. */
sk_outcome_id sk_outcome_of_err(int err, bool replay);
/* The metric row (< SK_OUT_COUNT) an outcome is counted under: itself, or
 * SK_OUT_UNAVAILABLE for a row past the metric rows (not decided). */
sk_outcome_id sk_outcome_metric(sk_outcome_id id);
/* The outcome of a purchase.lua code; SK_OUT_UNKNOWN for a code the table
 * does not know (a script and a binary out of step). */
sk_outcome_id sk_outcome_of_script(long long code);
/* The outcome id a stored orders.reason_code names; -1 when none does. */
int sk_outcome_of_reason_code(long long code);

#endif
