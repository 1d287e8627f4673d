/* test_peers_redisson.c: dlock's reentrant lock against Redisson's protocol
 * itself: the scripts in tests/peers/redisson/ (Redisson RLock's acquire,
 * release and watchdog renewal, written to the KEYS/ARGV layout published in
 * RedissonLock.java) run by `redis-cli --eval` on the keys dlock uses, on a
 * private redis-server. Holders of either side exclude the other, a hold
 * count is one hash field for both, the wrong owner's unlock is refused both
 * ways, and both publish and listen on redisson_lock__channel:{name}.
 * `test_peers_redisson tagged` runs the case of a name holding a hash tag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlock/dlock.h"
#include "dlock/lock.h"
#include "servers.h"

static test_server srv;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&srv, NULL) != 0) return -1;
    dlock_client_options o;
    dlock_client_options_init(&o);
    o.url = srv.url;
    o.key_prefix = test_prefix();
    int rc = dlock_client_create(&o, &cl);
    if (rc) fprintf(stderr, "dlock_client_create: %s\n", dlock_strerror(rc));
    return rc ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_destroy(cl);
    test_server_stop(&srv);
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Runs a shell command; its whole stdout, less the last newline, goes to a
 * static buffer (valid until the next call). */
static const char *run(const char *fmt, ...)
{
    static char out[4096];
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    assert_int_equal(pclose(f), 0);
    if (n > 0 && out[n - 1] == '\n') out[n - 1] = '\0';
    return out;
}

/* Redisson's channel for a lock name (RedissonObject.prefixName: a name
 * that already holds '{' is not wrapped again). */
static const char *channel_of(const char *key)
{
    static char ch[512];
    snprintf(ch, sizeof(ch), strchr(key, '{') ? "redisson_lock__channel:%s" : "redisson_lock__channel:{%s}",
             key);
    return ch;
}

/* Redisson's script SCRIPT (try_lock, unlock, renew) on key: unlock also
 * passes the channel as KEYS[2]. "" is a nil reply. */
static const char *redisson(const char *script, const char *key, const char *args)
{
    const char *src = getenv("DLOCK_SOURCE_DIR");
    bool unlock = strcmp(script, "unlock") == 0;
    const char *r = run("redis-cli -p %d --eval '%s/tests/peers/redisson/%s.lua' '%s' %s%s%s , %s", srv.port,
                        src ? src : ".", script, key, unlock ? "'" : "", unlock ? channel_of(key) : "",
                        unlock ? "'" : "", args);
    assert_null(strstr(r, "ERR"));
    return r;
}

static const char *hget(const char *key, const char *field)
{
    return run("redis-cli -p %d hget '%s' '%s'", srv.port, key, field);
}

static bool exists(const char *key)
{
    return strcmp(run("redis-cli -p %d exists '%s'", srv.port, key), "1") == 0;
}

static dlock_lock *reentrant(const char *name, const char *owner)
{
    dlock_lock_options o;
    dlock_lock_options_init(&o);
    o.kind = DLOCK_LOCK_REENTRANT;
    o.owner_id = owner;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(cl, name, &o, &l), 0);
    return l;
}

/* A subscriber (redis-cli SUBSCRIBE, for at most 3 s) on channel. */
typedef struct subscriber {
    pid_t pid;
    FILE *out;
} subscriber;

static void next_line(subscriber *s, char *buf, size_t len)
{
    buf[0] = '\0';
    if (fgets(buf, (int)len, s->out)) buf[strcspn(buf, "\n")] = '\0';
}

static void subscribe(subscriber *s, const char *channel)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    char port[16];
    snprintf(port, sizeof(port), "%d", srv.port);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execlp("timeout", "timeout", "3", "redis-cli", "-p", port, "subscribe", channel, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    s->out = fdopen(fds[0], "r");
    assert_non_null(s->out);
    char line[512];
    next_line(s, line, sizeof(line)); /* "subscribe", channel, count: now listening */
    assert_string_equal(line, "subscribe");
    next_line(s, line, sizeof(line));
    next_line(s, line, sizeof(line));
}

/* The payload of the next message, or "" if none came before the timeout. */
static void next_message(subscriber *s, char *payload, size_t len)
{
    char line[512];
    do {
        next_line(s, line, sizeof(line));
    } while (line[0] && strcmp(line, "message") != 0);
    payload[0] = '\0';
    if (!line[0]) return;
    next_line(s, line, sizeof(line)); /* channel */
    next_line(s, payload, len);
}

static void unsubscribe(subscriber *s)
{
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    fclose(s->out);
}

static void test_redisson_holder_excludes_dlock_until_released(void **state)
{
    (void)state;
    dlock_lock *l = reentrant("rs1", NULL);
    const char *key = dlock_lock_key(l);
    assert_string_equal(redisson("try_lock", key, "30000 redisson-a:1"), ""); /* nil: acquired */
    assert_string_equal(hget(key, "redisson-a:1"), "1");
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, NULL), DLOCK_EBUSY);
    assert_string_equal(redisson("unlock", key, "0 30000 redisson-a:1"), "1");
    assert_false(exists(key));
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, NULL), 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
}

static void test_dlock_holder_excludes_redisson_in_its_field_format(void **state)
{
    (void)state;
    dlock_lock *l = reentrant("rs2", NULL);
    const char *key = dlock_lock_key(l);
    assert_int_equal(dlock_lock_try_lock(l, 0, 10000, NULL), 0);
    /* the field is "<client id>:<thread id>", as Redisson's getLockName() */
    const char *owner = dlock_lock_owner(l);
    const char *id = dlock_client_id(cl);
    assert_memory_equal(owner, id, strlen(id));
    assert_int_equal(owner[strlen(id)], ':');
    assert_true(strspn(owner + strlen(id) + 1, "0123456789") == strlen(owner + strlen(id) + 1));
    assert_string_equal(hget(key, owner), "1");
    assert_string_equal(run("redis-cli -p %d hlen '%s'", srv.port, key), "1");
    long pttl = strtol(redisson("try_lock", key, "30000 redisson-b:1"), NULL, 10); /* refused: dlock's pttl */
    assert_true(pttl > 0 && pttl <= 10000);
    assert_string_equal(run("redis-cli -p %d hlen '%s'", srv.port, key), "1");
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_false(exists(key));
    assert_string_equal(redisson("try_lock", key, "30000 redisson-b:1"), "");
    assert_string_equal(redisson("unlock", key, "0 30000 redisson-b:1"), "1");
    dlock_lock_free(l);
}

static void test_hold_counts_are_one_field_for_both(void **state)
{
    (void)state;
    dlock_lock *l = reentrant("rs3", NULL);
    const char *key = dlock_lock_key(l);
    assert_int_equal(dlock_lock_try_lock(l, 0, 10000, NULL), 0);
    assert_int_equal(dlock_lock_try_lock(l, 0, 10000, NULL), 0); /* re-entry */
    char owner[DLOCK_OWNER_MAX + 1];
    snprintf(owner, sizeof(owner), "%s", dlock_lock_owner(l));
    assert_string_equal(hget(key, owner), "2");
    char args[512];
    snprintf(args, sizeof(args), "10000 '%s'", owner); /* Redisson's script: the same holder re-enters */
    assert_string_equal(redisson("try_lock", key, args), "");
    assert_string_equal(hget(key, owner), "3");
    snprintf(args, sizeof(args), "0 10000 '%s'", owner);
    assert_string_equal(redisson("unlock", key, args), "0"); /* one hold less, still held */
    assert_string_equal(hget(key, owner), "2");
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_string_equal(hget(key, owner), "1");
    assert_int_equal(dlock_lock_unlock(l), 0);
    assert_false(exists(key));

    /* Redisson re-enters twice: dlock waits for both releases */
    assert_string_equal(redisson("try_lock", key, "10000 redisson-c:1"), "");
    assert_string_equal(redisson("try_lock", key, "10000 redisson-c:1"), "");
    assert_string_equal(hget(key, "redisson-c:1"), "2");
    assert_string_equal(redisson("unlock", key, "0 10000 redisson-c:1"), "0");
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, NULL), DLOCK_EBUSY);
    assert_string_equal(redisson("unlock", key, "0 10000 redisson-c:1"), "1");
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, NULL), 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
}

static void test_unlock_by_another_owner_is_refused_both_ways(void **state)
{
    (void)state;
    dlock_lock *l = reentrant("rs4", NULL);
    const char *key = dlock_lock_key(l);
    assert_string_equal(redisson("try_lock", key, "30000 redisson-d:1"), "");
    dlock_lock *other = reentrant("rs4", "redisson-d:2"); /* not the holder */
    assert_int_equal(dlock_lock_unlock(other), DLOCK_ENOTOWNER);
    assert_string_equal(hget(key, "redisson-d:1"), "1");
    assert_string_equal(redisson("unlock", key, "0 30000 redisson-d:1"), "1");

    assert_int_equal(dlock_lock_try_lock(l, 0, 10000, NULL), 0);
    assert_string_equal(redisson("unlock", key, "0 30000 redisson-d:1"), ""); /* nil: not its lock */
    assert_string_equal(hget(key, dlock_lock_owner(l)), "1");
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(other);
    dlock_lock_free(l);
}

static void test_redisson_renewal_extends_only_its_owners_hold(void **state)
{
    (void)state;
    dlock_lock *l = reentrant("rs5", NULL);
    const char *key = dlock_lock_key(l);
    assert_int_equal(dlock_lock_try_lock(l, 0, 2000, NULL), 0);
    char args[512];
    snprintf(args, sizeof(args), "60000 '%s'", dlock_lock_owner(l));
    assert_string_equal(redisson("renew", key, args), "1");
    assert_true(strtol(run("redis-cli -p %d pttl '%s'", srv.port, key), NULL, 10) > 2000);
    assert_string_equal(redisson("renew", key, "60000 redisson-e:1"), "0");
    assert_int_equal(dlock_lock_unlock(l), 0);
    dlock_lock_free(l);
}

typedef struct waiter {
    dlock_lock *l;
    int rc, unlock_rc;
    int64_t acquired_ms;
} waiter;

/* Waits for the lock, then gives it back (the owner field names this thread). */
static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_try_lock(w->l, 10000, 5000, NULL);
    w->acquired_ms = now_ms();
    w->unlock_rc = w->rc == 0 ? dlock_lock_unlock(w->l) : 0;
    return NULL;
}

static void test_both_publish_and_listen_on_redissons_channel(void **state)
{
    (void)state;
    dlock_lock *l = reentrant("rs6", NULL);
    const char *key = dlock_lock_key(l);
    char ch[512], msg[64];
    snprintf(ch, sizeof(ch), "%s", channel_of(key));

    /* dlock's last unlock publishes Redisson's unlock message where Redisson listens */
    subscriber s;
    subscribe(&s, ch);
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, NULL), 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    next_message(&s, msg, sizeof(msg));
    unsubscribe(&s);
    assert_string_equal(msg, "0");

    /* a waiting dlock listens where Redisson's unlock publishes */
    assert_string_equal(redisson("try_lock", key, "30000 redisson-f:1"), "");
    waiter w = {l, -1, -1, 0};
    pthread_t t;
    int64_t started = now_ms();
    assert_int_equal(pthread_create(&t, NULL, wait_for_lock, &w), 0);
    int i;
    for (i = 0; i < 250; i++) {
        if (strcmp(run("redis-cli -p %d pubsub numsub '%s' | tail -n 1", srv.port, ch), "1") == 0) break;
        usleep(20000);
    }
    assert_true(i < 250); /* dlock subscribed to redisson_lock__channel:{name} */
    /* Unlock 4 s into the wait: dlock's rechecks (50 ms doubling) then come
     * at 3.15 s and 6.35 s, so getting the lock within 1 s is the publish. */
    sleep_ms(4000 - (now_ms() - started));
    int64_t t0 = now_ms();
    assert_string_equal(redisson("unlock", key, "0 30000 redisson-f:1"), "1");
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    assert_true(w.acquired_ms - t0 < 1000);
    assert_int_equal(w.unlock_rc, 0);
    dlock_lock_free(l);
}

/* A name with a hash tag, as Cluster users write them: Redisson does not
 * wrap it again, so its channel is "redisson_lock__channel:<name>". */
static void test_tagged_name_unlock_is_published_on_redissons_channel(void **state)
{
    (void)state;
    dlock_lock *l = reentrant("{order}:42", NULL);
    subscriber s;
    subscribe(&s, channel_of(dlock_lock_key(l)));
    assert_int_equal(dlock_lock_try_lock(l, 0, 5000, NULL), 0);
    assert_int_equal(dlock_lock_unlock(l), 0);
    char msg[64];
    next_message(&s, msg, sizeof(msg));
    unsubscribe(&s);
    dlock_lock_free(l);
    assert_string_equal(msg, "0");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redisson_holder_excludes_dlock_until_released),
        cmocka_unit_test(test_dlock_holder_excludes_redisson_in_its_field_format),
        cmocka_unit_test(test_hold_counts_are_one_field_for_both),
        cmocka_unit_test(test_unlock_by_another_owner_is_refused_both_ways),
        cmocka_unit_test(test_redisson_renewal_extends_only_its_owners_hold),
        cmocka_unit_test(test_both_publish_and_listen_on_redissons_channel),
    };
    const struct CMUnitTest tagged[] = {
        cmocka_unit_test(test_tagged_name_unlock_is_published_on_redissons_channel),
    };
    if (argc > 1 && strcmp(argv[1], "tagged") == 0) return cmocka_run_group_tests(tagged, setup, teardown);
    return cmocka_run_group_tests(tests, setup, teardown);
}
