#include "train/train_ckpt.h"

#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"
#include "model/safetensors.h"
#include "train/ckpt.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* names[i] = prefix + table name; entries point into block. */
static st_entry *entries_for(const param_table *t, const char *prefix, const float *block, char ***names)
{
    st_entry *e = xcalloc((size_t)t->n, sizeof *e);
    *names = xcalloc((size_t)t->n, sizeof **names);
    for (int i = 0; i < t->n; i++) {
        const param_info *p = &t->info[i];
        size_t len = strlen(prefix) + strlen(p->name) + 1;
        (*names)[i] = xmalloc(len);
        snprintf((*names)[i], len, "%s%s", prefix, p->name);
        e[i].name = (*names)[i];
        e[i].dtype = ST_F32;
        e[i].ndim = p->ndim;
        e[i].shape[0] = p->shape[0];
        e[i].shape[1] = p->shape[1];
        e[i].data = block + p->offset;
    }
    return e;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

static int write_tensors(ckpt_writer *w, const char *file, const param_table *t, const char *p1, const float *b1,
                         const char *p2, const float *b2)
{
    char **n1, **n2 = NULL;
    st_entry *e1 = entries_for(t, p1, b1, &n1), *all = e1;
    int n = t->n;
    if (b2) {
        st_entry *e2 = entries_for(t, p2, b2, &n2);
        all = xcalloc((size_t)(2 * t->n), sizeof *all);
        memcpy(all, e1, (size_t)t->n * sizeof *all);
        memcpy(all + t->n, e2, (size_t)t->n * sizeof *all);
        free(e2);
        n = 2 * t->n;
    }
    char path[CKPT_PATH_MAX];
    int rc = st_write(ckpt_path(w, file, path, sizeof path), all, n, 1);
    if (!rc) rc = ckpt_add(w, file);
    if (all != e1) free(all);
    free(e1);
    free_names(n1, t->n);
    if (n2) free_names(n2, t->n);
    return rc;
}

static int copy_in(ckpt_writer *w, const char *model_dir, const char *name)
{
    char src[CKPT_PATH_MAX];
    path_join(src, sizeof src, model_dir, name);
    if (!path_exists(src)) return 0;
    char *data;
    size_t len;
    int rc = file_read_all(src, &data, &len);
    if (rc) return rc;
    rc = ckpt_write(w, name, data, len);
    free(data);
    return rc;
}

int train_ckpt_save(const char *run_dir, const char *model_dir, const bert_config *cfg, const param_table *t,
                    const float *params, const float *m, const float *v, const train_state *s, int keep)
{
    ckpt_writer w;
    int rc = ckpt_begin(&w, run_dir, s->step);
    if (rc) return rc;
    char path[CKPT_PATH_MAX], *json = NULL;
    size_t len;
    rc = write_tensors(&w, "model.safetensors", t, "", params, NULL, NULL);
    if (!rc) rc = write_tensors(&w, "optimizer.safetensors", t, "exp_avg.", m, "exp_avg_sq.", v);
    if (!rc) rc = train_state_to_json(s, &json, &len);
    if (!rc) rc = ckpt_write(&w, "state.json", json, len);
    free(json);
    /* config_save writes atomically (a rename inside the temp dir), then the
     * file is synced again and recorded like the others. */
    if (!rc) rc = config_save(ckpt_path(&w, "config.json", path, sizeof path), cfg);
    if (!rc) rc = ckpt_add(&w, "config.json");
    if (!rc && model_dir) rc = copy_in(&w, model_dir, "vocab.txt");
    if (!rc && model_dir) rc = copy_in(&w, model_dir, "tokenizer_config.json");
    if (!rc) rc = ckpt_commit(&w, keep);
    if (rc) {
        err_wrap(rc, "saving checkpoint step %lld", (long long)s->step);
        ckpt_abort(&w);
        return rc;
    }
    ckpt_abort(&w);
    return 0;
}

static int read_tensors(const char *dir, const char *file, const param_table *t, const char *prefix, float *block)
{
    char path[CKPT_PATH_MAX];
    path_join(path, sizeof path, dir, file);
    st_file f;
    int rc = st_open(path, &f);
    if (rc) return rc;
    for (int i = 0; i < t->n && !rc; i++) {
        const param_info *p = &t->info[i];
        char name[160];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        const st_tensor *x = st_find(&f, name);
        if (!x) {
            rc = err_set(ERR_INPUT, "%s: tensor %s is missing (a checkpoint of another model?)", path, name);
            break;
        }
        int same = x->ndim == p->ndim && x->shape[0] == p->shape[0] && (p->ndim < 2 || x->shape[1] == p->shape[1]);
        if (!same) {
            rc = err_set(ERR_INPUT, "%s: tensor %s has another shape than the model's (a checkpoint of another model?)",
                         path, name);
            break;
        }
        rc = st_read_f32(&f, x, block + p->offset, p->numel);
    }
    st_close(&f);
    return rc;
}

int train_ckpt_load(const char *dir, const param_table *t, float *params, float *m, float *v, train_state *s)
{
    char path[CKPT_PATH_MAX];
    int rc = train_state_load(path_join(path, sizeof path, dir, "state.json"), s);
    if (!rc) rc = read_tensors(dir, "model.safetensors", t, "", params);
    if (!rc) rc = read_tensors(dir, "optimizer.safetensors", t, "exp_avg.", m);
    if (!rc) rc = read_tensors(dir, "optimizer.safetensors", t, "exp_avg_sq.", v);
    return rc;
}

void train_ckpt_put_scaler(train_state *s, const loss_scaler *ls)
{
    s->loss_scale = (double)ls->scale;
    s->loss_scale_growth = ls->growth_tracker;
    s->skipped_in_row = ls->skipped_in_row;
}

int train_ckpt_get_scaler(const train_state *s, int enabled, loss_scaler *ls, const char *where)
{
    /* The scale is a float; a double that is not one was not written by bertc. */
    double v = s->loss_scale;
    float scale = isfinite(v) && fabs(v) <= FLT_MAX ? (float)v : (float)NAN;
    if (isfinite(v) && (double)scale != v)
        return err_set(ERR_INPUT, "%s: field \"loss_scale\": %.17g is not a float32 value", where, s->loss_scale);
    if (s->loss_scale_growth > INT32_MAX)
        return err_set(ERR_INPUT, "%s: field \"loss_scale_growth_tracker\": %lld is too large", where,
                       (long long)s->loss_scale_growth);
    int rc = lossscale_restore(ls, enabled, scale, (int32_t)s->loss_scale_growth, s->skipped_steps);
    if (rc) return err_wrap(rc, "%s", where);
    /* A run of non-finite steps goes on counting after a resume, so that
     * 20 in a row stop the run however often it was restarted in between. */
    ls->skipped_in_row = s->skipped_in_row;
    return 0;
}
