/* db_sql.c: SQLite / libpq execution for db.c, and the handle itself
 * (db_handle.h: its URL rules, kind, last error). A handle owns one
 * connection and a cache of prepared statements keyed by SQL text address;
 * every error leaves its text in db->err and returns SK_EDB. SQLite runs in
 * WAL mode with a busy timeout and synchronous=FULL (a commit survives a
 * crash of the process and of the machine). */
#include "db_sql.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "sk_err.h"
#include "util.h"

#define SK__MAX_STMTS 64
#define SK__MAX_ARGS 16

typedef struct sk__stmt {
    const char *sql;
    sqlite3_stmt *lite;
    char pgname[16];
} sk__stmt;

struct sk_db {
    sk__db_kind kind;
    sqlite3 *lite;
    PGconn *pg;
    sk__stmt stmts[SK__MAX_STMTS];
    int nstmts;
    int in_tx;
    char err[512];
};

sk__db_kind sk__db_kindof(const sk_db *db) { return db->kind; }

const char *sk_db_kind(const sk_db *db) { return db->kind == SK__DB_PG ? "postgresql" : "sqlite"; }

const char *sk_db_errmsg(const sk_db *db) { return db ? db->err : "no database"; }

int64_t sk__db_i64(const char *s)
{
    if (!s) return 0;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s) return 0;
    return (int64_t)v;
}

static void set_err(sk_db *db, const char *what, const char *msg)
{
    snprintf(db->err, sizeof(db->err), "%s: %s", what, msg ? msg : "?");
    size_t n = strlen(db->err);
    while (n && (db->err[n - 1] == '\n' || db->err[n - 1] == ' ')) db->err[--n] = '\0';
}

/* sqlite3_exec, again while SQLITE_BUSY for up to 10 s: switching a new
 * file to WAL needs an exclusive lock, and when two connections do it at
 * once (the event loops of one seckilld opening the same file) SQLite
 * answers BUSY at once, without the busy handler, to avoid a deadlock. */
static int exec_retrying_busy(sqlite3 *lite, const char *sql, char **msg_out)
{
    int64_t deadline = dlock__now_ms() + 10000;
    for (;;) {
        int rc = sqlite3_exec(lite, sql, NULL, NULL, msg_out);
        if (rc != SQLITE_BUSY || dlock__now_ms() >= deadline) return rc;
        sqlite3_free(*msg_out);
        *msg_out = NULL;
        dlock__sleep_ms(10 + (int64_t)(dlock__now_ms() % 20));
    }
}

static int open_sqlite(sk_db *db, const char *path, char *err, size_t errlen)
{
    int rc = sqlite3_open_v2(path, &db->lite,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "sqlite open %s: %s", path,
                 db->lite ? sqlite3_errmsg(db->lite) : sqlite3_errstr(rc));
        return SK_EDB;
    }
    sqlite3_busy_timeout(db->lite, 10000);
    static const char *const pragmas[] = {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                                          "PRAGMA foreign_keys=ON", NULL};
    for (int i = 0; pragmas[i]; i++) {
        char *msg = NULL;
        if (exec_retrying_busy(db->lite, pragmas[i], &msg) != SQLITE_OK) {
            snprintf(err, errlen, "sqlite %s: %s", pragmas[i], msg ? msg : "?");
            sqlite3_free(msg);
            return SK_EDB;
        }
    }
    return 0;
}

static int open_pg(sk_db *db, const char *url, char *err, size_t errlen)
{
    db->pg = PQconnectdb(url);
    if (!db->pg || PQstatus(db->pg) != CONNECTION_OK) {
        snprintf(err, errlen, "postgresql connect: %s", db->pg ? PQerrorMessage(db->pg) : "out of memory");
        size_t n = strlen(err);
        while (n && err[n - 1] == '\n') err[--n] = '\0';
        return SK_EDB;
    }
    /* A stuck server must not stall a worker forever: 30 s per statement
     * (a batch is one statement on PostgreSQL). */
    PGresult *r = PQexec(db->pg, "SET client_min_messages = warning; SET statement_timeout = '30s'");
    PQclear(r);
    return 0;
}

static bool is_pg_url(const char *url)
{
    return strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0;
}

/* Every port of a parsed PostgreSQL URL (a comma list) is 1..65535:
 * libpq's parser leaves that to the connection. */
static int pg_ports_ok(const PQconninfoOption *o)
{
    for (; o->keyword; o++) {
        if (strcmp(o->keyword, "port") != 0 || !o->val || !*o->val) continue;
        for (const char *p = o->val; *p;) {
            size_t n = strcspn(p, ",");
            long v = 0;
            bool digits = n > 0 && n <= 5;
            for (size_t i = 0; digits && i < n; i++) {
                digits = p[i] >= '0' && p[i] <= '9';
                v = v * 10 + (p[i] - '0');
            }
            if (!digits || v < 1 || v > 65535) return -1;
            p += n + (p[n] == ',');
        }
    }
    return 0;
}

/* Messages do not repeat the URL: it may hold a password. */
int sk_db_url_check(const char *url, char *err, size_t errlen)
{
    if (!url || !*url) return snprintf(err, errlen, "empty database url"), SK_EINVAL;
    if (is_pg_url(url)) {
        char *msg = NULL;
        PQconninfoOption *o = PQconninfoParse(url, &msg);
        int rc = o ? pg_ports_ok(o) : -1;
        if (!o) snprintf(err, errlen, "bad postgresql url: %s", msg ? msg : "out of memory");
        else if (rc) snprintf(err, errlen, "bad postgresql url: a port must be a number from 1 to 65535");
        for (size_t n = rc ? strlen(err) : 0; n && err[n - 1] == '\n';) err[--n] = '\0';
        if (o) PQconninfoFree(o);
        if (msg) PQfreemem(msg);
        return rc ? SK_EINVAL : 0;
    }
    if (strncmp(url, "sqlite://", 9) == 0) {
        /* sqlite://orders.db would silently open ./orders.db: the URL form
         * takes an absolute path; a relative file is given as a plain path */
        if (!url[9]) return snprintf(err, errlen, "sqlite url without a path"), SK_EINVAL;
        if (url[9] != '/')
            return snprintf(err, errlen, "sqlite url needs an absolute path, sqlite:///abs/path.db (a relative "
                                         "file is given as a plain path, without sqlite://)"), SK_EINVAL;
        return 0;
    }
    if (strstr(url, "://"))
        return snprintf(err, errlen, "unsupported database url scheme (want sqlite:// or postgresql://)"), SK_EINVAL;
    return 0;
}

int sk__db_connect(const char *url, sk_db **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = sk_db_url_check(url, err, errlen);
    if (rc) return rc;
    sk_db *db = calloc(1, sizeof(*db));
    if (!db) {
        snprintf(err, errlen, "out of memory");
        return SK_EDB;
    }
    db->kind = is_pg_url(url) ? SK__DB_PG : SK__DB_SQLITE;
    if (db->kind == SK__DB_PG) rc = open_pg(db, url, err, errlen);
    else rc = open_sqlite(db, strncmp(url, "sqlite://", 9) == 0 ? url + 9 : url, err, errlen);
    if (rc) {
        sk__db_disconnect(db);
        return rc;
    }
    *out = db;
    return 0;
}

void sk__db_disconnect(sk_db *db)
{
    if (!db) return;
    for (int i = 0; i < db->nstmts; i++)
        if (db->stmts[i].lite) sqlite3_finalize(db->stmts[i].lite);
    if (db->lite) sqlite3_close(db->lite);
    if (db->pg) PQfinish(db->pg);
    free(db);
}

/* $N -> ?N (SQLite numbered parameters). */
static char *to_sqlite_params(const char *sql)
{
    size_t n = strlen(sql);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    for (size_t i = 0; i <= n; i++) s[i] = (sql[i] == '$' && sql[i + 1] >= '0' && sql[i + 1] <= '9') ? '?' : sql[i];
    return s;
}

static sk__stmt *stmt_get(sk_db *db, const char *sql)
{
    for (int i = 0; i < db->nstmts; i++)
        if (db->stmts[i].sql == sql) return &db->stmts[i];
    if (db->nstmts == SK__MAX_STMTS) {
        set_err(db, "prepare", "statement cache full");
        return NULL;
    }
    sk__stmt *st = &db->stmts[db->nstmts];
    memset(st, 0, sizeof(*st));
    if (db->kind == SK__DB_SQLITE) {
        char *text = to_sqlite_params(sql);
        if (!text) {
            set_err(db, "prepare", "out of memory");
            return NULL;
        }
        int rc = sqlite3_prepare_v2(db->lite, text, -1, &st->lite, NULL);
        free(text);
        if (rc != SQLITE_OK) {
            set_err(db, "sqlite prepare", sqlite3_errmsg(db->lite));
            return NULL;
        }
    } else {
        snprintf(st->pgname, sizeof(st->pgname), "sk%d", db->nstmts);
        PGresult *r = PQprepare(db->pg, st->pgname, sql, 0, NULL);
        int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok) set_err(db, "postgresql prepare", PQerrorMessage(db->pg));
        PQclear(r);
        if (!ok) return NULL;
    }
    st->sql = sql;
    db->nstmts++;
    return st;
}

static int run_sqlite(sk_db *db, sk__stmt *st, int nargs, const sk__arg *args, int64_t *changes_out,
                      sk__row_cb cb, void *ud)
{
    sqlite3_stmt *s = st->lite;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    for (int i = 0; i < nargs; i++) {
        int rc = args[i].is_text ? sqlite3_bind_text(s, i + 1, args[i].s, -1, SQLITE_STATIC)
                                 : sqlite3_bind_int64(s, i + 1, args[i].i);
        if (rc != SQLITE_OK) {
            set_err(db, "sqlite bind", sqlite3_errmsg(db->lite));
            return SK_EDB;
        }
    }
    int rc;
    const char *vals[32];
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int nc = sqlite3_column_count(s);
        if (nc > 32) nc = 32;
        for (int c = 0; c < nc; c++) vals[c] = (const char *)sqlite3_column_text(s, c);
        if (cb) cb(nc, vals, ud);
    }
    if (rc != SQLITE_DONE) {
        set_err(db, "sqlite", sqlite3_errmsg(db->lite));
        sqlite3_reset(s);
        return SK_EDB;
    }
    if (changes_out) *changes_out = sqlite3_changes(db->lite);
    sqlite3_reset(s);
    return 0;
}

static int run_pg(sk_db *db, sk__stmt *st, int nargs, const sk__arg *args, int64_t *changes_out,
                  sk__row_cb cb, void *ud)
{
    char nums[SK__MAX_ARGS][24];
    const char *vals[SK__MAX_ARGS];
    for (int i = 0; i < nargs; i++) {
        if (args[i].is_text) {
            vals[i] = args[i].s;
        } else {
            snprintf(nums[i], sizeof(nums[i]), "%" PRId64, args[i].i);
            vals[i] = nums[i];
        }
    }
    PGresult *r = PQexecPrepared(db->pg, st->pgname, nargs, vals, NULL, NULL, 0);
    ExecStatusType t = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) {
        const char *primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
        set_err(db, "postgresql", primary ? primary : r ? PQresultErrorMessage(r) : PQerrorMessage(db->pg));
        PQclear(r);
        return SK_EDB;
    }
    if (cb && t == PGRES_TUPLES_OK) {
        int nc = PQnfields(r);
        if (nc > 32) nc = 32;
        const char *row[32];
        for (int i = 0; i < PQntuples(r); i++) {
            for (int c = 0; c < nc; c++) row[c] = PQgetisnull(r, i, c) ? NULL : PQgetvalue(r, i, c);
            cb(nc, row, ud);
        }
    }
    if (changes_out) *changes_out = sk__db_i64(PQcmdTuples(r));
    PQclear(r);
    return 0;
}

/* A PostgreSQL connection that broke (server restart) is reopened, but
 * only between transactions: inside one, the failure must reach COMMIT. */
static void pg_revive(sk_db *db)
{
    if (db->kind != SK__DB_PG || db->in_tx || PQstatus(db->pg) != CONNECTION_BAD) return;
    PQreset(db->pg);
    db->nstmts = 0; /* server-side prepared statements are gone */
}

int sk__db_run(sk_db *db, const char *sql, int nargs, const sk__arg *args, int64_t *changes_out,
               sk__row_cb cb, void *ud)
{
    if (nargs > SK__MAX_ARGS) {
        set_err(db, "run", "too many arguments");
        return SK_EDB;
    }
    for (int attempt = 0;; attempt++) {
        pg_revive(db);
        sk__stmt *st = stmt_get(db, sql);
        int rc = !st ? SK_EDB
                 : db->kind == SK__DB_SQLITE ? run_sqlite(db, st, nargs, args, changes_out, cb, ud)
                                             : run_pg(db, st, nargs, args, changes_out, cb, ud);
        /* A connection found dead (server restarted while we were idle) is
         * reopened and the statement sent once more, outside transactions
         * only. Every statement run outside a transaction here is
         * idempotent (status transitions, orders keyed by order_id). */
        if (rc == 0 || attempt > 0 || db->kind != SK__DB_PG || db->in_tx || PQstatus(db->pg) != CONNECTION_BAD)
            return rc;
    }
}

int sk__db_script(sk_db *db, const char *sql)
{
    if (db->kind == SK__DB_SQLITE) {
        char *msg = NULL;
        if (sqlite3_exec(db->lite, sql, NULL, NULL, &msg) != SQLITE_OK) {
            set_err(db, "sqlite", msg);
            sqlite3_free(msg);
            return SK_EDB;
        }
        return 0;
    }
    PGresult *r = PQexec(db->pg, sql);
    ExecStatusType t = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    int ok = t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK;
    if (!ok) set_err(db, "postgresql", r ? PQresultErrorMessage(r) : PQerrorMessage(db->pg));
    PQclear(r);
    return ok ? 0 : SK_EDB;
}

int sk__db_begin(sk_db *db)
{
    pg_revive(db);
    int rc = sk__db_script(db, db->kind == SK__DB_SQLITE ? "BEGIN IMMEDIATE" : "BEGIN");
    if (rc && db->kind == SK__DB_PG && PQstatus(db->pg) == CONNECTION_BAD) { /* found dead: once more */
        pg_revive(db);
        rc = sk__db_script(db, "BEGIN");
    }
    db->in_tx = rc == 0;
    return rc;
}

int sk__db_commit(sk_db *db)
{
    int rc = sk__db_script(db, "COMMIT");
    if (rc) sk__db_rollback(db);
    db->in_tx = 0;
    return rc;
}

void sk__db_rollback(sk_db *db)
{
    char keep[sizeof(db->err)];
    memcpy(keep, db->err, sizeof(keep));
    if (db->kind == SK__DB_SQLITE) {
        if (!sqlite3_get_autocommit(db->lite)) sqlite3_exec(db->lite, "ROLLBACK", NULL, NULL, NULL);
    } else {
        PGresult *r = PQexec(db->pg, "ROLLBACK");
        PQclear(r);
    }
    memcpy(db->err, keep, sizeof(keep));
    db->in_tx = 0;
}
