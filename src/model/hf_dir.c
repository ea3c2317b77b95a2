/* Hugging Face model dirs (see hf_dir.h). */
#define _GNU_SOURCE
#include "model/hf_dir.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/shape.h"
#include "model/init.h"
#include "model/load_check.h"
#include "model/safetensors.h"
#include "model/tf_bert.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What to do when a dir holds weights in a format bertc does not read:
 * say which, and give the Python that converts it. */
static int missing_safetensors(const char *dir)
{
    static const struct {
        const char *file, *what, *load;
    } other[] = {
        {"model.safetensors.index.json", "sharded safetensors", "'%s'"},
        {"pytorch_model.bin", "PyTorch pickle weights", "'%s'"},
        {"pytorch_model.bin.index.json", "sharded PyTorch pickle weights", "'%s'"},
        /* transformers 5 dropped TensorFlow and Flax: these need 4.x. */
        {"tf_model.h5", "TensorFlow weights; use transformers 4.x", "'%s', from_tf=True"},
        {"flax_model.msgpack", "Flax weights; use transformers 4.x", "'%s', from_flax=True"},
    };
    char p[PATH_MAX];
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        if (!path_exists(path_join(p, sizeof p, dir, other[i].file))) continue;
        /* Google's original checkpoints name their config bert_config.json. */
        char load[PATH_MAX * 2 + 64];
        const char *cfg = path_exists(path_join(p, sizeof p, dir, "config.json")) ? "config.json" : "bert_config.json";
        snprintf(load, sizeof load, other[i].load, dir, dir, cfg);
        /* One line: an error is one line on stderr, so the Python is joined with "; ". */
        return err_set(ERR_INPUT,
                       "%s: no model.safetensors, only %s (%s), which bertc does not read; convert once in Python: "
                       "from transformers import BertForQuestionAnswering as M; "
                       "M.from_pretrained(%s).save_pretrained('%s', safe_serialization=True, max_shard_size='100GB')",
                       dir, other[i].file, other[i].what, load, dir);
    }
    return err_set(ERR_INPUT, "%s: no model.safetensors (a model dir holds config.json, model.safetensors, vocab.txt)",
                   dir);
}

/* The file's tensor for a table name: "bert.X" is found as "bert.X" or as
 * "X" (a bare BertModel, as sentence-transformers saves it). */
static const st_tensor *find_param(const st_file *f, const char *name)
{
    const st_tensor *t = st_find(f, name);
    if (!t && !strncmp(name, "bert.", 5)) t = st_find(f, name + 5);
    return t;
}

/* Tensors a model dir may hold that bertc does not use and need no mention. */
static int silently_ignored(const char *name)
{
    if (!strncmp(name, "bert.", 5)) name += 5;
    return !strncmp(name, "pooler.", 7) || !strcmp(name, "embeddings.position_ids") ||
           !strcmp(name, "embeddings.token_type_ids");
}

static const char *tensor_name(const void *f, int i) { return ((const st_file *)f)->tensors[i].name; }

static int load_tensors(const char *path, const st_file *f, const bert_config *cfg, const param_table *t,
                        float *block, uint64_t seed, int *qa_init)
{
    unsigned char *used = xcalloc((size_t)(f->n ? f->n : 1), 1);
    int rc = 0, qa_w = param_table_find(t, "qa_outputs.weight"), qa_b = param_table_find(t, "qa_outputs.bias");
    int qa_missing = !st_find(f, "qa_outputs.weight") && !st_find(f, "qa_outputs.bias");
    for (int i = 0; i < t->n && !rc; i++) {
        const param_info *p = &t->info[i];
        if (qa_missing && (i == qa_w || i == qa_b)) {
            model_init_param(cfg, p, block, seed);
            continue;
        }
        const st_tensor *s = find_param(f, p->name);
        if (!s) {
            int missing = 0;
            for (int j = i; j < t->n; j++) missing += !find_param(f, t->info[j].name);
            rc = err_set(ERR_INPUT, "%s: tensor %s: missing (%s%d of the %d tensors bertc needs are missing)", path,
                         p->name,
                         strncmp(p->name, "bert.", 5) ? "" : "looked for it with and without the \"bert.\" prefix; ",
                         missing, t->n);
            break;
        }
        used[s - f->tensors] = 1;
        if (s->ndim != p->ndim || s->shape[0] != p->shape[0] || (p->ndim == 2 && s->shape[1] != p->shape[1])) {
            char got[160], want[64];
            shape_str(got, sizeof got, s->ndim, s->shape);
            shape_str(want, sizeof want, p->ndim, p->shape);
            rc = err_set(ERR_INPUT, "%s: tensor %s: shape %s disagrees with config.json, which implies %s", path,
                         s->name, got, want);
            break;
        }
        float *x = block + p->offset;
        if ((rc = st_read_f32(f, s, x, p->numel))) break;
        if ((rc = load_check_finite(path, s->name, x, p->numel))) break;
    }
    if (!rc) load_log_unused(path, f->n, used, silently_ignored, tensor_name, f);
    if (!rc && qa_init) *qa_init = qa_missing;
    free(used);
    return rc;
}

int model_load(const char *dir, uint64_t seed, bert_config *cfg, param_table *t, float **block, int *qa_initialised)
{
    *block = NULL;
    memset(t, 0, sizeof *t);
    if (qa_initialised) *qa_initialised = 0;
    if (!path_is_dir(dir))
        return err_set(ERR_INPUT, "%s: %s", dir, path_exists(dir) ? "not a directory" : "no such model directory");
    char p[PATH_MAX];
    /* Weights first: a TF or PyTorch dir may lack config.json too, and the
     * conversion that fixes the weights writes config.json as well. */
    if (!path_exists(path_join(p, sizeof p, dir, "model.safetensors"))) {
        /* A Google BERT dir: bert_config.json + a TF checkpoint (tf_bert.h). */
        char prefix[PATH_MAX];
        int found, rc = tf_find_checkpoint(dir, prefix, sizeof prefix, &found);
        if (rc) return rc;
        if (!found) return missing_safetensors(dir);
        if (!path_exists(path_join(p, sizeof p, dir, "config.json")) &&
            !path_exists(path_join(p, sizeof p, dir, "bert_config.json")))
            return err_set(ERR_INPUT, "%s: a TensorFlow checkpoint but no bert_config.json (or config.json)", dir);
        return tf_bert_load(p, prefix, seed, cfg, t, block, qa_initialised);
    }
    path_join(p, sizeof p, dir, "config.json");
    if (!path_exists(p))
        return err_set(ERR_INPUT, "%s: no config.json (a model dir holds config.json, model.safetensors, vocab.txt)",
                       dir);
    bert_config c;
    int rc = config_load(p, &c);
    if (rc) return rc;
    path_join(p, sizeof p, dir, "model.safetensors");
    st_file f;
    if ((rc = st_open(p, &f))) return rc;
    param_table_init(t, &c);
    float *b = malloc(mul_size(t->total, sizeof *b));
    if (!b) {
        rc = err_set(ERR_RUNTIME, "%s: out of memory for %zu parameters", p, t->total);
    } else {
        rc = load_tensors(p, &f, &c, t, b, seed, qa_initialised);
    }
    st_close(&f);
    return load_finish(rc, &c, b, t, cfg, block);
}

static int copy_file(const char *src, const char *dst)
{
    char *data;
    size_t len;
    int rc = file_read_all(src, &data, &len);
    if (rc) return rc;
    rc = file_write_atomic(dst, data, len);
    free(data);
    return rc;
}

int model_save(const char *dir, const bert_config *cfg, const param_table *t, const float *block, const char *src_dir)
{
    int rc = mkdir_p(dir);
    if (rc) return rc;
    char p[PATH_MAX], s[PATH_MAX];
    if ((rc = config_save(path_join(p, sizeof p, dir, "config.json"), cfg))) return rc;
    rc = st_write_params(path_join(p, sizeof p, dir, "model.safetensors"), t, block);
    if (rc || !src_dir) return rc;
    /* Copying a dir onto itself would read and rewrite the same bytes: skip. */
    char rs[PATH_MAX], rd[PATH_MAX];
    if (realpath(src_dir, rs) && realpath(dir, rd) && !strcmp(rs, rd)) return 0;
    static const char *const tok_files[] = {"vocab.txt", "tokenizer_config.json"};
    for (size_t i = 0; i < 2 && !rc; i++) {
        path_join(s, sizeof s, src_dir, tok_files[i]);
        if (path_exists(s)) rc = copy_file(s, path_join(p, sizeof p, dir, tok_files[i]));
    }
    return rc;
}
