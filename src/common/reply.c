/* reply.c: dlock__reply, a view of hiredis's redisReply (see reply.h).
 * The bottom of src/common: it calls nothing else of dlock, so the pure
 * files (cluster_map.c) and both I/O doors can use replies without
 * depending on each other. */
#include "reply.h"

#include <string.h>

#include <hiredis/hiredis.h>

#include "common_err.h"

/* dlock__reply is redisReply; the cast lives only here. */
#define R(r) ((const redisReply *)(const void *)(r))

dlock__reply_type dlock__reply_kind(const dlock__reply *r)
{
    switch (R(r)->type) {
    case REDIS_REPLY_STRING: return DLOCK__R_STRING;
    case REDIS_REPLY_ARRAY: return DLOCK__R_ARRAY;
    case REDIS_REPLY_INTEGER: return DLOCK__R_INTEGER;
    case REDIS_REPLY_STATUS: return DLOCK__R_STATUS;
    case REDIS_REPLY_ERROR: return DLOCK__R_ERROR;
    default: return DLOCK__R_NIL;
    }
}

long long dlock__reply_int(const dlock__reply *r)
{
    return R(r)->type == REDIS_REPLY_INTEGER ? R(r)->integer : 0;
}

const char *dlock__reply_str(const dlock__reply *r, size_t *len_out)
{
    int t = R(r)->type;
    bool has = t == REDIS_REPLY_STRING || t == REDIS_REPLY_STATUS || t == REDIS_REPLY_ERROR;
    if (len_out) *len_out = has ? R(r)->len : 0;
    return has ? R(r)->str : "";
}

size_t dlock__reply_count(const dlock__reply *r)
{
    return R(r)->type == REDIS_REPLY_ARRAY ? R(r)->elements : 0;
}

const dlock__reply *dlock__reply_at(const dlock__reply *r, size_t i)
{
    if (R(r)->type != REDIS_REPLY_ARRAY || i >= R(r)->elements) return NULL;
    return (const dlock__reply *)(const void *)R(r)->element[i];
}

void dlock__reply_free(dlock__reply *r)
{
    if (r) freeReplyObject(r);
}

int dlock__reply_parse(const char *resp, size_t n, dlock__reply **out)
{
    *out = NULL;
    redisReader *rd = redisReaderCreate();
    if (!rd) return DLOCK__ENOMEM;
    void *r = NULL;
    int rc = redisReaderFeed(rd, resp, n) == REDIS_OK && redisReaderGetReply(rd, &r) == REDIS_OK
                 ? 0
                 : DLOCK__ESERVER;
    if (rc == 0 && !r) rc = DLOCK__EINVAL; /* incomplete */
    if (rc == 0) *out = r;
    redisReaderFree(rd);
    return rc;
}

bool dlock__reply_is_error(const dlock__reply *r, const char *prefix)
{
    if (!r || R(r)->type != REDIS_REPLY_ERROR) return false;
    return !prefix || strncmp(R(r)->str, prefix, strlen(prefix)) == 0;
}
