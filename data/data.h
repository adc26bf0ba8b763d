/* Data: datasets behind one small interface (IDX, CSV, image folders, tensors, subsets,
 * time-series windows), per-sample transforms keyed by (seed, epoch, index), samplers, and a
 * threaded DataLoader with PyTorch's semantics. */
#ifndef EMBER_DATA_H
#define EMBER_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "ember/tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the dataset interface ----
 * A dataset writes sample i into caller-provided rows: x gets numel(x_shape) values of x_dtype
 * (EM_F32 features, or integers such as EM_I64 token ids), y gets numel(y_shape) values of
 * y_dtype (EM_I64 class indices or EM_F32 targets). get() is called from several loader threads
 * at once and must be safe for that. A custom dataset embeds em_dataset as its first member and
 * points vt at a static table. */
typedef struct em_dataset em_dataset;

typedef struct {
    int64_t (*len)(const em_dataset *ds);
    /* sample i (0 <= i < len) of the loader's epoch (0 outside a loader; augmentation may vary
     * with it) into x and y; on failure set an error naming the file and return its status, or
     * return EM_SKIP (no error) for a sample the dataset leaves out (the loader's batch then
     * has one row fewer) */
    em_status (*get)(const em_dataset *ds, int64_t i, int64_t epoch, void *x, void *y);
    void (*free)(em_dataset *ds); /* frees ds itself */
} em_dataset_vtable;

struct em_dataset {
    const em_dataset_vtable *vt;
    em_shape x_shape;  /* one sample's features: (784), (1, 28, 28), (3, H, W), (T), ... */
    em_dtype x_dtype;  /* EM_F32 (0, the default) or an integer dtype (EM_I64 token ids) */
    em_shape y_shape;  /* one sample's target: () for a class index or a scalar target */
    em_dtype y_dtype;  /* EM_I64 (class index) or EM_F32 (regression target) */
    int64_t n_classes; /* 1 + the largest class index; 0 for regression */
};

int64_t em_dataset_len(const em_dataset *ds);
/* sample i as the loader's epoch 0 reads it; bounds-checked */
em_status em_dataset_get(const em_dataset *ds, int64_t i, void *x, void *y);
void em_dataset_free(em_dataset *ds); /* NULL is fine */

/* ---- subsets ----
 * A subset reads its samples from ds (which must outlive it): sample k is ds's sample
 * indices[k]. The indices are copied and checked against ds's length. */
em_dataset *em_subset(const em_dataset *ds, const int64_t *indices, int64_t n);
/* PyTorch's random_split: ds's samples in a random order fixed by seed, cut into n subsets of
 * lengths[k] samples (the lengths must add up to ds's length); out gets n new subsets. */
em_status em_random_split(const em_dataset *ds, const int64_t *lengths, int n, uint64_t seed,
                          em_dataset **out);
/* PyTorch's ConcatDataset: the n parts' samples one after the other (sample i of part k is
 * sample ends[k-1] + i of the whole); the parts (borrowed: they must outlive it) must give
 * samples of one x and y shape and dtype, else an error naming the part; n_classes is the
 * largest part's. */
em_dataset *em_concat_dataset(const em_dataset *const *parts, int n);
/* Lengths for em_random_split from fractions that add up to 1, as PyTorch computes them:
 * floor(fraction * total) each, then one more to each subset in turn until they add up. */
em_status em_split_lengths(int64_t total, const double *fractions, int n, int64_t *lengths);

/* ---- built-in datasets; each returns NULL with an error naming the file on failure ---- */

/* IDX files (MNIST, Fashion-MNIST), gzipped or not: u8 images (N, H, W) scaled to [0, 1] and u8
 * labels (N). The sample shape is (1, H, W), or (H * W) when flat. */
typedef struct {
    bool flat;
} em_idx_opts;
em_dataset *em_idx_dataset(const char *images_path, const char *labels_path, em_idx_opts opts);

/* CSV: a row per sample; target columns (a class or regression targets) and feature columns,
 * by default every column but the targets: x (n_features) f32, y () i64 class indices, or f32
 * regression targets, () for one and (n_targets) for more. Errors name the file, line, column
 * (and its header name). A missing feature value (an empty field, NA, N/A, NaN, null or ?) is an
 * error unless filled; a missing target is always one. */
typedef enum {
    EM_CSV_HEADER_AUTO = 0, /* the first row is a header when a field outside the label column
                               is neither a number nor a missing value, or when columns are
                               chosen by name */
    EM_CSV_HEADER_YES,
    EM_CSV_HEADER_NO
} em_csv_header;
typedef enum {
    EM_CSV_MISSING_ERROR = 0, /* a missing feature value is an error naming it */
    EM_CSV_MISSING_FILL       /* it becomes missing_fill */
} em_csv_missing;
typedef struct {
    em_csv_header header;
    int label_col;   /* column of the (first) target; negative counts from the end (-1: last) */
    const char *label; /* or the target column by header name or number ("-1"); overrides
                          label_col */
    int n_targets;   /* regression: targets in this many columns from the label column on;
                        0: 1 */
    const char *const *features; /* the feature columns in this order, each a header name or a
                                    column number ("0", "-2"); NULL: all but the targets */
    int n_features;
    bool regression; /* y is f32 targets, else a class per row */
    bool class_names; /* the class column holds names (any text): the classes are the distinct
                         names in sorted order (em_csv_classes); else class indices >= 0 */
    em_csv_missing missing;
    double missing_fill;
    char delimiter;  /* 0: ',' */
} em_csv_opts;
em_dataset *em_csv_dataset(const char *path, em_csv_opts opts);
/* class names of a CSV dataset read with class_names (n_classes entries, owned by ds); NULL for
 * others */
const char *const *em_csv_classes(const em_dataset *ds);

/* One subfolder of root per class (classes sorted by name, index = position), holding PNG, JPEG
 * or BMP files (sorted by name; told apart by their first bytes). Images are decoded when a
 * sample is read (PNG by libpng, JPEG by libjpeg-turbo, BMP by ember's own strict reader),
 * converted to grayscale or RGB, resized bilinearly to (height, width) and scaled to [0, 1]:
 * x (channels, height, width). An image holding more than max_pixels pixels is refused from its
 * header, before it is decoded. */
typedef enum {
    EM_BAD_IMAGE_ERROR = 0, /* reading that sample fails, naming the file (the loader's batch
                               with it) */
    EM_BAD_IMAGE_SKIP       /* the sample is left out of its batch (EM_SKIP) and reported */
} em_bad_image_policy;
typedef struct {
    int height, width;  /* required */
    int channels;       /* 1 (grayscale) or 3 (RGB); 0: 3 */
    int64_t max_pixels; /* 0: 8192 x 8192 */
    em_bad_image_policy on_bad_image;
} em_image_folder_opts;
em_dataset *em_image_folder(const char *root, em_image_folder_opts opts);
/* class names of an image-folder dataset (n_classes entries, owned by ds); NULL for others */
const char *const *em_image_folder_classes(const em_dataset *ds);
/* What an image-folder dataset left out, each as "PATH: WHY": entries of root and the class
 * folders that are not class folders or image files (hidden ones aside), and with
 * EM_BAD_IMAGE_SKIP every image found unreadable so far. Copies up to max of them (owned by ds,
 * valid until it is freed) to out, which may be NULL, and returns how many there are; -1 for a
 * dataset of another kind. Safe while a loader reads ds. */
int64_t em_image_folder_skipped(const em_dataset *ds, const char **out, int64_t max);

/* Samples are rows of x (N, ...): floating x gives f32 features, integer or bool x i64 ones (token
 * ids); targets rows of y (N, ...): integer y gives i64 class indices, floating y f32 targets.
 * The data is copied: the tensors stay the caller's. */
em_dataset *em_tensor_dataset(const em_tensor *x, const em_tensor *y);

/* Bilinear resize of a (c, h, w) image to (c, oh, ow), half-pixel centres with edge clamping
 * (PyTorch's interpolate with align_corners=False, no antialiasing). EM_ERR_ARG unless every
 * size is at least 1. */
em_status em_resize_bilinear(const float *src, int c, int h, int w, float *dst, int oh, int ow);

/* ---- character-level text ----
 * A vocabulary of the bytes a text holds, ids in ascending byte order, as a char-level language
 * model sees it (at most 256 ids, so an encoded text is one byte per character). */
typedef struct {
    int size;                 /* distinct characters */
    unsigned char chars[256]; /* id -> character */
    int16_t ids[256];         /* character -> id, -1 when not in the vocabulary */
} em_char_vocab;
em_char_vocab em_char_vocab_of(const char *text, size_t n);
/* From the characters themselves (chars[0..size), distinct and ascending), as saved with a
 * model; EM_ERR_ARG otherwise. */
em_status em_char_vocab_from(const char *chars, size_t n, em_char_vocab *v);
/* ids (n) of text; EM_ERR_ARG naming the first character that is not in the vocabulary */
em_status em_char_vocab_encode(const em_char_vocab *v, const char *text, size_t n, uint8_t *ids);
/* text (n bytes, no terminator) of ids; EM_ERR_ARG on an id outside the vocabulary */
em_status em_char_vocab_decode(const em_char_vocab *v, const int64_t *ids, size_t n, char *text);
/* Windows of an encoded text (ids (n), copied) as next-character samples: sample i is
 * x = ids[i * stride + t] and y = ids[i * stride + t + 1] for t < len, both i64 (len); every
 * window that fits ((n - len - 1) / stride + 1 of them). */
em_dataset *em_char_windows_dataset(const uint8_t *ids, int64_t n, int64_t len, int64_t stride);

/* ---- time-series windows ----
 * A series of n steps of F columns, cut into windows for a sequence model: sample i starts at
 * step s = i * stride; x (length, F) is steps s .. s + length - 1 of every column, y (horizon,
 * n_targets) the target columns of the `horizon` steps after them, both f32. Every window that
 * fits: (n - length - horizon) / stride + 1 of them (at least one, else EM_ERR_ARG). */
typedef struct {
    int64_t length;     /* T: steps of an input window (>= 1, required) */
    int64_t horizon;    /* H: steps forecast after it; 0: 1 */
    int64_t stride;     /* steps from one window's start to the next; 0: 1 */
    const int *targets; /* the columns forecast, in this order (negative: from the end; copied);
                           NULL: every column */
    int n_targets;
} em_time_windows_opts;
/* Over series (n) or (n, F), copied as f32 (the tensor stays the caller's). */
em_dataset *em_time_windows_dataset(const em_tensor *series, em_time_windows_opts opts);
/* Over a CSV file's rows, read by em_csv_dataset with csv (regression is implied): each row is
 * one step, its columns the chosen features and then the targets (so x holds the targets' past
 * too); the targets are y's columns. opts.targets must be NULL: csv's label and n_targets choose
 * them. */
em_dataset *em_csv_time_windows_dataset(const char *path, em_csv_opts csv,
                                        em_time_windows_opts opts);

/* ---- per-sample transforms ----
 * Applied in the loader's workers after get(), in order. Random choices come from Philox keyed by
 * (seed, epoch, sample index, position in the list), so they never depend on which worker ran.
 * The built-in transforms work on f32 samples; a custom one sees the dataset's x dtype. */
#define EM_TRANSFORM_MAX_CHANNELS 16

/* Which call of a transform this is: the loader's seed and epoch, the sample's dataset index,
 * the transform's position in its list, and the sample's dtype. */
typedef struct {
    uint64_t seed;
    int64_t epoch, index;
    int stage;
    em_dtype dtype;
} em_transform_call;

/* A user transform: out (its output shape) = f(x (shape in)), both of call->dtype. x and out are
 * distinct buffers. Returns EM_OK or an error status (with em_set_error). */
typedef em_status (*em_transform_fn)(void *ctx, const em_transform_call *call, em_shape in,
                                     const void *x, void *out);
/* A user transform's output shape for input shape in; EM_ERR_ARG (with an error) when it does
 * not apply. NULL in em_transform means the shape does not change. */
typedef em_status (*em_transform_shape_fn)(void *ctx, em_shape in, em_shape *out);

typedef enum {
    EM_TRANSFORM_NORMALIZE,   /* (x - mean[c]) / std[c] per channel */
    EM_TRANSFORM_RANDOM_CROP, /* zero-pad every side, then crop (height, width) at random */
    EM_TRANSFORM_RANDOM_HFLIP, /* mirror the last dim with probability p */
    EM_TRANSFORM_CUSTOM       /* fn(ctx, ...) */
} em_transform_kind;

typedef struct {
    em_transform_kind kind;
    int n_channels; /* normalize: 1 (one mean/std for all) or the sample's channel count */
    float mean[EM_TRANSFORM_MAX_CHANNELS];
    float std[EM_TRANSFORM_MAX_CHANNELS];
    int height, width; /* random crop: output size */
    int padding;       /* random crop: zeros added on each side first */
    float p;           /* random flip: probability; 0 means 0.5 */
    em_transform_fn fn;             /* custom */
    em_transform_shape_fn shape_fn; /* custom; NULL: same shape */
    void *ctx;                      /* custom: passed to fn and shape_fn; the caller's */
    bool random;                    /* custom: it draws random numbers (augmentation) */
} em_transform;

em_transform em_transform_normalize(int n_channels, const float *mean, const float *std);
em_transform em_transform_random_crop(int height, int width, int padding);
em_transform em_transform_random_hflip(float p);
em_transform em_transform_custom(em_transform_fn fn, em_transform_shape_fn shape_fn, void *ctx);

/* Whether tf is random augmentation: random crop and flip, and a custom transform with random
 * set. Validation leaves these out of the training loader's transforms
 * (em_trainer_opts.val_transforms). */
bool em_transform_is_random(const em_transform *tf);

/* The sample shape after tf, or EM_ERR_ARG when tf does not apply to shape in. Normalize takes
 * channels from dim 0 of a (C, H, W) sample; crop and flip need (H, W) or (C, H, W). */
em_status em_transform_out_shape(const em_transform *tf, em_shape in, em_shape *out);
/* out = tf(x) for the sample and epoch of call. x and out may be the same buffer for normalize
 * and flip only. */
em_status em_transform_apply(const em_transform *tf, const em_transform_call *call, em_shape in,
                             const void *x, void *out);
/* Random number k in [0, 1) of a transform call: a pure function of (call, k), so a custom
 * transform draws the same numbers for any worker count. */
double em_transform_uniform(const em_transform_call *call, uint64_t k);

/* ---- samplers: which dataset indices an epoch visits, in which order ----
 * A sampler's indices are a pure function of (sampler, seed, epoch), so the loader's batches are
 * the same for any worker count and a resumed run continues them. A custom sampler embeds
 * em_sampler as its first member and points vt at a static table. */
typedef struct em_sampler em_sampler;

typedef struct {
    int64_t (*len)(const em_sampler *s); /* indices per epoch */
    /* the epoch's indices into out (len entries) */
    em_status (*indices)(const em_sampler *s, uint64_t seed, int64_t epoch, int64_t *out);
    void (*free)(em_sampler *s); /* frees s itself */
} em_sampler_vtable;

struct em_sampler {
    const em_sampler_vtable *vt;
};

em_sampler *em_sequential_sampler(int64_t n); /* 0, 1, ..., n - 1 every epoch */

typedef struct {
    bool replacement;    /* draw each index uniformly, independently */
    int64_t num_samples; /* indices per epoch; 0: n (more than n without replacement: whole
                            permutations one after another, then part of one) */
} em_random_sampler_opts;
/* a random order of 0..n-1 each epoch (the loader's shuffle) or draws with replacement */
em_sampler *em_random_sampler(int64_t n, em_random_sampler_opts opts);

/* PyTorch's WeightedRandomSampler: num_samples indices drawn with probability proportional to
 * weights (n entries, finite, >= 0, not all 0; copied); without replacement each index comes at
 * most once (num_samples must not exceed the count of positive weights). */
em_sampler *em_weighted_random_sampler(const double *weights, int64_t n, int64_t num_samples,
                                       bool replacement);

int64_t em_sampler_len(const em_sampler *s);
em_status em_sampler_indices(const em_sampler *s, uint64_t seed, int64_t epoch, int64_t *out);
void em_sampler_free(em_sampler *s); /* NULL is fine */

/* ---- the DataLoader ---- */
typedef struct em_loader em_loader;

typedef struct {
    em_tensor *x; /* (B, sample shape) of the dataset's x dtype, the caller's */
    em_tensor *y; /* (B, target shape) i64 or f32, the caller's */
    int64_t epoch, index; /* which batch this is */
} em_batch;

/* One batch's samples as the workers assembled them, for a collate function. */
typedef struct {
    int64_t rows;
    const void *x;          /* (rows, x_shape) of x_dtype */
    em_shape x_shape;       /* one sample's, after the transforms */
    em_dtype x_dtype;
    const void *y;          /* (rows, y_shape) of y_dtype */
    em_shape y_shape;
    em_dtype y_dtype;
    const int64_t *indices; /* (rows): the dataset index of each row */
    int64_t epoch, batch;
} em_collate_input;

/* Makes the batch's tensors (out->x, out->y; new references) from in; runs in the thread that
 * calls em_loader_next, so the tensors are temporaries of its scope. The loader fills in
 * out->epoch and out->index. Returns EM_OK or an error status (with em_set_error). */
typedef em_status (*em_collate_fn)(void *ctx, const em_collate_input *in, em_batch *out);
/* The default: x (rows, x_shape) and y (rows, y_shape) as they are. */
em_status em_collate_default(const em_collate_input *in, em_batch *out);

typedef struct {
    int64_t batch_size;       /* 0: 1 */
    bool shuffle;             /* a new permutation each epoch, from (seed, epoch) */
    const em_sampler *sampler; /* the indices of each epoch (must outlive the loader); NULL:
                                  in order, or shuffled when shuffle is set (not both) */
    uint64_t seed;            /* shuffling, the sampler and random transforms */
    bool drop_last;           /* drop the last, smaller batch */
    int num_workers;          /* 0: load in the calling thread */
    int prefetch_factor;      /* batches in flight per worker; 0: 2 */
    bool persistent_workers;  /* keep the threads between epochs */
    int timeout_ms;           /* wait at most this long for a batch; 0: no limit */
    const em_transform *transforms; /* applied in order to every sample; copied */
    int n_transforms;
    em_collate_fn collate;    /* NULL: em_collate_default */
    void *collate_ctx;        /* passed to collate; the caller's */
    em_device device;         /* where the batches are handed out (default the CPU) */
    bool pin_memory;          /* assemble batches in page-locked host memory and copy them to
                                 the device without waiting, beside the previous step's kernels
                                 (PyTorch's pin_memory + non_blocking); the batches are views of
                                 two buffers the loader reuses once nothing holds them */
} em_loader_opts;

/* Where the loader stands: the next call to em_loader_next returns batch `batch` of `epoch`
 * (batch == n_batches means the next call ends the epoch). */
typedef struct {
    int64_t epoch, batch;
} em_loader_pos;

/* ds must outlive the loader. */
em_loader *em_loader_new(const em_dataset *ds, em_loader_opts opts);
/* EM_OK with a new batch; EM_END once at the end of each epoch (the next call starts the next
 * epoch); an error status when a sample could not be read (em_error() names it; that batch is
 * skipped) or EM_ERR_TIMEOUT. Samples the dataset skips (EM_SKIP) are left out of their batch,
 * and a batch left with none is passed over. Batches and their order are the same for any
 * num_workers. */
em_status em_loader_next(em_loader *dl, em_batch *batch);
int64_t em_loader_num_batches(const em_loader *dl);
em_loader_pos em_loader_position(const em_loader *dl);
/* The loader's transforms (its copy, *n of them, valid while it lives; NULL when none). */
const em_transform *em_loader_transforms(const em_loader *dl, int *n);
em_status em_loader_set_position(em_loader *dl, em_loader_pos pos);
void em_loader_free(em_loader *dl); /* joins the workers at any point; NULL is fine */

#ifdef __cplusplus
}
#endif

#endif
