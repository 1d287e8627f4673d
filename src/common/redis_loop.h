/* redis_loop.h: the door to hiredis for any event loop: one async Redis
 * connection (dlock__lconn) driven through a small table of loop functions
 * (dlock__evloop: fd interest) instead of a particular loop library, so
 * libdlock can serve libevent, libuv or any host loop without linking one.
 * (redis_async.h is the libevent door of the flash-sale engine.)
 *
 * Threads: a connection is used only from its loop's thread.
 * Replies: a reply passed to a callback belongs to hiredis and is freed
 * after the callback returns. Codes are dlock__err (common_err.h).
 * Connect: TCP or Unix socket, non-blocking; a TCP host name is resolved
 * by hiredis with getaddrinfo, which blocks: pass numeric addresses (or
 * "localhost") where the loop must never stall.
 */
#ifndef DLOCK_COMMON_REDIS_LOOP_H
#define DLOCK_COMMON_REDIS_LOOP_H

#include <stdbool.h>
#include <stddef.h>

#include "reply.h"

#define DLOCK__EV_READ 1
#define DLOCK__EV_WRITE 2

/* The loop as the connection sees it. io_new makes a watcher of fd that
 * calls ready(arg, events) while the loop sees the events set by io_set
 * (0: none); io_free stops and frees it, and may be called inside that
 * watcher's own ready call. */
typedef struct dlock__evloop {
    void *ud;
    void *(*io_new)(void *ud, int fd, void (*ready)(void *arg, int events), void *arg);
    int (*io_set)(void *io, int events);
    void (*io_free)(void *io);
} dlock__evloop;

typedef struct dlock__lconn dlock__lconn;

/* Reply callback, once per accepted command (for a subscription: once per
 * message, and once with NULL when the connection goes). reply NULL: the
 * command failed without an answer; err then is EUNKNOWN when the
 * connection had come up (it may have been sent), ECONN when it never did
 * (nothing was sent). */
typedef void (*dlock__lcb)(dlock__lconn *lc, dlock__reply *reply, int err, void *priv);
/* State: up once connected; up=false when it is gone (refused, dropped,
 * closed by the server): the connection is then unusable, close it. */
typedef void (*dlock__lstate_cb)(dlock__lconn *lc, bool up, const char *why, void *priv);

/* Starts connecting to host:port (path NULL) or to the Unix socket path.
 * The loop table is copied. 0 with *out, ECONN (err says why), ENOMEM. */
int dlock__lconn_open(const dlock__evloop *loop, const char *host, int port, const char *path,
                      dlock__lstate_cb on_state, void *priv, dlock__lconn **out, char *err, size_t errlen);
/* Queues a command; 0 (cb will run) or ECONN/ENOMEM (cb will not). */
int dlock__lconn_cmd(dlock__lconn *lc, dlock__lcb cb, void *priv, int argc, const char **argv,
                     const size_t *lens);
/* Queues SUBSCRIBE/SSUBSCRIBE/UNSUBSCRIBE...: every message, confirmation
 * and the final NULL of these goes to the connection's one subscription
 * callback (set once, here; later calls keep the first). */
int dlock__lconn_sub(dlock__lconn *lc, dlock__lcb cb, void *priv, int argc, const char **argv);
/* Disconnects and frees: pending command callbacks run with NULL first
 * (EUNKNOWN / ECONN as above), now or, inside a callback of this
 * connection, when hiredis returns; the subscription callback is not
 * called again once close was called. Safe inside the connection's own callbacks (memory is
 * released when hiredis has returned). NULL ok. */
void dlock__lconn_close(dlock__lconn *lc);
bool dlock__lconn_is_up(const dlock__lconn *lc);
/* Drops a live connection as a failure would (pending callbacks NULL +
 * EUNKNOWN, state down): for a reply deadline that passed. */
void dlock__lconn_drop(dlock__lconn *lc);

#endif
