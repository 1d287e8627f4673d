/* db_internal.h: what the files of the database module (db.c, db_schema.c,
 * db_guard.c, db_reserve.c, db_query.c) share and nobody else uses: row
 * helpers and the order columns every order query selects.
 * Internal to libseckill; same thread-safety as db.h. */
#ifndef SK_DB_INTERNAL_H
#define SK_DB_INTERNAL_H

#include "db.h"
#include "db_sql.h"

/* The columns sk__db_order_row reads, in its order. */
#define SK__ORDER_COLS                                                                                   \
    "SELECT order_id, campaign, user_id, qty, status, reason, path, created_ms, updated_ms, idem, epoch," \
    " redis_mirrored, redis_released, reason_code FROM orders"

/* Row callback: the first column as int64 into *(int64_t *)ud. */
void sk__db_int_cb(int n, const char *const *v, void *ud);
/* Runs an order query (columns SK__ORDER_COLS), cb per row: the number of
 * rows or SK_EDB. */
int sk__db_order_query(sk_db *db, const char *sql, int nargs, const sk__arg *args, sk_db_order_cb cb, void *ud);
/* Runs sql (one UPDATE ... WHERE order_id = $1): 0 or SK_EDB. */
int sk__db_order_mark(sk_db *db, const char *sql, uint64_t order_id);
/* PostgreSQL locks the campaign's stock row (FOR UPDATE) inside an open
 * transaction; SQLite already holds its write lock. 0 or SK_EDB. */
int sk__db_lock_stock(sk_db *db, const char *campaign);
/* The sk_apply_result of a guard's outcome id (rulebook.h): accepted is
 * persisted, replay a duplicate, stale a stale timeline, any other reason
 * rejected. */
int sk__db_apply_of_outcome(int id);

#endif
