/* campaign.c: campaign pre-heat and read-back, and order look-up in Redis.
 * A campaign lives in {c:<id>}:meta + {c:<id>}:stock and is listed in
 * seckill:campaigns; its state is computed from the Redis server clock so
 * every instance reports the same state at the same moment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "engine_parts.h"
#include "layout.h"

#define MAX_LOOKUP_CAMPAIGNS 1024

int sk_campaign_check(const sk_campaign *d, char *err, size_t errlen)
{
    const char *why = NULL;
    if (!sk_valid_campaign_id(d->id)) why = "id must be " SK_CAMPAIGN_ID_RULE;
    else if (strlen(d->title) > SK_TITLE_MAX) why = "title longer than " SK_LIMIT_TEXT(SK_TITLE_MAX) " bytes";
    else if (d->stock < 0 || d->stock > SK_STOCK_MAX) why = "stock must be 0.." SK_LIMIT_TEXT(SK_STOCK_MAX);
    else if (d->per_user_limit < 1 || d->per_user_limit > SK_PER_USER_MAX)
        why = "per_user_limit must be 1.." SK_LIMIT_TEXT(SK_PER_USER_MAX);
    else if (d->starts_at_ms < 0 || d->ends_at_ms <= d->starts_at_ms) why = "ends_at must be after starts_at";
    else if (d->price_cents < 0) why = "price_cents must be >= 0";
    else if (d->db_reserve < 0 || d->db_reserve > d->stock) why = "db_reserve must be 0..stock";
    else if (d->shards < 0 || d->shards > SK_MAX_SHARDS) why = "shards must be 1..64";
    else if (d->shards > 1 && d->bucket_tags[0] && sk_layout_of_def(d->id, d->shards, d->bucket_tags, &(sk_buckets){0}))
        why = "bucket_tags do not name the campaign's buckets";
    if (why && err && errlen) snprintf(err, errlen, "%s", why);
    return why ? SK_EINVAL : 0;
}

typedef struct camp_req {
    sk_engine *e;
    sk_campaign_cb cb;
    void *arg;
    char id[65];
    int heat_err;
    /* a sharded campaign: its other buckets' replies still due, their sum */
    int due;
    int err;
    int64_t others;
    sk_campaign_info info;
    sk_campaign def;       /* heat: the definition */
    sk_heat_mode mode;
    int64_t apart;         /* heat: units the database path keeps apart from Redis's buyers (-1: db_reserve) */
    bool heated;           /* heat: Redis took it (an error after this is not a refusal) */
    sk_buckets layout;
} camp_req;

static int64_t field_int(const char *s)
{
    return s ? strtoll(s, NULL, 10) : 0;
}

static void info_done(camp_req *q)
{
    sk_campaign_info *info = &q->info;
    /* the pre-heat was written: a failed read-back is not a refusal */
    if (q->err && q->heated) q->err = DLOCK_EUNKNOWN;
    if (q->err) {
        q->cb(q->err, NULL, q->arg);
        free(q);
        return;
    }
    info->remaining += q->others;
    if (info->remaining < 0) info->remaining = 0;
    if (info->def.shards < 1) info->def.shards = 1;
    info->sold = info->def.stock - info->remaining;
    if (info->sold < 0) info->sold = 0;
    if (info->now_ms < info->def.starts_at_ms) info->state = "scheduled";
    else if (info->now_ms >= info->def.ends_at_ms) info->state = "ended";
    else if (info->remaining <= 0) info->state = "sold_out";
    else info->state = "live";
    q->cb(0, info, q->arg);
    free(q);
}

/* A bucket's stock (GET), into q->others; the last one answers. Units in
 * transit between buckets are not counted (a move takes milliseconds). */
static void on_bucket_stock(const dlock__reply *r, int err, void *priv)
{
    camp_req *q = priv;
    if (err) q->err = err == DLOCK_EUNKNOWN ? err : SK_EUNAVAIL;
    else if (dlock__reply_kind(r) == DLOCK__R_STRING) q->others += strtoll(dlock__reply_str(r, NULL), NULL, 10);
    if (--q->due == 0) info_done(q);
}

static int ask_other_buckets(camp_req *q)
{
    if (sk_layout_of_def(q->id, q->info.def.shards, q->info.def.bucket_tags, &q->layout) != 0) return SK_EINVAL;
    for (int j = 1; j < q->layout.k; j++) {
        char key[SK_BUCKET_TAG_MAX + 16];
        sk_bucket_key(&q->layout, j, "stock", key, sizeof(key));
        const char *argv[] = {"GET", key};
        if (sk__wire_cmd(sk__engine_wire(q->e), 0, -1, 2, argv, on_bucket_stock, q) != 0) {
            q->err = SK_EUNAVAIL;
            return q->due ? 0 : SK_EUNAVAIL;
        }
        q->due++;
    }
    return 0;
}

static void on_info(const dlock__reply *r, int err, void *priv)
{
    camp_req *q = priv;
    sk_campaign_info info;
    memset(&info, 0, sizeof(info));
    if (!err && (dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) < 2))
        err = DLOCK_ESERVER;
    if (err) {
        q->cb(err == DLOCK_EUNKNOWN ? err : SK_EUNAVAIL, NULL, q->arg);
        free(q);
        return;
    }
    size_t n = dlock__reply_count(r);
    if (n < 4) {
        q->cb(SK_ENOTFOUND, NULL, q->arg);
        free(q);
        return;
    }
    info.now_ms = field_int(dlock__reply_str(dlock__reply_at(r, 0), NULL));
    info.remaining = dlock__reply_int(dlock__reply_at(r, 1)); /* clamped at 0 once summed */
    snprintf(info.def.id, sizeof(info.def.id), "%s", q->id);
    for (size_t i = 2; i + 1 < n; i += 2) {
        const char *k = dlock__reply_str(dlock__reply_at(r, i), NULL);
        const char *v = dlock__reply_str(dlock__reply_at(r, i + 1), NULL);
        if (strcmp(k, "title") == 0) snprintf(info.def.title, sizeof(info.def.title), "%s", v);
        else if (strcmp(k, "stock") == 0) info.def.stock = field_int(v);
        else if (strcmp(k, "per_user_limit") == 0) info.def.per_user_limit = field_int(v);
        else if (strcmp(k, "starts_at_ms") == 0) info.def.starts_at_ms = field_int(v);
        else if (strcmp(k, "ends_at_ms") == 0) info.def.ends_at_ms = field_int(v);
        else if (strcmp(k, "price_cents") == 0) info.def.price_cents = field_int(v);
        else if (strcmp(k, "db_reserve") == 0) info.def.db_reserve = field_int(v);
        else if (strcmp(k, "shards") == 0) info.def.shards = field_int(v);
        else if (strcmp(k, "bucket_tags") == 0) snprintf(info.def.bucket_tags, sizeof(info.def.bucket_tags), "%s", v);
    }
    q->info = info;
    if (info.def.shards > 1) {
        int rc = ask_other_buckets(q);
        if (rc == 0) return;
        q->err = SK_EUNAVAIL; /* a layout this engine cannot read */
    }
    info_done(q);
}

static int send_info(sk_engine *e, camp_req *q)
{
    char meta[96], stock[96];
    sk_campaign_key(q->id, "meta", meta, sizeof(meta));
    sk_campaign_key(q->id, "stock", stock, sizeof(stock));
    const char *args[] = {"2", meta, stock};
    return sk__wire_script(sk__engine_wire(e), SK__LUA_INFO, 3, args, on_info, q);
}

int sk_engine_campaign_get(sk_engine *e, const char *id, sk_campaign_cb cb, void *arg)
{
    if (!sk_valid_campaign_id(id) || !cb) return SK_EINVAL;
    camp_req *q = calloc(1, sizeof(*q));
    if (!q) return DLOCK_ENOMEM;
    q->e = e;
    q->cb = cb;
    q->arg = arg;
    snprintf(q->id, sizeof(q->id), "%s", id);
    int rc = send_info(e, q);
    if (rc) free(q);
    return rc;
}

static void ignore_reply(const dlock__reply *r, int err, void *priv)
{
    (void)r;
    (void)err;
    (void)priv;
}

/* A heat reply: 0, or the error it means. */
static int heat_result(const dlock__reply *r, int err)
{
    if (!err && (dlock__reply_kind(r) != DLOCK__R_ARRAY || dlock__reply_count(r) != 2)) err = DLOCK_ESERVER;
    if (!err) {
        long long code = dlock__reply_int(dlock__reply_at(r, 0));
        if (code == -1) err = SK_EEXIST;
        else if (code == -2) err = SK_ELIVE;
    } else if (err != DLOCK_EUNKNOWN) {
        err = SK_EUNAVAIL;
    }
    return err;
}

/* Every bucket is written: list and announce it, answer with a snapshot. */
static void heat_done(camp_req *q)
{
    sk_engine *e = q->e;
    int err = q->err;
    if (!err) {
        const char *argv[] = {"SADD", "seckill:campaigns", q->id};
        sk__wire_cmd(sk__engine_wire(e), 0, -1, 3, argv, ignore_reply, NULL);
        /* the persisters consume it at once (announce.h) */
        const char *ann[] = {"XADD", "seckill:announce", "MAXLEN", "~", "1000", "*", "campaign", q->id};
        sk__wire_cmd(sk__engine_wire(e), 0, -1, 8, ann, ignore_reply, NULL);
        /* The snapshot queued after the writes sees them (their replies are in). */
        q->err = 0;
        q->others = 0;
        q->heated = true;
        if (send_info(e, q) == 0) {
            /* remember the campaign: a new stock clears a local sold-out flag */
            sk__coalescer_restocked(sk__engine_coalescer(e), q->id);
            return;
        }
        err = DLOCK_EUNKNOWN; /* written, not read back */
    }
    q->cb(err, NULL, q->arg);
    free(q);
}

static void on_heat_bucket(const dlock__reply *r, int err, void *priv)
{
    camp_req *q = priv;
    err = heat_result(r, err);
    if (err && !q->err) q->err = err == DLOCK_EUNKNOWN ? err : SK_EUNAVAIL;
    if (--q->due == 0) heat_done(q);
}

static int send_heat(camp_req *q, int j, const char *mode, sk__reply_fn fn);

/* Bucket 0 decides (exists, live); the other buckets follow it. */
static void on_heat(const dlock__reply *r, int err, void *priv)
{
    camp_req *q = priv;
    q->err = heat_result(r, err);
    if (q->err || q->layout.k == 1) {
        heat_done(q);
        return;
    }
    /* bucket 0's "create" proved the campaign new: its buckets are written whole */
    const char *mode = q->mode == SK_HEAT_CREATE ? "bucket" : "force";
    q->due = 1; /* held while sending */
    for (int j = 1; j < q->layout.k; j++) {
        if (send_heat(q, j, mode, on_heat_bucket) != 0) {
            q->err = SK_EUNAVAIL;
            break;
        }
        q->due++;
    }
    if (--q->due == 0) heat_done(q);
}

/* campaign_heat.lua on bucket j: its keys, its share of the Redis stock. */
static int send_heat(camp_req *q, int j, const char *mode, sk__reply_fn fn)
{
    const sk_campaign *d = &q->def;
    const sk_buckets *b = &q->layout;
    char meta[SK_BUCKET_TAG_MAX + 16], stock[SK_BUCKET_TAG_MAX + 16], buyers[SK_BUCKET_TAG_MAX + 16];
    sk_bucket_key(b, j, "meta", meta, sizeof(meta));
    sk_bucket_key(b, j, "stock", stock, sizeof(stock));
    sk_bucket_key(b, j, "buyers", buyers, sizeof(buyers));
    char n[6][24], k[16] = "", jj[16] = "", share[24] = "", apart[24] = "";
    const int64_t v[6] = {d->stock, d->per_user_limit, d->starts_at_ms, d->ends_at_ms, d->price_cents,
                          d->db_reserve};
    for (int i = 0; i < 6; i++) snprintf(n[i], sizeof(n[i]), "%lld", (long long)v[i]);
    if (b->k > 1) {
        int64_t redis_units = d->stock - d->db_reserve;
        snprintf(k, sizeof(k), "%d", b->k);
        snprintf(jj, sizeof(jj), "%d", j);
        snprintf(share, sizeof(share), "%lld", (long long)(redis_units / b->k + (j < redis_units % b->k)));
    }
    if (q->apart >= 0) snprintf(apart, sizeof(apart), "%lld", (long long)q->apart);
    const char *tags = j == 0 && b->k > 1 ? d->bucket_tags : "";
    /* the run id of the server this connection reached (read at connect;
     * "" on a Cluster: the script reads its own node's) */
    const char *args[] = {"3", meta, stock, buyers, mode, d->title, n[0], n[1], n[2], n[3], n[4],
                          sk__server_script_runid(sk__engine_server(q->e)), n[5], k, jj, tags, share, apart};
    return sk__wire_script(sk__engine_wire(q->e), SK__LUA_HEAT, 18, args, fn, q);
}

static int node_of_slot(void *ud, unsigned slot, char *buf, size_t len)
{
    sk_engine *e = ud;
    return sk__wire_node_of_slot(sk__engine_wire(e), (int)slot, buf, len) == 0 ? 0 : DLOCK_ECONN;
}

int sk_engine_place_buckets(sk_engine *e, sk_campaign *d)
{
    d->bucket_tags[0] = '\0';
    if (d->shards <= 1) return 0;
    if (!sk__wire_up(sk__engine_wire(e), 0)) return SK_EUNAVAIL;
    sk_buckets *b = malloc(sizeof(*b));
    if (!b) return DLOCK_ENOMEM;
    int rc = sk_buckets_place(d->id, (int)d->shards, sk__engine_server(e)->cluster ? node_of_slot : NULL, e, b);
    if (!rc && sk_buckets_format(b, d->bucket_tags, sizeof(d->bucket_tags)) == 0) rc = SK_EINVAL;
    free(b);
    return rc;
}

int sk_engine_campaign_heat(sk_engine *e, const sk_campaign *d, sk_heat_mode mode,
                            sk_campaign_cb cb, void *arg)
{
    return sk_engine_campaign_heat_apart(e, d, mode, -1, cb, arg);
}

int sk_engine_campaign_heat_apart(sk_engine *e, const sk_campaign *d, sk_heat_mode mode, int64_t apart,
                                  sk_campaign_cb cb, void *arg)
{
    if (!cb || sk_campaign_check(d, NULL, 0) || apart < -1 || apart > d->stock) return SK_EINVAL;
    /* meta.runid comes from the connect-time probe: not before it answered */
    const sk__server *srv = sk__engine_server(e);
    if (srv->due > 0 || !srv->runid[0]) return SK_EUNAVAIL;
    camp_req *q = calloc(1, sizeof(*q));
    if (!q) return DLOCK_ENOMEM;
    q->e = e;
    q->cb = cb;
    q->arg = arg;
    q->mode = mode;
    q->apart = apart;
    q->def = *d;
    snprintf(q->id, sizeof(q->id), "%s", d->id);
    int rc = 0;
    if (q->def.shards > 1 && !q->def.bucket_tags[0]) rc = sk_engine_place_buckets(e, &q->def);
    if (!rc) rc = sk_layout_of_def(d->id, q->def.shards, q->def.bucket_tags, &q->layout);
    const char *modes[] = {"create", "reheat", "force"};
    if (!rc) rc = send_heat(q, 0, modes[mode], on_heat);
    if (rc) free(q);
    return rc;
}

/* ---- orders ------------------------------------------------------------- */

typedef struct order_req {
    sk_engine *e;
    sk_order_cb cb;
    void *arg;
    uint64_t order_id;
    int outstanding;
    int err;       /* first transport error */
    bool found;
    sk_order_info info;
} order_req;

static void order_done(order_req *q)
{
    if (q->found) q->cb(0, &q->info, q->arg);
    else q->cb(q->err ? q->err : SK_ENOTFOUND, NULL, q->arg);
    free(q);
}

/* A reply that answers q: a transport error is kept, q done at the last. */
static bool order_reply_ok(order_req *q, int err)
{
    if (err && !q->err) q->err = err == DLOCK_EUNKNOWN ? err : SK_EUNAVAIL;
    return !err && !q->found;
}

/* The order hash {T}:order:<id> that earlier versions wrote (one per
 * order; instances of such a version may still run during a rolling
 * upgrade, and their hashes live out their own TTL). */
static void on_order_hash(const dlock__reply *r, int err, void *priv)
{
    order_req *q = priv;
    if (order_reply_ok(q, err) && dlock__reply_kind(r) == DLOCK__R_ARRAY && dlock__reply_count(r) >= 2) {
        sk_order_info *o = &q->info;
        memset(o, 0, sizeof(*o));
        o->order_id = q->order_id;
        for (size_t i = 0; i + 1 < dlock__reply_count(r); i += 2) {
            const char *k = dlock__reply_str(dlock__reply_at(r, i), NULL);
            const char *v = dlock__reply_str(dlock__reply_at(r, i + 1), NULL);
            if (!k || !v) continue;
            if (strcmp(k, "campaign") == 0) snprintf(o->campaign, sizeof(o->campaign), "%s", v);
            else if (strcmp(k, "user") == 0) snprintf(o->user, sizeof(o->user), "%s", v);
            else if (strcmp(k, "qty") == 0) o->qty = strtoll(v, NULL, 10);
            else if (strcmp(k, "status") == 0) snprintf(o->status, sizeof(o->status), "%s", v);
        }
        q->found = true;
    }
    if (--q->outstanding == 0) order_done(q);
}

typedef struct order_status {
    order_req *q;
    char cid[65];
} order_status;

/* The order's field of {T}:order_status: "user\nqty" while accepted,
 * "user\nqty\nstatus" once a give-back changed it (order_units.lua). */
static void on_order_status(const dlock__reply *r, int err, void *priv)
{
    order_status *os = priv;
    order_req *q = os->q;
    size_t n = 0;
    const char *v = order_reply_ok(q, err) && dlock__reply_kind(r) == DLOCK__R_STRING ? dlock__reply_str(r, &n)
                                                                                        : NULL;
    const char *nl = v ? memchr(v, '\n', n) : NULL;
    if (nl && (size_t)(nl - v) < sizeof(q->info.user)) {
        sk_order_info *o = &q->info;
        memset(o, 0, sizeof(*o));
        o->order_id = q->order_id;
        snprintf(o->campaign, sizeof(o->campaign), "%s", os->cid);
        memcpy(o->user, v, (size_t)(nl - v));
        char *end = NULL;
        o->qty = strtoll(nl + 1, &end, 10);
        snprintf(o->status, sizeof(o->status), "%s", end && *end == '\n' ? end + 1 : "accepted");
        q->found = true;
    }
    free(os);
    if (--q->outstanding == 0) order_done(q);
}

/* Asks bucket tag of campaign cid for the order, in both formats. */
static int ask_hash(sk_engine *e, order_req *q, const char *tag, const char *cid)
{
    char key[SK_BUCKET_TAG_MAX + 40], oid[24];
    order_status *os = malloc(sizeof(*os));
    if (!os) return DLOCK_ENOMEM;
    os->q = q;
    snprintf(os->cid, sizeof(os->cid), "%s", cid);
    sk_tag_key(tag, "order_status", key, sizeof(key));
    snprintf(oid, sizeof(oid), "%llu", (unsigned long long)q->order_id);
    const char *hget[] = {"HGET", key, oid};
    int rc = sk__wire_cmd(sk__engine_wire(e), 0, -1, 3, hget, on_order_status, os);
    if (rc) {
        free(os);
        return rc;
    }
    q->outstanding++;
    char part[32];
    snprintf(part, sizeof(part), "order:%llu", (unsigned long long)q->order_id);
    sk_tag_key(tag, part, key, sizeof(key));
    const char *argv[] = {"HGETALL", key};
    /* the HGET is out: q lives until its reply, so a failure here is q's */
    if (sk__wire_cmd(sk__engine_wire(e), 0, -1, 2, argv, on_order_hash, q) == 0) q->outstanding++;
    else if (!q->err) q->err = SK_EUNAVAIL;
    return 0;
}

typedef struct order_layout {
    order_req *q;
    char cid[65];
} order_layout;

/* Bucket 0's layout fields: a sharded campaign's other buckets are asked too
 * (the order's bucket is its user's home, which the order id does not say). */
static void on_order_layout(const dlock__reply *r, int err, void *priv)
{
    order_layout *ol = priv;
    order_req *q = ol->q;
    sk_buckets *b = malloc(sizeof(*b));
    if (b && !err && dlock__reply_kind(r) == DLOCK__R_ARRAY && dlock__reply_count(r) == 2) {
        if (sk_layout_of_fields(ol->cid, dlock__reply_at(r, 0), dlock__reply_at(r, 1), b) == 0)
            for (int j = 1; j < b->k; j++)
                if (ask_hash(q->e, q, b->tag[j], ol->cid) != 0 && !q->err) q->err = SK_EUNAVAIL;
    } else if (err && !q->err) {
        q->err = err == DLOCK_EUNKNOWN ? err : SK_EUNAVAIL;
    }
    free(b);
    free(ol);
    if (--q->outstanding == 0) order_done(q);
}

static int ask_campaign(sk_engine *e, order_req *q, const char *cid)
{
    char tag[80], meta[96];
    snprintf(tag, sizeof(tag), "c:%s", cid);
    int rc = ask_hash(e, q, tag, cid);
    if (rc) return rc;
    order_layout *ol = malloc(sizeof(*ol));
    if (!ol) return 0; /* bucket 0 is asked; a sharded campaign's others are not */
    ol->q = q;
    snprintf(ol->cid, sizeof(ol->cid), "%s", cid);
    sk_campaign_key(cid, "meta", meta, sizeof(meta));
    const char *argv[] = {"HMGET", meta, "shards", "bucket_tags"};
    if (sk__wire_cmd(sk__engine_wire(e), 0, -1, 4, argv, on_order_layout, ol) == 0) q->outstanding++;
    else free(ol);
    return 0;
}

static void on_campaign_list(const dlock__reply *r, int err, void *priv)
{
    order_req *q = priv;
    sk_engine *e = q->e;
    q->outstanding--;
    if (err) q->err = err == DLOCK_EUNKNOWN ? err : SK_EUNAVAIL;
    else {
        size_t n = dlock__reply_count(r);
        for (size_t i = 0; i < n && i < MAX_LOOKUP_CAMPAIGNS; i++) {
            const char *cid = dlock__reply_str(dlock__reply_at(r, i), NULL);
            if (sk_valid_campaign_id(cid) && ask_campaign(e, q, cid) != 0) {
                q->err = SK_EUNAVAIL;
                break;
            }
        }
    }
    if (q->outstanding == 0) order_done(q);
}

int sk_engine_order_get(sk_engine *e, uint64_t order_id, const char *campaign, sk_order_cb cb,
                        void *arg)
{
    if (!cb || (campaign && !sk_valid_campaign_id(campaign))) return SK_EINVAL;
    order_req *q = calloc(1, sizeof(*q));
    if (!q) return DLOCK_ENOMEM;
    q->e = e;
    q->cb = cb;
    q->arg = arg;
    q->order_id = order_id;
    int rc;
    if (campaign) {
        rc = ask_campaign(e, q, campaign);
    } else {
        const char *argv[] = {"SMEMBERS", "seckill:campaigns"};
        rc = sk__wire_cmd(sk__engine_wire(e), 0, -1, 2, argv, on_campaign_list, q);
        if (rc == 0) q->outstanding++;
    }
    if (rc) free(q);
    return rc;
}
