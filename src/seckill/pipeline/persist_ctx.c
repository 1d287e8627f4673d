/* persist_ctx.c: the worker's shared part (persist_ctx.h): its log line,
 * its one way to run a command, and reading reply values. Invariant: calls
 * only down (the common layer), so every part of the worker may use it. */
#include "persist_ctx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "dlock/dlock.h"
#include "sk_err.h"

void sk__pctx_log(sk_pctx *w, const char *fmt, ...)
{
    if (!w->o->log) return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    w->o->log(line, w->o->log_ud);
}

int sk__pctx_cmd(sk_pctx *w, int argc, const char **argv, dlock__reply **r)
{
    *r = NULL;
    int err = sk_err_from_common(dlock__conn_cmd(w->rc, argc, argv, NULL, r));
    if (!err && dlock__reply_kind(*r) == DLOCK__R_ERROR) {
        if (dlock__reply_is_error(*r, "NOGROUP")) w->nogroup = true;
        sk__pctx_log(w, "redis %s: %s", argv[0], dlock__reply_str(*r, NULL));
        dlock__reply_free(*r);
        *r = NULL;
        err = DLOCK_ESERVER;
    }
    if (err) w->st.redis_errors++;
    return err;
}

const char *sk__pctx_rstr(const dlock__reply *r)
{
    if (!r) return "";
    dlock__reply_type t = dlock__reply_kind(r);
    return (t == DLOCK__R_STRING || t == DLOCK__R_STATUS) ? dlock__reply_str(r, NULL) : "";
}

int64_t sk__pctx_i64(const char *s)
{
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    return end && end != s && *end == '\0' ? (int64_t)v : -1;
}

int64_t sk__pctx_rint(const dlock__reply *r)
{
    if (!r) return 0;
    if (dlock__reply_kind(r) == DLOCK__R_INTEGER) return dlock__reply_int(r);
    return sk__pctx_i64(sk__pctx_rstr(r));
}
