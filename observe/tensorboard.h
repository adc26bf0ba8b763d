/* TensorBoard event files: scalars and histograms as Event/Summary protocol-buffer records in
 * TFRecord framing, which TensorBoard reads (torch.utils.tensorboard's SummaryWriter, in C). Each
 * record is written and flushed whole, so a run that crashes leaves a file that reads up to its
 * last complete record. */
#ifndef EMBER_OBSERVE_TENSORBOARD_H
#define EMBER_OBSERVE_TENSORBOARD_H

#include <stdint.h>

#include "ember/tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_tb_writer em_tb_writer;

/* Makes logdir (and its parents) when missing and a new event file in it,
 * "events.out.tfevents.<seconds>.<host>.<pid>.<n>", opened by its file_version record. NULL
 * with EM_ERR_IO naming the directory or file when it cannot be made or written. */
em_tb_writer *em_tb_writer_new(const char *logdir);
/* Whether em_tb_writer_new could make its event file in logdir now: no part of it is a file and the
 * nearest directory along it that exists takes new entries. EM_ERR_IO naming the directory;
 * nothing is made (a program checks this before it loads any data). */
em_status em_tb_writer_check(const char *logdir);
/* Marks a restart at step, as PyTorch's SummaryWriter(purge_step=step) does in a new file: a
 * file_version event and a SessionLog START event at step, after which TensorBoard's reader
 * drops every event it read before with a step >= step (a resumed run's steps between its
 * checkpoint and the crash, which it logs again). Write it before the resumed run's events. */
em_status em_tb_writer_purge(em_tb_writer *w, int64_t step);
/* value under tag at step (TensorBoard keeps scalars as f32). */
em_status em_tb_writer_add_scalar(em_tb_writer *w, const char *tag, double value, int64_t step);
/* A histogram of t's elements (a float tensor on any device): min, max, count, sum, sum of
 * squares and `bins` equal-width buckets from min to max (0: 30), each holding the values from
 * its lower edge up to, not including, its upper edge (the last one includes max), as
 * numpy.histogram counts. EM_ERR_NUMERIC naming the tag when t holds a NaN or an Inf, EM_ERR_ARG
 * when it is empty; nothing is written then. */
em_status em_tb_writer_add_histogram(em_tb_writer *w, const char *tag, const em_tensor *t,
                              int64_t step, int bins);
const char *em_tb_writer_path(const em_tb_writer *w);
int64_t em_tb_writer_records(const em_tb_writer *w); /* written so far, the file_version one included */
/* Closes the file and frees w (NULL is fine); EM_ERR_IO when the close failed. */
em_status em_tb_writer_free(em_tb_writer *w);

#ifdef __cplusplus
}
#endif

#endif
