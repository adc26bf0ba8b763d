/* 2-D convolution on CUDA (NCHW, stride, padding, dilation, groups) as im2col + cuBLAS GEMM, in a
 * channel-major layout that makes each pass one GEMM per group for a whole chunk of images:
 *   cols (G, K, P) with K = C_in/G * KH * KW and P = images * H_out * W_out,
 *   forward      y_cm (C_out, P)   = w_g (C_out/G, K) @ cols_g        then y = permute + bias
 *   grad_input   dcols_g (K, P)    = w_g^T @ gy_cm_g                  then gx = col2im (gather)
 *   grad_weight  gw_g (C_out/G, K) = gy_cm_g @ cols_g^T (summed over chunks), gbias = row sums.
 * Why im2col + cuBLAS: the products run on cuBLAS's tuned kernels (tensor cores for f16/bf16 with
 * f32 accumulation) with no dependency beyond the toolkit; the column buffer is bounded by
 * chunking the batch. col2im and the bias sums gather in a fixed order: deterministic. Where the
 * build has cuDNN, each entry asks it first (cuda_cudnn.c) and runs these kernels where it
 * declines. */
#include "backend_cuda/cuda_real.cuh"

#define THREADS 256
/* A chunk's column buffer stays under this many bytes (at least one image per chunk). */
#define COLS_BUDGET ((size_t)256 << 20)

struct conv_dims {
    em_conv2d_shape s;
    int64_t images; /* images in this chunk */
    int64_t hwo;    /* H_out * W_out */
    int64_t k;      /* C_in/G * KH * KW */
};

/* cols[g][kk][q] for q = image * HWo + output position, kk = (ci, i, j) of group g */
template <typename T> __global__ void im2col_kernel(conv_dims d, const T *x, T *cols)
{
    const em_conv2d_shape &s = d.s;
    const int64_t p = d.images * d.hwo, total = s.c_in * s.kh * s.kw * p;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t q = e % p, row = e / p; /* row = c * KH * KW + i * KW + j */
        const int64_t c = row / (s.kh * s.kw), i = row / s.kw % s.kh, j = row % s.kw;
        const int64_t img = q / d.hwo, oh = q % d.hwo / s.w_out, ow = q % s.w_out;
        const int64_t ih = oh * s.stride[0] - s.pad[0] + i * s.dilation[0];
        const int64_t iw = ow * s.stride[1] - s.pad[1] + j * s.dilation[1];
        const bool inside = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
        cols[e] = inside ? x[((img * s.c_in + c) * s.h + ih) * s.w + iw] : T(0.0f);
    }
}

/* gx (images, C_in, H, W) = the sum over the taps that read each input element, in (i, j) order */
template <typename T> __global__ void col2im_kernel(conv_dims d, const T *dcols, T *gx)
{
    const em_conv2d_shape &s = d.s;
    const int64_t p = d.images * d.hwo, total = d.images * s.c_in * s.h * s.w;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t iw = e % s.w, ih = e / s.w % s.h, c = e / (s.w * s.h) % s.c_in;
        const int64_t img = e / (s.w * s.h * s.c_in);
        acc_t<T> sum = 0;
        for (int64_t i = 0; i < s.kh; i++) {
            const int64_t th = ih + s.pad[0] - i * s.dilation[0];
            if (th < 0 || th % s.stride[0] != 0 || th / s.stride[0] >= s.h_out)
                continue;
            for (int64_t j = 0; j < s.kw; j++) {
                const int64_t tw = iw + s.pad[1] - j * s.dilation[1];
                if (tw < 0 || tw % s.stride[1] != 0 || tw / s.stride[1] >= s.w_out)
                    continue;
                const int64_t row = (c * s.kh + i) * s.kw + j;
                const int64_t q = img * d.hwo + th / s.stride[0] * s.w_out + tw / s.stride[1];
                sum += load(dcols + row * p + q);
            }
        }
        store(gx + e, sum);
    }
}

/* y (images, C_out, HWo) = y_cm (C_out, images * HWo) permuted, plus bias (C_out) or none */
template <typename T>
__global__ void from_channel_major(conv_dims d, const T *y_cm, const T *bias, T *y)
{
    const int64_t c_out = d.s.c_out, total = d.images * c_out * d.hwo;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t pos = e % d.hwo, c = e / d.hwo % c_out, img = e / (d.hwo * c_out);
        acc_t<T> v = load(y_cm + c * d.images * d.hwo + img * d.hwo + pos);
        if (bias)
            v += load(bias + c);
        store(y + e, v);
    }
}

/* gy_cm (C_out, images * HWo) = gy (images, C_out, HWo) permuted */
template <typename T> __global__ void to_channel_major(conv_dims d, const T *gy, T *gy_cm)
{
    const int64_t c_out = d.s.c_out, total = d.images * c_out * d.hwo;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t pos = e % d.hwo, img = e / d.hwo % d.images, c = e / (d.hwo * d.images);
        gy_cm[e] = gy[(img * c_out + c) * d.hwo + pos];
    }
}

/* gbias[c] += sum over the chunk of gy_cm's row c: one block a row, a fixed tree */
template <typename T>
__global__ void bias_grad_kernel(conv_dims d, const T *gy_cm, acc_t<T> *gbias_acc)
{
    __shared__ acc_t<T> part[THREADS];
    const int64_t p = d.images * d.hwo, c = blockIdx.x;
    acc_t<T> sum = 0;
    for (int64_t q = threadIdx.x; q < p; q += THREADS)
        sum += load(gy_cm + c * p + q);
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        gbias_acc[c] += part[0];
}

template <typename T> __global__ void store_acc(int64_t n, const acc_t<T> *acc, T *out)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        store(out + e, acc[e]);
}

static bool shape_ok(const em_conv2d_shape *s)
{
    return s->n >= 0 && s->c_in >= 1 && s->c_out >= 1 && s->groups >= 1 &&
           s->c_in % s->groups == 0 && s->c_out % s->groups == 0 && s->h >= 0 && s->w >= 0 &&
           s->kh >= 1 && s->kw >= 1 && s->h_out >= 0 && s->w_out >= 0 && s->stride[0] >= 1 &&
           s->stride[1] >= 1 && s->dilation[0] >= 1 && s->dilation[1] >= 1 && s->pad[0] >= 0 &&
           s->pad[1] >= 0;
}

static conv_dims dims_of(const em_conv2d_shape *s)
{
    conv_dims d = {*s, 0, s->h_out * s->w_out, s->c_in / s->groups * s->kh * s->kw};
    return d;
}

/* Images per chunk so that the column buffer (and the channel-major copies) fit the budget. */
static int64_t chunk_images(const conv_dims *d, size_t elem)
{
    const size_t per_image = (size_t)(d->k * d->s.groups + d->s.c_out) * (size_t)d->hwo * elem;
    int64_t nb = per_image ? (int64_t)(COLS_BUDGET / per_image) : d->s.n;
    return nb < 1 ? 1 : nb > d->s.n ? d->s.n : nb;
}

/* Scratch of one chunk: cols (G, K, P) and a channel-major (C_out, P) buffer. */
struct conv_scratch {
    void *block;
    size_t bytes;
    char *cols, *cm;
};

static bool scratch_new(conv_scratch *sc, const conv_dims *d, int64_t nb, size_t elem)
{
    const size_t cols = (size_t)(d->k * d->s.groups * nb * d->hwo) * elem;
    const size_t cm = (size_t)(d->s.c_out * nb * d->hwo) * elem;
    sc->bytes = cols + cm;
    sc->block = em_cuda_scratch(sc->bytes ? sc->bytes : 1);
    sc->cols = (char *)sc->block;
    sc->cm = sc->cols + cols;
    return sc->block != NULL;
}

/* The chunk of images [first, first + nb) as dims */
static conv_dims chunk_of(const conv_dims *d, int64_t nb)
{
    conv_dims c = *d;
    c.images = nb;
    return c;
}

extern "C" int em_cuda_conv2d(const em_conv2d_shape *s, em_dtype dt, const void *x,
                              const void *w, const void *bias, void *y)
{
    if (!shape_ok(s))
        return EM_KERNEL_UNSUPPORTED;
    const int by_cudnn = em_cudnn_conv2d(s, dt, x, w, bias, y);
    if (by_cudnn != EM_KERNEL_UNSUPPORTED)
        return by_cudnn;
    conv_dims d = dims_of(s);
    if (s->n == 0 || d.hwo == 0)
        return EM_KERNEL_OK;
    return dispatch_float(dt, [&](auto t) {
        using T = decltype(t);
        const int64_t nb = chunk_images(&d, sizeof(T)), g = s->groups, cg = s->c_out / g;
        conv_scratch sc;
        if (!scratch_new(&sc, &d, nb, sizeof(T)))
            return (int)EM_KERNEL_FAILED;
        int rc = EM_KERNEL_OK;
        for (int64_t first = 0; first < s->n && rc == EM_KERNEL_OK; first += nb) {
            const conv_dims c = chunk_of(&d, first + nb <= s->n ? nb : s->n - first);
            const int64_t p = c.images * c.hwo;
            const T *xc = (const T *)x + first * s->c_in * s->h * s->w;
            im2col_kernel<T><<<grid_for(s->c_in * s->kh * s->kw * p, THREADS), THREADS, 0,
                               em_cuda_launch_stream()>>>(c, xc, (T *)sc.cols);
            rc = em_cuda_launch_status();
            if (rc == EM_KERNEL_OK) /* y_cm_g (cg, P) = w_g (cg, K) @ cols_g (K, P) */
                rc = em_cuda_gemm(dt, false, false, cg, p, d.k, 1.0, w, d.k, cg * d.k, sc.cols,
                                  p, d.k * p, 0.0, sc.cm, p, cg * p, g);
            if (rc == EM_KERNEL_OK) {
                from_channel_major<T><<<grid_for(c.images * s->c_out * c.hwo, THREADS), THREADS,
                                        0, em_cuda_launch_stream()>>>(
                    c, (const T *)sc.cm, (const T *)bias, (T *)y + first * s->c_out * c.hwo);
                rc = em_cuda_launch_status();
            }
        }
        em_cuda_scratch_free(sc.block, sc.bytes ? sc.bytes : 1);
        return rc;
    });
}

extern "C" int em_cuda_conv2d_grad_input(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                         const void *w, void *gx)
{
    if (!shape_ok(s))
        return EM_KERNEL_UNSUPPORTED;
    const int by_cudnn = em_cudnn_conv2d_grad_input(s, dt, gy, w, gx);
    if (by_cudnn != EM_KERNEL_UNSUPPORTED)
        return by_cudnn;
    conv_dims d = dims_of(s);
    if (s->n == 0 || s->c_in * s->h * s->w == 0)
        return EM_KERNEL_OK;
    return dispatch_float(dt, [&](auto t) {
        using T = decltype(t);
        const int64_t nb = chunk_images(&d, sizeof(T)), g = s->groups, cg = s->c_out / g;
        conv_scratch sc;
        if (!scratch_new(&sc, &d, nb, sizeof(T)))
            return (int)EM_KERNEL_FAILED;
        int rc = EM_KERNEL_OK;
        for (int64_t first = 0; first < s->n && rc == EM_KERNEL_OK; first += nb) {
            const conv_dims c = chunk_of(&d, first + nb <= s->n ? nb : s->n - first);
            const int64_t p = c.images * c.hwo;
            if (p > 0) {
                to_channel_major<T><<<grid_for(c.images * s->c_out * c.hwo, THREADS), THREADS,
                                      0, em_cuda_launch_stream()>>>(
                    c, (const T *)gy + first * s->c_out * c.hwo, (T *)sc.cm);
                rc = em_cuda_launch_status();
            }
            if (rc == EM_KERNEL_OK && p > 0) /* dcols_g (K, P) = w_g^T (K, cg) @ gy_cm_g */
                rc = em_cuda_gemm(dt, true, false, d.k, p, cg, 1.0, w, d.k, cg * d.k, sc.cm, p,
                                  cg * p, 0.0, sc.cols, p, d.k * p, g);
            if (rc == EM_KERNEL_OK) {
                col2im_kernel<T><<<grid_for(c.images * s->c_in * s->h * s->w, THREADS), THREADS,
                                   0, em_cuda_launch_stream()>>>(
                    c, (const T *)sc.cols, (T *)gx + first * s->c_in * s->h * s->w);
                rc = em_cuda_launch_status();
            }
        }
        em_cuda_scratch_free(sc.block, sc.bytes ? sc.bytes : 1);
        return rc;
    });
}

extern "C" int em_cuda_conv2d_grad_weight(const em_conv2d_shape *s, em_dtype dt, const void *gy,
                                          const void *x, void *gw, void *gbias)
{
    if (!shape_ok(s))
        return EM_KERNEL_UNSUPPORTED;
    const int by_cudnn = em_cudnn_conv2d_grad_weight(s, dt, gy, x, gw, gbias);
    if (by_cudnn != EM_KERNEL_UNSUPPORTED)
        return by_cudnn;
    conv_dims d = dims_of(s);
    return dispatch_float(dt, [&](auto t) {
        using T = decltype(t);
        using A = acc_t<T>;
        const int64_t nb = chunk_images(&d, sizeof(T)), g = s->groups, cg = s->c_out / g;
        const int64_t gw_n = s->c_out * d.k;
        /* the weight gradient sums over chunks in f32 (f64 for f64): a half-precision
         * accumulator would round after every chunk */
        const size_t acc_bytes = (size_t)(gw_n + s->c_out) * sizeof(A);
        A *acc = (A *)em_cuda_scratch(acc_bytes);
        conv_scratch sc;
        if (!acc || !scratch_new(&sc, &d, nb, sizeof(T))) {
            em_cuda_scratch_free(acc, acc_bytes);
            return (int)EM_KERNEL_FAILED;
        }
        const em_dtype acc_dt = sizeof(A) == sizeof(double) ? EM_F64 : EM_F32;
        int rc = em_cuda_status(cudaMemsetAsync(acc, 0, acc_bytes, em_cuda_launch_stream()));
        for (int64_t first = 0; first < s->n && rc == EM_KERNEL_OK; first += nb) {
            const conv_dims c = chunk_of(&d, first + nb <= s->n ? nb : s->n - first);
            const int64_t p = c.images * c.hwo;
            if (p == 0)
                continue;
            im2col_kernel<T><<<grid_for(s->c_in * s->kh * s->kw * p, THREADS), THREADS, 0,
                               em_cuda_launch_stream()>>>(c, (const T *)x + first * s->c_in * s->h *
                                                                         s->w, (T *)sc.cols);
            to_channel_major<T><<<grid_for(c.images * s->c_out * c.hwo, THREADS), THREADS, 0,
                                  em_cuda_launch_stream()>>>(
                c, (const T *)gy + first * s->c_out * c.hwo, (T *)sc.cm);
            rc = em_cuda_launch_status();
            if (rc == EM_KERNEL_OK && acc_dt == dt) /* acc_g (cg, K) += gy_cm_g @ cols_g^T */
                rc = em_cuda_gemm(dt, false, true, cg, d.k, p, 1.0, sc.cm, p, cg * p, sc.cols,
                                  p, d.k * p, 1.0, acc, d.k, cg * d.k, g);
            else if (rc == EM_KERNEL_OK) /* halves: the half product added to f32 */
                rc = em_cuda_gemm_f32_out(dt, false, true, cg, d.k, p, 1.0, sc.cm, p, cg * p,
                                          sc.cols, p, d.k * p, 1.0, (float *)acc, d.k, cg * d.k,
                                          g);
            if (rc == EM_KERNEL_OK && gbias) {
                bias_grad_kernel<T><<<(unsigned)s->c_out, THREADS, 0, em_cuda_launch_stream()>>>(
                    c, (const T *)sc.cm, acc + gw_n);
                rc = em_cuda_launch_status();
            }
        }
        if (rc == EM_KERNEL_OK) {
            store_acc<T><<<grid_for(gw_n, THREADS), THREADS, 0, em_cuda_launch_stream()>>>(
                gw_n, acc, (T *)gw);
            if (gbias)
                store_acc<T><<<grid_for(s->c_out, THREADS), THREADS, 0, em_cuda_launch_stream()>>>(
                    s->c_out, acc + gw_n, (T *)gbias);
            rc = em_cuda_launch_status();
        }
        em_cuda_scratch_free(sc.block, sc.bytes ? sc.bytes : 1);
        em_cuda_scratch_free(acc, acc_bytes);
        return rc;
    });
}
