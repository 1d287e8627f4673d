/* base64.h: the standard base64 alphabet (RFC 4648 section 4, with '='
 * padding), as etcd's JSON gateway uses for keys and values. Decoding is
 * strict: it rejects characters outside the alphabet, missing or misplaced
 * padding and non-zero pad bits, so garbage is never silently accepted. */
#ifndef DLOCK_COMMON_BASE64_H
#define DLOCK_COMMON_BASE64_H

#include <stddef.h>

/* Bytes needed to encode n input bytes, including the NUL. */
size_t dlock__b64_encoded_size(size_t n);

/* Encodes n bytes of in into out (at least dlock__b64_encoded_size(n)
 * bytes), NUL-terminated. Returns the encoded length (without the NUL). */
size_t dlock__b64_encode(const void *in, size_t n, char *out);

/* Decodes n characters of in into out (at least n / 4 * 3 + 1 bytes; a NUL
 * is appended). Returns 0 and *len_out, or DLOCK__EINVAL for malformed
 * input (out then holds nothing meaningful). */
int dlock__b64_decode(const char *in, size_t n, unsigned char *out, size_t *len_out);

#endif
