/* sk_fixture.c: the flash-sale tests' shared pieces (sk_fixture.h).
 * Invariant: everything here runs on the test's own loop and servers;
 * nothing is retried, so what the engine answered is what a test sees. */
#include "sk_fixture.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "lib_target.h"
#include "reconcile.h"
#include "util.h"

const char SK_FX_ACCEPT_LUA[] =
    "local q = tonumber(ARGV[3])\n"
    "if ARGV[6] ~= 'force' then\n"
    "  if tonumber(redis.call('GET', KEYS[1])) < q then return 0 end\n"
    "  if KEYS[4] then\n"
    "    local limit = tonumber(redis.call('HGET', KEYS[4], 'per_user_limit'))\n"
    "    local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')\n"
    "    if held + q > limit then return 0 end\n"
    "  end\n"
    "end\n"
    "redis.call('DECRBY', KEYS[1], q)\n"
    "redis.call('HINCRBY', KEYS[2], ARGV[2], q)\n"
    "redis.call('XADD', KEYS[3], '*', 'order_id', ARGV[1], 'campaign', ARGV[4], 'user', ARGV[2],"
    " 'qty', ARGV[3], 'idem', '', 'ts_ms', ARGV[5], 'path', 'redis')\n"
    "return 1\n";

test_server sk_fx_redis;
int sk_fx_answered;

int sk_fx_setup(void **state)
{
    (void)state;
    return lt_start(&sk_fx_redis);
}

int sk_fx_teardown(void **state)
{
    (void)state;
    lt_stop(&sk_fx_redis);
    return 0;
}

void sk_fx_on_result(const sk_purchase_result *r, void *arg)
{
    sk_fx_slot *s = arg;
    s->r = *r;
    s->done = 1;
    s->seq = sk_fx_answered++;
}

void sk_fx_run_until(struct event_base *base, int *counter, int target, int64_t timeout_ms)
{
    int64_t deadline = dlock__now_ms() + timeout_ms;
    while (*counter < target && dlock__now_ms() < deadline) event_base_loop(base, EVLOOP_ONCE);
}

sk_engine *sk_fx_engine(struct event_base *base, const sk_engine_opts *o, int64_t ready_ms)
{
    sk_engine *e = NULL;
    char err[128];
    assert_int_equal(sk_engine_new(base, sk_fx_redis.url, o, &e, err, sizeof(err)), 0);
    int64_t deadline = dlock__now_ms() + ready_ms;
    while (!sk_engine_ready(e) && dlock__now_ms() < deadline) event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    assert_true(sk_engine_ready(e));
    return e;
}

void sk_fx_campaign(sk_campaign *d, const char *id, int64_t stock, int64_t limit)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->id, sizeof(d->id), "%s", id);
    d->stock = stock;
    d->per_user_limit = limit;
    d->starts_at_ms = dlock__wall_ms() - 60000;
    d->ends_at_ms = dlock__wall_ms() + 3600000;
}

typedef struct heat_wait {
    int done;
    int err;
    bool has_info;
    sk_campaign_info info;
} heat_wait;

static void on_heat(int err, const sk_campaign_info *ci, void *arg)
{
    heat_wait *w = arg;
    w->err = err;
    if (ci) w->info = *ci;
    w->has_info = ci != NULL;
    w->done = 1;
}

int sk_fx_heat(struct event_base *base, sk_engine *e, const sk_campaign *d, sk_heat_mode mode, int64_t timeout_ms,
               sk_campaign_info *info_out)
{
    heat_wait w = {0};
    int rc = sk_engine_campaign_heat(e, d, mode, on_heat, &w);
    if (rc) return rc;
    sk_fx_run_until(base, &w.done, 1, timeout_ms);
    assert_true(w.done);
    if (info_out && w.has_info) *info_out = w.info;
    return w.err;
}

int sk_fx_reconcile(sk_db *db, dlock__conn *rc, const char *camp, bool print)
{
    sk_reconcile_report rep;
    assert_int_equal(sk_reconcile_campaign(db, rc, camp, &rep), 0);
    if (print || rep.ndiffs) {
        dlock__buf b = {0};
        sk_reconcile_format(&rep, false, &b);
        fprintf(stderr, "%s", b.data ? b.data : "");
        dlock__buf_free(&b);
    }
    int n = rep.ndiffs;
    sk_reconcile_report_free(&rep);
    return n;
}
