/* The naive reference convolution the CPU kernels are tested against (tests/helpers). */
#include <string.h>

#include "helpers/conv_naive.h"

em_conv2d_shape conv_test_shape(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out,
                                int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                int64_t pw, int64_t dh, int64_t dw, int64_t groups)
{
    em_conv2d_shape s = {.n = n, .c_in = c_in, .h = h, .w = w, .c_out = c_out, .kh = kh,
                         .kw = kw, .stride = {sh, sw}, .pad = {ph, pw}, .dilation = {dh, dw},
                         .groups = groups};
    s.h_out = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
    s.w_out = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    return s;
}

int64_t conv_x_count(const em_conv2d_shape *s) { return s->n * s->c_in * s->h * s->w; }
int64_t conv_y_count(const em_conv2d_shape *s) { return s->n * s->c_out * s->h_out * s->w_out; }
int64_t conv_w_count(const em_conv2d_shape *s)
{
    return s->c_out * (s->c_in / s->groups) * s->kh * s->kw;
}

/* The seven loops: every (n, co, oh, ow) against every (ci, i, j) of its group. Computes y from
 * x, w, bias; or, given gy, accumulates gx and gw (gb) instead. */
void conv_naive(const em_conv2d_shape *s, const double *x, const double *w, const double *bias,
                double *y, const double *gy, double *gx, double *gw, double *gb)
{
    const int64_t cig = s->c_in / s->groups, cog = s->c_out / s->groups;
    if (gy) {
        memset(gx, 0, (size_t)conv_x_count(s) * sizeof(double));
        memset(gw, 0, (size_t)conv_w_count(s) * sizeof(double));
        memset(gb, 0, (size_t)s->c_out * sizeof(double));
    }
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t co = 0; co < s->c_out; co++)
            for (int64_t oh = 0; oh < s->h_out; oh++)
                for (int64_t ow = 0; ow < s->w_out; ow++) {
                    const int64_t yi = ((n * s->c_out + co) * s->h_out + oh) * s->w_out + ow;
                    const int64_t g = co / cog;
                    double acc = bias ? bias[co] : 0;
                    if (gy)
                        gb[co] += gy[yi];
                    for (int64_t ci = 0; ci < cig; ci++)
                        for (int64_t i = 0; i < s->kh; i++)
                            for (int64_t j = 0; j < s->kw; j++) {
                                int64_t ih = oh * s->stride[0] - s->pad[0] + i * s->dilation[0];
                                int64_t iw = ow * s->stride[1] - s->pad[1] + j * s->dilation[1];
                                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w)
                                    continue;
                                int64_t c = g * cig + ci;
                                int64_t xi = ((n * s->c_in + c) * s->h + ih) * s->w + iw;
                                int64_t wi = ((co * cig + ci) * s->kh + i) * s->kw + j;
                                if (gy) {
                                    gx[xi] += gy[yi] * w[wi];
                                    gw[wi] += gy[yi] * x[xi];
                                } else {
                                    acc += x[xi] * w[wi];
                                }
                            }
                    if (!gy)
                        y[yi] = acc;
                }
}
