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

/* ---- calls whose arguments come written as RESP ------------------------
 * For a caller that writes its arguments (numkeys, keys, argv) straight
 * into RESP bulk strings (resp_write.h): they are sent as written, never
 * parsed back into argv, behind the EVALSHA <sha> (or EVAL <src>) head. */

/* Room a head of EVALSHA takes at most ("*<argc>\r\n$7\r\nEVALSHA\r\n$40\r\n<sha>\r\n"). */
#define DLOCK__SCRIPT_HEAD_ROOM 96

/* Writes "*<nargs + 2>" and EVALSHA <sha> (by_source: EVAL <src>; that
 * head takes s->len + DLOCK__SCRIPT_HEAD_ROOM bytes at most) into p;
 * returns the end. */
char *dlock__script_resp_head(const dlock__script *s, bool by_source, int nargs, char *p);

typedef struct dlock__script_rcall {
    const dlock__script *s;
    int nargs;      /* bulk strings in args */
    int slot;       /* the slot of its keys (-1: no key), fixed by the writer */
    bool by_source; /* NOSCRIPT was answered: the next send is EVAL */
    char *args;     /* not owned; DLOCK__SCRIPT_HEAD_ROOM writable bytes precede it */
    size_t len;
} dlock__script_rcall;

/* Sends c on ac: EVALSHA (its head written into the room before args, the
 * command goes out in one piece), or EVAL once by_source, through
 * dlock__aconn_cmd_resp_slot with c->slot: on a Cluster a call with a slot
 * goes to that slot's master as written, never parsed (slot -1: read back
 * to find its keys). 0 (cb will run) or the code of
 * dlock__aconn_cmd_resp_slot (cb will not). */
int dlock__script_rcall_send(dlock__aconn *ac, const dlock__script_rcall *c, dlock__acb cb, void *priv);

/* True when reply is NOSCRIPT to c's EVALSHA (nothing ran): c is marked
 * by_source, to be sent again. False for any other reply, and for a
 * NOSCRIPT to EVAL (never a second try): a script runs at most once. */
bool dlock__script_rcall_retry(dlock__script_rcall *c, const dlock__reply *reply);

#endif
