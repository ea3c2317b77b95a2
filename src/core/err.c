#include "err.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char err_buf[1024];
static _Thread_local int err_last;
static int log_is_quiet;

int err_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    err_last = code;
    return code;
}

int err_wrap(int code, const char *fmt, ...)
{
    char prefix[512], old[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err_buf, sizeof old);
    /* truncation of an over-long message is acceptable */
    int w = snprintf(err_buf, sizeof err_buf, "%s: ", prefix);
    if (w >= 0 && (size_t)w < sizeof err_buf) snprintf(err_buf + w, sizeof err_buf - (size_t)w, "%s", old);
    err_last = code;
    return code;
}

const char *err_msg(void) { return err_buf[0] ? err_buf : "unknown error"; }
int err_code(void) { return err_last; }
void err_clear(void) { err_buf[0] = 0; err_last = 0; }
void log_quiet(int quiet) { log_is_quiet = quiet; }

void log_info(const char *fmt, ...)
{
    if (log_is_quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bertc: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
