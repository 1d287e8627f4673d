/* json.h: a small strict JSON parser (RFC 8259) for request bodies, and a
 * string escaper for responses. The parser accepts exactly one value with
 * optional whitespace around it; it rejects trailing commas, comments,
 * duplicate object keys, invalid UTF-8, raw control characters, lone
 * surrogates, leading zeros and nesting deeper than SK_JSON_MAX_DEPTH.
 * A parsed document owns its nodes and strings (one allocation each);
 * sk_json_free releases them. Not thread-safe per document. */
#ifndef SK_JSON_H
#define SK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define SK_JSON_MAX_DEPTH 32

typedef enum sk_json_type {
    SK_JSON_NULL = 0,
    SK_JSON_BOOL,
    SK_JSON_NUMBER,
    SK_JSON_STRING,
    SK_JSON_ARRAY,
    SK_JSON_OBJECT,
} sk_json_type;

typedef struct sk_json_val {
    sk_json_type type;
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
} sk_json_val;

typedef struct sk_json_doc {
    sk_json_val *nodes; /* nodes[0] is the root */
    int n;
    char *arena;
} sk_json_doc;

/* Parses len bytes. Returns 0, SK_EINVAL (err names the problem and its
 * byte offset) or DLOCK_ENOMEM. On error doc needs no freeing. */
int sk_json_parse(const char *in, size_t len, sk_json_doc *doc, char *err, size_t errlen);
void sk_json_free(sk_json_doc *doc);

/* Member of object obj with the given key, or NULL. */
const sk_json_val *sk_json_get(const sk_json_doc *doc, const sk_json_val *obj, const char *key);

/* Appends s as a quoted JSON string (escaping quotes, backslashes and
 * control characters). */
void sk_json_put_str(dlock__buf *b, const char *s, size_t len);

#endif
