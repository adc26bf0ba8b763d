/* The learning-rate range test: an exponential lr sweep through the trainer's own step, the
 * smoothed loss and Lightning's suggestion, the run restored from a checkpoint afterwards. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/lr_finder.h"
#include "train/train_internal.h"

#define SKIP_BEGIN 10 /* Lightning's suggestion(skip_begin=10, skip_end=1) */
#define SKIP_END 1

double em_lr_suggestion(const double *lr, const double *smoothed, int n)
{
    if (!em_array_present(lr, n, "em_lr_suggestion", "lr", "n") ||
        !em_array_present(smoothed, n, "em_lr_suggestion", "smoothed", "n"))
        return NAN;
    int m = 0, *at = malloc((size_t)(n > 0 ? n : 1) * sizeof *at);
    for (int i = SKIP_BEGIN; at && i < n - SKIP_END; i++)
        if (isfinite(smoothed[i]))
            at[m++] = i;
    double best = NAN, steepest = INFINITY;
    for (int k = 0; k < m && m >= 2; k++) {
        const double *s = smoothed;
        double g = k == 0       ? s[at[1]] - s[at[0]]
                   : k == m - 1 ? s[at[m - 1]] - s[at[m - 2]]
                                : (s[at[k + 1]] - s[at[k - 1]]) / 2;
        if (g < steepest) {
            steepest = g;
            best = lr[at[k]];
        }
    }
    free(at);
    return best;
}

void em_lr_find_result_free(em_lr_find_result *r)
{
    if (!r)
        return;
    free(r->lr);
    free(r->loss);
    free(r->smoothed);
    *r = (em_lr_find_result){.suggestion = NAN};
}

/* The loss of one optimizer update: accum micro-batches from the loader (the next epoch when
 * one ends), their mean into *loss. */
static em_status one_update(em_trainer *t, double *loss)
{
    double sum = 0;
    for (int k = 0; k < t->accum; k++) {
        em_batch b;
        em_scope_begin();
        em_status st = em_loader_next(t->loader, &b);
        if (st == EM_END)
            st = em_loader_next(t->loader, &b);
        double l = NAN;
        if (st == EM_OK)
            st = em_trainer_step(t, b.x, b.y, &l);
        em_scope_end();
        if (st != EM_OK)
            return st;
        sum += l;
    }
    *loss = sum / t->accum;
    return EM_OK;
}

/* The sweep itself; out's arrays hold num_iter entries. */
static em_status sweep(em_trainer *t, const em_lr_find_opts *o, em_lr_find_result *out)
{
    double avg = 0, best = INFINITY;
    em_status st = EM_OK;
    for (int i = 0; i < o->num_iter && st == EM_OK; i++) {
        double lr = o->start_lr * pow(o->end_lr / o->start_lr, (double)i / o->num_iter), loss;
        for (int g = 0; g < em_optim_num_groups(t->optim); g++)
            em_optim_set_lr(t->optim, g, lr);
        if ((st = one_update(t, &loss)) != EM_OK)
            break;
        avg = o->beta * avg + (1 - o->beta) * loss;
        double smoothed = avg / (1 - pow(o->beta, i + 1));
        out->lr[i] = lr;
        out->loss[i] = loss;
        out->smoothed[i] = smoothed;
        out->n = i + 1;
        if (!isfinite(smoothed) || (o->diverge > 0 && i > 0 && smoothed > o->diverge * best))
            break;
        best = smoothed < best ? smoothed : best;
    }
    return st;
}

em_status em_lr_find(em_trainer *t, em_lr_find_opts o, em_lr_find_result *out)
{
    const char *fn = "em_lr_find";
    if (!t || !out)
        return em_set_error(EM_ERR_ARG, "%s: trainer and result must be given", fn);
    *out = (em_lr_find_result){.suggestion = NAN};
    o.start_lr = o.start_lr ? o.start_lr : 1e-8;
    o.end_lr = o.end_lr ? o.end_lr : 1;
    o.num_iter = o.num_iter ? o.num_iter : 100;
    o.beta = o.beta ? o.beta : 0.98;
    o.diverge = o.diverge ? o.diverge : 4;
    if (!t->loader || !(o.start_lr > 0 && o.end_lr > o.start_lr && isfinite(o.end_lr)) ||
        o.num_iter < 1 || !(o.beta > 0 && o.beta < 1))
        return em_set_error(EM_ERR_ARG, "%s: needs a trainer with a loader, 0 < start_lr (%g) < "
                            "end_lr (%g), num_iter (%d) >= 1 and beta (%g) in (0, 1)", fn,
                            o.start_lr, o.end_lr, o.num_iter, o.beta);
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/ember_lr_find_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return em_set_error(EM_ERR_IO, "%s: cannot make a temporary file like %s", fn, path);
    close(fd);
    out->lr = malloc((size_t)o.num_iter * sizeof *out->lr);
    out->loss = malloc((size_t)o.num_iter * sizeof *out->loss);
    out->smoothed = malloc((size_t)o.num_iter * sizeof *out->smoothed);
    em_status st = out->lr && out->loss && out->smoothed
                       ? em_trainer_save(t, path)
                       : em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    size_t recent_bytes = (size_t)EM_RECENT_UPDATES * (size_t)t->accum * sizeof *t->recent;
    double *recent = st == EM_OK ? malloc(recent_bytes) : NULL;
    if (st == EM_OK && !recent)
        st = em_set_error(EM_ERR_MEMORY, "%s: out of memory", fn);
    if (st == EM_OK) { /* what no checkpoint holds is kept here; the sweep sets the lr itself
                          and feeds no guard */
        memcpy(recent, t->recent, recent_bytes);
        em_trainer_stats stats = t->stats;
        int64_t saved_at = t->saved_at;
        em_scheduler *scheduler = t->o.scheduler;
        em_guard *guard = t->guard;
        t->o.scheduler = NULL;
        t->guard = NULL;
        st = sweep(t, &o, out);
        t->o.scheduler = scheduler;
        t->guard = guard;
        em_status restored = em_trainer_flush(t) == EM_OK ? em_trainer_resume(t, path)
                                                          : em_error_status();
        st = st == EM_OK ? restored : st;
        memcpy(t->recent, recent, recent_bytes);
        t->stats = stats;
        t->saved_at = saved_at;
    }
    free(recent);
    unlink(path);
    out->suggestion = em_lr_suggestion(out->lr, out->smoothed, out->n);
    return st;
}
