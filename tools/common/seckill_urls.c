/* seckill_urls.c: the seckill programs' URL checks (seckill_urls.h): thin
 * wrappers over the parsers the start-up itself runs, so the two agree. */
#include "seckill_urls.h"

#include <stdio.h>

#include "db.h"
#include "url.h"

int skurl_check_redis(const char *value, char *err, size_t errlen)
{
    dlock__url u;
    char why[256] = "";
    int rc = dlock__url_parse(value, &u, why, sizeof(why));
    if (rc == 0) {
        dlock__url_free(&u);
        return 0;
    }
    snprintf(err, errlen, "%s", why[0] ? why : "not a Redis URL");
    return -1;
}

int skurl_check_database(const char *value, char *err, size_t errlen)
{
    if (!value || !*value) return 0;
    return sk_db_url_check(value, err, errlen) == 0 ? 0 : -1;
}
