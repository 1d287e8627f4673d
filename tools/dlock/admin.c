/* admin.c: `dlock status NAME` (read-only: holder, TTL, last fencing
 * token, as text or --json) and `dlock release --force NAME` (deletes the
 * lock whoever holds it and says what it removed). Neither changes
 * anything unless asked to by --force.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "etcd_url.h"
#include "dlock/lock.h"
#include "dlock/semaphore.h"
#include "lockface.h"

/* On etcd a lock is a key bound to its holder's lease: no Redis layout. */
static const char *kind_name(const cli_options *o, const dlock_lock_status *st)
{
    if (dlock__etcd_url_is(o->url)) return "etcd";
    return st->kind == DLOCK_LOCK_REENTRANT ? "reentrant" : "simple";
}

/* Writes s as a JSON string (quotes included). */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void print_ttl(int64_t ttl_ms)
{
    if (ttl_ms == -1) printf("  ttl:        none (never expires)\n");
    else if (ttl_ms >= 0) printf("  ttl:        %.3f s\n", (double)ttl_ms / 1000.0);
}

static void print_text(const cli_options *o, const dlock_lock_status *st, const char *label)
{
    printf("lock '%s': %s\n", o->name, st->locked ? "held" : "free");
    if (o->prefix[0]) printf("  key:        %s%s\n", o->prefix, o->name);
    if (st->locked) {
        printf("  layout:     %s\n", kind_name(o, st));
        printf("  holder:     %s\n", st->holder[0] ? st->holder : "(not a dlock lock value)");
        printf("  label:      %s\n", label[0] ? label : "(none)");
        if (st->kind == DLOCK_LOCK_REENTRANT)
            printf("  hold count: %" PRId64 "\n", st->hold_count);
        print_ttl(st->ttl_ms);
    }
    if (st->last_fence) printf("  last fence: %" PRIu64 "\n", st->last_fence);
    else printf("  last fence: none\n");
}

static void print_json(const cli_options *o, const dlock_lock_status *st, const char *label)
{
    printf("{\"name\":");
    json_string(stdout, o->name);
    printf(",\"key\":");
    char key[2200];
    snprintf(key, sizeof(key), "%s%s", o->prefix, o->name);
    json_string(stdout, key);
    printf(",\"held\":%s", st->locked ? "true" : "false");
    if (st->locked) {
        printf(",\"layout\":\"%s\",\"holder\":", kind_name(o, st));
        json_string(stdout, st->holder);
        printf(",\"label\":");
        if (label[0]) json_string(stdout, label);
        else printf("null");
        printf(",\"hold_count\":%" PRId64 ",\"ttl_ms\":%" PRId64, st->hold_count, st->ttl_ms);
    } else {
        printf(",\"holder\":null,\"label\":null,\"hold_count\":0,\"ttl_ms\":null");
    }
    printf(",\"last_fence\":%" PRIu64 "}\n", st->last_fence);
}

/* status/release read the lock key's layout; the fair lock shares the
 * reentrant layout. Read-write locks and semaphores keep other keys. */
static int check_kind(const cli_options *o, const char *sub)
{
    const char *opt = NULL;
    if (o->kind == CLI_KIND_READ || o->kind == CLI_KIND_WRITE) opt = "--read/--write";
    else if (o->kind == CLI_KIND_SEMAPHORE && strcmp(sub, "release") == 0) opt = "--semaphore";
    if (!opt) return 0;
    cli_err("'dlock %s' does not support %s", sub, opt);
    return CLI_EXIT_USAGE;
}

/* Semaphore status: free permits out of N. */
static int semaphore_status(const cli_options *o, dlock_client *c)
{
    dlock_semaphore_options so;
    dlock_semaphore_options_init(&so);
    so.permits = o->permits;
    dlock_semaphore *sem = NULL;
    int64_t avail = 0;
    int rc = dlock_semaphore_new(c, o->name, &so, &sem);
    if (rc == 0) rc = dlock_semaphore_available(sem, &avail);
    dlock_semaphore_free(sem);
    if (rc == DLOCK_EINVAL) {
        return cli_sem_mismatch(o);
    }
    if (rc != 0) return cli_fail_name(o, rc, "cannot read semaphore");
    if (o->json) {
        printf("{\"name\":");
        json_string(stdout, o->name);
        printf(",\"permits\":%d,\"available\":%" PRId64 ",\"held\":%" PRId64 "}\n",
               o->permits, avail, (int64_t)o->permits - avail);
    } else {
        printf("semaphore '%s': %" PRId64 " of %d permits free\n", o->name, avail, o->permits);
    }
    return 0;
}

/* The kind check of subcommand sub, then a client. 0 or an exit code. */
static int connect_for(const cli_options *o, const char *sub, dlock_client **c_out)
{
    int code = check_kind(o, sub);
    return code != 0 ? code : cli_client_open(o, c_out);
}

/* NAME's status into *st. 0 or an exit code (printed). */
static int read_status(const cli_options *o, dlock_client *c, dlock_lock_status *st)
{
    memset(st, 0, sizeof(*st));
    int rc = dlock_lock_status_get(c, o->name, st);
    return rc != 0 ? cli_fail_name(o, rc, "cannot read lock") : 0;
}

int cli_cmd_status(const cli_options *o)
{
    dlock_client *c = NULL;
    int code = connect_for(o, "status", &c);
    if (code != 0) return code;
    if (o->kind == CLI_KIND_SEMAPHORE) {
        code = semaphore_status(o, c);
        dlock_client_destroy(c);
        return code;
    }
    dlock_lock_status st;
    code = read_status(o, c, &st);
    char *label = NULL;
    if (code == 0 && st.locked) { /* the holder's own label, read after it */
        int rc = dlock_lock_label_get(c, o->name, &label);
        if (rc != 0) code = cli_fail_name(o, rc, "cannot read lock");
    }
    if (code == 0) {
        if (o->json) print_json(o, &st, label ? label : "");
        else print_text(o, &st, label ? label : "");
        code = fflush(stdout) == 0 ? 0 : CLI_EXIT_OSERR;
    }
    dlock_free(label);
    dlock_client_destroy(c);
    return code;
}

/* Deletes the lock whatever its holder; prints what went. */
static int force_release(const cli_options *o, dlock_client *c, const dlock_lock_status *st)
{
    bool removed = false;
    int rc = dlock_force_unlock(c, o->name, st->kind, &removed);
    if (rc != 0) return cli_fail_name(o, rc, "cannot release lock");
    if (!removed) {
        /* Gone in between (expired or released): nothing to do. */
        if (!st->holder[0]) {
            cli_err("key '%s%s' is not a dlock lock: nothing removed", o->prefix, o->name);
            return CLI_EXIT_CONFLICT;
        }
        printf("lock '%s' was released before we could remove it: nothing removed\n", o->name);
        return 0;
    }
    printf("removed lock '%s' (key '%s%s', %s layout, holder %s", o->name, o->prefix, o->name,
           kind_name(o, st), st->holder);
    if (st->kind == DLOCK_LOCK_REENTRANT) printf(", hold count %" PRId64, st->hold_count);
    if (st->ttl_ms >= 0) printf(", %.3f s left", (double)st->ttl_ms / 1000.0);
    printf(")\n");
    return 0;
}

int cli_cmd_release(const cli_options *o)
{
    dlock_client *c = NULL;
    int code = connect_for(o, "release", &c);
    if (code != 0) return code;
    dlock_lock_status st;
    code = read_status(o, c, &st);
    if (code == 0 && !st.locked) printf("lock '%s' is free: nothing removed\n", o->name);
    else if (code == 0) code = force_release(o, c, &st);
    dlock_client_destroy(c);
    return code;
}
