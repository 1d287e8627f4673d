/* sk_log.c: sk_logf, the one place log lines of the engine and of seckilld's
 * front end are formatted (sk_log.h). */
#include "sk_log.h"

#include <stdarg.h>
#include <stdio.h>

void sk_logf(sk_log_fn fn, void *ud, int level, const char *fmt, ...)
{
    if (!fn) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fn(level, msg, ud);
}
