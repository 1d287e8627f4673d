/* reply.h: a Redis reply as dlock sees it (hiredis's redisReply behind
 * dlock's own type). Ownership: the top-level reply belongs to whoever got
 * it and is released with dlock__reply_free; elements belong to it. No
 * I/O: the sync door (redis_io.h), the async door (redis_async.h) and the
 * pure Cluster code (cluster_map.h) all sit above this file. */
#ifndef DLOCK_COMMON_REPLY_H
#define DLOCK_COMMON_REPLY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct dlock__reply dlock__reply;

typedef enum dlock__reply_type {
    DLOCK__R_STRING = 1,
    DLOCK__R_ARRAY = 2,
    DLOCK__R_INTEGER = 3,
    DLOCK__R_NIL = 4,
    DLOCK__R_STATUS = 5,
    DLOCK__R_ERROR = 6,
} dlock__reply_type;

dlock__reply_type dlock__reply_kind(const dlock__reply *r);
long long dlock__reply_int(const dlock__reply *r);
/* STRING, STATUS and ERROR replies: bytes (NUL-terminated) and length. */
const char *dlock__reply_str(const dlock__reply *r, size_t *len_out);
size_t dlock__reply_count(const dlock__reply *r);                     /* ARRAY: elements */
const dlock__reply *dlock__reply_at(const dlock__reply *r, size_t i); /* ARRAY element */
void dlock__reply_free(dlock__reply *r);
/* Parses one whole RESP reply from n bytes (for tests that feed the
 * router crafted server replies). 0 with *out, EINVAL when incomplete,
 * ESERVER on a protocol error, ENOMEM. */
int dlock__reply_parse(const char *resp, size_t n, dlock__reply **out);
/* True when r is an ERROR reply starting with prefix (e.g. "NOSCRIPT"). */
bool dlock__reply_is_error(const dlock__reply *r, const char *prefix);

#endif
