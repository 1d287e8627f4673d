/* text.c: the admin tool's safe text (text.h). Invariant: every byte of
 * the input comes out, as itself or escaped; nothing shown can move the
 * cursor, recolour the terminal, reorder the line or hide a character. */
#include "text.h"

#include <stdbool.h>
#include <string.h>

#include "json.h"

/* The hidden ranges (inclusive), sorted. */
static const uint32_t hidden_ranges[][2] = {
    {0x00ad, 0x00ad},   {0x034f, 0x034f},   {0x061c, 0x061c},   {0x115f, 0x1160}, {0x17b4, 0x17b5},
    {0x180b, 0x180f},   {0x200b, 0x200f},   {0x2028, 0x202e},   {0x2060, 0x206f}, {0x3164, 0x3164},
    {0xfe00, 0xfe0f},   {0xfeff, 0xfeff},   {0xffa0, 0xffa0},   {0xfff0, 0xfffb}, {0x1d173, 0x1d17a},
    {0xe0000, 0xe0fff},
};

/* The code point of the UTF-8 sequence at s (2 to 4 bytes, well formed),
 * its length; 0 for ASCII or a malformed sequence. */
static size_t utf8_at(const unsigned char *s, uint32_t *cp)
{
    size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    if (!n) return 0;
    uint32_t v = s[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    *cp = v;
    return n;
}

size_t sk_tool_hidden(const char *s, uint32_t *cp)
{
    uint32_t v = 0;
    size_t n = utf8_at((const unsigned char *)s, &v);
    if (!n) return 0;
    for (size_t i = 0; i < sizeof(hidden_ranges) / sizeof(hidden_ranges[0]); i++) {
        if (v < hidden_ranges[i][0]) break;
        if (v <= hidden_ranges[i][1]) {
            *cp = v;
            return n;
        }
    }
    return 0;
}

static void put_u(dlock__buf *o, uint32_t cp, bool json)
{
    if (cp <= 0xffff) {
        dlock__buf_printf(o, "\\u%04x", (unsigned)cp);
    } else if (!json) {
        dlock__buf_printf(o, "\\U%08x", (unsigned)cp);
    } else { /* JSON knows code points above U+FFFF only as a surrogate pair */
        uint32_t v = cp - 0x10000;
        dlock__buf_printf(o, "\\u%04x\\u%04x", (unsigned)(0xd800 + (v >> 10)), (unsigned)(0xdc00 + (v & 0x3ff)));
    }
}

void sk_tool_put_text(dlock__buf *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        uint32_t cp;
        size_t hn = sk_tool_hidden((const char *)p, &cp);
        if (hn) {
            put_u(o, cp, false);
            p += hn - 1;
            continue;
        }
        bool c1 = p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
        if (*p >= 0x20 && *p != 0x7f && *p != '\\' && !c1) {
            dlock__buf_append(o, (const char *)p, 1);
            continue;
        }
        for (int k = 0; k < (c1 ? 2 : 1); k++) {
            char esc[4] = {'\\', 'x', hex[p[k] >> 4], hex[p[k] & 15]};
            dlock__buf_append(o, esc, 4);
        }
        if (c1) p++;
    }
}

/* The JSON writer's escapes of s[0..n), without its quotes. */
static void put_json_run(dlock__buf *o, dlock__buf *tmp, const char *s, size_t n)
{
    tmp->len = 0;
    dlock__json_put_str(tmp, s, n);
    if (tmp->len >= 2) dlock__buf_append(o, tmp->data + 1, tmp->len - 2);
}

void sk_tool_put_json(dlock__buf *o, const char *s)
{
    dlock__buf tmp = {0};
    dlock__buf_append(o, "\"", 1);
    const char *run = s, *p = s;
    while (*p) {
        const unsigned char *u = (const unsigned char *)p;
        uint32_t cp = 0;
        size_t n = sk_tool_hidden(p, &cp);
        if (!n && *u == 0x7f) n = 1, cp = 0x7f;
        if (!n && u[0] == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f) n = 2, cp = u[1];
        if (!n) {
            p++;
            continue;
        }
        put_json_run(o, &tmp, run, (size_t)(p - run));
        put_u(o, cp, true);
        p += n;
        run = p;
    }
    put_json_run(o, &tmp, run, (size_t)(p - run));
    dlock__buf_append(o, "\"", 1);
    dlock__buf_free(&tmp);
}
