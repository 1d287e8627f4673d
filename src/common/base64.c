/* base64.c: the codec of base64.h. Invariant: encode and decode are exact
 * inverses on every input; decode never writes past n / 4 * 3 + 1 bytes. */
#include "base64.h"

#include <stdbool.h>

#include "common_err.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t dlock__b64_encoded_size(size_t n)
{
    return (n + 2) / 3 * 4 + 1;
}

size_t dlock__b64_encode(const void *in, size_t n, char *out)
{
    const unsigned char *p = in;
    size_t j = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n) v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        out[j++] = alphabet[(v >> 18) & 63];
        out[j++] = alphabet[(v >> 12) & 63];
        out[j++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        out[j++] = i + 2 < n ? alphabet[v & 63] : '=';
    }
    out[j] = '\0';
    return j;
}

static int sextet(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

int dlock__b64_decode(const char *in, size_t n, unsigned char *out, size_t *len_out)
{
    size_t j = 0;
    if (n % 4 != 0) return DLOCK__EINVAL;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        int pad = 0;
        if (in[i + 3] == '=') pad = in[i + 2] == '=' ? 2 : 1;
        if (pad && !last) return DLOCK__EINVAL;
        int s[4];
        for (int k = 0; k < 4 - pad; k++)
            if ((s[k] = sextet(in[i + k])) < 0) return DLOCK__EINVAL;
        for (int k = 4 - pad; k < 4; k++) s[k] = 0;
        unsigned v = (unsigned)s[0] << 18 | (unsigned)s[1] << 12 | (unsigned)s[2] << 6 | (unsigned)s[3];
        if ((pad == 2 && (v & 0xffff)) || (pad == 1 && (v & 0xff))) return DLOCK__EINVAL;
        out[j++] = (unsigned char)(v >> 16);
        if (pad < 2) out[j++] = (unsigned char)(v >> 8);
        if (pad < 1) out[j++] = (unsigned char)v;
    }
    out[j] = '\0';
    *len_out = j;
    return 0;
}
