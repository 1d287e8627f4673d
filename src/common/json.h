/* json.h: a small strict JSON parser (RFC 8259) for request bodies and
 * gateway replies, and a
 * string escaper for responses. The parser accepts exactly one value with
 * optional whitespace around it; it rejects trailing commas, comments,
 * duplicate object keys, invalid UTF-8, raw control characters, lone
 * surrogates, leading zeros and nesting deeper than DLOCK__JSON_MAX_DEPTH.
 * A parsed document owns its nodes and strings (one allocation each);
 * dlock__json_free releases them. Not thread-safe per document. */
#ifndef DLOCK_COMMON_JSON_H
#define DLOCK_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define DLOCK__JSON_MAX_DEPTH 32

typedef enum dlock__json_type {
    DLOCK__JSON_NULL = 0,
    DLOCK__JSON_BOOL,
    DLOCK__JSON_NUMBER,
    DLOCK__JSON_STRING,
    DLOCK__JSON_ARRAY,
    DLOCK__JSON_OBJECT,
} dlock__json_type;

typedef struct dlock__json_val {
    dlock__json_type type;
    bool b;           /* BOOL */
    bool is_int;      /* NUMBER: integral and within int64 range */
    int64_t i;        /* NUMBER when is_int */
    double d;         /* NUMBER */
    const char *s;    /* STRING: decoded UTF-8, NUL-terminated (may hold \0) */
    size_t len;       /* STRING length */
    const char *key;  /* member of an OBJECT: its key (decoded) */
    size_t key_len;
    int first;        /* ARRAY/OBJECT: index of the first child, -1 if none */
    int next;         /* next sibling, -1 if none */
    int count;        /* ARRAY/OBJECT: number of children */
} dlock__json_val;

typedef struct dlock__json_doc {
    dlock__json_val *nodes; /* nodes[0] is the root */
    int n;
    char *arena;
} dlock__json_doc;

/* Parses len bytes. Returns 0, DLOCK__EINVAL (err names the problem and its
 * byte offset) or DLOCK__ENOMEM. On error doc needs no freeing. */
int dlock__json_parse(const char *in, size_t len, dlock__json_doc *doc, char *err, size_t errlen);
void dlock__json_free(dlock__json_doc *doc);

/* Member of object obj with the given key, or NULL. */
const dlock__json_val *dlock__json_get(const dlock__json_doc *doc, const dlock__json_val *obj, const char *key);

/* Appends s as a quoted JSON string (escaping quotes, backslashes and
 * control characters). */
void dlock__json_put_str(dlock__buf *b, const char *s, size_t len);

#endif
