/* The typed body of the CPU 2-D convolution, included by cpu_conv.c once per real type: im2col,
 * col2im and the per-image products. Expects REAL (float or double), REAL_DT (EM_F32 or EM_F64)
 * and CONV_FN(name), which names a function for that type.
 *
 * Images are spread over OpenMP threads, each with its own scratch and single-threaded BLAS
 * calls; a batch smaller than the thread count goes image by image with threaded BLAS.
 * Three layouts of the column matrix: a 1x1 stride-1 convolution uses x itself; other stride-1
 * convolutions use the padded grid (see conv_grid in cpu_conv.c), where every tap is one
 * contiguous run; the rest use the classic im2col with bounds per row. */

/* col (C_in*KH*KW, H_out*W_out): row (c, i, j) holds plane c seen through tap (i, j), 0 where
 * the tap falls in the padding. */
static void CONV_FN(im2col)(const em_conv2d_shape *s, const REAL *x, REAL *col)
{
    const int64_t hwo = s->h_out * s->w_out, taps = s->kh * s->kw, rows = s->c_in * taps;
    const int64_t sh = s->stride[0], sw = s->stride[1];
    #pragma omp parallel for if (!omp_in_parallel() && rows * hwo >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++) {
        const int64_t c = r / taps, i = r / s->kw % s->kh, j = r % s->kw;
        const int64_t dh = i * s->dilation[0] - s->pad[0], dw = j * s->dilation[1] - s->pad[1];
        const int64_t lo = conv_first_inside(dw, sw, s->w_out);
        const int64_t hi = conv_end_inside(dw, sw, s->w, s->w_out, lo);
        const REAL *xc = x + c * s->h * s->w; // (H, W)
        REAL *dst = col + r * hwo;            // (H_out, W_out)
        for (int64_t oh = 0; oh < s->h_out; oh++) {
            REAL *d = dst + oh * s->w_out;
            const int64_t ih = oh * sh + dh;
            if (ih < 0 || ih >= s->h) {
                memset(d, 0, (size_t)s->w_out * sizeof(REAL));
                continue;
            }
            const REAL *src = xc + ih * s->w + dw;
            for (int64_t ow = 0; ow < lo; ow++)
                d[ow] = 0;
            if (sw == 1) {
                #pragma omp simd
                for (int64_t ow = lo; ow < hi; ow++)
                    d[ow] = src[ow];
            } else {
                #pragma omp simd
                for (int64_t ow = lo; ow < hi; ow++)
                    d[ow] = src[ow * sw];
            }
            for (int64_t ow = hi; ow < s->w_out; ow++)
                d[ow] = 0;
        }
    }
}

/* gx (C_in, H, W) = the sum of every col entry back onto the input element it was read from. */
static void CONV_FN(col2im)(const em_conv2d_shape *s, const REAL *col, REAL *gx)
{
    const int64_t hwo = s->h_out * s->w_out, taps = s->kh * s->kw;
    const int64_t sh = s->stride[0], sw = s->stride[1];
    #pragma omp parallel for num_threads(em_cpu_threads()) \
            if (!omp_in_parallel() && s->c_in * taps * hwo >= EM_CPU_PARALLEL_MIN)
    for (int64_t c = 0; c < s->c_in; c++) {
        REAL *g = gx + c * s->h * s->w; // (H, W)
        memset(g, 0, (size_t)(s->h * s->w) * sizeof(REAL));
        for (int64_t t = 0; t < taps; t++) {
            const int64_t i = t / s->kw, j = t % s->kw;
            const int64_t dh = i * s->dilation[0] - s->pad[0], dw = j * s->dilation[1] - s->pad[1];
            const int64_t lo = conv_first_inside(dw, sw, s->w_out);
            const int64_t hi = conv_end_inside(dw, sw, s->w, s->w_out, lo);
            const REAL *src = col + (c * taps + t) * hwo; // (H_out, W_out)
            for (int64_t oh = 0; oh < s->h_out; oh++) {
                const int64_t ih = oh * sh + dh;
                if (ih < 0 || ih >= s->h)
                    continue;
                REAL *d = g + ih * s->w + dw;
                const REAL *v = src + oh * s->w_out;
                #pragma omp simd
                for (int64_t ow = lo; ow < hi; ow++)
                    d[ow * sw] += v[ow];
            }
        }
    }
}

/* xp (C_in, Hp, Wp) + slack = x_n (C_in, H, W) inside a zero border. */
static void CONV_FN(grid_pad)(const em_conv2d_shape *s, const conv_grid_dims *gd, const REAL *x,
                              REAL *xp)
{
    memset(xp, 0, (size_t)(s->c_in * gd->plane + gd->slack) * sizeof(REAL));
    for (int64_t c = 0; c < s->c_in; c++)
        for (int64_t h = 0; h < s->h; h++)
            memcpy(xp + c * gd->plane + (h + s->pad[0]) * gd->wp + s->pad[1],
                   x + (c * s->h + h) * s->w, (size_t)s->w * sizeof(REAL));
}

/* col (C_in*KH*KW, H_out*Wp): row (c, i, j) is the run of xp that tap (i, j) sees. */
static void CONV_FN(grid_im2col)(const em_conv2d_shape *s, const conv_grid_dims *gd,
                                 const REAL *xp, REAL *col)
{
    for (int64_t c = 0; c < s->c_in; c++)
        for (int64_t i = 0; i < s->kh; i++)
            for (int64_t j = 0; j < s->kw; j++)
                memcpy(col + ((c * s->kh + i) * s->kw + j) * gd->grid,
                       xp + c * gd->plane + i * s->dilation[0] * gd->wp + j * s->dilation[1],
                       (size_t)gd->grid * sizeof(REAL));
}

/* gyp (C_out, H_out*Wp) = gy_n (C_out, H_out, W_out) with the spare columns 0, so they add
 * nothing to gw and leave 0 in the spare columns of W^T @ gyp. */
static void CONV_FN(grid_spread)(const em_conv2d_shape *s, const conv_grid_dims *gd,
                                 const REAL *gy, REAL *gyp)
{
    for (int64_t r = 0; r < s->c_out * s->h_out; r++) {
        memcpy(gyp + r * gd->wp, gy + r * s->w_out, (size_t)s->w_out * sizeof(REAL));
        memset(gyp + r * gd->wp + s->w_out, 0, (size_t)(gd->wp - s->w_out) * sizeof(REAL));
    }
}

/* y_n (C_out, H_out, W_out) = bias + W @ col on the grid, spare columns dropped. */
static void CONV_FN(grid_forward1)(const em_conv2d_shape *s, const conv_grid_dims *gd,
                                   const REAL *x, const REAL *w, const REAL *bias, REAL *y,
                                   REAL *scratch)
{
    const int64_t cog = s->c_out / s->groups, kc = s->c_in / s->groups * s->kh * s->kw;
    REAL *col = scratch, *xp = col + s->c_in * s->kh * s->kw * gd->grid;
    REAL *out = xp + s->c_in * gd->plane + gd->slack; // (C_out, H_out*Wp)
    CONV_FN(grid_pad)(s, gd, x, xp);
    CONV_FN(grid_im2col)(s, gd, xp, col);
    for (int64_t g = 0; g < s->groups; g++)
        em_cpu_gemm(REAL_DT, false, false, cog, gd->grid, kc, 1.0, w + g * cog * kc, kc, 0,
                    col + g * kc * gd->grid, gd->grid, 0, 0.0, out + g * cog * gd->grid,
                    gd->grid, 0, 1);
    for (int64_t co = 0; co < s->c_out; co++) {
        const REAL b = bias ? bias[co] : 0;
        for (int64_t oh = 0; oh < s->h_out; oh++) {
            const REAL *src = out + co * gd->grid + oh * gd->wp;
            REAL *dst = y + (co * s->h_out + oh) * s->w_out;
            #pragma omp simd
            for (int64_t ow = 0; ow < s->w_out; ow++)
                dst[ow] = src[ow] + b;
        }
    }
}

/* gx_n (C_in, H, W) = the interior of col2im(W^T @ gyp): each tap's row adds onto one run. */
static void CONV_FN(grid_grad_input1)(const em_conv2d_shape *s, const conv_grid_dims *gd,
                                      const REAL *gy, const REAL *w, REAL *gx, REAL *scratch)
{
    const int64_t cog = s->c_out / s->groups, kc = s->c_in / s->groups * s->kh * s->kw;
    REAL *gcol = scratch, *gxp = gcol + s->c_in * s->kh * s->kw * gd->grid;
    REAL *gyp = gxp + s->c_in * gd->plane + gd->slack;
    CONV_FN(grid_spread)(s, gd, gy, gyp);
    for (int64_t g = 0; g < s->groups; g++)
        em_cpu_gemm(REAL_DT, true, false, kc, gd->grid, cog, 1.0, w + g * cog * kc, kc, 0,
                    gyp + g * cog * gd->grid, gd->grid, 0, 0.0, gcol + g * kc * gd->grid,
                    gd->grid, 0, 1);
    memset(gxp, 0, (size_t)(s->c_in * gd->plane + gd->slack) * sizeof(REAL));
    for (int64_t c = 0; c < s->c_in; c++)
        for (int64_t i = 0; i < s->kh; i++)
            for (int64_t j = 0; j < s->kw; j++) {
                const REAL *src = gcol + ((c * s->kh + i) * s->kw + j) * gd->grid;
                REAL *dst = gxp + c * gd->plane + i * s->dilation[0] * gd->wp
                            + j * s->dilation[1];
                #pragma omp simd
                for (int64_t p = 0; p < gd->grid; p++)
                    dst[p] += src[p];
            }
    for (int64_t c = 0; c < s->c_in; c++)
        for (int64_t h = 0; h < s->h; h++)
            memcpy(gx + (c * s->h + h) * s->w,
                   gxp + c * gd->plane + (h + s->pad[0]) * gd->wp + s->pad[1],
                   (size_t)s->w * sizeof(REAL));
}

/* gw (+)= gyp @ col^T on the grid; the spare columns of gyp are 0. */
static void CONV_FN(grid_grad_weight1)(const em_conv2d_shape *s, const conv_grid_dims *gd,
                                       const REAL *gy, const REAL *x, REAL *gw, double beta,
                                       REAL *scratch)
{
    const int64_t cog = s->c_out / s->groups, kc = s->c_in / s->groups * s->kh * s->kw;
    REAL *col = scratch, *xp = col + s->c_in * s->kh * s->kw * gd->grid;
    REAL *gyp = xp + s->c_in * gd->plane + gd->slack;
    CONV_FN(grid_pad)(s, gd, x, xp);
    CONV_FN(grid_im2col)(s, gd, xp, col);
    CONV_FN(grid_spread)(s, gd, gy, gyp);
    for (int64_t g = 0; g < s->groups; g++)
        em_cpu_gemm(REAL_DT, false, true, cog, kc, gd->grid, 1.0, gyp + g * cog * gd->grid,
                    gd->grid, 0, col + g * kc * gd->grid, gd->grid, 0, beta, gw + g * cog * kc,
                    kc, 0, 1);
}

/* y_n (C_out, H_out*W_out) = bias + W @ col(x_n) per group: y starts as the bias (or 0) and the
 * product adds onto it (beta 1), one pass over y fewer than adding the bias afterwards. */
static void CONV_FN(forward1)(const em_conv2d_shape *s, const REAL *x, const REAL *w,
                              const REAL *bias, REAL *y, REAL *scratch)
{
    const conv_grid_dims gd = conv_grid(s);
    if (gd.grid > 0) {
        CONV_FN(grid_forward1)(s, &gd, x, w, bias, y, scratch);
        return;
    }
    const int64_t hwo = s->h_out * s->w_out, cog = s->c_out / s->groups;
    const int64_t kc = s->c_in / s->groups * s->kh * s->kw;
    const REAL *cols = x;
    if (!conv_is_pointwise(s)) {
        CONV_FN(im2col)(s, x, scratch);
        cols = scratch;
    }
    for (int64_t co = 0; co < s->c_out; co++) {
        const REAL b = bias ? bias[co] : 0;
        REAL *row = y + co * hwo;
        #pragma omp simd
        for (int64_t p = 0; p < hwo; p++)
            row[p] = b;
    }
    for (int64_t g = 0; g < s->groups; g++)
        em_cpu_gemm(REAL_DT, false, false, cog, hwo, kc, 1.0, w + g * cog * kc, kc, 0,
                    cols + g * kc * hwo, hwo, 0, 1.0, y + g * cog * hwo, hwo, 0, 1);
}

/* gx_n (C_in, H, W) = col2im(W^T @ gy_n) per group. */
static void CONV_FN(grad_input1)(const em_conv2d_shape *s, const REAL *gy, const REAL *w,
                                 REAL *gx, REAL *scratch)
{
    const conv_grid_dims gd = conv_grid(s);
    if (gd.grid > 0) {
        CONV_FN(grid_grad_input1)(s, &gd, gy, w, gx, scratch);
        return;
    }
    const int64_t hwo = s->h_out * s->w_out, cog = s->c_out / s->groups;
    const int64_t kc = s->c_in / s->groups * s->kh * s->kw;
    REAL *gcol = conv_is_pointwise(s) ? gx : scratch;
    for (int64_t g = 0; g < s->groups; g++)
        em_cpu_gemm(REAL_DT, true, false, kc, hwo, cog, 1.0, w + g * cog * kc, kc, 0,
                    gy + g * cog * hwo, hwo, 0, 0.0, gcol + g * kc * hwo, hwo, 0, 1);
    if (gcol == scratch)
        CONV_FN(col2im)(s, scratch, gx);
}

/* gw (C_out, C_in/groups*KH*KW) (+)= gy_n @ col(x_n)^T per group; beta 0 starts the sum. */
static void CONV_FN(grad_weight1)(const em_conv2d_shape *s, const REAL *gy, const REAL *x,
                                  REAL *gw, double beta, REAL *scratch)
{
    const conv_grid_dims gd = conv_grid(s);
    if (gd.grid > 0) {
        CONV_FN(grid_grad_weight1)(s, &gd, gy, x, gw, beta, scratch);
        return;
    }
    const int64_t hwo = s->h_out * s->w_out, cog = s->c_out / s->groups;
    const int64_t kc = s->c_in / s->groups * s->kh * s->kw;
    const REAL *cols = x;
    if (!conv_is_pointwise(s)) {
        CONV_FN(im2col)(s, x, scratch);
        cols = scratch;
    }
    for (int64_t g = 0; g < s->groups; g++)
        em_cpu_gemm(REAL_DT, false, true, cog, kc, hwo, 1.0, gy + g * cog * hwo, hwo, 0,
                    cols + g * kc * hwo, hwo, 0, beta, gw + g * cog * kc, kc, 0, 1);
}

static int CONV_FN(conv2d)(const em_conv2d_shape *s, const REAL *x, const REAL *w,
                           const REAL *bias, REAL *y)
{
    const int64_t per_thread = conv_scratch(s);
    const int nt = conv_threads(s->n);
    REAL *scratch = em_cpu_scratch((size_t)(nt * per_thread) * sizeof(REAL));
    if (!scratch)
        return EM_KERNEL_FAILED;
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        REAL *mine = scratch + omp_get_thread_num() * per_thread;
        #pragma omp for schedule(static)
        for (int64_t n = 0; n < s->n; n++)
            CONV_FN(forward1)(s, x + n * s->c_in * s->h * s->w, w, bias,
                              y + n * s->c_out * s->h_out * s->w_out, mine);
    }
    em_cpu_scratch_free(scratch);
    return EM_KERNEL_OK;
}

static int CONV_FN(grad_input)(const em_conv2d_shape *s, const REAL *gy, const REAL *w, REAL *gx)
{
    const int64_t per_thread = conv_scratch(s);
    const int nt = conv_threads(s->n);
    REAL *scratch = em_cpu_scratch((size_t)(nt * per_thread) * sizeof(REAL));
    if (!scratch)
        return EM_KERNEL_FAILED;
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        REAL *mine = scratch + omp_get_thread_num() * per_thread;
        #pragma omp for schedule(static)
        for (int64_t n = 0; n < s->n; n++)
            CONV_FN(grad_input1)(s, gy + n * s->c_out * s->h_out * s->w_out, w,
                                 gx + n * s->c_in * s->h * s->w, mine);
    }
    em_cpu_scratch_free(scratch);
    return EM_KERNEL_OK;
}

/* gbias (C_out) = gy summed over N, H_out, W_out in a fixed order: each plane in SIMD lanes,
 * the planes' sums in double. */
static void CONV_FN(grad_bias)(const em_conv2d_shape *s, const REAL *gy, REAL *gbias)
{
    const int64_t hwo = s->h_out * s->w_out;
    #pragma omp parallel for if (s->n * s->c_out * hwo >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t co = 0; co < s->c_out; co++) {
        double sum = 0;
        for (int64_t n = 0; n < s->n; n++) {
            const REAL *g = gy + (n * s->c_out + co) * hwo;
            REAL plane = 0;
            #pragma omp simd reduction(+ : plane)
            for (int64_t p = 0; p < hwo; p++)
                plane += g[p];
            sum += plane;
        }
        gbias[co] = (REAL)sum;
    }
}

/* The batch is cut into a fixed number of blocks whatever the thread count; each block sums its
 * images into a partial gw, and the partials are added in block order: the same bits on any
 * number of threads. */
static int CONV_FN(grad_weight)(const em_conv2d_shape *s, const REAL *gy, const REAL *x, REAL *gw,
                                REAL *gbias)
{
    const int64_t per_thread = conv_scratch(s);
    const int64_t gw_n = s->c_out * (s->c_in / s->groups) * s->kh * s->kw;
    const int64_t blocks = s->n < CONV_GW_BLOCKS ? s->n : CONV_GW_BLOCKS;
    const int nt = conv_threads(blocks);
    REAL *scratch = em_cpu_scratch((size_t)(nt * per_thread) * sizeof(REAL));
    REAL *part = blocks > 1 ? em_cpu_scratch((size_t)(blocks * gw_n) * sizeof(REAL)) : gw;
    if (!scratch || !part) {
        em_cpu_scratch_free(scratch);
        if (part != gw)
            em_cpu_scratch_free(part);
        return EM_KERNEL_FAILED;
    }
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        REAL *mine = scratch + omp_get_thread_num() * per_thread;
        #pragma omp for schedule(static)
        for (int64_t b = 0; b < blocks; b++)
            for (int64_t n = b * s->n / blocks; n < (b + 1) * s->n / blocks; n++)
                CONV_FN(grad_weight1)(s, gy + n * s->c_out * s->h_out * s->w_out,
                                      x + n * s->c_in * s->h * s->w, part + b * gw_n,
                                      n == b * s->n / blocks ? 0.0 : 1.0, mine);
    }
    if (part != gw) {
        #pragma omp parallel for if (blocks * gw_n >= EM_CPU_PARALLEL_MIN) \
                num_threads(em_cpu_threads())
        for (int64_t i = 0; i < gw_n; i++) {
            REAL sum = part[i];
            for (int64_t b = 1; b < blocks; b++)
                sum += part[b * gw_n + i];
            gw[i] = sum;
        }
        em_cpu_scratch_free(part);
    }
    em_cpu_scratch_free(scratch);
    if (gbias)
        CONV_FN(grad_bias)(s, gy, gbias);
    return EM_KERNEL_OK;
}
