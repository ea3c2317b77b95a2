/* The precisions (select.h): their names, which one needs loss scaling,
 * and which one `auto` means on a GPU. Apart from select.c so that the
 * CUDA module loader (cuda_module.c), which hands select_auto_precision to
 * the module, and select.c, which loads the module, do not call each
 * other. */
#include "backend/select.h"

#include "core/err.h"

#include <string.h>

static const char *const precision_names[] = {"auto", "fp32", "tf32", "fp16", "bf16", "int8"};

int select_parse_precision(const char *s, precision_kind *out)
{
    for (int i = 0; i <= PREC_INT8; i++)
        if (s && !strcmp(s, precision_names[i])) {
            *out = (precision_kind)i;
            return 0;
        }
    return err_set(ERR_INPUT, "--precision: '%s' is not one of auto, fp32, tf32, fp16, bf16, int8", s ? s : "(null)");
}

const char *select_precision_name(precision_kind p)
{
    return p >= PREC_AUTO && p <= PREC_INT8 ? precision_names[p] : "?";
}

int precision_needs_loss_scaling(precision_kind p)
{
    return p == PREC_FP16;
}

precision_kind select_auto_precision(int cc_major, int cc_minor)
{
    (void)cc_minor;
    return cc_major >= 8 ? PREC_BF16 : PREC_FP16;
}
