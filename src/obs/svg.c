/* Inline SVG line charts (see svg.h). */
#include "obs/svg.h"
#include "core/alloc.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double nice_step(double range, int target)
{
    double raw = range / (target > 0 ? target : 5);
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

int svg_ticks(double lo, double hi, int target, double *ticks, int cap)
{
    if (!(hi > lo) || !isfinite(lo) || !isfinite(hi)) return 0;
    double step = nice_step(hi - lo, target);
    if (!(step > 0) || !isfinite(step)) return 0;
    int n = 0;
    for (double k = ceil(lo / step - 1e-9); n < cap; k += 1) {
        double v = k * step;
        if (v > hi + step * 1e-9) break;
        ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
    }
    return n;
}

/* A tick label with as many digits as the step needs, and no more. */
static void fmt_tick(char *buf, size_t cap, double v, double step, double maxabs)
{
    if (v == 0) {
        snprintf(buf, cap, "0");
    } else if (maxabs >= 1e6 || step < 1e-3) {
        int prec = (int)ceil(log10(maxabs / step)) + 1;
        snprintf(buf, cap, "%.*g", prec < 1 ? 1 : prec > 8 ? 8 : prec, v);
    } else if (step >= 1) {
        snprintf(buf, cap, "%.0f", v);
    } else {
        int dec = (int)ceil(-log10(step) - 1e-9);
        snprintf(buf, cap, "%.*f", dec, v);
    }
}

typedef struct {
    double x0, x1, y0, y1;       /* data range */
    double px0, px1, py0, py1;   /* plot area in pixels (py0 is the bottom) */
} frame;

static double map_x(const frame *f, double x) { return f->px0 + (x - f->x0) / (f->x1 - f->x0) * (f->px1 - f->px0); }
static double map_y(const frame *f, double y) { return f->py0 - (y - f->y0) / (f->y1 - f->y0) * (f->py0 - f->py1); }

/* Expands [lo, hi] to whole tick steps so the frame starts and ends on a
 * labelled tick; a flat series gets a band around its value. */
static void nice_range(double *lo, double *hi)
{
    if (!(*hi > *lo)) {
        double pad = fabs(*lo) > 0 ? fabs(*lo) * 0.1 : 1;
        *lo -= pad;
        *hi += pad;
    }
    double step = nice_step(*hi - *lo, 5);
    *lo = floor(*lo / step + 1e-9) * step;
    *hi = ceil(*hi / step - 1e-9) * step;
}

/* The polyline of one series. Many points are reduced to the lowest and
 * highest value in each pixel column, in their order, so spikes survive and
 * the file stays small. */
static size_t emit_polyline(sbuf *out, const frame *f, const svg_series *s)
{
    size_t drawn = 0;
    sbuf pts = {0};
    long col = -1;
    size_t lo_i = 0, hi_i = 0;
    int have = 0;
    for (size_t i = 0; i <= s->n; i++) {
        int last = i == s->n;
        double x = last ? 0 : s->x[i], y = last ? 0 : s->y[i];
        if (!last && (!isfinite(x) || !isfinite(y))) continue;
        long c = last ? -2 : lround(map_x(f, x));
        if (have && (c != col || last)) {
            size_t a = lo_i < hi_i ? lo_i : hi_i, b = lo_i < hi_i ? hi_i : lo_i;
            sb_printf(&pts, "%.1f,%.1f ", map_x(f, s->x[a]), map_y(f, s->y[a]));
            drawn++;
            if (b != a) {
                sb_printf(&pts, "%.1f,%.1f ", map_x(f, s->x[b]), map_y(f, s->y[b]));
                drawn++;
            }
            have = 0;
        }
        if (last) break;
        if (!have) {
            col = c;
            lo_i = hi_i = i;
            have = 1;
        } else {
            if (y < s->y[lo_i]) lo_i = i;
            if (y > s->y[hi_i]) hi_i = i;
        }
    }
    if (drawn) {
        if (pts.n && pts.p[pts.n - 1] == ' ') pts.p[--pts.n] = 0;
        sb_printf(out, "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" "
                  "stroke-linejoin=\"round\" points=\"", s->color);
        sb_puts(out, pts.p);
        sb_puts(out, "\"/>\n");
        if (s->markers) {
            for (size_t i = 0; i < s->n; i++)
                if (isfinite(s->x[i]) && isfinite(s->y[i]))
                    sb_printf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", map_x(f, s->x[i]),
                              map_y(f, s->y[i]), s->color);
        }
    }
    sb_free(&pts);
    return drawn;
}

/* The ticks of the y axis (grid lines, labels left) or of the x axis
 * (tick marks, labels below). */
static void emit_axis(sbuf *out, const frame *f, int xaxis)
{
    double ticks[32], lo = xaxis ? f->x0 : f->y0, hi = xaxis ? f->x1 : f->y1;
    double max_abs = fmax(fabs(lo), fabs(hi));
    int n = svg_ticks(lo, hi, xaxis ? 6 : 5, ticks, 32);
    double step = n > 1 ? ticks[1] - ticks[0] : hi - lo;
    for (int i = 0; i < n; i++) {
        char lab[48];
        fmt_tick(lab, sizeof lab, ticks[i], step, max_abs);
        if (xaxis) {
            double x = map_x(f, ticks[i]);
            sb_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"tick\"/>", x, f->py0, x,
                      f->py0 + 4);
            sb_printf(out, "<text x=\"%.1f\" y=\"%.1f\" class=\"xt\">%s</text>\n", x, f->py0 + 16, lab);
        } else {
            double y = map_y(f, ticks[i]);
            sb_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", f->px0, y, f->px1,
                      y);
            sb_printf(out, "<text x=\"%.1f\" y=\"%.1f\" class=\"yt\">%s</text>\n", f->px0 - 5, y + 4, lab);
        }
    }
}

size_t svg_line_chart(sbuf *out, const svg_chart *c, const svg_series *s, int nseries)
{
    const int W = c->width > 0 ? c->width : 560, H = c->height > 0 ? c->height : 280;
    frame f = {INFINITY, -INFINITY, INFINITY, -INFINITY, 66, W - 14.0, H - 44.0, 30};
    size_t finite = 0;
    for (int k = 0; k < nseries; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            finite++;
            if (x < f.x0) f.x0 = x;
            if (x > f.x1) f.x1 = x;
            if (y < f.y0) f.y0 = y;
            if (y > f.y1) f.y1 = y;
        }
    if (!finite) return 0;
    if (c->ymin < c->ymax) {
        f.y0 = c->ymin;
        f.y1 = c->ymax;
    } else {
        if (c->y_zero && f.y0 > 0) f.y0 = 0;
        if (c->y_zero && f.y1 < 0) f.y1 = 0;
        nice_range(&f.y0, &f.y1);
    }
    if (!(f.x1 > f.x0)) {
        /* One x (a run with one evaluation, at its last step): the axis from
         * 0 to it, so the point sits at its place in the run. */
        if (f.x0 > 0) f.x0 = 0;
        else f.x0 -= 1, f.x1 += 1;
    }

    sb_printf(out, "<svg id=\"%s\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
              "viewBox=\"0 0 %d %d\" role=\"img\">\n", c->id, W, H, W, H);
    sb_puts(out, "<title>");
    sb_html(out, c->title);
    sb_puts(out, "</title>\n");
    sb_printf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", W, H);
    sb_printf(out, "<text x=\"%.0f\" y=\"18\" class=\"ct\">", f.px0);
    sb_html(out, c->title);
    sb_puts(out, "</text>\n");

    emit_axis(out, &f, 0);
    emit_axis(out, &f, 1);
    sb_printf(out, "<path d=\"M%.1f %.1fV%.1fH%.1f\" class=\"axis\"/>\n", f.px0, f.py1, f.py0, f.px1);
    sb_printf(out, "<text x=\"%.1f\" y=\"%d\" class=\"xl\">", (f.px0 + f.px1) / 2, H - 8);
    sb_html(out, c->xlabel ? c->xlabel : "");
    sb_puts(out, "</text>\n");
    sb_printf(out, "<text transform=\"translate(14 %.1f) rotate(-90)\" class=\"yl\">", (f.py0 + f.py1) / 2);
    sb_html(out, c->ylabel ? c->ylabel : "");
    sb_puts(out, "</text>\n");

    /* clip to the plot area: a fixed y range may cut a series */
    sb_printf(out, "<clipPath id=\"%s-clip\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/></clipPath>\n",
              c->id, f.px0 - 4, f.py1 - 4, f.px1 - f.px0 + 8, f.py0 - f.py1 + 8);
    sb_printf(out, "<g clip-path=\"url(#%s-clip)\">\n", c->id);
    size_t drawn = 0;
    for (int k = 0; k < nseries; k++) drawn += emit_polyline(out, &f, &s[k]);
    sb_puts(out, "</g>\n");

    /* legend, right-aligned in the title row */
    double lx = f.px1;
    for (int k = nseries - 1; k >= 0; k--) {
        if (!s[k].name) continue;
        double tw = 7.0 * (double)strlen(s[k].name) + 22;
        lx -= tw;
        sb_printf(out, "<line x1=\"%.1f\" y1=\"14\" x2=\"%.1f\" y2=\"14\" stroke=\"%s\" stroke-width=\"3\"/>", lx, lx + 14,
                  s[k].color);
        sb_printf(out, "<text x=\"%.1f\" y=\"18\" class=\"lg\">", lx + 18);
        sb_html(out, s[k].name);
        sb_puts(out, "</text>\n");
    }
    sb_puts(out, "</svg>\n");
    return drawn;
}
