/* test_transfer.c: the mover of a sharded campaign's units (transfer.h)
 * driven through its own interface on a real redis-server: its wire is
 * one reconnecting connection of the test (no acknowledgement plan: no
 * WAIT), transfer.lua runs there, over a park (park.h) holding purchases
 * whose answers are recorded. Units are moved into a lane whose purchases
 * need them (they go out again), a campaign with nothing elsewhere is
 * proven empty (with the lane's own units: what fits goes again, the rest
 * is sold out), a journal entry in flight keeps it from being proven empty
 * (the pull goes round again until the purchase's deadline: 503), and
 * recovery gives an entry a mover left behind. */
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
#include "park.h"
#include "redis_async.h"
#include "rulebook.h"
#include "script.h"
#include "servers.h"
#include "transfer.h"
#include "util.h"

extern const dlock__script sk_script_transfer;

static test_server srv;
static struct event_base *base;
static dlock__conn *sc;

/* ---- the wire: transfer.lua on the test's own connection ---------------- */

/* The engine's reading of a reply (engine.c's on_conn_reply): an ERROR
 * reply comes with DLOCK_ESERVER, none with the door's code. */
static int on_conn_reply(dlock__rconn *rc, int slot, const dlock__reply *r, int err, void *owner)
{
    (void)rc, (void)slot, (void)owner;
    if (!r) return err ? err : DLOCK_EUNKNOWN;
    return dlock__reply_kind(r) == DLOCK__R_ERROR ? DLOCK_ESERVER : 0;
}

static int nlogs;
static void on_log(int level, const char *msg, void *ud)
{
    (void)ud, (void)level, (void)msg;
    nlogs++;
}

static sk__wire wire = {.log = on_log};

/* ---- the park, with purchases whose answers are recorded --------------- */

typedef struct answer {
    int calls, err;
    int64_t remaining;
} answer;

static int again_runs; /* the coalescer's again_ev, made active by the park */

static void on_again(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    again_runs++;
}

static void on_answer(const sk_purchase_result *res, void *arg)
{
    answer *a = arg;
    a->calls++;
    a->err = res->err;
    a->remaining = res->remaining;
}

/* ---- fixture ------------------------------------------------------------ */

static dlock__url url;

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&srv, NULL) != 0) return -1;
    base = event_base_new();
    char err[256];
    if (!base || dlock__url_parse(srv.url, &url, err, sizeof(err)) != 0) return -1;
    const dlock__rconn_opts ro = {.base = base, .url = &url, .timeout_ms = 2000, .backoff_max_ms = 200,
                                  .on_reply = on_conn_reply};
    if (dlock__rconn_new(&ro, &wire.conns[0]) != 0) return -1;
    dlock__rconn_connect(wire.conns[0]);
    int64_t end = dlock__now_ms() + 5000;
    while (!dlock__rconn_is_up(wire.conns[0]) && dlock__now_ms() < end) event_base_loop(base, EVLOOP_ONCE);
    dlock__conn_opts o = {.connect_timeout_ms = 1000, .command_timeout_ms = 2000};
    return dlock__rconn_is_up(wire.conns[0]) ? dlock__conn_open(&url, &o, &sc, err, sizeof(err)) : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock__conn_close(sc);
    dlock__rconn_free(wire.conns[0]);
    dlock__url_free(&url);
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
    sk__park pk;
    struct event *again_ev;
    sk__camp *c;
    sk__xfer *x;
} world;

/* A purchase of qty parked on l (as the coalescer parks a "short" one). */
static void park_one(world *w, sk__lane *l, int64_t qty, answer *a)
{
    sk__preq *q = sk__park_preq(&w->pk);
    assert_non_null(q);
    *q = (sk__preq){.cb = on_answer, .arg = a, .qty = qty};
    w->pk.pending++;
    sk__park_add(l, q);
}

/* The next purchase due to go out again: on lane l; answered here (its
 * record goes back to the park). */
static void expect_again(world *w, const sk__lane *l, answer *a)
{
    sk__preq *q = sk__park_next_again(&w->pk);
    assert_non_null(q);
    assert_ptr_equal(q->lane, l);
    assert_ptr_equal(q->arg, a);
    assert_int_equal(a->calls, 0);
    sk_purchase_result res = {.qty = q->qty};
    sk__park_answer(&w->pk, q, &res);
}

/* A campaign of two buckets in a table of its own, and a mover over it. */
static void world_open(world *w, const char *id)
{
    memset(w, 0, sizeof(*w));
    again_runs = 0;
    w->t.max_batch = 4;
    w->c = sk__camp_find(&w->t, id, true);
    assert_non_null(w->c);
    sk_buckets b = {.k = 2};
    snprintf(b.tag[0], sizeof(b.tag[0]), "c:%s", id);
    snprintf(b.tag[1], sizeof(b.tag[1]), "c:%s:1", id);
    assert_int_equal(sk__camp_grow(&w->t, w->c, &b), 0);
    w->again_ev = event_new(base, -1, 0, on_again, NULL);
    assert_non_null(w->again_ev);
    sk__park_init(&w->pk, &w->t, 2000, w->again_ev);
    assert_int_equal(sk__xfer_new(base, &wire, NULL, &w->t, &w->pk, 0, &w->x), 0);
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
    assert_null(sk__park_next_again(&w->pk));
    assert_int_equal(w->pk.pending, 0);
    event_free(w->again_ev);
    sk__camp_table_clear(&w->t);
    sk__park_clear(&w->pk);
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
    answer a = {0};
    park_one(&w, l0, 3, &a);
    sk__xfer_kick(w.x, l0);
    run_idle(&w, 0);
    /* the parked purchase goes out again, unanswered */
    assert_null(l0->parked);
    assert_int_equal(l0->again, 1);
    event_base_loop(base, EVLOOP_NONBLOCK); /* the coalescer would send it now */
    assert_int_equal(again_runs, 1);
    expect_again(&w, l0, &a);
    assert_int_equal(l0->again, 0);
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
    answer one = {0}, two = {0};
    park_one(&w, w.c->lanes[0], 1, &one);
    park_one(&w, w.c->lanes[0], 2, &two);
    sk__xfer_kick(w.x, w.c->lanes[0]);
    run_idle(&w, 0);
    /* the lane's own unit: the purchase of 1 goes again, the one of 2 is sold out */
    assert_int_equal(two.calls, 1);
    assert_int_equal(two.err, SK_ESOLDOUT);
    assert_int_equal(two.remaining, 1);
    expect_again(&w, w.c->lanes[0], &one);
    assert_false(w.c->soldout); /* a unit is left */
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
    w.pk.max_ms = 30;
    answer a = {0};
    park_one(&w, l0, 1, &a);
    sk__xfer_kick(w.x, l0);
    run_idle(&w, 0);
    /* round and round until the deadline: unavailable, not sold out */
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, SK_EUNAVAIL);
    assert_int_equal(again_runs, 0);
    assert_int_equal(w.pk.waits[0] + w.pk.waits[1] + w.pk.waits[2] + w.pk.waits[3], 0); /* waited >= 30 ms */
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
    assert_int_equal(again_runs + (int)w.pk.outcomes[SK_OUT_SOLD_OUT], 0); /* nobody waited */
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
