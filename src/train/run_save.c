/* What a training run keeps (run.h): checkpoints (train_ckpt.h over
 * ckpt.h's atomic dirs) and the exported RUN/final/ model dir. */
#define _GNU_SOURCE
#include "train/run.h"

#include "core/clock.h"
#include "core/err.h"
#include "core/fileio.h"
#include "comm/comm.h"
#include "model/hf_dir.h"
#include "train/ckpt.h"
#include "train/mirror.h"
#include "train/train_ckpt.h"

#include <stdio.h>

static int save_checkpoint(run_ctx *c);

/* The strategy gathers the parameters and the Adam state into the
 * writer's host blocks (pipeline stages: every stage's parts; sharded: the
 * moments' pieces), the writer saves, and, where the strategy says so, all
 * learn whether it could (the saves stay collective). */
int run_save_checkpoint(run_ctx *c)
{
    int rc = c->strat->gather(c, 1);
    if (!rc) rc = save_checkpoint(c);
    return c->strat->agree_saves ? comm_agree(c->rk.cm, rc) : rc;
}

static int save_checkpoint(run_ctx *c)
{
    if (!c->rk.writer) { /* rank 0 alone writes; the others hold the same weights */
        c->prog.last_saved_step = c->st.step;
        c->prog.last_save_time = clock_now_s();
        return 0;
    }
    c->st.epoch = c->data.ld.epoch;
    c->st.cursor = c->data.ld.cursor;
    c->st.rng_counter = (uint64_t)c->st.step * (uint64_t)c->plan.micro_batches;
    train_ckpt_put_scaler(&c->st, &c->ls);
    c->st.elapsed_s += clock_now_s() - c->prog.t0;
    c->prog.t0 = clock_now_s();
    /* the strategy's gather brought the moments (and the other stages'
     * parameters); this rank's parameters are its own */
    int rc = bert_model_get_params(c->qm.model, c->host_params);
    if (!rc) rc = run_log_sync(c);
    if (!rc)
        rc = train_ckpt_save(c->o->out_dir, c->o->model_dir, &c->qm.cfg, &c->qm.table, c->host_params, c->host_m,
                             c->host_v, &c->st, c->o->keep);
    if (rc) return rc;
    c->prog.last_saved_step = c->st.step;
    c->prog.last_save_time = clock_now_s();
    char dir[CKPT_PATH_MAX];
    ckpt_dir_name(dir, sizeof dir, c->o->out_dir, c->st.step);
    obs_checkpoint(c->log.obs, c->st.step, dir);
    mirror_submit(c->dir.mir, dir, c->st.step);
    run_log_report(c);
    return 0;
}

void run_mirror_start(run_ctx *c)
{
    const trainer_opts *o = c->o;
    if (!o->mirror_dir || !*o->mirror_dir) return;
    if (mirror_start(&c->dir.mir, o->mirror_dir, o->mirror_keep >= 0 ? o->mirror_keep : o->keep, o->out_dir, c->log.obs) != 0) {
        log_warn("%s; training goes on without the mirror", err_msg());
        err_clear();
        c->dir.mir = NULL;
    }
}

/* At the end the last checkpoint is worth a wait, but not forever: a dead
 * network disk must not keep the process alive. */
void run_mirror_stop(run_ctx *c)
{
    mirror_stop(c->dir.mir, 600);
    c->dir.mir = NULL;
}

/* RUN/final.tmp/ written whole, then renamed over RUN/final/. */
static int export_final(run_ctx *c, char *final, size_t cap);

/* Rank 0 exports; with N ranks all learn whether it could (the final
 * evaluation after it is collective). */
int run_export_final(run_ctx *c, char *final, size_t cap)
{
    int rc = c->strat->gather(c, 0);
    if (rc) return rc;
    if (c->rk.writer) rc = export_final(c, final, cap);
    else path_join(final, cap, c->o->out_dir, "final");
    return comm_agree(c->rk.cm, rc);
}

static int export_final(run_ctx *c, char *final, size_t cap)
{
    int rc = bert_model_get_params(c->qm.model, c->host_params);
    if (rc) return rc;
    char tmp[4200];
    path_join(final, cap, c->o->out_dir, "final");
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    rc = remove_tree(tmp);
    if (!rc) rc = model_save(tmp, &c->qm.cfg, &c->qm.table, c->host_params, c->o->model_dir);
    if (!rc) rc = remove_tree(final);
    if (!rc && rename(tmp, final) != 0) rc = err_set(ERR_RUNTIME, "%s: rename to %s failed", tmp, final);
    if (!rc) rc = fsync_parent_dir(final);
    if (rc) {
        err_wrap(rc, "exporting %s (the checkpoints are kept)", final);
        remove_tree(tmp);
    }
    return rc;
}
