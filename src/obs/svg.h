/* Line charts as inline SVG for report.html, built in a growable text
 * buffer (sbuf, core/sbuf.h). No scripts, no fonts, no external references: a
 * chart is axes, grid, tick labels, one <polyline> per series and a legend. */
#ifndef BERTC_OBS_SVG_H
#define BERTC_OBS_SVG_H

#include "core/sbuf.h"

#include <stddef.h>

typedef struct {
    const char *name;      /* legend text */
    const double *x, *y;   /* n points; non-finite ones are left out */
    size_t n;
    const char *color;     /* CSS colour */
    int markers;           /* 1: a dot at every point (few points, e.g. evaluations) */
} svg_series;

typedef struct {
    const char *id;        /* element id, "chart-loss" */
    const char *title;
    const char *xlabel, *ylabel;
    int width, height;     /* 0 = 560 x 280 */
    double ymin, ymax;     /* fixed y range when ymin < ymax; else automatic */
    int y_zero;            /* automatic range includes 0 */
} svg_chart;

/* Appends the chart's <svg> element. Returns the number of points drawn
 * (0: nothing finite to draw; the caller usually shows a note instead). */
size_t svg_line_chart(sbuf *out, const svg_chart *c, const svg_series *s, int nseries);

/* Tick positions for [lo, hi]: a "nice" step (1, 2 or 5 times a power of
 * ten) giving about `target` ticks. Returns the count (at most cap). */
int svg_ticks(double lo, double hi, int target, double *ticks, int cap);

#endif
