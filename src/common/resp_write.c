/* resp_write.c: the RESP writers of resp_write.h. Invariant: each writes
 * exactly the bytes of one protocol element, no terminator, nothing past
 * the end it returns; integers are written by dlock__digits (util.h), not
 * the printf family (a large share of the purchase path's instructions). */
#include "resp_write.h"

#include <string.h>

#include "util.h"

char *dlock__resp_len(char *p, char tag, size_t n)
{
    char num[24], *d = dlock__digits(num + sizeof(num), n);
    size_t k = (size_t)(num + sizeof(num) - d);
    *p++ = tag;
    memcpy(p, d, k);
    p += k;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

char *dlock__resp_bulk3(char *p, const char *a, size_t an, const char *b, size_t bn, const char *c, size_t cn)
{
    p = dlock__resp_len(p, '$', an + bn + cn);
    if (an) memcpy(p, a, an);
    if (bn) memcpy(p + an, b, bn);
    if (cn) memcpy(p + an + bn, c, cn);
    p += an + bn + cn;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

char *dlock__resp_bulk(char *p, const char *s, size_t n) { return dlock__resp_bulk3(p, s, n, "", 0, "", 0); }

char *dlock__resp_bulk_u64(char *p, uint64_t v)
{
    char num[24], *d = dlock__digits(num + sizeof(num), v);
    return dlock__resp_bulk(p, d, (size_t)(num + sizeof(num) - d));
}

char *dlock__resp_bulk_i64(char *p, int64_t v)
{
    char num[24], *d = dlock__digits(num + sizeof(num), v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    if (v < 0) *--d = '-';
    return dlock__resp_bulk(p, d, (size_t)(num + sizeof(num) - d));
}
