/* json.c: recursive-descent parser of json.h. Invariant: every node index
 * and arena offset stays inside the buffers sized from the input length
 * (a value needs at least one input byte, a decoded string never grows). */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_err.h"

typedef struct parser {
    const unsigned char *p, *start, *end;
    dlock__json_doc *doc;
    int cap;
    size_t arena_len;
    char *err;
    size_t errlen;
} parser;

static int fail(parser *ps, const char *what)
{
    if (ps->err && ps->errlen)
        snprintf(ps->err, ps->errlen, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
    return DLOCK__EINVAL;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int new_node(parser *ps, dlock__json_type t)
{
    if (ps->doc->n >= ps->cap) return -1;
    int i = ps->doc->n++;
    dlock__json_val *v = &ps->doc->nodes[i];
    memset(v, 0, sizeof(*v));
    v->type = t;
    v->first = -1;
    v->next = -1;
    return i;
}

static int expect_word(parser *ps, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, w, n) != 0) return fail(ps, "invalid literal");
    ps->p += n;
    return 0;
}

static int hex4(parser *ps, unsigned *out)
{
    if (ps->end - ps->p < 4) return fail(ps, "short \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = ps->p[k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return fail(ps, "bad hex digit in \\u escape");
        v = v * 16 + d;
    }
    ps->p += 4;
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when invalid
 * (overlong forms, surrogates and values above U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t n;
    unsigned min, cp;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) { n = 2; min = 0x80; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 3; min = 0x800; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 4; min = 0x10000; cp = c & 0x07; }
    else return 0;
    if ((size_t)(end - p) < n) return 0;
    for (size_t k = 1; k < n; k++) {
        if ((p[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

/* Parses a string at ps->p (opening quote) into the arena. A key may not
 * hold U+0000: every reader compares keys by their bytes, but a C string
 * would end there, so "quantity\u0000" would read as a second "quantity". */
static int parse_string(parser *ps, bool key, const char **s_out, size_t *len_out)
{
    const unsigned char *at = ps->p;
    ps->p++; /* opening quote */
    char *o = ps->doc->arena + ps->arena_len;
    size_t n = 0;
    for (;;) {
        if (ps->p >= ps->end) return fail(ps, "unterminated string");
        unsigned c = *ps->p;
        if (c == '"') { ps->p++; break; }
        if (c < 0x20) return fail(ps, "control character in string");
        if (c == '\\') {
            ps->p++;
            if (ps->p >= ps->end) return fail(ps, "unterminated escape");
            unsigned e = *ps->p++;
            switch (e) {
            case '"': o[n++] = '"'; break;
            case '\\': o[n++] = '\\'; break;
            case '/': o[n++] = '/'; break;
            case 'b': o[n++] = '\b'; break;
            case 'f': o[n++] = '\f'; break;
            case 'n': o[n++] = '\n'; break;
            case 'r': o[n++] = '\r'; break;
            case 't': o[n++] = '\t'; break;
            case 'u': {
                unsigned cp, lo;
                if (hex4(ps, &cp)) return DLOCK__EINVAL;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(ps, "lone low surrogate");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
                        return fail(ps, "lone high surrogate");
                    ps->p += 2;
                    if (hex4(ps, &lo)) return DLOCK__EINVAL;
                    if (lo < 0xDC00 || lo > 0xDFFF) return fail(ps, "bad low surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                n += put_utf8(o + n, cp); /* 6 or 12 input bytes -> at most 4 */
                break;
            }
            default: ps->p--; return fail(ps, "bad escape");
            }
            continue;
        }
        size_t u = utf8_len(ps->p, ps->end);
        if (!u) return fail(ps, "invalid UTF-8");
        memcpy(o + n, ps->p, u);
        n += u;
        ps->p += u;
    }
    if (key && memchr(o, '\0', n)) {
        ps->p = at;
        return fail(ps, "key contains U+0000");
    }
    o[n] = '\0';
    ps->arena_len += n + 1;
    *s_out = o;
    *len_out = n;
    return 0;
}

/* Advances over the JSON number grammar (RFC 8259 6); false when the
 * text there is not a number. *integral: no fraction, no exponent. */
static bool scan_number(parser *ps, bool *integral)
{
    *integral = true;
    if (ps->p < ps->end && *ps->p == '-') ps->p++;
    if (ps->p >= ps->end) return false;
    if (*ps->p == '0') {
        ps->p++;
        if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') return false; /* leading zero */
    } else if (*ps->p >= '1' && *ps->p <= '9') {
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    } else {
        return false;
    }
    if (ps->p < ps->end && *ps->p == '.') {
        *integral = false;
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return false;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        *integral = false;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return false;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
    }
    return true;
}

/* A number is an integer of int64 (no fraction, no exponent) or a finite
 * double (correctly rounded, as every other reader rounds it); anything
 * else is refused, never read as a nearby value. */
static int parse_number(parser *ps, dlock__json_val *v)
{
    const unsigned char *s = ps->p;
    bool integral;
    if (!scan_number(ps, &integral)) return fail(ps, "bad number");
    /* A NUL-terminated copy in the arena's unused tail: the arena holds
     * len + 1 bytes and what it holds so far came from input bytes before
     * s (a string's decoded bytes and NUL never outgrow it with its quotes),
     * so the n + 1 bytes fit. arena_len does not move: the copy is scratch. */
    size_t n = (size_t)(ps->p - s);
    char *tmp = ps->doc->arena + ps->arena_len;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    errno = 0;
    if (integral) {
        long long x = strtoll(tmp, NULL, 10);
        if (errno == ERANGE) {
            ps->p = s;
            return fail(ps, "integer out of range (int64)");
        }
        v->is_int = true;
        v->i = x;
        v->d = (double)x;
        return 0;
    }
    v->d = strtod(tmp, NULL);
    if (isinf(v->d)) {
        ps->p = s;
        return fail(ps, "number out of range (double)");
    }
    return 0;
}

static int parse_value(parser *ps, int depth, int *idx_out);

static int parse_container(parser *ps, int depth, int idx, bool object)
{
    char close = object ? '}' : ']';
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) { ps->p++; return 0; }
    int prev = -1;
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a key string");
            const unsigned char *at = ps->p;
            if (parse_string(ps, true, &key, &key_len)) return DLOCK__EINVAL;
            /* decoded bytes: "quant\u0069ty" is "quantity" */
            for (int c = ps->doc->nodes[idx].first; c >= 0; c = ps->doc->nodes[c].next) {
                const dlock__json_val *m = &ps->doc->nodes[c];
                if (m->key_len == key_len && memcmp(m->key, key, key_len) == 0) {
                    ps->p = at;
                    return fail(ps, "duplicate key");
                }
            }
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expected ':'");
            ps->p++;
        }
        int child;
        int rc = parse_value(ps, depth + 1, &child);
        if (rc) return rc;
        ps->doc->nodes[child].key = key;
        ps->doc->nodes[child].key_len = key_len;
        if (prev < 0) ps->doc->nodes[idx].first = child;
        else ps->doc->nodes[prev].next = child;
        prev = child;
        ps->doc->nodes[idx].count++;
        skip_ws(ps);
        if (ps->p >= ps->end) return fail(ps, "unterminated container");
        if (*ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            continue;
        }
        if (*ps->p == close) { ps->p++; return 0; }
        return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(parser *ps, int depth, int *idx_out)
{
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "expected a value");
    unsigned c = *ps->p;
    dlock__json_type t;
    if (c == '{') t = DLOCK__JSON_OBJECT;
    else if (c == '[') t = DLOCK__JSON_ARRAY;
    else if (c == '"') t = DLOCK__JSON_STRING;
    else if (c == 't' || c == 'f') t = DLOCK__JSON_BOOL;
    else if (c == 'n') t = DLOCK__JSON_NULL;
    else if (c == '-' || (c >= '0' && c <= '9')) t = DLOCK__JSON_NUMBER;
    else return fail(ps, "unexpected character");
    /* depth counts the containers around this value: at most MAX open */
    if ((t == DLOCK__JSON_OBJECT || t == DLOCK__JSON_ARRAY) && depth >= DLOCK__JSON_MAX_DEPTH)
        return fail(ps, "nesting deeper than 32");
    int idx = new_node(ps, t);
    if (idx < 0) return fail(ps, "too many values");
    *idx_out = idx;
    dlock__json_val *v = &ps->doc->nodes[idx];
    switch (t) {
    case DLOCK__JSON_OBJECT: return parse_container(ps, depth, idx, true);
    case DLOCK__JSON_ARRAY: return parse_container(ps, depth, idx, false);
    case DLOCK__JSON_STRING: return parse_string(ps, false, &v->s, &v->len);
    case DLOCK__JSON_BOOL:
        v->b = c == 't';
        return expect_word(ps, v->b ? "true" : "false");
    case DLOCK__JSON_NULL: return expect_word(ps, "null");
    default: return parse_number(ps, v);
    }
}

int dlock__json_parse(const char *in, size_t len, dlock__json_doc *doc, char *err, size_t errlen)
{
    memset(doc, 0, sizeof(*doc));
    if (!in || len > (size_t)1 << 24) {
        if (err && errlen) snprintf(err, errlen, "input missing or too large");
        return DLOCK__EINVAL;
    }
    /* Every value starts at a distinct input byte, so len + 1 nodes suffice;
     * decoded strings never exceed their encoded length (+ NUL each). */
    int cap = (int)len + 1;
    doc->nodes = malloc((size_t)cap * sizeof(dlock__json_val));
    doc->arena = malloc(len + 1);
    if (!doc->nodes || !doc->arena) {
        dlock__json_free(doc);
        return DLOCK__ENOMEM;
    }
    parser ps = {.p = (const unsigned char *)in, .start = (const unsigned char *)in,
                 .end = (const unsigned char *)in + len, .doc = doc, .cap = cap,
                 .err = err, .errlen = errlen};
    int root;
    /* RFC 8259 8.1: no BOM; said by name, as some readers skip it silently */
    if (len >= 3 && memcmp(in, "\xEF\xBB\xBF", 3) == 0) {
        dlock__json_free(doc);
        return fail(&ps, "byte-order mark");
    }
    int rc = parse_value(&ps, 0, &root);
    if (rc == 0) {
        skip_ws(&ps);
        if (ps.p != ps.end) rc = fail(&ps, "trailing characters");
    }
    if (rc) dlock__json_free(doc);
    return rc;
}

void dlock__json_free(dlock__json_doc *doc)
{
    free(doc->nodes);
    free(doc->arena);
    memset(doc, 0, sizeof(*doc));
}

bool dlock__json_key_is(const dlock__json_val *member, const char *key)
{
    size_t kl = strlen(key);
    return member->key && member->key_len == kl && memcmp(member->key, key, kl) == 0;
}

const dlock__json_val *dlock__json_get(const dlock__json_doc *doc, const dlock__json_val *obj, const char *key)
{
    if (!obj || obj->type != DLOCK__JSON_OBJECT) return NULL;
    for (int c = obj->first; c >= 0; c = doc->nodes[c].next)
        if (dlock__json_key_is(&doc->nodes[c], key)) return &doc->nodes[c];
    return NULL;
}

void dlock__json_put_str(dlock__buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    dlock__buf_append(b, "\"", 1);
    size_t run = 0;
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        dlock__buf_append(b, s + run, k - run);
        run = k + 1;
        char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        if (c == '"' || c == '\\') {
            esc[1] = (char)c;
            dlock__buf_append(b, esc, 2);
        } else {
            dlock__buf_append(b, esc, 6);
        }
    }
    dlock__buf_append(b, s + run, len - run);
    dlock__buf_append(b, "\"", 1);
}
