/* part_fake.h: the wire and clock the engine-part tests (test_engine_*.c)
 * give a part instead of the engine's: the wire records every command the
 * part asks to send and lets the test answer them in order, as Redis
 * would (an error reply with DLOCK_ESERVER, a lost connection with no
 * reply); the clock moves only when the test moves it. A test double of
 * the engine's own wire (engine_wire.h: part_fake.c defines its functions,
 * linked instead of engine_wire.c), not of a server. */
#ifndef SK_PART_FAKE_H
#define SK_PART_FAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine_wire.h"

#define PF_MAX_CMDS 64
#define PF_MAX_ARGS 8
#define PF_MAX_LOGS 32

typedef struct pf_cmd {
    int slot;   /* the master it goes to, -1: the connected server */
    int script; /* SK__LUA_* for a script, -1 for a command */
    int argc;
    char argv[PF_MAX_ARGS][128];
    sk__reply_fn fn;
    void *priv;
} pf_cmd;

typedef struct part_fake {
    sk__wire wire;    /* the part's; its fake points back here */
    int64_t now_ms;   /* the monotonic clock */
    int64_t wall_ms;  /* the wall clock */
    int64_t (*on_wall)(void *f); /* reads the wall clock instead when set (a pause in between) */
    bool down;        /* sends fail with SK_EUNAVAIL */
    bool muted;       /* what sk__wire_muted answers */
    pf_cmd cmds[PF_MAX_CMDS];
    int sent;         /* commands sent so far */
    int answered;     /* of those, answered (oldest first) */
    char logs[PF_MAX_LOGS][512];
    int nlogs;
} part_fake;

void pf_init(part_fake *f);
/* The i-th command sent (0: the first); fails the test when there is none. */
const pf_cmd *pf_cmd_at(const part_fake *f, int i);
int pf_pending(const part_fake *f); /* sent, not yet answered */
/* Answers the oldest unanswered command with one RESP reply ("+OK\r\n",
 * "-OOM ...\r\n", "*2\r\n:1\r\n:2\r\n"); a bulk string may be given as
 * pf_bulk's output. */
void pf_reply(part_fake *f, const char *resp);
/* Answers it with no reply: err DLOCK_EUNKNOWN (sent, connection gone). */
void pf_fail(part_fake *f, int err);
/* "$<n>\r\n<text>\r\n" into out (a bulk string reply of text). */
const char *pf_bulk(char *out, size_t cap, const char *text);
/* Lines logged whose text contains needle. */
int pf_logged(const part_fake *f, const char *needle);

#endif
