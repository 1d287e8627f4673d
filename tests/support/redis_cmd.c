/* redis_cmd.c: the must-succeed Redis commands of redis_cmd.h. Invariant:
 * nothing is retried; what the server answered is what the test sees. */
#include "redis_cmd.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

dlock__reply *tr_cmdv(dlock__conn *c, int argc, const char **argv)
{
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(c, argc, argv, NULL, &r), 0);
    if (dlock__reply_kind(r) == DLOCK__R_ERROR) fail_msg("redis %s: %s", argv[0], dlock__reply_str(r, NULL));
    return r;
}

int64_t tr_reply_int(dlock__reply *r)
{
    int64_t v = 0;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER) v = dlock__reply_int(r);
    else if (dlock__reply_kind(r) == DLOCK__R_STRING) v = strtoll(dlock__reply_str(r, NULL), NULL, 10);
    dlock__reply_free(r);
    return v;
}

int64_t tr_cmd_int(dlock__conn *c, int argc, const char **argv) { return tr_reply_int(tr_cmdv(c, argc, argv)); }

void tr_cmd(dlock__conn *c, int argc, const char **argv) { dlock__reply_free(tr_cmdv(c, argc, argv)); }
