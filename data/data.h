/* Data: datasets behind one small interface (IDX, CSV, image folders, tensors), per-sample
 * transforms keyed by (seed, epoch, index), and a threaded DataLoader with PyTorch's semantics. */
#ifndef EMBER_DATA_H
#define EMBER_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/tensor.h"

/* ---- the dataset interface ----
 * A dataset writes sample i into caller-provided rows: x gets numel(x_shape) f32 values, y gets
 * numel(y_shape) values of y_dtype (EM_I64 class indices or EM_F32 targets). get() is called from
 * several loader threads at once and must be safe for that. A custom dataset embeds em_dataset as
 * its first member and points vt at a static table. */
typedef struct em_dataset em_dataset;

typedef struct {
    int64_t (*len)(const em_dataset *ds);
    /* sample i (0 <= i < len) into x and y; on failure set an error naming the file and return
     * its status */
    em_status (*get)(const em_dataset *ds, int64_t i, float *x, void *y);
    void (*close)(em_dataset *ds); /* frees ds itself */
} em_dataset_vtable;

struct em_dataset {
    const em_dataset_vtable *vt;
    em_shape x_shape;  /* one sample's features: (784), (1, 28, 28), (3, H, W), ... */
    em_shape y_shape;  /* one sample's target: () for a class index or a scalar target */
    em_dtype y_dtype;  /* EM_I64 (class index) or EM_F32 (regression target) */
    int64_t n_classes; /* 1 + the largest class index; 0 for regression */
};

int64_t em_dataset_len(const em_dataset *ds);
em_status em_dataset_get(const em_dataset *ds, int64_t i, float *x, void *y); /* bounds-checked */
void em_dataset_free(em_dataset *ds); /* NULL is fine */

/* ---- built-in datasets; each returns NULL with an error naming the file on failure ---- */

/* IDX files (MNIST, Fashion-MNIST), gzipped or not: u8 images (N, H, W) scaled to [0, 1] and u8
 * labels (N). The sample shape is (1, H, W), or (H * W) when flat. */
typedef struct {
    bool flat;
} em_idx_opts;
em_dataset *em_dataset_idx(const char *images_path, const char *labels_path, em_idx_opts opts);

/* Numeric CSV: every column but the label column is a feature, x (n_columns - 1). */
typedef enum {
    EM_CSV_HEADER_AUTO = 0, /* the first row is a header when one of its fields is not a number */
    EM_CSV_HEADER_YES,
    EM_CSV_HEADER_NO
} em_csv_header;
typedef struct {
    em_csv_header header;
    int label_col;   /* column of the label; negative counts from the end (-1: last) */
    bool regression; /* y is the f32 value of the label column, else an i64 class index >= 0 */
    char delimiter;  /* 0: ',' */
} em_csv_opts;
em_dataset *em_dataset_csv(const char *path, em_csv_opts opts);

/* One subfolder of root per class (classes sorted by name, index = position), holding PNG, JPEG
 * or BMP files (sorted by name). Images are decoded when a sample is read, converted to grayscale
 * or RGB, resized bilinearly to (height, width) and scaled to [0, 1]:
 * x (channels, height, width). */
typedef struct {
    int height, width; /* required */
    int channels;      /* 1 (grayscale) or 3 (RGB); 0: 3 */
} em_image_folder_opts;
em_dataset *em_dataset_image_folder(const char *root, em_image_folder_opts opts);
/* class names of an image-folder dataset (n_classes entries, owned by ds); NULL for others */
const char *const *em_image_folder_classes(const em_dataset *ds);

/* Samples are rows of x (N, ...) converted to f32; targets rows of y (N, ...): integer y gives
 * i64 class indices, floating y f32 targets. The data is copied: the tensors stay the caller's. */
em_dataset *em_dataset_tensors(const em_tensor *x, const em_tensor *y);

/* Bilinear resize of a (c, h, w) image to (c, oh, ow), half-pixel centres with edge clamping
 * (PyTorch's interpolate with align_corners=False, no antialiasing). */
void em_resize_bilinear(const float *src, int c, int h, int w, float *dst, int oh, int ow);

/* ---- per-sample transforms ----
 * Applied in the loader's workers after get(), in order. Random choices come from Philox keyed by
 * (seed, epoch, sample index, position in the list), so they never depend on which worker ran. */
#define EM_TRANSFORM_MAX_CHANNELS 16

typedef enum {
    EM_TRANSFORM_NORMALIZE,   /* (x - mean[c]) / std[c] per channel */
    EM_TRANSFORM_RANDOM_CROP, /* zero-pad every side, then crop (height, width) at random */
    EM_TRANSFORM_RANDOM_HFLIP /* mirror the last dim with probability p */
} em_transform_kind;

typedef struct {
    em_transform_kind kind;
    int n_channels; /* normalize: 1 (one mean/std for all) or the sample's channel count */
    float mean[EM_TRANSFORM_MAX_CHANNELS];
    float std[EM_TRANSFORM_MAX_CHANNELS];
    int height, width; /* random crop: output size */
    int padding;       /* random crop: zeros added on each side first */
    float p;           /* random flip: probability; 0 means 0.5 */
} em_transform;

em_transform em_transform_normalize(int n_channels, const float *mean, const float *std);
em_transform em_transform_random_crop(int height, int width, int padding);
em_transform em_transform_random_hflip(float p);

/* The sample shape after tf, or EM_ERR_ARG when tf does not apply to shape in. Normalize takes
 * channels from dim 0 of a (C, H, W) sample; crop and flip need (H, W) or (C, H, W). */
em_status em_transform_out_shape(const em_transform *tf, em_shape in, em_shape *out);
/* out = tf(x) for the sample with this index in this epoch; stage is tf's position in its list.
 * x and out may be the same buffer except for random crop. */
em_status em_transform_apply(const em_transform *tf, em_shape in, const float *x, float *out,
                             uint64_t seed, uint64_t epoch, int64_t index, int stage);

/* ---- the DataLoader ---- */
typedef struct em_loader em_loader;

typedef struct {
    int64_t batch_size;       /* 0: 1 */
    bool shuffle;             /* a new permutation each epoch, from (seed, epoch) */
    uint64_t seed;            /* shuffling and random transforms */
    bool drop_last;           /* drop the last, smaller batch */
    int num_workers;          /* 0: load in the calling thread */
    int prefetch_factor;      /* batches in flight per worker; 0: 2 */
    bool persistent_workers;  /* keep the threads between epochs */
    int timeout_ms;           /* wait at most this long for a batch; 0: no limit */
    const em_transform *transforms; /* applied in order to every sample; copied */
    int n_transforms;
} em_loader_opts;

typedef struct {
    em_tensor *x; /* (B, sample shape) f32, the caller's */
    em_tensor *y; /* (B, target shape) i64 or f32, the caller's */
    int64_t epoch, index; /* which batch this is */
} em_batch;

/* Where the loader stands: the next call to em_loader_next returns batch `batch` of `epoch`
 * (batch == n_batches means the next call ends the epoch). */
typedef struct {
    int64_t epoch, batch;
} em_loader_pos;

/* ds must outlive the loader. */
em_loader *em_loader_new(const em_dataset *ds, em_loader_opts opts);
/* EM_OK with a new batch; EM_END once at the end of each epoch (the next call starts the next
 * epoch); an error status when a sample could not be read (em_error() names it; that batch is
 * skipped) or EM_ERR_TIMEOUT. Batches and their order are the same for any num_workers. */
em_status em_loader_next(em_loader *dl, em_batch *batch);
int64_t em_loader_num_batches(const em_loader *dl);
em_loader_pos em_loader_position(const em_loader *dl);
em_status em_loader_set_position(em_loader *dl, em_loader_pos pos);
void em_loader_free(em_loader *dl); /* joins the workers at any point; NULL is fine */

#endif
