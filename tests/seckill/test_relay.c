/* test_relay.c: one coalescer per process (relay.h) on a real
 * redis-server. Doors on other threads hand purchases to one serving
 * engine: every purchase is answered exactly once, on its door's thread,
 * in the order it was handed in, and the sale never oversells; a relay
 * nobody serves refuses at once; a door that leaves answers what it still
 * waits for (not sent: SK_EUNAVAIL; sent: DLOCK_EUNKNOWN); a serving loop
 * that stops answers what it did not take. The threaded case runs under
 * TSan in CI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "dlock/dlock.h"
#include "engine.h"
#include "relay.h"
#include "sk_err.h"
#include "sk_fixture.h"
#include "util.h"

/* One purchase's answers, counted (exactly one is expected). */
typedef struct ans {
    int calls;
    int seq; /* the door's answer order */
    sk_purchase_result r;
} ans;

typedef struct door_run {
    struct event_base *base;
    sk_relay_door *d;
    ans *a;
    int n, answered;
} door_run;

typedef struct cb_ctx {
    door_run *run;
    int i;
} cb_ctx;

static void on_answer(const sk_purchase_result *r, void *arg)
{
    cb_ctx *c = arg;
    ans *a = &c->run->a[c->i];
    a->calls++;
    a->r = *r;
    a->seq = c->run->answered++;
}

/* A serving engine on its own base with one campaign of stock units. */
typedef struct server {
    struct event_base *base;
    sk_engine *e;
    sk_relay *relay;
    pthread_t th;
    atomic_int stop;
} server;

static void server_open(server *s, const char *camp, int64_t stock)
{
    memset(s, 0, sizeof(*s));
    s->base = event_base_new();
    assert_non_null(s->base);
    sk_engine_opts o;
    sk_engine_opts_init(&o);
    s->e = sk_fx_engine(s->base, &o, 5000);
    sk_campaign d;
    sk_fx_campaign(&d, camp, stock, 1);
    assert_int_equal(sk_fx_heat(s->base, s->e, &d, SK_HEAT_REHEAT, 5000, NULL), 0);
    assert_int_equal(sk_relay_new(&s->relay), 0);
}

static void server_close(server *s)
{
    sk_relay_unserve(s->relay);
    sk_engine_free(s->e);
    sk_relay_free(s->relay);
    event_base_free(s->base);
}

static void *server_main(void *arg)
{
    server *s = arg;
    while (!atomic_load(&s->stop)) {
        struct timeval tv = {0, 5000};
        event_base_loopexit(s->base, &tv);
        event_base_dispatch(s->base);
    }
    return NULL;
}

static void door_open(door_run *run, sk_relay *r, int n)
{
    memset(run, 0, sizeof(*run));
    run->base = event_base_new();
    assert_non_null(run->base);
    assert_int_equal(sk_relay_door_new(r, run->base, &run->d), 0);
    run->a = calloc((size_t)n, sizeof(*run->a));
    assert_non_null(run->a);
    run->n = n;
}

/* The door leaves (its answers stay readable). */
static void door_leave(door_run *run)
{
    sk_relay_door_free(run->d);
    run->d = NULL;
}

static void door_close(door_run *run)
{
    sk_relay_door_free(run->d);
    event_base_free(run->base);
    free(run->a);
}

/* The same, serving, with a door of n purchases on this thread. */
static void serving_with_door(server *s, const char *camp, door_run *run, int n)
{
    server_open(s, camp, 1000);
    assert_int_equal(sk_relay_serve(s->relay, s->base, s->e), 0);
    door_open(run, s->relay, n);
}

/* Hands in n purchases of one unit, user PREFIX-i; returns the contexts. */
static cb_ctx *hand_in(door_run *run, const char *camp, const char *prefix)
{
    cb_ctx *c = calloc((size_t)run->n, sizeof(*c));
    assert_non_null(c);
    for (int i = 0; i < run->n; i++) {
        char user[32];
        snprintf(user, sizeof(user), "%s-%d", prefix, i);
        c[i] = (cb_ctx){run, i};
        assert_int_equal(sk_relay_purchase(run->d, camp, user, 1, NULL, "10.0.0.1", on_answer, &c[i]), 0);
    }
    return c;
}

static void run_door(door_run *run, int64_t max_ms)
{
    sk_fx_run_until(run->base, &run->answered, run->n, max_ms);
}

/* Every purchase answered once, in the order handed in; the accepted
 * count (their order ids distinct). */
static int check_answers(const door_run *run)
{
    int accepted = 0;
    for (int i = 0; i < run->n; i++) {
        assert_int_equal(run->a[i].calls, 1);
        assert_int_equal(run->a[i].seq, i);
        if (run->a[i].r.err == 0) {
            accepted++;
            for (int k = 0; k < i; k++)
                if (run->a[k].r.err == 0) assert_true(run->a[k].r.order_id != run->a[i].r.order_id);
        } else {
            assert_int_equal(run->a[i].r.err, SK_ESOLDOUT);
        }
    }
    return accepted;
}

/* ---- doors on two threads, one serving engine ------------------------ */

typedef struct door_thread {
    door_run run;
    server *s;
    const char *prefix;
    pthread_t th;
    int accepted;
} door_thread;

static void *door_main(void *arg)
{
    door_thread *t = arg;
    cb_ctx *c = hand_in(&t->run, "relay-two", t->prefix);
    run_door(&t->run, 20000);
    free(c);
    return NULL;
}

static void test_two_doors_share_one_engine(void **state)
{
    (void)state;
    enum { PER_DOOR = 400, STOCK = 500 };
    server s;
    server_open(&s, "relay-two", STOCK);
    assert_int_equal(sk_relay_serve(s.relay, s.base, s.e), 0);
    /* a second server is refused */
    assert_int_equal(sk_relay_serve(s.relay, s.base, s.e), SK_EINVAL);
    door_thread t[2] = {{.s = &s, .prefix = "a"}, {.s = &s, .prefix = "b"}};
    for (int i = 0; i < 2; i++) door_open(&t[i].run, s.relay, PER_DOOR);
    assert_int_equal(pthread_create(&s.th, NULL, server_main, &s), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i].th, NULL, door_main, &t[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i].th, NULL);
    atomic_store(&s.stop, 1);
    pthread_join(s.th, NULL);
    int accepted = 0;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(t[i].run.answered, PER_DOOR);
        accepted += check_answers(&t[i].run);
        assert_int_equal(sk_relay_door_pending(t[i].run.d), 0);
    }
    assert_int_equal(accepted, STOCK); /* never more, and every unit sold */
    assert_int_equal(sk_relay_pending(s.relay), 0);
    /* one engine decided them all, in batches that mixed the doors */
    sk_engine_stats st;
    sk_engine_get_stats(s.e, &st);
    assert_int_equal(st.outcomes[SK_OUT_ACCEPTED], STOCK);
    for (int i = 0; i < 2; i++) door_close(&t[i].run);
    server_close(&s);
}

/* ---- lifetimes, on one thread (the order of events is chosen) ---------- */

static void test_unserved_relay_refuses_at_once(void **state)
{
    (void)state;
    sk_relay *r;
    assert_int_equal(sk_relay_new(&r), 0);
    door_run run;
    door_open(&run, r, 1);
    cb_ctx c = {&run, 0};
    assert_int_equal(sk_relay_purchase(run.d, "x", "u", 1, NULL, NULL, on_answer, &c), SK_EUNAVAIL);
    event_base_loop(run.base, EVLOOP_NONBLOCK);
    assert_int_equal(run.a[0].calls, 0);
    assert_int_equal(sk_relay_door_pending(run.d), 0);
    door_close(&run);
    sk_relay_free(r);
}

static void test_door_leaving_answers_what_it_waits_for(void **state)
{
    (void)state;
    server s;
    door_run run;
    /* not taken: the serving loop has not run */
    serving_with_door(&s, "relay-leave", &run, 5);
    cb_ctx *c = hand_in(&run, "relay-leave", "q");
    assert_int_equal(sk_relay_door_pending(run.d), 5);
    door_leave(&run); /* answers now, in order */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(run.a[i].calls, 1);
        assert_int_equal(run.a[i].seq, i);
        assert_int_equal(run.a[i].r.err, SK_EUNAVAIL);
    }
    event_base_loop(s.base, EVLOOP_NONBLOCK); /* drops them, sends none */
    assert_int_equal(sk_relay_pending(s.relay), 0);
    sk_engine_stats st;
    sk_engine_get_stats(s.e, &st);
    assert_int_equal(st.batched_purchases, 0);
    door_close(&run);
    free(c);

    /* taken (sent), not yet answered: Redis is frozen (SIGSTOP) so that
     * no answer can come before the door leaves */
    door_open(&run, s.relay, 3);
    c = hand_in(&run, "relay-leave", "t");
    assert_int_equal(kill(sk_fx_redis.pid, SIGSTOP), 0);
    for (int i = 0; i < 5; i++) event_base_loop(s.base, EVLOOP_NONBLOCK); /* takes and sends them */
    door_leave(&run);
    assert_int_equal(kill(sk_fx_redis.pid, SIGCONT), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(run.a[i].calls, 1);
        assert_int_equal(run.a[i].r.err, DLOCK_EUNKNOWN);
    }
    int64_t end = dlock__now_ms() + 5000; /* the engine's answers are dropped */
    while (sk_relay_pending(s.relay) && dlock__now_ms() < end) event_base_loop(s.base, EVLOOP_ONCE);
    assert_int_equal(sk_relay_pending(s.relay), 0);
    sk_engine_get_stats(s.e, &st);
    assert_int_equal(st.outcomes[SK_OUT_ACCEPTED], 3); /* decided, and its buyer was told "unknown" */
    for (int i = 0; i < 3; i++) assert_int_equal(run.a[i].calls, 1);
    door_close(&run);
    free(c);
    server_close(&s);
}

static void test_unserve_answers_what_was_not_taken(void **state)
{
    (void)state;
    server s;
    door_run run;
    serving_with_door(&s, "relay-unserve", &run, 4);
    cb_ctx *c = hand_in(&run, "relay-unserve", "u");
    sk_relay_unserve(s.relay);
    assert_int_equal(sk_relay_pending(s.relay), 0);
    run_door(&run, 2000);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(run.a[i].calls, 1);
        assert_int_equal(run.a[i].seq, i);
        assert_int_equal(run.a[i].r.err, SK_EUNAVAIL);
    }
    /* from now on: refused at once (the caller decides elsewhere) */
    cb_ctx more = {&run, 0};
    assert_int_equal(sk_relay_purchase(run.d, "relay-unserve", "v", 1, NULL, NULL, on_answer, &more), SK_EUNAVAIL);
    free(c);
    door_close(&run);
    server_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_doors_share_one_engine),
        cmocka_unit_test(test_unserved_relay_refuses_at_once),
        cmocka_unit_test(test_door_leaving_answers_what_it_waits_for),
        cmocka_unit_test(test_unserve_answers_what_was_not_taken),
    };
    return cmocka_run_group_tests(tests, sk_fx_setup, sk_fx_teardown);
}
