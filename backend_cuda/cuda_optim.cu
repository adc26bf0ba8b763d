/* Fused optimizer updates on CUDA: SGD, Adam/AdamW and RMSprop over every array of a list in one
 * launch (cuda_list.cuh), PyTorch's order of operations; f32 in f32 arithmetic as the CPU's f32
 * kernels, f64 in f64. A kernel takes its step's constants by value, or from device memory
 * inside a captured graph (em_update_consts): the same arithmetic either way. */
#include <float.h>

#include "backend_cuda/cuda_list.cuh"

/* Optimizer state is kept normal or 0, as on the CPU (backend_cpu/cpu_optim.c says why): a value
 * below the smallest normal number of its type becomes 0. */
__device__ __forceinline__ float normal_state(float x)
{
    return fabsf(x) < FLT_MIN ? 0.0f : x;
}

__device__ __forceinline__ double normal_state(double x)
{
    return fabs(x) < DBL_MIN ? 0.0 : x;
}

/* The arithmetic type of an update: f32 arrays update in f32, f64 arrays in f64. */
template <typename T> struct sgd_consts {
    T lr, wd, keep, fresh, bm, dm;
    bool momentum;
};

/* The constants of a launch: from device memory where kp is given, else kv. */
template <typename K> __device__ __forceinline__ K consts_of(const K &kv, const K *kp)
{
    return kp ? *kp : kv;
}

/* Where a launch reads its constants k: *kp NULL (the parameters) or at->consts, written there
 * first unless the stream is capturing. */
template <typename K>
static int place_consts(const em_update_consts *at, const K &k, const K **kp)
{
    static_assert(sizeof(K) <= EM_UPDATE_CONSTS_BYTES, "an update's constants outgrow their slot");
    *kp = (const K *)at->consts;
    if (!at->consts || em_cuda_capturing())
        return EM_KERNEL_OK;
    return em_cuda_status(cudaMemcpyAsync(at->consts, &k, sizeof k, cudaMemcpyHostToDevice,
                                          em_cuda_launch_stream()));
}

template <typename T, typename L>
__global__ void sgd_kernel(L c, sgd_consts<T> kv, const sgd_consts<T> *kp)
{
    const sgd_consts<T> k = consts_of(kv, kp);
    const int a = blockIdx.y;
    T *p = (T *)c.data[a];              // (numel)
    const T *g = (const T *)c.grad[a];  // (numel)
    T *buf = (T *)c.state[0][a];        // (numel) or NULL
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < c.numel[a];
         i += (int64_t)gridDim.x * blockDim.x) {
        const T d = g[i] + k.wd * p[i];
        if (!k.momentum) {
            p[i] -= k.lr * d;
            continue;
        }
        const T b = normal_state(k.keep * buf[i] + k.fresh * d);
        buf[i] = b;
        p[i] -= k.lr * (k.bm * b + k.dm * d);
    }
}


/* The step's choices as factors, as the CPU's f32 kernel: b = keep * b + fresh * d,
 * p -= lr * (bm * b + dm * d) gives b = d on the first step and nesterov's d + momentum * b. */
template <typename T> static sgd_consts<T> sgd_of(const em_sgd_hparams *h)
{
    sgd_consts<T> k;
    k.lr = (T)h->lr;
    k.wd = (T)h->weight_decay;
    k.keep = h->first_step ? (T)0 : (T)h->momentum;
    k.fresh = h->first_step ? (T)1 : (T)(1 - h->dampening);
    k.bm = h->nesterov ? (T)h->momentum : (T)1;
    k.dm = h->nesterov ? (T)1 : (T)0;
    k.momentum = h->momentum != 0; /* the state list holds buffers exactly then */
    return k;
}

template <typename T> static int sgd_launch(const em_sgd_hparams *h, const em_array_list *l)
{
    const sgd_consts<T> k = sgd_of<T>(h);
    const sgd_consts<T> *kp;
    int rc = place_consts(&h->at, k, &kp);
    if (rc != EM_KERNEL_OK || h->at.write_only)
        return rc;
    return for_each_chunk(l, [&](const auto &c, dim3 grid, int) {
        sgd_kernel<T><<<grid, LIST_THREADS, 0, em_cuda_launch_stream()>>>(c, k, kp);
        return em_cuda_launch_status();
    });
}

extern "C" int em_cuda_sgd_update(em_dtype dt, const em_sgd_hparams *h, const em_array_list *l)
{
    if (l->low) /* autocast's copies: the optimizer casts them after the update */
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        return sgd_launch<float>(h, l);
    if (dt == EM_F64)
        return sgd_launch<double>(h, l);
    return EM_KERNEL_UNSUPPORTED;
}

template <typename T> struct adam_consts {
    T w1, b1, b2, w2, eps, step_size, bc2, decay, l2;
    bool amsgrad;
};

/* f32: PyTorch's f32 order (the first moment as a lerp); f64: the CPU's double form, which is
 * the same arithmetic written out. */
template <typename T, typename L>
__global__ void adam_kernel(L c, adam_consts<T> kv, const adam_consts<T> *kp)
{
    const adam_consts<T> k = consts_of(kv, kp);
    const int a = blockIdx.y;
    T *p = (T *)c.data[a];               // (numel)
    const T *g = (const T *)c.grad[a];   // (numel)
    T *m = (T *)c.state[0][a];           // (numel)
    T *v = (T *)c.state[1][a];           // (numel)
    T *vmax = (T *)c.state[2][a];        // (numel) or NULL
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < c.numel[a];
         i += (int64_t)gridDim.x * blockDim.x) {
        const T pi = p[i] * k.decay;
        const T gi = g[i] + k.l2 * p[i];
        const T mi = normal_state(m[i] + k.w1 * (gi - m[i]));
        const T vi = normal_state(v[i] * k.b2 + k.w2 * gi * gi);
        m[i] = mi;
        v[i] = vi;
        T s = vi;
        if (k.amsgrad) {
            s = vmax[i] > vi ? vmax[i] : vi;
            vmax[i] = s;
        }
        p[i] = pi - k.step_size * (mi / (sqrt(s) / k.bc2 + k.eps));
    }
}

template <typename T> static adam_consts<T> adam_of(const em_adam_hparams *h)
{
    adam_consts<T> k;
    k.w1 = (T)(1 - h->beta1);
    k.b1 = (T)h->beta1;
    k.b2 = (T)h->beta2;
    k.w2 = (T)(1 - h->beta2);
    k.eps = (T)h->eps;
    k.step_size = (T)(h->lr / (1 - pow(h->beta1, (double)h->step)));
    k.bc2 = (T)sqrt(1 - pow(h->beta2, (double)h->step));
    k.decay = h->decoupled ? (T)(1 - h->lr * h->weight_decay) : (T)1;
    k.l2 = h->decoupled ? (T)0 : (T)h->weight_decay;
    k.amsgrad = h->amsgrad;
    return k;
}

template <typename T> static int adam_launch(const em_adam_hparams *h, const em_array_list *l)
{
    const adam_consts<T> k = adam_of<T>(h);
    const adam_consts<T> *kp;
    int rc = place_consts(&h->at, k, &kp);
    if (rc != EM_KERNEL_OK || h->at.write_only)
        return rc;
    return for_each_chunk(l, [&](const auto &c, dim3 grid, int) {
        adam_kernel<T><<<grid, LIST_THREADS, 0, em_cuda_launch_stream()>>>(c, k, kp);
        return em_cuda_launch_status();
    });
}

extern "C" int em_cuda_adam_update(em_dtype dt, const em_adam_hparams *h, const em_array_list *l)
{
    if (l->low) /* autocast's copies: the optimizer casts them after the update */
        return EM_KERNEL_UNSUPPORTED;
    if (h->amsgrad && !l->state[2] && !h->at.write_only)
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        return adam_launch<float>(h, l);
    if (dt == EM_F64)
        return adam_launch<double>(h, l);
    return EM_KERNEL_UNSUPPORTED;
}

template <typename T> struct rmsprop_consts {
    T lr, alpha, w, eps, wd, momentum;
};

template <typename T, typename L>
__global__ void rmsprop_kernel(L c, rmsprop_consts<T> kv, const rmsprop_consts<T> *kp)
{
    const rmsprop_consts<T> k = consts_of(kv, kp);
    const int a = blockIdx.y;
    T *p = (T *)c.data[a];               // (numel)
    const T *g = (const T *)c.grad[a];   // (numel)
    T *sq = (T *)c.state[0][a];          // (numel)
    T *buf = (T *)c.state[1][a];         // (numel) or NULL
    T *gavg = (T *)c.state[2][a];        // (numel) or NULL
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < c.numel[a];
         i += (int64_t)gridDim.x * blockDim.x) {
        const T gi = g[i] + k.wd * p[i];
        const T s = normal_state(sq[i] * k.alpha + k.w * gi * gi);
        sq[i] = s;
        T avg;
        if (gavg) {
            /* ga^2 <= s: a square average kept 0 takes the gradient's average with it */
            const T ga = s == 0 ? (T)0 : normal_state(gavg[i] * k.alpha + k.w * gi);
            gavg[i] = ga;
            avg = sqrt(s - ga * ga);
        } else {
            avg = sqrt(s);
        }
        avg += k.eps;
        if (buf) {
            const T b = normal_state(buf[i] * k.momentum + gi / avg);
            buf[i] = b;
            p[i] -= k.lr * b;
        } else {
            p[i] -= k.lr * (gi / avg);
        }
    }
}

template <typename T> static rmsprop_consts<T> rmsprop_of(const em_rmsprop_hparams *h)
{
    rmsprop_consts<T> k;
    k.lr = (T)h->lr;
    k.alpha = (T)h->alpha;
    k.w = (T)(1 - h->alpha);
    k.eps = (T)h->eps;
    k.wd = (T)h->weight_decay;
    k.momentum = (T)h->momentum;
    return k;
}

template <typename T>
static int rmsprop_launch(const em_rmsprop_hparams *h, const em_array_list *l)
{
    const rmsprop_consts<T> k = rmsprop_of<T>(h);
    const rmsprop_consts<T> *kp;
    int rc = place_consts(&h->at, k, &kp);
    if (rc != EM_KERNEL_OK || h->at.write_only)
        return rc;
    return for_each_chunk(l, [&](const auto &c, dim3 grid, int) {
        rmsprop_kernel<T><<<grid, LIST_THREADS, 0, em_cuda_launch_stream()>>>(c, k, kp);
        return em_cuda_launch_status();
    });
}

extern "C" int em_cuda_rmsprop_update(em_dtype dt, const em_rmsprop_hparams *h,
                                      const em_array_list *l)
{
    if (l->low) /* autocast's copies: the optimizer casts them after the update */
        return EM_KERNEL_UNSUPPORTED;
    if (dt == EM_F32)
        return rmsprop_launch<float>(h, l);
    if (dt == EM_F64)
        return rmsprop_launch<double>(h, l);
    return EM_KERNEL_UNSUPPORTED;
}
