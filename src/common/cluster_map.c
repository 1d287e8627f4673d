/* cluster_map.c: slot map parsing, redirect parsing and command routing for
 * the Redis Cluster router (see cluster_map.h).
 *
 * Design note. The map is a flat table: for each of the 16384 slots the
 * index of its master in a small array of addresses. CLUSTER SHARDS gives,
 * per shard, "slots" (start/end pairs) and "nodes" (flat key/value maps
 * with ip, endpoint, port, role, health); we take the node whose role is
 * master, preferring one whose health is online. CLUSTER SLOTS gives
 * [start, end, [ip, port, id...], replicas...]. A reply is never trusted:
 * every type, range and length is checked and anything odd refuses the
 * whole reply (the router then keeps its previous map).
 * Routing follows the commands' key specs: a table of the commands dlock
 * and its tools send (first key, last key, step), plus the variable forms
 * (numkeys scripts, STREAMS). Unknown commands are refused, not guessed. */
#include "cluster_map.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common_err.h"
#include "util.h"

#define bad(err, errlen, ...) dlock__errf(DLOCK__ESERVER, err, errlen, __VA_ARGS__)
#define HOST_MAX              255

void dlock__cmap_free(dlock__cmap *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_nodes; i++)
        free(m->nodes[i].host);
    free(m->nodes);
    m->nodes = NULL;
    m->n_nodes = 0;
}

static void cmap_init(dlock__cmap *m)
{
    m->nodes = NULL;
    m->n_nodes = 0;
    for (size_t i = 0; i < DLOCK__SLOTS; i++)
        m->owner[i] = DLOCK__CMAP_NONE;
}

/* Index of host:port in m->nodes, added when new; -1 out of memory/room. */
static int cmap_node(dlock__cmap *m, const char *host, size_t hlen, int port)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].port == port && strlen(m->nodes[i].host) == hlen &&
            memcmp(m->nodes[i].host, host, hlen) == 0)
            return (int)i;
    if (m->n_nodes >= DLOCK__CMAP_MAX_NODES) return -1;
    dlock__hostport *n = realloc(m->nodes, (m->n_nodes + 1) * sizeof(*n));
    if (!n) return -1;
    m->nodes = n;
    char *h = malloc(hlen + 1);
    if (!h) return -1;
    memcpy(h, host, hlen);
    h[hlen] = '\0';
    m->nodes[m->n_nodes] = (dlock__hostport){.host = h, .port = port};
    return (int)m->n_nodes++;
}

/* An integer element (or a decimal string, as some proxies send). */
static bool elem_int(const dlock__reply *e, long long lo, long long hi, long long *out)
{
    if (!e) return false;
    long long v;
    if (dlock__reply_kind(e) == DLOCK__R_INTEGER) {
        v = dlock__reply_int(e);
    } else if (dlock__reply_kind(e) == DLOCK__R_STRING) {
        size_t n;
        const char *s = dlock__reply_str(e, &n);
        if (n == 0 || n > 18) return false;
        v = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i] < '0' || s[i] > '9') return false;
            v = v * 10 + (s[i] - '0');
        }
    } else {
        return false;
    }
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* A usable host: non-empty, at most HOST_MAX bytes, no NUL/space/control;
 * "" and "?" (unknown endpoint) become asked_host. */
static bool pick_host(const dlock__reply *e, const char *asked_host, const char **h, size_t *n)
{
    if (!e || dlock__reply_kind(e) != DLOCK__R_STRING) return false;
    *h = dlock__reply_str(e, n);
    if (*n == 0 || (*n == 1 && (*h)[0] == '?')) {
        *h = asked_host;
        *n = strlen(asked_host);
    }
    if (*n == 0 || *n > HOST_MAX) return false;
    for (size_t i = 0; i < *n; i++)
        if ((unsigned char)(*h)[i] <= ' ' || (*h)[i] == 0x7f) return false;
    return true;
}

static int assign(dlock__cmap *m, long long lo, long long hi, int node)
{
    for (long long s = lo; s <= hi; s++)
        m->owner[s] = (uint16_t)node;
    return 0;
}

/* Value of key `name` in a flat [k1, v1, k2, v2...] array, or NULL. */
static const dlock__reply *field(const dlock__reply *kv, const char *name)
{
    if (!kv || dlock__reply_kind(kv) != DLOCK__R_ARRAY) return NULL;
    for (size_t i = 0; i + 1 < dlock__reply_count(kv); i += 2) {
        const dlock__reply *k = dlock__reply_at(kv, i);
        if (dlock__reply_kind(k) == DLOCK__R_STRING && strcmp(dlock__reply_str(k, NULL), name) == 0)
            return dlock__reply_at(kv, i + 1);
    }
    return NULL;
}

static bool field_is(const dlock__reply *kv, const char *name, const char *value)
{
    const dlock__reply *v = field(kv, name);
    return v && dlock__reply_kind(v) == DLOCK__R_STRING && strcmp(dlock__reply_str(v, NULL), value) == 0;
}

/* The master of one shard's "nodes" list: role master, online preferred. */
static const dlock__reply *shard_master(const dlock__reply *nodes)
{
    const dlock__reply *any = NULL;
    for (size_t i = 0; i < dlock__reply_count(nodes); i++) {
        const dlock__reply *n = dlock__reply_at(nodes, i);
        if (!field_is(n, "role", "master")) continue;
        if (field_is(n, "health", "online")) return n;
        if (!any) any = n;
    }
    return any;
}

static int shard_node_index(dlock__cmap *m, const dlock__reply *node, const char *asked_host, char *err,
                            size_t errlen)
{
    const char *h;
    size_t hlen;
    long long port;
    const dlock__reply *ep = field(node, "endpoint");
    if (!pick_host(ep, asked_host, &h, &hlen) && !pick_host(field(node, "ip"), asked_host, &h, &hlen))
        return bad(err, errlen, "CLUSTER SHARDS: a master without a usable address");
    if (!elem_int(field(node, "port"), 1, 65535, &port))
        return bad(err, errlen, "CLUSTER SHARDS: a master without a valid port");
    int idx = cmap_node(m, h, hlen, (int)port);
    return idx < 0 ? DLOCK__ENOMEM : idx;
}

static int parse_shard(dlock__cmap *m, const dlock__reply *shard, const char *asked_host, char *err,
                       size_t errlen)
{
    const dlock__reply *slots = field(shard, "slots"), *nodes = field(shard, "nodes");
    if (!slots || !nodes || dlock__reply_kind(slots) != DLOCK__R_ARRAY ||
        dlock__reply_kind(nodes) != DLOCK__R_ARRAY || dlock__reply_count(slots) % 2)
        return bad(err, errlen, "CLUSTER SHARDS: a shard without slots/nodes arrays");
    const dlock__reply *master = shard_master(nodes);
    if (!master) return 0;                        /* no master (being failed over): its slots stay unserved */
    if (dlock__reply_count(slots) == 0) return 0; /* a master without slots */
    int idx = shard_node_index(m, master, asked_host, err, errlen);
    if (idx < 0) return idx;
    for (size_t i = 0; i < dlock__reply_count(slots); i += 2) {
        long long lo, hi;
        if (!elem_int(dlock__reply_at(slots, i), 0, DLOCK__SLOTS - 1, &lo) ||
            !elem_int(dlock__reply_at(slots, i + 1), 0, DLOCK__SLOTS - 1, &hi) || lo > hi)
            return bad(err, errlen, "CLUSTER SHARDS: a slot range outside 0..16383");
        assign(m, lo, hi, idx);
    }
    return 0;
}

int dlock__cmap_from_shards(const dlock__reply *r, const char *asked_host, dlock__cmap *out, char *err,
                            size_t errlen)
{
    cmap_init(out);
    if (!r || dlock__reply_kind(r) != DLOCK__R_ARRAY) return bad(err, errlen, "CLUSTER SHARDS: not an array");
    for (size_t i = 0; i < dlock__reply_count(r); i++) {
        int rc = parse_shard(out, dlock__reply_at(r, i), asked_host, err, errlen);
        if (rc) {
            dlock__cmap_free(out);
            return rc;
        }
    }
    if (out->n_nodes == 0) return bad(err, errlen, "CLUSTER SHARDS: no master serves any slot");
    return 0;
}

static int parse_slot_range(dlock__cmap *m, const dlock__reply *e, const char *asked_host, char *err,
                            size_t errlen)
{
    long long lo, hi, port;
    if (!e || dlock__reply_kind(e) != DLOCK__R_ARRAY || dlock__reply_count(e) < 3 ||
        !elem_int(dlock__reply_at(e, 0), 0, DLOCK__SLOTS - 1, &lo) ||
        !elem_int(dlock__reply_at(e, 1), 0, DLOCK__SLOTS - 1, &hi) || lo > hi)
        return bad(err, errlen, "CLUSTER SLOTS: a malformed slot range");
    const dlock__reply *master = dlock__reply_at(e, 2);
    const char *h;
    size_t hlen;
    if (dlock__reply_kind(master) != DLOCK__R_ARRAY || dlock__reply_count(master) < 2 ||
        !pick_host(dlock__reply_at(master, 0), asked_host, &h, &hlen) ||
        !elem_int(dlock__reply_at(master, 1), 1, 65535, &port))
        return bad(err, errlen, "CLUSTER SLOTS: a master without a usable address");
    int idx = cmap_node(m, h, hlen, (int)port);
    if (idx < 0) return DLOCK__ENOMEM;
    return assign(m, lo, hi, idx);
}

int dlock__cmap_from_slots(const dlock__reply *r, const char *asked_host, dlock__cmap *out, char *err,
                           size_t errlen)
{
    cmap_init(out);
    if (!r || dlock__reply_kind(r) != DLOCK__R_ARRAY) return bad(err, errlen, "CLUSTER SLOTS: not an array");
    for (size_t i = 0; i < dlock__reply_count(r); i++) {
        int rc = parse_slot_range(out, dlock__reply_at(r, i), asked_host, err, errlen);
        if (rc) {
            dlock__cmap_free(out);
            return rc;
        }
    }
    if (out->n_nodes == 0) return bad(err, errlen, "CLUSTER SLOTS: no master serves any slot");
    return 0;
}

int dlock__cmap_parse(const char *sub, const dlock__reply *r, const char *asked_host, dlock__cmap *out,
                      char *err, size_t errlen)
{
    if (strcmp(sub, "SHARDS") == 0) return dlock__cmap_from_shards(r, asked_host, out, err, errlen);
    return dlock__cmap_from_slots(r, asked_host, out, err, errlen);
}

/* ---- redirects --------------------------------------------------------- */

bool dlock__redirect_parse(const dlock__reply *r, dlock__redirect *out)
{
    size_t n;
    if (!r || dlock__reply_kind(r) != DLOCK__R_ERROR) return false;
    const char *s = dlock__reply_str(r, &n);
    size_t skip;
    if (n > 6 && strncmp(s, "MOVED ", 6) == 0) {
        out->kind = DLOCK__REDIR_MOVED;
        skip = 6;
    } else if (n > 4 && strncmp(s, "ASK ", 4) == 0) {
        out->kind = DLOCK__REDIR_ASK;
        skip = 4;
    } else {
        return false;
    }
    const char *p = s + skip, *end = s + n;
    unsigned slot = 0;
    size_t digits = 0;
    for (; p < end && *p >= '0' && *p <= '9' && digits < 6; p++, digits++)
        slot = slot * 10 + (unsigned)(*p - '0');
    if (!digits || slot >= DLOCK__SLOTS || p >= end || *p != ' ') return false;
    const char *addr = p + 1;
    const char *colon = NULL;
    for (const char *q = addr; q < end; q++)
        if (*q == ':') colon = q; /* the last ':' (IPv6 hosts have several) */
    if (!colon || (size_t)(colon - addr) >= sizeof(out->host)) return false;
    long long port = 0;
    size_t pd = 0;
    for (const char *q = colon + 1; q < end; q++, pd++) {
        if (*q < '0' || *q > '9' || pd >= 5) return false;
        port = port * 10 + (*q - '0');
    }
    if (pd == 0 || port < 1 || port > 65535) return false;
    for (const char *q = addr; q < colon; q++)
        if ((unsigned char)*q <= ' ') return false;
    memcpy(out->host, addr, (size_t)(colon - addr));
    out->host[colon - addr] = '\0';
    out->slot = slot;
    out->port = (int)port;
    return true;
}

/* The retryable error replies: the error code is the reply's first word
 * (exactly: "LOADINGX" is not LOADING). */
static dlock__next retry_kind(const dlock__reply *r)
{
    static const struct {
        const char *code;
        dlock__next next;
    } codes[] = {{"TRYAGAIN", DLOCK__NEXT_BUSY},
                 {"LOADING", DLOCK__NEXT_BUSY},
                 {"MASTERDOWN", DLOCK__NEXT_BUSY},
                 {"CLUSTERDOWN", DLOCK__NEXT_DOWN},
                 {"READONLY", DLOCK__NEXT_DEMOTED}};
    if (!r || dlock__reply_kind(r) != DLOCK__R_ERROR) return DLOCK__NEXT_DONE;
    size_t n;
    const char *s = dlock__reply_str(r, &n);
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        size_t k = strlen(codes[i].code);
        if (n >= k && memcmp(s, codes[i].code, k) == 0 && (n == k || s[k] == ' ')) return codes[i].next;
    }
    return DLOCK__NEXT_DONE;
}

dlock__next dlock__cluster_next(const dlock__reply *r, int redirects, int busy, dlock__redirect *rd,
                                int64_t *wait_ms)
{
    *wait_ms = 0;
    if (dlock__redirect_parse(r, rd)) {
        if (redirects >= DLOCK__CLUSTER_MAX_REDIRECTS) return DLOCK__NEXT_DONE;
        return rd->kind == DLOCK__REDIR_ASK ? DLOCK__NEXT_ASK : DLOCK__NEXT_MOVED;
    }
    dlock__next next = retry_kind(r);
    if (next == DLOCK__NEXT_DONE || busy >= DLOCK__CLUSTER_BUSY_RETRIES) return DLOCK__NEXT_DONE;
    int64_t w = (int64_t)5 << (busy < 0 ? 0 : busy);
    *wait_ms = w > 100 ? 100 : w;
    return next;
}
