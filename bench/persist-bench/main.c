/* persist-bench: measures how many orders per second the order pipeline
 * writes into the database. Mode "db": sk_db_apply_batch alone (the guard
 * and one transaction per batch). Mode "pipeline": the stream is filled
 * first, then --workers sk_persist_run threads drain it (XREADGROUP,
 * transaction, XACK). Each run uses a fresh campaign and is followed by
 * its limit: the same rows in the same batches as plain INSERTs into a
 * primary-key-only table; prints every run, the medians and the ratio.
 * Needs a Redis (pipeline mode) and a database you started yourself. */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "db_sql.h"
#include "layout.h"
#include "options.h"
#include "persist.h"
#include "redis_connect.h"
#include "sk_err.h"
#include "util.h"

typedef struct bench {
    const char *redis_url, *db_url, *mode;
    int orders, batch, runs, workers;
    bool help;
} bench;

typedef struct worker_arg {
    sk_persist_opts o;
    sk_persist_stats st;
    int rc;
} worker_arg;

static void *worker_main(void *p)
{
    worker_arg *a = p;
    char err[256];
    a->rc = sk_persist_run(&a->o, &a->st, err, sizeof(err));
    if (a->rc) fprintf(stderr, "persist-bench: %s\n", err);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int make_campaign(sk_db *db, char *id, size_t len, int run, int64_t stock)
{
    snprintf(id, len, "bench-%ld-%d-%" PRId64, (long)getpid(), run, dlock__wall_ms() % 100000);
    sk_campaign c = {0};
    snprintf(c.id, sizeof(c.id), "%s", id);
    snprintf(c.title, sizeof(c.title), "bench");
    c.stock = stock;
    c.per_user_limit = 1;
    return sk_db_campaign_create(db, &c);
}

/* The limit of the same run: the same rows, same batches, into a table
 * with only a primary key, by the fastest plain insert of each engine (no
 * guard, no other table): prepared per-row INSERTs in one transaction on
 * SQLite, one INSERT ... SELECT FROM unnest(arrays) per batch on PostgreSQL. */
static const char SQL_PLAIN[] = "INSERT INTO persist_bench_plain (order_id, campaign, user_id, qty, created_ms)"
                                " VALUES ($1, $2, $3, $4, $5)";
static const char SQL_PLAIN_PG[] =
    "INSERT INTO persist_bench_plain (order_id, campaign, user_id, qty, created_ms)"
    " SELECT id, 'plain', u, 1, $3 FROM unnest($1::bigint[], $2::text[]) AS t(id, u)";

static int plain_pg_batch(sk_db *db, uint64_t base, int done, int n)
{
    dlock__buf ids = {0}, users = {0};
    for (int i = 0; i < n; i++) {
        dlock__buf_printf(&ids, "%s%" PRIu64, i ? "," : "{", base + (uint64_t)(done + i));
        dlock__buf_printf(&users, "%su%d", i ? "," : "{", done + i);
    }
    dlock__buf_append(&ids, "}", 1);
    dlock__buf_append(&users, "}", 1);
    sk__arg a[3] = {SK_T(ids.data), SK_T(users.data), SK_I(dlock__wall_ms())};
    int rc = ids.oom || users.oom ? -1 : sk__db_run(db, SQL_PLAIN_PG, 3, a, NULL, NULL, NULL);
    dlock__buf_free(&ids);
    dlock__buf_free(&users);
    return rc;
}

static double run_plain(const bench *b, sk_db *db, int run)
{
    if (sk__db_script(db, "CREATE TABLE IF NOT EXISTS persist_bench_plain (order_id BIGINT PRIMARY KEY,"
                          " campaign TEXT NOT NULL, user_id TEXT NOT NULL, qty BIGINT NOT NULL,"
                          " created_ms BIGINT NOT NULL)"))
        return -1;
    uint64_t base = (uint64_t)dlock__wall_ms() * 1000 + (uint64_t)run * 10000000 + 5000000;
    char user[24];
    int64_t t0 = dlock__now_us();
    for (int done = 0; done < b->orders;) {
        int n = b->orders - done < b->batch ? b->orders - done : b->batch;
        if (sk__db_kindof(db) == SK__DB_PG) {
            if (plain_pg_batch(db, base, done, n)) return -1;
            done += n;
            continue;
        }
        if (sk__db_begin(db)) return -1;
        for (int i = 0; i < n; i++) {
            snprintf(user, sizeof(user), "u%d", done + i);
            sk__arg a[5] = {SK_I(base + (uint64_t)(done + i)), SK_T("plain"), SK_T(user), SK_I(1),
                            SK_I(dlock__wall_ms())};
            if (sk__db_run(db, SQL_PLAIN, 5, a, NULL, NULL, NULL)) {
                sk__db_rollback(db);
                return -1;
            }
        }
        if (sk__db_commit(db)) return -1;
        done += n;
    }
    return b->orders / ((double)(dlock__now_us() - t0) / 1e6);
}

static double run_db(const bench *b, sk_db *db, int run)
{
    char id[65];
    if (make_campaign(db, id, sizeof(id), run, b->orders)) return -1;
    sk_order_in *in = calloc((size_t)b->batch, sizeof(*in));
    char(*users)[24] = calloc((size_t)b->batch, sizeof(*users));
    if (!in || !users) return -1;
    uint64_t base = (uint64_t)dlock__wall_ms() * 1000 + (uint64_t)run * 10000000;
    int64_t t0 = dlock__now_us();
    for (int done = 0; done < b->orders;) {
        int n = b->orders - done < b->batch ? b->orders - done : b->batch;
        for (int i = 0; i < n; i++) {
            snprintf(users[i], sizeof(users[i]), "u%d", done + i);
            in[i] = (sk_order_in){base + (uint64_t)(done + i), id, users[i], 1, "redis", dlock__wall_ms(), NULL, 1};
        }
        if (sk_db_apply_batch(db, in, (size_t)n, NULL)) {
            fprintf(stderr, "persist-bench: %s\n", sk_db_errmsg(db));
            return -1;
        }
        done += n;
    }
    double secs = (double)(dlock__now_us() - t0) / 1e6;
    free(in);
    free(users);
    return b->orders / secs;
}

static int fill_stream(dlock__conn *rc, const char *id, int orders, int run)
{
    char key[96];
    sk_campaign_key(id, "orders", key, sizeof(key));
    enum { CHUNK = 1000 };
    static char oid[CHUNK][24], user[CHUNK][24];
    const char *argvs_buf[CHUNK][17];
    const char *const *argvs[CHUNK];
    int argcs[CHUNK];
    dlock__reply *rs[CHUNK];
    uint64_t base = (uint64_t)dlock__wall_ms() * 1000 + (uint64_t)run * 10000000;
    for (int done = 0; done < orders;) {
        int n = orders - done < CHUNK ? orders - done : CHUNK;
        for (int i = 0; i < n; i++) {
            snprintf(oid[i], sizeof(oid[i]), "%" PRIu64, base + (uint64_t)(done + i));
            snprintf(user[i], sizeof(user[i]), "u%d", done + i);
            const char *a[17] = {"XADD", key, "*", "order_id", oid[i], "campaign", id, "user", user[i], "qty", "1",
                                 "idem", "", "ts_ms", "1764460800000", "path", "redis"};
            memcpy(argvs_buf[i], a, sizeof(a));
            argvs[i] = argvs_buf[i];
            argcs[i] = 17;
        }
        if (dlock__conn_pipeline(rc, (size_t)n, argcs, argvs, NULL, rs)) return -1;
        for (int i = 0; i < n; i++) dlock__reply_free(rs[i]);
        done += n;
    }
    return 0;
}

static double run_pipeline(const bench *b, sk_db *db, dlock__conn *rc, int run)
{
    char id[65], err[256];
    if (make_campaign(db, id, sizeof(id), run, b->orders)) return -1;
    if (fill_stream(rc, id, b->orders, run)) return -1;
    (void)err;
    worker_arg wa[16];
    pthread_t th[16];
    for (int i = 0; i < b->workers; i++) {
        sk_persist_opts *o = &wa[i].o;
        sk_persist_opts_init(o);
        o->redis_url = b->redis_url;
        o->database_url = b->db_url;
        o->campaign = id;
        o->batch = b->batch;
        o->block_ms = 10;
        o->pay_timeout_ms = 0;
        o->drain = true;
    }
    int64_t t0 = dlock__now_us();
    for (int i = 0; i < b->workers; i++) pthread_create(&th[i], NULL, worker_main, &wa[i]);
    int64_t persisted = 0;
    int failed = 0;
    for (int i = 0; i < b->workers; i++) {
        pthread_join(th[i], NULL);
        persisted += wa[i].st.persisted;
        failed |= wa[i].rc;
    }
    double secs = (double)(dlock__now_us() - t0) / 1e6;
    if (failed) return -1;
    if (persisted != b->orders) fprintf(stderr, "persist-bench: persisted %" PRId64 " of %d\n", persisted, b->orders);
    return b->orders / secs;
}

static const opt_spec specs[] = {
    {.name = "database-url", .type = OPT_STR, .off = offsetof(bench, db_url), .arg = "URL", .env = "DATABASE_URL",
     .help = "the database (env DATABASE_URL; required)"},
    {.name = "redis-url", .type = OPT_STR, .off = offsetof(bench, redis_url), .arg = "URL", .env = "REDIS_URL",
     .help = "Redis, for --mode pipeline (env REDIS_URL)"},
    {.name = "mode", .type = OPT_STR, .off = offsetof(bench, mode), .arg = "db|pipeline", .def = "db",
     .help = "db: the database alone (default); pipeline: stream -> workers -> database"},
    {.name = "orders", .type = OPT_INT, .off = offsetof(bench, orders), .lo = 1, .hi = 100000000, .arg = "N",
     .def = "100000", .help = "orders per run (default 100000)"},
    {.name = "batch", .type = OPT_INT, .off = offsetof(bench, batch), .lo = 1, .hi = 10000, .arg = "N",
     .def = "500", .help = "orders per transaction (default 500)"},
    {.name = "runs", .type = OPT_INT, .off = offsetof(bench, runs), .lo = 1, .hi = 99, .arg = "N", .def = "5",
     .help = "runs; the medians are reported (default 5)"},
    {.name = "workers", .type = OPT_INT, .off = offsetof(bench, workers), .lo = 1, .hi = 16, .arg = "N",
     .def = "1", .help = "pipeline mode: persistence workers (default 1)"},
    {.name = "help", .short_name = 'h', .type = OPT_FLAG, .off = offsetof(bench, help), .help = "show this help"},
};

/* 0, 1 (--help printed) or 2 (usage error printed). */
static int parse(bench *b, int argc, char **argv)
{
    char err[256];
    if (opt_load(specs, OPT_COUNT(specs), argc, argv, b, NULL, err, sizeof(err))) {
        fprintf(stderr, "persist-bench: %s (see --help)\n", err);
        return 2;
    }
    if (b->help) {
        fputs("usage: persist-bench --database-url URL [options]\n", stdout);
        opt_print_help(stdout, specs, OPT_COUNT(specs));
        return 1;
    }
    bool pipe = strcmp(b->mode, "pipeline") == 0;
    if (!b->db_url || (pipe && !b->redis_url) || (!pipe && strcmp(b->mode, "db") != 0)) {
        fprintf(stderr, "persist-bench: bad arguments (need --database-url, and --redis-url for pipeline)\n");
        return 2;
    }
    return 0;
}

static void report(const bench *b, sk_db *db, double *r, double *lim, double *ratio)
{
    qsort(lim, (size_t)b->runs, sizeof(double), cmp_d);
    qsort(ratio, (size_t)b->runs, sizeof(double), cmp_d);
    qsort(r, (size_t)b->runs, sizeof(double), cmp_d);
    printf("%s %s: %d orders, batch %d, %d worker(s), %d runs: median %.0f orders/s (min %.0f, max %.0f);"
           " plain-insert limit median %.0f rows/s; ratio median %.2f\n",
           b->mode, sk_db_kind(db), b->orders, b->batch, strcmp(b->mode, "pipeline") == 0 ? b->workers : 1,
           b->runs, r[b->runs / 2], r[0], r[b->runs - 1], lim[b->runs / 2], ratio[b->runs / 2]);
}

int main(int argc, char **argv)
{
    bench b = {0};
    int prc = parse(&b, argc, argv);
    if (prc) return prc == 1 ? 0 : prc;
    bool pipe = strcmp(b.mode, "pipeline") == 0;
    char err[512];
    sk_db *db = NULL;
    dlock__conn *rc = NULL;
    if (sk_db_open(b.db_url, &db, err, sizeof(err)) ||
        (pipe && dlock__conn_open_url(b.redis_url, 10000, &rc, err, sizeof(err)))) {
        fprintf(stderr, "persist-bench: %s\n", err);
        return 1;
    }
    double r[99], lim[99], ratio[99];
    for (int i = 0; i < b.runs; i++) {
        r[i] = pipe ? run_pipeline(&b, db, rc, i) : run_db(&b, db, i);
        lim[i] = run_plain(&b, db, i);
        if (r[i] < 0 || lim[i] < 0) {
            fprintf(stderr, "persist-bench: run failed: %s\n", sk_db_errmsg(db));
            return 1;
        }
        ratio[i] = r[i] / lim[i];
        printf("run %d: %.0f orders/s (plain-insert limit %.0f rows/s, ratio %.2f)\n", i + 1, r[i], lim[i], ratio[i]);
    }
    report(&b, db, r, lim, ratio);
    sk_db_close(db);
    dlock__conn_close(rc);
    return 0;
}
