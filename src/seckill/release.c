/* release.c: the Redis half of an order's lifecycle: runs order_units.lua
 * by EVALSHA (loading it on NOSCRIPT), whose SADD on a gate set makes each
 * move happen once however many workers and retries run it: the give-back
 * of a cancelled order ({c:<id>}:released), the mirror of a
 * degraded-path order ({c:<id>}:mirrored) and the give-back of a tentative
 * order refused at finalisation ({c:<id>}:dropped). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "dlock/dlock.h"
#include "release.h"
#include "sk_err.h"

extern const unsigned char sk_lua_order_units[];

static void script_sha(const char *src, char hex_out[41])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(src, strlen(src), md, &n, EVP_sha1(), NULL);
    for (unsigned int i = 0; i < n && i < 20; i++) snprintf(hex_out + 2 * i, 3, "%02x", md[i]);
    hex_out[40] = '\0';
}

int sk__eval_script(dlock__conn *rc, const char *src, int nkeys, const char **keys, int nargs,
                    const char **args, dlock__reply **reply_out)
{
    char sha[41], nk[16];
    script_sha(src, sha);
    snprintf(nk, sizeof(nk), "%d", nkeys);
    const char **argv = calloc((size_t)(nkeys + nargs + 3), sizeof(*argv));
    if (!argv) return DLOCK_ENOMEM;
    int argc = 0;
    argv[argc++] = "EVALSHA";
    argv[argc++] = sha;
    argv[argc++] = nk;
    for (int i = 0; i < nkeys; i++) argv[argc++] = keys[i];
    for (int i = 0; i < nargs; i++) argv[argc++] = args[i];
    int err = dlock__conn_cmd(rc, argc, argv, NULL, reply_out);
    if (!err && dlock__reply_is_error(*reply_out, "NOSCRIPT")) {
        dlock__reply_free(*reply_out);
        *reply_out = NULL;
        argv[0] = "EVAL";
        argv[1] = src;
        err = dlock__conn_cmd(rc, argc, argv, NULL, reply_out);
    }
    free(argv);
    return err;
}

/* Runs order_units.lua for row in direction dir; 1, 0 or a code. status:
 * the final status of a give-back ("back"), else NULL. */
static int move_units(dlock__conn *rc, const sk_order_row *row, const char *gate, const char *dir,
                      const char *status)
{
    char k_gate[128], k_stock[128], k_buyers[128], k_order[160], k_events[128], oid[24], qty[24];
    snprintf(k_gate, sizeof(k_gate), "{c:%s}:%s", row->campaign, gate);
    snprintf(k_stock, sizeof(k_stock), "{c:%s}:stock", row->campaign);
    snprintf(k_buyers, sizeof(k_buyers), "{c:%s}:buyers", row->campaign);
    snprintf(k_order, sizeof(k_order), "{c:%s}:order:%" PRIu64, row->campaign, row->order_id);
    snprintf(k_events, sizeof(k_events), "{c:%s}:events", row->campaign);
    snprintf(oid, sizeof(oid), "%" PRIu64, row->order_id);
    snprintf(qty, sizeof(qty), "%" PRId64, row->qty);
    const char *keys[5] = {k_gate, k_stock, k_buyers, k_order, k_events};
    const char *args[5] = {oid, row->user, qty, dir, status};
    dlock__reply *r = NULL;
    int err = sk__eval_script(rc, (const char *)sk_lua_order_units, status ? 5 : 3, keys, status ? 5 : 4, args, &r);
    if (err) return err;
    int out = dlock__reply_kind(r) == DLOCK__R_INTEGER ? (int)dlock__reply_int(r) : DLOCK_ESERVER;
    dlock__reply_free(r);
    return out;
}

int sk_release_order(dlock__conn *rc, const sk_order_row *row, const char *status)
{
    return move_units(rc, row, "released", "back", status ? status : "cancelled");
}

int sk_mirror_order(dlock__conn *rc, const sk_order_row *row)
{
    /* a tentative order sold a reserve unit; one persisted before the
     * reserve existed (schema 5) sold a unit of the shared stock */
    bool tentative = strcmp(row->status, "pending") == 0;
    return move_units(rc, row, "mirrored", tentative ? "hold" : "out", NULL);
}

int sk_drop_order(dlock__conn *rc, const sk_order_row *row) { return move_units(rc, row, "dropped", "drop", NULL); }
