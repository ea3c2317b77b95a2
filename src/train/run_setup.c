/* The start of a training run (run.h): the model dir, the backend, the
 * data and its features (cached in RUN/cache/), the run dir (lock,
 * leftovers of a killed process, resume from the newest valid checkpoint),
 * the micro-batch size, the optimizer; and the cleanup of all of it. */
#define _GNU_SOURCE
#include "train/run.h"

#include "core/alloc.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fileio.h"
#include "comm/dist.h"
#include "train/ckpt.h"
#include "train/microbatch.h"
#include "train/mirror.h"
#include "train/train_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* ---- the fingerprint: settings that must not change across a resume ---- */
/* T: the window length as used (--max-seq-length, or the model's
 * max_position_embeddings when that is smaller). */
static int fingerprint(train_state *s, const trainer_opts *o, int T, const squad_data *train, int64_t total,
                       precision_kind precision)
{
    const char *files[] = {"config.json", "model.safetensors", "vocab.txt"};
    uint32_t crc[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        char p[4096];
        int rc = crc32c_file(path_join(p, sizeof p, o->model_dir, files[i]), &crc[i]);
        if (rc) return rc;
    }
    train_state_fp_set(s, "--model", "crc32c %08x %08x %08x (config.json, model.safetensors, vocab.txt)", crc[0],
                       crc[1], crc[2]);
    train_state_fp_set(s, "--train", "data hash %016llx", (unsigned long long)train->hash);
    train_state_fp_set(s, "--max-seq-length", "%d", T);
    train_state_fp_set(s, "--doc-stride", "%d", o->doc_stride);
    train_state_fp_set(s, "--max-query-length", "%d", o->max_query_length);
    train_state_fp_set(s, "--epochs", "%.17g", o->epochs);
    train_state_fp_set(s, "--max-steps", "%lld", (long long)o->max_steps);
    train_state_fp_set(s, "total steps", "%lld", (long long)total);
    train_state_fp_set(s, "--batch", "%d", o->batch);
    train_state_fp_set(s, "--lr", "%.17g", o->lr);
    train_state_fp_set(s, "--warmup", "%.17g", o->warmup);
    train_state_fp_set(s, "--weight-decay", "%.17g", o->weight_decay);
    train_state_fp_set(s, "--adam-eps", "%.17g", o->adam_eps);
    train_state_fp_set(s, "--clip", "%.17g", o->clip);
    train_state_fp_set(s, "--dropout", "%.17g", o->dropout);
    train_state_fp_set(s, "--seed", "%lld", (long long)o->seed);
    train_state_fp_set(s, "--no-shuffle", "%s", o->shuffle ? "no" : "yes");
    /* As resolved: auto is fp32 on the CPU, bf16 or fp16 on a GPU. */
    train_state_fp_set(s, "--precision", "%s", select_precision_name(precision));
    /* set only when on, so runs from before the option resume as they were */
    if (o->version_2_with_negative) train_state_fp_set(s, "--version-2-with-negative", "%s", "yes");
    return 0;
}

/* ---- --micro-batch auto: the largest that keeps activations within a
 * third of the memory available now (halving from --batch) ---- */
static int auto_micro_batch(const bert_config *cfg, int batch, int T, recompute_kind recompute)
{
    long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    double avail = pages > 0 && psize > 0 ? (double)pages * (double)psize : 4e9;
    int mb = batch;
    for (; mb > 1; mb = (mb + 1) / 2) {
        bert_model_opts mo = {.cfg = cfg, .max_B = mb, .T = T, .recompute = recompute};
        if ((double)bert_activation_bytes(&mo) <= avail / 3) break;
    }
    return mb;
}

/* --micro-batch: N as given; auto on a GPU: the largest micro-batch the
 * memory planner fits into what the device has (and --gpu-mem-limit
 * allows); auto on the CPU: auto_micro_batch. */
static int choose_micro(run_ctx *c)
{
    const trainer_opts *o = c->o;
    backend_mem mem;
    /* the planner counts the whole Adam state: a sharded rank keeps less */
    int64_t sharded = memory_optimizer_bytes_per_rank(&c->qm.cfg, 1) -
                      memory_optimizer_bytes_per_rank(&c->qm.cfg, c->rk.lay.adam_ranks);
    if (o->micro_batch > 0) {
        c->plan.micro = o->micro_batch;
    } else if (backend_mem_query(&c->qm.be, &mem) == 0 && c->qm.packing == PACKING_VARLEN) {
        /* packed: the planner counts tokens; micro-batches of --batch windows
         * and as many tokens as fit (or --max-tokens, checked) */
        recompute_kind rk = c->qm.recompute;
        int64_t budget = microbatch_budget(&mem) + sharded, cap = (int64_t)o->batch * c->plan.T;
        memory_query q = {.cfg = &c->qm.cfg, .micro = o->batch, .T = c->plan.T, .prec = c->qm.info.precision,
                          .recompute = rk};
        int64_t mt = o->max_tokens > 0 ? (o->max_tokens < cap ? o->max_tokens : cap)
                                       : memory_largest(&q, MEMORY_FIT_TOKENS, budget, cap);
        memory_answer p;
        q.max_tokens = mt;
        if (mt < c->plan.T || memory_plan(&q, &p) || p.total > budget) {
            char b1[32];
            return err_set(ERR_RUNTIME, "--packing varlen: micro-batches of %lld tokens do not fit the %s this device "
                                        "has for bertc; try a smaller --max-tokens, --recompute layer or --batch",
                           (long long)(mt > c->plan.T ? mt : c->plan.T), memory_fmt_bytes(b1, sizeof b1, budget));
        }
        c->plan.micro = o->batch;
        c->qm.max_tokens = mt;
    } else if (backend_mem_query(&c->qm.be, &mem) == 0) {
        microbatch_plan mp;
        int rc = microbatch_choose(&mp, &c->qm.cfg, c->plan.T, c->qm.info.precision,
                                   c->qm.recompute, microbatch_budget(&mem) + sharded, o->batch);
        if (rc) return rc;
        c->plan.micro = mp.micro;
    } else {
        err_clear();
        c->plan.micro = auto_micro_batch(&c->qm.cfg, o->batch, c->plan.T, c->qm.recompute);
    }
    if (!c->rk.writer) {
        c->plan.micro = c->rk.micro0; /* rank 0's choice: every rank must use the same */
    } else if (o->micro_batch <= 0) {
        /* auto: the largest micro-batch not above the planner's whose count
         * per step the data-parallel copies (the pipeline's replicas)
         * divide (cmd_train checks a given --micro-batch). */
        int m = c->plan.micro, D = c->rk.lay.replicas;
        while (m > 1 && ((o->batch + m - 1) / m) % D != 0) m--;
        if (((o->batch + m - 1) / m) % D != 0)
            return err_set(ERR_INPUT, "--batch %d: no micro-batch size gives a number of micro-batches per step that "
                           "%d ranks divide (give a --batch that is a multiple of the rank count)", o->batch, D);
        c->plan.micro = m;
    }
    c->plan.micro_batches = (o->batch + c->plan.micro - 1) / c->plan.micro;
    return 0;
}

/* Loss scaling: fp16 needs it. BERTC_DEBUG_LOSS_SCALE=1 turns it on in
 * any precision, a test hook: in fp32 on the CPU, multiplying the loss
 * gradient by a power of two and the gradients by its inverse is exact
 * (no overflow, no underflow at these sizes), so such a run must give the
 * weights of a run without it, bit for bit; that checks the wiring of the
 * scaler (scale, unscale, skipped steps, checkpoints) where fp16 cannot run. */
static int loss_scaling_wanted(precision_kind p)
{
    const char *dbg = getenv("BERTC_DEBUG_LOSS_SCALE");
    return precision_needs_loss_scaling(p) || (dbg && !strcmp(dbg, "1"));
}

/* The backend, chosen before the data is read, so that a --device or
 * --precision this machine cannot honour fails at once and leaves nothing
 * behind. */
static int select_backend(run_ctx *c)
{
    const trainer_opts *o = c->o;
    c->bo = backend_opts_default();
    c->bo.device = o->device;
    c->bo.precision = o->precision;
    c->bo.threads = o->threads;
    /* One GPU per rank of a machine. BERTC_DEBUG_DIST_ONE_GPU=1 (a test
     * hook for one-GPU machines): every rank on --gpu, summing through the
     * host (NCCL refuses two ranks on one GPU). */
    const char *one = getenv("BERTC_DEBUG_DIST_ONE_GPU");
    int shared_gpu = one && !strcmp(one, "1");
    c->bo.gpu = o->gpu + (shared_gpu ? 0 : dist_local_rank());
    c->bo.mem_limit = o->gpu_mem_limit;
    c->bo.quiet = o->quiet;
    int rc = qa_model_select(&c->qm, &c->bo);
    if (rc || o->eval_precision == PREC_AUTO || o->eval_precision == PREC_FP32) return rc;
    if (c->qm.info.is_cuda)
        return err_set(ERR_INPUT, "train --eval-precision %s: answers in bf16 and int8 are computed on the CPU; "
                                  "this run trains on the GPU (evaluate afterwards with bertc predict --device cpu)",
                       select_precision_name(o->eval_precision));
    return backend_answer_check(o->eval_precision, NULL, 0);
}

static int load_data(const char *path, squad_data *d)
{
    int rc = squad_load(path, d);
    if (rc) return rc;
    if (d->n_relocated || d->n_unfound)
        log_info("%s: %d answers moved to the nearest occurrence of their text, %d not found in their context", path,
                 d->n_relocated, d->n_unfound);
    return 0;
}

static int load_features(run_ctx *c, const squad_data *d, features *f, const char *cache_name, int *hit)
{
    feature_opts fo = {c->plan.T, c->o->doc_stride, c->o->max_query_length, c->o->version_2_with_negative};
    char cache[4096];
    snprintf(cache, sizeof cache, "%s/cache/%s", c->o->out_dir, cache_name);
    return features_load_or_build(cache, d, c->qm.tok, &fo, c->o->threads, f, hit);
}

/* What a killed process leaves: NAME.tmp.PID files of atomic writes, the
 * temp dirs of a checkpoint or of the export. Never trusted, always
 * removed at the next start. */
static int remove_leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL && !rc) {
        size_t n = strlen(e->d_name);
        int tmp = strstr(e->d_name, ".tmp.") != NULL || (n > 4 && !strcmp(e->d_name + n - 4, ".tmp"));
        if (!tmp) continue;
        char p[4096];
        rc = remove_tree(path_join(p, sizeof p, dir, e->d_name));
    }
    closedir(d);
    return rc;
}

/* One trainer per run dir: a second one would interleave checkpoints. The
 * lock goes with the process (also when it is killed). */
static int lock_run_dir(run_ctx *c)
{
    char p[4096];
    path_join(p, sizeof p, c->o->out_dir, "train.lock");
    c->dir.lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (c->dir.lock_fd < 0) return err_set(ERR_RUNTIME, "%s: %s", p, strerror(errno));
    if (flock(c->dir.lock_fd, LOCK_EX | LOCK_NB) != 0)
        return err_set(ERR_INPUT, "--out %s: another bertc train is running in this run dir (%s is locked)",
                       c->o->out_dir, p);
    return 0;
}

static int prepare_run_dir(run_ctx *c, char *ckdir, size_t cap, int *resumed)
{
    const trainer_opts *o = c->o;
    *resumed = 0;
    int rc = ckpt_clean_tmp(o->out_dir);
    if (rc) return rc;
    if (o->resume == RESUME_NEVER) {
        char p[4096];
        snprintf(p, sizeof p, "%s/checkpoints", o->out_dir);
        if (path_exists(p)) log_info("--resume never: removing the old checkpoints in %s", p);
        return remove_tree(p);
    }
    if (o->resume == RESUME_AUTO) {
        int64_t step;
        int damaged = 0;
        rc = ckpt_find_latest(o->out_dir, ckdir, cap, &step, &damaged);
        /* a fresh VM: the run dir has no valid checkpoint, the mirror may */
        if (rc == 1 && o->mirror_dir && path_is_dir(o->mirror_dir) &&
            mirror_find_latest(o->mirror_dir, ckdir, cap, &step) == 0) {
            log_info("--resume auto: %s has no valid checkpoint; resuming from the mirror: %s", o->out_dir, ckdir);
            *resumed = 1;
            return 0;
        }
        err_clear();
        if (rc == 1 && damaged)
            return err_set(ERR_RUNTIME,
                           "%s/checkpoints: all %d checkpoints are damaged (see the warnings above); nothing was "
                           "deleted; to start over use --resume never or another --out",
                           o->out_dir, damaged);
        if (rc == 1) return 0;
        if (rc) return rc;
        *resumed = 1;
        return 0;
    }
    if (!path_is_dir(o->resume_path))
        return err_set(ERR_INPUT, "--resume %s: not a checkpoint dir (use auto, never or RUN/checkpoints/step-N)",
                       o->resume_path);
    rc = ckpt_verify(o->resume_path);
    if (rc) return err_wrap(ERR_INPUT, "--resume %s", o->resume_path);
    snprintf(ckdir, cap, "%s", o->resume_path);
    *resumed = 1;
    return 0;
}

/* The window length: --max-seq-length, or, as run_qa.py does, the
 * model's max_position_embeddings when that is smaller (one warning). */
static int fit_window(run_ctx *c)
{
    const trainer_opts *o = c->o;
    int P = c->qm.cfg.max_position_embeddings;
    c->plan.T = o->max_seq_length;
    if (c->plan.T <= P) return 0;
    if (o->doc_stride >= P)
        return err_set(ERR_INPUT, "--doc-stride %d must be below the window length %d (the model's max_position_embeddings)",
                       o->doc_stride, P);
    log_warn("--max-seq-length %d is larger than the model's max_position_embeddings %d (%s): using %d", c->plan.T, P,
             o->model_dir, P);
    c->plan.T = P;
    return 0;
}

static int start_state(run_ctx *c);

static int setup_body(run_ctx *c)
{
    const trainer_opts *o = c->o;
    if (path_exists(o->out_dir) && !path_is_dir(o->out_dir))
        return err_set(ERR_INPUT, "--out %s: exists and is not a directory", o->out_dir);
    int rc = qa_model_load(&c->qm, o->model_dir, (uint64_t)o->seed);
    if (rc) return rc;
    c->qm.training = 1;
    c->qm.recompute = o->recompute;
    c->qm.packing = o->packing;
    c->qm.max_tokens = o->max_tokens;
    rc = fit_window(c);
    if (!rc) rc = c->strat->configure(c);
    if (rc) return rc;
    if (o->resume == RESUME_PATH) {
        if (!path_is_dir(o->resume_path))
            return err_set(ERR_INPUT, "--resume %s: not a checkpoint dir (use auto, never or RUN/checkpoints/step-N)",
                           o->resume_path);
        if (ckpt_verify(o->resume_path) != 0) return err_wrap(ERR_INPUT, "--resume %s", o->resume_path);
    }
    rc = select_backend(c);
    if (rc) return rc;
    /* The data before the run dir is touched: bad input leaves nothing behind. */
    rc = load_data(o->train_path, &c->data.train);
    if (rc) return rc;
    c->data.have_train = 1;
    if (o->dev_path) {
        rc = load_data(o->dev_path, &c->data.dev);
        if (rc) return rc;
        c->data.have_dev = 1;
    }
    char cache[4096];
    snprintf(cache, sizeof cache, "%s/cache", o->out_dir);
    /* With N ranks only rank 0 prepares the run dir (it ran this before
     * the others started theirs: they find its feature cache and the
     * checkpoint it chose, c->dir.resumed_from). */
    if (c->rk.writer) {
        rc = mkdir_p(cache);
        if (rc) return err_wrap(rc, "--out %s", o->out_dir);
        rc = lock_run_dir(c);
        if (!rc) rc = remove_leftovers(o->out_dir);
        if (!rc) rc = remove_leftovers(cache);
        if (!rc) rc = prepare_run_dir(c, c->dir.resumed_from, sizeof c->dir.resumed_from, &c->dir.resumed);
        if (rc) return rc;
    }
    int train_hit = 0, dev_hit = 0;
    rc = load_features(c, &c->data.train, &c->data.tf, "train.features", &train_hit);
    if (rc) return rc;
    c->data.have_tf = 1;
    if (o->dev_path) {
        rc = load_features(c, &c->data.dev, &c->data.df, "dev.features", &dev_hit);
        if (rc) return rc;
        c->data.have_df = 1;
    }
    c->data.trainable = xmalloc((size_t)(c->data.tf.n ? c->data.tf.n : 1) * sizeof *c->data.trainable);
    for (int i = 0; i < c->data.tf.n; i++)
        if (features_trainable(&c->data.tf, &c->data.train, i)) c->data.trainable[c->data.ntrainable++] = i;
    if (c->data.ntrainable == 0) return err_set(ERR_INPUT, "%s: no trainable windows (no question has an answer)", o->train_path);

    rc = loader_init(&c->data.ld, c->data.ntrainable, o->batch, o->shuffle, (uint64_t)o->seed);
    if (rc) return rc;
    c->plan.steps_per_epoch = loader_steps_per_epoch(&c->data.ld);
    c->plan.total = o->max_steps > 0 ? o->max_steps : (int64_t)ceil(o->epochs * (double)c->plan.steps_per_epoch - 1e-9);
    if (c->plan.total < 1) c->plan.total = 1;
    c->plan.warmup = optim_warmup_steps(o->warmup, c->plan.total);
    rc = choose_micro(c);
    if (rc) return rc;
    c->plan.drop_hidden = o->dropout >= 0 ? (float)o->dropout : c->qm.cfg.hidden_dropout_prob;
    c->plan.drop_attn = o->dropout >= 0 ? (float)o->dropout : c->qm.cfg.attention_probs_dropout_prob;

    rc = start_state(c);
    if (!rc) rc = c->strat->start(c);
    if (!rc) rc = loader_batch_init(&c->data.mb, c->plan.micro, c->plan.T);
    if (!rc && c->rk.writer) rc = run_log_open(c);
    if (rc) return rc;
    if (c->rk.writer) run_mirror_start(c); /* rank 0 alone writes (data parallel) */
    c->prog.last_saved_step = c->dir.resumed ? c->st.step : -1;
    if (!o->quiet && c->rk.writer) run_log_startup(c, train_hit, dev_hit);
    if (c->dir.resumed && c->rk.writer) run_layout_notes(&c->dir.prev, &c->rk.lay, o->batch);
    if (c->dir.resumed && c->st.step == c->plan.total && !o->quiet && c->rk.writer)
        printf("the run is already complete: exporting and evaluating again\n");
    fflush(stdout);
    return 0;
}

/* The run's state, the host blocks of the parameters and the Adam
 * moments: a resumed checkpoint's (its fingerprint checked against this
 * run's settings), or a fresh start's. */
static int start_state(run_ctx *c)
{
    const trainer_opts *o = c->o;
    train_state now;
    memset(&now, 0, sizeof now);
    int rc = fingerprint(&now, o, c->plan.T, &c->data.train, c->plan.total, c->qm.info.precision);
    if (rc) return rc;
    size_t nf = c->qm.table.total;
    c->host_params = c->qm.host_params;
    c->host_m = calloc(nf, sizeof(float));
    c->host_v = calloc(nf, sizeof(float));
    if (!c->host_m || !c->host_v) return err_set(ERR_RUNTIME, "out of memory for the optimizer state (%zu floats)", nf);
    if (c->dir.resumed) {
        const char *ckdir = c->dir.resumed_from;
        train_state saved;
        rc = train_ckpt_load(ckdir, &c->qm.table, c->host_params, c->host_m, c->host_v, &saved);
        if (!rc) rc = train_state_fp_compare(&saved, &now, o->out_dir);
        if (rc) return rc;
        c->st = saved;
        c->st.restarts++;
        c->dir.prev = run_layout_saved(&saved);
        run_layout_record(&c->st, &c->rk.lay);
        char where[CKPT_PATH_MAX + 16];
        snprintf(where, sizeof where, "%s/state.json", ckdir);
        rc = train_ckpt_get_scaler(&c->st, loss_scaling_wanted(c->qm.info.precision), &c->ls, where);
        if (rc) return rc;
        if (c->st.step < c->plan.total) rc = loader_seek(&c->data.ld, c->st.epoch, c->st.cursor);
        if (rc) return err_wrap(rc, "%s", ckdir);
        if (c->st.step > c->plan.total) return err_set(ERR_INPUT, "%s: step %lld is past the planned %lld steps", ckdir, (long long)c->st.step, (long long)c->plan.total);
    } else {
        c->st = now;
        c->st.shuffle_seed = c->st.rng_seed = (uint64_t)o->seed;
        lossscale_init(&c->ls, loss_scaling_wanted(c->qm.info.precision));
        train_ckpt_put_scaler(&c->st, &c->ls);
        c->st.smoothed_loss = NAN;
        run_layout_record(&c->st, &c->rk.lay);
        snprintf(c->st.version, sizeof c->st.version, "%s", BERTC_VERSION);
    }
    return 0;
}

/* What rank 0 tells the others after its set-up. */
typedef struct {
    int resumed, micro;
    char resumed_from[4096];
} setup_share;

/* The set-up: rank 0 first (it alone prepares the run dir, builds the
 * feature cache, chooses the checkpoint and the micro-batch), then the
 * others, reading what it made; every rank ends with the same error line
 * when one of them failed. With one rank the agreements and the broadcast
 * are the rank's own. */
int run_setup(run_ctx *c)
{
    int rc = c->rk.writer ? setup_body(c) : 0;
    rc = dist_agree(rc);
    if (rc) return rc;
    setup_share sh;
    memset(&sh, 0, sizeof sh);
    sh.resumed = c->dir.resumed;
    sh.micro = c->plan.micro;
    snprintf(sh.resumed_from, sizeof sh.resumed_from, "%s", c->dir.resumed_from);
    rc = dist_bcast(&sh, sizeof sh, 0);
    if (rc) return rc;
    if (!c->rk.writer) {
        c->dir.resumed = sh.resumed;
        c->rk.micro0 = sh.micro;
        snprintf(c->dir.resumed_from, sizeof c->dir.resumed_from, "%s", sh.resumed_from);
        rc = setup_body(c);
    }
    rc = dist_agree(rc);
    /* after every rank's set-up: the communicator */
    return rc ? rc : c->strat->connect(c);
}

void run_place(run_ctx *c)
{
    c->rk.rank = dist_rank();
    c->rk.ranks = dist_size();
    c->rk.writer = c->rk.rank == 0;
    c->strat = run_strategy_pick(c->o, c->rk.ranks);
}

void run_cleanup(run_ctx *c)
{
    run_mirror_stop(c); /* before the hub closes: the mirror reports to it */
    run_log_close(c);
    if (c->dir.lock_fd >= 0) close(c->dir.lock_fd);
    loader_batch_free(&c->data.mb);
    loader_free(&c->data.ld);
    if (c->opt) optim_free(c->opt);
    if (c->strat) c->strat->free(c);
    free(c->host_m);
    free(c->host_v);
    free(c->data.trainable);
    if (c->data.have_tf) features_free(&c->data.tf);
    if (c->data.have_df) features_free(&c->data.df);
    if (c->data.have_train) squad_free(&c->data.train);
    if (c->data.have_dev) squad_free(&c->data.dev);
    qa_model_free(&c->qm); /* frees host_params, which is its block */
}
