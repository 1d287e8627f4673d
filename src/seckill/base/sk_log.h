/* sk_log.h: the log hook of the flash-sale engine and its front end. The
 * engine never prints: every line goes to a hook the program sets (NULL:
 * silent). Thread-safety: sk_logf is reentrant; the hook is called on the
 * caller's thread. */
#ifndef SK_LOG_H
#define SK_LOG_H

typedef void (*sk_log_fn)(int level, const char *msg, void *ud); /* level: dlock_log_level */

/* Formats one line (at most 511 bytes) and hands it to fn; nothing when fn
 * is NULL. */
void sk_logf(sk_log_fn fn, void *ud, int level, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
