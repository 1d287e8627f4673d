/* test_transfer.c: the mover of a sharded campaign's units (transfer.h)
 * driven through its own interface on a real redis-server: the send hooks
 * run transfer.lua on an async connection of the test, and the events it
 * reports are recorded. Units are moved into a lane whose purchases need
 * them (arrived), a campaign with nothing elsewhere is proven empty (with
 * the lane's own units), a journal entry in flight keeps it from being
 * proven empty (the pull goes round again: expire, until nothing waits),
 * and recovery gives an entry a mover left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "camp_table.h"
#include "dlock/dlock.h"
#include "script.h"
#include "servers.h"
#include "transfer.h"
#include "util.h"

extern const dlock__script sk_script_transfer;

static test_server srv;
static struct event_base *base;
static dlock__aconn *ac;
static dlock__conn *sc;

/* ---- the send hooks: transfer.lua on the test's own connection ---------- */

typedef struct call {
    sk__reply_fn fn;
    void *priv;
} call;

static void on_areply(dlock__aconn *a, dlock__reply *r, int err, void *priv)
{
    (void)a;
    call c = *(call *)priv;
    free(priv);
    (void)err;
    if (!r) c.fn(NULL, DLOCK_EUNKNOWN, c.priv); /* as the engine's hooks: sent, not answered */
    else c.fn(r, dlock__reply_kind(r) == DLOCK__R_ERROR ? DLOCK_ESERVER : 0, c.priv);
}

static int h_send_xfer(void *ud, int nargs, const char **args, sk__reply_fn fn, void *priv)
{
    (void)ud;
    int nkeys = (int)strtol(args[0], NULL, 10);
    call *c = malloc(sizeof(*c));
    if (!c) return DLOCK_ENOMEM;
    *c = (call){fn, priv};
    int rc = dlock__script_acall(ac, &sk_script_transfer, nkeys, args + 1, nargs - 1 - nkeys, args + 1 + nkeys,
                                 on_areply, c);
    if (rc) free(c);
    return rc ? DLOCK_EUNKNOWN : 0;
}

static int h_send_wait(void *ud, int conn, const char *route, int argc, const char **argv, sk__reply_fn fn,
                       void *priv)
{
    (void)ud, (void)conn, (void)route, (void)argc, (void)argv, (void)fn, (void)priv;
    fail_msg("no WAIT without an acknowledgement plan");
    return -1;
}

static int h_ack_plan(void *ud, int *replicas, int64_t *timeout)
{
    (void)ud;
    *replicas = 0;
    *timeout = 0;
    return SK__ACK_NONE;
}

static int nlogs;
static void h_log(void *ud, int level, const char *msg)
{
    (void)ud, (void)level, (void)msg;
    nlogs++;
}

/* ---- the events, recorded ---------------------------------------------- */

typedef struct rec {
    int64_t need[2];     /* what the lanes' parked purchases need (the test's stand-in) */
    int arrived[2], empty[2], expire[2], settled;
    int64_t here;        /* of the last empty */
} rec;

static rec ev;

static int64_t e_need(void *ud, sk__lane *l)
{
    (void)ud;
    return ev.need[l->j];
}

static void e_arrived(void *ud, sk__lane *l)
{
    (void)ud;
    ev.arrived[l->j]++;
    ev.need[l->j] = 0; /* the purchases were sent again */
}

static void e_empty(void *ud, sk__lane *l, int64_t here)
{
    (void)ud;
    ev.empty[l->j]++;
    ev.here = here;
    ev.need[l->j] = 0; /* answered */
}

/* The third time round, the purchases waiting give up. */
static void e_expire(void *ud, sk__lane *l)
{
    (void)ud;
    if (++ev.expire[l->j] >= 3) ev.need[l->j] = 0;
}

static void e_settled(void *ud, sk__camp *c)
{
    (void)ud, (void)c;
    ev.settled++;
}

/* ---- fixture ------------------------------------------------------------ */

static void on_state(dlock__aconn *a, bool up, const char *why, void *priv)
{
    (void)a, (void)up, (void)why, (void)priv;
}

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&srv, NULL) != 0) return -1;
    base = event_base_new();
    dlock__url u;
    char err[256];
    if (!base || dlock__url_parse(srv.url, &u, err, sizeof(err)) != 0) return -1;
    int rc = dlock__aconn_open(base, &u, on_state, NULL, &ac, err, sizeof(err));
    dlock__conn_opts o = {.connect_timeout_ms = 1000, .command_timeout_ms = 2000};
    if (!rc) rc = dlock__conn_open(&u, &o, &sc, err, sizeof(err));
    dlock__url_free(&u);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    dlock__conn_close(sc);
    dlock__aconn_close(ac);
    event_base_free(base);
    test_server_stop(&srv);
    return 0;
}

static long long cmd_int(int argc, const char **argv)
{
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(sc, argc, argv, NULL, &r), 0);
    long long v = dlock__reply_kind(r) == DLOCK__R_INTEGER ? dlock__reply_int(r)
                  : dlock__reply_kind(r) == DLOCK__R_STRING ? strtoll(dlock__reply_str(r, NULL), NULL, 10)
                                                           : -1;
    dlock__reply_free(r);
    return v;
}

static long long get_int(const sk__lane *l, const char *part)
{
    char key[96];
    snprintf(key, sizeof(key), "%s%s", l->prefix, part);
    const char *argv[] = {strcmp(part, "xfer") == 0 ? "HLEN" : "GET", key};
    return cmd_int(2, argv);
}

static void set_stock(const sk__lane *l, long long v)
{
    char key[96], val[24];
    snprintf(key, sizeof(key), "%sstock", l->prefix);
    snprintf(val, sizeof(val), "%lld", v);
    const char *argv[] = {"SET", key, val};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__conn_cmd(sc, 3, argv, NULL, &r), 0);
    dlock__reply_free(r);
}

typedef struct world {
    sk__camp_table t;
    sk__camp *c;
    sk__xfer *x;
} world;

/* A campaign of two buckets in a table of its own, and a mover over it. */
static void world_open(world *w, const char *id)
{
    memset(w, 0, sizeof(*w));
    memset(&ev, 0, sizeof(ev));
    w->t.max_batch = 4;
    w->c = sk__camp_find(&w->t, id, true);
    assert_non_null(w->c);
    sk_buckets b = {.k = 2};
    snprintf(b.tag[0], sizeof(b.tag[0]), "c:%s", id);
    snprintf(b.tag[1], sizeof(b.tag[1]), "c:%s:1", id);
    assert_int_equal(sk__camp_grow(&w->t, w->c, &b), 0);
    const sk__coalesce_hooks h = {.send_xfer = h_send_xfer, .send_wait = h_send_wait, .ack_plan = h_ack_plan,
                                  .log = h_log};
    const sk__xfer_events e = {.need = e_need, .arrived = e_arrived, .empty = e_empty, .expire = e_expire,
                               .settled = e_settled};
    assert_int_equal(sk__xfer_new(base, &h, &w->t, &e, 0, &w->x), 0);
}

/* Runs the loop until lane j's pull ended and no transfer call is out. */
static void run_idle(world *w, int j)
{
    int64_t deadline = dlock__now_ms() + 5000;
    struct timeval tick = {0, 5000};
    do {
        event_base_loopexit(base, &tick);
        event_base_dispatch(base);
    } while ((w->c->lanes[j]->pull || w->c->busy) && dlock__now_ms() < deadline);
    assert_null(w->c->lanes[j]->pull);
    assert_int_equal(w->c->busy, 0);
}

static void world_close(world *w)
{
    sk__xfer_stop(w->x);
    sk__xfer_free(w->x);
    sk__camp_table_clear(&w->t);
}

/* ---- cases -------------------------------------------------------------- */

static void test_units_move_into_a_lane_that_needs_them(void **state)
{
    (void)state;
    world w;
    world_open(&w, "xf1");
    sk__lane *l0 = w.c->lanes[0], *l1 = w.c->lanes[1];
    set_stock(l0, 0);
    set_stock(l1, 10);
    ev.need[0] = 3;
    sk__xfer_kick(w.x, l0);
    run_idle(&w, 0);
    assert_int_equal(ev.arrived[0], 1);
    assert_int_equal(ev.empty[0] + ev.expire[0] + ev.arrived[1], 0);
    assert_true(ev.settled >= 1);
    /* half of the richer bucket (more than the 3 needed), journal forgotten */
    assert_int_equal(get_int(l0, "stock"), 5);
    assert_int_equal(get_int(l1, "stock"), 5);
    assert_int_equal(get_int(l1, "xfer"), 0);
    sk_engine_xfer_stats st;
    sk__xfer_stats(w.x, &st);
    assert_int_equal(st.takes, 1);
    assert_int_equal(st.gives, 1);
    assert_int_equal(st.units, 5);
    assert_int_equal(st.soldout_checks, 0);
    world_close(&w);
}

static void test_a_campaign_with_nothing_elsewhere_is_proven_empty(void **state)
{
    (void)state;
    world w;
    world_open(&w, "xf2");
    set_stock(w.c->lanes[0], 1);
    set_stock(w.c->lanes[1], 0);
    ev.need[0] = 2;
    sk__xfer_kick(w.x, w.c->lanes[0]);
    run_idle(&w, 0);
    assert_int_equal(ev.empty[0], 1);
    assert_int_equal(ev.here, 1); /* the lane's own unit: a purchase of 1 may still go */
    assert_int_equal(ev.arrived[0], 0);
    sk_engine_xfer_stats st;
    sk__xfer_stats(w.x, &st);
    assert_int_equal(st.soldout_checks, 1);
    assert_int_equal(st.takes, 0);
    assert_int_equal(get_int(w.c->lanes[0], "stock"), 1);
    world_close(&w);
}

/* A unit in transit (a journal entry whose give has not landed) is not
 * nothing: the pull goes round again, and the purchases give up. */
static void test_units_in_transit_are_never_proven_empty(void **state)
{
    (void)state;
    world w;
    world_open(&w, "xf3");
    sk__lane *l0 = w.c->lanes[0], *l1 = w.c->lanes[1];
    set_stock(l0, 0);
    set_stock(l1, 1);
    char stock[96], xfer[96], xin[96];
    snprintf(stock, sizeof(stock), "%sstock", l1->prefix);
    snprintf(xfer, sizeof(xfer), "%sxfer", l1->prefix);
    snprintf(xin, sizeof(xin), "%sxin", l1->prefix);
    const char *keys[] = {stock, xfer, xin}, *args[] = {"take", "other.1", "0", "1"};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__script_call(sc, &sk_script_transfer, 3, keys, 4, args, &r, NULL), 0);
    assert_int_equal(dlock__reply_int(dlock__reply_at(r, 0)), 1);
    dlock__reply_free(r);
    ev.need[0] = 1;
    sk__xfer_kick(w.x, l0);
    run_idle(&w, 0);
    assert_int_equal(ev.expire[0], 3);
    assert_int_equal(ev.empty[0] + ev.arrived[0], 0);
    assert_int_equal(get_int(l1, "xfer"), 1);
    world_close(&w);
}

static void test_recovery_gives_an_entry_a_mover_left(void **state)
{
    (void)state;
    world w;
    world_open(&w, "xf4");
    sk__lane *l0 = w.c->lanes[0], *l1 = w.c->lanes[1];
    set_stock(l0, 0);
    set_stock(l1, 8);
    char stock[96], xfer[96], xin[96];
    snprintf(stock, sizeof(stock), "%sstock", l1->prefix);
    snprintf(xfer, sizeof(xfer), "%sxfer", l1->prefix);
    snprintf(xin, sizeof(xin), "%sxin", l1->prefix);
    const char *keys[] = {stock, xfer, xin}, *args[] = {"take", "gone.7", "0", "4"};
    dlock__reply *r = NULL;
    assert_int_equal(dlock__script_call(sc, &sk_script_transfer, 3, keys, 4, args, &r, NULL), 0);
    dlock__reply_free(r);
    sk__xfer_recover(w.x); /* too young: left alone */
    run_idle(&w, 0);
    assert_int_equal(get_int(l1, "xfer"), 1);
    dlock__sleep_ms(3100);
    sk__xfer_recover(w.x); /* at most once a second: this one is due */
    run_idle(&w, 0);
    assert_int_equal(get_int(l0, "stock"), 4);
    assert_int_equal(get_int(l1, "stock"), 4);
    assert_int_equal(get_int(l1, "xfer"), 0);
    sk_engine_xfer_stats st;
    sk__xfer_stats(w.x, &st);
    assert_int_equal(st.recovered, 1);
    assert_int_equal(st.units, 4);
    assert_int_equal(ev.arrived[0] + ev.empty[0], 0); /* nobody waited */
    assert_true(nlogs >= 1);
    world_close(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_move_into_a_lane_that_needs_them),
        cmocka_unit_test(test_a_campaign_with_nothing_elsewhere_is_proven_empty),
        cmocka_unit_test(test_units_in_transit_are_never_proven_empty),
        cmocka_unit_test(test_recovery_gives_an_entry_a_mover_left),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
