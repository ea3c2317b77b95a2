/* Observability of a training run: one handle for what the trainer reports
 * besides metrics.csv (which the trainer writes itself).
 *
 * How the trainer calls it:
 *
 *   obs_options oo;
 *   obs_options_init(&oo);                     // monitor every 1 s, GPU 0, TensorBoard on
 *   oo.monitor_interval_s = opt.monitor_interval;   // --monitor-interval S (0 = no monitor thread)
 *   oo.gpu_index = using_cuda ? device : 0;
 *   oo.resume_step = resumed ? ckpt_step : 0;  // TensorBoard then drops the old points past it
 *   oo.model = model_dir; oo.train_data = train; oo.dev_data = dev;
 *   oo.options = "lr=3e-05 batch=12 ...";      // for the report's summary table
 *   obs_run *obs;
 *   if (obs_open(&obs, run_dir, &oo)) log_warn("%s", err_msg());   // obs NULL: carry on without it
 *
 *   each logged step:  obs_step(obs, &(obs_step_metrics){step, epoch, loss, lr, gnorm, scale, ex_per_s});
 *   progress line:     char mon[128]; obs_progress(obs, mon, sizeof mon);   // "GPU 97% 14.1/15.0 GiB 71°C | CPU 180% RSS 1.2 GiB"
 *   each evaluation:   obs_eval(obs, step, em, f1);
 *   anything else:     obs_scalar(obs, step, "train/whatever", v);
 *   summary facts:     obs_set_info(obs, "skipped_steps", "3");
 *   each checkpoint:   obs_report(obs);            // refreshes RUN/report.html
 *   at the end:        obs_report(obs); obs_close(obs);
 *   live page:         oo.http_port = 8008 (--http); obs_live_progress each progress line,
 *                      obs_checkpoint after each save, obs_state at changes
 *
 * Every function accepts obs == NULL and does nothing, so the trainer needs
 * no "if (obs)". None of them fails the run: a TensorBoard file or
 * monitor.csv that cannot be written is reported once (log_warn) and
 * switched off; obs_report and obs_set_info log their own failure and
 * return its code, which the trainer may ignore. Apart from obs_open, they
 * leave the caller's err_msg() as it was, so a failing run can still
 * refresh its report and close obs before returning its own error.
 *
 * Files (in RUN/): tb/events.out.tfevents.* (tb.h), monitor.csv
 * (monitor.h), info.csv (key,value: model, train, dev, options, hardware,
 * started, host, bertc, resumes, and what obs_set_info adds), report.html
 * (report.h). The evaluation scores the report charts come from the
 * trainer's CSV files (report.h lists the names it reads), not from
 * obs_eval, so `bertc report RUN` rebuilds the same page from the files.
 * A supervisor that restarts the trainer appends one line per restart to
 * RUN/restarts.log; the report counts them. */
#ifndef BERTC_OBS_OBS_H
#define BERTC_OBS_OBS_H

#include <stddef.h>
#include <stdint.h>

typedef struct obs_run obs_run;

typedef struct {
    double monitor_interval_s; /* default 1; 0 = no monitor thread (monitor.csv is not written) */
    int gpu_index;             /* GPU to watch; default 0; -1 = do not load NVML */
    int tensorboard;           /* default 1 */
    int64_t resume_step;       /* > 0 when the run resumes from a checkpoint of that step */
    /* For info.csv and the report; NULL keeps what an earlier open recorded.
     * hardware NULL on a first open = devices_hardware_line(). */
    const char *model, *train_data, *dev_data, *options, *hardware;
    /* The live page (obs_http.h): http_port < 0 = none (default), 0 = any
     * free port; http_bind NULL = 127.0.0.1. A port that is taken gives one
     * warning and the run goes on without the page. */
    int http_port;
    const char *http_bind;
    const char *http_api_key; /* NULL: the page is open (obs_http_start) */
} obs_options;

typedef struct {
    int64_t step;
    double epoch, loss, lr, grad_norm, loss_scale, examples_per_s; /* NaN = not logged */
} obs_step_metrics;

void obs_options_init(obs_options *o);
int obs_open(obs_run **out, const char *run_dir, const obs_options *o);
void obs_step(obs_run *r, const obs_step_metrics *m);
void obs_eval(obs_run *r, int64_t step, double exact_match, double f1);
void obs_scalar(obs_run *r, int64_t step, const char *tag, double value);
void obs_progress(obs_run *r, char *line, size_t cap);
/* Sets key in RUN/info.csv (rewritten atomically). */
int obs_set_info(obs_run *r, const char *key, const char *value);
/* Flushes TensorBoard and rewrites RUN/report.html from the run's files. */
int obs_report(obs_run *r);
void obs_close(obs_run *r);

/* The live numbers (live.h) beyond obs_step/obs_eval, for the live page and
 * `bertc watch`. Cheap: they copy a few numbers under a mutex, never wait on
 * the network. obs_live_progress records total_steps in info.csv the first
 * time it changes; obs_state records state there ("training", "evaluating",
 * "done", "stopped", "failed"). obs_set_mirror may be called from any
 * thread (the mirror's). */
void obs_live_progress(obs_run *r, int64_t step, int64_t total, double elapsed_s, double eta_s);
void obs_checkpoint(obs_run *r, int64_t step, const char *dir);
void obs_state(obs_run *r, const char *state);
void obs_set_mirror(obs_run *r, const char *text);
/* The live page's port, 0 when there is none. */
int obs_http_port_of(obs_run *r);

#endif
