/* The visual report: an HTML page written through an atomic file, with charts drawn as inline
 * SVG (axes with round tick values, a legend, values beside the bars); no script, no fetch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "cmd/report.h"

#define WIDTH 760
#define N_COLORS 10

/* Tableau 10: told apart by most readers, also in print */
static const char *colors[N_COLORS] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                       "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

struct cmd_report {
    em_atomic_file *af;
    FILE *f; /* af's stream */
};

/* text with &, <, > and " escaped */
static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

cmd_report *cmd_report_open(const char *path, const char *title)
{
    cmd_report *r = calloc(1, sizeof *r);
    if (!r) {
        em_set_error(EM_ERR_MEMORY, "cmd_report_open: out of memory");
        return NULL;
    }
    if (!(r->af = em_atomic_file_new(path))) {
        free(r);
        return NULL;
    }
    r->f = em_atomic_file_stream(r->af);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", r->f);
    esc(r->f, title);
    fputs("</title>\n<style>\nbody{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;"
          "max-width:800px;margin:24px auto;color:#222;background:#fff}\n"
          "h1{font-size:22px}h2{font-size:17px;margin-top:28px}p{font-size:14px;line-height:1.4}"
          "\n.meta{color:#666;font-size:12px}\n"
          "table{border-collapse:collapse;font-size:13px;margin:8px 0}\n"
          "th,td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:right}\n"
          "th:first-child,td:first-child{text-align:left}\n"
          "svg{display:block;margin:8px 0}svg text{font-size:12px;fill:#333}\n"
          "svg .title{font-size:14px;font-weight:bold}svg .grid{stroke:#e4e4e4}\n"
          "svg .axis{stroke:#888}\n</style></head>\n<body>\n<h1>", r->f);
    esc(r->f, title);
    fprintf(r->f, "</h1>\n<p class=\"meta\">written by ember on %s</p>\n", date);
    return r;
}

void cmd_report_heading(cmd_report *r, const char *text)
{
    fputs("<h2>", r->f);
    esc(r->f, text);
    fputs("</h2>\n", r->f);
}

void cmd_report_note(cmd_report *r, const char *text)
{
    fputs("<p>", r->f);
    esc(r->f, text);
    fputs("</p>\n", r->f);
}

void cmd_report_table(cmd_report *r, const char *const *header, int n_cols,
                     const char *const *cells, int n_rows)
{
    fputs("<table><tr>", r->f);
    for (int c = 0; c < n_cols; c++) {
        fputs("<th>", r->f);
        esc(r->f, header[c]);
        fputs("</th>", r->f);
    }
    fputs("</tr>\n", r->f);
    for (int i = 0; i < n_rows; i++) {
        fputs("<tr>", r->f);
        for (int c = 0; c < n_cols; c++) {
            fputs("<td>", r->f);
            esc(r->f, cells[i * n_cols + c]);
            fputs("</td>", r->f);
        }
        fputs("</tr>\n", r->f);
    }
    fputs("</table>\n", r->f);
}

/* ---- axes ---- */

/* A round step (1, 2 or 5 times a power of ten) that cuts range into about n parts. */
static double nice_step(double range, int n)
{
    double raw = range / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

typedef struct {
    double lo, hi, step; /* the axis from lo to hi, ticks every step */
} axis;

static axis axis_of(double lo, double hi, int ticks)
{
    if (!(hi > lo)) { /* one value (or none): a unit around it */
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;
        lo -= pad;
        hi += pad;
    }
    axis a = {.step = nice_step(hi - lo, ticks)};
    a.lo = floor(lo / a.step) * a.step;
    a.hi = ceil(hi / a.step) * a.step;
    return a;
}

static void svg_open(FILE *f, int height, const char *title)
{
    fprintf(f, "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "aria-label=\"", WIDTH, height, WIDTH, height);
    esc(f, title);
    fputs("\">\n<text class=\"title\" x=\"10\" y=\"20\">", f);
    esc(f, title);
    fputs("</text>\n", f);
}

static void legend_entry(FILE *f, int x, int y, int k, const char *name)
{
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
            "<text x=\"%d\" y=\"%d\">", x, y - 10, colors[k % N_COLORS], x + 17, y);
    esc(f, name);
    fputs("</text>\n", f);
}

void cmd_report_line_chart(cmd_report *r, const char *title, const char *x_label,
                          const char *y_label, const cmd_report_series *series, int n_series)
{
    enum { HEIGHT = 380, LEFT = 70, RIGHT = 200, TOP = 40, BOTTOM = 50 };
    const int plot_w = WIDTH - LEFT - RIGHT, plot_h = HEIGHT - TOP - BOTTOM;
    double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
    for (int s = 0; s < n_series; s++) {
        for (int i = 0; i < series[s].n; i++) {
            if (!isfinite(series[s].y[i]))
                continue;
            x_lo = fmin(x_lo, series[s].x[i]);
            x_hi = fmax(x_hi, series[s].x[i]);
            y_lo = fmin(y_lo, series[s].y[i]);
            y_hi = fmax(y_hi, series[s].y[i]);
        }
    }
    if (!isfinite(x_lo))
        x_lo = x_hi = y_lo = y_hi = 0;
    axis ax = axis_of(x_lo, x_hi, 8), ay = axis_of(y_lo, y_hi, 6);
    FILE *f = r->f;
    svg_open(f, HEIGHT, title);
#define PX(x) (LEFT + ((x) - ax.lo) / (ax.hi - ax.lo) * plot_w)
#define PY(y) (TOP + plot_h - ((y) - ay.lo) / (ay.hi - ay.lo) * plot_h)
    for (double y = ay.lo; y <= ay.hi + ay.step / 2; y += ay.step)
        fprintf(f, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", LEFT, PY(y),
                LEFT + plot_w, PY(y), LEFT - 6, PY(y) + 4, fabs(y) < ay.step / 1e6 ? 0 : y);
    for (double x = ax.lo; x <= ax.hi + ax.step / 2; x += ax.step)
        fprintf(f, "<line class=\"axis\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", PX(x),
                TOP + plot_h, PX(x), TOP + plot_h + 5, PX(x), TOP + plot_h + 19, x);
    fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", LEFT,
            TOP + plot_h, LEFT + plot_w, TOP + plot_h);
    for (int s = 0; s < n_series; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                colors[s % N_COLORS]);
        for (int i = 0; i < series[s].n; i++)
            if (isfinite(series[s].y[i]))
                fprintf(f, "%s%.1f,%.1f", i ? " " : "", PX(series[s].x[i]), PY(series[s].y[i]));
        fputs("\"/>\n", f);
        legend_entry(f, LEFT + plot_w + 16, TOP + 12 + 20 * s, s, series[s].name);
    }
#undef PX
#undef PY
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", LEFT + plot_w / 2,
            HEIGHT - 10);
    esc(f, x_label);
    fprintf(f, "</text>\n<text transform=\"translate(16 %d) rotate(-90)\" "
            "text-anchor=\"middle\">", TOP + plot_h / 2);
    esc(f, y_label);
    fputs("</text>\n</svg>\n", f);
}

/* Decimals that show v to about three significant digits (none from 100 up). */
static int decimals(double v)
{
    double a = fabs(v);
    return a >= 100 || a == 0 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
}

void cmd_report_bar_chart(cmd_report *r, const cmd_report_bars *b)
{
    enum { LABEL = 190, VALUE = 230, BAR = 18, GAP = 12, TOP = 34 };
    const int bar_w = WIDTH - LABEL - VALUE - 10;
    int legend = b->n_series > 1 ? 22 : 0;
    int height = TOP + legend + b->n_groups * (b->n_series * BAR + GAP) + 10;
    double max = 0;
    for (int i = 0; i < b->n_groups * b->n_series; i++)
        max = fmax(max, b->values[i]);
    FILE *f = r->f;
    svg_open(f, height, b->title);
    for (int s = 0; legend && s < b->n_series; s++)
        legend_entry(f, LABEL + 150 * s, TOP + 12, s, b->series[s]);
    int y = TOP + legend;
    for (int g = 0; g < b->n_groups; g++) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LABEL - 8,
                y + b->n_series * BAR / 2 + 4);
        esc(f, b->groups[g]);
        fputs("</text>\n", f);
        for (int s = 0; s < b->n_series; s++, y += BAR) {
            int i = g * b->n_series + s;
            double w = max > 0 && b->values[i] > 0 ? b->values[i] / max * bar_w : 0;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
                    "<text x=\"%.1f\" y=\"%d\">%.*f ", LABEL, y + 1, w, BAR - 3,
                    colors[(b->n_series > 1 ? s : g) % N_COLORS], LABEL + w + 6, y + BAR - 5,
                    decimals(b->values[i]), b->values[i]);
            esc(f, b->unit);
            if (b->ratio && b->ratio[i] > 0) {
                fprintf(f, " (%.2fx ", b->ratio[i]);
                esc(f, b->ratio_of);
                fputc(')', f);
            }
            fputs("</text>\n", f);
        }
        y += GAP;
    }
    fputs("</svg>\n", f);
}

void cmd_report_abort(cmd_report *r)
{
    em_atomic_file_free(r->af);
    free(r);
}

em_status cmd_report_close(cmd_report *r)
{
    fputs("</body></html>\n", r->f);
    em_status st = em_atomic_file_commit(r->af);
    free(r);
    return st;
}
