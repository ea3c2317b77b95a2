/* The host-side constants of one AdamW step, shared by the CPU
 * (backend/cpu/ops_loss.c) and CUDA (backend/cuda/cuda_loss.cu) backends:
 * computed in double from the hyperparameters as the user typed them (see
 * adamw_as_typed) and rounded to float where an op takes them. */
#ifndef BERTC_BACKEND_ADAMW_CONSTS_H
#define BERTC_BACKEND_ADAMW_CONSTS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    float decay, w1, b2, c2, bc2_sqrt, eps, neg_step, grad_scale;
    int has_decay;
} adamw_consts;

/* The double a user typed for a float hyperparameter: the shortest decimal
 * that rounds to it (0.999f -> 0.999). torch computes 1 - b2, b2^t and
 * lr * wd from the Python doubles; from 0.999f itself 1 - b2 would be off
 * by 1.3e-5 relative. */
static inline double adamw_as_typed(float x)
{
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)x);
        double d = strtod(buf, NULL);
        if ((float)d == x) return d;
    }
    return x;
}

/* The constants of step t (from 1). */
static inline adamw_consts adamw_consts_make(float lr, float b1, float b2, float eps, float wd, int64_t t,
                                             float grad_scale)
{
    adamw_consts k;
    double lrd = adamw_as_typed(lr), b1d = adamw_as_typed(b1), b2d = adamw_as_typed(b2), wdd = adamw_as_typed(wd);
    double bc1 = 1.0 - pow(b1d, (double)t);
    double bc2 = 1.0 - pow(b2d, (double)t);
    k.decay = (float)(1.0 - lrd * wdd);
    k.has_decay = wd != 0.0f;
    k.w1 = (float)(1.0 - b1d);
    k.b2 = b2;
    k.c2 = (float)(1.0 - b2d);
    k.bc2_sqrt = (float)sqrt(bc2);
    k.eps = eps;
    k.neg_step = (float)(-(lrd / bc1));
    k.grad_scale = grad_scale;
    return k;
}

#endif
