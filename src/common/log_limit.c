/* log_limit.c: the repeated-line limiter of log_limit.h. Invariant: every
 * line given is either passed on or counted in exactly one kind, and every
 * count is passed on once (when its window has passed, when its kind is
 * evicted, or at flush). */
#include "log_limit.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util.h"

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* FNV-1a of the text with every run of digits hashed as one '#'. */
static uint64_t kind_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    while (*s) {
        char c = *s++;
        if (is_digit(c)) {
            while (is_digit(*s)) s++;
            c = '#';
        }
        h = (h ^ (unsigned char)c) * 1099511628211ULL;
    }
    return h;
}

/* a and b are the same text once digit runs are read as one number. */
static bool same_kind(const char *a, const char *b)
{
    while (*a && *b) {
        if (is_digit(*a) && is_digit(*b)) {
            while (is_digit(*a)) a++;
            while (is_digit(*b)) b++;
            continue;
        }
        if (*a != *b) return false;
        a++;
        b++;
    }
    return *a == *b;
}

static int64_t now_ms(const dlock__loglimit *l) { return l->clock_ms ? l->clock_ms() : dlock__now_ms(); }
static int64_t wall_ms(const dlock__loglimit *l) { return l->wall_ms ? l->wall_ms() : dlock__wall_ms(); }

/* Passes k's count on (if any) and frees k. */
static void close_kind(dlock__loglimit *l, dlock__loglimit_kind *k)
{
    if (k->repeats > 0) {
        time_t first = (time_t)(k->first_wall_ms / 1000);
        struct tm tm;
        char since[16] = "?";
        if (gmtime_r(&first, &tm)) strftime(since, sizeof(since), "%H:%M:%S", &tm);
        char line[DLOCK__LOGLIMIT_LINE + 96];
        snprintf(line, sizeof(line), "%s (%llu more like this since %s%s)", k->last, (unsigned long long)k->repeats,
                 since, k->varied ? ", numbers varying" : "");
        l->emit(k->level, line, l->ud);
    }
    k->used = false;
}

static void close_expired(dlock__loglimit *l, int64_t now)
{
    for (int i = 0; i < DLOCK__LOGLIMIT_KINDS; i++) {
        dlock__loglimit_kind *k = &l->kind[i];
        if (k->used && now - k->first_ms >= l->window_ms) close_kind(l, k);
    }
}

static dlock__loglimit_kind *find_kind(dlock__loglimit *l, int level, uint64_t h, const char *line)
{
    for (int i = 0; i < DLOCK__LOGLIMIT_KINDS; i++) {
        dlock__loglimit_kind *k = &l->kind[i];
        if (k->used && k->level == level && k->hash == h && same_kind(k->first, line)) return k;
    }
    return NULL;
}

/* A free kind, or the oldest one closed (its count passed on). */
static dlock__loglimit_kind *free_kind(dlock__loglimit *l)
{
    dlock__loglimit_kind *oldest = &l->kind[0];
    for (int i = 0; i < DLOCK__LOGLIMIT_KINDS; i++) {
        dlock__loglimit_kind *k = &l->kind[i];
        if (!k->used) return k;
        if (k->first_ms < oldest->first_ms) oldest = k;
    }
    close_kind(l, oldest);
    return oldest;
}

void dlock__loglimit_line(dlock__loglimit *l, int level, const char *line)
{
    /* kinds are told apart by the stored (truncated) text: so is the line */
    char t[DLOCK__LOGLIMIT_LINE];
    snprintf(t, sizeof(t), "%s", line);
    uint64_t h = kind_hash(t);
    pthread_mutex_lock(&l->mu);
    int64_t now = now_ms(l);
    close_expired(l, now);
    dlock__loglimit_kind *k = find_kind(l, level, h, t);
    if (k) {
        k->repeats++;
        if (strcmp(k->first, t) != 0) k->varied = true;
        memcpy(k->last, t, sizeof(t));
    } else {
        k = free_kind(l);
        *k = (dlock__loglimit_kind){
            .used = true, .level = level, .hash = h, .first_ms = now, .first_wall_ms = wall_ms(l)};
        memcpy(k->first, t, sizeof(t));
        memcpy(k->last, t, sizeof(t));
        l->emit(level, line, l->ud);
    }
    pthread_mutex_unlock(&l->mu);
}

void dlock__loglimit_event(dlock__loglimit *l, int level, const char *line)
{
    pthread_mutex_lock(&l->mu);
    close_expired(l, now_ms(l)); /* counts that are due come first, in order */
    l->emit(level, line, l->ud);
    pthread_mutex_unlock(&l->mu);
}

void dlock__loglimit_tick(dlock__loglimit *l)
{
    pthread_mutex_lock(&l->mu);
    close_expired(l, now_ms(l));
    pthread_mutex_unlock(&l->mu);
}

void dlock__loglimit_flush(dlock__loglimit *l)
{
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < DLOCK__LOGLIMIT_KINDS; i++)
        if (l->kind[i].used) close_kind(l, &l->kind[i]);
    pthread_mutex_unlock(&l->mu);
}
