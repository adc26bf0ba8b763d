/* Watching a training run, as trainer callbacks: TensorBoard scalars (loss, learning rate, loss
 * scale, gradient norm, samples/s, memory; validation loss and accuracy per epoch) and weight and
 * gradient histograms; each device's memory per step with a leak warning; the profiler over
 * chosen micro-batches, its table printed and its Chrome trace written when they are done.
 *
 *   em_observer *ob = em_observer_new(t, net, (em_observe_opts){.tensorboard = "runs/a",
 *                                                                .profile = "trace.json"});
 *   em_status st = ob ? em_trainer_fit(t, 5) : em_error_status();
 *   em_status logged = em_observer_free(ob);
 */
#ifndef EMBER_TRAIN_OBSERVER_H
#define EMBER_TRAIN_OBSERVER_H

#include <stdio.h>

#include "ember/train/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *tensorboard; /* event files in this directory (made when missing); NULL: none.
                                Points are at the run's micro-batch count (em_progress's
                                global_step), which a resumed run continues: an observer made
                                after em_trainer_resume marks the resumed step as a restart
                                (em_tb_writer_purge), so TensorBoard drops what the stopped run
                                logged after its checkpoint, as SummaryWriter(purge_step=...)
                                does */
    int histogram_every;     /* micro-batches between weight and gradient histograms; 0: 200 */
    const char *profile;     /* the profiler's Chrome trace; NULL: no profiling */
    int64_t profile_first;   /* the first and last micro-batch of t profiled, from 1; */
    int64_t profile_last;    /* 0: the 6th to the 25th */
    int memory_window;       /* steps the memory leak check fits a trend over; 0: 50 */
    FILE *log;               /* the profiler's table and the warnings; NULL: stderr */
} em_observe_opts;

typedef struct em_observer em_observer;

/* Watches t's run of model (both borrowed): adds callbacks to t, and starts the profiler now
 * when profile_first is 1. NULL with an error on bad options, an unwritable log directory or
 * trace path (found now, before any training). */
em_observer *em_observer_new(em_trainer *t, em_module *model, em_observe_opts opts);
/* Ends the watch after t's last step (t must not train after it: its callbacks point at ob):
 * stops the profiler if it still runs (printing its table, writing its trace), closes the event
 * file, frees ob (NULL is fine). A failed write never stops training: it is reported once on the
 * log, and returned here (the first one), else EM_OK. */
em_status em_observer_free(em_observer *ob);

#ifdef __cplusplus
}
#endif

#endif
