/* script.h: a Lua script as dlock runs it: its source and its SHA1, both
 * fixed at build time (cmake/embed_run.cmake makes one dlock__script per
 * .lua file), and the one way to run it: EVALSHA, then EVAL once when the
 * server answers NOSCRIPT (its script cache was emptied: restart,
 * failover, SCRIPT FLUSH). On a redis-cluster:// connection the call is
 * routed by its keys like any command (numkeys; keys in two slots:
 * DLOCK__ECROSSSLOT, nothing sent). Objects are immutable: thread-safe.
 * Codes are dlock__err (common_err.h).
 */
#ifndef DLOCK_COMMON_SCRIPT_H
#define DLOCK_COMMON_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>

#include "redis_async.h"
#include "redis_io.h"
#include "reply.h"

typedef struct dlock__script {
    const char *name; /* the .lua file's stem, for logs */
    const char *src;  /* NUL-terminated */
    size_t len;
    const char *sha; /* SHA1 of src, 40 lowercase hex digits */
} dlock__script;

/* Writes "EVALSHA sha numkeys keys... args..." (by_source: "EVAL src ...")
 * into argv/lens (3 + nkeys + nargs entries); nk receives the key count's
 * text and must live as long as argv. Returns argc, or -1 when nkeys or
 * nargs is negative. */
int dlock__script_argv(const dlock__script *s, bool by_source, int nkeys, const char *const *keys, int nargs,
                       const char *const *args, const char **argv, size_t *lens, char nk[16]);

/* True when r is the NOSCRIPT error reply (EVALSHA of a script the server
 * does not have: nothing ran). */
bool dlock__script_missing(const dlock__reply *r);

/* Runs s on c (sync door): EVALSHA; on NOSCRIPT, EVAL once. 0 with
 * *reply_out (maybe an error reply: the script's own), or the code of
 * dlock__conn_cmd (nothing to free). *reloaded_out (may be NULL): EVAL
 * was needed. */
int dlock__script_call(dlock__conn *c, const dlock__script *s, int nkeys, const char *const *keys, int nargs,
                       const char *const *args, dlock__reply **reply_out, bool *reloaded_out);

/* The same on the async door: cb runs once, with the EVALSHA reply or,
 * after NOSCRIPT, the EVAL one (reply NULL and err as dlock__aconn_cmd's
 * callbacks when the call failed). The arguments are copied. Returns 0
 * (cb will run) or ECONN/ENOMEM/EINVAL/ECROSSSLOT (cb will not). */
int dlock__script_acall(dlock__aconn *ac, const dlock__script *s, int nkeys, const char *const *keys,
                        int nargs, const char *const *args, dlock__acb cb, void *priv);

#endif
