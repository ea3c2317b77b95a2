/* bertc features: SQuAD file -> the feature windows the model sees; prints
 * the counts and, with --dump, writes the tensors as .npy for checking
 * against an outside implementation (run_qa.py's prepare_*_features). */
#include "core/args.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "data/features.h"
#include "data/squad.h"
#include "text/tokenizer.h"

#include <stdio.h>

const char cmd_features_summary[] = "tokenise a SQuAD file into feature windows; print counts, dump .npy";

static int dump_features(const char *dir, const features *f)
{
    int rc = mkdir_p(dir);
    if (rc) return rc;
    const struct {
        const char *name;
        const int32_t *data;
        int ndim;
    } arrays[] = {
        {"input_ids.npy", f->input_ids, 2},
        {"token_type_ids.npy", f->token_type_ids, 2},
        {"attention_mask.npy", f->attention_mask, 2},
        {"start_positions.npy", f->start_positions, 1},
        {"end_positions.npy", f->end_positions, 1},
        {"feature_example.npy", f->example, 1},
    };
    int64_t shape[2] = {f->n, f->T};
    char path[4096];
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        path_join(path, sizeof path, dir, arrays[i].name);
        if ((rc = npy_write_i32(path, arrays[i].data, arrays[i].ndim, shape))) return rc;
    }
    return 0;
}

int cmd_features(int argc, char **argv)
{
    const char *model = NULL, *data = NULL, *dump = NULL, *cache = NULL;
    int T = 384, stride = 128, mql = 0, threads = 0, v2 = 0;
    const arg_spec specs[] = {
        {"model", ARG_STR, &model, "DIR", "model dir (vocab.txt, optional tokenizer_config.json)", .required = 1},
        {"data", ARG_STR, &data, "FILE", "SQuAD-format JSON", .required = 1},
        {"max-seq-length", ARG_INT, &T, "N", "tokens per window (default 384)", .min = 4, .max = 1 << 20},
        {"doc-stride", ARG_INT, &stride, "N", "context tokens shared by consecutive windows (default 128)", .min = 0,
         .max = 1 << 20},
        {"max-query-length", ARG_INT, &mql, "N", "keep the first N question tokens (default: all, as run_qa.py)",
         .min = 1, .max = 1 << 20},
        {"threads", ARG_INT, &threads, "N", "threads (default: all cores)", .min = 1, .max = 4096},
        {"dump", ARG_STR, &dump, "DIR", "write the feature tensors as .npy files into DIR", .min = 0},
        {"cache", ARG_STR, &cache, "FILE", "features cache: used when valid, else rebuilt and written", .min = 0},
        {"version-2-with-negative", ARG_FLAG, &v2, NULL, "SQuAD 2.0 labels: is_impossible questions at [CLS] (as bertc train)", .min = 0},
        {0},
    };
    int rc = args_parse("features", "bertc features --model DIR --data FILE [options]", specs, argc, argv, NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (stride >= T) return err_set(ERR_INPUT, "--doc-stride %d must be below --max-seq-length %d", stride, T);

    double t0 = clock_now_s();
    vocab *v = NULL;
    tokenizer *tok = NULL;
    squad_data d = {0};
    features f = {0};
    if ((rc = tokenizer_load_dir(model, &v, &tok))) goto done;
    if ((rc = squad_load(data, &d))) goto done;
    double t1 = clock_now_s();
    feature_opts o = {.max_seq_length = T, .doc_stride = stride, .max_query_length = mql, .version_2_with_negative = v2};
    int hit = 0;
    if ((rc = features_load_or_build(cache, &d, tok, &o, threads, &f, &hit))) goto done;
    double t2 = clock_now_s();
    printf("data: %s (%d examples, %d contexts)\n", data, d.n, d.ncontexts);
    printf("answers: %d relocated, %d unfound (not used for training)\n", d.n_relocated, d.n_unfound);
    char qbuf[32] = "off";
    if (mql) snprintf(qbuf, sizeof qbuf, "%d", mql);
    printf("features: %d (max_seq_length %d, doc_stride %d, max_query_length %s)%s\n", f.n, T, stride, qbuf,
           cache ? (hit ? ", from the cache" : ", cache rebuilt") : "");
    int nlabel = 0;
    for (int i = 0; i < f.n; i++) nlabel += f.start_positions[i] != 0 || f.end_positions[i] != 0;
    printf("windows holding their answer: %d\n", nlabel);
    if (dump) {
        if ((rc = dump_features(dump, &f))) goto done;
        printf("dump: %s\n", dump);
    }
    printf("seconds: %.3f (load %.3f, features %.3f)\n", t2 - t0, t1 - t0, t2 - t1);
done:
    features_free(&f);
    squad_free(&d);
    tokenizer_free(tok);
    vocab_free(v);
    return rc;
}
