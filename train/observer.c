/* The observer's callbacks: after every micro-batch its scalars, memory sample, leak check and
 * the profiler's start, step and stop; before every update the gradient norm and histograms;
 * after every epoch the validation scalars. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/guards.h"
#include "io/atomic_file.h"
#include "observe/memory_trend.h"
#include "observe/profiler.h"
#include "observe/tensorboard.h"
#include "train/observer.h"

#define DEFAULT_HISTOGRAM_EVERY 200
#define DEFAULT_PROFILE_FIRST 6
#define DEFAULT_PROFILED 20
#define TABLE_ROWS 25

struct em_observer {
    em_trainer *trainer;
    em_module *model;
    em_observe_opts o;
    FILE *log;
    em_tb_writer *tb;
    em_memtrend *memory;
    bool leak_warned[EM_NDEVICES];
    int64_t step;             /* the run's micro-batches (em_progress's global_step): the
                                 step of every scalar and histogram */
    double grad_norm;         /* of the last update, unscaled; NAN when none since last step */
    em_status failed;         /* the first failed write */
    char failure[512];
};

/* Keeps the first failure of a write (logging goes on without it), clearing the error so the
 * training loop does not see it. */
static void note_failure(em_observer *ob, const char *what)
{
    if (ob->failed == EM_OK) {
        ob->failed = em_error_status() != EM_OK ? em_error_status() : EM_ERR_IO;
        snprintf(ob->failure, sizeof ob->failure, "%s: %s", what, em_error());
        fprintf(ob->log, "ember: %s (training goes on)\n", ob->failure);
    }
    em_error_clear();
}

static void scalar(em_observer *ob, const char *tag, double value)
{
    if (ob->tb && em_tb_writer_add_scalar(ob->tb, tag, value, ob->step) != EM_OK) {
        note_failure(ob, "TensorBoard");
        em_tb_writer_free(ob->tb);
        ob->tb = NULL;
    }
}

static bool histogram_step(const em_observer *ob, int64_t step)
{
    return ob->tb && step % ob->o.histogram_every == 0;
}

/* Histograms of the parameters (prefix "weights/") or their gradients ("grads/", divided by the
 * grad scaler's scale). Non-finite gradients (a step the scaler or guard will skip) are left
 * out. */
static void histograms(em_observer *ob, bool grads, int64_t step)
{
    int n = em_module_parameters(ob->model, NULL, 0);
    em_param_ref *ps = calloc((size_t)n + 1, sizeof *ps);
    if (!ps)
        return;
    em_module_parameters(ob->model, ps, n);
    em_grad_scaler *scaler = em_trainer_grad_scaler(ob->trainer);
    double unscale = grads && scaler ? 1.0 / em_grad_scaler_get_scale(scaler) : 1.0;
    for (int i = 0; i < n && ob->tb; i++) {
        const em_tensor *t = grads ? ps[i].value->grad : ps[i].value;
        if (!t)
            continue;
        char tag[256];
        snprintf(tag, sizeof tag, "%s/%s", grads ? "grads" : "weights", ps[i].name);
        em_scope_begin();
        const em_tensor *h = unscale != 1.0 ? em_mul_scalar(t, unscale) : t;
        em_status st = em_tb_writer_add_histogram(ob->tb, tag, h, step, 0);
        em_scope_end();
        if (st == EM_ERR_NUMERIC && grads) {
            em_error_clear();
        } else if (st != EM_OK) {
            note_failure(ob, "TensorBoard");
            em_tb_writer_free(ob->tb);
            ob->tb = NULL;
        }
    }
    free(ps);
}

static void memory_step(em_observer *ob)
{
    if (em_memtrend_sample(ob->memory, ob->step) != EM_OK) {
        note_failure(ob, "memory");
        return;
    }
    for (int d = 0; d < EM_NDEVICES; d++) {
        em_mem_sample s = em_memtrend_last(ob->memory, (em_device)d);
        if (d != EM_CPU && s.reserved_bytes == 0)
            continue;
        char tag[64];
        const char *dev = em_device_name((em_device)d);
        snprintf(tag, sizeof tag, "memory/%s_live_mb", dev);
        scalar(ob, tag, (double)s.live_bytes / 1e6);
        snprintf(tag, sizeof tag, "memory/%s_peak_mb", dev);
        scalar(ob, tag, (double)s.peak_bytes / 1e6);
        snprintf(tag, sizeof tag, "memory/%s_reserved_mb", dev);
        scalar(ob, tag, (double)s.reserved_bytes / 1e6);
        double slope;
        if (!ob->leak_warned[d] && em_memtrend_leaking(ob->memory, (em_device)d, &slope)) {
            ob->leak_warned[d] = true;
            fprintf(ob->log, "ember: warning: %s memory rises by %.0f bytes per step over the "
                    "last %d steps (%.1f MB live at step %lld): is something kept across "
                    "steps?\n", dev, slope, ob->o.memory_window, (double)s.live_bytes / 1e6,
                    (long long)ob->step);
        }
    }
}

static void stop_profiler(em_observer *ob)
{
    if (!em_profiler_running())
        return;
    if (em_profiler_stop() != EM_OK) {
        note_failure(ob, "profiler");
        return;
    }
    em_profiler_print(ob->log, TABLE_ROWS);
    fprintf(ob->log, "ember: Chrome trace written to %s (open it in Perfetto or "
            "chrome://tracing)\n", ob->o.profile);
}

static void start_profiler(em_observer *ob)
{
    if (em_profiler_start((em_profiler_opts){.trace_path = ob->o.profile}) != EM_OK)
        note_failure(ob, "profiler");
}

/* step: the micro-batches this trainer trained, as profile_first and profile_last count */
static void profile_step(em_observer *ob, int64_t step)
{
    if (!ob->o.profile)
        return;
    if (em_profiler_running())
        em_profiler_step();
    if (step == ob->o.profile_last)
        stop_profiler(ob);
    else if (step + 1 == ob->o.profile_first)
        start_profiler(ob);
}

static void on_step(void *ctx, const em_progress *p)
{
    em_observer *ob = ctx;
    ob->step = p->global_step;
    scalar(ob, "train/loss", p->loss);
    scalar(ob, "train/lr", p->lr);
    scalar(ob, "train/loss_scale", p->scale);
    scalar(ob, "train/samples_per_s", p->samples_per_s);
    if (!isnan(ob->grad_norm))
        scalar(ob, "train/grad_norm", ob->grad_norm);
    ob->grad_norm = NAN;
    if (histogram_step(ob, ob->step))
        histograms(ob, false, ob->step);
    memory_step(ob);
    profile_step(ob, p->step);
}

static em_status before_update(void *ctx, em_optim *optim)
{
    (void)optim;
    em_observer *ob = ctx;
    if (!ob->tb)
        return EM_OK;
    int n = em_module_parameters(ob->model, NULL, 0);
    em_param_ref *ps = calloc((size_t)n + 1, sizeof *ps);
    em_tensor **grads = calloc((size_t)n + 1, sizeof *grads);
    int n_grads = 0;
    if (ps && grads) {
        em_module_parameters(ob->model, ps, n);
        for (int i = 0; i < n; i++)
            if (ps[i].value->grad)
                grads[n_grads++] = ps[i].value;
    }
    em_grad_scaler *scaler = em_trainer_grad_scaler(ob->trainer);
    double norm = n_grads ? em_grad_norm(grads, n_grads, 2.0) : NAN;
    em_error_clear(); /* a norm that could not be taken is simply not logged */
    ob->grad_norm = scaler ? norm / em_grad_scaler_get_scale(scaler) : norm;
    free(ps);
    free(grads);
    if (histogram_step(ob, ob->step + 1))
        histograms(ob, true, ob->step + 1);
    return EM_OK;
}

static void on_epoch(void *ctx, const em_epoch_stats *e)
{
    em_observer *ob = ctx;
    ob->step = e->global_step;
    scalar(ob, "train/epoch_loss", e->train_loss);
    if (!isnan(e->val_loss))
        scalar(ob, "val/loss", e->val_loss);
    if (!isnan(e->val_acc))
        scalar(ob, "val/accuracy", e->val_acc);
}

/* The trace path can be written (nothing is left behind). */
static em_status check_trace_path(const char *path)
{
    bool earlier = em_has_error();
    if (em_atomic_file_check(path) == EM_OK)
        return EM_OK;
    return earlier ? em_error_status() : em_error_prefix("em_observer_new: profiler trace");
}

static em_status check_opts(em_observe_opts *o)
{
    if (o->histogram_every < 0 || o->memory_window < 0 || o->profile_first < 0 ||
        o->profile_last < 0 || (o->profile_last && o->profile_last < o->profile_first))
        return em_set_error(EM_ERR_ARG, "em_observer_new: histogram_every (%d) and "
                            "memory_window (%d) must be >= 0 and the profiled micro-batches "
                            "(%lld to %lld) a range from 1", o->histogram_every,
                            o->memory_window, (long long)o->profile_first,
                            (long long)o->profile_last);
    if (!o->histogram_every)
        o->histogram_every = DEFAULT_HISTOGRAM_EVERY;
    if (!o->memory_window)
        o->memory_window = 50;
    if (!o->profile_first)
        o->profile_first = DEFAULT_PROFILE_FIRST;
    if (!o->profile_last)
        o->profile_last = o->profile_first + DEFAULT_PROFILED - 1;
    if (o->profile && em_profiler_running())
        return em_set_error(EM_ERR_STATE, "em_observer_new: the profiler is already running");
    return o->profile ? check_trace_path(o->profile) : EM_OK;
}

em_observer *em_observer_new(em_trainer *t, em_module *model, em_observe_opts opts)
{
    if (!t || !model) {
        em_set_error(EM_ERR_ARG, "em_observer_new: trainer and model must be given");
        return NULL;
    }
    if (check_opts(&opts) != EM_OK)
        return NULL;
    em_observer *ob = calloc(1, sizeof *ob);
    if (!ob) {
        em_set_error(EM_ERR_MEMORY, "em_observer_new: out of memory");
        return NULL;
    }
    *ob = (em_observer){.trainer = t, .model = model, .o = opts,
                        .log = opts.log ? opts.log : stderr, .grad_norm = NAN};
    ob->memory = em_memtrend_new((em_memtrend_opts){.window = opts.memory_window});
    if (ob->memory && opts.tensorboard)
        ob->tb = em_tb_writer_new(opts.tensorboard);
    em_status st = ob->memory && (ob->tb || !opts.tensorboard) ? EM_OK : em_error_status();
    int64_t resumed_at = em_trainer_get_stats(t).global_step;
    if (st == EM_OK && ob->tb && resumed_at > 0) /* what the crashed run logged past it goes */
        st = em_tb_writer_purge(ob->tb, resumed_at + 1);
    if (st == EM_OK)
        st = em_trainer_add_callbacks(t, (em_trainer_callbacks){
            .ctx = ob, .on_step = on_step, .on_epoch = on_epoch,
            .before_update = before_update});
    if (st == EM_OK && opts.profile && opts.profile_first == 1)
        st = em_profiler_start((em_profiler_opts){.trace_path = opts.profile});
    if (st != EM_OK) {
        em_tb_writer_free(ob->tb);
        em_memtrend_free(ob->memory);
        free(ob);
        return NULL;
    }
    return ob;
}

em_status em_observer_free(em_observer *ob)
{
    if (!ob)
        return EM_OK;
    if (ob->o.profile)
        stop_profiler(ob);
    if (ob->tb && em_tb_writer_free(ob->tb) != EM_OK)
        note_failure(ob, "TensorBoard");
    em_memtrend_free(ob->memory);
    em_status st = ob->failed;
    if (st != EM_OK)
        em_set_error(st, "em_observer_free: %s", ob->failure);
    free(ob);
    return st;
}
