/* sk_fixture.h: what the flash-sale tests share. The engine tests: a
 * redis-server (or, with DLOCK_TEST_CLUSTER=1, a Cluster: lib_target.h)
 * started by the group setup, a purchase answer recorded in a slot, the
 * loop run until enough answers came, an engine ready on that server, a
 * campaign defined and heated. The pipeline tests: a stand-in for
 * purchase.lua that accepts like the engine and writes the order stream in
 * the contract's format (docs/design/seckill-contract.md). Test code:
 * failures are cmocka assertions. */
#ifndef SK_TEST_FIXTURE_H
#define SK_TEST_FIXTURE_H

#include <stdint.h>

#include <stdbool.h>

#include "db.h"
#include "engine.h"
#include "redis_io.h"
#include "servers.h"

struct event_base;

/* KEYS[1] stock, KEYS[2] buyers (user -> units), KEYS[3] order stream,
 * and optionally KEYS[4] a meta whose per_user_limit is checked; ARGV
 * order id, user, qty, campaign, ts_ms, and "force" to skip the decision
 * (a Redis that lost writes). Deducts, records the buyer, XADDs the order
 * (path redis); returns 1 accepted, 0 refused. */
extern const char SK_FX_ACCEPT_LUA[];

/* The group's server: started by sk_fx_setup, stopped by sk_fx_teardown. */
extern test_server sk_fx_redis;
int sk_fx_setup(void **state);
int sk_fx_teardown(void **state);

/* One purchase's answer: done once answered, seq the order it came in
 * (sk_fx_answered before it). */
typedef struct sk_fx_slot {
    int done;
    int seq;
    sk_purchase_result r;
} sk_fx_slot;
/* Answers recorded since the test last set it to 0. */
extern int sk_fx_answered;
/* An sk_purchase_cb: records r in the sk_fx_slot arg. */
void sk_fx_on_result(const sk_purchase_result *r, void *arg);

/* Runs base until *counter reaches target or timeout_ms passed. */
void sk_fx_run_until(struct event_base *base, int *counter, int target, int64_t timeout_ms);

/* An engine on sk_fx_redis with options o, ready (order-id lease held)
 * within ready_ms. */
sk_engine *sk_fx_engine(struct event_base *base, const sk_engine_opts *o, int64_t ready_ms);

/* d: campaign id with stock and limit, selling from a minute ago for an
 * hour, every other field 0. */
void sk_fx_campaign(sk_campaign *d, const char *id, int64_t stock, int64_t limit);

/* Heats d (mode) and waits up to timeout_ms: the callback's error (the
 * test fails if it never came); info_out (may be NULL) what it returned,
 * left as it was when it returned none (an error). */
int sk_fx_heat(struct event_base *base, sk_engine *e, const sk_campaign *d, sk_heat_mode mode, int64_t timeout_ms,
               sk_campaign_info *info_out);

/* Reconciles campaign camp (reconcile.h) between db and Redis on rc: the
 * number of differences, each printed to stderr (all of the report when
 * print). */
int sk_fx_reconcile(sk_db *db, dlock__conn *rc, const char *camp, bool print);

#endif
