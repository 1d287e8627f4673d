/* seckill-bench: the flash-sale load generator. Drives one or more seckilld
 * instances over keep-alive HTTP with a planned crowd (buyers, scalpers
 * firing bursts with repeated Idempotency-Keys, malformed requests) or a
 * steady stream, then checks the invariants from the answers it got:
 * told 201 <= stock, no user above the limit, one order per idempotency key.
 * A 202 (decided, not yet acknowledged) is an order too; a keyed request
 * answered 202 is replayed (same Idempotency-Key) while retries remain, to
 * see it become 201 (docs/design/promise.md). A purchase written that got
 * no complete answer (reset, timeout) or a 503 outcome_unknown may have
 * been decided: its outcome is unknown unless a later answer decides.
 * Modes: sale (finite crowd), buy (unique buyers for --duration), ping
 * (GET /ping: the HTTP ceiling), compare (engine level, no HTTP: the
 * stock-deduction strategies side by side, compare.c). Output: human
 * summary, --csv or --json. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>

#include "auth.h"
#include "buckets.h"
#include "compare.h"
#include "httpload.h"
#include "json.h"
#include "options.h"
#include "util.h"

enum { K_BUYER = 0, K_SCALPER = 1, K_BAD = 2, K_PING = 3 };

typedef struct plan_item {
    int kind;
    int user;       /* index into users */
    int key;        /* idempotency key index, -1 none */
    int bad_form;   /* for K_BAD */
    int expect;     /* expected status class for K_BAD (400, 404, 405, 413) */
    int unknown;    /* sent and got no answer (reset, timeout) or 503
                       outcome_unknown once: may have been decided */
} plan_item;

typedef struct told {
    uint64_t oid;
    int user;   /* planned user index */
    int status; /* 201 or 202 */
    int key;    /* idempotency key slot, -1 none */
} told;

#define MAX_CODES 32
/* The timeline's series: every answer by kind (a replay's too), then the
 * orders told for the first time and the decisions (new orders, and 4xx
 * answers to well-formed purchases: sold out, limit reached). */
enum { TS_201, TS_202, TS_4XX, TS_503, TS_UNKNOWN, TS_ORDERS, TS_DECIDED, TS_KINDS };
static const char *const ts_names[TS_KINDS] = {"201", "202", "4xx", "503", "unknown", "orders", "decided"};
typedef struct bench {
    /* options */
    hl_target targets[16];
    size_t n_targets;
    const char *mode, *campaign, *admin_token, *user_secret, *format, *json_out;
    FILE *orders_out;
    int buyers, scalpers, burst, bad, quantity, stock, limit, connections, retries, keyless, db_reserve, shards;
    int hot_k, hot_pct; /* --hot K:P */
    bool create, smoke, csv, json, help, together;
    double rate, duration, warmup, timeout;
    char run_id[9];
    /* plan */
    plan_item *plan;
    size_t plan_len, plan_pos;
    uint64_t seq; /* buy mode: next user */
    /* results */
    uint64_t by_status[600];
    char codes[MAX_CODES][32];
    uint64_t code_count[MAX_CODES];
    int n_codes;
    uint64_t accepted, accepted_qty, bad_unexpected, conn_failed;
    uint64_t told_201, told_202, told_201_qty; /* distinct orders by their best answer */
    uint64_t id_collisions; /* one order id told to two different buyers */
    told *told;          /* every 201/202 answer of a planned request (tally() merges) */
    size_t n_told, cap_told;
    int *user_qty;       /* accepted quantity per planned user */
    uint64_t *key_order; /* latest order id per idempotency key slot */
    uint64_t *key_201;   /* the order id told 201 per key slot */
    uint64_t idem_violations, idem_redecided, over_limit_users;
    uint64_t orders_live;      /* distinct orders told so far (progress, timeline) */
    uint64_t orders_unrecorded; /* 201/202 answers not recorded: no order id, or out of memory */
    uint64_t *ts[TS_KINDS];    /* per 100 ms since t0: answers by kind, new orders, decisions */
    size_t ts_len;
    int64_t t0_wall_ms;
    int64_t t0_us;
    int tty;
} bench;

static int parse_target(const char *url, hl_target *t)
{
    if (strncmp(url, "http://", 7) != 0) return -1;
    const char *h = url + 7, *colon = strchr(h, ':');
    if (!colon || (size_t)(colon - h) >= sizeof(t->host) || colon == h) return -1;
    memcpy(t->host, h, (size_t)(colon - h));
    t->host[colon - h] = '\0';
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (port < 1 || port > 65535 || (*end && strcmp(end, "/") != 0)) return -1;
    t->port = (int)port;
    return 0;
}

/* A planned user's id. --hot K:P: P % of the buyers (a fixed choice per
 * index) get an id whose home bucket among K is bucket 0 (a suffix
 * ".<n>" tried until sk_home_bucket says 0), so bucket 0's buyers far
 * outnumber its units and the other buckets' units must move to it. */
static void user_name(const bench *b, int user, char *out, size_t n)
{
    if (user >= b->buyers) {
        snprintf(out, n, "s%s-%d", b->run_id, user - b->buyers);
        return;
    }
    snprintf(out, n, "b%s-%d", b->run_id, user);
    if (b->hot_k < 2 || (int)((uint32_t)user * 2654435761u % 100u) >= b->hot_pct) return;
    for (int i = 0; sk_home_bucket(out, b->hot_k) != 0; i++) snprintf(out, n, "b%s-%d.%d", b->run_id, user, i);
}

/* X-User-Signature of user (auth.h), valid for an hour from now. */
static void sign(const bench *b, const char *user, char *sig, size_t n)
{
    sig[0] = '\0';
    if (b->user_secret && sk_auth_sign(b->user_secret, user, (int64_t)time(NULL) + 3600, NULL, sig, n) != 0)
        sig[0] = '\0';
}

/* Builds a purchase request; form != 0 makes one of the malformed kinds. */
static void build_purchase(const bench *b, const char *user, const char *key, int qty, int form,
                           dlock__buf *o)
{
    char sig[SK_SIG_MAX], body[64];
    sign(b, user, sig, sizeof(sig));
    const char *method = form == 5 ? "GET" : "POST";
    const char *camp = form == 6 ? "no-such-campaign" : b->campaign;
    snprintf(body, sizeof(body), "{\"quantity\":%d}", qty);
    if (form == 1) snprintf(body, sizeof(body), "{\"quantity\":");
    if (form == 2) snprintf(body, sizeof(body), "{\"quantity\":0}");
    if (form == 3) snprintf(body, sizeof(body), "{\"quantity\":\"x\"}");
    dlock__buf_printf(o, "%s /v1/campaigns/%s/purchase HTTP/1.1\r\nHost: bench\r\n", method, camp);
    if (form != 4) dlock__buf_printf(o, "X-User-Id: %s\r\n", form == 8 ? "bad user!" : user);
    if (sig[0]) dlock__buf_printf(o, "X-User-Signature: %s\r\n", sig);
    if (key) dlock__buf_printf(o, "Idempotency-Key: %s\r\n", key);
    if (form == 7) {
        static char big[9000];
        memset(big, ' ', sizeof(big));
        dlock__buf_printf(o, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", sizeof(big));
        dlock__buf_append(o, big, sizeof(big));
        return;
    }
    dlock__buf_printf(o, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
}

static const int bad_expect[9] = {0, 400, 400, 400, 400, 405, 404, 413, 400};

static int next_request(void *ud, hl_request *req)
{
    bench *b = ud;
    dlock__buf o = {0};
    char user[64], key[64];
    if (strcmp(b->mode, "ping") == 0) {
        dlock__buf_printf(&o, "GET /ping HTTP/1.1\r\nHost: bench\r\n\r\n");
        req->tag = (void *)(intptr_t)-1;
    } else if (strcmp(b->mode, "buy") == 0) {
        snprintf(user, sizeof(user), "u%s-%llu", b->run_id, (unsigned long long)b->seq++);
        build_purchase(b, user, NULL, b->quantity, 0, &o);
        req->tag = (void *)(intptr_t)-1;
    } else {
        if (b->plan_pos >= b->plan_len) return 0;
        size_t i = b->plan_pos++;
        const plan_item *p = &b->plan[i];
        user_name(b, p->user, user, sizeof(user));
        if (p->key >= 0) snprintf(key, sizeof(key), "k%s-%d", b->run_id, p->key);
        build_purchase(b, user, p->key >= 0 ? key : NULL, b->quantity, p->bad_form, &o);
        req->tag = (void *)(intptr_t)i;
    }
    if (o.oom) {
        dlock__buf_free(&o);
        return 0;
    }
    req->bytes = o.data;
    req->len = o.len;
    return 1;
}

/* The string member key of an answer's top-level object, read by the one
 * JSON reader (json.h) as seckilld's answers are meant, never by searching
 * the text (a message may quote another answer); cut to cap - 1 bytes.
 * false: no such string, or the body is no JSON object. */
static bool answer_str(const char *body, size_t len, const char *key, char *out, size_t cap)
{
    dlock__json_doc d;
    out[0] = '\0';
    if (!len || dlock__json_parse(body, len, &d, NULL, 0) != 0) return false;
    const dlock__json_val *v = dlock__json_get(&d, &d.nodes[0], key);
    bool ok = v && v->type == DLOCK__JSON_STRING && strlen(v->s) == v->len;
    if (ok) {
        size_t n = v->len < cap - 1 ? v->len : cap - 1;
        memcpy(out, v->s, n);
        out[n] = '\0';
    }
    dlock__json_free(&d);
    return ok;
}

static bool is_outcome_unknown(const char *body, size_t len)
{
    char code[32];
    return answer_str(body, len, "error", code, sizeof(code)) && strcmp(code, "outcome_unknown") == 0;
}

static void count_code(bench *b, const char *body, size_t len)
{
    char code[32];
    if (!answer_str(body, len, "error", code, sizeof(code)) || !code[0]) return;
    for (int i = 0; i < b->n_codes; i++)
        if (strcmp(b->codes[i], code) == 0) {
            b->code_count[i]++;
            return;
        }
    if (b->n_codes < MAX_CODES) {
        memcpy(b->codes[b->n_codes], code, sizeof(code));
        b->code_count[b->n_codes++] = 1;
    }
}

/* The internal id of an answer's "order_id" ("<id>-<tag>"), or 0. */
static uint64_t order_id_of(const char *body)
{
    char ref[96];
    return answer_str(body, strlen(body), "order_id", ref, sizeof(ref)) ? strtoull(ref, NULL, 10) : 0;
}

static void ts_add(bench *b, int kind)
{
    uint64_t bucket = (uint64_t)(dlock__now_us() - b->t0_us) / 100000;
    if (b->ts[kind] && bucket < b->ts_len) b->ts[kind][bucket]++;
}

/* An answer that cannot be recorded is an error, counted and reported
 * (seckill-bench exits 1; sale_check.py compares the counts). */
static void unrecorded(bench *b, const char *why, const char *body)
{
    if (b->orders_unrecorded++ == 0)
        fprintf(stderr, "seckill-bench: a 201/202 answer not recorded (%s): %.200s\n", why, body);
}

/* Notes a 201/202 answer of a planned request (merged by tally()). Two
 * order ids told 201 under one key are a violation. Another order id after
 * a 202 is a new decision (the first may have been lost with its master:
 * a 202 is no promise): counted apart, and the orders file gives the key,
 * so sale_check.py can check that at most one of them is kept. */
static void note_order(bench *b, const plan_item *p, int status, const char *body)
{
    uint64_t oid = order_id_of(body);
    if (!oid) {
        unrecorded(b, "no order id in the body", body);
        return;
    }
    if (p->key < 0 || b->key_order[p->key] != oid) { /* first told (a keyless answer is never replayed) */
        b->orders_live++;
        ts_add(b, TS_ORDERS);
        ts_add(b, TS_DECIDED);
    }
    if (p->key >= 0) {
        if (b->key_order[p->key] && b->key_order[p->key] != oid) b->idem_redecided++;
        b->key_order[p->key] = oid;
        if (status == 201 && b->key_201[p->key] && b->key_201[p->key] != oid) b->idem_violations++;
        if (status == 201) b->key_201[p->key] = oid;
    }
    if (b->n_told == b->cap_told) {
        size_t cap = b->cap_told ? b->cap_told * 2 : 1024;
        told *t = realloc(b->told, cap * sizeof(*t));
        if (!t) {
            unrecorded(b, "out of memory", body);
            return;
        }
        b->told = t;
        b->cap_told = cap;
    }
    b->told[b->n_told++] = (told){oid, p->user, status, p->key};
}

/* The body as a NUL-terminated copy (answers are small JSON). */
static size_t copy_body(char *copy, size_t cap, const char *body, size_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(copy, body, n);
    copy[n] = '\0';
    return n;
}

/* Every answer (final or not) into the timeline, by kind. */
static void note_answer(bench *b, intptr_t i, int status, const char *body, size_t len)
{
    int kind = status == 201 ? TS_201 : status == 202 ? TS_202 : status / 100 == 4 ? TS_4XX : TS_503;
    if (status == 0 || (status == 503 && is_outcome_unknown(body, len))) kind = TS_UNKNOWN;
    ts_add(b, kind);
    if (kind == TS_4XX && i >= 0 && b->plan[i].kind != K_BAD) ts_add(b, TS_DECIDED);
}

/* hl_options.resend: 503 (but see below); a keyed planned purchase answered 202 is
 * noted and replayed (a keyless one would be a second purchase). */
static int resend(void *ud, void *tag, int status, const char *body, size_t len)
{
    bench *b = ud;
    intptr_t i = (intptr_t)tag;
    /* A purchase that may have been decided (connection lost in flight,
     * 503 outcome_unknown) is resent only with its Idempotency-Key: sent
     * again without one it would be a second purchase. Malformed requests
     * buy nothing and are always resent. */
    bool safe = i >= 0 && (b->plan[i].key >= 0 || b->plan[i].kind == K_BAD);
    note_answer(b, i, status, body, len);
    if (status == 0) {
        if (i >= 0 && b->plan[i].kind != K_BAD) b->plan[i].unknown = 1; /* written, no answer */
        return safe;
    }
    if (status == 503) {
        bool unknown = is_outcome_unknown(body, len);
        if (unknown && i >= 0) b->plan[i].unknown = 1;
        return safe || !unknown;
    }
    if (status != 202 || i < 0 || b->plan[i].key < 0) return 0;
    char copy[1024];
    copy_body(copy, sizeof(copy), body, len);
    note_order(b, &b->plan[i], 202, copy);
    return 1;
}

static void on_done(void *ud, void *tag, int status, const char *body, size_t len, uint64_t lat)
{
    (void)lat;
    bench *b = ud;
    char copy[1024];
    size_t n = copy_body(copy, sizeof(copy), body, len);
    if (status == 0) b->conn_failed++;
    if (status > 0 && status < 600) b->by_status[status]++;
    intptr_t i = (intptr_t)tag;
    /* Replays of an "outcome unknown" that end without an answer that
     * decides (503 again, no answer) leave the buyer not knowing: that
     * stays the request's outcome (sale_check.py allows an order for it). */
    static const char unknown_body[] = "{\"error\":\"outcome_unknown\"}";
    if (i >= 0 && b->plan[i].unknown && (status == 503 || status == 0))
        count_code(b, unknown_body, sizeof(unknown_body) - 1);
    else
        count_code(b, copy, n);
    if (i < 0) { /* buy and ping modes: no resend(), so the timeline is fed here */
        if (status) note_answer(b, i, status, copy, n);
        if (status == 201 || status == 202) {
            b->accepted++;
            ts_add(b, TS_ORDERS);
            ts_add(b, TS_DECIDED);
        }
        b->told_201 += status == 201;
        b->told_202 += status == 202;
        return;
    }
    const plan_item *p = &b->plan[i];
    if (p->kind == K_BAD) {
        if (status / 100 != 4) b->bad_unexpected++;
        return;
    }
    if (status == 201 || status == 202) note_order(b, p, status, copy);
}

static int cmp_told(const void *x, const void *y)
{
    const told *a = x, *c = y;
    if (a->oid != c->oid) return a->oid < c->oid ? -1 : 1;
    return a->status - c->status; /* 201 first */
}

/* One line per order told (its best answer: 201 beats 202), the counts. */
static void tally(bench *b)
{
    if (b->n_told > 1) qsort(b->told, b->n_told, sizeof(told), cmp_told); /* told is NULL when none */
    for (size_t k = 0; k < b->n_told; k++) {
        const told *t = &b->told[k];
        if (k > 0 && b->told[k - 1].oid == t->oid) { /* a replay of an order counted */
            if (b->told[k - 1].user != t->user) b->id_collisions++;
            continue;
        }
        b->accepted++;
        b->accepted_qty += (uint64_t)b->quantity;
        if (t->status == 201) {
            b->told_201++;
            b->told_201_qty += (uint64_t)b->quantity;
            b->user_qty[t->user] += b->quantity;
        } else {
            b->told_202++;
        }
        if (b->orders_out) {
            char user[64];
            user_name(b, t->user, user, sizeof(user));
            fprintf(b->orders_out, "%llu %s %d %d %d\n", (unsigned long long)t->oid, user, b->quantity, t->status,
                    t->key);
        }
    }
}

/* --scalper-together: each scalper's burst moves to where its first
 * request landed in the shuffle, back to back, so its attempts are in
 * flight at the same time (on as many connections and instances). */
static void group_bursts(bench *b)
{
    plan_item *out = calloc(b->plan_len ? b->plan_len : 1, sizeof(*out));
    bool *seen = calloc((size_t)b->scalpers + 1, sizeof(bool));
    if (!out || !seen) {
        fputs("seckill-bench: out of memory\n", stderr);
        exit(2);
    }
    size_t o = 0;
    for (size_t i = 0; i < b->plan_len; i++) {
        const plan_item *p = &b->plan[i];
        int s = p->user - b->buyers;
        if (p->kind != K_SCALPER) out[o++] = *p;
        else if (!seen[s]) {
            seen[s] = true;
            for (int j = 0; j < b->burst; j++)
                out[o++] = (plan_item){K_SCALPER, p->user, b->buyers + s * 10 + j % 10, 0, 0, 0};
        }
    }
    free(b->plan);
    free(seen);
    b->plan = out;
}

static void build_plan(bench *b)
{
    size_t n = (size_t)b->buyers + (size_t)b->scalpers * (size_t)b->burst + (size_t)b->bad;
    b->plan = calloc(n ? n : 1, sizeof(*b->plan));
    b->user_qty = calloc((size_t)b->buyers + (size_t)b->scalpers + 1, sizeof(int));
    size_t nkeys = (size_t)b->buyers + (size_t)b->scalpers * 10 + 1;
    b->key_order = calloc(nkeys, sizeof(uint64_t));
    b->key_201 = calloc(nkeys, sizeof(uint64_t));
    if (!b->plan || !b->user_qty || !b->key_order || !b->key_201) {
        fputs("seckill-bench: out of memory\n", stderr);
        exit(2);
    }
    size_t k = 0;
    for (int i = 0; i < b->buyers; i++) /* --keyless: that share sends no Idempotency-Key */
        b->plan[k++] = (plan_item){K_BUYER, i, (int)dlock__random_below(100) < b->keyless ? -1 : i, 0, 0, 0};
    for (int s = 0; s < b->scalpers; s++)
        for (int j = 0; j < b->burst; j++) /* 10 keys, each retried */
            b->plan[k++] = (plan_item){K_SCALPER, b->buyers + s, b->buyers + s * 10 + j % 10, 0, 0, 0};
    for (int i = 0; i < b->bad; i++) {
        int form = 1 + i % 8;
        b->plan[k++] = (plan_item){K_BAD, i % (b->buyers ? b->buyers : 1), -1, form, bad_expect[form], 0};
    }
    b->plan_len = k;
    for (size_t i = k; i > 1; i--) { /* shuffle: everyone arrives at once */
        size_t j = (size_t)dlock__random_below(i);
        plan_item t = b->plan[i - 1];
        b->plan[i - 1] = b->plan[j];
        b->plan[j] = t;
    }
    if (b->together) group_bursts(b);
}

static void progress(void *ud, double elapsed)
{
    bench *b = ud;
    uint64_t done = 0;
    for (int s = 0; s < 600; s++) done += b->by_status[s];
    uint64_t orders = strcmp(b->mode, "sale") == 0 ? b->orders_live : b->accepted;
    fprintf(stdout, "%s[%5.1fs] responses %llu  accepted %llu  conn-errors %llu  %.0f req/s%s",
            b->tty ? "\r" : "", elapsed, (unsigned long long)done, (unsigned long long)orders,
            (unsigned long long)b->conn_failed, elapsed > 0 ? (double)done / elapsed : 0.0,
            b->tty ? "   " : "\n");
    fflush(stdout);
}

typedef struct once {
    char *bytes;
    size_t len;
    int given, status;
} once;

static int once_next(void *ud, hl_request *req)
{
    once *o = ud;
    if (o->given++) return 0;
    req->bytes = o->bytes;
    req->len = o->len;
    o->bytes = NULL;
    return 1;
}

static void once_done(void *ud, void *tag, int status, const char *body, size_t len, uint64_t lat)
{
    (void)tag;
    (void)body;
    (void)len;
    (void)lat;
    ((once *)ud)->status = status;
}

static int create_campaign(bench *b)
{
    if (!b->admin_token) {
        fputs("seckill-bench: --create needs --admin-token or SECKILL_ADMIN_TOKEN\n", stderr);
        return -1;
    }
    int64_t now = dlock__wall_ms();
    char body[512], shards[32] = "";
    if (b->shards > 1) snprintf(shards, sizeof(shards), ",\"shards\":%d", b->shards);
    snprintf(body, sizeof(body),
             "{\"id\":\"%s\",\"title\":\"bench\",\"stock\":%d,\"per_user_limit\":%d,\"db_reserve\":%d,"
             "\"starts_at\":%lld,\"ends_at\":%lld,\"price_cents\":100%s}",
             b->campaign, b->stock, b->limit, b->db_reserve, (long long)(now - 1000),
             (long long)(now + 3600 * 1000), shards);
    dlock__buf o = {0};
    dlock__buf_printf(&o,
                      "POST /v1/campaigns HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer %s\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                      b->admin_token, strlen(body), body);
    once one = {.bytes = o.data, .len = o.len};
    hl_options ho = {.targets = b->targets, .n_targets = 1, .connections = 1,
                     .next = once_next, .done = once_done, .ud = &one};
    hl_result r;
    int rc = o.oom ? -1 : hl_run(&ho, &r);
    free(one.bytes);
    if (rc == 0 && one.status != 201) {
        fprintf(stderr, "seckill-bench: creating campaign %s answered HTTP %d\n", b->campaign, one.status);
        rc = -1;
    }
    return rc;
}

static uint64_t status_class(const bench *b, int cls)
{
    uint64_t n = 0;
    for (int s = cls * 100; s < cls * 100 + 100; s++) n += b->by_status[s];
    return n;
}

static void check_users(bench *b)
{
    if (strcmp(b->mode, "sale") != 0) return;
    for (int u = 0; u < b->buyers + b->scalpers; u++)
        if (b->limit > 0 && b->user_qty[u] > b->limit) b->over_limit_users++;
}

/* Only promises count: units told 201 beyond the stock. */
static uint64_t oversold(const bench *b)
{
    return b->stock > 0 && b->told_201_qty > (uint64_t)b->stock ? b->told_201_qty - (uint64_t)b->stock : 0;
}

/* "timeline": the series per 100 ms from t0 (wall clock t0_wall_ms), each
 * as long as the last bucket any of them used. */
static void print_timeline(FILE *out, const bench *b)
{
    size_t last = 0;
    for (int k = 0; k < TS_KINDS; k++)
        for (size_t i = last; i < b->ts_len; i++)
            if (b->ts[k] && b->ts[k][i]) last = i + 1;
    fprintf(out, "\"timeline\":{\"step_ms\":100,\"t0_wall_ms\":%lld", (long long)b->t0_wall_ms);
    for (int k = 0; k < TS_KINDS; k++) {
        fprintf(out, ",\"%s\":[", ts_names[k]);
        for (size_t i = 0; i < last; i++)
            fprintf(out, "%s%llu", i ? "," : "", (unsigned long long)(b->ts[k] ? b->ts[k][i] : 0));
        fprintf(out, "]");
    }
    fprintf(out, "}");
}

static void print_json(FILE *out, const bench *b, const hl_result *r)
{
    fprintf(out, "{\"mode\":\"%s\",\"requests\":%llu,\"responses\":%llu,\"connection_errors\":%llu,"
           "\"retried\":%llu,\"elapsed_s\":%.3f,\"requests_per_s\":%.1f,\"accepted\":%llu,\"accepted_qty\":%llu,"
           "\"stock\":%d,\"limit\":%d,\"oversold\":%llu,\"users_over_limit\":%llu,"
           "\"idempotency_violations\":%llu,\"bad_requests\":%d,\"bad_unexpected\":%llu,"
           "\"told_201\":%llu,\"told_202\":%llu,\"keyless_pct\":%d,\"order_id_collisions\":%llu,"
           "\"idempotency_redecided\":%llu,\"orders_unrecorded\":%llu,\"buyers\":%d,\"scalpers\":%d,"
           "\"scalper_burst\":%d,\"quantity\":%d,",
           b->mode, (unsigned long long)r->sent, (unsigned long long)r->completed,
           (unsigned long long)r->failed, (unsigned long long)r->retried, r->elapsed_s,
           r->elapsed_s > 0 ? (double)r->completed / r->elapsed_s : 0, (unsigned long long)b->accepted, (unsigned long long)b->accepted_qty, b->stock, b->limit,
           (unsigned long long)oversold(b), (unsigned long long)b->over_limit_users,
           (unsigned long long)b->idem_violations, strcmp(b->mode, "sale") == 0 ? b->bad : 0,
           (unsigned long long)b->bad_unexpected, (unsigned long long)b->told_201,
           (unsigned long long)b->told_202, b->keyless, (unsigned long long)b->id_collisions,
           (unsigned long long)b->idem_redecided, (unsigned long long)b->orders_unrecorded,
           strcmp(b->mode, "sale") == 0 ? b->buyers : 0, strcmp(b->mode, "sale") == 0 ? b->scalpers : 0, b->burst,
           b->quantity);
    fprintf(out, "\"latency_us\":{\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"p999\":%llu,\"max\":%llu},",
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.5),
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.9),
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.99),
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.999),
           (unsigned long long)r->latency.max_us);
    fprintf(out, "\"status\":{");
    for (int s = 0, first = 1; s < 600; s++)
        if (b->by_status[s]) {
            fprintf(out, "%s\"%d\":%llu", first ? "" : ",", s, (unsigned long long)b->by_status[s]);
            first = 0;
        }
    fprintf(out, "},\"errors\":{");
    for (int i = 0; i < b->n_codes; i++)
        fprintf(out, "%s\"%s\":%llu", i ? "," : "", b->codes[i], (unsigned long long)b->code_count[i]);
    /* latency histogram in powers of two (us), for reports */
    fprintf(out, "},\"latency_hist\":[");
    uint64_t prev = 0;
    for (int e = 0; e < 24; e++) {
        uint64_t le = dlock__hist_count_le(&r->latency, (1ull << e) * 64);
        fprintf(out, "%s[%llu,%llu]", e ? "," : "", (unsigned long long)((1ull << e) * 64),
               (unsigned long long)(le - prev));
        prev = le;
    }
    fprintf(out, "],");
    print_timeline(out, b);
    fprintf(out, "}\n");
}

static void print_human(const bench *b, const hl_result *r)
{
    printf("mode %s: %llu requests, %llu responses, %llu connection errors, %llu retried in %.2f s "
           "(%.0f req/s)\n",
           b->mode, (unsigned long long)r->sent, (unsigned long long)r->completed,
           (unsigned long long)r->failed, (unsigned long long)r->retried, r->elapsed_s,
           r->elapsed_s > 0 ? (double)r->completed / r->elapsed_s : 0);
    printf("status: 2xx %llu, 4xx %llu, 5xx %llu\n", (unsigned long long)status_class(b, 2),
           (unsigned long long)status_class(b, 4), (unsigned long long)status_class(b, 5));
    for (int i = 0; i < b->n_codes; i++)
        printf("  rejected %-16s %llu\n", b->codes[i], (unsigned long long)b->code_count[i]);
    printf("latency us: p50 %llu  p90 %llu  p99 %llu  p999 %llu  max %llu\n",
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.5),
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.9),
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.99),
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.999), (unsigned long long)r->latency.max_us);
    if (strcmp(b->mode, "sale") == 0)
        printf("accepted %llu units (stock %d; told 201 %llu, 202 %llu orders): oversold %llu, users over limit %llu, "
               "idempotency violations %llu (new decisions after a 202 %llu), bad requests not answered 4xx %llu, "
               "order ids told twice %llu, 201/202 answers not recorded %llu\n",
               (unsigned long long)b->accepted_qty, b->stock, (unsigned long long)b->told_201,
               (unsigned long long)b->told_202, (unsigned long long)oversold(b),
               (unsigned long long)b->over_limit_users, (unsigned long long)b->idem_violations,
               (unsigned long long)b->idem_redecided, (unsigned long long)b->bad_unexpected,
               (unsigned long long)b->id_collisions, (unsigned long long)b->orders_unrecorded);
    else if (strcmp(b->mode, "buy") == 0)
        printf("decisions/s %.0f (accepted %llu: told 201 %llu, 202 %llu)\n",
               r->elapsed_s > 0 ? (double)r->completed / r->elapsed_s : 0, (unsigned long long)b->accepted,
               (unsigned long long)b->told_201, (unsigned long long)b->told_202);
}

static void print_csv(const bench *b, const hl_result *r)
{
    printf("mode,requests,responses,conn_errors,elapsed_s,req_per_s,accepted,oversold,over_limit,"
           "idem_violations,p50_us,p90_us,p99_us,p999_us,max_us\n");
    printf("%s,%llu,%llu,%llu,%.3f,%.1f,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", b->mode,
           (unsigned long long)r->sent, (unsigned long long)r->completed, (unsigned long long)r->failed,
           r->elapsed_s, r->elapsed_s > 0 ? (double)r->completed / r->elapsed_s : 0,
           (unsigned long long)b->accepted_qty, (unsigned long long)oversold(b),
           (unsigned long long)b->over_limit_users, (unsigned long long)b->idem_violations,
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.5),
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.9),
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.99),
           (unsigned long long)dlock__hist_quantile(&r->latency, 0.999), (unsigned long long)r->latency.max_us);
}

static int add_target(void *base, const char *v, char *err, size_t errlen)
{
    bench *b = base;
    if (b->n_targets == 16 || parse_target(v, &b->targets[b->n_targets]) != 0) {
        snprintf(err, errlen, "bad --url '%s' (want http://HOST:PORT, at most 16)", v);
        return -1;
    }
    b->n_targets++;
    return 0;
}

static int parse_hot(void *base, const char *v, char *err, size_t errlen)
{
    bench *b = base;
    char *end = NULL;
    long k = strtol(v, &end, 10), p = -1;
    if (end != v && *end == ':') {
        const char *q = end + 1;
        p = strtol(q, &end, 10);
        if (end == q || *end) p = -1;
    }
    if (k < 2 || k > SK_MAX_SHARDS || p < 0 || p > 100) {
        snprintf(err, errlen, "bad --hot '%s' (want K:P, K buckets 2..%d, P percent 0..100)", v, SK_MAX_SHARDS);
        return -1;
    }
    b->hot_k = (int)k;
    b->hot_pct = (int)p;
    return 0;
}

static int open_orders_out(void *base, const char *v, char *err, size_t errlen)
{
    bench *b = base;
    if (b->orders_out) fclose(b->orders_out);
    b->orders_out = fopen(v, "w");
    if (!b->orders_out) {
        snprintf(err, errlen, "cannot write %s", v);
        return -1;
    }
    return 0;
}

#define OFF(f) offsetof(bench, f)

static const opt_spec specs[] = {
    {.name = "url", .type = OPT_CALL, .call = add_target, .arg = "http://HOST:PORT",
     .help = "target seckilld (repeat for several instances)"},
    {.name = "mode", .type = OPT_STR, .off = OFF(mode), .arg = "sale|buy|ping", .def = "sale",
     .help = "sale: a planned crowd (default); buy: unique buyers for\n--duration; ping: GET /ping (HTTP "
             "ceiling, no Redis work);\ncompare: engine-level strategy comparison, no HTTP\n(see seckill-bench "
             "--mode compare --help)"},
    {.name = "campaign", .type = OPT_STR, .off = OFF(campaign), .arg = "ID", .def = "c1",
     .help = "campaign to buy from (default c1)"},
    {.name = "create", .type = OPT_FLAG, .off = OFF(create),
     .help = "create the campaign first (needs --admin-token, --stock, --limit)"},
    {.name = "admin-token", .type = OPT_STR, .off = OFF(admin_token), .arg = "T", .env = "SECKILL_ADMIN_TOKEN",
     .help = "admin bearer token (env SECKILL_ADMIN_TOKEN)"},
    {.name = "user-secret", .type = OPT_STR, .off = OFF(user_secret), .arg = "S", .env = "SECKILL_USER_SECRET",
     .help = "sign X-User-Id: X-User-Signature v1=<HMAC-SHA256>;exp=<now + 1 h> (env SECKILL_USER_SECRET)"},
    {.name = "stock", .type = OPT_INT, .off = OFF(stock), .lo = 0, .hi = 1000000000, .arg = "N", .def = "100",
     .help = "campaign stock (for --create and checks; default 100)"},
    {.name = "limit", .type = OPT_INT, .off = OFF(limit), .lo = 0, .hi = 1000000, .arg = "N", .def = "1",
     .help = "per-user limit (for --create and checks; default 1)"},
    {.name = "db-reserve", .type = OPT_INT, .off = OFF(db_reserve), .lo = 0, .hi = 1000000000, .arg = "N",
     .def = "0", .help = "--create: units only the degraded database path sells (default 0)"},
    {.name = "buyers", .type = OPT_INT, .off = OFF(buyers), .lo = 0, .hi = 10000000, .arg = "N", .def = "10000",
     .help = "distinct buyers, one request each (default 10000)"},
    {.name = "hot", .type = OPT_CALL, .call = parse_hot, .arg = "K:P",
     .help = "P percent of the buyers homed in bucket 0 of a K-bucket campaign\n(a hot bucket whose units run out first)"},
    {.name = "scalpers", .type = OPT_INT, .off = OFF(scalpers), .lo = 0, .hi = 100000, .arg = "N", .def = "50",
     .help = "scalper users (default 50)"},
    {.name = "scalper-burst", .type = OPT_INT, .off = OFF(burst), .lo = 1, .hi = 100000, .arg = "N", .def = "100",
     .help = "concurrent requests per scalper, keys repeated (default 100)"},
    {.name = "scalper-together", .type = OPT_FLAG, .off = OFF(together),
     .help = "send each scalper's burst back to back (its attempts concurrent)\ninstead of spread over the crowd"},
    {.name = "bad", .type = OPT_INT, .off = OFF(bad), .lo = 0, .hi = 1000000, .arg = "N", .def = "100",
     .help = "malformed requests mixed in (default 100)"},
    {.name = "shards", .type = OPT_INT, .off = OFF(shards), .lo = 1, .hi = 64, .arg = "K", .def = "1",
     .help = "--create: split the campaign's Redis stock over K buckets (default 1)"},
    {.name = "quantity", .type = OPT_INT, .off = OFF(quantity), .lo = 1, .hi = 1000, .arg = "N", .def = "1",
     .help = "units per purchase (default 1)"},
    {.name = "connections", .type = OPT_INT, .off = OFF(connections), .lo = 1, .hi = 100000, .arg = "N",
     .def = "128", .help = "keep-alive connections (default 128)"},
    {.name = "rate", .type = OPT_NUMBER, .off = OFF(rate), .lo = 0, .hi = 10000000, .arg = "R",
     .help = "open loop at R requests/s (default: closed loop)"},
    {.name = "retries", .type = OPT_INT, .off = OFF(retries), .lo = 0, .hi = 100, .arg = "N",
     .help = "resend a request whose connection failed or timed out or that was answered\n503 (same "
             "Idempotency-Key), or a keyed purchase answered 202 (to learn\nits current state), up to N times, "
             "after a backoff: 50 ms doubling to 2 s,\nwith jitter, at least the Retry-After (up to 1 s)"},
    {.name = "timeout", .type = OPT_SECONDS, .off = OFF(timeout), .lo = 0, .hi = OPT_MAX_MS, .unit = OPT_UNIT_S,
     .arg = "DUR", .def = "10", .help = "a request with no complete answer this long after it was written\n"
             "ends as a reset (its outcome unknown; resent under --retries);\ndefault 10s, 0 none"},
    {.name = "duration", .type = OPT_SECONDS, .off = OFF(duration), .lo = 0, .hi = OPT_MAX_MS, .unit = OPT_UNIT_S,
     .arg = "DUR", .def = "5", .help = "buy/ping modes: how long (default 5s; a bare number is seconds)"},
    {.name = "warmup", .type = OPT_SECONDS, .off = OFF(warmup), .lo = 0, .hi = OPT_MAX_MS, .unit = OPT_UNIT_S,
     .arg = "DUR", .help = "buy/ping modes: time not recorded (default 0)"},
    {.name = "csv", .type = OPT_FLAG, .off = OFF(csv), .help = "machine-readable output: CSV"},
    {.name = "json", .type = OPT_FLAG, .off = OFF(json), .help = "machine-readable output: JSON"},
    {.name = "json-out", .type = OPT_STR, .off = OFF(json_out), .arg = "FILE",
     .help = "also write the JSON result to FILE (keeps the human output)"},
    {.name = "orders-out", .type = OPT_CALL, .call = open_orders_out, .arg = "FILE",
     .help = "write each order told once as 'order_id user quantity status key' (status\n201 or 202: the best "
             "answer its buyer got, 201 beats 202; key the\nIdempotency-Key slot, -1 none)"},
    {.name = "keyless", .type = OPT_INT, .off = OFF(keyless), .lo = 0, .hi = 100, .arg = "P", .def = "0",
     .help = "percent of buyers sending no Idempotency-Key (the degraded database path\nrefuses keyed "
             "purchases; default 0)"},
    {.name = "smoke", .type = OPT_FLAG, .off = OFF(smoke), .help = "tiny run for CI (200 buyers, 2 scalpers x 20, 20 bad)"},
    {.name = "help", .short_name = 'h', .type = OPT_FLAG, .off = OFF(help), .help = "show this help"},
};

static void usage(FILE *f)
{
    fputs("usage: seckill-bench [options]\n", f);
    opt_print_help(f, specs, OPT_COUNT(specs));
    fputs("Exit status: 0 when every invariant held, 1 when one failed, 2 on usage or setup errors.\n"
          "\n"
          "usage: seckill-bench --mode compare --redis-url redis://HOST:PORT [options]\n"
          "  engine-level strategy comparison, no HTTP; its options: --redis-url, --duration,\n"
          "  --threads, --inflight, --stock, --users, --repeat, --strategies, --replica-acks,\n"
          "  --replica-ack-timeout-ms, --csv, --smoke (seckill-bench --mode compare --help)\n",
          f);
}

/* 0, 1 (--help printed) or -1 (usage error printed). */
static int parse_args(bench *b, int argc, char **argv)
{
    char err[256];
    if (opt_load(specs, OPT_COUNT(specs), argc, argv, b, NULL, err, sizeof(err))) {
        fprintf(stderr, "seckill-bench: %s (see --help)\n", err);
        return -1;
    }
    if (b->help) {
        usage(stdout);
        return 1;
    }
    b->format = b->json ? "json" : b->csv ? "csv" : "human";
    if (b->n_targets == 0) {
        fputs("seckill-bench: at least one --url is required\n", stderr);
        return -1;
    }
    if (strcmp(b->mode, "sale") && strcmp(b->mode, "buy") && strcmp(b->mode, "ping")) {
        fprintf(stderr, "seckill-bench: unknown --mode '%s' (sale, buy, ping or compare)\n", b->mode);
        return -1;
    }
    if (b->smoke) {
        b->buyers = 200;
        b->scalpers = 2;
        b->burst = 20;
        b->bad = 20;
        if (b->duration > 1) b->duration = 1;
    }
    return 0;
}

/* Writes the results where --json-out, --json, --csv ask. 0 or 2. */
static int report(const bench *b, const hl_result *r)
{
    if (b->json_out) {
        FILE *f = fopen(b->json_out, "w");
        if (!f) {
            fprintf(stderr, "seckill-bench: cannot write %s\n", b->json_out);
            return 2;
        }
        print_json(f, b, r);
        fclose(f);
    }
    if (strcmp(b->format, "json") == 0) print_json(stdout, b, r);
    else if (strcmp(b->format, "csv") == 0) print_csv(b, r);
    else print_human(b, r);
    return 0;
}

/* Drives the HTTP load of one mode; 0, 1 (an invariant failed) or 2. */
static int run_http(bench *b)
{
    if (dlock__random_hex(b->run_id, 4) != 0) return 2;
    b->tty = isatty(1) && strcmp(b->format, "human") == 0;
    if (b->create && create_campaign(b) != 0) return 2;
    bool sale = strcmp(b->mode, "sale") == 0;
    if (sale) build_plan(b);
    b->ts_len = 36000; /* one hour of 100 ms buckets */
    for (int k = 0; k < TS_KINDS; k++) {
        b->ts[k] = calloc(b->ts_len, sizeof(uint64_t));
        if (!b->ts[k]) return 2;
    }
    b->t0_us = dlock__now_us();
    b->t0_wall_ms = dlock__wall_ms();
    hl_options ho = {.targets = b->targets, .n_targets = b->n_targets, .connections = b->connections,
                     .rate = b->rate, .retries = b->retries, .timeout_s = b->timeout, .duration_s = sale ? 0 : b->duration,
                     .warmup_s = sale ? 0 : b->warmup,
                     .progress_s = strcmp(b->format, "human") == 0 ? (b->tty ? 0.25 : 1.0) : 0,
                     .progress = progress, .resend = sale ? resend : NULL, .next = next_request,
                     .done = on_done, .ud = b};
    static hl_result r;
    if (hl_run(&ho, &r) != 0) return 2;
    if (b->tty) printf("\n");
    if (sale) tally(b);
    check_users(b);
    if (report(b, &r) != 0) return 2;
    bool ok = oversold(b) == 0 && b->over_limit_users == 0 && b->idem_violations == 0 && b->bad_unexpected == 0 &&
              b->id_collisions == 0 && b->orders_unrecorded == 0;
    return ok ? 0 : 1;
}

/* The options module's deprecation warnings (a bare duration). */
static void warn_line(const char *msg) { fprintf(stderr, "seckill-bench: %s\n", msg); }

int main(int argc, char **argv)
{
    opt_set_warn(warn_line);
    if (cmp_wanted(argc, argv)) return cmp_main(argc, argv);
    static bench b;
    int rc = parse_args(&b, argc, argv);
    if (rc == 0) rc = run_http(&b);
    else rc = rc > 0 ? 0 : 2;
    if (b.orders_out) fclose(b.orders_out);
    free(b.plan);
    free(b.user_qty);
    free(b.key_order);
    free(b.key_201);
    for (int k = 0; k < TS_KINDS; k++) free(b.ts[k]);
    free(b.told);
    return rc;
}
