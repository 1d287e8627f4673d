/* seckill_urls.h: the URL rules of the seckill programs (seckilld,
 * seckill-persist, seckill) as option-table checks (opt_spec.check), so a
 * bad redis-url or database-url is refused where it is read - flag,
 * environment or config file line - with the same rule the start-up
 * applies (dlock__url_parse, sk_db_url_check), before anything is opened.
 * Messages never repeat the URL (it may hold a password). Reentrant. */
#ifndef DLOCK_TOOLS_SECKILL_URLS_H
#define DLOCK_TOOLS_SECKILL_URLS_H

#include <stddef.h>

/* A Redis URL as the engine and the persister parse it. 0 or -1. */
int skurl_check_redis(const char *value, char *err, size_t errlen);
/* A database URL as sk_db_open reads it; "" (no database) passes. 0 or -1. */
int skurl_check_database(const char *value, char *err, size_t errlen);

#endif
