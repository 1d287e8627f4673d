/* test_conffile.c: `name value` config files (tools/common/conffile.h):
 * values taken literally or double-quoted, an unterminated quote refused,
 * every refusal naming PATH:LINE and the setting, lines of any length, a
 * string setting's own check applied to a file line as to a flag; and URLs
 * shown with their passwords masked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "conffile.h"

typedef struct conf {
    char *name;
    int n;
    bool flag;
} conf;

static int no_x(const char *v, char *err, size_t errlen)
{
    if (!strchr(v, 'x')) return 0;
    snprintf(err, errlen, "no x allowed");
    return -1;
}

static const opt_spec specs[] = {
    {.name = "name", .type = OPT_STRDUP, .off = offsetof(conf, name), .env = "T_NAME", .check = no_x},
    {.name = "n", .type = OPT_INT, .off = offsetof(conf, n), .lo = 1, .hi = 9, .env = "T_N"},
    {.name = "flag", .type = OPT_FLAG, .off = offsetof(conf, flag)},
};

static char path[64], err[512];

/* Writes text to a fresh file and loads it into *c. */
static int load(const char *text, conf *c)
{
    snprintf(path, sizeof(path), "%s/conffile-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    err[0] = '\0';
    int rc = opt_load_file(specs, OPT_COUNT(specs), path, c, err, sizeof(err));
    unlink(path);
    return rc;
}

static void expect_err(const char *line_and_msg)
{
    char want[600];
    snprintf(want, sizeof(want), "%s:%s", path, line_and_msg);
    assert_string_equal(err, want);
}

static void test_values_are_literal_or_double_quoted(void **state)
{
    (void)state;
    static const struct { const char *text, *value; } cases[] = {
        {"name plain value  \n", "plain value"},      {"  name\t\"\"\n", ""},
        {"name \"a \\\"q\\\" \\\\ b\"  \n", "a \"q\" \\ b"}, {"name a\"b#c\r\n", "a\"b#c"},
        {"# c\n\n   # c\nname \"  spaced  \"\n", "  spaced  "},
    };
    for (size_t i = 0; i < OPT_COUNT(cases); i++) {
        conf c = {0};
        assert_int_equal(load(cases[i].text, &c), 0);
        assert_string_equal(c.name, cases[i].value);
        free(c.name);
    }
}

static void test_unterminated_quote_is_an_error_naming_line_and_setting(void **state)
{
    (void)state;
    conf c = {0};
    assert_int_equal(load("n 3\nname \"abc\n", &c), -1);
    expect_err("2: name: unterminated quote (a value starting with \" ends with \")");
    assert_null(c.name);
    assert_int_equal(load("name \"abc\\\"\n", &c), -1);
    expect_err("1: name: unterminated quote (a value starting with \" ends with \")");
    assert_int_equal(load("name \"abc\" d\n", &c), -1);
    expect_err("1: name: text after the closing quote");
    assert_null(c.name);
}

static void test_refusals_name_line_and_setting(void **state)
{
    (void)state;
    conf c = {0};
    assert_int_equal(load("n 3\n\nn 0\n", &c), -1);
    expect_err("3: invalid n '0': expected an integer from 1 to 9");
    assert_int_equal(c.n, 3);
    assert_int_equal(load("name fox\n", &c), -1);
    expect_err("1: invalid name: no x allowed");
    assert_int_equal(load("flag\n", &c), -1); /* flag-only rows are not settings */
    expect_err("1: unknown setting \"flag\"");
    assert_int_equal(load("nn 1\n", &c), -1);
    expect_err("1: unknown setting \"nn\"");
    assert_int_equal(opt_load_file(specs, OPT_COUNT(specs), "/nonexistent/x.conf", &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "cannot read config file /nonexistent/x.conf"));
}

static void test_long_lines_are_read_whole(void **state)
{
    (void)state;
    size_t n = 10000;
    char *text = malloc(n + 16);
    assert_non_null(text);
    memcpy(text, "name ", 5);
    memset(text + 5, 'k', n);
    memcpy(text + 5 + n, "\nn 2\n", 6);
    conf c = {0};
    assert_int_equal(load(text, &c), 0);
    assert_int_equal(strlen(c.name), n);
    assert_int_equal(c.n, 2);
    free(c.name);
    free(text);
}

static void test_urls_are_shown_with_passwords_masked(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"redis://app:s3cret@host:7000", "redis://app:****@host:7000"},
        {"redis://:s3cret@host:7000/2", "redis://:****@host:7000/2"},
        {"redis://bob@host", "redis://bob@host"},
        {"redis://host:6379", "redis://host:6379"},
        {"redis-sentinel://u:p@h1:1,h2:2/m?db=1", "redis-sentinel://u:****@h1:1,h2:2/m?db=1"},
        {"postgresql://app@db/sale", "postgresql://app@db/sale"},
        {"postgresql://app:pw@db/sale?sslmode=require&password=x&sslpassword=y",
         "postgresql://app:****@db/sale?sslmode=require&password=****&sslpassword=****"},
        {"sqlite:///var/lib/seckill/orders.db", "sqlite:///var/lib/seckill/orders.db"},
        {"/var/lib/a:b@c.db", "/var/lib/a:b@c.db"},
        {"", ""},
    };
    char out[256];
    for (size_t i = 0; i < OPT_COUNT(cases); i++) {
        opt_mask_url(cases[i][0], out, sizeof(out));
        assert_string_equal(out, cases[i][1]);
    }
    opt_mask_url("redis://app:s3cret@host:7000", out, 12); /* truncated, still terminated, no secret */
    assert_string_equal(out, "redis://app");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_are_literal_or_double_quoted),
        cmocka_unit_test(test_unterminated_quote_is_an_error_naming_line_and_setting),
        cmocka_unit_test(test_refusals_name_line_and_setting),
        cmocka_unit_test(test_long_lines_are_read_whole),
        cmocka_unit_test(test_urls_are_shown_with_passwords_masked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
