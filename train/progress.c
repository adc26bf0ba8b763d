/* The trainer's progress display on stderr: on a terminal one line, as wide as the terminal,
 * redrawn at most 10 times a second; otherwise a plain line every fifth of an epoch. After each
 * epoch one line with its training loss, validation results and learning rate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "train/train_internal.h"

#define REDRAW_S 0.1 /* the shortest time between two redraws of the line */
#define BAR_MIN 10   /* narrower than this, the line has no bar */

void em_progress_printer_init(em_progress_printer *pp)
{
    *pp = (em_progress_printer){.tty = isatty(STDERR_FILENO), .epoch = -1};
}

static int terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *columns = getenv("COLUMNS");
    int n = columns ? atoi(columns) : 0;
    return n > 0 ? n : 80;
}

/* Seconds left in the epoch at this epoch's pace so far. */
static double eta_s(const em_progress_printer *pp, const em_progress *p)
{
    int64_t done = p->batch - pp->first_batch;
    if (done <= 0 || p->samples_per_s <= 0)
        return 0;
    double per_batch = (double)p->samples / (double)done / p->samples_per_s;
    return per_batch * (double)(p->batches - p->batch);
}

/* "loss 0.4123 4380 samples/s lr 0.05 ETA 8s" and the scaler's figures when it has any */
static void describe(const em_progress_printer *pp, const em_progress *p, char *buf, size_t n)
{
    int k = snprintf(buf, n, "loss %.4f %.0f samples/s lr %.3g ETA %.0fs", p->mean_loss,
                     p->samples_per_s, p->lr, eta_s(pp, p));
    if ((p->scale != 1 || p->skipped) && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, " scale %g skipped %lld", p->scale,
                 (long long)p->skipped);
}

static void draw_line(const em_progress_printer *pp, const em_progress *p)
{
    char head[32], tail[160], bar[512];
    int pct = p->batches ? (int)(100 * p->batch / p->batches) : 100;
    snprintf(head, sizeof head, "epoch %d/%d", p->epoch + 1, p->epochs);
    describe(pp, p, tail, sizeof tail);
    int width = terminal_width() - 1; /* the last column would wrap on some terminals */
    int bar_width = width - (int)strlen(head) - (int)strlen(tail) - 9; /* " [] 100% " */
    if (bar_width > (int)sizeof bar - 1)
        bar_width = (int)sizeof bar - 1;
    char line[1024];
    if (bar_width >= BAR_MIN) {
        int filled = (int)((int64_t)bar_width * pct / 100);
        for (int i = 0; i < bar_width; i++)
            bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
        bar[bar_width] = 0;
        snprintf(line, sizeof line, "%s [%s] %3d%% %s", head, bar, pct, tail);
    } else {
        snprintf(line, sizeof line, "%s %3d%% %s", head, pct, tail);
    }
    if (width > 0 && width < (int)sizeof line)
        line[width] = 0;
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
}

/* The first batch after p's that ends a fifth of the epoch. */
static int64_t next_fifth(const em_progress *p)
{
    for (int k = 1; k < 5; k++)
        if (k * p->batches / 5 > p->batch)
            return k * p->batches / 5;
    return p->batches;
}

void em_progress_printer_step(void *ctx, const em_progress *p)
{
    em_progress_printer *pp = ctx;
    if (p->epoch != pp->epoch) {
        pp->epoch = p->epoch;
        pp->first_batch = p->batch - 1;
        pp->next_plain = next_fifth(p);
        pp->last_draw_s = 0;
    }
    if (pp->tty) {
        double now = em_train_clock_s();
        if (now - pp->last_draw_s < REDRAW_S && p->batch < p->batches)
            return;
        pp->last_draw_s = now;
        draw_line(pp, p);
    } else if (p->batch >= pp->next_plain && p->batch < p->batches) {
        char tail[160];
        describe(pp, p, tail, sizeof tail);
        fprintf(stderr, "epoch %d/%d %lld/%lld %s\n", p->epoch + 1, p->epochs,
                (long long)p->batch, (long long)p->batches, tail);
        pp->next_plain = next_fifth(p);
    }
}

void em_progress_printer_epoch(void *ctx, const em_epoch_stats *e)
{
    em_progress_printer *pp = ctx;
    char val[64] = "";
    if (!isnan(e->val_loss))
        snprintf(val, sizeof val, isnan(e->val_acc) ? " val_loss %.4f" : " val_loss %.4f "
                 "val_acc %.4f", e->val_loss, e->val_acc);
    fprintf(stderr, "%sepoch %d/%d loss %.4f%s lr %.3g %.1fs %.0f samples/s\n",
            pp->tty ? "\r\033[K" : "", e->epoch + 1, e->epochs, e->train_loss, val, e->lr,
            e->seconds, e->seconds > 0 ? (double)e->samples / e->seconds : 0);
    pp->epoch = -1;
}
