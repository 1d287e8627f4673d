/* text.h: how the admin tool shows text that comes from Redis or the
 * database (titles, reasons, users, differences): never a byte that drives
 * a terminal or reorders what is shown. Invariant: the human form holds no
 * control character (C0, DEL, C1) and no bidi or invisible code point;
 * the JSON form is valid JSON with the same code points escaped. */
#ifndef SECKILL_TOOL_TEXT_H
#define SECKILL_TOOL_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The hidden code point at s (bidi controls and isolates, zero-width and
 * other invisible format characters, line and paragraph separators, the
 * BOM, tags: Unicode's Cf and Zl/Zp a reader cannot see) into *cp, and its
 * length in bytes; 0 when s does not start with one. */
size_t sk_tool_hidden(const char *s, uint32_t *cp);
/* s for a terminal or a log: C0, DEL, C1 and the backslash as \xNN (bytes),
 * a hidden code point as \uXXXX (\UXXXXXXXX above U+FFFF); the rest as is. */
void sk_tool_put_text(dlock__buf *o, const char *s);
/* s as a JSON string (the one JSON writer, json.h) with DEL, C1 and the
 * hidden code points written as \u escapes too (surrogate pairs above
 * U+FFFF): still valid JSON, the same text for a JSON reader. */
void sk_tool_put_json(dlock__buf *o, const char *s);

#endif
