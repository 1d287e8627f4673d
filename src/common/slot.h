/* slot.h: Redis Cluster key slots: CRC16 (XMODEM: polynomial 0x1021, init 0,
 * no reflection, no final xor, as the Cluster spec defines it) and the
 * hash-tag rule. Shared by the lock family's companion keys and, later, the
 * cluster router. Pure functions; thread-safe. */
#ifndef DLOCK_COMMON_SLOT_H
#define DLOCK_COMMON_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define DLOCK__SLOTS 16384

/* CRC16-XMODEM of n bytes, continuing from crc (pass 0 to start). The
 * spec's check value: dlock__crc16(0, "123456789", 9) == 0x31C3. */
uint16_t dlock__crc16(uint16_t crc, const void *data, size_t n);

/* The part of key the Cluster hashes: if key has a '{' and a '}' after the
 * first '{', and the bytes between them are not empty, those bytes (the
 * hash tag); otherwise the whole key: key[*off_out] onward, *len_out bytes. */
void dlock__key_hashed_part(const char *key, size_t n, size_t *off_out, size_t *len_out);

/* The Cluster slot of key (0..16383): CRC16 of its hashed part mod 16384. */
unsigned dlock__key_slot(const char *key, size_t n);

#endif
