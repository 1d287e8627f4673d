/* resp_write.h: writing RESP (the Redis protocol) by hand into a buffer
 * the caller sized: array and bulk string headers, bulk strings made of up
 * to three parts, integers as bulk strings, without the printf family.
 * Every writer returns the end of what it wrote. Pure functions:
 * thread-safe. */
#ifndef DLOCK_COMMON_RESP_WRITE_H
#define DLOCK_COMMON_RESP_WRITE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes a bulk string takes beyond its payload, at most ("$<n>\r\n" and
 * the trailing CRLF, n of up to 20 digits). */
#define DLOCK__RESP_BULK_OVERHEAD 26
/* Bytes a 64-bit integer's decimal text takes at most (sign included). */
#define DLOCK__RESP_INT_MAX 20

/* "<tag><n>\r\n": tag '*' for an array header, '$' for a bulk string's. */
char *dlock__resp_len(char *p, char tag, size_t n);
/* One bulk string: s[0..n). */
char *dlock__resp_bulk(char *p, const char *s, size_t n);
/* One bulk string made of a[0..an), b[0..bn) and c[0..cn) (any may be empty). */
char *dlock__resp_bulk3(char *p, const char *a, size_t an, const char *b, size_t bn, const char *c, size_t cn);
/* v's decimal text as a bulk string. */
char *dlock__resp_bulk_i64(char *p, int64_t v);
char *dlock__resp_bulk_u64(char *p, uint64_t v);

#endif
