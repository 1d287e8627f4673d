/* test_lock.c: the simple and reentrant locks against a real redis-server
 * started by the test: acquire/release semantics, reentrancy, refusal of
 * non-owners, leases with and without the watchdog, waiting and cancel,
 * fencing tokens and the fence guard, queries, admin, metrics, SCRIPT FLUSH
 * and client destroy with held locks. Leases are short (300-1000 ms). */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_internal.h"
#include "lock_support.h"
#include "redis_io.h"
#include "slot.h"
#include "url.h"
#include "util.h"


static void test_bad_names_are_invalid_arguments(void **state)
{
    (void)state;
    dlock_lock *l = NULL;
    char longname[DLOCK__NAME_MAX + 2];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(dlock_lock_new(ls_cl, "", NULL, &l), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new(ls_cl, NULL, NULL, &l), DLOCK_EINVAL);
    ls_log_clear();
    assert_int_equal(dlock_lock_new(ls_cl, longname, NULL, &l), DLOCK_EINVAL);
    assert_null(l);
    /* the refusal says the length and the maximum */
    assert_true(ls_log_contains("lock name of 1025 bytes is longer than the maximum of 1024 bytes"));
    assert_int_equal(dlock_lock_new(NULL, "a", NULL, &l), DLOCK_EINVAL);
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.owner_id = "";
    assert_int_equal(dlock_lock_new(ls_cl, "a", &lo, &l), DLOCK_EINVAL);
    lo.owner_id = NULL;
    lo.kind = (dlock_lock_kind)7;
    assert_int_equal(dlock_lock_new(ls_cl, "a", &lo, &l), DLOCK_EINVAL);
    longname[DLOCK__NAME_MAX] = '\0'; /* exactly the maximum is fine */
    assert_int_equal(dlock_lock_new(ls_cl, longname, NULL, &l), 0);
    assert_int_equal(dlock_lock_try_lock(l, 0, -5, NULL), DLOCK_EINVAL);
    dlock_lock_free(l);
    assert_int_equal(dlock_force_unlock(ls_cl, "", DLOCK_LOCK_SIMPLE, NULL), DLOCK_EINVAL);
    uint64_t h;
    assert_int_equal(dlock_fence_guard(ls_cl, "", 5, &h), DLOCK_EINVAL);
    dlock_lock_status st;
    assert_int_equal(dlock_lock_status_get(ls_cl, NULL, &st), DLOCK_EINVAL);
}

static void test_companion_keys_share_the_hash_slot(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(dlock__companion_key("orders:42", ":fence", out, sizeof(out)), 0);
    assert_string_equal(out, "{orders:42}:fence");
    assert_int_equal(dlock__companion_key("x{tag}y", ":fence", out, sizeof(out)), 0);
    assert_string_equal(out, "x{tag}y:fence");
    /* "{a{}b}:q" would hash "a{" while "a{}b" (empty tag) hashes whole */
    assert_int_equal(dlock__companion_key("a{}b", ":q", out, sizeof(out)), 0);
    assert_int_equal(dlock__key_slot(out, strlen(out)), dlock__key_slot("a{}b", 4));
    assert_int_equal(strncmp(out, "a{}b#", 5), 0);
    assert_int_equal(dlock__companion_key("0123456789012345678901234567890123456789012345678901234567890", ":fence", out,
                                          sizeof(out)),
                     DLOCK_EINVAL);
    char key[32];
    assert_int_equal(dlock__client_key(ls_cl, "n", key, sizeof(key)), 0);
    assert_string_equal(key, ls_key("n"));
    assert_int_equal(dlock__client_key(ls_cl, "", key, sizeof(key)), DLOCK_EINVAL);
}

static void test_simple_lock_layout_and_double_acquire(void **state)
{
    (void)state;
    dlock_lock *a = ls_lock(ls_cl, "simple1", DLOCK_LOCK_SIMPLE);
    dlock_lock *b = ls_lock(ls_cl, "simple1", DLOCK_LOCK_SIMPLE);
    uint64_t f = 0;
    assert_int_equal(dlock_lock_try_lock(a, 0, 1000, &f), 0);
    assert_true(f > 0);
    /* layout: plain string key holding the 32-hex token, with a PX lease */
    char val[128] = "";
    const char *get[2] = {"GET", ls_key("simple1")};
    assert_int_equal(lt_cmd(&ls_srv, val, sizeof(val), 2, get), 0);
    assert_string_equal(val, dlock_lock_owner(a));
    assert_int_equal(strlen(val), 32);
    assert_int_equal(dlock_lock_try_lock(a, 0, 1000, NULL), DLOCK_EALREADY);
    assert_int_equal(dlock_lock_try_lock(b, 0, 1000, NULL), DLOCK_EBUSY);
    assert_int_equal(dlock_lock_try_lock(b, 150, 1000, NULL), DLOCK_ETIMEOUT);
    assert_int_equal(dlock_lock_unlock(b), DLOCK_ENOTHELD);
    assert_true(dlock_lock_is_held(a));
    assert_int_equal(dlock_lock_unlock(a), 0);
    assert_false(dlock_lock_is_held(a));
    assert_int_equal(dlock_lock_unlock(a), DLOCK_ENOTHELD); /* double release */
    assert_false(ls_exists(&ls_srv, ls_key("simple1")));
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void test_reentrant_counts_and_redisson_layout(void **state)
{
    (void)state;
    dlock_lock *l = ls_lock(ls_cl, "re1", DLOCK_LOCK_REENTRANT);
    uint64_t f1 = 0, f2 = 0, f3 = 0;
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, &f1), 0);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, &f2), 0);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, &f3), 0);
    assert_true(f1 > 0);
    assert_true(f1 == f2 && f2 == f3); /* re-entry keeps the first token */
    int64_t n = 0;
    assert_int_equal(dlock_lock_hold_count(l, &n), 0);
    assert_int_equal(n, 3);
    char owner[128], val[64] = "";
    dlock__thread_owner(ls_cl, owner, sizeof(owner));
    assert_string_equal(dlock_lock_owner(l), owner);
    const char *hget[3] = {"HGET", ls_key("re1"), owner};
    assert_int_equal(lt_cmd(&ls_srv, val, sizeof(val), 3, hget), 0);
    assert_string_equal(val, "3");
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_true(ls_exists(&ls_srv, ls_key("re1")));
    assert_int_equal(dlock_lock_hold_count(l, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_false(ls_exists(&ls_srv, ls_key("re1")));
    assert_int_equal(dlock_lock_unlock(l), DLOCK_ENOTHELD);
    dlock_lock_free(l);
}

typedef struct other_ctx {
    dlock_lock *l;
    int rc;
    int64_t waited_ms;
} other_ctx;

static void *unlock_from_other_thread(void *arg)
{
    other_ctx *x = arg;
    x->rc = dlock_lock_unlock(x->l);
    return NULL;
}

static void *lock_with_own_handle(void *arg)
{
    other_ctx *x = arg;
    int64_t t0 = dlock__now_ms();
    x->rc = dlock_lock_try_lock(x->l, 3000, 0, NULL);
    x->waited_ms = dlock__now_ms() - t0;
    if (x->rc == 0) x->rc = dlock_lock_unlock(x->l);
    return NULL;
}

static void test_release_by_non_owner_is_refused(void **state)
{
    (void)state;
    dlock_lock *l = ls_lock(ls_cl, "re2", DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    /* another thread, same handle: refused locally */
    other_ctx x = {.l = l};
    pthread_t t;
    pthread_create(&t, NULL, unlock_from_other_thread, &x);
    pthread_join(t, NULL);
    assert_int_equal(x.rc, DLOCK_ENOTOWNER);
    /* another handle (another owner id), refused by the server */
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = DLOCK_LOCK_REENTRANT;
    lo.owner_id = "someone-else:1";
    dlock_lock *o = NULL;
    assert_int_equal(dlock_lock_new(ls_cl, "re2", &lo, &o), 0);
    assert_int_equal(dlock_lock_unlock(o), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_try_lock(o, 0, 0, NULL), DLOCK_EBUSY);
    assert_true(ls_exists(&ls_srv, ls_key("re2")));
    /* a simple lock of the same name is excluded too (different type) */
    dlock_lock *s = ls_lock(ls_cl, "re2", DLOCK_LOCK_SIMPLE);
    assert_int_equal(dlock_lock_try_lock(s, 0, 500, NULL), DLOCK_EBUSY);
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_int_equal(dlock_lock_unlock(o), DLOCK_ENOTHELD);
    dlock_lock_free(s);
    dlock_lock_free(o);
    dlock_lock_free(l);
}

static void test_explicit_owner_shares_a_reentrant_hold(void **state)
{
    (void)state;
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = DLOCK_LOCK_REENTRANT;
    lo.owner_id = "request-42";
    dlock_lock *a = NULL, *b = NULL;
    assert_int_equal(dlock_lock_new(ls_cl, "re3", &lo, &a), 0);
    assert_int_equal(dlock_lock_new(ls_cl, "re3", &lo, &b), 0);
    assert_int_equal(dlock_lock_try_lock(a, 0, 1000, NULL), 0);
    assert_int_equal(dlock_lock_try_lock(b, 0, 1000, NULL), 0); /* same owner: re-entry */
    dlock_lock_status st;
    assert_int_equal(dlock_lock_status_get(ls_cl, "re3", &st), 0);
    assert_true(st.locked);
    assert_int_equal(st.kind, DLOCK_LOCK_REENTRANT);
    assert_string_equal(st.holder, "request-42");
    assert_int_equal(st.hold_count, 2);
    assert_true(st.ttl_ms > 0 && st.ttl_ms <= 1000);
    assert_true(st.last_fence > 0);
    assert_int_equal(dlock_lock_unlock(b), 0);
    assert_int_equal(dlock_lock_unlock(a), 0);
    assert_false(ls_exists(&ls_srv, ls_key("re3")));
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void test_lease_expires_without_watchdog(void **state)
{
    (void)state;
    dlock_lock *a = ls_lock(ls_cl, "lease1", DLOCK_LOCK_SIMPLE);
    dlock_lock *b = ls_lock(ls_cl, "lease1", DLOCK_LOCK_SIMPLE);
    assert_int_equal(dlock_lock_try_lock(a, 0, 300, NULL), 0);
    int64_t ttl = 0;
    assert_int_equal(dlock_lock_remaining_ttl(a, &ttl), 0);
    assert_true(ttl > 0 && ttl <= 300);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_try_lock(b, 2000, 1000, NULL), 0); /* wakes on the TTL */
    int64_t waited = dlock__now_ms() - t0;
    assert_true(waited >= 200 && waited < 900);
    assert_false(dlock_lock_is_held(a)); /* local lease passed */
    assert_int_equal(dlock_lock_unlock(a), DLOCK_ELOST);
    assert_true(dlock_lock_is_held(b));
    assert_int_equal(dlock_lock_unlock(b), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void test_watchdog_keeps_lock_past_three_timeouts(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        dlock_lock_kind kind = k ? DLOCK_LOCK_REENTRANT : DLOCK_LOCK_SIMPLE;
        dlock_lock *l = ls_lock(ls_cl, "wd1", kind);
        assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
        dlock__sleep_ms(3 * 600 + 300);
        assert_true(dlock_lock_is_held(l));
        bool mine = false;
        assert_int_equal(dlock_lock_is_held_by_me(l, &mine), 0);
        assert_true(mine);
        int64_t ttl = 0;
        assert_int_equal(dlock_lock_remaining_ttl(l, &ttl), 0);
        assert_true(ttl > 0 && ttl <= 600);
        assert_int_equal(dlock_lock_unlock(l), 0);
        dlock_lock_free(l);
    }
    char *text = NULL;
    assert_int_equal(dlock_metrics_render(ls_cl, &text), 0);
    assert_null(strstr(text, "lock_watchdog_renew_total 0\n"));
    dlock_free(text);
}

static void test_extend_switches_to_explicit_lease(void **state)
{
    (void)state;
    dlock_lock *l = ls_lock(ls_cl, "ext1", DLOCK_LOCK_SIMPLE);
    assert_int_equal(dlock_lock_extend(l, 500), DLOCK_ENOTHELD);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    assert_int_equal(dlock_lock_extend(l, 5000), 0);
    int64_t ttl = 0;
    assert_int_equal(dlock_lock_remaining_ttl(l, &ttl), 0);
    assert_true(ttl > 4000);
    assert_int_equal(dlock_lock_extend(l, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
}

static void *cancel_later(void *arg)
{
    dlock__sleep_ms(200);
    dlock_lock_cancel(arg);
    return NULL;
}

static void test_cancel_from_another_thread(void **state)
{
    (void)state;
    dlock_lock *a = ls_lock(ls_cl, "cancel1", DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, NULL), 0);
    dlock_lock_options lo;
    dlock_lock_options_init(&lo);
    lo.kind = DLOCK_LOCK_REENTRANT;
    lo.owner_id = "waiter";
    dlock_lock *b = NULL;
    assert_int_equal(dlock_lock_new(ls_cl, "cancel1", &lo, &b), 0);
    pthread_t t;
    pthread_create(&t, NULL, cancel_later, b);
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_try_lock(b, DLOCK_WAIT_FOREVER, 0, NULL), DLOCK_ECANCELED);
    int64_t took = dlock__now_ms() - t0;
    pthread_join(t, NULL);
    assert_true(took >= 150 && took < 1000);
    /* the cancel was consumed: the next wait times out normally */
    assert_int_equal(dlock_lock_try_lock(b, 100, 0, NULL), DLOCK_ETIMEOUT);
    assert_int_equal(dlock_lock_unlock(a), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void test_release_wakes_a_waiter_promptly(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        dlock_lock_kind kind = k ? DLOCK_LOCK_REENTRANT : DLOCK_LOCK_SIMPLE;
        dlock_lock *a = ls_lock(ls_cl, "wake1", kind);
        dlock_lock *b = ls_lock(ls_cl, "wake1", kind);
        assert_int_equal(dlock_lock_try_lock(a, 0, 5000, NULL), 0);
        other_ctx x = {.l = b};
        pthread_t t;
        pthread_create(&t, NULL, lock_with_own_handle, &x);
        /* released between two rechecks (at ~750 and >= 1550 ms of waiting):
         * only the unlock message can wake the waiter within 400 ms */
        dlock__sleep_ms(850);
        int64_t t0 = dlock__now_ms();
        assert_int_equal(dlock_lock_unlock(a), 0);
        pthread_join(t, NULL);
        assert_int_equal(x.rc, 0);
        int64_t took = dlock__now_ms() - t0;
        if (took >= 400) fail_msg("waiter took %lld ms after the unlock", (long long)took);
        dlock_lock_free(a);
        dlock_lock_free(b);
    }
}

/* Calls of cmd ("evalsha", "set") the server that holds lock name has
 * counted so far (on a cluster: its slot's master). Server: Redis 7.0 and
 * Valkey 8.0 (both passes), which count these commands alike
 * (docs/compatibility.md). */
static long long cmd_calls(const char *name, const char *cmd)
{
    char info[8192] = "", needle[64];
    const char *argv[2] = {"INFO", "commandstats"};
    if (lt_cmd_at(&ls_srv, ls_key(name), info, sizeof(info), 2, argv) != 0) return -1;
    int n = snprintf(needle, sizeof(needle), "\ncmdstat_%s:calls=", cmd);
    const char *p = strstr(info, needle);
    return p ? strtoll(p + n, NULL, 10) : 0;
}

/* Acquire attempts: scripts (fenced acquires) and plain SETs (unfenced). */
static long long acquire_calls(const char *name)
{
    return cmd_calls(name, "evalsha") + cmd_calls(name, "set");
}

static void test_waiting_on_a_foreign_holder_does_not_busy_poll(void **state)
{
    (void)state;
    /* a foreign holder (plain SET, as redis-py does) never publishes */
    const char *set[6] = {"SET", ls_key("poll1"), "foreign-token", "PX", "1500", "NX"};
    assert_int_equal(lt_cmd(&ls_srv, NULL, 0, 6, set), 0);
    dlock_lock *l = ls_lock(ls_cl, "poll1", DLOCK_LOCK_SIMPLE);
    long long before = acquire_calls("poll1");
    int64_t t0 = dlock__now_ms();
    assert_int_equal(dlock_lock_try_lock(l, 4000, 1000, NULL), 0);
    int64_t waited = dlock__now_ms() - t0;
    long long attempts = acquire_calls("poll1") - before;
    /* woke on the holder's TTL, after a handful of growing rechecks */
    assert_true(waited >= 1300 && waited < 2500);
    if (attempts > 12) fail_msg("%lld acquire attempts in %lld ms", attempts, (long long)waited);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
}

/* Without fence_out a simple lock's acquire is the plain SET NX PX (one
 * command, no script) and issues no token; asking for one issues the next. */
static void test_fencing_token_is_issued_only_when_asked_for(void **state)
{
    (void)state;
    dlock_lock *l = ls_lock(ls_cl, "fence_ask", DLOCK_LOCK_SIMPLE);
    uint64_t f1 = 0;
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, &f1), 0);
    assert_true(f1 > 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    long long scripts = cmd_calls("fence_ask", "evalsha"), sets = cmd_calls("fence_ask", "set");
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, NULL), 0);
    assert_int_equal(cmd_calls("fence_ask", "evalsha"), scripts); /* no script ran */
    assert_int_equal(cmd_calls("fence_ask", "set"), sets + 1);
    assert_int_equal(dlock_lock_fence(l), 0); /* this hold has no token */
    dlock_lock_status st;
    assert_int_equal(dlock_lock_status_get(ls_cl, "fence_ask", &st), 0);
    assert_true(st.locked && st.last_fence == f1); /* none was issued */
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, NULL), DLOCK_EALREADY);
    assert_int_equal(dlock_lock_unlock(l), 0);
    uint64_t f2 = 0;
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, &f2), 0);
    assert_true(f2 > f1);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
}

static void test_fencing_tokens_increase_across_release_expiry_and_key_loss(void **state)
{
    (void)state;
    dlock_lock *l = ls_lock(ls_cl, "fence1", DLOCK_LOCK_SIMPLE);
    uint64_t prev = 0, f = 0;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(dlock_lock_try_lock(l, 0, 1000, &f), 0);
        assert_true(f > prev);
        assert_int_equal(dlock_lock_fence(l), f);
        prev = f;
        assert_int_equal(dlock_lock_unlock(l), 0);
    }
    /* expiry */
    assert_int_equal(dlock_lock_try_lock(l, 0, 100, &f), 0);
    assert_true(f > prev);
    prev = f;
    dlock__sleep_ms(200);
    assert_int_equal(dlock_lock_try_lock(l, 0, 1000, &f), 0);
    assert_true(f > prev);
    prev = f;
    assert_int_equal(dlock_lock_unlock(l), 0);
    /* loss of the fence key (expiry, failover): the server clock carries on */
    char fk[256];
    assert_int_equal(dlock__companion_key(ls_key("fence1"), ":fence", fk, sizeof(fk)), 0);
    const char *del[2] = {"DEL", fk};
    assert_int_equal(lt_cmd(&ls_srv, NULL, 0, 2, del), 0);
    assert_int_equal(dlock_lock_try_lock(l, 0, 1000, &f), 0);
    assert_true(f > prev);
    /* the fence key has an expiry (no unbounded key growth) */
    char ttl[32] = "";
    const char *pttl[2] = {"PTTL", fk};
    assert_int_equal(lt_cmd(&ls_srv, ttl, sizeof(ttl), 2, pttl), 0);
    assert_true(strtoll(ttl, NULL, 10) > 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
}

static void test_fence_guard_rejects_stale_tokens(void **state)
{
    (void)state;
    uint64_t h = 0;
    assert_int_equal(dlock_fence_guard(ls_cl, "store1", 100, &h), 0);
    assert_int_equal(h, 100);
    assert_int_equal(dlock_fence_guard(ls_cl, "store1", 100, &h), 0); /* same holder again */
    assert_int_equal(dlock_fence_guard(ls_cl, "store1", 99, &h), DLOCK_ESTALE);
    assert_int_equal(h, 100);
    assert_int_equal(dlock_fence_guard(ls_cl, "store1", 18446744073709551615ULL, &h), 0);
    assert_int_equal(dlock_fence_guard(ls_cl, "store1", 9999999999999999999ULL, &h), DLOCK_ESTALE);
    assert_true(dlock_fence_compare(1, 2) < 0);
    assert_true(dlock_fence_compare(2, 2) == 0);
}

static void test_force_unlock_is_audited_and_wakes(void **state)
{
    (void)state;
    dlock_lock *l = ls_lock(ls_cl, "force1", DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    bool removed = true;
    assert_int_equal(dlock_force_unlock(ls_cl, "force1", DLOCK_LOCK_SIMPLE, &removed), 0);
    assert_false(removed); /* wrong kind: untouched */
    assert_true(ls_exists(&ls_srv, ls_key("force1")));
    ls_log_clear();
    assert_int_equal(dlock_force_unlock(ls_cl, "force1", DLOCK_LOCK_REENTRANT, &removed), 0);
    assert_true(removed);
    assert_true(ls_log_contains("audit: force_unlock force1"));
    assert_false(ls_exists(&ls_srv, ls_key("force1")));
    dlock__sleep_ms(700); /* the watchdog notices */
    assert_false(dlock_lock_is_held(l));
    assert_int_equal(dlock_lock_unlock(l), DLOCK_ELOST);
    dlock_lock_free(l);
}

static void test_script_flush_while_locks_are_held(void **state)
{
    (void)state;
    dlock_lock *a = ls_lock(ls_cl, "flush1", DLOCK_LOCK_SIMPLE);
    dlock_lock *b = ls_lock(ls_cl, "flush2", DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(a, 0, 0, NULL), 0);
    assert_int_equal(dlock_lock_try_lock(b, 0, 0, NULL), 0);
    const char *flush[2] = {"SCRIPT", "FLUSH"};
    assert_int_equal(lt_cmd(&ls_srv, NULL, 0, 2, flush), 0);
    dlock__sleep_ms(900); /* watchdog renewals hit NOSCRIPT and recover */
    assert_true(dlock_lock_is_held(a));
    assert_true(dlock_lock_is_held(b));
    assert_int_equal(dlock_lock_try_lock(b, 0, 0, NULL), 0);
    assert_int_equal(dlock_lock_unlock(b), 0);
    assert_int_equal(dlock_lock_unlock(b), 0);
    assert_int_equal(dlock_lock_unlock(a), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void test_metrics_use_the_alert_rule_names(void **state)
{
    (void)state;
    dlock_lock *a = ls_lock(ls_cl, "metrics1", DLOCK_LOCK_SIMPLE);
    dlock_lock *b = ls_lock(ls_cl, "metrics1", DLOCK_LOCK_SIMPLE);
    assert_int_equal(dlock_lock_try_lock(a, 0, 1000, NULL), 0);
    assert_int_equal(dlock_lock_try_lock(b, 0, 1000, NULL), DLOCK_EBUSY);
    assert_int_equal(dlock_lock_try_lock(b, 50, 1000, NULL), DLOCK_ETIMEOUT);
    assert_int_equal(dlock_lock_unlock(a), 0);
    char *t = NULL;
    assert_int_equal(dlock_metrics_render(ls_cl, &t), 0);
    const char *must[] = {"# TYPE lock_acquire_total counter\nlock_acquire_total ",
                          "lock_acquire_fail_total{reason=\"timeout\"} ",
                          "lock_acquire_fail_total{reason=\"busy\"} ",
                          "lock_acquire_fail_total{reason=\"error\"} ",
                          "# TYPE lock_hold_seconds summary\n",
                          "lock_hold_seconds{quantile=\"0.5\"} ",
                          "lock_hold_seconds{quantile=\"0.9\"} ",
                          "lock_hold_seconds{quantile=\"0.99\"} ",
                          "lock_hold_seconds_count ",
                          "lock_watchdog_renew_total ",
                          "lock_watchdog_renew_fail_total ",
                          "lock_lost_total "};
    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
        if (!strstr(t, must[i])) fail_msg("metrics lack \"%s\" in:\n%s", must[i], t);
    }
    assert_null(strstr(t, "lock_acquire_fail_total{reason=\"busy\"} 0\n"));
    assert_null(strstr(t, "lock_acquire_fail_total{reason=\"timeout\"} 0\n"));
    dlock_free(t);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void test_hold_time_summary_reflects_holds(void **state)
{
    (void)state;
    dlock_client *c2 = ls_client(&ls_srv, 600);
    assert_non_null(c2);
    dlock_lock *l = ls_lock(c2, "hold1", DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0); /* re-entry: one hold */
    dlock__sleep_ms(250);
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    char *t = NULL;
    assert_int_equal(dlock_metrics_render(c2, &t), 0);
    const char *q = strstr(t, "lock_hold_seconds{quantile=\"0.99\"} ");
    assert_non_null(q);
    double v = strtod(q + strlen("lock_hold_seconds{quantile=\"0.99\"} "), NULL);
    if (v < 0.24 || v > 1.0) fail_msg("p99 hold %.3f s, held ~0.25 s:\n%s", v, t);
    assert_non_null(strstr(t, "lock_hold_seconds_count 1\n"));
    assert_non_null(strstr(t, "lock_acquire_total 1\n")); /* the re-entry is no new acquire */
    dlock_free(t);
    dlock_lock_free(l);
    dlock_client_destroy(c2);
}

static void test_client_destroy_reports_held_locks(void **state)
{
    (void)state;
    dlock_client *c2 = ls_client(&ls_srv, 600);
    assert_non_null(c2);
    dlock_lock *l = ls_lock(c2, "destroy1", DLOCK_LOCK_SIMPLE);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    ls_log_clear();
    dlock_client_destroy(c2);
    assert_true(ls_log_contains("destroy1 (simple) is held"));
    assert_true(ls_exists(&ls_srv, ls_key("destroy1"))); /* not released silently */
    dlock_lock_free(l);                              /* still allowed */
}

static void test_client_rejects_bad_options(void **state)
{
    (void)state;
    dlock_client_options o;
    dlock_client_options_init(&o);
    dlock_client *c = NULL;
    o.url = "redis://127.0.0.1:notaport";
    assert_int_equal(dlock_client_create(&o, &c), DLOCK_EURL);
    dlock_client_options_init(&o);
    o.url = ls_srv.url;
    o.pool_size = 0;
    assert_int_equal(dlock_client_create(&o, &c), DLOCK_EINVAL);
    assert_null(c);
    dlock_client_options_init(&o);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", test_free_port());
    o.url = url;
    o.connect_timeout_ms = 300;
    assert_int_equal(dlock_client_create(&o, &c), DLOCK_ECONN);
    assert_int_equal(strlen(dlock_client_id(ls_cl)), 32);
}

/* A connection to the lock's server (routed by its key on a Cluster). */
static dlock__conn *lock_server_conn(int64_t timeout_ms)
{
    dlock__url u;
    dlock__conn_opts o = {.connect_timeout_ms = 1000, .command_timeout_ms = timeout_ms};
    dlock__conn *c = NULL;
    char err[256] = "";
    assert_int_equal(dlock__url_parse(ls_srv.url, &u, err, sizeof(err)), 0);
    int rc = dlock__conn_open(&u, &o, &c, err, sizeof(err));
    dlock__url_free(&u);
    return rc ? NULL : c;
}

/* One command on c to the lock's server; 0, or the dlock__conn code. */
static int lock_server_cmd(dlock__conn *c, int argc, const char **argv)
{
    const char *key = ls_key("unknown1");
    dlock__reply *r = NULL;
    int rc = dlock__conn_cmd_slot(c, dlock__key_slot(key, strlen(key)), argc, argv, NULL, &r);
    dlock__reply_free(r);
    return rc;
}

static atomic_bool stall_sending;

/* Stalls the lock's server for arg seconds: the connection is opened
 * first, so stall_sending is set just before the DEBUG SLEEP goes out. */
static void *debug_sleep(void *arg)
{
    dlock__conn *c = lock_server_conn(5000);
    assert_non_null(c);
    const char *argv[3] = {"DEBUG", "SLEEP", arg};
    atomic_store(&stall_sending, true);
    lock_server_cmd(c, 3, argv);
    dlock__conn_close(c);
    return NULL;
}

/* One PING to the lock's server: 0 answered within timeout_ms, 1 sent and
 * not answered in time, -1 could not even be sent (try again). */
static int ping_lock_server(int64_t timeout_ms)
{
    dlock__conn *c = lock_server_conn(timeout_ms);
    if (!c) return -1;
    const char *ping[1] = {"PING"};
    int rc = lock_server_cmd(c, 1, ping);
    dlock__conn_close(c);
    return rc == 0 ? 0 : rc == DLOCK__EUNKNOWN ? 1 : -1;
}

/* Handshake, instead of guessing a delay: returns once the lock's server
 * is inside the stall, i.e. after the DEBUG SLEEP went out a PING on a
 * connection opened beforehand was left unanswered for 150 ms. */
static void start_stall(pthread_t *t, const char *seconds)
{
    dlock__conn *probe = lock_server_conn(150);
    assert_non_null(probe);
    atomic_store(&stall_sending, false);
    assert_int_equal(pthread_create(t, NULL, debug_sleep, (void *)seconds), 0);
    int64_t t0 = dlock__now_ms();
    const char *ping[1] = {"PING"};
    int rc = 0;
    while (!atomic_load(&stall_sending) || (rc = lock_server_cmd(probe, 1, ping)) == 0) {
        assert_true(dlock__now_ms() - t0 < 5000);
        dlock__sleep_ms(2);
    }
    dlock__conn_close(probe); /* rc: EUNKNOWN, or ECONN from a Cluster router giving up */
}

/* Barrier: one answered round trip to the lock's server after the stall's
 * own reply. Whatever reached the server during the stall (the stalled
 * acquire) has been run before the server answers a command sent after
 * that reply, so asking after this is not a race. */
static void after_the_stall(void)
{
    int64_t t0 = dlock__now_ms();
    while (ping_lock_server(1000) != 0) {
        assert_true(dlock__now_ms() - t0 < 5000);
        dlock__sleep_ms(2);
    }
}

/* On a Cluster, whether replicas may take over a master that stops
 * answering. A 2 s stall is twice the fixture's cluster-node-timeout: the
 * stalled master's replica would be promoted during it, and the acquire
 * the old master runs when it wakes would be lost with its demotion (a
 * Cluster's failover, not the outcome-unknown path this test is about). */
static void cluster_failover_allowed(bool yes)
{
    if (!lt_cluster()) return;
    const char *argv[4] = {"CONFIG", "SET", "cluster-replica-no-failover", yes ? "no" : "yes"};
    for (int i = 0; i < lt_cl.n; i++) {
        char out[64];
        assert_int_equal(test_cluster_cmd(&lt_cl, i, out, sizeof(out), 4, argv), 0);
    }
}

static void test_outcome_unknown_is_resolved_or_reported(void **state)
{
    (void)state;
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.command_timeout_ms = 200;
    o.watchdog_timeout_ms = 5000;
    dlock_client *c = ls_client_opts(&ls_srv, &o);
    assert_non_null(c);
    dlock_lock *l = ls_lock(c, "unknown1", DLOCK_LOCK_SIMPLE);
    /* server stalls 500 ms (150 of them to see the stall): the acquire's
     * reply is late (EUNKNOWN), the follow-up question is answered:
     * resolved as acquired */
    pthread_t t;
    start_stall(&t, "0.5");
    uint64_t f = 0;
    assert_int_equal(dlock_lock_try_lock(l, 0, 3000, &f), 0);
    pthread_join(t, NULL);
    assert_true(f > 0);
    assert_true(dlock_lock_is_held(l));
    assert_int_equal(dlock_lock_unlock(l), 0);
    /* server stalls 2 s: the question (and its reconnects, whose handshake
     * PING also times out) fails too: EUNKNOWN, and the handle can still
     * find out and give the lock back */
    cluster_failover_allowed(false);
    start_stall(&t, "2");
    assert_int_equal(dlock_lock_try_lock(l, 0, 3000, NULL), DLOCK_EUNKNOWN);
    pthread_join(t, NULL);
    assert_false(dlock_lock_is_held(l));
    after_the_stall();
    cluster_failover_allowed(true);
    bool mine = false;
    assert_int_equal(dlock_lock_is_held_by_me(l, &mine), 0);
    assert_true(mine); /* the stalled acquire was written, so it ran */
    assert_true(ls_exists(&ls_srv, ls_key("unknown1")));
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_false(ls_exists(&ls_srv, ls_key("unknown1")));
    dlock_lock_free(l);
    dlock_client_destroy(c);
}

static void test_sentinel_url_follows_the_master(void **state)
{
    (void)state;
    LT_STANDALONE_ONLY("Sentinel monitors one master");
    test_server sen;
    assert_int_equal(test_sentinel_start(&sen, &ls_srv, "dlockmaster", 1), 0);
    char url[256];
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d/dlockmaster", sen.port);
    dlock_client_options o;
    dlock_client_options_init(&o);
    test_server fake = ls_srv;
    snprintf(fake.url, sizeof(fake.url), "%s", url);
    dlock_client *c = ls_client_opts(&fake, &o);
    assert_non_null(c);
    dlock_lock *l = ls_lock(c, "sentinel1", DLOCK_LOCK_REENTRANT);
    assert_int_equal(dlock_lock_try_lock(l, 0, 0, NULL), 0);
    assert_true(ls_exists(&ls_srv, ls_key("sentinel1"))); /* on the master sentinel named */
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
    dlock_client_destroy(c);
    test_server_stop(&sen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_names_are_invalid_arguments),
        cmocka_unit_test(test_companion_keys_share_the_hash_slot),
        cmocka_unit_test(test_simple_lock_layout_and_double_acquire),
        cmocka_unit_test(test_reentrant_counts_and_redisson_layout),
        cmocka_unit_test(test_release_by_non_owner_is_refused),
        cmocka_unit_test(test_explicit_owner_shares_a_reentrant_hold),
        cmocka_unit_test(test_lease_expires_without_watchdog),
        cmocka_unit_test(test_watchdog_keeps_lock_past_three_timeouts),
        cmocka_unit_test(test_extend_switches_to_explicit_lease),
        cmocka_unit_test(test_cancel_from_another_thread),
        cmocka_unit_test(test_release_wakes_a_waiter_promptly),
        cmocka_unit_test(test_waiting_on_a_foreign_holder_does_not_busy_poll),
        cmocka_unit_test(test_fencing_token_is_issued_only_when_asked_for),
        cmocka_unit_test(test_fencing_tokens_increase_across_release_expiry_and_key_loss),
        cmocka_unit_test(test_fence_guard_rejects_stale_tokens),
        cmocka_unit_test(test_force_unlock_is_audited_and_wakes),
        cmocka_unit_test(test_script_flush_while_locks_are_held),
        cmocka_unit_test(test_metrics_use_the_alert_rule_names),
        cmocka_unit_test(test_hold_time_summary_reflects_holds),
        cmocka_unit_test(test_client_destroy_reports_held_locks),
        cmocka_unit_test(test_client_rejects_bad_options),
        cmocka_unit_test(test_outcome_unknown_is_resolved_or_reported),
        cmocka_unit_test(test_sentinel_url_follows_the_master),
    };
    return cmocka_run_group_tests(tests, ls_setup, ls_teardown);
}
