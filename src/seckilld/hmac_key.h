/* hmac_key.h: HMAC-SHA256 under a key used many times (the order key, the
 * user secrets): HMAC's two keyed SHA-256 states are computed once, so a
 * MAC costs two state copies and the message's hash blocks, without the
 * algorithm look-up, allocations and key padding of a one-shot HMAC().
 * Thread-safety: a key is used by one thread at a time (each event loop
 * keeps its own). */
#ifndef SK_HMAC_KEY_H
#define SK_HMAC_KEY_H

#include <stddef.h>

#include <openssl/types.h>

#define SK_HMAC_LEN   32
#define SK_HMAC_BLOCK 64

typedef struct sk_hmac_key {
    unsigned char k[SK_HMAC_BLOCK]; /* the key as HMAC uses it (SHA-256 of a key over a block) */
    size_t klen;
    EVP_MD_CTX *inner, *outer, *work; /* NULL (out of memory): each MAC is computed whole */
} sk_hmac_key;

/* Sets k from key (len bytes; released with sk_hmac_key_clear): 0, or -1
 * when a key over a block could not be hashed (k is then empty). A key
 * whose states could not be made still gives the same MACs, slower. */
int sk_hmac_key_set(sk_hmac_key *k, const void *key, size_t len);
void sk_hmac_key_clear(sk_hmac_key *k);
/* HMAC-SHA256(key, msg) into md; the same bytes HMAC() gives. */
void sk_hmac_sha256(const sk_hmac_key *k, const void *msg, size_t n, unsigned char md[SK_HMAC_LEN]);

#endif
