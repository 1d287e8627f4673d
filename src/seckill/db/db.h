/* db.h: the system of record of the flash sale (SQLite or PostgreSQL).
 * Invariant: the database never sells more than a campaign's stock nor more
 * than per_user_limit to one user, whatever Redis says: every order goes
 * through the guard (UPDATE campaign_stock ... WHERE remaining >= qty and a
 * guarded per-user total) inside the transaction that records it. The
 * reserve (reserve_remaining, sold only by the database path) and Redis's
 * share (remaining - reserve_remaining) never mix, and an order of an old
 * timeline (epoch below the campaign's) is refused unless already held.
 * Thread-safety: an sk_db handle is used by one thread at a time; open one
 * handle per thread. Schema: docs/schema.md. */
#ifndef SK_DB_H
#define SK_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "campaign_def.h"
#include "db_handle.h" /* sk_db, its URL rules, kind and last error */
#include "rulebook.h"

/* Opens url and runs the schema migrations (idempotent, safe when several
 * processes open the same database at once). url: "sqlite:///abs/path.db",
 * a plain file path (SQLite), or "postgresql://..." / "postgres://...".
 * Returns 0, SK_EINVAL (bad url) or SK_EDB; err says why. */
int sk_db_open(const char *url, sk_db **out, char *err, size_t errlen);
void sk_db_close(sk_db *db); /* NULL ok */
/* Cheap liveness check (SELECT 1; reconnects a broken PostgreSQL
 * connection). 0 or SK_EDB. */
int sk_db_ping(sk_db *db);
/* Current schema version (after migrations). */
int sk_db_schema_version(sk_db *db, int *version_out);


/* Creates the campaign and its campaign_stock row (remaining = stock,
 * reserve_remaining = db_reserve, epoch 1), with its bucket layout
 * (shards, 0 read as 1, and bucket_tags, kept "" when shards is 1). 0,
 * SK_EEXIST, SK_EINVAL (bad id, stock < 0, limit < 1, db_reserve outside
 * 0..stock, shards outside 0..SK_MAX_SHARDS, tags sk_buckets_parse refuses
 * for shards) or SK_EDB. get and list fill shards (>= 1) and bucket_tags. */
int sk_db_campaign_create(sk_db *db, const sk_campaign *c);
/* Deletes a campaign that has no order at all (its campaign_stock row
 * too): the undo of a creation Redis did not take. 0, SK_ECONFLICT (it
 * has orders: kept), SK_ENOTFOUND, SK_EINVAL or SK_EDB. */
int sk_db_campaign_delete_unsold(sk_db *db, const char *id);
/* 0 or SK_ENOTFOUND / SK_EDB; remaining_out may be NULL. */
int sk_db_campaign_get(sk_db *db, const char *id, sk_campaign *out, int64_t *remaining_out);
/* Calls cb for every campaign, ordered by id. 0 or SK_EDB. */
typedef void (*sk_db_campaign_cb)(const sk_campaign *c, int64_t remaining, void *ud);
int sk_db_campaign_list(sk_db *db, sk_db_campaign_cb cb, void *ud);

typedef struct sk_order_row {
    uint64_t order_id;
    char campaign[65];
    char user[65];
    int64_t qty;
    char status[16]; /* persisted | paid | cancelled | rejected | pending (tentative, path db) */
    char reason[64]; /* why rejected / cancelled; "" otherwise */
    char path[8];    /* redis | db */
    int64_t created_ms, updated_ms; /* wall clock ms */
    char idem[65];   /* Idempotency-Key of the purchase ("" if none) */
    int64_t epoch;   /* timeline the order was decided in (stream field epoch; 1 if absent) */
    bool redis_mirrored, redis_released;
    int reason_code; /* rejected: the outcome id of the reason (rulebook.h); 0 otherwise */
} sk_order_row;

/* 0 or SK_ENOTFOUND / SK_EDB. */
int sk_db_order_get(sk_db *db, uint64_t order_id, sk_order_row *out);
/* persisted -> paid. Paying a paid order again (same user) is 0.
 * 0, SK_ENOTFOUND, SK_EFORBIDDEN (another user's order), SK_ECONFLICT
 * (cancelled or rejected), SK_EDB. out (may be NULL) gets the row. */
int sk_db_order_pay(sk_db *db, uint64_t order_id, const char *user, sk_order_row *out);
/* persisted -> cancelled, giving the units back to campaign_stock and the
 * user's total in the same transaction. The status transition (WHERE
 * status = 'persisted') is the once-only gate: of any number of concurrent
 * callers exactly one gets 0. SK_ECONFLICT when the order is not persisted
 * (paid, cancelled already, rejected), SK_ENOTFOUND, SK_EDB. */
int sk_db_order_cancel(sk_db *db, uint64_t order_id, const char *reason, sk_order_row *out);

/* One accepted order as carried by the stream (or the degraded path). */
typedef struct sk_order_in {
    uint64_t order_id; /* <= INT64_MAX */
    const char *campaign;
    const char *user;
    int64_t qty;
    const char *path;  /* "redis" or "db" */
    int64_t created_ms;
    const char *idem;  /* Idempotency-Key or NULL / "" */
    int64_t epoch;     /* stream field epoch; 0 (absent) counts as 1 */
} sk_order_in;

typedef enum sk_apply_result {
    SK_APPLY_PERSISTED = 1,
    SK_APPLY_REJECTED = 2,  /* stored with status rejected + reason */
    SK_APPLY_DUPLICATE = 3, /* order_id already stored: no-op */
    SK_APPLY_STALE = 4,     /* epoch below the campaign's: stored rejected, reason "stale timeline" */
} sk_apply_result;

/* Applies n orders in ONE transaction: each is inserted (order_id is the
 * primary key, so a redelivery is a no-op) and checked by the guard
 * (epoch >= the campaign's; units from remaining - reserve_remaining; the
 * per-user total); a
 * refused order is stored as rejected with its reason. results_out[n]
 * (may be NULL) gets one sk_apply_result per order. All or nothing:
 * on SK_EDB nothing was written. SK_EINVAL if an order is malformed
 * (nothing written; check with sk_db_order_valid first). */
int sk_db_apply_batch(sk_db *db, const sk_order_in *orders, size_t n, int *results_out);
/* NULL when o is well-formed, else a static reason. */
const char *sk_db_order_invalid(const sk_order_in *o);

/* Degraded path (Redis down), src/seckill/db/db_reserve.c: one transaction
 * that sells only from the reserve (reserve_remaining and remaining both
 * >= qty, both decremented) and stores a tentative order: status
 * "pending", path "db", not counted in user_totals (the user's persisted +
 * pending units are held to the limit). Returns 0 (stored pending: the
 * buyer is told 202), SK_ESOLDOUT (reserve exhausted), SK_ELIMIT (refused:
 * nothing stored), SK_EEXIST (order_id already used), SK_ENOTFOUND
 * (campaign), SK_ENOTSTARTED / SK_EENDED when now_ms (wall) is outside the
 * campaign window, SK_EINVAL, SK_EDB. */
int sk_db_purchase_direct(sk_db *db, uint64_t order_id, const char *campaign, const char *user,
                          int64_t qty, int64_t now_ms);

/* Finalises one tentative order (status pending): within the limit
 * (user_totals + qty <= per_user_limit) it becomes persisted and counted;
 * otherwise rejected (reason "limit") and its units go back to
 * reserve_remaining and remaining. One transaction; WHERE status =
 * 'pending' makes it happen once. *result_out: SK_APPLY_PERSISTED,
 * SK_APPLY_REJECTED, or 0 (not pending: done before). 0 or SK_EDB. */
int sk_db_order_finalise(sk_db *db, uint64_t order_id, int *result_out);

/* The reserve handback of one campaign (once): begin moves
 * reserve_remaining to Redis's share and records the id and the units in
 * the same transaction, only while no tentative order of the campaign is
 * pending. Returns 1 (begun now), 0 (nothing to do: handed back before,
 * reserve empty, or orders still pending), SK_ENOTFOUND or SK_EDB. */
typedef struct sk_db_handback {
    char id[48];    /* "" when the campaign never handed back */
    int64_t units;
    bool done;      /* Redis applied it (INCRBY gated by {c:<id>}:handbacks) */
    int64_t reserve_remaining; /* the reserve when read */
} sk_db_handback;
int sk_db_handback_begin(sk_db *db, const char *campaign, sk_db_handback *out);
int sk_db_handback_get(sk_db *db, const char *campaign, sk_db_handback *out);
int sk_db_handback_mark_done(sk_db *db, const char *campaign);

/* The barrier's seal: campaign_stock.epoch becomes max(epoch, at_least).
 * 0, SK_ENOTFOUND or SK_EDB. */
int sk_db_campaign_seal(sk_db *db, const char *campaign, int64_t at_least);
/* The campaign's timeline (campaign_stock.epoch). */
int sk_db_campaign_epoch(sk_db *db, const char *campaign, int64_t *epoch_out);

/* Orders still 'persisted' created before cutoff_ms (wall), oldest first,
 * at most max, of one campaign (NULL: all); cb per row. Returns the number
 * found or SK_EDB. */
typedef void (*sk_db_order_cb)(const sk_order_row *row, void *ud);
/* A caller's array of rows: pass sk_db_rows_add as cb and a sk_db_rows as
 * ud to the order queries; rows beyond cap are not kept. */
typedef struct sk_db_rows {
    sk_order_row *v;
    int n, cap;
} sk_db_rows;
void sk_db_rows_add(const sk_order_row *row, void *ud);
int sk_db_orders_unpaid_before(sk_db *db, const char *campaign, int64_t cutoff_ms, int max, sk_db_order_cb cb,
                               void *ud);
/* Cancelled orders whose units were not yet given back in Redis. */
int sk_db_orders_release_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud);
/* Degraded-path orders (path db, pending, persisted or paid) not yet
 * mirrored into Redis (order_units.lua), and the mark when done. */
int sk_db_orders_mirror_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud);
int sk_db_order_mark_mirrored(sk_db *db, uint64_t order_id);
/* Marks a cancelled order's Redis release as done. 0 or SK_EDB. */
int sk_db_order_mark_released(sk_db *db, uint64_t order_id);
/* Tentative orders (pending) already mirrored into Redis: to finalise. */
int sk_db_orders_finalise_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud);
/* Tentative orders refused at finalisation whose buyer total is still in
 * Redis (rejected, path db, mirrored, not yet released there). */
int sk_db_orders_drop_pending(sk_db *db, const char *campaign, int max, sk_db_order_cb cb, void *ud);
/* Every order of a campaign a new master must hold (live, cancelled, and
 * refused tentative orders that were mirrored), order_id > after, ordered
 * by order_id, at most max (the barrier's keyset pages). */
int sk_db_orders_for_barrier(sk_db *db, const char *campaign, uint64_t after, int max, sk_db_order_cb cb,
                             void *ud);
/* Orders of one campaign with a given status (e.g. "rejected"), at most max. */
int sk_db_orders_by_status(sk_db *db, const char *campaign, const char *status, int max,
                           sk_db_order_cb cb, void *ud);

/* Reconciliation figures of one campaign. */
typedef struct sk_db_campaign_stats {
    int64_t stock, remaining;
    int64_t orders[5], units[5]; /* by status: persisted, paid, cancelled, rejected, pending */
    int64_t user_total_units;    /* sum of user_totals.qty */
    int64_t released_pending;    /* cancelled, Redis release not done yet */
    int64_t db_path_orders;      /* orders taken by the degraded path (not in the stream) */
    int64_t mirror_pending;      /* degraded-path orders not yet mirrored into Redis */
    int64_t released_done;       /* cancelled orders given back in Redis */
    int64_t db_reserve, reserve_remaining, epoch;
    sk_db_handback handback;
    int64_t broken_promises;     /* path redis, rejected by the guard for another reason than a stale timeline */
    int64_t stale;               /* rejected: stale timeline */
    int64_t finalised_lost;      /* tentative orders refused at finalisation (reason "limit") */
} sk_db_campaign_stats;
enum { SK_ST_PERSISTED = 0, SK_ST_PAID = 1, SK_ST_CANCELLED = 2, SK_ST_REJECTED = 3, SK_ST_PENDING = 4 };
int sk_db_campaign_stats_get(sk_db *db, const char *campaign, sk_db_campaign_stats *out);
/* Per-user totals of a campaign (users with qty > 0). */
typedef void (*sk_db_user_cb)(const char *user, int64_t qty, void *ud);
int sk_db_user_totals(sk_db *db, const char *campaign, sk_db_user_cb cb, void *ud);

/* Test/repair hook: sets campaign_stock.remaining directly. 0 or SK_EDB. */
int sk_db_stock_set(sk_db *db, const char *campaign, int64_t remaining);

/* The old name of sk_valid_campaign_id (rulebook.h), kept while tools/ use it. */
#define sk_db_id_valid(s) sk_valid_campaign_id(s)

#endif
