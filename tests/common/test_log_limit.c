/* test_log_limit.c: the programs' repeated-log-line limiter (log_limit.h):
 * the first line of a kind passes, repeats within the window are counted
 * and passed on as one "(N more like this since HH:MM:SS)" line that names
 * the first one's time, kinds are told apart by level and by text (numbers
 * aside), flush passes on every count, events are never counted, and
 * threads logging at once lose no line. The clocks are the test's own. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "log_limit.h"

static int64_t fake_now;
static int64_t fake_clock(void) { return fake_now; }
/* The wall clock reads 20:54:19 UTC when the tests start (fake_now 1000000). */
enum { WALL_AT_START_MS = (20 * 3600 + 54 * 60 + 19) * 1000 };
static int64_t fake_wall(void) { return WALL_AT_START_MS + (fake_now - 1000000); }

enum { MAX_OUT = 256 };
typedef struct sink {
    int n;
    int level[MAX_OUT];
    char line[MAX_OUT][DLOCK__LOGLIMIT_LINE + 128];
} sink;

static void to_sink(int level, const char *line, void *ud)
{
    sink *s = ud;
    if (s->n == MAX_OUT) return;
    s->level[s->n] = level;
    snprintf(s->line[s->n], sizeof(s->line[0]), "%s", line);
    s->n++;
}

static dlock__loglimit *new_limiter(sink *s, int64_t window_ms)
{
    dlock__loglimit *l = malloc(sizeof(*l));
    assert_non_null(l);
    *l = (dlock__loglimit)DLOCK__LOGLIMIT_INIT(window_ms, to_sink, s);
    l->clock_ms = fake_clock;
    l->wall_ms = fake_wall;
    memset(s, 0, sizeof(*s));
    fake_now = 1000000;
    return l;
}

/* The count in "... (N more like this since ...)", or -1 when the line has none. */
static long repeated(const char *line)
{
    const char *p = strstr(line, " more like this since ");
    if (!p) return -1;
    while (p > line && p[-1] != '(') p--;
    return strtol(p, NULL, 10);
}

static void test_first_line_passes_and_repeats_are_one_count_line(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 10000);
    for (int i = 0; i < 5000; i++) {
        dlock__loglimit_line(l, 2, "redis error: OOM command not allowed");
        fake_now += 1; /* 5 s of failures */
    }
    assert_int_equal(s.n, 1);
    assert_string_equal(s.line[0], "redis error: OOM command not allowed");
    dlock__loglimit_tick(l); /* window not over yet */
    assert_int_equal(s.n, 1);
    fake_now += 5000;
    dlock__loglimit_tick(l);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.level[1], 2);
    assert_string_equal(s.line[1], "redis error: OOM command not allowed (4999 more like this since 20:54:19)");
    dlock__loglimit_tick(l); /* passed on once */
    assert_int_equal(s.n, 2);
    free(l);
}

static void test_after_the_window_the_next_line_passes_again(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 1000);
    dlock__loglimit_line(l, 1, "a");
    dlock__loglimit_line(l, 1, "a");
    fake_now += 999;
    dlock__loglimit_line(l, 1, "a"); /* still inside */
    assert_int_equal(s.n, 1);
    fake_now += 1;
    dlock__loglimit_line(l, 1, "a"); /* window over: count, then the line */
    assert_int_equal(s.n, 3);
    assert_string_equal(s.line[1], "a (2 more like this since 20:54:19)");
    assert_string_equal(s.line[2], "a");
    /* a line alone in its window leaves no count line behind */
    fake_now += 1000;
    dlock__loglimit_tick(l);
    assert_int_equal(s.n, 3);
    free(l);
}

static void test_a_steady_flood_costs_two_lines_per_window(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 10000);
    for (int i = 0; i < 28312; i++) { /* the 28 312 lines in 8 s, over 60 s here */
        dlock__loglimit_line(l, 2, "redis error: NOAUTH Authentication required.");
        fake_now += 2;
    }
    dlock__loglimit_flush(l);
    assert_in_range(s.n, 10, 14);
    long total = 0;
    for (int i = 0; i < s.n; i++) {
        long r = repeated(s.line[i]);
        total += r > 0 ? r : 1; /* a count line stands for r lines, any other for itself */
    }
    assert_int_equal(total, 28312);
    free(l);
}

static void test_lines_differing_only_in_numbers_are_one_kind(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 10000);
    dlock__loglimit_line(l, 2, "campaign c1: batch of 64 failed after 12 ms");
    dlock__loglimit_line(l, 2, "campaign c2: batch of 3 failed after 4501 ms");
    dlock__loglimit_line(l, 2, "campaign c2: batch of 3 failed after 4501 ms");
    assert_int_equal(s.n, 1);
    dlock__loglimit_flush(l);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.line[1],
                        "campaign c2: batch of 3 failed after 4501 ms (2 more like this since 20:54:19, numbers varying)");
    free(l);
}

static void test_other_text_or_level_is_another_kind(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 10000);
    dlock__loglimit_line(l, 2, "redis error: OOM");
    dlock__loglimit_line(l, 3, "redis error: OOM"); /* level differs */
    dlock__loglimit_line(l, 2, "redis error: NOAUTH");
    dlock__loglimit_line(l, 2, "redis error: OOM!");
    dlock__loglimit_line(l, 2, "campaign 1");
    dlock__loglimit_line(l, 2, "campaign x"); /* a digit run is not a word */
    assert_int_equal(s.n, 6);
    assert_int_equal(s.level[1], 3);
    free(l);
}

static void test_flush_passes_on_every_pending_count(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 60000);
    for (int i = 0; i < 3; i++) dlock__loglimit_line(l, 1, "x");
    dlock__loglimit_line(l, 2, "y");
    dlock__loglimit_line(l, 2, "y");
    fake_now += 1500;
    dlock__loglimit_flush(l); /* at exit: inside the window */
    assert_int_equal(s.n, 4);
    assert_string_equal(s.line[2], "x (2 more like this since 20:54:19)");
    assert_string_equal(s.line[3], "y (1 more like this since 20:54:19)");
    dlock__loglimit_flush(l);
    assert_int_equal(s.n, 4); /* counts are passed on once */
    dlock__loglimit_line(l, 1, "x"); /* forgotten: passes again */
    assert_int_equal(s.n, 5);
    free(l);
}

static void test_a_full_table_evicts_the_oldest_kind_with_its_count(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 60000);
    dlock__loglimit_line(l, 1, "oldest");
    dlock__loglimit_line(l, 1, "oldest");
    char line[32];
    for (int i = 0; i < DLOCK__LOGLIMIT_KINDS - 1; i++) {
        fake_now++;
        snprintf(line, sizeof(line), "kind %c%c", 'a' + i % 26, 'a' + i / 26);
        dlock__loglimit_line(l, 1, line);
    }
    assert_int_equal(s.n, DLOCK__LOGLIMIT_KINDS);
    dlock__loglimit_line(l, 1, "one more kind");
    assert_int_equal(s.n, DLOCK__LOGLIMIT_KINDS + 2);
    assert_int_equal(repeated(s.line[DLOCK__LOGLIMIT_KINDS]), 1);
    assert_non_null(strstr(s.line[DLOCK__LOGLIMIT_KINDS], "oldest"));
    assert_string_equal(s.line[DLOCK__LOGLIMIT_KINDS + 1], "one more kind");
    free(l);
}

static void test_long_lines_are_still_one_kind(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 10000);
    char big[2000];
    memset(big, 'z', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 100; i++) dlock__loglimit_line(l, 2, big);
    assert_int_equal(s.n, 1);
    dlock__loglimit_flush(l);
    assert_int_equal(s.n, 2);
    assert_int_equal(repeated(s.line[1]), 99);
    free(l);
}

/* A summary printed 11 s after the lines it counts names when they began,
 * so it does not read as something that happened at its own time stamp. */
static void test_a_summary_names_the_time_of_the_first_line(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 10000);
    fake_now += 60000; /* 20:55:19 */
    dlock__loglimit_line(l, 2, "redis unreachable");
    fake_now += 500;
    dlock__loglimit_line(l, 2, "redis unreachable");
    fake_now += 11000; /* 20:55:30 */
    dlock__loglimit_tick(l);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.line[1], "redis unreachable (1 more like this since 20:55:19)");
    free(l);
}

/* Start-up and state-change lines are events: two event loops saying the
 * same thing at once are two lines, at once, and nothing is summed later. */
static void test_events_pass_every_time_and_are_never_counted(void **state)
{
    (void)state;
    sink s;
    dlock__loglimit *l = new_limiter(&s, 10000);
    dlock__loglimit_event(l, 1, "loop 1: redis run id 5507, 1 replica(s) connected");
    dlock__loglimit_event(l, 1, "loop 2: redis run id 5507, 1 replica(s) connected");
    dlock__loglimit_event(l, 1, "loop 2: redis run id 5507, 1 replica(s) connected");
    assert_int_equal(s.n, 3);
    assert_string_equal(s.line[1], "loop 2: redis run id 5507, 1 replica(s) connected");
    fake_now += 11000;
    dlock__loglimit_tick(l);
    dlock__loglimit_flush(l);
    assert_int_equal(s.n, 3); /* no summary of events, ever */
    /* an event does not reset a kind of ordinary lines, and a count that is
     * due is passed on before the event that comes after it */
    dlock__loglimit_line(l, 2, "redis error: OOM");
    dlock__loglimit_line(l, 2, "redis error: OOM");
    fake_now += 10000;
    dlock__loglimit_event(l, 1, "loop 1: redis connected");
    assert_int_equal(s.n, 6);
    assert_int_equal(repeated(s.line[4]), 1);
    assert_string_equal(s.line[5], "loop 1: redis connected");
    free(l);
}

/* ---- threads: the real clock, a real mutex ------------------------------ */

static pthread_mutex_t count_mu = PTHREAD_MUTEX_INITIALIZER;
static long counted;

static void count_lines(int level, const char *line, void *ud)
{
    (void)level;
    (void)ud;
    long r = repeated(line);
    pthread_mutex_lock(&count_mu);
    counted += r > 0 ? r : 1;
    pthread_mutex_unlock(&count_mu);
}

static dlock__loglimit shared = DLOCK__LOGLIMIT_INIT(5, count_lines, NULL);

enum { THREADS = 4, PER_THREAD = 20000 };

static void *flood(void *arg)
{
    char line[64];
    for (int i = 0; i < PER_THREAD; i++) {
        snprintf(line, sizeof(line), "thread %d kind %d", (int)(intptr_t)arg, i % 3);
        dlock__loglimit_line(&shared, i % 2, line);
        if (i % 1000 == 0) dlock__loglimit_tick(&shared);
    }
    return NULL;
}

static void test_threads_logging_at_once_lose_no_line(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, flood, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    dlock__loglimit_flush(&shared);
    assert_int_equal(counted, (long)THREADS * PER_THREAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_line_passes_and_repeats_are_one_count_line),
        cmocka_unit_test(test_after_the_window_the_next_line_passes_again),
        cmocka_unit_test(test_a_steady_flood_costs_two_lines_per_window),
        cmocka_unit_test(test_lines_differing_only_in_numbers_are_one_kind),
        cmocka_unit_test(test_other_text_or_level_is_another_kind),
        cmocka_unit_test(test_flush_passes_on_every_pending_count),
        cmocka_unit_test(test_a_full_table_evicts_the_oldest_kind_with_its_count),
        cmocka_unit_test(test_long_lines_are_still_one_kind),
        cmocka_unit_test(test_a_summary_names_the_time_of_the_first_line),
        cmocka_unit_test(test_events_pass_every_time_and_are_never_counted),
        cmocka_unit_test(test_threads_logging_at_once_lose_no_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
