/* The tensor: dtype, device, shape and strides over refcounted storage, plus the calls that make,
 * view, convert and inspect tensors. Differentiable ops live in autograd/autograd.h. Tensors are
 * refcounted (em_retain, em_release); every other object is made by em_<noun>_new, or by its
 * kind's PyTorch name for layers, optimizers, schedulers, datasets and samplers, and freed by
 * em_<noun>_free (README, "Using it"). */
#ifndef EMBER_TENSOR_H
#define EMBER_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ember/backend/dtype.h"
#include "ember/tensor/error.h"
#include "ember/tensor/memory.h"
#include "ember/tensor/rng.h"
#include "ember/tensor/scope.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A shape by value: EM_SHAPE(64, 784) */
typedef struct {
    int ndim;
    int64_t d[EM_MAX_DIMS];
} em_shape;

#ifdef __cplusplus /* C++ has no compound literals: a function template below builds it */
#define EM_SHAPE(...) em_shape_of_dims(__VA_ARGS__)
#define EM_SCALAR_SHAPE (em_shape{})
#else
#define EM_SHAPE(...)                                                                   \
    ((em_shape){.ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                .d = {__VA_ARGS__}})
#define EM_SCALAR_SHAPE ((em_shape){.ndim = 0})
#endif
/* the product of the dims (1 for ()); -1 when a dim is negative or the product of the nonzero
 * dims overflows (they give the strides, so [0, 2^62, 2^62] is refused too) */
int64_t em_shape_numel(const em_shape *s);
/* a * b for sizes (element or byte counts): false when either is negative or the product does
 * not fit both int64_t and size_t. Every size product in ember goes through it. */
bool em_size_mul(int64_t a, int64_t b, int64_t *out);
/* "[64,784]" of a bare shape into buf (for messages); returns buf */
const char *em_shape_fmt(const em_shape *s, char *buf, size_t n);

/* Refcounted bytes on one device, owned by that device's allocator (tensor/tensor_internal.h). */
typedef struct em_storage em_storage;

struct em_node;

typedef struct em_tensor {
    em_dtype dtype;
    em_device device;
    int ndim;
    int64_t shape[EM_MAX_DIMS];
    int64_t strides[EM_MAX_DIMS]; /* in elements */
    int64_t offset;               /* in elements, into storage */
    em_storage *storage;

    /* autograd */
    bool requires_grad;
    bool retains_grad;     /* a non-leaf that keeps its grad after backward */
    struct em_tensor *grad; /* owned; same shape, dtype and device */
    struct em_node *node;   /* the op that made this tensor, or NULL for a leaf; owned */
} em_tensor;

/* ---- lifetime ----
 * Every call that returns a new tensor hands the caller one reference. Inside a scope
 * (em_scope_begin/end) that reference belongs to the scope unless em_keep() takes it out. */
em_tensor *em_retain(em_tensor *t);
void em_release(em_tensor *t); /* NULL is fine */

/* ---- creation (on the CPU; em_to_device moves) ---- */
em_tensor *em_empty(em_shape shape, em_dtype dtype);
em_tensor *em_empty_on(em_shape shape, em_dtype dtype, em_device device);
em_tensor *em_zeros(em_shape shape, em_dtype dtype);
em_tensor *em_ones(em_shape shape, em_dtype dtype);
em_tensor *em_full(em_shape shape, em_dtype dtype, double value);
em_tensor *em_scalar(double value, em_dtype dtype); /* 0-d */
em_tensor *em_arange(double start, double end, double step, em_dtype dtype);
em_tensor *em_from_data(em_shape shape, em_dtype dtype, const void *data); /* copies */
em_tensor *em_empty_like(const em_tensor *t);
em_tensor *em_zeros_like(const em_tensor *t);
em_tensor *em_ones_like(const em_tensor *t);
em_tensor *em_full_like(const em_tensor *t, double value);

/* random; gen NULL means the global generator (em_manual_seed) */
em_tensor *em_rand(em_shape shape, em_dtype dtype, em_generator *gen);  /* U[0, 1) */
em_tensor *em_randn(em_shape shape, em_dtype dtype, em_generator *gen); /* N(0, 1) */
em_tensor *em_uniform(em_shape shape, em_dtype dtype, double low, double high, em_generator *gen);
em_tensor *em_normal(em_shape shape, em_dtype dtype, double mean, double std, em_generator *gen);
em_tensor *em_randint(em_shape shape, em_dtype dtype, int64_t low, int64_t high, em_generator *gen);
em_tensor *em_bernoulli(em_shape shape, em_dtype dtype, double p, em_generator *gen);
/* the same draws in place, into t on its own device (the numbers do not depend on the device) */
em_status em_uniform_(em_tensor *t, double low, double high, em_generator *gen);
em_status em_normal_(em_tensor *t, double mean, double std, em_generator *gen);
em_status em_randint_(em_tensor *t, int64_t low, int64_t high, em_generator *gen);
em_status em_bernoulli_(em_tensor *t, double p, em_generator *gen);

/* ---- inspection ---- */
int64_t em_numel(const em_tensor *t);
int64_t em_size(const em_tensor *t, int dim); /* negative dim counts from the end; -1 on error */
em_shape em_shape_of(const em_tensor *t);
bool em_is_contiguous(const em_tensor *t);
bool em_same_shape(const em_tensor *a, const em_tensor *b);
void *em_data_ptr(const em_tensor *t);   /* address of element 0 of the view */
double em_item(const em_tensor *t);      /* the single element as double; NAN + error otherwise */
double em_get(const em_tensor *t, const int64_t *index); /* one element; index has ndim entries */
/* copy all elements, in row-major order, converted to dtype, into a host buffer of numel */
int em_copy_to_host(const em_tensor *t, em_dtype dtype, void *dst);
/* the same into a new malloc'd buffer (free() it); NULL with "em_copy_to_host_new: ..." when
 * out of memory or the copy fails */
void *em_copy_to_host_new(const em_tensor *t, em_dtype dtype);
/* 64-bit FNV-1a over t's dtype, shape and row-major bytes (equal values: equal hashes, whatever
 * the device, strides or offset) */
uint64_t em_tensor_hash(const em_tensor *t);
/* "[64,784]" into buf (for messages); returns buf */
const char *em_shape_str(const em_tensor *t, char *buf, size_t n);
void em_print(const em_tensor *t, FILE *f); /* readable, PyTorch-like, summarised when large */

/* ---- devices ---- */
bool em_device_available(em_device device);
/* a line about the device ("cpu: 2 threads", "NVIDIA H100 ..., compute capability 9.0") into
 * buf; "not available" when it is not */
const char *em_device_describe(em_device device, char *buf, size_t n);
/* what that line leaves out, a "topic: what" line each, into buf (the CPU's: "thread governor:
 * on (...)", "CPU features: AVX2+FMA yes, AVX-512 no, ..." and the engine and ISA that
 * multiply each dtype); "" when the device's backend has nothing more to say, "not available"
 * without the device */
const char *em_device_details(em_device device, char *buf, size_t n);
/* waits for the device's queued work; reports an error a kernel raised there (a bad index) */
em_status em_device_synchronize(em_device device);
/* TF32 tensor cores for f32 matrix products on devices that have them (off by default, as in
 * PyTorch): faster, with 10-bit mantissa products */
em_status em_set_tf32(bool on);
/* The CPU kernels' threads, as torch.set_num_threads and get_num_threads: a parallel op called
 * from this thread forks at most n (fewer while other processes hold the cores), n >= 1 (else
 * EM_ERR_ARG); the count starts at OMP_NUM_THREADS (else the cores), as do threads made later.
 * Results do not depend on it. */
em_status em_set_num_threads(int n);
int em_get_num_threads(void);
/* The threads a parallel op called from this thread forks now: em_get_num_threads, fewer while
 * the thread governor sees other processes holding the cores (1 inside a parallel region). */
int em_get_active_threads(void);

/* ---- in place, outside autograd (initialisation, optimizer updates) ----
 * Views, dtype conversion and other differentiable ops are in autograd/autograd.h. */
em_status em_copy_(em_tensor *dst, const em_tensor *src); /* broadcasts src, converts dtype */
em_status em_fill_(em_tensor *t, double value);
em_status em_zero_(em_tensor *t);
em_tensor *em_to_device(const em_tensor *t, em_device device); /* a copy; no grad */
/* moves a leaf that owns its whole storage (a parameter, a buffer) to device in place, with its
 * grad: every holder of t sees it there */
em_status em_to_device_(em_tensor *t, em_device device);
/* converts such a leaf to dtype in place, with its grad (a tensor that requires grad only to a
 * floating dtype): every holder of t sees it so */
em_status em_to_dtype_(em_tensor *t, em_dtype dtype);

#ifdef __cplusplus
}

/* EM_SHAPE(64, 784) in C++: any integer dims, at most EM_MAX_DIMS of them */
template <typename... Dims> static inline em_shape em_shape_of_dims(Dims... dims)
{
    static_assert(sizeof...(dims) <= EM_MAX_DIMS, "EM_SHAPE: too many dims");
    em_shape s = {};
    const int64_t d[sizeof...(dims) + 1] = {static_cast<int64_t>(dims)...};
    for (s.ndim = 0; s.ndim < (int)sizeof...(dims); s.ndim++)
        s.d[s.ndim] = d[s.ndim];
    return s;
}
#endif

#endif
