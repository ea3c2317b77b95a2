/* The few core functions the CUDA module calls (err_set, err_wrap,
 * err_msg, select_auto_precision), defined in libbertc_cuda.so and
 * forwarded to the host table bertc gives the entry point (cuda_entry.c),
 * so that errors land in bertc's own error state. Compiled into the module
 * only: programs that link the backend in (gpu_check) use the real ones. */
#include "backend/cuda/cuda_host.h"

#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>

static const bertc_cuda_host *host;

/* err_set and err_wrap: formatted here, handed to the host as a string (MSG_CAP bytes at most, as
 * err.c's own buffers), since a varargs call cannot be forwarded through a function pointer. */
#define FORWARD_FORMATTED(NAME, MSG_CAP, HOST_FN)              \
    int NAME(int code, const char *fmt, ...)                   \
    {                                                          \
        char msg[MSG_CAP];                                     \
        va_list ap;                                            \
        va_start(ap, fmt);                                     \
        vsnprintf(msg, sizeof msg, fmt, ap);                   \
        va_end(ap);                                            \
        return host ? host->HOST_FN(code, msg) : code;         \
    }
FORWARD_FORMATTED(err_set, 1024, err_set_str)
FORWARD_FORMATTED(err_wrap, 512, err_wrap_str)

const char *err_msg(void)
{
    return host ? host->err_msg() : "unknown error";
}

precision_kind select_auto_precision(int cc_major, int cc_minor)
{
    if (host) return host->auto_precision(cc_major, cc_minor);
    return cc_major >= 8 ? PREC_BF16 : PREC_FP16;
}

void cuda_host_set(const bertc_cuda_host *h)
{
    host = h;
}
