/* order_ref.c: public order ids "<id>-<tag>" (order_ref.h). The tag is
 * the first 8 bytes of HMAC-SHA256(key, "order\n" + id as 8 big-endian
 * bytes), printed as 16 lowercase hex digits; upper-case hex is read too. */
#include "order_ref.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util.h"

#define TAG_BYTES 8

void sk_order_key_derive(const char *secret, unsigned char key_out[SK_ORDER_KEY_LEN])
{
    static const char label[] = "seckill order id key v1";
    unsigned int n = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)label, sizeof(label) - 1, key_out, &n);
}

void sk_order_key_set(sk_order_key *k, const unsigned char raw[SK_ORDER_KEY_LEN])
{
    sk_hmac_key_set(&k->mac, raw, SK_ORDER_KEY_LEN); /* a block or less: cannot fail */
}

void sk_order_key_clear(sk_order_key *k) { sk_hmac_key_clear(&k->mac); }

static void tag_of(sk_order_key *key, uint64_t id, unsigned char tag[TAG_BYTES])
{
    unsigned char msg[14] = {'o', 'r', 'd', 'e', 'r', '\n'}, md[SK_HMAC_LEN];
    for (int i = 0; i < 8; i++) msg[6 + i] = (unsigned char)(id >> (56 - 8 * i));
    sk_hmac_sha256(&key->mac, msg, sizeof(msg), md);
    memcpy(tag, md, TAG_BYTES);
}

void sk_order_ref_format(sk_order_key *key, uint64_t id, char out[SK_ORDER_REF_MAX])
{
    static const char hex[] = "0123456789abcdef";
    char num[24], *e = num + sizeof(num), *d = dlock__digits(e, id);
    unsigned char tag[TAG_BYTES];
    tag_of(key, id, tag);
    size_t n = (size_t)(e - d);
    memcpy(out, d, n);
    out[n++] = '-';
    for (int i = 0; i < TAG_BYTES; i++) {
        out[n++] = hex[tag[i] >> 4];
        out[n++] = hex[tag[i] & 15];
    }
    out[n] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The decimal id at s (up to '-' or the end) into *id_out; the length
 * read, or 0 when it is not 1..20 digits that fit in 64 bits. */
static size_t read_id(const char *s, uint64_t *id_out)
{
    uint64_t v = 0;
    size_t i = 0;
    for (; s[i] && s[i] != '-'; i++) {
        if (i == 20 || s[i] < '0' || s[i] > '9') return 0;
        uint64_t dgt = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - dgt) / 10) return 0;
        v = v * 10 + dgt;
    }
    *id_out = v;
    return i;
}

bool sk_order_ref_parse(sk_order_key *key, const char *s, uint64_t *id_out,
                        bool *tag_ok_out)
{
    size_t n = read_id(s, id_out);
    *tag_ok_out = false;
    if (n == 0) return false;
    if (s[n] == '\0') return true; /* a bare id: never a buyer's */
    const char *h = s + n + 1;
    if (strlen(h) != 2 * TAG_BYTES) return false;
    unsigned char given[TAG_BYTES], want[TAG_BYTES];
    for (int i = 0; i < TAG_BYTES; i++) {
        int hi = hexval(h[2 * i]), lo = hexval(h[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        given[i] = (unsigned char)(hi << 4 | lo);
    }
    tag_of(key, *id_out, want);
    *tag_ok_out = CRYPTO_memcmp(given, want, TAG_BYTES) == 0;
    return true;
}
