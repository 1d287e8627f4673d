/* opts_read.c: how every public option struct is read (opts_read.h): by its
 * size field, so a struct of an older or newer 1.x release is read safely
 * and an uninitialised one is refused. */
#include <string.h>

#include "dlock/dlock.h"
#include "opts_read.h"

int dlock__opts_read(void *dst, size_t known, size_t min, const void *src)
{
    size_t size = 0;
    memcpy(&size, src, sizeof(size));
    if (size < min) return DLOCK_EINVAL;
    const unsigned char *p = src;
    for (size_t i = known; i < size; i++)
        if (p[i] != 0) return DLOCK_EINVAL;
    memcpy(dst, src, size < known ? size : known);
    memcpy(dst, &known, sizeof(known));
    return 0;
}
