/* script.c: running a dlock__script on the sync door (see script.h).
 * Invariant: EVAL follows only a NOSCRIPT answer, which means nothing ran,
 * so a script runs at most once a call. */
#include "script.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common_err.h"
#include "resp_write.h"

#define STACK_ARGS 64 /* argv entries kept on the stack; more are allocated */

int dlock__script_argv(const dlock__script *s, bool by_source, int nkeys, const char *const *keys, int nargs,
                       const char *const *args, const char **argv, size_t *lens, char nk[16])
{
    if (nkeys < 0 || nargs < 0) return -1;
    snprintf(nk, 16, "%d", nkeys);
    argv[0] = by_source ? "EVAL" : "EVALSHA";
    lens[0] = by_source ? 4 : 7;
    argv[1] = by_source ? s->src : s->sha;
    lens[1] = by_source ? s->len : 40;
    argv[2] = nk;
    lens[2] = strlen(nk);
    int argc = 3;
    for (int i = 0; i < nkeys; i++, argc++)
        argv[argc] = keys[i], lens[argc] = strlen(keys[i]);
    for (int i = 0; i < nargs; i++, argc++)
        argv[argc] = args[i], lens[argc] = strlen(args[i]);
    return argc;
}

bool dlock__script_missing(const dlock__reply *r)
{
    return dlock__reply_is_error(r, "NOSCRIPT");
}

int dlock__script_call(dlock__conn *c, const dlock__script *s, int nkeys, const char *const *keys, int nargs,
                       const char *const *args, dlock__reply **reply_out, bool *reloaded_out)
{
    *reply_out = NULL;
    if (reloaded_out) *reloaded_out = false;
    if (nkeys < 0 || nargs < 0 || nkeys > INT_MAX - 3 - nargs) return DLOCK__EINVAL;
    const char *stack_argv[STACK_ARGS];
    size_t stack_lens[STACK_ARGS];
    size_t n = (size_t)nkeys + (size_t)nargs + 3;
    const char **argv = n <= STACK_ARGS ? stack_argv : malloc(n * sizeof(*argv));
    size_t *lens = n <= STACK_ARGS ? stack_lens : malloc(n * sizeof(*lens));
    char nk[16];
    int rc = argv && lens ? 0 : DLOCK__ENOMEM;
    int argc = rc ? 0 : dlock__script_argv(s, false, nkeys, keys, nargs, args, argv, lens, nk);
    if (rc == 0) rc = dlock__conn_cmd(c, argc, argv, lens, reply_out);
    if (rc == 0 && dlock__script_missing(*reply_out)) {
        dlock__reply_free(*reply_out);
        *reply_out = NULL;
        if (reloaded_out) *reloaded_out = true;
        dlock__script_argv(s, true, nkeys, keys, nargs, args, argv, lens, nk);
        rc = dlock__conn_cmd(c, argc, argv, lens, reply_out);
    }
    if (argv != stack_argv) free((void *)argv);
    if (lens != stack_lens) free(lens);
    return rc;
}

char *dlock__script_resp_head(const dlock__script *s, bool by_source, int nargs, char *p)
{
    p = dlock__resp_len(p, '*', (size_t)nargs + 2);
    if (by_source) {
        p = dlock__resp_bulk(p, "EVAL", 4);
        return dlock__resp_bulk(p, s->src, s->len);
    }
    p = dlock__resp_bulk(p, "EVALSHA", 7);
    return dlock__resp_bulk(p, s->sha, 40);
}
