/* test_options.c: the programs' options module (tools/common/options.h):
 * integers take the whole string within range, one duration syntax with
 * bare numbers in the option's historical unit, and the table parser
 * (long, short, --name=value, flags, operands, defaults, environment). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "options.h"

#define DAY_MS (24LL * 3600 * 1000)

static char err[512];

static int dur(const char *s, opt_unit bare, int64_t *ms)
{
    err[0] = '\0';
    return opt_parse_duration("--wait", s, bare, 0, 30 * DAY_MS, ms, err, sizeof(err));
}

static void expect_err_has(const char *needle)
{
    if (!strstr(err, needle)) fail_msg("error '%s' does not contain '%s'", err, needle);
}

static void test_integers_take_the_whole_string_in_range(void **state)
{
    (void)state;
    int64_t v = 0;
    assert_int_equal(opt_parse_int("--batch", "42", 1, 100, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 42);
    assert_int_equal(opt_parse_int("--off", "-5", -10, 10, &v, err, sizeof(err)), 0);
    assert_int_equal(v, -5);
    assert_int_equal(opt_parse_int("--batch", "100", 1, 100, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 100);
    const char *bad[] = {"", "4x", " 4", "\t4", "4 ", "+4", "-", "--4", "0x10", "1.5", "101", "0", "-1", "99999999999999999999",
                         "-99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        err[0] = '\0';
        if (opt_parse_int("--batch", bad[i], 1, 100, &v, err, sizeof(err)) != -1) fail_msg("accepted '%s'", bad[i]);
        assert_int_equal(v, 7); /* nothing stored */
        expect_err_has("--batch");
        expect_err_has("from 1 to 100");
    }
    assert_int_equal(opt_parse_int("--batch", NULL, 1, 100, &v, err, sizeof(err)), -1);
}

static void test_durations_take_units_and_bare_numbers_in_the_historical_unit(void **state)
{
    (void)state;
    static const struct { const char *s; opt_unit bare; int64_t ms; } ok[] = {
        {"250ms", OPT_UNIT_S, 250}, {"1.5s", OPT_UNIT_S, 1500}, {"30s", OPT_UNIT_MS, 30000},
        {"2m", OPT_UNIT_S, 120000}, {"2h", OPT_UNIT_MS, 7200000}, {"15m", OPT_UNIT_MS, 900000},
        {"10", OPT_UNIT_S, 10000},  {"0.5", OPT_UNIT_S, 500},     {".5", OPT_UNIT_S, 500},
        {"1500", OPT_UNIT_MS, 1500}, {"0", OPT_UNIT_S, 0},        {"0ms", OPT_UNIT_MS, 0},
        {"0.0015", OPT_UNIT_S, 2}, {"720h", OPT_UNIT_S, 30 * DAY_MS},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t ms = -1;
        if (dur(ok[i].s, ok[i].bare, &ms) != 0) fail_msg("refused '%s': %s", ok[i].s, err);
        if (ms != ok[i].ms) fail_msg("'%s' gave %lld ms, want %lld", ok[i].s, (long long)ms, (long long)ok[i].ms);
    }
}

static void test_durations_refuse_junk_naming_the_accepted_range(void **state)
{
    (void)state;
    const char *bad[] = {"1e30", "1e3", "-1", "inf", "nan", "5x", "", "1.2.3", "s", "ms", "10 s", "1.5d",
                         "99999999999", "721h", "0x10", "+1", "1,5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t ms = 7;
        if (dur(bad[i], OPT_UNIT_S, &ms) != -1) fail_msg("accepted '%s'", bad[i]);
        assert_int_equal(ms, 7);
        expect_err_has("--wait");
        expect_err_has("from 0 to 720h");
        expect_err_has("a bare number is seconds");
    }
    int64_t ms = 7;
    assert_int_equal(dur("0.0001", OPT_UNIT_S, &ms), -1);
    expect_err_has("finer than 1ms");
    expect_err_has("from 0 to 720h");
    assert_int_equal(opt_parse_duration("--lease", "0", OPT_UNIT_S, 1, 1000, &ms, err, sizeof(err)), -1);
    expect_err_has("from 1ms to 1s");
    assert_int_equal(opt_parse_duration("--block", "61s", OPT_UNIT_MS, 0, 60000, &ms, err, sizeof(err)), -1);
    expect_err_has("from 0 to 1m");
    expect_err_has("a bare number is milliseconds");
    assert_int_equal(ms, 7);
}

/* A refusal's examples lie inside the option's own range (the
 * message for a 300ms minimum suggested 250ms). */
static void test_duration_examples_are_valid_for_the_option(void **state)
{
    (void)state;
    int64_t ms = 7;
    assert_int_equal(opt_parse_duration("--watchdog-lease", "200ms", OPT_UNIT_S, 300, 30 * DAY_MS, &ms, err,
                                        sizeof(err)), -1);
    assert_string_equal(err, "invalid --watchdog-lease '200ms': expected a duration from 300ms to 720h "
                             "(e.g. 1.5s, 2m, 1h; a bare number is seconds)");
    assert_int_equal(opt_parse_duration("--block", "x", OPT_UNIT_MS, 0, 1000, &ms, err, sizeof(err)), -1);
    assert_string_equal(err, "invalid --block 'x': expected a duration from 0 to 1s "
                             "(e.g. 250ms; a bare number is milliseconds)");
    assert_int_equal(opt_parse_duration("--w", "x", OPT_UNIT_MS, 2, 3, &ms, err, sizeof(err)), -1);
    expect_err_has("(e.g. 2ms;");
    /* every example any refusal gives parses in its own range */
    static const int64_t ranges[][2] = {{0, 1000}, {1, 30 * DAY_MS}, {300, 30 * DAY_MS}, {2000, 60000},
                                        {100, 600000}, {1000, 3600000}};
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
        assert_int_equal(opt_parse_duration("--d", "junk", OPT_UNIT_S, ranges[i][0], ranges[i][1], &ms, err,
                                            sizeof(err)), -1);
        char eg[128], *save = NULL;
        const char *p = strstr(err, "(e.g. ");
        assert_non_null(p);
        snprintf(eg, sizeof(eg), "%s", p + 6);
        *strchr(eg, ';') = '\0';
        for (char *t = strtok_r(eg, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
            if (opt_parse_duration("--d", t, OPT_UNIT_S, ranges[i][0], ranges[i][1], &ms, err, sizeof(err)))
                fail_msg("example '%s' refused: %s", t, err);
    }
}

static char warned[512];
static int nwarned;
static void on_warn(const char *msg)
{
    snprintf(warned, sizeof(warned), "%s", msg);
    nwarned++;
}

/* A bare number (not 0) is deprecated: one warning through the sink; a
 * unit, 0, a name that says its unit, or a default: none. */
static void test_bare_durations_warn_unless_the_name_says_the_unit(void **state)
{
    (void)state;
    static int64_t ms;
    static const opt_spec sp[] = {
        {.name = "wait", .type = OPT_DURATION, .lo = 0, .hi = DAY_MS, .unit = OPT_UNIT_S, .def = "10"},
        {.name = "block", .type = OPT_DURATION, .lo = 0, .hi = DAY_MS, .unit = OPT_UNIT_MS},
        {.name = "idle-timeout-ms", .type = OPT_DURATION, .lo = 0, .hi = DAY_MS, .unit = OPT_UNIT_MS},
    };
    opt_set_warn(on_warn);
    nwarned = 0;
    assert_int_equal(opt_set_defaults(sp, 1, &ms, err, sizeof(err)), 0);
    assert_int_equal(opt_set(&sp[0], &ms, "0", err, sizeof(err)), 0);
    assert_int_equal(opt_set(&sp[0], &ms, "2.5s", err, sizeof(err)), 0);
    assert_int_equal(opt_set(&sp[2], &ms, "250", err, sizeof(err)), 0);
    assert_int_equal(opt_set_named(&sp[2], "SECKILL_IDLE_TIMEOUT_MS", &ms, "250", err, sizeof(err)), 0);
    assert_int_equal(nwarned, 0);
    assert_int_equal(opt_set(&sp[0], &ms, "1.5", err, sizeof(err)), 0);
    assert_int_equal(ms, 1500); /* still seconds */
    assert_string_equal(warned, "warning: --wait 1.5: a bare number is seconds here but milliseconds in other "
                                "programs of dlock; write 1.5s (bare numbers are deprecated and will be refused "
                                "in 2.0)");
    assert_int_equal(opt_set(&sp[1], &ms, "250", err, sizeof(err)), 0);
    assert_int_equal(ms, 250);
    expect_err_has(""); /* (err untouched on success) */
    assert_non_null(strstr(warned, "--block 250: a bare number is milliseconds here but seconds"));
    assert_non_null(strstr(warned, "write 250ms"));
    assert_int_equal(opt_set(&sp[1], &ms, "junk", err, sizeof(err)), -1);
    assert_int_equal(nwarned, 2); /* a refusal does not warn too */
    opt_set_warn(NULL);
}

static void test_durations_format_exactly(void **state)
{
    (void)state;
    char out[32];
    static const struct { int64_t ms; const char *s; } cases[] = {
        {0, "0"}, {250, "250ms"}, {1500, "1500ms"}, {30000, "30s"}, {120000, "2m"}, {7200000, "2h"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        opt_format_duration(cases[i].ms, out, sizeof(out));
        assert_string_equal(out, cases[i].s);
    }
}

static void test_numbers_are_plain_decimals_in_range(void **state)
{
    (void)state;
    double d = 0;
    assert_int_equal(opt_parse_number("--rate", "2.5", 0, 100, &d, err, sizeof(err)), 0);
    assert_true(d == 2.5);
    const char *bad[] = {"", "1e3", "-1", "nan", "inf", "101", "2x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (opt_parse_number("--rate", bad[i], 0, 100, &d, err, sizeof(err)) != -1) fail_msg("accepted '%s'", bad[i]);
        expect_err_has("--rate");
        expect_err_has("from 0 to 100");
    }
}

typedef struct cfg {
    const char *url;
    char *copy;
    int n;
    int64_t wait_ms;
    double secs, rate;
    bool verbose, on;
    const char *operands[4];
    int nops;
} cfg;

static int add_op(void *base, const char *arg, char *e, size_t elen)
{
    cfg *c = base;
    return opt_append(c->operands, &c->nops, 4, arg, "too many arguments", e, elen);
}

static const opt_spec specs[] = {
    {.name = "url", .type = OPT_STR, .off = offsetof(cfg, url), .arg = "URL", .def = "redis://d",
     .env = "TEST_OPTIONS_URL", .help = "the URL"},
    {.name = "copy", .type = OPT_STRDUP, .off = offsetof(cfg, copy), .arg = "S", .help = "a copy"},
    {.name = "n", .short_name = 'n', .type = OPT_INT, .off = offsetof(cfg, n), .lo = 1, .hi = 9, .arg = "N",
     .def = "3", .help = "a count\nover two lines"},
    {.name = "wait", .short_name = 'w', .type = OPT_DURATION, .off = offsetof(cfg, wait_ms), .lo = 0,
     .hi = DAY_MS, .unit = OPT_UNIT_S, .arg = "DUR", .help = "a wait"},
    {.name = "duration", .type = OPT_SECONDS, .off = offsetof(cfg, secs), .lo = 1, .hi = DAY_MS,
     .unit = OPT_UNIT_S, .arg = "DUR", .help = "seconds"},
    {.name = "rate", .type = OPT_NUMBER, .off = offsetof(cfg, rate), .lo = 0, .hi = 1000, .arg = "R", .help = "r"},
    {.name = "verbose", .short_name = 'v', .type = OPT_FLAG, .off = offsetof(cfg, verbose), .help = "chatty"},
    {.name = "on", .type = OPT_BOOL, .off = offsetof(cfg, on), .help = "a switch"},
};
#define NSPECS OPT_COUNT(specs)

static int parse(cfg *c, int argc, char **argv)
{
    memset(c, 0, sizeof(*c));
    err[0] = '\0';
    return opt_load(specs, NSPECS, argc, argv, c, add_op, err, sizeof(err));
}

static void test_table_parses_long_short_equals_flags_and_operands(void **state)
{
    (void)state;
    char *argv[] = {"prog", "--url", "redis://x", "-n", "5", "--wait=250ms", "--duration", "1.5", "-v",
                    "op1", "--on", "--rate=2.5", "--copy", "abc", "--copy", "def", "--", "--op2", NULL};
    cfg c;
    assert_int_equal(parse(&c, 18, argv), 0);
    assert_string_equal(c.url, "redis://x");
    assert_int_equal(c.n, 5);
    assert_int_equal(c.wait_ms, 250);
    assert_true(c.secs == 1.5);
    assert_true(c.rate == 2.5);
    assert_true(c.verbose);
    assert_true(c.on);
    assert_string_equal(c.copy, "def");
    assert_int_equal(c.nops, 2);
    assert_string_equal(c.operands[0], "op1");
    assert_string_equal(c.operands[1], "--op2");
    free(c.copy);
    char *argv2[] = {"prog", "--on", "false", NULL};
    assert_int_equal(parse(&c, 3, argv2), 0);
    assert_false(c.on);
}

static void test_defaults_then_environment_then_flags(void **state)
{
    (void)state;
    cfg c;
    char *argv[] = {"prog", NULL};
    unsetenv("TEST_OPTIONS_URL");
    assert_int_equal(parse(&c, 1, argv), 0);
    assert_string_equal(c.url, "redis://d");
    assert_int_equal(c.n, 3);
    setenv("TEST_OPTIONS_URL", "redis://env", 1);
    assert_int_equal(parse(&c, 1, argv), 0);
    assert_string_equal(c.url, "redis://env");
    char *argv2[] = {"prog", "--url=redis://flag", NULL};
    assert_int_equal(parse(&c, 2, argv2), 0);
    assert_string_equal(c.url, "redis://flag");
    unsetenv("TEST_OPTIONS_URL");
}

static void expect_refused(int argc, char **argv, const char *needle)
{
    cfg c;
    if (parse(&c, argc, argv) != -1) fail_msg("accepted %s ...", argv[1]);
    expect_err_has(needle);
    free(c.copy);
}

static void test_table_refuses_with_one_clear_message(void **state)
{
    (void)state;
    char *a1[] = {"prog", "--bogus", "1", NULL};
    expect_refused(3, a1, "unknown option '--bogus'");
    char *a2[] = {"prog", "--bogus=1", NULL};
    expect_refused(2, a2, "unknown option '--bogus'");
    char *a3[] = {"prog", "-q", NULL};
    expect_refused(2, a3, "unknown option '-q'");
    char *a4[] = {"prog", "--wait", NULL};
    expect_refused(2, a4, "option '--wait' needs a value");
    char *a5[] = {"prog", "--verbose=yes", NULL};
    expect_refused(2, a5, "option '--verbose' takes no value");
    char *a6[] = {"prog", "-n", "10", NULL};
    expect_refused(3, a6, "invalid --n '10': expected an integer from 1 to 9");
    char *a7[] = {"prog", "--wait", "1e30", NULL};
    expect_refused(3, a7, "from 0 to 24h");
    char *a8[] = {"prog", "--on", "maybe", NULL};
    expect_refused(3, a8, "invalid --on 'maybe'");
    char *a9[] = {"prog", "a", "b", "c", "d", "e", NULL};
    expect_refused(6, a9, "too many arguments");
    setenv("TEST_OPTIONS_URL", "x", 1);
    char *a10[] = {"prog", NULL};
    cfg c;
    assert_int_equal(parse(&c, 1, a10), 0); /* a string from the environment is taken as is */
    unsetenv("TEST_OPTIONS_URL");
}

static int triggers;
static int on_trigger(void *base, const char *v, char *e, size_t elen)
{
    (void)e;
    (void)elen;
    assert_string_equal(v, "go");
    ((cfg *)base)->n = ++triggers * 100; /* order shows in n */
    return 0;
}

static const opt_spec short_specs[] = {
    {.name = "n", .short_name = 'n', .type = OPT_INT, .off = offsetof(cfg, n), .lo = 0, .hi = 1000},
    {.name = "wait", .short_name = 'w', .type = OPT_DURATION, .off = offsetof(cfg, wait_ms), .lo = 0,
     .hi = DAY_MS, .unit = OPT_UNIT_S},
    {.name = "verbose", .short_name = 'v', .type = OPT_FLAG, .off = offsetof(cfg, verbose)},
    {.name = "go", .short_name = 'g', .type = OPT_TRIGGER, .call = on_trigger},
};

static void test_short_options_cluster_like_getopt_and_parsing_can_stop_at_an_operand(void **state)
{
    (void)state;
    cfg c = {0};
    char *argv[] = {"prog", "-vw5", "-n", "7", "-g", "NAME", "-v", "--", "x", NULL};
    int next = 0;
    triggers = 0;
    assert_int_equal(opt_parse_from(short_specs, OPT_COUNT(short_specs), 9, argv, 1, true, &c, NULL, &next, err,
                                    sizeof(err)), 0);
    assert_true(c.verbose);
    assert_int_equal(c.wait_ms, 5000);
    assert_int_equal(c.n, 100); /* -n 7, then the trigger: the last one wins */
    assert_int_equal(next, 5);  /* NAME: what follows is not ours */
    char *argv2[] = {"prog", "--", "-v", NULL};
    assert_int_equal(opt_parse_from(short_specs, OPT_COUNT(short_specs), 3, argv2, 1, true, &c, NULL, &next, err,
                                    sizeof(err)), 0);
    assert_int_equal(next, 2); /* after "--" even "-v" is an operand */
    char *argv3[] = {"prog", "-vq", NULL};
    assert_int_equal(opt_parse_from(short_specs, OPT_COUNT(short_specs), 2, argv3, 1, true, &c, NULL, &next, err,
                                    sizeof(err)), -1);
    expect_err_has("unknown option '-q'");
    char *argv4[] = {"prog", "-vw", NULL};
    assert_int_equal(opt_parse_args(short_specs, OPT_COUNT(short_specs), 2, argv4, &c, NULL, err, sizeof(err)), -1);
    expect_err_has("option '-w' needs a value");
    char *argv5[] = {"prog", "--go=1", NULL};
    assert_int_equal(opt_parse_args(short_specs, OPT_COUNT(short_specs), 2, argv5, &c, NULL, err, sizeof(err)), -1);
    expect_err_has("option '--go' takes no value");
}

static void test_help_lists_every_option(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    opt_print_help(f, specs, NSPECS);
    fclose(f);
    for (size_t i = 0; i < NSPECS; i++) {
        char want[64];
        snprintf(want, sizeof(want), "--%s", specs[i].name);
        if (!strstr(buf, want)) fail_msg("help lacks %s:\n%s", want, buf);
        if (!strstr(buf, specs[i].help)) {
            if (!strstr(specs[i].help, "\n")) fail_msg("help lacks '%s'", specs[i].help);
        }
    }
    assert_non_null(strstr(buf, "-n, --n N"));
    assert_non_null(strstr(buf, "a count\n                           over two lines"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integers_take_the_whole_string_in_range),
        cmocka_unit_test(test_durations_take_units_and_bare_numbers_in_the_historical_unit),
        cmocka_unit_test(test_durations_refuse_junk_naming_the_accepted_range),
        cmocka_unit_test(test_duration_examples_are_valid_for_the_option),
        cmocka_unit_test(test_bare_durations_warn_unless_the_name_says_the_unit),
        cmocka_unit_test(test_durations_format_exactly),
        cmocka_unit_test(test_numbers_are_plain_decimals_in_range),
        cmocka_unit_test(test_table_parses_long_short_equals_flags_and_operands),
        cmocka_unit_test(test_defaults_then_environment_then_flags),
        cmocka_unit_test(test_table_refuses_with_one_clear_message),
        cmocka_unit_test(test_short_options_cluster_like_getopt_and_parsing_can_stop_at_an_operand),
        cmocka_unit_test(test_help_lists_every_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
