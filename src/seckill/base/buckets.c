/* buckets.c: bucket tags, their placement on masters and the home-bucket
 * hash (buckets.h). The hash and the tag grammar are part of the stored
 * format: changing either would move users or keys of existing campaigns. */
#include "buckets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rulebook.h"
#include "sk_err.h"
#include "slot.h"

#define MAX_SALT 100000
#define NODE_MAX 64

void sk_buckets_single(const char *id, sk_buckets *out)
{
    out->k = 1;
    snprintf(out->tag[0], sizeof(out->tag[0]), "c:%s", id);
}

int sk_home_bucket(const char *user, int k)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)user; *p; p++) h = (h ^ *p) * 16777619u;
    return k > 1 ? (int)(h % (uint32_t)k) : 0;
}

static void tag_of(const char *id, int j, unsigned salt, char *buf, size_t len)
{
    if (j == 0) snprintf(buf, len, "c:%s", id);
    else snprintf(buf, len, "c:%s/%d.%u", id, j, salt);
}

static unsigned tag_slot(const char *tag) { return dlock__key_slot(tag, strlen(tag)); }

/* The masters, in the order of the first slot each serves. */
static int masters_list(sk_node_of_slot_fn node_of, void *ud, char (*m)[NODE_MAX], int max)
{
    int n = 0;
    char node[NODE_MAX];
    for (unsigned s = 0; s < DLOCK__SLOTS; s++) {
        if (node_of(ud, s, node, sizeof(node)) != 0) continue;
        int i = 0;
        while (i < n && strcmp(m[i], node) != 0) i++;
        if (i == n && n < max) snprintf(m[n++], NODE_MAX, "%s", node);
    }
    return n;
}

int sk_buckets_place(const char *id, int k, sk_node_of_slot_fn node_of, void *ud, sk_buckets *out)
{
    if (!sk_valid_campaign_id(id) || k < 1 || k > SK_MAX_SHARDS) return SK_EINVAL;
    out->k = k;
    char (*m)[NODE_MAX] = node_of ? calloc(SK_MAX_SHARDS, NODE_MAX) : NULL;
    int nm = m ? masters_list(node_of, ud, m, SK_MAX_SHARDS) : 0;
    char home[NODE_MAX] = "";
    tag_of(id, 0, 0, out->tag[0], sizeof(out->tag[0]));
    int first = 0;
    if (nm > 1 && node_of(ud, tag_slot(out->tag[0]), home, sizeof(home)) == 0)
        while (first < nm && strcmp(m[first], home) != 0) first++;
    for (int j = 1; j < k; j++) {
        unsigned salt = 0;
        if (nm > 1 && first < nm) {
            const char *want = m[(first + j) % nm];
            for (unsigned s = 0; s < MAX_SALT; s++) {
                char t[SK_BUCKET_TAG_MAX], node[NODE_MAX];
                tag_of(id, j, s, t, sizeof(t));
                if (node_of(ud, tag_slot(t), node, sizeof(node)) == 0 && strcmp(node, want) == 0) {
                    salt = s;
                    break;
                }
            }
        }
        tag_of(id, j, salt, out->tag[j], sizeof(out->tag[j]));
    }
    free(m);
    return 0;
}

size_t sk_buckets_format(const sk_buckets *b, char *buf, size_t len)
{
    size_t off = 0;
    for (int j = 0; j < b->k; j++) {
        int w = snprintf(buf + off, len - off, "%s%s", j ? "," : "", b->tag[j]);
        if (w < 0 || (size_t)w >= len - off) return 0;
        off += (size_t)w;
    }
    return off;
}

/* Bucket j's tag must be tag_of(id, j, salt) for some salt < MAX_SALT. */
static bool tag_fits(const char *id, int j, const char *t, size_t n)
{
    char want[SK_BUCKET_TAG_MAX];
    tag_of(id, j, 0, want, sizeof(want));
    if (j == 0) return n == strlen(want) && memcmp(t, want, n) == 0;
    size_t pre = strlen(want) - 1; /* "c:<id>/<j>." */
    if (n <= pre || n > pre + 5 || memcmp(t, want, pre) != 0) return false;
    if (t[pre] == '0' && n > pre + 1) return false; /* one spelling per salt */
    for (size_t i = pre; i < n; i++)
        if (t[i] < '0' || t[i] > '9') return false;
    return true;
}

int sk_buckets_parse(const char *id, int k, const char *list, sk_buckets *out)
{
    if (!sk_valid_campaign_id(id) || k < 1 || k > SK_MAX_SHARDS || !list) return SK_EINVAL;
    const char *p = list;
    for (int j = 0; j < k; j++) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (!tag_fits(id, j, p, n) || (e != NULL) != (j + 1 < k)) return SK_EINVAL;
        memcpy(out->tag[j], p, n);
        out->tag[j][n] = '\0';
        p = e ? e + 1 : p + n;
    }
    out->k = k;
    return 0;
}

void sk_bucket_key(const sk_buckets *b, int j, const char *part, char *buf, size_t len)
{
    snprintf(buf, len, "{%s}:%s", b->tag[j], part);
}
