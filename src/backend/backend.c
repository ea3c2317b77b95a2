/* What every backend shares: freeing through the table, and the door
 * (backend_i.get_proc) with its typed wrappers, so that the layers above
 * never call a backend's own functions by name. */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"

#include "core/err.h"

#include <stddef.h>
#include <string.h>

void backend_free(backend *b)
{
    if (!b) return;
    if (b->i && b->i->free) b->i->free(b->ctx);
    b->i = NULL;
    b->ctx = NULL;
}

void *backend_get_proc(const backend *b, const char *name)
{
    return b && b->i && b->i->get_proc ? b->i->get_proc(name) : NULL;
}

void *backend_reg_get_proc(const char *device, const char *name)
{
    return device && !strcmp(device, "cpu") ? cpu_get_proc(name) : NULL;
}

typedef int (*set_on_fn)(void *ctx, int on);
typedef int (*set_bf16_fn)(void *ctx, int on, char *impl, size_t cap);
typedef int (*set_answer_fn)(void *ctx, precision_kind p, char *kernel, size_t cap);
typedef int (*answer_check_fn)(precision_kind p, char *kernel, size_t cap);
typedef char *(*kernel_info_fn)(const char *what, char *buf, size_t cap);

int backend_set_batch_invariant(backend *b, int on)
{
    set_on_fn f = (set_on_fn)backend_get_proc(b, BACKEND_PROC_BATCH_INVARIANT);
    return f ? f(b->ctx, on) : 0;
}

int backend_attention_saves_lse(const backend *b, int HS)
{
    typedef int (*saves_lse_fn)(void *ctx, int HS);
    saves_lse_fn f = (saves_lse_fn)backend_get_proc(b, BACKEND_PROC_ATTENTION_SAVES_LSE);
    return f ? f(b->ctx, HS) != 0 : 0;
}

int backend_cpu_set_bf16(backend *b, int on, char *impl, size_t cap)
{
    set_bf16_fn f = (set_bf16_fn)backend_get_proc(b, BACKEND_PROC_BF16);
    if (!f) return err_set(ERR_INPUT, "backend_cpu_set_bf16: not a CPU backend");
    return f(b->ctx, on, impl, cap);
}

static int is_lowp(precision_kind p)
{
    return p == PREC_BF16 || p == PREC_INT8;
}

int backend_set_answer_precision(backend *b, precision_kind p, char *kernel, size_t cap)
{
    set_answer_fn f = (set_answer_fn)backend_get_proc(b, BACKEND_PROC_ANSWER_PRECISION);
    if (f) return f(b->ctx, p, kernel, cap);
    if (!is_lowp(p)) return 0;
    return err_set(ERR_INPUT, "--precision %s: answers in bf16 and int8 are computed on the CPU",
                   p == PREC_INT8 ? "int8" : "bf16");
}

int backend_answer_check(precision_kind p, char *kernel, size_t cap)
{
    answer_check_fn f = (answer_check_fn)backend_reg_get_proc("cpu", BACKEND_PROC_ANSWER_CHECK);
    return f(p, kernel, cap);
}

char *backend_kernel_info(const char *device, const char *what, char *buf, size_t cap)
{
    kernel_info_fn f = (kernel_info_fn)backend_reg_get_proc(device, BACKEND_PROC_KERNEL_INFO);
    if (f) return f(what, buf, cap);
    if (cap) buf[0] = 0;
    return buf;
}
