/* 2-D max and average pooling on CUDA, forward and backward, every float dtype (halves in f32).
 * One thread per output element forward; backward gathers, one thread per input element, over
 * the outputs whose windows hold it in row-major order (the CPU's order, no atomics). */
#include <math.h>

#include "backend_cuda/cuda_real.cuh"

#define THREADS 256

/* x (N*C, H, W) -> y, argmax (N*C, H_out, W_out); padding reads as -inf, the first maximum
 * wins, NaN propagates; argmax is the maximum's tap in its window, -1 for an all-padding window
 * and, with s.relu, where the maximum is not positive (whose ReLU is then 0 for a negative one). */
template <typename T>
__global__ void max_pool_kernel(em_pool2d_shape s, const T *x, T *y, em_pool_tap *argmax)
{
    const int64_t hwo = s.h_out * s.w_out, total = s.n * s.c * hwo;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total;
         o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = o / hwo, oh = o % hwo / s.w_out, ow = o % s.w_out;
        const int64_t h0 = oh * s.stride[0] - s.pad[0], w0 = ow * s.stride[1] - s.pad[1];
        const T *plane = x + p * s.h * s.w;
        acc_t<T> best = -INFINITY;
        int64_t arg = -1;
        for (int64_t i = 0; i < s.kernel[0]; i++)
            for (int64_t j = 0; j < s.kernel[1]; j++) {
                const int64_t ih = h0 + i * s.dilation[0], iw = w0 + j * s.dilation[1];
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w)
                    continue;
                const acc_t<T> v = load(plane + ih * s.w + iw);
                if (arg < 0 || v > best || (isnan(v) && !isnan(best))) {
                    best = v;
                    arg = i * s.kernel[1] + j;
                }
            }
        if (s.relu && !(best > 0))
            arg = -1;
        if (s.relu && best < 0)
            best = 0;
        store(y + o, best);
        if (argmax)
            argmax[o] = (em_pool_tap)arg;
    }
}

/* The outputs along one axis whose windows (start o * stride - pad, span k) hold position i:
 * [*lo, *hi); with dilation, only those whose taps land on i (a multiple of it from the start). */
__device__ __forceinline__ void covering(int64_t i, int64_t stride, int64_t pad, int64_t k,
                                         int64_t out, int64_t *lo, int64_t *hi)
{
    const int64_t top = i + pad;             /* o * stride <= top */
    const int64_t first = top - k + 1;       /* o * stride >= first */
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    *hi = top / stride + 1;
    if (*hi > out)
        *hi = out;
}

/* gx (N*C, H, W) = the sum of gy over the outputs whose argmax is this element's tap */
template <typename T>
__global__ void max_pool_grad_kernel(em_pool2d_shape s, const T *gy, const em_pool_tap *argmax,
                                     T *gx)
{
    const int64_t hw = s.h * s.w, total = s.n * s.c * hw, hwo = s.h_out * s.w_out;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = e / hw, at = e % hw, ih = at / s.w, iw = at % s.w;
        int64_t oh0, oh1, ow0, ow1;
        const int64_t d0 = s.dilation[0], d1 = s.dilation[1];
        covering(ih, s.stride[0], s.pad[0], d0 * (s.kernel[0] - 1) + 1, s.h_out, &oh0, &oh1);
        covering(iw, s.stride[1], s.pad[1], d1 * (s.kernel[1] - 1) + 1, s.w_out, &ow0, &ow1);
        acc_t<T> sum = 0;
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++) {
                const int64_t o = p * hwo + oh * s.w_out + ow;
                const int64_t dh = ih - (oh * s.stride[0] - s.pad[0]);
                const int64_t dw = iw - (ow * s.stride[1] - s.pad[1]);
                if (dh % d0 == 0 && dw % d1 == 0 && argmax[o] == dh / d0 * s.kernel[1] + dw / d1)
                    sum += load(gy + o);
            }
        store(gx + e, sum);
    }
}

/* The window of output (oh, ow) clipped to the plane and its divisor, as the CPU's. */
struct window {
    int64_t h0, h1, w0, w1, count;
};

__device__ __forceinline__ window avg_window(const em_pool2d_shape &s, int64_t oh, int64_t ow)
{
    int64_t h0 = oh * s.stride[0] - s.pad[0], w0 = ow * s.stride[1] - s.pad[1];
    int64_t h1 = h0 + s.kernel[0], w1 = w0 + s.kernel[1];
    h1 = h1 < s.h + s.pad[0] ? h1 : s.h + s.pad[0];
    w1 = w1 < s.w + s.pad[1] ? w1 : s.w + s.pad[1];
    const int64_t padded = (h1 - h0) * (w1 - w0);
    window win = {h0 > 0 ? h0 : 0, h1 < s.h ? h1 : s.h, w0 > 0 ? w0 : 0, w1 < s.w ? w1 : s.w, 0};
    win.count = s.count_include_pad ? padded : (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
}

template <typename T> __global__ void avg_pool_kernel(em_pool2d_shape s, const T *x, T *y)
{
    const int64_t hwo = s.h_out * s.w_out, total = s.n * s.c * hwo;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total;
         o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = o / hwo, oh = o % hwo / s.w_out, ow = o % s.w_out;
        const window win = avg_window(s, oh, ow);
        const T *plane = x + p * s.h * s.w;
        acc_t<T> sum = 0;
        for (int64_t ih = win.h0; ih < win.h1; ih++)
            for (int64_t iw = win.w0; iw < win.w1; iw++)
                sum += load(plane + ih * s.w + iw);
        store(y + o, win.count > 0 ? sum / (acc_t<T>)win.count : (acc_t<T>)0);
    }
}

template <typename T> __global__ void avg_pool_grad_kernel(em_pool2d_shape s, const T *gy, T *gx)
{
    const int64_t hw = s.h * s.w, total = s.n * s.c * hw, hwo = s.h_out * s.w_out;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = e / hw, ih = e % hw / s.w, iw = e % s.w;
        int64_t oh0, oh1, ow0, ow1;
        covering(ih, s.stride[0], s.pad[0], s.kernel[0], s.h_out, &oh0, &oh1);
        covering(iw, s.stride[1], s.pad[1], s.kernel[1], s.w_out, &ow0, &ow1);
        acc_t<T> sum = 0;
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++) {
                const window win = avg_window(s, oh, ow);
                if (win.count > 0 && ih >= win.h0 && ih < win.h1 && iw >= win.w0 && iw < win.w1)
                    sum += load(gy + p * hwo + oh * s.w_out + ow) / (acc_t<T>)win.count;
            }
        store(gx + e, sum);
    }
}

static bool shape_ok(const em_pool2d_shape *s)
{
    return s->n >= 0 && s->c >= 0 && s->h >= 0 && s->w >= 0 && s->h_out >= 0 && s->w_out >= 0 &&
           s->kernel[0] > 0 && s->kernel[1] > 0 && s->stride[0] > 0 && s->stride[1] > 0 &&
           s->dilation[0] > 0 && s->dilation[1] > 0;
}

/* Checks s, then runs launch(T{}, grid) for dt's storage type T over n threads' work. */
template <typename F> static int pool_launch(const em_pool2d_shape *s, int64_t n, em_dtype dt,
                                             F launch)
{
    if (!shape_ok(s))
        return EM_KERNEL_UNSUPPORTED;
    if (n == 0)
        return EM_KERNEL_OK;
    return dispatch_float(dt, [&](auto t) {
        launch(t, grid_for(n, THREADS));
        return em_cuda_launch_status();
    });
}

extern "C" int em_cuda_max_pool2d(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y,
                                  em_pool_tap *argmax)
{
    return pool_launch(s, s->n * s->c * s->h_out * s->w_out, dt, [&](auto t, unsigned grid) {
        using T = decltype(t);
        max_pool_kernel<T><<<grid, THREADS, 0, em_cuda_launch_stream()>>>(*s, (const T *)x, (T *)y,
                                                                    argmax);
    });
}

extern "C" int em_cuda_max_pool2d_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy,
                                       const em_pool_tap *argmax, void *gx)
{
    return pool_launch(s, s->n * s->c * s->h * s->w, dt, [&](auto t, unsigned grid) {
        using T = decltype(t);
        max_pool_grad_kernel<T><<<grid, THREADS, 0, em_cuda_launch_stream()>>>(*s, (const T *)gy,
                                                                         argmax, (T *)gx);
    });
}

extern "C" int em_cuda_avg_pool2d(const em_pool2d_shape *s, em_dtype dt, const void *x, void *y)
{
    return pool_launch(s, s->n * s->c * s->h_out * s->w_out, dt, [&](auto t, unsigned grid) {
        using T = decltype(t);
        avg_pool_kernel<T><<<grid, THREADS, 0, em_cuda_launch_stream()>>>(*s, (const T *)x, (T *)y);
    });
}

extern "C" int em_cuda_avg_pool2d_grad(const em_pool2d_shape *s, em_dtype dt, const void *gy,
                                       void *gx)
{
    return pool_launch(s, s->n * s->c * s->h * s->w, dt, [&](auto t, unsigned grid) {
        using T = decltype(t);
        avg_pool_grad_kernel<T><<<grid, THREADS, 0, em_cuda_launch_stream()>>>(*s, (const T *)gy,
                                                                        (T *)gx);
    });
}
