/* 2-D convolutions on CUDA through cuDNN, where the build found it: forward (the bias added by
 * cudnnAddTensor), the input gradient and the weight gradient (the bias gradient by ember's
 * reduction), f32 (TF32 only when switched on), f16 and bf16 with f32 compute. Per shape the
 * descriptors and each direction's algorithm are chosen once and kept: cuDNN's heuristic by
 * default, its measured fastest with EMBER_CUDNN=find; deterministic algorithms only, their
 * workspace from ember's allocator. EMBER_CUDNN=0 turns cuDNN off, for ember's own kernels
 * (cuda_conv.cu), which also serve what cuDNN is not asked to (f64) or declines. */
#include <cudnn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda/cuda_internal.h"

typedef enum { DIR_FORWARD, DIR_GRAD_INPUT, DIR_GRAD_WEIGHT, N_DIRS } conv_dir;

#define MAX_ALGOS 16
#define MAX_PLANS 128
#define WORKSPACE_CAP ((size_t)512 << 20) /* the most workspace an algorithm may ask for */

/* What a plan depends on; zeroed before it is filled, so that memcmp compares it. */
typedef struct {
    em_conv2d_shape s;
    em_dtype dt;
    bool tf32;
} plan_key;

typedef struct {
    int algo;
    cudnnMathType_t math;
    size_t workspace;
} choice;

typedef struct {
    plan_key key;
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    bool made;                /* the descriptors were set */
    bool chosen[N_DIRS];      /* the direction's algorithm was looked for */
    bool usable[N_DIRS];      /* and one was found */
    choice pick[N_DIRS];
} plan;

typedef enum { MODE_OFF, MODE_HEURISTIC, MODE_FIND } cudnn_mode;

static struct {
    pthread_mutex_t lock;
    cudnnHandle_t handle;
    bool tried, ready;
    cudnn_mode mode;
    plan plans[MAX_PLANS];
    int n;
} dnn = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool ok(cudnnStatus_t st)
{
    return st == CUDNN_STATUS_SUCCESS;
}

/* The handle on ember's stream and the mode from EMBER_CUDNN, once (lock held). */
static bool dnn_ready(void)
{
    if (dnn.tried)
        return dnn.ready;
    dnn.tried = true;
    const char *env = getenv("EMBER_CUDNN");
    dnn.mode = env && !strcmp(env, "0") ? MODE_OFF
               : env && !strcmp(env, "find") ? MODE_FIND : MODE_HEURISTIC;
    dnn.ready = dnn.mode != MODE_OFF && ok(cudnnCreate(&dnn.handle)) &&
                ok(cudnnSetStream(dnn.handle, em_cuda_stream()));
    return dnn.ready;
}

void em_cudnn_describe(char *buf, size_t n)
{
    pthread_mutex_lock(&dnn.lock);
    bool ready = dnn_ready();
    cudnn_mode mode = dnn.mode;
    pthread_mutex_unlock(&dnn.lock);
    size_t v = cudnnGetVersion();
    if (ready)
        snprintf(buf, n, "cuDNN %zu.%zu.%zu (%s)", v / 10000, v / 100 % 100, v % 100,
                 mode == MODE_FIND ? "EMBER_CUDNN=find: measured algorithms" : "heuristic");
    else
        snprintf(buf, n, "cuDNN %zu.%zu.%zu off%s", v / 10000, v / 100 % 100, v % 100,
                 mode == MODE_OFF ? " (EMBER_CUDNN=0)" : ": no handle");
}

static cudnnDataType_t data_type(em_dtype dt)
{
    return dt == EM_F32 ? CUDNN_DATA_FLOAT : dt == EM_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

/* Every tensor of s has its element count and dims in an int, as cuDNN's 4-d descriptors ask. */
static bool fits_int(const em_conv2d_shape *s)
{
    const int64_t counts[3] = {s->n * s->c_in * s->h * s->w, s->n * s->c_out * s->h_out * s->w_out,
                               s->c_out * (s->c_in / s->groups) * s->kh * s->kw};
    for (int i = 0; i < 3; i++)
        if (counts[i] > INT_MAX)
            return false;
    return true;
}

static void plan_destroy(plan *p)
{
    if (p->x)
        cudnnDestroyTensorDescriptor(p->x);
    if (p->y)
        cudnnDestroyTensorDescriptor(p->y);
    if (p->bias)
        cudnnDestroyTensorDescriptor(p->bias);
    if (p->w)
        cudnnDestroyFilterDescriptor(p->w);
    if (p->conv)
        cudnnDestroyConvolutionDescriptor(p->conv);
    memset(p, 0, sizeof *p);
}

/* The descriptors of k's convolution; p->made says whether cuDNN took them (its output shape
 * must be ember's). */
static void plan_make(plan *p, const plan_key *k)
{
    memset(p, 0, sizeof *p);
    p->key = *k;
    const em_conv2d_shape *s = &k->s;
    cudnnDataType_t t = data_type(k->dt);
    int n = 0, c = 0, h = 0, w = 0;
    p->made =
        ok(cudnnCreateTensorDescriptor(&p->x)) && ok(cudnnCreateTensorDescriptor(&p->y)) &&
        ok(cudnnCreateTensorDescriptor(&p->bias)) && ok(cudnnCreateFilterDescriptor(&p->w)) &&
        ok(cudnnCreateConvolutionDescriptor(&p->conv)) &&
        ok(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, t, (int)s->n, (int)s->c_in,
                                      (int)s->h, (int)s->w)) &&
        ok(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, t, (int)s->n, (int)s->c_out,
                                      (int)s->h_out, (int)s->w_out)) &&
        ok(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, t, 1, (int)s->c_out, 1, 1)) &&
        ok(cudnnSetFilter4dDescriptor(p->w, t, CUDNN_TENSOR_NCHW, (int)s->c_out,
                                      (int)(s->c_in / s->groups), (int)s->kh, (int)s->kw)) &&
        ok(cudnnSetConvolution2dDescriptor(p->conv, (int)s->pad[0], (int)s->pad[1],
                                           (int)s->stride[0], (int)s->stride[1],
                                           (int)s->dilation[0], (int)s->dilation[1],
                                           CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) &&
        ok(cudnnSetConvolutionGroupCount(p->conv, (int)s->groups)) &&
        ok(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &c, &h, &w)) &&
        n == s->n && c == s->c_out && h == s->h_out && w == s->w_out;
}

/* One algorithm's report, whichever direction it came from. */
typedef struct {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} report;

/* cuDNN's reports of direction d for p, fastest first (expected or, with ws, measured on the
 * operands a, b, out, which it overwrites); their count, 0 when it failed. */
static int reports_of(plan *p, conv_dir d, const void *a, const void *b, void *out, void *ws,
                      size_t ws_bytes, report *r)
{
    int n = 0;
    bool got = false;
    switch (d) {
    case DIR_FORWARD: {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
        got = ws ? ok(cudnnFindConvolutionForwardAlgorithmEx(dnn.handle, p->x, a, p->w, b,
                                                             p->conv, p->y, out, MAX_ALGOS, &n,
                                                             perf, ws, ws_bytes))
                 : ok(cudnnGetConvolutionForwardAlgorithm_v7(dnn.handle, p->x, p->w, p->conv,
                                                             p->y, MAX_ALGOS, &n, perf));
        for (int i = 0; i < n; i++)
            r[i] = (report){(int)perf[i].algo, perf[i].status, perf[i].memory,
                            perf[i].determinism, perf[i].mathType};
        break;
    }
    case DIR_GRAD_INPUT: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
        got = ws ? ok(cudnnFindConvolutionBackwardDataAlgorithmEx(
                       dnn.handle, p->w, a, p->y, b, p->conv, p->x, out, MAX_ALGOS, &n, perf,
                       ws, ws_bytes))
                 : ok(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn.handle, p->w, p->y,
                                                                  p->conv, p->x, MAX_ALGOS, &n,
                                                                  perf));
        for (int i = 0; i < n; i++)
            r[i] = (report){(int)perf[i].algo, perf[i].status, perf[i].memory,
                            perf[i].determinism, perf[i].mathType};
        break;
    }
    case DIR_GRAD_WEIGHT: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
        got = ws ? ok(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                       dnn.handle, p->x, a, p->y, b, p->conv, p->w, out, MAX_ALGOS, &n, perf,
                       ws, ws_bytes))
                 : ok(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn.handle, p->x, p->y,
                                                                    p->conv, p->w, MAX_ALGOS,
                                                                    &n, perf));
        for (int i = 0; i < n; i++)
            r[i] = (report){(int)perf[i].algo, perf[i].status, perf[i].memory,
                            perf[i].determinism, perf[i].mathType};
        break;
    }
    case N_DIRS:
        break;
    }
    return got ? n : 0;
}

/* f32 without TF32 takes FMA kernels only (PyTorch's rule); halves any math. */
static cudnnMathType_t asked_math(const plan_key *k)
{
    return k->dt != EM_F32 ? CUDNN_TENSOR_OP_MATH : k->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

static bool math_allowed(const plan_key *k, cudnnMathType_t m)
{
    return k->dt != EM_F32 || k->tf32 || m != CUDNN_TENSOR_OP_MATH;
}

/* Direction d's algorithm for p, chosen once (lock held): the first report that succeeded, is
 * deterministic, fits WORKSPACE_CAP and keeps the math p's dtype allows. */
static void choose(plan *p, conv_dir d, const void *a, const void *b, void *out)
{
    p->chosen[d] = true;
    if (!ok(cudnnSetConvolutionMathType(p->conv, asked_math(&p->key))))
        return;
    report r[MAX_ALGOS];
    void *ws = dnn.mode == MODE_FIND ? em_cuda_scratch(WORKSPACE_CAP) : NULL;
    int n = reports_of(p, d, a, b, out, ws, ws ? WORKSPACE_CAP : 0, r);
    em_cuda_scratch_free(ws, WORKSPACE_CAP);
    for (int i = 0; i < n; i++) {
        if (r[i].status != CUDNN_STATUS_SUCCESS || r[i].determinism != CUDNN_DETERMINISTIC ||
            r[i].memory > WORKSPACE_CAP || !math_allowed(&p->key, r[i].math))
            continue;
        cudnnMathType_t math = p->key.dt == EM_F32 && !p->key.tf32 ? CUDNN_FMA_MATH : r[i].math;
        p->pick[d] = (choice){.algo = r[i].algo, .math = math, .workspace = r[i].memory};
        p->usable[d] = true;
        return;
    }
}

/* The kept plan of k (lock held), made on first use; a plan of its own in *spare (destroyed
 * after the call) when the cache is full. */
static plan *plan_get(const plan_key *k, plan *spare)
{
    for (int i = 0; i < dnn.n; i++)
        if (!memcmp(&dnn.plans[i].key, k, sizeof *k))
            return &dnn.plans[i];
    plan *p = dnn.n < MAX_PLANS ? &dnn.plans[dnn.n++] : spare;
    plan_make(p, k);
    return p;
}

/* Runs direction d of s through cuDNN: EM_KERNEL_UNSUPPORTED where cuDNN does not serve it. */
static int run(conv_dir d, const em_conv2d_shape *s, em_dtype dt, const void *a, const void *b,
               void *out)
{
    if ((dt != EM_F32 && dt != EM_F16 && dt != EM_BF16) || s->n == 0 || !fits_int(s))
        return EM_KERNEL_UNSUPPORTED;
    plan_key key;
    memset(&key, 0, sizeof key);
    key.s = *s;
    key.dt = dt;
    key.tf32 = em_cuda_tf32();
    pthread_mutex_lock(&dnn.lock);
    int rc = EM_KERNEL_UNSUPPORTED;
    plan spare = {0};
    plan *p = dnn_ready() ? plan_get(&key, &spare) : NULL;
    if (p && p->made && !p->chosen[d])
        choose(p, d, a, b, out);
    if (p && p->made && p->usable[d]) {
        const choice *c = &p->pick[d];
        void *ws = c->workspace ? em_cuda_scratch(c->workspace) : NULL;
        const float one = 1, zero = 0;
        em_cuda_count_launch();
        bool done = (!c->workspace || ws) && ok(cudnnSetConvolutionMathType(p->conv, c->math));
        if (done && d == DIR_FORWARD)
            done = ok(cudnnConvolutionForward(dnn.handle, &one, p->x, a, p->w, b, p->conv,
                                              (cudnnConvolutionFwdAlgo_t)c->algo, ws,
                                              c->workspace, &zero, p->y, out));
        else if (done && d == DIR_GRAD_INPUT)
            done = ok(cudnnConvolutionBackwardData(dnn.handle, &one, p->w, a, p->y, b, p->conv,
                                                   (cudnnConvolutionBwdDataAlgo_t)c->algo, ws,
                                                   c->workspace, &zero, p->x, out));
        else if (done)
            done = ok(cudnnConvolutionBackwardFilter(dnn.handle, &one, p->x, a, p->y, b,
                                                     p->conv,
                                                     (cudnnConvolutionBwdFilterAlgo_t)c->algo,
                                                     ws, c->workspace, &zero, p->w, out));
        em_cuda_scratch_free(ws, c->workspace);
        rc = done ? EM_KERNEL_OK : EM_KERNEL_FAILED;
    }
    if (p == &spare)
        plan_destroy(&spare);
    pthread_mutex_unlock(&dnn.lock);
    return rc;
}

/* y += bias along its channels (one launch) */
static int add_bias(const em_conv2d_shape *s, em_dtype dt, const void *bias, void *y)
{
    plan_key key;
    memset(&key, 0, sizeof key);
    key.s = *s;
    key.dt = dt;
    key.tf32 = em_cuda_tf32();
    pthread_mutex_lock(&dnn.lock);
    plan spare = {0};
    plan *p = plan_get(&key, &spare);
    const float one = 1;
    em_cuda_count_launch();
    bool done = p->made && ok(cudnnAddTensor(dnn.handle, &one, p->bias, bias, &one, p->y, y));
    if (p == &spare)
        plan_destroy(&spare);
    pthread_mutex_unlock(&dnn.lock);
    return done ? EM_KERNEL_OK : EM_KERNEL_FAILED;
}

int em_cudnn_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x, const void *w,
                    const void *bias, void *y)
{
    int rc = run(DIR_FORWARD, s, dt, x, w, y);
    return rc == EM_KERNEL_OK && bias ? add_bias(s, dt, bias, y) : rc;
}

int em_cudnn_conv2d_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                               const void *w, void *gx)
{
    return run(DIR_GRAD_INPUT, s, dt, w, gy, gx);
}

/* gbias (C_out) = gy (N, C_out, H_out, W_out) summed over all but its channels */
static int bias_grad(const em_conv2d_shape *s, em_dtype dt, const void *gy, void *gbias)
{
    const int64_t hw = s->h_out * s->w_out;
    em_arr in = {.data = (void *)gy, .dtype = dt, .ndim = 3, .shape = {s->n, s->c_out, hw},
                 .strides = {s->c_out * hw, hw, 1}};
    em_arr out = {.data = gbias, .dtype = dt, .ndim = 3, .shape = {1, s->c_out, 1},
                  .strides = {s->c_out, 1, 1}};
    return em_cuda_reduce(EM_REDUCE_SUM, &(em_reduce_params){0}, &out, &in);
}

int em_cudnn_conv2d_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                const void *x, void *gw, void *gbias)
{
    int rc = run(DIR_GRAD_WEIGHT, s, dt, x, gy, gw);
    return rc == EM_KERNEL_OK && gbias ? bias_grad(s, dt, gy, gbias) : rc;
}
