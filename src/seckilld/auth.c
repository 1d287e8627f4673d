/* auth.c: the credentials a request may carry: the admin bearer token
 * and signed buyer identities (auth.h). Their reading from a request's
 * headers, and the refusals, are the HTTP layer's (http_request.c); this
 * file knows no request and keeps no state between calls. Invariants:
 * every secret comparison takes a time independent of where the inputs
 * differ; a signature is checked against every active secret (current,
 * then previous) before anything about it is reported, so a result other
 * than SK_SIG_BAD is given only for a MAC one of them made. */
#include "auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "dlock/dlock.h"
#include "rulebook.h"

enum { MAC_LEN = 32, HEX_LEN = 2 * MAC_LEN };

int sk_auth_init(sk_auth *a, const char *admin_token, const char *user_secret, const char *user_secret_prev,
                 bool legacy)
{
    memset(a, 0, sizeof(*a));
    a->admin_token = strdup(admin_token ? admin_token : "");
    a->user_secret = strdup(user_secret ? user_secret : "");
    a->user_secret_prev = strdup(user_secret_prev ? user_secret_prev : "");
    a->legacy = legacy;
    if (a->admin_token && a->user_secret && a->user_secret_prev &&
        sk_hmac_key_set(&a->mac, a->user_secret, strlen(a->user_secret)) == 0 &&
        sk_hmac_key_set(&a->mac_prev, a->user_secret_prev, strlen(a->user_secret_prev)) == 0)
        return 0;
    sk_auth_free(a);
    return DLOCK_ENOMEM;
}

void sk_auth_free(sk_auth *a)
{
    free(a->admin_token);
    free(a->user_secret);
    free(a->user_secret_prev);
    sk_hmac_key_clear(&a->mac);
    sk_hmac_key_clear(&a->mac_prev);
    memset(a, 0, sizeof(*a));
}

static bool equal_ct(const char *given, size_t glen, const char *expected, size_t elen)
{
    if (glen != elen) return false;
    return CRYPTO_memcmp(given, expected, glen) == 0;
}

bool sk_auth_is_admin(const sk_auth *a, const char *authorization)
{
    const char *tok = a->admin_token;
    if (!tok || !*tok || !authorization || strncasecmp(authorization, "Bearer ", 7) != 0) return false;
    return equal_ct(authorization + 7, strlen(authorization + 7), tok, strlen(tok));
}

/* Lower-case hex of HMAC-SHA256(key, msg) into hex (HEX_LEN + 1). */
static void mac_hex_key(const sk_hmac_key *key, const char *msg, size_t len, char hex[HEX_LEN + 1])
{
    unsigned char md[SK_HMAC_LEN];
    static const char digits[] = "0123456789abcdef";
    sk_hmac_sha256(key, msg, len, md);
    for (unsigned i = 0; i < MAC_LEN; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[HEX_LEN] = '\0';
}

/* The same under a secret used once (signing). */
static int mac_hex(const char *secret, const char *msg, size_t len, char hex[HEX_LEN + 1])
{
    sk_hmac_key key;
    if (sk_hmac_key_set(&key, secret, strlen(secret)) != 0) return -1;
    mac_hex_key(&key, msg, len, hex);
    sk_hmac_key_clear(&key);
    return 0;
}

/* The signed text: user "\n" exp, then "\n" campaign when bound; the
 * legacy form signs the user id alone (exp NULL). Length, or -1. */
static int signed_text(const char *user, const char *exp, const char *campaign, char *out, size_t cap)
{
    int n = exp ? snprintf(out, cap, "%s\n%s%s%s", user, exp, campaign ? "\n" : "", campaign ? campaign : "")
                : snprintf(out, cap, "%s", user);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

int sk_auth_sign(const char *secret, const char *user, int64_t exp, const char *campaign, char *out, size_t cap)
{
    char e[24], text[200], hex[HEX_LEN + 1];
    snprintf(e, sizeof(e), "%lld", (long long)exp);
    int n = signed_text(user, e, campaign, text, sizeof(text));
    if (n < 0 || mac_hex(secret, text, (size_t)n, hex) != 0) return -1;
    int m = campaign ? snprintf(out, cap, "v1=%s;exp=%s;c=%s", hex, e, campaign)
                     : snprintf(out, cap, "v1=%s;exp=%s", hex, e);
    return m < 0 || (size_t)m >= cap ? -1 : 0;
}

/* The parts of v1=<hex>;exp=<digits>[;c=<campaign id>], in that order,
 * each once; exp a decimal without a leading zero, at most
 * SK_SIG_EXP_MAX_S. false: malformed. */
typedef struct sig_parts {
    char hex[HEX_LEN + 1];
    char exp[16];
    char campaign[65];
    bool bound;
    int64_t exp_s;
} sig_parts;

static bool parse_v1(const char *s, sig_parts *p)
{
    memset(p, 0, sizeof(*p));
    if (strncmp(s, "v1=", 3) != 0) return false;
    s += 3;
    for (int i = 0; i < HEX_LEN; i++, s++) {
        char c = *s;
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (!hex) return false;
        p->hex[i] = (char)(c >= 'A' && c <= 'F' ? c + 32 : c);
    }
    if (strncmp(s, ";exp=", 5) != 0) return false;
    s += 5;
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 12 || (s[0] == '0' && n > 1)) return false;
    memcpy(p->exp, s, n);
    p->exp_s = strtoll(p->exp, NULL, 10);
    if (p->exp_s > SK_SIG_EXP_MAX_S) return false;
    s += n;
    if (!*s) return true;
    if (strncmp(s, ";c=", 3) != 0 || strlen(s + 3) >= sizeof(p->campaign) || !sk_valid_campaign_id(s + 3))
        return false;
    snprintf(p->campaign, sizeof(p->campaign), "%s", s + 3);
    p->bound = true;
    return true;
}

/* Whether given (HEX_LEN lower-case hex) is the MAC of text under the
 * current or the previous secret; both are always computed. */
static bool mac_matches(const sk_auth *a, const char *text, size_t len, const char *given)
{
    char cur[HEX_LEN + 1], prev[HEX_LEN + 1];
    mac_hex_key(&a->mac, text, len, cur);
    bool ok = equal_ct(given, HEX_LEN, cur, HEX_LEN);
    if (*a->user_secret_prev) {
        mac_hex_key(&a->mac_prev, text, len, prev);
        ok |= equal_ct(given, HEX_LEN, prev, HEX_LEN);
    }
    return ok;
}

/* The unexpiring form: the hex MAC of the user id, nothing else. */
static sk_sig_result check_legacy(const sk_auth *a, const char *user, const char *sig)
{
    char given[HEX_LEN + 1];
    for (int i = 0; i < HEX_LEN; i++) given[i] = (char)(sig[i] >= 'A' && sig[i] <= 'F' ? sig[i] + 32 : sig[i]);
    given[HEX_LEN] = '\0';
    if (!a->legacy) return SK_SIG_LEGACY;
    return mac_matches(a, user, strlen(user), given) ? SK_SIG_OK : SK_SIG_BAD;
}

static bool all_hex(const char *s)
{
    return strlen(s) == HEX_LEN && strspn(s, "0123456789abcdefABCDEF") == HEX_LEN;
}

sk_sig_result sk_auth_check_sig(const sk_auth *a, const char *user, const char *sig, const char *campaign,
                                int64_t now_s, char bound[65])
{
    bound[0] = '\0';
    if (!sig) return SK_SIG_MISSING;
    if (all_hex(sig)) return check_legacy(a, user, sig);
    sig_parts p;
    char text[200];
    if (!parse_v1(sig, &p)) return SK_SIG_MALFORMED;
    int n = signed_text(user, p.exp, p.bound ? p.campaign : NULL, text, sizeof(text));
    if (n < 0 || !mac_matches(a, text, (size_t)n, p.hex)) return SK_SIG_BAD;
    if (now_s > p.exp_s + SK_SIG_SKEW_S) return SK_SIG_EXPIRED;
    if (p.bound && campaign && strcmp(campaign, p.campaign) != 0) return SK_SIG_CAMPAIGN;
    if (p.bound) memcpy(bound, p.campaign, strlen(p.campaign) + 1);
    return SK_SIG_OK;
}
