/* torture_store.c: the keys of a `dlock torture` run and its fenced counter
 * (fenced_store.lua, embedded with its SHA-1; run by EVALSHA), reached through src/common's connection.
 * Invariant: every key named here is built by torture_keys_make and starts
 * with the prefix; SCAN, DEL and the script touch no other key. The keys
 * share the "{torture}" tag (or the prefix's), so on a Cluster they live on
 * one master; only the SCAN for a used prefix visits every master.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common_err.h"
#include "script.h"
#include "lockface.h"
#include "torture.h"
#include "url.h"

extern const dlock__script torture_script_fenced_store; /* fenced_store.lua, SHA-1 fixed at build time */

/* The library's rule for a lock's companion keys (docs/locks.md): a key
 * with a non-empty hash tag gets "K:fence", any other "{K}:fence". */
static bool has_hash_tag(const char *key)
{
    const char *open = strchr(key, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    return open && close && close > open + 1;
}

static int key(char *out, size_t outlen, const char *prefix, const char *name)
{
    int n = snprintf(out, outlen, "%s{torture}:%s", prefix, name);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int torture_keys_make(const char *prefix, torture_keys *k, char *err, size_t errlen)
{
    memset(k, 0, sizeof(*k));
    snprintf(k->lock_name, sizeof(k->lock_name), "{torture}:lock");
    if (strlen(prefix) > 500) {
        snprintf(err, errlen, "--prefix is longer than 500 bytes");
        return -1;
    }
    if (key(k->lock, sizeof(k->lock), prefix, "lock") || key(k->counter, sizeof(k->counter), prefix, "counter") ||
        key(k->highest, sizeof(k->highest), prefix, "highest") ||
        key(k->accepted, sizeof(k->accepted), prefix, "accepted") ||
        key(k->fence, sizeof(k->fence), prefix, "lock:fence"))
        return snprintf(err, errlen, "--prefix too long"), -1;
    if (!has_hash_tag(k->lock)) {
        /* "{}" in the prefix hides our tag: the fence key would be "{K}:fence" */
        snprintf(err, errlen, "--prefix '%s' leaves the lock key without a hash tag, so its fence key "
                              "would not start with the prefix: avoid '{}' in the prefix", prefix);
        return -1;
    }
    return 0;
}

static int exit_for(int rc)
{
    switch (rc) {
    case DLOCK__EURL:
    case DLOCK__ETLS: return CLI_EXIT_CONFIG;
    case DLOCK__EAUTH: return CLI_EXIT_NOPERM;
    case DLOCK__ECONN:
    case DLOCK__EIO:
    case DLOCK__ETIMEOUT:
    case DLOCK__EUNKNOWN: return CLI_EXIT_UNAVAILABLE;
    default: return CLI_EXIT_SOFTWARE;
    }
}

int torture_store_open(const char *url, dlock__conn **c_out)
{
    char err[512] = "", shown[1024];
    dlock__url u;
    cli_redact_url(url, shown, sizeof(shown));
    int rc = dlock__url_parse(url, &u, err, sizeof(err));
    if (rc == 0) {
        dlock__conn_opts co = {.connect_timeout_ms = 2000, .command_timeout_ms = 3000};
        rc = dlock__conn_open(&u, &co, c_out, err, sizeof(err));
        dlock__url_free(&u);
    }
    if (rc == 0) return 0;
    cli_err("torture: cannot use %s: %s", shown, err[0] ? err : dlock__strerror(rc));
    return exit_for(rc);
}

/* Runs argv; 0 and *r (not an error reply), or an exit code after printing. */
static int command(dlock__conn *c, int argc, const char **argv, dlock__reply **r)
{
    int rc = dlock__conn_cmd(c, argc, argv, NULL, r);
    if (rc == 0 && dlock__reply_kind(*r) != DLOCK__R_ERROR) return 0;
    if (rc == 0) {
        cli_err("torture: %s: %s", argv[0], dlock__reply_str(*r, NULL));
        dlock__reply_free(*r);
        *r = NULL;
        return CLI_EXIT_SOFTWARE;
    }
    cli_err("torture: %s: %s", argv[0], dlock__conn_errstr(c));
    return exit_for(rc);
}

int torture_store_op(dlock__conn *c, const torture_keys *k, bool write, uint64_t token, bool fenced,
                     long long *value)
{
    char tok[24], val[24];
    snprintf(tok, sizeof(tok), "%" PRIu64, token);
    snprintf(val, sizeof(val), "%lld", write ? *value : 0);
    const char *keys[3] = {k->counter, k->highest, k->accepted};
    const char *args[4] = {write ? "write" : "read", tok, val, fenced ? "1" : "0"};
    dlock__reply *r = NULL;
    if (dlock__script_call(c, &torture_script_fenced_store, 3, keys, 4, args, &r, NULL) != 0) return -1;
    int rc = -1;
    if (dlock__reply_kind(r) == DLOCK__R_ARRAY && dlock__reply_count(r) == 2) {
        rc = (int)dlock__reply_int(dlock__reply_at(r, 0));
        if (rc == 1 && !write) *value = dlock__reply_int(dlock__reply_at(r, 1));
    }
    dlock__reply_free(r);
    return rc == 0 || rc == 1 ? rc : -1;
}

/* prefix with the glob characters of SCAN MATCH escaped, then "*". */
static void match_pattern(const char *prefix, char *out, size_t outlen)
{
    size_t j = 0;
    for (const char *p = prefix; *p && j + 3 < outlen; p++) {
        if (strchr("*?[]\\", *p)) out[j++] = '\\';
        out[j++] = *p;
    }
    out[j++] = '*';
    out[j] = '\0';
}

/* Runs argv on the master of slot (a routing connection), or as usual
 * (slot < 0); exit code as command(). */
static int command_at(dlock__conn *c, int slot, int argc, const char **argv, dlock__reply **r)
{
    if (slot < 0) return command(c, argc, argv, r);
    int rc = dlock__conn_cmd_slot(c, (unsigned)slot, argc, argv, NULL, r);
    if (rc == 0 && dlock__reply_kind(*r) != DLOCK__R_ERROR) return 0;
    cli_err("torture: %s: %s", argv[0], rc == 0 ? dlock__reply_str(*r, NULL) : dlock__conn_errstr(c));
    dlock__reply_free(*r);
    *r = NULL;
    return rc == 0 ? CLI_EXIT_SOFTWARE : exit_for(rc);
}

/* SCAN MATCH pattern over one server (slot < 0) or the master of slot:
 * 1 and example when a key matched, 0 none, or an exit code. */
static int scan_one(dlock__conn *c, int slot, const char *pattern, char *example, size_t exlen)
{
    char cursor[32] = "0";
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        dlock__reply *r = NULL;
        int code = command_at(c, slot, 6, argv, &r);
        if (code != 0) return code;
        if (dlock__reply_count(r) != 2) {
            dlock__reply_free(r);
            cli_err("torture: SCAN: unexpected reply");
            return CLI_EXIT_SOFTWARE;
        }
        const dlock__reply *keys = dlock__reply_at(r, 1);
        int found = dlock__reply_count(keys) > 0;
        if (found) snprintf(example, exlen, "%s", dlock__reply_str(dlock__reply_at(keys, 0), NULL));
        snprintf(cursor, sizeof(cursor), "%s", dlock__reply_str(dlock__reply_at(r, 0), NULL));
        dlock__reply_free(r);
        if (found) return 1;
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

int torture_prefix_used(dlock__conn *c, const char *prefix, char *example, size_t exlen)
{
    char pattern[1100];
    match_pattern(prefix, pattern, sizeof(pattern));
    if (!dlock__conn_is_cluster(c)) return scan_one(c, -1, pattern, example, exlen);
    unsigned slots[64]; /* on a Cluster: every master (one slot each serves to reach it) */
    size_t n = dlock__conn_cluster_slots(c, slots, sizeof(slots) / sizeof(slots[0]));
    for (size_t i = 0; i < n; i++) {
        int code = scan_one(c, (int)slots[i], pattern, example, exlen);
        if (code != 0) return code;
    }
    return 0;
}

int torture_store_clean(dlock__conn *c, const torture_keys *k)
{
    const char *argv[] = {"DEL", k->lock, k->fence, k->counter, k->highest, k->accepted};
    dlock__reply *r = NULL;
    int code = command(c, 6, argv, &r);
    dlock__reply_free(r);
    return code;
}

/* Reads the accepted tokens in pages and counts those out of order. */
static int scan_tokens(dlock__conn *c, const torture_keys *k, torture_store_state *st)
{
    uint64_t prev = 0;
    for (size_t from = 0;; from += 10000) {
        char a[24], b[24];
        snprintf(a, sizeof(a), "%zu", from);
        snprintf(b, sizeof(b), "%zu", from + 9999);
        const char *argv[] = {"LRANGE", k->accepted, a, b};
        dlock__reply *r = NULL;
        int code = command(c, 4, argv, &r);
        if (code != 0) return code;
        size_t n = dlock__reply_count(r);
        for (size_t i = 0; i < n; i++) {
            uint64_t t = strtoull(dlock__reply_str(dlock__reply_at(r, i), NULL), NULL, 10);
            if (st->n_accepted++ > 0 && t <= prev) st->out_of_order++;
            prev = t;
        }
        dlock__reply_free(r);
        if (n < 10000) return 0;
    }
}

int torture_store_read(dlock__conn *c, const torture_keys *k, torture_store_state *st)
{
    memset(st, 0, sizeof(*st));
    const char *argv[] = {"GET", k->counter};
    dlock__reply *r = NULL;
    int code = command(c, 2, argv, &r);
    if (code != 0) return code;
    st->counter = strtoll(dlock__reply_str(r, NULL), NULL, 10); /* nil: "" = 0 */
    dlock__reply_free(r);
    return scan_tokens(c, k, st);
}
