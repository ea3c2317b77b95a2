/* Google BERT checkpoints into bertc's parameter table (see tf_bert.h). */
#define _GNU_SOURCE
#include "model/tf_bert.h"
#include "core/alloc.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/shape.h"
#include "model/init.h"
#include "model/load_check.h"
#include "model/safetensors.h"
#include "model/tf_bundle.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tf_bert_name(const char *hf, char *out, size_t cap, int *transposed)
{
    *transposed = 0;
    if (!strcmp(hf, "qa_outputs.weight")) return snprintf(out, cap, "cls/squad/output_weights") >= (int)cap ? -1 : 0;
    if (!strcmp(hf, "qa_outputs.bias")) return snprintf(out, cap, "cls/squad/output_bias") >= (int)cap ? -1 : 0;
    if (strncmp(hf, "bert.", 5)) return -1;
    char buf[128];
    if (snprintf(buf, sizeof buf, "%s", hf + 5) >= (int)sizeof buf) return -1;
    char *dot = strrchr(buf, '.');
    if (!dot) return -1;
    *dot = 0;
    const char *kind = dot + 1; /* weight | bias */
    int ln = strlen(buf) >= 9 && !strcmp(buf + strlen(buf) - 9, "LayerNorm");
    int emb = !strncmp(buf, "embeddings.", 11) && !ln;
    /* "encoder.layer.N." becomes "encoder/layer_N/", every other '.' a '/'. */
    char tf[160];
    size_t n = (size_t)snprintf(tf, sizeof tf, "bert/");
    for (const char *p = buf; *p && n + 2 < sizeof tf; p++) {
        if (!strncmp(p, "layer.", 6) && p[6] >= '0' && p[6] <= '9') {
            n += (size_t)snprintf(tf + n, sizeof tf - n, "layer_");
            p += 5;
        } else tf[n++] = *p == '.' ? '/' : *p;
    }
    tf[n] = 0;
    const char *suffix;
    if (emb) suffix = strcmp(kind, "weight") ? NULL : "";
    else if (ln) suffix = !strcmp(kind, "weight") ? "/gamma" : "/beta";
    else if (!strcmp(kind, "weight")) suffix = "/kernel", *transposed = 1;
    else suffix = "/bias";
    if (!suffix) return -1;
    return snprintf(out, cap, "%s%s", tf, suffix) >= (int)cap ? -1 : 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* The variables a fine-tuned Google checkpoint holds that bertc does not use. */
static int skipped(const char *name)
{
    return ends_with(name, "/adam_m") || ends_with(name, "/adam_v") || !strcmp(name, "global_step") ||
           !strncmp(name, "bert/pooler/", 12) || !strncmp(name, "cls/predictions/", 16) ||
           !strncmp(name, "cls/seq_relationship/", 21);
}

/* The `checkpoint` file is a text proto: model_checkpoint_path: "PATH". */
static int from_checkpoint_file(const char *dir, const char *file, char *prefix, size_t cap, int *found)
{
    char *text;
    size_t len;
    int rc = file_read_all(file, &text, &len);
    if (rc) return rc;
    const char *key = "model_checkpoint_path:";
    char *p = NULL;
    for (char *line = text; line && line < text + len;) {
        while (*line == ' ' || *line == '\t') line++;
        if (!strncmp(line, key, strlen(key))) {
            p = line + strlen(key);
            break;
        }
        line = memchr(line, '\n', (size_t)(text + len - line));
        if (line) line++;
    }
    char name[PATH_MAX];
    int ok = 0;
    if (p) {
        while (*p == ' ') p++;
        char *q = *p == '"' ? strchr(p + 1, '"') : NULL;
        size_t n = q ? (size_t)(q - p - 1) : 0;
        if (q && n > 0 && n < sizeof name && !memchr(p + 1, '\\', n)) {
            memcpy(name, p + 1, n);
            name[n] = 0;
            ok = 1;
        }
    }
    free(text);
    if (!ok)
        return err_set(ERR_INPUT, "%s: no model_checkpoint_path: \"PREFIX\" line (a TensorFlow checkpoint state file)",
                       file);
    /* TF writes the path relative to the dir, or absolute. */
    if (name[0] == '/') snprintf(prefix, cap, "%s", name);
    else path_join(prefix, cap, dir, name);
    char idx[PATH_MAX];
    snprintf(idx, sizeof idx, "%s.index", prefix);
    if (!path_exists(idx)) return err_set(ERR_INPUT, "%s: names checkpoint %s, but %s does not exist", file, name, idx);
    *found = 1;
    return 0;
}

int tf_find_checkpoint(const char *dir, char *prefix, size_t cap, int *found)
{
    char p[PATH_MAX];
    *found = 0;
    if (path_exists(path_join(p, sizeof p, dir, "checkpoint"))) return from_checkpoint_file(dir, p, prefix, cap, found);
    DIR *d = opendir(dir);
    if (!d) return 0;
    char first[256] = "", second[256] = "";
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!ends_with(e->d_name, ".index") || !strstr(e->d_name, ".ckpt")) continue;
        if (n == 0) snprintf(first, sizeof first, "%s", e->d_name);
        else if (n == 1) snprintf(second, sizeof second, "%s", e->d_name);
        n++;
    }
    closedir(d);
    if (n == 0) return 0;
    if (n > 1)
        return err_set(ERR_INPUT, "%s: %d TensorFlow checkpoints (%s, %s%s) and no `checkpoint` file to say which; "
                       "write one holding model_checkpoint_path: \"PREFIX\"", dir, n, first, second, n > 2 ? ", ..." : "");
    first[strlen(first) - 6] = 0; /* drop ".index" */
    path_join(prefix, cap, dir, first);
    *found = 1;
    return 0;
}

static const char *entry_name(const void *b, int i) { return ((const tfb_bundle *)b)->entries[i].name; }

static int load_tensors(const tfb_bundle *b, const bert_config *cfg, const char *cfg_name, const param_table *t,
                        float *block, uint64_t seed, int *qa_init)
{
    const char *path = b->index_path;
    int qa_missing = !tfb_find(b, "cls/squad/output_weights") && !tfb_find(b, "cls/squad/output_bias");
    unsigned char *used = xcalloc((size_t)(b->n ? b->n : 1), 1);
    float *tmp = NULL;
    size_t tmp_cap = 0;
    int rc = 0;
    for (int i = 0; i < t->n && !rc; i++) {
        const param_info *p = &t->info[i];
        char name[192];
        int tr;
        if (tf_bert_name(p->name, name, sizeof name, &tr)) {
            rc = err_set(ERR_RUNTIME, "tf_bert: no TensorFlow name for %s", p->name);
            break;
        }
        if (qa_missing && !strncmp(p->name, "qa_outputs.", 11)) {
            /* the same values as model_load and model_init_random give with this seed */
            model_init_param(cfg, p, block, seed);
            continue;
        }
        const tfb_entry *e = tfb_find(b, name);
        if (!e) {
            int missing = 0;
            for (int j = i; j < t->n; j++) {
                char nj[192];
                int trj;
                if (!tf_bert_name(t->info[j].name, nj, sizeof nj, &trj) && !tfb_find(b, nj)) missing++;
            }
            rc = err_set(ERR_INPUT, "%s: tensor %s: missing (%d of the %d tensors bertc needs are missing; is this a "
                         "Google BERT checkpoint?)", path, name, missing, t->n);
            break;
        }
        used[e - b->entries] = 1;
        int64_t want[2] = {p->shape[0], p->ndim == 2 ? p->shape[1] : 0};
        if (tr) want[0] = p->shape[1], want[1] = p->shape[0];
        if (e->ndim != p->ndim || e->shape[0] != want[0] || (p->ndim == 2 && e->shape[1] != want[1])) {
            char got[160], w[64];
            shape_str(got, sizeof got, e->ndim, e->shape);
            shape_str(w, sizeof w, p->ndim, want);
            rc = err_set(ERR_INPUT, "%s: tensor %s: shape %s disagrees with %s, which implies %s", path, name, got,
                         cfg_name, w);
            break;
        }
        float *x = block + p->offset;
        if (tr) {
            if (tmp_cap < p->numel) {
                free(tmp);
                tmp = xmalloc(p->numel * sizeof *tmp);
                tmp_cap = p->numel;
            }
            if ((rc = tfb_read_f32(b, e, tmp, p->numel))) break;
            size_t in = (size_t)want[0], out = (size_t)want[1];
            for (size_t r = 0; r < in; r++)
                for (size_t c = 0; c < out; c++) x[c * in + r] = tmp[r * out + c];
        } else if ((rc = tfb_read_f32(b, e, x, p->numel))) {
            break;
        }
        if ((rc = load_check_finite(path, name, x, p->numel))) break;
    }
    if (!rc) {
        load_log_unused(path, b->n, used, skipped, entry_name, b);
        if (qa_missing) log_info("%s: no cls/squad/output_weights (a pre-trained checkpoint): qa_outputs initialised",
                                 path);
        if (qa_init) *qa_init = qa_missing;
    }
    free(tmp);
    free(used);
    return rc;
}

int tf_bert_load(const char *config_path, const char *prefix, uint64_t seed, bert_config *cfg, param_table *t,
                 float **block, int *qa_initialised)
{
    *block = NULL;
    memset(t, 0, sizeof *t);
    if (qa_initialised) *qa_initialised = 0;
    bert_config c;
    int rc = config_load(config_path, &c);
    if (rc) return rc;
    tfb_bundle b;
    if ((rc = tfb_open(prefix, &b))) return rc;
    param_table_init(t, &c);
    float *blk = malloc(t->total * sizeof *blk);
    const char *base = strrchr(config_path, '/');
    if (!blk) rc = err_set(ERR_RUNTIME, "%s: out of memory for %zu parameters", prefix, t->total);
    else rc = load_tensors(&b, &c, base ? base + 1 : config_path, t, blk, seed, qa_initialised);
    tfb_close(&b);
    return load_finish(rc, &c, blk, t, cfg, block);
}

int tf_bert_export(const char *config_path, const char *prefix, const char *vocab_path, const char *src_dir,
                   int lower_case, const char *dst, uint64_t seed, int *qa_initialised)
{
    char tcp[PATH_MAX];
    if (lower_case < 0) {
        /* tokenizer_config.json of the source dir, copied as it is; else uncased. */
        if (src_dir && path_exists(path_join(tcp, sizeof tcp, src_dir, "tokenizer_config.json"))) lower_case = 2;
        else lower_case = 1;
    }
    bert_config cfg;
    param_table t;
    float *block;
    char *vtext = NULL;
    size_t vlen = 0;
    int rc = file_read_all(vocab_path, &vtext, &vlen);
    if (rc) return rc;
    if ((rc = tf_bert_load(config_path, prefix, seed, &cfg, &t, &block, qa_initialised))) {
        free(vtext);
        return rc;
    }
    char p[PATH_MAX], tc[256];
    rc = mkdir_p(dst);
    if (!rc) rc = config_save(path_join(p, sizeof p, dst, "config.json"), &cfg);
    if (!rc) rc = st_write_params(path_join(p, sizeof p, dst, "model.safetensors"), &t, block);
    if (!rc) rc = file_write_atomic(path_join(p, sizeof p, dst, "vocab.txt"), vtext, vlen);
    if (!rc && lower_case == 2) {
        char *tctext;
        size_t tclen;
        if (!(rc = file_read_all(tcp, &tctext, &tclen))) {
            rc = file_write_atomic(path_join(p, sizeof p, dst, "tokenizer_config.json"), tctext, tclen);
            free(tctext);
        }
    } else if (!rc) {
        int n = snprintf(tc, sizeof tc,
                         "{\n  \"do_lower_case\": %s,\n  \"model_max_length\": %d,\n"
                         "  \"tokenizer_class\": \"BertTokenizer\"\n}\n",
                         lower_case ? "true" : "false", cfg.max_position_embeddings);
        rc = file_write_atomic(path_join(p, sizeof p, dst, "tokenizer_config.json"), tc, (size_t)n);
    }
    free(vtext);
    free(block);
    param_table_free(&t);
    return rc;
}

/* SRC is a Google dir, or a checkpoint prefix (DIR/model.ckpt-1000) whose
 * dir holds bert_config.json and vocab.txt. */
int tf_bert_resolve(const char *src, char *prefix, char *config, char *vocab_out, char *dir, size_t cap)
{
    char p[PATH_MAX];
    if (path_is_dir(src)) {
        snprintf(dir, cap, "%s", src);
        if (path_exists(path_join(p, sizeof p, src, "model.safetensors")))
            return err_set(ERR_INPUT, "%s: already a Hugging Face model dir (model.safetensors); bertc reads it as it is",
                           src);
        int found, rc = tf_find_checkpoint(src, prefix, cap, &found);
        if (rc) return rc;
        if (!found)
            return err_set(ERR_INPUT, "%s: no TensorFlow checkpoint (no `checkpoint` file and no *.ckpt*.index)", src);
    } else {
        snprintf(p, sizeof p, "%s.index", src);
        if (!path_exists(p))
            return err_set(ERR_INPUT, "%s: neither a directory nor a checkpoint prefix (no %s)", src, p);
        snprintf(prefix, cap, "%s", src);
        snprintf(dir, cap, "%s", src);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, cap, ".");
    }
    if (!path_exists(path_join(config, cap, dir, "bert_config.json")) &&
        !path_exists(path_join(config, cap, dir, "config.json")))
        return err_set(ERR_INPUT, "%s: no bert_config.json (or config.json) beside the checkpoint", dir);
    if (!path_exists(path_join(vocab_out, cap, dir, "vocab.txt")))
        return err_set(ERR_INPUT, "%s/vocab.txt: no such file (a BERT model dir needs the WordPiece vocab.txt)", dir);
    return 0;
}


int tf_bert_is_google_dir(const char *dir)
{
    char p[PATH_MAX];
    if (!path_is_dir(dir) || path_exists(path_join(p, sizeof p, dir, "model.safetensors"))) return 0;
    int found = 0;
    if (tf_find_checkpoint(dir, p, sizeof p, &found)) {
        err_clear();
        return 1; /* a broken or ambiguous one: tf_bert_resolve says why */
    }
    return found;
}

int tf_bert_export_dir(const char *src, const char *dst, int lower_case, uint64_t seed, int *qa_initialised)
{
    char prefix[PATH_MAX], config[PATH_MAX], vocab[PATH_MAX], dir[PATH_MAX];
    int rc = tf_bert_resolve(src, prefix, config, vocab, dir, PATH_MAX);
    if (!rc) rc = mkdir_p(dst);
    if (!rc) rc = tf_bert_export(config, prefix, vocab, dir, lower_case, dst, seed, qa_initialised);
    return rc;
}
