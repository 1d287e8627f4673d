/* rulebook.c: the purchase rulebook (rulebook.h). Campaign and user ids
 * end up in Redis key names and SQL rows, so they are kept to a small
 * ASCII set; Idempotency-Keys are only stored as values and may be any
 * printable ASCII without spaces. Invariant of the outcome table: row i
 * has id i, and no two rows share an err (except 0: accepted and replay),
 * a script code or a stored reason text, so each lookup has one answer. */
#include "rulebook.h"

#include <stddef.h>
#include <string.h>

#include "dlock/dlock.h"
#include "sk_err.h"

/* ---- what a purchase may ask ------------------------------------------ */

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

/* ---- what each answer is ----------------------------------------------- */

#define NONE SK_FIELD_NONE, 0, NULL, NULL
#define NORETRY 0

static const sk_outcome table[SK_OUT_ROWS] = {
    [SK_OUT_ACCEPTED] = {0, 0, "accepted", 201, NULL, "accepted", NONE, NORETRY, NULL},
    [SK_OUT_REPLAY] = {1, 0, "replay", 201, NULL, "accepted", NONE, NORETRY, NULL},
    [SK_OUT_SOLD_OUT] = {2, SK_ESOLDOUT, "sold_out", 409, "sold_out", "sold out", SK_FIELD_REMAINING, 1,
                         "only ", " left", NORETRY, "sold out in database"},
    [SK_OUT_LIMIT] = {3, SK_ELIMIT, "limit_reached", 409, "limit_reached", "per-user limit reached",
                      SK_FIELD_VALUE, 0, "per-user limit reached (you hold ", ")", NORETRY, "per-user limit"},
    [SK_OUT_NOT_STARTED] = {4, SK_ENOTSTARTED, "not_started", 409, "not_started", "campaign has not started",
                            SK_FIELD_VALUE, INT64_MIN, "campaign starts in ", " ms", NORETRY, NULL},
    [SK_OUT_ENDED] = {5, SK_EENDED, "ended", 409, "ended", "campaign has ended", NONE, NORETRY, NULL},
    [SK_OUT_NOT_FOUND] = {6, SK_ENOTFOUND, "not_found", 404, "not_found", "no such campaign", NONE, NORETRY,
                          "unknown campaign"},
    [SK_OUT_RATE] = {7, SK_ERATE, "rate_limited", 429, "rate_limited", "too many purchase attempts; retry later",
                     NONE, NORETRY, NULL},
    [SK_OUT_BAD_QUANTITY] = {8, SK_EINVAL, "bad_quantity", 400, "bad_request", "bad quantity", SK_FIELD_VALUE,
                             1, "quantity must be 1..", "", NORETRY, "quantity above the per-user limit"},
    [SK_OUT_IDEM_CONFLICT] = {9, SK_EIDEMPOTENCY, "idempotency_conflict", 400, "bad_request",
                              "Idempotency-Key already used by another user", NONE, NORETRY, NULL},
    [SK_OUT_BARRIER] = {10, SK_EBARRIER, "barrier", 503, "recovering",
                        "campaign recovering after a change of Redis master; retry shortly", NONE, 1, NULL},
    [SK_OUT_QUEUE_FULL] = {-1, SK_EQUEUEFULL, "queue_full", 503, "unavailable",
                           "too many purchases waiting; retry later", NONE, NORETRY, NULL},
    [SK_OUT_UNAVAILABLE] = {-1, SK_EUNAVAIL, "unavailable", 503, "unavailable", "Redis unavailable", NONE, NORETRY, NULL},
    [SK_OUT_UNKNOWN] = {-1, DLOCK_EUNKNOWN, "unknown", 503, "outcome_unknown",
                        "Redis did not answer: outcome unknown; retry with the same Idempotency-Key", NONE,
                        NORETRY, NULL},
    [SK_OUT_STALE] = {-1, SK_EGUARD, "stale", 503, "unavailable", "order of an old timeline", NONE, NORETRY,
                      "stale timeline"},
    [SK_OUT_IDEM_DEGRADED] = {-1, SK_EIDEMWAIT, "idem_degraded", 503, "unavailable",
                              "Redis unavailable: purchases with an Idempotency-Key wait for it; retry later", NONE,
                              NORETRY, NULL},
    [SK_OUT_RESERVE_EMPTY] = {-1, SK_ERESERVE, "reserve_exhausted", 503, "degraded_reserve_exhausted",
                              "Redis unavailable and this campaign's database reserve is used up (it is not "
                              "sold out: the rest of its stock is Redis's to sell); retry later",
                              SK_FIELD_REMAINING, 1,
                              "Redis unavailable and this campaign's database reserve has only ",
                              " left; buy fewer or retry later", 1, NULL},
};

const sk_outcome *sk_outcome_get(int id)
{
    return &table[id >= 0 && id < SK_OUT_ROWS ? id : SK_OUT_UNAVAILABLE];
}

sk_outcome_id sk_outcome_of_err(int err, bool replay)
{
    if (err == 0) return replay ? SK_OUT_REPLAY : SK_OUT_ACCEPTED;
    for (int i = SK_OUT_SOLD_OUT; i < SK_OUT_COUNT; i++)
        if (table[i].err == err) return (sk_outcome_id)i;
    if (err == SK_ERESERVE) return SK_OUT_RESERVE_EMPTY;
    if (err == SK_EIDEMWAIT) return SK_OUT_IDEM_DEGRADED;
    return SK_OUT_UNAVAILABLE;
}

sk_outcome_id sk_outcome_metric(sk_outcome_id id)
{
    return id >= 0 && id < SK_OUT_COUNT ? id : SK_OUT_UNAVAILABLE;
}

sk_outcome_id sk_outcome_of_script(long long code)
{
    for (int i = 0; i < SK_OUT_COUNT; i++)
        if (table[i].script_code >= 0 && table[i].script_code == code) return (sk_outcome_id)i;
    return SK_OUT_UNKNOWN;
}

int sk_outcome_of_reason_code(long long code)
{
    return code > 0 && code < SK_OUT_ROWS && table[code].stored ? (int)code : -1;
}
