/* db_sql.h: the thin layer under db.c that runs one SQL text on SQLite or
 * PostgreSQL. SQL is written once with $1..$n placeholders (rewritten to
 * ?1..?n for SQLite); statements are prepared once per handle and cached
 * by the address of their (static) text. Internal to libseckill. */
#ifndef SK_DB_SQL_H
#define SK_DB_SQL_H

#include <stddef.h>
#include <stdint.h>

#include "db_handle.h"

typedef enum sk__db_kind { SK__DB_SQLITE = 1, SK__DB_PG = 2 } sk__db_kind;

typedef struct sk__arg {
    int is_text;
    int64_t i;
    const char *s;
} sk__arg;
#define SK_I(v) ((sk__arg){0, (int64_t)(v), NULL})
#define SK_T(v) ((sk__arg){1, 0, (v)})

/* Row callback: ncols values as text (NULL for SQL NULL). */
typedef void (*sk__row_cb)(int ncols, const char *const *vals, void *ud);

sk__db_kind sk__db_kindof(const sk_db *db);
/* Opens the connection only (no migrations). */
int sk__db_connect(const char *url, sk_db **out, char *err, size_t errlen);
void sk__db_disconnect(sk_db *db);

/* Runs sql (static text!) with args; *changes_out (may be NULL) gets the
 * number of rows changed; cb (may be NULL) sees each result row.
 * 0 or SK_EDB (message in sk_db_errmsg). */
int sk__db_run(sk_db *db, const char *sql, int nargs, const sk__arg *args, int64_t *changes_out,
               sk__row_cb cb, void *ud);
/* Runs a script of one or more statements without parameters, no cache. */
int sk__db_script(sk_db *db, const char *sql);

int sk__db_begin(sk_db *db); /* SQLite: BEGIN IMMEDIATE */
int sk__db_commit(sk_db *db);
void sk__db_rollback(sk_db *db);

/* Row helper: parses a decimal int64 (0 on NULL/garbage). */
int64_t sk__db_i64(const char *s);

#endif
