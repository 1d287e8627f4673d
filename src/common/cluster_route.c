/* cluster_route.c: which node a command goes to on a Redis Cluster (see
 * dlock__route_cmd in cluster_map.h). Invariant: a command whose keys hash
 * to two slots is refused here, before anything is sent; a command the
 * table does not know is refused too (a guessed key would route wrongly
 * without a sound). The table lists what src/ and tools/ send, plus their
 * close relatives; add a command here when dlock starts sending it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster_map.h"
#include "common_err.h"
#include "util.h"

typedef enum spec_kind {
    K_KEYS,    /* keys at first..last (last < 0: from the end), every step-th */
    K_SUBKEY,  /* "XGROUP CREATE key ...": key at 2 unless the subcommand is HELP */
    K_NUMKEYS, /* EVAL script numkeys key...: keys after argv[2] */
    K_STREAMS, /* XREAD/XREADGROUP ... STREAMS k1 k2 id1 id2 */
    K_CURRENT, /* keyless, node-local: the node of the last routed command */
    K_ALL,     /* keyless, every master */
    K_MULTI,
    K_EXEC,
    K_REFUSE, /* cannot be routed on a routing connection */
} spec_kind;

typedef struct cmd_spec {
    const char *name;
    spec_kind kind;
    int first, last, step;
} cmd_spec;

/* clang-format off */
static const cmd_spec specs[] = {
    /* single key at argv[1] */
    {"GET", K_KEYS, 1, 1, 1}, {"SET", K_KEYS, 1, 1, 1}, {"SETNX", K_KEYS, 1, 1, 1},
    {"GETSET", K_KEYS, 1, 1, 1}, {"GETDEL", K_KEYS, 1, 1, 1}, {"GETEX", K_KEYS, 1, 1, 1},
    {"PSETEX", K_KEYS, 1, 1, 1}, {"SETEX", K_KEYS, 1, 1, 1}, {"APPEND", K_KEYS, 1, 1, 1},
    {"STRLEN", K_KEYS, 1, 1, 1}, {"INCR", K_KEYS, 1, 1, 1}, {"INCRBY", K_KEYS, 1, 1, 1},
    {"DECR", K_KEYS, 1, 1, 1}, {"DECRBY", K_KEYS, 1, 1, 1}, {"TYPE", K_KEYS, 1, 1, 1},
    {"EXPIRE", K_KEYS, 1, 1, 1}, {"PEXPIRE", K_KEYS, 1, 1, 1}, {"EXPIREAT", K_KEYS, 1, 1, 1},
    {"PEXPIREAT", K_KEYS, 1, 1, 1}, {"TTL", K_KEYS, 1, 1, 1}, {"PTTL", K_KEYS, 1, 1, 1},
    {"EXPIRETIME", K_KEYS, 1, 1, 1}, {"PEXPIRETIME", K_KEYS, 1, 1, 1}, {"PERSIST", K_KEYS, 1, 1, 1},
    {"DUMP", K_KEYS, 1, 1, 1}, {"RESTORE", K_KEYS, 1, 1, 1},
    {"HSET", K_KEYS, 1, 1, 1}, {"HSETNX", K_KEYS, 1, 1, 1}, {"HMSET", K_KEYS, 1, 1, 1},
    {"HGET", K_KEYS, 1, 1, 1}, {"HMGET", K_KEYS, 1, 1, 1}, {"HGETALL", K_KEYS, 1, 1, 1},
    {"HDEL", K_KEYS, 1, 1, 1}, {"HLEN", K_KEYS, 1, 1, 1}, {"HEXISTS", K_KEYS, 1, 1, 1},
    {"HKEYS", K_KEYS, 1, 1, 1}, {"HVALS", K_KEYS, 1, 1, 1}, {"HINCRBY", K_KEYS, 1, 1, 1},
    {"HSCAN", K_KEYS, 1, 1, 1},
    {"SADD", K_KEYS, 1, 1, 1}, {"SREM", K_KEYS, 1, 1, 1}, {"SMEMBERS", K_KEYS, 1, 1, 1},
    {"SISMEMBER", K_KEYS, 1, 1, 1}, {"SCARD", K_KEYS, 1, 1, 1}, {"SSCAN", K_KEYS, 1, 1, 1},
    {"ZADD", K_KEYS, 1, 1, 1}, {"ZREM", K_KEYS, 1, 1, 1}, {"ZRANGE", K_KEYS, 1, 1, 1},
    {"ZRANGEBYSCORE", K_KEYS, 1, 1, 1}, {"ZREMRANGEBYSCORE", K_KEYS, 1, 1, 1},
    {"ZCARD", K_KEYS, 1, 1, 1}, {"ZSCORE", K_KEYS, 1, 1, 1}, {"ZINCRBY", K_KEYS, 1, 1, 1},
    {"ZRANK", K_KEYS, 1, 1, 1}, {"ZCOUNT", K_KEYS, 1, 1, 1}, {"ZSCAN", K_KEYS, 1, 1, 1},
    {"LPUSH", K_KEYS, 1, 1, 1}, {"RPUSH", K_KEYS, 1, 1, 1}, {"LPOP", K_KEYS, 1, 1, 1},
    {"RPOP", K_KEYS, 1, 1, 1}, {"LRANGE", K_KEYS, 1, 1, 1}, {"LLEN", K_KEYS, 1, 1, 1},
    {"LREM", K_KEYS, 1, 1, 1}, {"LINDEX", K_KEYS, 1, 1, 1}, {"LTRIM", K_KEYS, 1, 1, 1},
    {"XADD", K_KEYS, 1, 1, 1}, {"XACK", K_KEYS, 1, 1, 1}, {"XAUTOCLAIM", K_KEYS, 1, 1, 1},
    {"XCLAIM", K_KEYS, 1, 1, 1}, {"XPENDING", K_KEYS, 1, 1, 1}, {"XRANGE", K_KEYS, 1, 1, 1},
    {"XREVRANGE", K_KEYS, 1, 1, 1}, {"XLEN", K_KEYS, 1, 1, 1}, {"XTRIM", K_KEYS, 1, 1, 1},
    {"XDEL", K_KEYS, 1, 1, 1}, {"XSETID", K_KEYS, 1, 1, 1}, {"SPUBLISH", K_KEYS, 1, 1, 1},
    /* several keys */
    {"DEL", K_KEYS, 1, -1, 1}, {"UNLINK", K_KEYS, 1, -1, 1}, {"EXISTS", K_KEYS, 1, -1, 1},
    {"TOUCH", K_KEYS, 1, -1, 1}, {"MGET", K_KEYS, 1, -1, 1}, {"MSET", K_KEYS, 1, -1, 2},
    {"RENAME", K_KEYS, 1, 2, 1}, {"RENAMENX", K_KEYS, 1, 2, 1}, {"COPY", K_KEYS, 1, 2, 1},
    {"SINTER", K_KEYS, 1, -1, 1}, {"SUNION", K_KEYS, 1, -1, 1}, {"WATCH", K_KEYS, 1, -1, 1},
    {"XGROUP", K_SUBKEY, 2, 2, 1}, {"XINFO", K_SUBKEY, 2, 2, 1}, {"OBJECT", K_SUBKEY, 2, 2, 1},
    {"MEMORY", K_SUBKEY, 2, 2, 1},
    {"EVAL", K_NUMKEYS, 0, 0, 0}, {"EVALSHA", K_NUMKEYS, 0, 0, 0}, {"EVAL_RO", K_NUMKEYS, 0, 0, 0},
    {"EVALSHA_RO", K_NUMKEYS, 0, 0, 0}, {"FCALL", K_NUMKEYS, 0, 0, 0}, {"FCALL_RO", K_NUMKEYS, 0, 0, 0},
    {"XREAD", K_STREAMS, 0, 0, 0}, {"XREADGROUP", K_STREAMS, 0, 0, 0},
    /* keyless */
    {"PING", K_CURRENT, 0, 0, 0}, {"ECHO", K_CURRENT, 0, 0, 0}, {"INFO", K_CURRENT, 0, 0, 0},
    {"ROLE", K_CURRENT, 0, 0, 0}, {"CLIENT", K_CURRENT, 0, 0, 0}, {"CONFIG", K_CURRENT, 0, 0, 0},
    {"TIME", K_CURRENT, 0, 0, 0}, {"WAIT", K_CURRENT, 0, 0, 0}, {"WAITAOF", K_CURRENT, 0, 0, 0},
    {"PUBLISH", K_CURRENT, 0, 0, 0}, {"CLUSTER", K_CURRENT, 0, 0, 0}, {"COMMAND", K_CURRENT, 0, 0, 0},
    {"DEBUG", K_CURRENT, 0, 0, 0}, {"SLOWLOG", K_CURRENT, 0, 0, 0}, {"LATENCY", K_CURRENT, 0, 0, 0},
    {"LASTSAVE", K_CURRENT, 0, 0, 0}, {"ACL", K_CURRENT, 0, 0, 0},
    {"SCRIPT", K_ALL, 0, 0, 0}, {"FUNCTION", K_ALL, 0, 0, 0}, {"FLUSHALL", K_ALL, 0, 0, 0},
    {"FLUSHDB", K_ALL, 0, 0, 0},
    {"MULTI", K_MULTI, 0, 0, 0}, {"EXEC", K_EXEC, 0, 0, 0}, {"DISCARD", K_EXEC, 0, 0, 0},
    {"SELECT", K_REFUSE, 0, 0, 0}, {"AUTH", K_REFUSE, 0, 0, 0}, {"HELLO", K_REFUSE, 0, 0, 0},
    {"SUBSCRIBE", K_REFUSE, 0, 0, 0}, {"PSUBSCRIBE", K_REFUSE, 0, 0, 0},
    {"SSUBSCRIBE", K_REFUSE, 0, 0, 0}, {"UNSUBSCRIBE", K_REFUSE, 0, 0, 0},
    {"SCAN", K_REFUSE, 0, 0, 0}, {"KEYS", K_REFUSE, 0, 0, 0}, {"DBSIZE", K_REFUSE, 0, 0, 0},
    {"RANDOMKEY", K_REFUSE, 0, 0, 0}, {"ASKING", K_REFUSE, 0, 0, 0},
    {"BLPOP", K_REFUSE, 0, 0, 0}, {"BRPOP", K_REFUSE, 0, 0, 0},
};
/* clang-format on */

static size_t arg_len(const char *const *argv, const size_t *lens, int i)
{
    return lens ? lens[i] : strlen(argv[i]);
}

static bool arg_is(const char *const *argv, const size_t *lens, int i, const char *word)
{
    size_t n = arg_len(argv, lens, i);
    return n == strlen(word) && strncasecmp(argv[i], word, n) == 0;
}

#define N_SPECS (sizeof(specs) / sizeof(specs[0]))

/* specs sorted by name, built once (the table above stays grouped by kind
 * for the reader); lookups are a binary search: this runs for every
 * routed command. */
static const cmd_spec *s_sorted[N_SPECS];
static pthread_once_t s_sorted_once = PTHREAD_ONCE_INIT;

static int cmp_spec(const void *a, const void *b)
{
    return strcmp((*(const cmd_spec *const *)a)->name, (*(const cmd_spec *const *)b)->name);
}

static void sort_specs(void)
{
    for (size_t i = 0; i < N_SPECS; i++)
        s_sorted[i] = &specs[i];
    qsort(s_sorted, N_SPECS, sizeof(s_sorted[0]), cmp_spec);
}

/* strcmp order of the upper-cased [a, a+n) against the name b. */
static int cmp_name(const char *a, size_t n, const char *b)
{
    for (size_t i = 0; i < n; i++) {
        int ca = (unsigned char)a[i], cb = (unsigned char)b[i];
        if (ca >= 'a' && ca <= 'z') ca -= 'a' - 'A'; /* ASCII only: command names are */
        if (cb == 0) return 1; /* b is a prefix of a */
        if (ca != cb) return ca - cb;
    }
    return b[n] ? -1 : 0;
}

static const cmd_spec *find_spec(const char *const *argv, const size_t *lens)
{
    pthread_once(&s_sorted_once, sort_specs);
    size_t n = arg_len(argv, lens, 0), lo = 0, hi = N_SPECS;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_name(argv[0], n, s_sorted[mid]->name);
        if (c == 0) return s_sorted[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* Folds the slot of key argv[i] into *slot (-1: none yet); ECROSSSLOT
 * naming both keys when it differs from the earlier ones. */
static int fold_key(const char *const *argv, const size_t *lens, int i, int *slot, int *first_i, char *err,
                    size_t errlen)
{
    size_t n = arg_len(argv, lens, i);
    int s = (int)dlock__key_slot(argv[i], n);
    if (*slot < 0) {
        *slot = s;
        *first_i = i;
        return 0;
    }
    if (s == *slot) return 0;
    size_t n0 = arg_len(argv, lens, *first_i);
    return dlock__errf(DLOCK__ECROSSSLOT, err, errlen,
                       "%s: keys '%.*s' (slot %d) and '%.*s' (slot %d) are in different cluster "
                       "slots; give them one {hash tag} (nothing was sent)",
                       argv[0], (int)(n0 > 64 ? 64 : n0), argv[*first_i], *slot, (int)(n > 64 ? 64 : n),
                       argv[i], s);
}

static int fold_range(int argc, const char *const *argv, const size_t *lens, int first, int last, int step,
                      int *slot, char *err, size_t errlen)
{
    int first_i = -1;
    for (int i = first; i <= last && i < argc; i += step) {
        int rc = fold_key(argv, lens, i, slot, &first_i, err, errlen);
        if (rc) return rc;
    }
    return 0;
}

/* numkeys at argv[2], keys at argv[3 .. 3+numkeys-1]. */
static int numkeys_range(int argc, const char *const *argv, const size_t *lens, int *first, int *last,
                         char *err, size_t errlen)
{
    if (argc < 3) return dlock__errf(DLOCK__EINVAL, err, errlen, "%s: wrong number of arguments", argv[0]);
    size_t n = arg_len(argv, lens, 2);
    long long k = 0;
    if (n == 0 || n > 9) return dlock__errf(DLOCK__EINVAL, err, errlen, "%s: bad numkeys", argv[0]);
    for (size_t i = 0; i < n; i++) {
        if (argv[2][i] < '0' || argv[2][i] > '9')
            return dlock__errf(DLOCK__EINVAL, err, errlen, "%s: bad numkeys", argv[0]);
        k = k * 10 + (argv[2][i] - '0');
    }
    if (k > argc - 3)
        return dlock__errf(DLOCK__EINVAL, err, errlen, "%s: numkeys %lld is more than the arguments", argv[0],
                           k);
    *first = 3;
    *last = 3 + (int)k - 1;
    return 0;
}

/* XREAD[GROUP] ... STREAMS k1..kn id1..idn: the first STREAMS word (a
 * group or consumer literally named "STREAMS" precedes it only in
 * XREADGROUP GROUP g c, so the search starts after those). */
static int streams_range(int argc, const char *const *argv, const size_t *lens, int *first, int *last,
                         char *err, size_t errlen)
{
    int from = arg_is(argv, lens, 0, "XREADGROUP") ? 4 : 1;
    for (int i = from; i < argc; i++) {
        if (!arg_is(argv, lens, i, "STREAMS")) continue;
        int rest = argc - i - 1;
        if (rest < 2 || rest % 2) break;
        *first = i + 1;
        *last = i + rest / 2;
        return 0;
    }
    return dlock__errf(DLOCK__EINVAL, err, errlen, "%s: no STREAMS key id... section", argv[0]);
}

static int keyless_route(const cmd_spec *sp, dlock__route *out)
{
    static const dlock__route_kind kinds[] = {[K_CURRENT] = DLOCK__ROUTE_CURRENT,
                                              [K_ALL] = DLOCK__ROUTE_ALL,
                                              [K_MULTI] = DLOCK__ROUTE_MULTI,
                                              [K_EXEC] = DLOCK__ROUTE_EXEC};
    out->kind = kinds[sp->kind];
    out->slot = 0;
    return 0;
}

int dlock__route_cmd(int argc, const char *const *argv, const size_t *lens, dlock__route *out, char *err,
                     size_t errlen)
{
    if (argc < 1 || !argv || !argv[0]) return dlock__errf(DLOCK__EINVAL, err, errlen, "empty command");
    const cmd_spec *sp = find_spec(argv, lens);
    size_t n0 = arg_len(argv, lens, 0);
    if (!sp)
        return dlock__errf(DLOCK__EINVAL, err, errlen, "command '%.*s' is not known to the cluster router",
                           (int)(n0 > 32 ? 32 : n0), argv[0]);
    if (sp->kind == K_REFUSE)
        return dlock__errf(DLOCK__EINVAL, err, errlen,
                           "%s cannot be sent on a redis-cluster:// routing "
                           "connection (node-local or connection-state command)",
                           sp->name);
    if (sp->kind >= K_CURRENT) return keyless_route(sp, out);
    int first = sp->first, last = sp->last, rc = 0;
    if (sp->kind == K_NUMKEYS) rc = numkeys_range(argc, argv, lens, &first, &last, err, errlen);
    if (sp->kind == K_STREAMS) rc = streams_range(argc, argv, lens, &first, &last, err, errlen);
    if (sp->kind == K_SUBKEY && (argc < 3 || arg_is(argv, lens, 1, "HELP"))) {
        out->kind = DLOCK__ROUTE_CURRENT;
        return 0;
    }
    if (rc) return rc;
    if (last < 0) last = argc + last;
    int slot = -1;
    rc = fold_range(argc, argv, lens, first, last, sp->step > 0 ? sp->step : 1, &slot, err, errlen);
    if (rc) return rc;
    if (slot < 0 && sp->kind != K_NUMKEYS)
        return dlock__errf(DLOCK__EINVAL, err, errlen, "%s: wrong number of arguments", sp->name);
    out->kind = slot < 0 ? DLOCK__ROUTE_CURRENT : DLOCK__ROUTE_SLOT; /* EVAL with 0 keys */
    out->slot = slot < 0 ? 0 : (unsigned)slot;
    return 0;
}
