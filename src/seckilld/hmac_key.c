/* hmac_key.c: HMAC-SHA256 with its keyed states made once (hmac_key.h;
 * RFC 2104: inner = SHA-256 after (key ^ ipad), outer = after (key ^ opad),
 * a key longer than a block replaced by its SHA-256). */
#include "hmac_key.h"

#include <stdbool.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

int sk_hmac_key_set(sk_hmac_key *k, const void *key, size_t len)
{
    memset(k, 0, sizeof(*k));
    if (len > SK_HMAC_BLOCK) {
        unsigned int n = 0;
        if (EVP_Digest(key, len, k->k, &n, EVP_sha256(), NULL) != 1 || n != SK_HMAC_LEN) {
            OPENSSL_cleanse(k, sizeof(*k));
            return -1;
        }
        k->klen = n;
    } else {
        if (len) memcpy(k->k, key, len);
        k->klen = len;
    }
    unsigned char ipad[SK_HMAC_BLOCK], opad[SK_HMAC_BLOCK];
    for (int i = 0; i < SK_HMAC_BLOCK; i++) {
        ipad[i] = k->k[i] ^ 0x36; /* k->k is zero past klen: HMAC's padding */
        opad[i] = k->k[i] ^ 0x5c;
    }
    k->inner = EVP_MD_CTX_new();
    k->outer = EVP_MD_CTX_new();
    k->work = EVP_MD_CTX_new();
    bool ok = k->inner && k->outer && k->work && EVP_DigestInit_ex(k->inner, EVP_sha256(), NULL) == 1 &&
              EVP_DigestUpdate(k->inner, ipad, sizeof(ipad)) == 1 &&
              EVP_DigestInit_ex(k->outer, EVP_sha256(), NULL) == 1 &&
              EVP_DigestUpdate(k->outer, opad, sizeof(opad)) == 1;
    OPENSSL_cleanse(ipad, sizeof(ipad));
    OPENSSL_cleanse(opad, sizeof(opad));
    if (!ok) {
        EVP_MD_CTX_free(k->inner);
        EVP_MD_CTX_free(k->outer);
        EVP_MD_CTX_free(k->work);
        k->inner = k->outer = k->work = NULL;
    }
    return 0;
}

void sk_hmac_key_clear(sk_hmac_key *k)
{
    EVP_MD_CTX_free(k->inner);
    EVP_MD_CTX_free(k->outer);
    EVP_MD_CTX_free(k->work);
    OPENSSL_cleanse(k, sizeof(*k));
}

/* The keyed states' MAC; false when a step failed. */
static bool keyed(const sk_hmac_key *k, const void *msg, size_t n, unsigned char md[SK_HMAC_LEN])
{
    unsigned char in[EVP_MAX_MD_SIZE], out[EVP_MAX_MD_SIZE];
    unsigned int il = 0, ol = 0;
    bool ok = k->work && EVP_MD_CTX_copy_ex(k->work, k->inner) == 1 &&
              EVP_DigestUpdate(k->work, msg, n) == 1 && EVP_DigestFinal_ex(k->work, in, &il) == 1 &&
              EVP_MD_CTX_copy_ex(k->work, k->outer) == 1 && EVP_DigestUpdate(k->work, in, il) == 1 &&
              EVP_DigestFinal_ex(k->work, out, &ol) == 1 && ol == SK_HMAC_LEN;
    if (ok) memcpy(md, out, SK_HMAC_LEN);
    return ok;
}

void sk_hmac_sha256(const sk_hmac_key *k, const void *msg, size_t n, unsigned char md[SK_HMAC_LEN])
{
    if (keyed(k, msg, n, md)) return;
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int ol = 0;
    HMAC(EVP_sha256(), k->k, (int)k->klen, msg, n, out, &ol);
    memcpy(md, out, SK_HMAC_LEN);
}
