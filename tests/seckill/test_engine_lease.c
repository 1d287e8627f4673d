/* test_engine_lease.c: the engine's order-id worker lease (engine_lease.h)
 * on a fake port and clock: it is taken, renewed at a third of its length
 * before it expires, declared lost when renewals fail past its deadline
 * (checked at the moment an id is asked for, not only by the tick), taken
 * anew when a renewal finds the fence gone, its ids never start below
 * the server's clock, and an id is never dated after the check that let it
 * out (a pause in between). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dlock/dlock.h"
#include "engine_lease.h"
#include "part_fake.h"

#define LEASE_MS 60000 /* margin 10 000: ids stop 50 000 ms after the last good send */

static part_fake f;
static sk__lease l;

static int setup(void **state)
{
    (void)state;
    pf_init(&f);
    sk__lease_init(&l, &f.wire, "inst1", 5, LEASE_MS);
    return 0;
}

/* "*2 :fence :server_ms": the lease script's answer. */
static void answer(int64_t fence, int64_t server_ms)
{
    char resp[96];
    snprintf(resp, sizeof(resp), "*2\r\n:%lld\r\n:%lld\r\n", (long long)fence, (long long)server_ms);
    pf_reply(&f, resp);
}

static void take(void)
{
    sk__lease_step(&l);
    assert_int_equal(pf_pending(&f), 1);
    answer(7, f.wall_ms);
    assert_true(sk__lease_valid(&l));
}

static void test_lease_is_taken_with_the_lease_script(void **state)
{
    (void)state;
    assert_false(sk__lease_valid(&l));
    uint64_t id = 0;
    assert_int_equal(sk__lease_next_id(&l, &id), SK_EUNAVAIL);
    sk__lease_tick(&l, false); /* not connected: nothing is sent */
    assert_int_equal(f.sent, 0);
    sk__lease_tick(&l, true);
    const pf_cmd *c = pf_cmd_at(&f, 0);
    assert_int_equal(c->script, SK__LUA_LEASE);
    assert_int_equal(c->argc, 6);
    assert_string_equal(c->argv[1], "seckill:worker:5");
    assert_string_equal(c->argv[2], "{seckill:worker:5}:fence");
    assert_string_equal(c->argv[3], "inst1");
    assert_string_equal(c->argv[4], "60000");
    assert_string_equal(c->argv[5], "0"); /* a take: no fence yet */
    sk__lease_tick(&l, true);              /* one in flight at a time */
    assert_int_equal(f.sent, 1);
    assert_false(sk__lease_valid(&l));
    answer(7, f.wall_ms);
    assert_true(sk__lease_valid(&l));
    assert_int_equal(sk__lease_worker(&l), 5);
    assert_int_equal(sk__lease_next_id(&l, &id), 0);
    int64_t ms;
    int worker, seq;
    sk_orderid_decode(id, &ms, &worker, &seq);
    assert_int_equal(worker, 5);
    assert_int_equal(pf_logged(&f, "worker id 5 leased (fence 7)"), 1);
}

static void test_lease_is_renewed_at_a_third_before_it_expires(void **state)
{
    (void)state;
    take();
    int64_t t0 = f.now_ms;
    f.now_ms = t0 + LEASE_MS / 3 - 1;
    sk__lease_tick(&l, true);
    assert_int_equal(f.sent, 1); /* too early */
    f.now_ms = t0 + LEASE_MS / 3;
    sk__lease_tick(&l, true);
    assert_int_equal(f.sent, 2);
    assert_string_equal(pf_cmd_at(&f, 1)->argv[5], "7"); /* renews the fence it holds */
    f.now_ms += 300;                                      /* the answer comes later ... */
    answer(7, f.wall_ms);
    /* ... and the lease counts from when the renewal was sent */
    f.now_ms = t0 + LEASE_MS / 3 + LEASE_MS - LEASE_MS / 6 - 1;
    assert_true(sk__lease_valid(&l));
    f.now_ms++;
    assert_false(sk__lease_valid(&l));
}

static void test_lease_is_lost_when_renewals_fail_past_its_deadline(void **state)
{
    (void)state;
    take();
    int64_t t0 = f.now_ms, deadline = t0 + LEASE_MS - LEASE_MS / 6;
    int sent = 1;
    for (f.now_ms = t0 + LEASE_MS / 3; f.now_ms < deadline; f.now_ms += 1000) {
        sk__lease_tick(&l, true);
        assert_true(sk__lease_valid(&l));
        if (pf_pending(&f)) {
            pf_fail(&f, DLOCK_EUNKNOWN); /* the renewal never gets its answer */
            sent++;
        }
    }
    assert_true(sent > 20); /* it kept trying */
    f.now_ms = deadline - 1;
    uint64_t id;
    assert_int_equal(sk__lease_next_id(&l, &id), 0);
    /* no tick ran yet (a paused process resumed): the id is refused anyway */
    f.now_ms = deadline;
    assert_int_equal(sk__lease_next_id(&l, &id), SK_EUNAVAIL);
    assert_int_equal(sk__lease_worker(&l), -1);
    sk__lease_tick(&l, true);
    assert_int_equal(l.lost, 1);
    assert_int_equal(pf_logged(&f, "worker lease not renewed"), 1);
    char end[64]; /* the tick came at the deadline: it ended at this wall ms */
    snprintf(end, sizeof(end), "validity ended at %lld ms (wall clock)", (long long)f.wall_ms);
    assert_int_equal(pf_logged(&f, end), 1);
    /* the fence is kept: the next renewal asks whether it is still ours */
    assert_string_equal(pf_cmd_at(&f, f.sent - 1)->argv[5], "7");
    answer(7, f.wall_ms);
    assert_true(sk__lease_valid(&l));
}

static void test_renewal_finding_the_fence_gone_takes_a_new_lease(void **state)
{
    (void)state;
    take();
    f.now_ms += LEASE_MS / 3;
    sk__lease_tick(&l, true);
    answer(0, f.wall_ms); /* someone else holds it now */
    assert_false(sk__lease_valid(&l));
    assert_int_equal(l.lost, 1);
    assert_int_equal(pf_logged(&f, "is no longer ours"), 1);
    const pf_cmd *c = pf_cmd_at(&f, 2); /* at once, a take of the same id */
    assert_string_equal(c->argv[1], "seckill:worker:5");
    assert_string_equal(c->argv[5], "0");
    answer(0, f.wall_ms); /* taken: the next worker id is tried */
    assert_string_equal(pf_cmd_at(&f, 3)->argv[1], "seckill:worker:6");
    answer(9, f.wall_ms);
    assert_int_equal(sk__lease_worker(&l), 6);
}

static void test_ids_never_start_below_the_servers_clock(void **state)
{
    (void)state;
    int64_t server_ms = f.wall_ms + 5000; /* our wall clock is 5 s behind Redis's */
    sk__lease_step(&l);
    answer(7, server_ms);
    uint64_t id;
    assert_int_equal(sk__lease_next_id(&l, &id), 0);
    int64_t ms;
    int worker, seq;
    sk_orderid_decode(id, &ms, &worker, &seq);
    assert_true(ms >= server_ms);
}

/* A wall clock read just after a pause (SIGSTOP, swap) that took the
 * process past the lease's end while an id was being issued. */
static int64_t paused_deadline;

static int64_t wall_after_a_pause(void *ud)
{
    part_fake *pf = ud;
    pf->now_ms = paused_deadline;
    pf->wall_ms += LEASE_MS;
    return pf->wall_ms;
}

static void test_an_id_is_never_dated_after_the_check_that_let_it_out(void **state)
{
    (void)state;
    take();
    paused_deadline = f.now_ms + LEASE_MS - LEASE_MS / 6;
    f.on_wall = wall_after_a_pause;
    int64_t before = f.wall_ms;
    uint64_t id;
    int rc = sk__lease_next_id(&l, &id);
    if (rc == 0) { /* let out: then dated no later than the check */
        int64_t ms;
        int worker, seq;
        sk_orderid_decode(id, &ms, &worker, &seq);
        assert_true(ms <= before);
    } else {
        assert_int_equal(rc, SK_EUNAVAIL); /* or refused: the check came after the pause */
    }
}

static void test_a_lost_connection_lets_the_next_take_go(void **state)
{
    (void)state;
    sk__lease_step(&l);
    sk__lease_disconnected(&l); /* its answer will never come */
    sk__lease_tick(&l, true);
    assert_int_equal(f.sent, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_lease_is_taken_with_the_lease_script, setup),
        cmocka_unit_test_setup(test_lease_is_renewed_at_a_third_before_it_expires, setup),
        cmocka_unit_test_setup(test_lease_is_lost_when_renewals_fail_past_its_deadline, setup),
        cmocka_unit_test_setup(test_renewal_finding_the_fence_gone_takes_a_new_lease, setup),
        cmocka_unit_test_setup(test_ids_never_start_below_the_servers_clock, setup),
        cmocka_unit_test_setup(test_an_id_is_never_dated_after_the_check_that_let_it_out, setup),
        cmocka_unit_test_setup(test_a_lost_connection_lets_the_next_take_go, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
