/* The live numbers of a training run, one struct shown three ways: the
 * progress text (`bertc watch`, the live page's status box), JSON
 * (/api/status) and Prometheus text (/metrics).
 *
 * The trainer fills it as it goes (obs.h: obs_step, obs_eval, obs_eta,
 * obs_checkpoint; the monitor's last sample); `bertc watch` fills it from the
 * run dir's files alone (live_from_rundir). A value that is not known is NaN
 * (numbers) or "" (text), and is left out of the JSON/Prometheus output. */
#ifndef BERTC_OBS_LIVE_H
#define BERTC_OBS_LIVE_H

#include "obs/rundir.h"
#include "obs/svg.h"

#include <stdint.h>

typedef struct {
    char state[16];        /* "starting", "training", "evaluating", "done", "stopped", "failed", "unknown" */
    double step, total;    /* optimizer steps done, planned */
    double epoch, loss, loss_avg, lr, grad_norm, loss_scale, examples_per_s;
    double elapsed_s, eta_s;
    double eval_step, exact_match, f1;   /* the latest evaluation */
    double best_f1, best_step;
    double ckpt_step;      /* the latest checkpoint saved */
    int checkpoints;       /* complete checkpoint dirs in the run dir (watch) */
    char ckpt[512];        /* its path */
    char mirror[512];      /* the mirror's last report ("" when there is no mirror) */
    /* the monitor's last sample */
    double gpu_util_pct, gpu_mem_used_gib, gpu_mem_total_gib, gpu_temp_c, gpu_power_w;
    double cpu_pct, rss_gib;
    double updated_unix;   /* when these numbers were last changed (unix time) */
} live_status;

/* Everything unknown. */
void live_init(live_status *s);
/* From the run dir's files (r loaded with rundir_load; dir its path). */
void live_from_rundir(live_status *s, const rundir *r);

/* The progress lines:
 *   step 120/400 (30.0%) | epoch 0.60 | loss 2.3411 (avg 2.4012) | lr 2.5e-05 | 11.8 ex/s | ETA 3 min 10 s
 *   eval at step 100: EM 41.20 F1 55.10 (best F1 55.10 at step 100)
 *   checkpoint step 100: RUN/checkpoints/step-00000100
 *   GPU 97% 14.1/15.0 GiB 71°C 68 W | CPU 180% RSS 1.21 GiB
 *   mirror: ...  */
void live_text(const live_status *s, sbuf *out);
void live_json(const live_status *s, sbuf *out);
void live_prometheus(const live_status *s, sbuf *out);
/* "3 min 10 s", "unknown" for NaN or negative. */
void live_fmt_duration(char *buf, size_t cap, double s);

#endif
