/* db_handle.h: the system of record's handle, sk_db, and what is known of
 * it below the schema: the URL rules, the kind of database and the last
 * failure. Named once for db.h (the API, which includes this) and db_sql.h
 * (the layer under it: db_sql.c defines the handle, one connection and its
 * prepared statements, and these calls). Same thread-safety as db.h. */
#ifndef SK_DB_HANDLE_H
#define SK_DB_HANDLE_H

#include <stddef.h>

typedef struct sk_db sk_db;

/* The URL rules of sk_db_open without opening anything (configuration
 * checks): 0, or SK_EINVAL with err saying why (without the URL, which may
 * hold a password). A PostgreSQL URL is parsed as libpq parses it; whether
 * its server answers is only known at sk_db_open. */
int sk_db_url_check(const char *url, char *err, size_t errlen);
/* "sqlite" or "postgresql". */
const char *sk_db_kind(const sk_db *db);
/* Text of the last database error on this handle (never NULL). */
const char *sk_db_errmsg(const sk_db *db);

#endif
