/* slot.c: CRC16-XMODEM and the Cluster hash-tag rule (see slot.h). The
 * table is built on first use from the polynomial; the result must match
 * the spec's test vector (tests/common/test_slot.c checks it). */
#include "slot.h"

#include <pthread.h>
#include <string.h>

static uint16_t s_table[256];
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint16_t c = (uint16_t)(i << 8);
        for (int b = 0; b < 8; b++) c = (uint16_t)(c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1);
        s_table[i] = c;
    }
}

uint16_t dlock__crc16(uint16_t crc, const void *data, size_t n)
{
    pthread_once(&s_once, build_table);
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) crc = (uint16_t)((crc << 8) ^ s_table[((crc >> 8) ^ p[i]) & 0xff]);
    return crc;
}

void dlock__key_hashed_part(const char *key, size_t n, size_t *off_out, size_t *len_out)
{
    *off_out = 0;
    *len_out = n;
    const char *open = memchr(key, '{', n);
    if (!open) return;
    size_t start = (size_t)(open - key) + 1;
    const char *close = memchr(key + start, '}', n - start);
    if (!close || close == key + start) return; /* no '}', or "{}": the whole key */
    *off_out = start;
    *len_out = (size_t)(close - key) - start;
}

unsigned dlock__key_slot(const char *key, size_t n)
{
    size_t off, len;
    dlock__key_hashed_part(key, n, &off, &len);
    return dlock__crc16(0, key + off, len) & (DLOCK__SLOTS - 1);
}
