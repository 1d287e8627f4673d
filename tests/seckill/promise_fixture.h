/* promise_fixture.h: the fixture of the promise tests (test_promise.c,
 * test_barrier.c): a private redis-server, a database (a SQLite file, or a
 * private PostgreSQL with SK_TEST_PG=1), and helpers that decide like the
 * engine's purchase.lua (stock, limit, buyer, order status, Idempotency-Key
 * answer, XADD with the campaign's epoch) and drive the pipeline. */
#ifndef SK_PROMISE_FIXTURE_H
#define SK_PROMISE_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "buckets.h"
#include "db.h"
#include "redis_io.h"
#include "servers.h"

#ifndef SK_TEST_PG
#define SK_TEST_PG 0
#endif

extern test_server pf_redis_srv;
extern char pf_redis_url[128], pf_db_url[600];
extern dlock__conn *pf_rc;
extern sk_db *pf_db;

int pf_setup(void **state);
int pf_teardown(void **state);
uint64_t pf_next_id(void);
/* Campaign in the database (db_reserve = reserve) and pre-heated in Redis
 * with stock - reserve, as campaign_heat.lua does (meta epoch 1). */
void pf_seed(const char *camp, int64_t stock, int64_t limit, int64_t reserve);
/* A Redis-path order with a fresh id (epoch 0: no field). */
sk_order_in pf_order(const char *camp, const char *user, int64_t qty);
/* One accepted Redis-path purchase on conn (NULL: pf_rc); idem may be
 * NULL. Fails the test when refused. Returns the order id. */
uint64_t pf_redis_buy_on(dlock__conn *conn, const char *camp, const char *user, int64_t qty, const char *idem);
uint64_t pf_redis_buy(const char *camp, const char *user, int64_t qty);
/* The same in the bucket with hash tag tag (a sharded campaign). */
uint64_t pf_tag_buy_on(dlock__conn *conn, const char *tag, const char *camp, const char *user, int64_t qty,
                       const char *idem);
/* An order entry XADDed to {tag}:orders with that epoch, deciding nothing
 * (an old master's entry, or one Redis sold beyond the database). */
uint64_t pf_tag_xadd_on(dlock__conn *conn, const char *tag, const char *camp, const char *user, int64_t qty,
                        int64_t epoch);
/* A campaign of lay->k buckets heated by hand as the engine heats one
 * (docs/seckill.md): each bucket's meta has the definition, shards,
 * bucket, its node's runid and epoch 1 (bucket 0's also bucket_tags);
 * bucket j's stock is bucket_stock[j]. in_db: created in the database
 * too (shards, bucket_tags). */
void pf_seed_sharded_on(dlock__conn *conn, const char *camp, int64_t stock, int64_t limit, int64_t reserve,
                        const sk_buckets *lay, const int64_t *bucket_stock, bool in_db);
/* The run id of the node serving key's slot. */
void pf_run_id_on(dlock__conn *conn, const char *key, char out[41]);
/* A persister in drain mode on camp (returns when drained). */
void pf_drain(const char *camp);
/* The lifecycle sweep (mirrors, releases) on camp. */
void pf_sweep(const char *camp);
/* An integer read on pf_rc: cmd {c:<camp>}:<suffix> [field]. */
int64_t pf_redis_int(const char *cmd, const char *camp, const char *suffix, const char *field);
int64_t pf_redis_int_on(dlock__conn *conn, const char *cmd, const char *camp, const char *suffix,
                        const char *field);
/* Reconciliation differences of camp (printed when any). */
int pf_reconcile(const char *camp);
/* Writes a SQLite database at schema version 5 holding campaign "old"
 * (stock 5) and one persisted order; url_out gets its URL. Returns the
 * order id. */
uint64_t pf_make_schema5_sqlite(char *url_out, size_t len);

#endif
