/* hs_frame.c: the framing rules of RFC 9112 that libhttp-parser leaves
 * loose, kept by two scanners over the raw bytes: every line of a request
 * head ends in CRLF and none folds (hs__head_lines), and a chunked body is
 * decoded here, strictly (hs__chunked). Invariant: a trailer field is
 * checked (name, value bytes, size, count) and dropped; no byte of it is
 * kept, so no handler can read it as a header (RFC 9110 6.5). */
#include "hs_internal.h"

#include <stdint.h>
#include <string.h>

/* A chunk-size line (size, extensions, CRLF) longer than this is refused:
 * leading zeros and extensions are otherwise unbounded. */
#define HS_CHUNK_LINE_MAX 1024

enum {
    CK_SIZE0,   /* the first hex digit of a chunk size */
    CK_SIZE,    /* more hex digits, then extensions or CR */
    CK_EXT,     /* extensions up to CR: checked for bytes, ignored */
    CK_SIZE_LF, /* the LF ending the chunk-size line */
    CK_DATA,    /* chunk data */
    CK_DATA_CR, /* the CRLF after chunk data */
    CK_DATA_LF,
    CK_TR_START, /* a trailer line's first byte, or the CR of the last line */
    CK_TR_NAME,
    CK_TR_VALUE,
    CK_TR_LF,
    CK_END_LF /* the LF of the blank line that ends the message */
};

/* The token bytes of RFC 9110 5.6.2 (field names). */
static bool tchar(unsigned char ch)
{
    if ((ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z')) return true;
    return ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static int head_bad(const char **msg, const char *why)
{
    *msg = why;
    return -1;
}

/* The first CR or LF in d[0..n), or n: two vectorised scans instead of a
 * branch per byte (the head is most of what a request's bytes are). */
static size_t line_break(const char *d, size_t n)
{
    const char *cr = memchr(d, '\r', n);
    size_t k = cr ? (size_t)(cr - d) : n;
    const char *lf = memchr(d, '\n', k);
    return lf ? (size_t)(lf - d) : k;
}

int hs__head_lines(hs_lines *s, const char *d, size_t n, size_t *used, const char **msg)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)d[i];
        if (s->cr) {
            if (ch != '\n') return head_bad(msg, "CR without LF in the request head");
            s->cr = false;
            if (!s->mid && s->started) { /* the blank line: the head is complete */
                *s = (hs_lines){0};
                *used = i + 1;
                return 1;
            }
            s->mid = false; /* blank lines before the request line are skipped */
        } else if (ch == '\r') {
            s->cr = true;
        } else if (ch == '\n') {
            return head_bad(msg, "bare LF line ending (lines end in CRLF)");
        } else if (!s->mid && s->started && (ch == ' ' || ch == '\t')) {
            /* obs-fold, or whitespace before the first header (RFC 9112 2.2, 5.2) */
            return head_bad(msg, "folded or indented header line");
        } else {
            s->started = s->mid = true;
            i += line_break(d + i + 1, n - i - 1); /* the rest of the line: no rule applies */
        }
    }
    *used = n;
    return 0;
}

static int ck_bad(hs_chunked *k, int status, const char *msg)
{
    k->status = status;
    k->msg = msg;
    return -1;
}

/* One byte of a chunk-size line (CK_SIZE0 .. CK_SIZE_LF). */
static int size_byte(hs_chunked *k, unsigned char ch)
{
    if (++k->line > HS_CHUNK_LINE_MAX) return ck_bad(k, 400, "chunk-size line too long");
    int hex = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10 : -1;
    switch (k->st) {
    case CK_SIZE0:
        if (hex < 0) return ck_bad(k, 400, "bad chunk size");
        k->size = (uint64_t)hex;
        k->st = CK_SIZE;
        return 0;
    case CK_SIZE:
        if (hex >= 0) {
            if (k->size > UINT64_MAX >> 4) return ck_bad(k, 400, "chunk size overflows");
            k->size = k->size << 4 | (uint64_t)hex;
        } else if (ch == ';' || ch == ' ' || ch == '\t') {
            k->st = CK_EXT;
        } else if (ch == '\r') {
            k->st = CK_SIZE_LF;
        } else {
            return ck_bad(k, 400, "bad chunk size");
        }
        return 0;
    case CK_EXT:
        if (ch == '\r') k->st = CK_SIZE_LF;
        else if (!hs__field_byte_ok(ch)) return ck_bad(k, 400, "control character in a chunk extension");
        else if (k->body_left-- == 0) return ck_bad(k, 413, "body over the size limit"); /* extensions count */
        return 0;
    default: /* CK_SIZE_LF */
        if (ch != '\n') return ck_bad(k, 400, "chunk-size line not ended by CRLF");
        if (k->size > k->body_left) return ck_bad(k, 413, "body over the size limit");
        k->body_left -= (size_t)k->size;
        k->line = 0;
        k->st = k->size ? CK_DATA : CK_TR_START;
        return 0;
    }
}

/* One byte of the trailer section: the field syntax of the header
 * section, counted against its limits, then forgotten. Returns 1 at the
 * end of the message. */
static int trailer_byte(hs_chunked *k, unsigned char ch)
{
    if (k->head_left-- == 0) return ck_bad(k, 431, "trailer section over the size limit");
    switch (k->st) {
    case CK_TR_START:
        if (ch == '\r') k->st = CK_END_LF;
        else if (ch == ' ' || ch == '\t') return ck_bad(k, 400, "folded or indented trailer line");
        else if (!tchar(ch)) return ck_bad(k, 400, "bad character in a trailer field name");
        else if (k->lines_left-- == 0) return ck_bad(k, 431, "too many header lines");
        else k->st = CK_TR_NAME;
        return 0;
    case CK_TR_NAME:
        if (ch == ':') k->st = CK_TR_VALUE;
        else if (ch == ' ' || ch == '\t') return ck_bad(k, 400, "whitespace in a trailer field name");
        else if (!tchar(ch)) return ck_bad(k, 400, "bad character in a trailer field name");
        return 0;
    case CK_TR_VALUE:
        if (ch == '\r') k->st = CK_TR_LF;
        else if (!hs__field_byte_ok(ch)) return ck_bad(k, 400, "control character in a trailer field value");
        return 0;
    case CK_TR_LF:
        if (ch != '\n') return ck_bad(k, 400, "trailer line not ended by CRLF");
        k->st = CK_TR_START;
        return 0;
    default: /* CK_END_LF */
        if (ch != '\n') return ck_bad(k, 400, "trailer section not ended by CRLF");
        return 1;
    }
}

int hs__chunked(hs_chunked *k, const char *d, size_t n, size_t *used, const char **data, size_t *dlen)
{
    *dlen = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)d[i];
        int rc = 0;
        if (k->st == CK_DATA) {
            size_t take = (uint64_t)(n - i) < k->size ? n - i : (size_t)k->size;
            k->size -= take;
            if (!k->size) k->st = CK_DATA_CR;
            *data = d + i;
            *dlen = take;
            *used = i + take;
            return 0;
        }
        if (k->st <= CK_SIZE_LF) rc = size_byte(k, ch);
        else if (k->st == CK_DATA_CR || k->st == CK_DATA_LF) {
            if (ch != (k->st == CK_DATA_CR ? '\r' : '\n')) rc = ck_bad(k, 400, "chunk data not followed by CRLF");
            else k->st = k->st == CK_DATA_CR ? CK_DATA_LF : CK_SIZE0;
        } else {
            rc = trailer_byte(k, ch);
        }
        if (rc) {
            *used = i + 1;
            return rc;
        }
    }
    *used = n;
    return 0;
}
