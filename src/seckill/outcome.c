/* outcome.c: the purchase outcome table (outcome.h). Invariant: row i has
 * id i, and no two rows share an err (except 0: accepted and replay), a
 * script code or a stored reason text, so each lookup has one answer. */
#include "outcome.h"

#include <stddef.h>

#include "dlock/dlock.h"
#include "sk_err.h"

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
