/* The loader's device feed (data/loader_feed.c): batches handed out on a device, copied from the
 * loader's page-locked host slots without the host waiting for the copies. Not installed. */
#ifndef EMBER_LOADER_FEED_INTERNAL_H
#define EMBER_LOADER_FEED_INTERNAL_H

#include "tensor/tensor_internal.h"

/* A device buffer pair the feed hands out views of; reused once the device has passed
 * `consumed` (the step that used it) and no caller still holds a view. */
typedef struct {
    em_tensor *x, *y; // (batch_size, x_shape), (batch_size, y_shape)
    void *consumed;   // the device's mark after the step that used the pair, or NULL
} em_feed_pair;

typedef struct {
    em_device device;
    em_feed_pair pairs[2];
    int64_t handed;  /* batches handed out so far */
    int held_slot;   /* the host slot the copies in flight read, or -1 */
    void *done[2];   /* their completion marks */
} em_feed;

/* What one batch is made of on the host. */
typedef struct {
    const void *x, *y; // (rows, x_shape), (rows, y_shape) in page-locked memory
    int64_t rows, batch_size;
    em_shape x_shape, y_shape; /* one sample's */
    em_dtype x_dtype, y_dtype;
} em_feed_rows;

void em_feed_init(em_feed *f, em_device device);
/* out->x, out->y: the rows on f's device (views the caller releases as usual); the host slot
 * `slot` stays held until em_feed_release says the copies are done. */
em_status em_feed_batch(em_feed *f, const em_feed_rows *rows, int slot, em_batch *out);
/* Waits for the copies in flight; returns the host slot they held (now free again), or -1. */
int em_feed_release(em_feed *f);
void em_feed_free(em_feed *f);

#endif
