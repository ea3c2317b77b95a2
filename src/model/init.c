/* Random initialisation of a parameter table (see init.h). */
#include "model/init.h"
#include "core/fileio.h"
#include "core/philox.h"

#include <math.h>
#include <string.h>

/* N(0, std) into out[0..n): Box-Muller on Philox draws, two values per
 * counter, the stream chosen by the tensor's name so that a tensor's values
 * do not depend on which other tensors exist or in which order. */
static void init_normal(float *out, size_t n, double std, uint64_t seed, const char *name)
{
    uint64_t stream = hash64(name, strlen(name), HASH64_INIT);
    const double two_pi = 6.283185307179586476925286766559;
    int64_t pairs = (int64_t)((n + 1) / 2);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < pairs; b++) {
        philox_u32x4 r = philox4x32((uint32_t)b, (uint32_t)((uint64_t)b >> 32), (uint32_t)stream,
                                    (uint32_t)(stream >> 32), (uint32_t)seed, (uint32_t)(seed >> 32));
        uint64_t a = ((uint64_t)r.v[0] << 32 | r.v[1]) >> 11, c = ((uint64_t)r.v[2] << 32 | r.v[3]) >> 11;
        double u1 = (double)(a + 1) * 0x1p-53; /* (0, 1]: log never sees 0 */
        double u2 = (double)c * 0x1p-53;
        double rad = std * sqrt(-2.0 * log(u1)), th = two_pi * u2;
        size_t i = 2 * (size_t)b;
        out[i] = (float)(rad * cos(th));
        if (i + 1 < n) out[i + 1] = (float)(rad * sin(th));
    }
}

void model_init_param(const bert_config *cfg, const param_info *p, float *block, uint64_t seed)
{
    float *x = block + p->offset;
    /* transformers: std = config.initializer_range or 0.02 */
    double std = cfg->initializer_range > 0 ? (double)cfg->initializer_range : 0.02;
    switch (p->init) {
    case PARAM_INIT_NORMAL:
        init_normal(x, p->numel, std, seed, p->name);
        /* nn.Embedding(padding_idx=pad_token_id): that row starts at zero. */
        if (!strcmp(p->name, "bert.embeddings.word_embeddings.weight") && cfg->pad_token_id >= 0 &&
            cfg->pad_token_id < cfg->vocab_size)
            memset(x + (size_t)cfg->pad_token_id * (size_t)cfg->hidden_size, 0,
                   (size_t)cfg->hidden_size * sizeof *x);
        break;
    case PARAM_INIT_ZERO:
        memset(x, 0, p->numel * sizeof *x);
        break;
    case PARAM_INIT_ONE:
        for (size_t i = 0; i < p->numel; i++) x[i] = 1.0f;
        break;
    }
}

void model_init_random(const bert_config *cfg, const param_table *t, float *block, uint64_t seed)
{
    for (int i = 0; i < t->n; i++) model_init_param(cfg, &t->info[i], block, seed);
}
