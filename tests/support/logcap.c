/* logcap.c: see logcap.h. Messages beyond the buffer are dropped, never
 * written past it. */
#include "logcap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[65536];
static size_t log_len;

void test_log_capture(dlock_log_level level, const char *msg, void *ud)
{
    (void)ud;
    pthread_mutex_lock(&log_mu);
    int n = snprintf(log_text + log_len, sizeof(log_text) - log_len, "[%d] %s\n", (int)level, msg);
    if (n > 0 && log_len + (size_t)n < sizeof(log_text)) log_len += (size_t)n;
    pthread_mutex_unlock(&log_mu);
    if (getenv("DLOCK_TEST_VERBOSE")) fprintf(stderr, "log[%d]: %s\n", (int)level, msg);
}

bool test_log_contains(const char *needle)
{
    pthread_mutex_lock(&log_mu);
    bool found = strstr(log_text, needle) != NULL;
    pthread_mutex_unlock(&log_mu);
    return found;
}

void test_log_clear(void)
{
    pthread_mutex_lock(&log_mu);
    log_len = 0;
    log_text[0] = '\0';
    pthread_mutex_unlock(&log_mu);
}
