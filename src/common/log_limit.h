/* log_limit.h: repeated log lines, rate-limited with a count. Every
 * program's log output goes through one of these (seckilld, seckill-persist,
 * dlock -v), so a failure that repeats thousands of times a second costs a
 * few lines, not thousands; the hooks of libdlock and of the engine still
 * see every line.
 *
 * Lines are of one kind when they have the same level and the same text
 * once every run of digits is read as one number ("took 12 ms" and "took
 * 345 ms" are one kind). The first line of a kind is passed on at once;
 * lines of that kind within window_ms after it are counted instead; once
 * the window has passed (seen at the next line of any kind, at
 * dlock__loglimit_tick or at dlock__loglimit_flush), the count is passed on
 * as one line at the same level, a summary that says so and since when:
 *     <the last line counted> (N more like this since HH:MM:SS)
 * (the wall-clock UTC time of the kind's first line, which was passed on)
 * with ", numbers varying" before the ')' when the counted lines were not
 * all identical to the first. A kind that keeps coming therefore costs at
 * most two lines per window. At most DLOCK__LOGLIMIT_KINDS kinds are
 * tracked at once; a new kind beyond that evicts the oldest (its count is
 * passed on first).
 *
 * Events (a start-up line, a state change) are not noise: they go through
 * dlock__loglimit_event, which passes every line on at once and counts
 * nothing, so an event is never folded into a later summary.
 *
 * Thread-safety: every function may be called from any thread (one mutex
 * per limiter). The emit function is called with that mutex held, in the
 * order the lines were given: it must not log through the same limiter.
 * After fork, only the child's thread may use it (as with any mutex). */
#ifndef DLOCK_COMMON_LOG_LIMIT_H
#define DLOCK_COMMON_LOG_LIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* Writes one finished line (no newline in it) wherever the program logs. */
typedef void (*dlock__loglimit_emit)(int level, const char *line, void *ud);

enum { DLOCK__LOGLIMIT_KINDS = 32, DLOCK__LOGLIMIT_LINE = 512 };

typedef struct dlock__loglimit_kind {
    bool used;
    int level;
    uint64_t hash;                       /* of the text with digit runs as one '#' */
    int64_t first_ms;                    /* when its first line was passed on */
    int64_t first_wall_ms;               /* the same instant on the wall clock */
    uint64_t repeats;                    /* lines counted since (not passed on) */
    bool varied;                         /* a counted line differed from the first */
    char first[DLOCK__LOGLIMIT_LINE];    /* truncated copies */
    char last[DLOCK__LOGLIMIT_LINE];
} dlock__loglimit_kind;

/* The fields are private; a limiter is set up with DLOCK__LOGLIMIT_INIT
 * (static storage, no allocation, nothing to free). */
typedef struct dlock__loglimit {
    pthread_mutex_t mu;
    int64_t window_ms;
    dlock__loglimit_emit emit;
    void *ud;
    int64_t (*clock_ms)(void); /* NULL: dlock__now_ms (tests set their own) */
    int64_t (*wall_ms)(void);  /* NULL: dlock__wall_ms (for "since HH:MM:SS") */
    dlock__loglimit_kind kind[DLOCK__LOGLIMIT_KINDS];
} dlock__loglimit;

#define DLOCK__LOGLIMIT_INIT(window_ms_, emit_, ud_) \
    {.mu = PTHREAD_MUTEX_INITIALIZER, .window_ms = (window_ms_), .emit = (emit_), .ud = (ud_)}

/* The window the programs use. */
#define DLOCK__LOGLIMIT_WINDOW_MS 10000

/* Passes line on (emit) or counts it, as described above. */
void dlock__loglimit_line(dlock__loglimit *l, int level, const char *line);
/* Passes line on at once, whatever came before: for events (start-up,
 * state changes), which must be seen when they happen, each one. */
void dlock__loglimit_event(dlock__loglimit *l, int level, const char *line);
/* Passes on the counts whose window has passed (for a periodic timer, so
 * a count shows up soon after a flood stops even when nothing else is
 * logged). */
void dlock__loglimit_tick(dlock__loglimit *l);
/* Passes on every count now, window passed or not, and forgets every kind:
 * call it before the program exits. */
void dlock__loglimit_flush(dlock__loglimit *l);

#endif
