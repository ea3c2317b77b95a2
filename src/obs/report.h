/* RUN/report.html: one self-contained page (inline CSS and SVG; no script,
 * no network, no fonts) with a summary table and line charts, built from
 * the files of a run dir alone, so `bertc report RUN` can rebuild it for any
 * run, finished, running or crashed:
 *
 *   metrics.csv   step,epoch,loss,lr,grad_norm,loss_scale,examples_per_s,elapsed_s
 *                 (columns are found by name; missing ones just give no chart)
 *   eval.csv      step,[epoch,]exact_match,f1 (also accepted: em/EM, F1, or
 *                 these columns inside metrics.csv on the evaluation rows)
 *   monitor.csv   written by the monitor (monitor.h)
 *   info.csv      key,value: model, train, dev, options, hardware, started,
 *                 resumes, skipped_steps ... (obs_open / obs_set_info); a
 *                 skipped_steps or skipped column in metrics.csv (a running
 *                 count) is used when info.csv has no skipped_steps
 *   checkpoints/step-N/   counted; restarts.csv: the supervisor's rows,
 *                 its restarts counted
 *
 * Charts: loss, learning rate, throughput, gradient norm, loss scale (when
 * it changes), evaluation EM/F1, GPU utilisation, GPU memory, GPU
 * temperature, GPU power, process CPU use, memory (RSS and available). A
 * chart without data is listed under the charts with the reason instead of
 * being drawn empty. */
#ifndef BERTC_OBS_REPORT_H
#define BERTC_OBS_REPORT_H

#include "obs/svg.h"

/* Builds the page into html. ERR_INPUT when run_dir is not a directory or
 * has neither metrics.csv nor monitor.csv; a damaged CSV gives a note in
 * the page, not an error. */
int report_render(const char *run_dir, sbuf *html);
/* Renders and writes it atomically to out_path (NULL = RUN/report.html). */
int report_write(const char *run_dir, const char *out_path);

/* The page's charts alone (the live page draws the same ones): the chart
 * cards into charts, and "<li>" items naming the charts left out (and why)
 * into empty (may be NULL). */
#include "obs/rundir.h"
void report_charts(const rundir *d, sbuf *charts, sbuf *empty);
/* The page's style sheet. */
extern const char report_css[];

#endif
