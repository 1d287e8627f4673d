/* order_ref.h: the order ids buyers see. Inside (Redis, the stream, the
 * database) an order keeps its 64-bit time-ordered id (orderid.h); a buyer
 * is handed "<id>-<tag>", tag = 16 hex digits of HMAC-SHA256 over the id
 * under the deployment's order key, so ids cannot be enumerated: guessing
 * one means guessing 64 bits. Every instance of a deployment derives the
 * same key from the same secret (docs/http-api.md, "Order ids").
 * Thread-safety: a key (sk_order_key) is used by one thread at a time
 * (each event loop keeps its own). */
#ifndef SK_ORDER_REF_H
#define SK_ORDER_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "hmac_key.h"

#define SK_ORDER_KEY_LEN 32
#define SK_ORDER_REF_MAX 40 /* 20 digits, '-', 16 hex, NUL */

/* The order key from secret (any length > 0): HMAC-SHA256(secret, a fixed
 * label), so the same secret used elsewhere yields an unrelated key. */
void sk_order_key_derive(const char *secret, unsigned char key_out[SK_ORDER_KEY_LEN]);

/* A key ready for tags (hmac_key.h: HMAC's keyed states made once; every
 * accepted purchase makes a tag). */
typedef struct sk_order_key {
    sk_hmac_key mac;
} sk_order_key;

/* Sets k from raw (k is then released with sk_order_key_clear). A key
 * whose states could not be made still gives the same tags, slower. */
void sk_order_key_set(sk_order_key *k, const unsigned char raw[SK_ORDER_KEY_LEN]);
void sk_order_key_clear(sk_order_key *k);

/* "<id>-<tag>" of id into out. */
void sk_order_ref_format(sk_order_key *key, uint64_t id, char out[SK_ORDER_REF_MAX]);

/* Reads s: "<id>-<16 hex>" or a bare "<id>" (decimal, 1..20 digits, no
 * sign). false when it is neither (or the id overflows). Otherwise *id_out
 * is the id and *tag_ok_out says whether the tag is the one key gives (a
 * bare id: false), compared in constant time. */
bool sk_order_ref_parse(sk_order_key *key, const char *s, uint64_t *id_out,
                        bool *tag_ok_out);

#endif
