/* redis_async.h: the door to hiredis, async half: connections driven by a
 * libevent loop. Kept apart from redis_io.h so that only programs that use
 * it (the flash-sale engine) link libevent; libdlock does not.
 *
 * Async connections (dlock__aconn) live on one libevent loop and are used
 * only from that loop's thread. A reply passed to a callback is freed after
 * the callback returns. Error codes are dlock__err (common_err.h).
 */
#ifndef DLOCK_COMMON_REDIS_ASYNC_H
#define DLOCK_COMMON_REDIS_ASYNC_H

#include <stdbool.h>
#include <stddef.h>

#include "redis_io.h"

typedef struct dlock__aconn dlock__aconn;
struct event_base;

/* Reply callback: reply is NULL when the command failed without a reply
 * (err then is EUNKNOWN if it was sent, ECONN otherwise). Called exactly
 * once per accepted command, also when the connection goes away. */
typedef void (*dlock__acb)(dlock__aconn *ac, dlock__reply *reply, int err, void *priv);
/* Connection state callback: up=true once connected (AUTH/SELECT queued),
 * up=false when the connection is gone; the aconn is then unusable and
 * must be released with dlock__aconn_close after this callback returns. */
typedef void (*dlock__astate_cb)(dlock__aconn *ac, bool up, const char *why, void *priv);

/* Starts connecting (TCP, UNIX, or the master named by the sentinels of a
 * sentinel URL: that lookup is synchronous, at most 500 ms a sentinel). */
int dlock__aconn_open(struct event_base *base, const dlock__url *url, dlock__astate_cb on_state,
                      void *priv, dlock__aconn **out, char *err, size_t errlen);
/* Queues a command; returns 0 (cb will run) or ECONN/ENOMEM (cb will not). */
int dlock__aconn_cmd(dlock__aconn *ac, dlock__acb cb, void *priv, int argc, const char **argv,
                     const size_t *lens);
/* Queues a command already written in RESP (cmd[0..len), copied); as
 * dlock__aconn_cmd. */
int dlock__aconn_cmd_resp(dlock__aconn *ac, dlock__acb cb, void *priv, const char *cmd, size_t len);
/* Disconnects (pending callbacks run with reply NULL) and frees. NULL ok. */
void dlock__aconn_close(dlock__aconn *ac);
bool dlock__aconn_is_up(const dlock__aconn *ac);
/* Why the server refused the connection's AUTH or SELECT ("AUTH refused:
 * WRONGPASS ..."; the server's text, never the password), or NULL when it
 * did not. The connection then goes down with that text as the reason.
 * *auth_out (may be NULL): the refusal was about credentials (AUTH, or
 * NOAUTH to SELECT). */
const char *dlock__aconn_refusal(const dlock__aconn *ac, bool *auth_out);

#endif
