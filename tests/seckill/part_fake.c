/* part_fake.c: the recording port and the hand-moved clock of the
 * engine-part tests (part_fake.h). Replies are parsed from RESP text by
 * the same reader the engine's replies come through (reply.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/dlock.h"
#include "part_fake.h"
#include "reply.h"

static int record(part_fake *f, int slot, int script, int argc, const char **argv, sk__reply_fn fn, void *priv)
{
    if (f->down) return SK_EUNAVAIL;
    assert_true(f->sent < PF_MAX_CMDS);
    assert_true(argc <= PF_MAX_ARGS);
    pf_cmd *c = &f->cmds[f->sent++];
    memset(c, 0, sizeof(*c));
    c->slot = slot;
    c->script = script;
    c->argc = argc;
    for (int i = 0; i < argc; i++) snprintf(c->argv[i], sizeof(c->argv[i]), "%s", argv[i]);
    c->fn = fn;
    c->priv = priv;
    return 0;
}

static int fake_cmd(void *ud, int slot, int argc, const char **argv, sk__reply_fn fn, void *priv)
{
    return record(ud, slot, -1, argc, argv, fn, priv);
}

static int fake_script(void *ud, int script, int nargs, const char **args, sk__reply_fn fn, void *priv)
{
    return record(ud, -1, script, nargs, args, fn, priv);
}

/* Slots below 8192 are served by one master, the rest by another. */
static int fake_node_of_slot(void *ud, int slot, char *out, size_t cap)
{
    part_fake *f = ud;
    if (f->down) return -1;
    snprintf(out, cap, "%s", slot < 8192 ? "10.0.0.1:7000" : "10.0.0.2:7001");
    return 0;
}

static bool fake_muted(void *ud) { return ((part_fake *)ud)->muted; }

static void fake_log(int level, const char *msg, void *ud)
{
    (void)level;
    part_fake *f = ud;
    if (f->nlogs < PF_MAX_LOGS) snprintf(f->logs[f->nlogs++], sizeof(f->logs[0]), "%s", msg);
}

static int64_t fake_now(void *ud) { return ((part_fake *)ud)->now_ms; }

static int64_t fake_wall(void *ud) { return ((part_fake *)ud)->wall_ms; }

void pf_init(part_fake *f)
{
    memset(f, 0, sizeof(*f));
    f->now_ms = 1000000;
    f->wall_ms = INT64_C(1800000000000); /* 2027-01-15, after the order-id epoch */
    f->port = (sk__port){.ud = f, .cmd = fake_cmd, .script = fake_script, .node_of_slot = fake_node_of_slot,
                         .muted = fake_muted, .log = fake_log, .log_ud = f};
    f->clock = (sk__clock){.ud = f, .now_ms = fake_now, .wall_ms = fake_wall};
}

const pf_cmd *pf_cmd_at(const part_fake *f, int i)
{
    assert_true(i >= 0 && i < f->sent);
    return &f->cmds[i];
}

int pf_pending(const part_fake *f) { return f->sent - f->answered; }

void pf_reply(part_fake *f, const char *resp)
{
    assert_true(pf_pending(f) > 0);
    pf_cmd *c = &f->cmds[f->answered++];
    dlock__reply *r = NULL;
    assert_int_equal(dlock__reply_parse(resp, strlen(resp), &r), 0);
    c->fn(r, dlock__reply_kind(r) == DLOCK__R_ERROR ? DLOCK_ESERVER : 0, c->priv);
    dlock__reply_free(r);
}

void pf_fail(part_fake *f, int err)
{
    assert_true(pf_pending(f) > 0);
    pf_cmd *c = &f->cmds[f->answered++];
    c->fn(NULL, err, c->priv);
}

const char *pf_bulk(char *out, size_t cap, const char *text)
{
    snprintf(out, cap, "$%zu\r\n%s\r\n", strlen(text), text);
    return out;
}

int pf_logged(const part_fake *f, const char *needle)
{
    int n = 0;
    for (int i = 0; i < f->nlogs; i++)
        if (strstr(f->logs[i], needle)) n++;
    return n;
}
