/* opts_read.h: reading a public option struct that can grow (dlock.h,
 * "Contracts"): each begins with size_t size, set by its *_options_init.
 * Internal only. */
#ifndef DLOCK_LIB_OPTS_READ_H
#define DLOCK_LIB_OPTS_READ_H

#include <stddef.h>

/* The size of type up to and including its field last: the size of a
 * release's struct, when last was that release's last field. */
#define DLOCK__SIZE_TO(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

/* dst (known bytes, already filled with defaults) takes the fields that
 * src's size covers. src->size below min (the 1.0 size), or non-zero bytes
 * of src past known (fields of a later release this library does not
 * know), are DLOCK_EINVAL and leave dst as it was. dst's size is known. */
int dlock__opts_read(void *dst, size_t known, size_t min, const void *src);

#endif
