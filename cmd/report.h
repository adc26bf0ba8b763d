/* The visual report of `ember compare --report` and `ember bench ... --report`: one
 * self-contained HTML page (inline CSS and SVG, nothing fetched) of headings, notes, tables, line
 * charts and bar charts, written atomically. */
#ifndef EMBER_CLI_REPORT_H
#define EMBER_CLI_REPORT_H

#include "tensor/error.h"

typedef struct em_report em_report;

/* Starts the page; NULL with EM_ERR_IO naming path when it cannot be written. */
em_report *em_report_open(const char *path, const char *title);
void em_report_heading(em_report *r, const char *text);
void em_report_note(em_report *r, const char *text); /* a paragraph */

/* A table: header (n_cols) then cells (n_rows * n_cols, row by row). */
void em_report_table(em_report *r, const char *const *header, int n_cols,
                     const char *const *cells, int n_rows);

/* One line of a line chart: y[i] at x[i], i < n. */
typedef struct {
    const char *name;
    const double *x, *y;
    int n;
} em_report_series;
void em_report_line_chart(em_report *r, const char *title, const char *x_label,
                          const char *y_label, const em_report_series *series, int n_series);

/* Horizontal bars: values (n_groups * n_series, group by group) drawn as one bar per series
 * within each group, labelled with its value and unit; ratio (same layout, or NULL) adds "0.52x"
 * beside each bar and ratio_of names what it is relative to ("f32"). */
typedef struct {
    const char *title, *unit, *ratio_of;
    const char *const *groups;
    int n_groups;
    const char *const *series; /* legend entries; NULL (and n_series 1) for one unnamed series */
    int n_series;
    const double *values, *ratio;
} em_report_bars;
void em_report_bar_chart(em_report *r, const em_report_bars *bars);

/* Ends the page and puts it in place (atomically); EM_ERR_IO when that failed. Frees r. */
em_status em_report_close(em_report *r);
/* Drops the page: whatever was at the path stays as it was. Frees r. */
void em_report_abort(em_report *r);

#endif
