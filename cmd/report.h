/* The visual report of `ember compare --report` and `ember bench ... --report`: one
 * self-contained HTML page (inline CSS and SVG, nothing fetched) of headings, notes, tables, line
 * charts and bar charts, written atomically. */
#ifndef EMBER_CMD_REPORT_H
#define EMBER_CMD_REPORT_H

#include "tensor/error.h"

typedef struct cmd_report cmd_report;

/* Starts the page; NULL with EM_ERR_IO naming path when it cannot be written. */
cmd_report *cmd_report_open(const char *path, const char *title);
void cmd_report_heading(cmd_report *r, const char *text);
void cmd_report_note(cmd_report *r, const char *text); /* a paragraph */

/* A table: header (n_cols) then cells (n_rows * n_cols, row by row). */
void cmd_report_table(cmd_report *r, const char *const *header, int n_cols,
                     const char *const *cells, int n_rows);

/* One line of a line chart: y[i] at x[i], i < n. */
typedef struct {
    const char *name;
    const double *x, *y;
    int n;
} cmd_report_series;
void cmd_report_line_chart(cmd_report *r, const char *title, const char *x_label,
                          const char *y_label, const cmd_report_series *series, int n_series);

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
} cmd_report_bars;
void cmd_report_bar_chart(cmd_report *r, const cmd_report_bars *bars);

/* Ends the page and puts it in place (atomically); EM_ERR_IO when that failed. Frees r. */
em_status cmd_report_close(cmd_report *r);
/* Drops the page: whatever was at the path stays as it was. Frees r. */
void cmd_report_abort(cmd_report *r);

#endif
