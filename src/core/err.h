/* Errors and logging.
 *
 * Library code never exits: it returns an error code and leaves a message
 * with err_set(). Only main() decides to print it and exit. Codes are the
 * process exit codes of DESIGN.md so main can return them as they are. */
#ifndef BERTC_ERR_H
#define BERTC_ERR_H

#include <stdarg.h>

enum {
    ERR_OK = 0,
    ERR_RUNTIME = 1,   /* something failed at run time (I/O, memory, device) */
    ERR_INPUT = 2,     /* bad usage or bad input file */
    ERR_STOPPED = 75,  /* stopped by a signal after saving a checkpoint */
};

/* Formats the message into a thread-local buffer and returns code, so that
 * `return err_set(ERR_INPUT, "%s: bad magic", path);` is one line. */
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with "prefix: " (adds context on the way up). */
int err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *err_msg(void);
int err_code(void);
void err_clear(void);

/* Messages to stderr. log_quiet(1) silences info (tests). */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_quiet(int quiet);

#endif
