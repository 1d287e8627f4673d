/* json.h: the one strict JSON reader (RFC 8259) of every request body and
 * gateway reply, and a string escaper for responses. The reader accepts
 * exactly one value with optional whitespace (space, tab, LF, CR) around
 * it; it refuses a byte-order mark, trailing commas, comments, NaN and
 * Infinity, duplicate object keys (compared by their decoded bytes, so
 * "quant\u0069ty" repeats "quantity"), a key holding U+0000, invalid
 * UTF-8, raw control characters, lone surrogates, leading zeros, an
 * integer outside int64, a number beyond a double's range, and nesting
 * deeper than DLOCK__JSON_MAX_DEPTH. What it accepts means the same to any
 * RFC 8259 reader (tests/common/test_json_differential.py checks this
 * against Python's json). A parsed document owns its nodes and strings
 * (one allocation each); dlock__json_free releases them. Not thread-safe
 * per document. */
#ifndef DLOCK_COMMON_JSON_H
#define DLOCK_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* arrays and objects open at once, at most (the nesting of "[[]]" is 2) */
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
    bool is_int;      /* NUMBER: written without fraction or exponent (always within int64) */
    int64_t i;        /* NUMBER when is_int */
    double d;         /* NUMBER (finite) */
    const char *s;    /* STRING: decoded UTF-8, NUL-terminated (may hold \0) */
    size_t len;       /* STRING length */
    const char *key;  /* member of an OBJECT: its key (decoded, never holds \0) */
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

/* Whether member (of an OBJECT) has exactly the key key. */
bool dlock__json_key_is(const dlock__json_val *member, const char *key);

/* Member of object obj with the given key, or NULL. */
const dlock__json_val *dlock__json_get(const dlock__json_doc *doc, const dlock__json_val *obj, const char *key);

/* Appends s as a quoted JSON string (escaping quotes, backslashes and
 * control characters). */
void dlock__json_put_str(dlock__buf *b, const char *s, size_t len);

#endif
