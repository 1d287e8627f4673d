/* redis_cmd.h: a test's blocking Redis commands on a dlock__conn
 * (redis_io.h) that must succeed: a failed send or an error reply fails
 * the running cmocka test, with the command's name. Test code only. */
#ifndef DLOCK_TEST_REDIS_CMD_H
#define DLOCK_TEST_REDIS_CMD_H

#include <stdint.h>

#include "redis_io.h"

/* The reply of argv on c (the caller frees it). */
dlock__reply *tr_cmdv(dlock__conn *c, int argc, const char **argv);
/* r as an integer (an integer reply, or a decimal string; 0 otherwise);
 * frees r. */
int64_t tr_reply_int(dlock__reply *r);
/* argv on c, its reply as tr_reply_int reads it. */
int64_t tr_cmd_int(dlock__conn *c, int argc, const char **argv);
/* argv on c, its reply dropped. */
void tr_cmd(dlock__conn *c, int argc, const char **argv);

#endif
