/* redis_connect.c: a sync connection from a URL string (redis_connect.h).
 * Calls only down (url.c, redis_io.c); the parsed URL never outlives the
 * call, since the connection keeps its own copy. */
#include "redis_connect.h"

#include "url.h"

int dlock__conn_open_url(const char *url, int64_t command_timeout_ms, dlock__conn **out, char *err,
                         size_t errlen)
{
    *out = NULL;
    dlock__url u;
    int rc = dlock__url_parse(url, &u, err, errlen);
    if (rc) return rc;
    dlock__conn_opts co = {.connect_timeout_ms = 2000, .command_timeout_ms = command_timeout_ms};
    rc = dlock__conn_open(&u, &co, out, err, errlen);
    dlock__url_free(&u);
    return rc;
}
