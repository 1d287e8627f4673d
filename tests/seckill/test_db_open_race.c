/* test_db_open_race.c: several connections opening one new SQLite file at
 * the same instant (the event loops of one seckilld, --threads N) all
 * succeed. Switching a new file to WAL needs an exclusive lock, and SQLite
 * answers two connections that race for it with an immediate "database is
 * locked" (no busy handler: it would deadlock); sk_db_open retries. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "db.h"

enum { OPENERS = 4, ROUNDS = 60 };

typedef struct opener {
    pthread_barrier_t *start;
    const char *url;
    int rc;
    char err[256];
} opener;

static void *open_once(void *arg)
{
    opener *o = arg;
    sk_db *db = NULL;
    pthread_barrier_wait(o->start);
    o->rc = sk_db_open(o->url, &db, o->err, sizeof(o->err));
    sk_db_close(db);
    return NULL;
}

static void test_connections_opening_a_new_file_at_once_all_succeed(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/dlock-dbrace-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(dir));
    for (int r = 0; r < ROUNDS; r++) {
        char path[320], url[340];
        snprintf(path, sizeof(path), "%s/o%d.db", dir, r);
        snprintf(url, sizeof(url), "sqlite://%s", path);
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, OPENERS);
        opener o[OPENERS];
        pthread_t t[OPENERS];
        for (int i = 0; i < OPENERS; i++) {
            o[i] = (opener){.start = &start, .url = url};
            assert_int_equal(pthread_create(&t[i], NULL, open_once, &o[i]), 0);
        }
        for (int i = 0; i < OPENERS; i++) pthread_join(t[i], NULL);
        pthread_barrier_destroy(&start);
        for (int i = 0; i < OPENERS; i++)
            if (o[i].rc != 0) fail_msg("round %d, opener %d: %s", r, i, o[i].err);
        const char *suffix[] = {"", "-wal", "-shm"};
        for (int k = 0; k < 3; k++) {
            char f[340];
            snprintf(f, sizeof(f), "%s%s", path, suffix[k]);
            unlink(f);
        }
    }
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connections_opening_a_new_file_at_once_all_succeed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
