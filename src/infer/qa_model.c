#include "infer/qa_model.h"

#include "core/err.h"
#include "core/fileio.h"
#include "model/hf_dir.h"
#include "model/pack.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int qa_model_load(qa_model *m, const char *dir, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    if (!path_is_dir(dir)) {
        if (path_exists(dir)) return err_set(ERR_INPUT, "%s: not a directory (a model dir holds config.json, model.safetensors, vocab.txt)", dir);
        return err_set(ERR_INPUT, "%s: no such model dir", dir);
    }
    /* Answers keep one layer's activations and no gradients (nothing is
     * saved for a backward): the trainer sets training and its recompute
     * before qa_model_start. */
    m->recompute = RECOMPUTE_LAYER;
    int rc = tokenizer_load_dir(dir, &m->voc, &m->tok);
    if (rc) return rc;
    rc = model_load(dir, seed, &m->cfg, &m->table, &m->host_params, &m->qa_initialised);
    if (rc) {
        qa_model_free(m);
        return rc;
    }
    if (vocab_size(m->voc) > m->cfg.vocab_size) {
        rc = err_set(ERR_INPUT, "%s: vocab.txt has %d tokens but config.json says vocab_size %d", dir, vocab_size(m->voc),
                     m->cfg.vocab_size);
        qa_model_free(m);
        return rc;
    }
    return 0;
}

int qa_model_select(qa_model *m, const backend_opts *bo)
{
    if (m->have_backend) return err_set(ERR_RUNTIME, "qa_model_select: the backend is already chosen");
    backend_opts q = *bo;
    q.quiet = 1;
    int rc = backend_select(&m->be, &q, &m->info);
    if (rc) return rc;
    m->have_backend = 1;
    m->asked = bo->precision;
    /* A machine without NVIDIA's kernel driver has no GPU to miss: the
     * start-up line says "cpu", and a warning on every run would be noise.
     * Where the driver is loaded, a fall-back is worth a warning (a driver
     * older than the CUDA runtime, a GPU older than sm_75, a build without
     * CUDA), and so is fp16/bf16 asked for and not given. */
    int driver = access("/proc/driver/nvidia", F_OK) == 0;
    int downgraded = bo->precision != PREC_AUTO && bo->precision != m->info.precision;
    m->notice_due = m->info.fallback[0] != 0 && !bo->quiet && (driver || downgraded);
    return 0;
}

/* The notice backend_select prints itself when not quiet (same words). */
static void fallback_notice(qa_model *m)
{
    if (!m->notice_due) return;
    m->notice_due = 0;
    if (m->asked != PREC_AUTO && m->asked != m->info.precision)
        log_warn("no usable CUDA device (%s): using the CPU backend in fp32, not %s", m->info.fallback,
                 select_precision_name(m->asked));
    else log_warn("no usable CUDA device (%s): using the CPU backend", m->info.fallback);
}

int64_t qa_model_cpu_tokens(const bert_config *cfg, int max_B, int T)
{
    int64_t all = (int64_t)max_B * T, inter = cfg->intermediate_size > 0 ? cfg->intermediate_size : 1;
    int64_t n = QA_CPU_FFN_BYTES / (inter * (int64_t)sizeof(float));
    if (n < T) n = T;
    return n < all ? n : all;
}

int qa_model_start(qa_model *m, const backend_opts *bo, int max_B, int T)
{
    if (T > m->cfg.max_position_embeddings)
        return err_set(ERR_INPUT, "--max-seq-length %d exceeds the model's max_position_embeddings %d", T,
                       m->cfg.max_position_embeddings);
    int rc = m->have_backend ? 0 : qa_model_select(m, bo);
    if (rc) return rc;
    if (m->max_tokens == QA_MAX_TOKENS_AUTO)
        m->max_tokens = m->packing == PACKING_VARLEN && !m->info.is_cuda ? qa_model_cpu_tokens(&m->cfg, max_B, T) : 0;
    bert_model_opts mo = {.cfg = &m->cfg, .be = &m->be, .max_B = max_B, .T = T,
                          .max_tokens = m->packing == PACKING_VARLEN ? m->max_tokens : 0, .recompute = m->recompute,
                          .forward_only = !m->training};
    rc = bert_model_create(&m->model, &mo);
    if (rc) return rc;
    m->max_B = max_B;
    m->T = T;
    fallback_notice(m);
    return bert_model_set_params(m->model, m->host_params);
}

void qa_model_fit_window(const qa_model *m, int *T, int T_given, int *stride, int stride_given)
{
    int max_pos = m->cfg.max_position_embeddings;
    if (T_given || *T <= max_pos) return;
    *T = max_pos;
    if (!stride_given && *stride >= *T / 2) *stride = *T / 4;
    log_info("the model has max_position_embeddings %d: windows of %d tokens, stride %d", max_pos, *T, *stride);
}

void qa_model_free(qa_model *m)
{
    if (m->model) bert_model_free(m->model);
    if (m->have_backend) backend_free(&m->be);
    free(m->host_params);
    if (m->table.info) param_table_free(&m->table);
    if (m->tok) tokenizer_free(m->tok);
    if (m->voc) vocab_free(m->voc);
    memset(m, 0, sizeof *m);
}

/* Packed prediction: the windows sorted by length and cut into pieces of
 * at most max_B windows and max_tokens tokens (model/pack.h), so that no
 * padding is computed; the logits go back to each window's positions in
 * the original order, -inf at its padding. */
static int logits_packed(qa_model *m, const features *f, float *start, float *end, volatile sig_atomic_t *stop)
{
    int n = f->n, T = f->T, max_B = bert_model_max_batch(m->model);
    int64_t cap = bert_model_max_tokens(m->model);
    size_t nn = (size_t)(n ? n : 1);
    int *len = malloc(nn * sizeof *len), *slen = malloc(nn * sizeof *slen);
    int32_t *order = malloc(nn * sizeof *order);
    int32_t *ids = malloc((size_t)cap * sizeof *ids), *types = malloc((size_t)cap * sizeof *types);
    int32_t *cu = malloc(((size_t)max_B + 1) * sizeof *cu);
    float *sl = malloc((size_t)cap * sizeof *sl), *el = malloc((size_t)cap * sizeof *el);
    int rc = 0;
    if (!len || !slen || !order || !ids || !types || !cu || !sl || !el) {
        rc = err_set(ERR_RUNTIME, "qa_model_logits: out of memory for packing %d windows", n);
        goto out;
    }
    pack_lengths(f->attention_mask, T, NULL, n, len);
    for (int i = 0; i < n; i++)
        if (len[i] == 0) {
            rc = err_set(ERR_INPUT, "window %d has no tokens", i);
            goto out;
        }
    if ((rc = pack_sort_by_length(len, n, T, order))) goto out;
    for (int i = 0; i < n; i++) slen[i] = len[order[i]];
    philox_stream rng = {0, 0, 0};
    for (int i = 0, B; i < n; i += B) {
        if (stop && *stop) {
            rc = ERR_STOPPED;
            goto out;
        }
        B = pack_cut(slen + i, n - i, max_B, cap, NULL);
        pack_piece(f->input_ids, f->token_type_ids, NULL, T, order + i, slen + i, B, ids, types, cu);
        bert_batch b = {B, T, ids, types, NULL, NULL, NULL, cu, 0};
        rc = bert_forward(m->model, &b, 0.0f, 0.0f, rng, NULL, sl, el);
        if (rc) {
            rc = err_wrap(rc, "window %d", order[i]);
            goto out;
        }
        for (int j = 0; j < B; j++) {
            size_t w = (size_t)order[i + j] * (size_t)T;
            pack_unpack_row(sl + cu[j], slen[i + j], T, start + w);
            pack_unpack_row(el + cu[j], slen[i + j], T, end + w);
        }
    }
out:
    free(len);
    free(slen);
    free(order);
    free(ids);
    free(types);
    free(cu);
    free(sl);
    free(el);
    return rc;
}

int qa_model_logits(qa_model *m, const features *f, float *start, float *end, volatile sig_atomic_t *stop)
{
    if (f->T != m->T) return err_set(ERR_RUNTIME, "qa_model_logits: features of %d tokens, model set up for %d", f->T, m->T);
    if (m->packing == PACKING_VARLEN) return logits_packed(m, f, start, end, stop);
    philox_stream rng = {0, 0, 0};
    for (int i = 0; i < f->n; i += m->max_B) {
        if (stop && *stop) return ERR_STOPPED;
        int B = f->n - i < m->max_B ? f->n - i : m->max_B;
        size_t off = (size_t)i * (size_t)f->T;
        bert_batch b = {B, f->T, f->input_ids + off, f->token_type_ids + off, f->attention_mask + off, NULL, NULL, NULL, 0};
        int rc = bert_forward(m->model, &b, 0.0f, 0.0f, rng, NULL, start + off, end + off);
        if (rc) return err_wrap(rc, "window %d", i);
    }
    return 0;
}

int qa_model_logits_alloc(qa_model *m, const features *f, float **start, float **end, volatile sig_atomic_t *stop)
{
    size_t n = (size_t)f->n * (size_t)f->T;
    *start = malloc((n ? n : 1) * sizeof **start);
    *end = malloc((n ? n : 1) * sizeof **end);
    if (!*start || !*end) return err_set(ERR_RUNTIME, "out of memory for the logits of %d windows", f->n);
    return qa_model_logits(m, f, *start, *end, stop);
}

int qa_model_predict(qa_model *m, const squad_data *d, const features *f, const postprocess_opts *o,
                     qa_predictions *out, volatile sig_atomic_t *stop)
{
    memset(out, 0, sizeof *out);
    float *start, *end;
    int rc = qa_model_logits_alloc(m, f, &start, &end, stop);
    if (!rc) rc = postprocess_predictions(d, f, start, end, o, out);
    free(start);
    free(end);
    return rc;
}
