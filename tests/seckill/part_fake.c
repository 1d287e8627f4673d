/* part_fake.c: the recording wire and the hand-moved clock of the
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

/* ---- the wire's functions (engine_wire.h), over the recorder: these
 * test programs link this file instead of engine_wire.c ---------------- */

int sk__wire_cmd(sk__wire *w, int conn, int slot, int argc, const char **argv, sk__reply_fn fn, void *priv)
{
    (void)conn;
    return record(w->fake, slot, -1, argc, argv, fn, priv);
}

int sk__wire_script(sk__wire *w, int script, int nargs, const char **args, sk__reply_fn fn, void *priv)
{
    return record(w->fake, -1, script, nargs, args, fn, priv);
}

int sk__wire_batch(sk__wire *w, int conn, int script, const sk__resp_args *a, sk__reply_fn fn, void *priv)
{
    (void)w, (void)conn, (void)script, (void)a, (void)fn, (void)priv;
    fail_msg("no part sends a pre-written batch");
    return SK_EINVAL;
}

int sk__wire_wait(sk__wire *w, int conn, int slot, int replicas, int64_t timeout_ms, sk__reply_fn fn, void *priv)
{
    (void)conn;
    char n[16], t[24];
    snprintf(n, sizeof(n), "%d", replicas);
    snprintf(t, sizeof(t), "%lld", (long long)timeout_ms);
    const char *argv[] = {"WAIT", n, t};
    return record(w->fake, slot, -1, 3, argv, fn, priv);
}

/* Slots below 8192 are served by one master, the rest by another. */
int sk__wire_node_of_slot(const sk__wire *w, int slot, char *out, size_t cap)
{
    const part_fake *f = w->fake;
    if (f->down || slot < 0) return -1;
    snprintf(out, cap, "%s", slot < 8192 ? "10.0.0.1:7000" : "10.0.0.2:7001");
    return 0;
}

bool sk__wire_up(const sk__wire *w, int conn)
{
    (void)conn;
    return !((const part_fake *)w->fake)->down;
}

int64_t sk__wire_now_ms(const sk__wire *w) { return ((const part_fake *)w->fake)->now_ms; }

int64_t sk__wire_wall_ms(const sk__wire *w)
{
    part_fake *f = w->fake;
    return f->on_wall ? f->on_wall(f) : f->wall_ms;
}

static void fake_log(int level, const char *msg, void *ud)
{
    (void)level;
    part_fake *f = ud;
    if (f->nlogs < PF_MAX_LOGS) snprintf(f->logs[f->nlogs++], sizeof(f->logs[0]), "%s", msg);
}

void pf_init(part_fake *f)
{
    memset(f, 0, sizeof(*f));
    f->now_ms = 1000000;
    f->wall_ms = INT64_C(1800000000000); /* 2027-01-15, after the order-id epoch */
    f->wire = (sk__wire){.muted = &f->muted, .log = fake_log, .log_ud = f, .fake = f};
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
