/* The naive reference convolution the CPU kernels are tested against: shapes, element counts
 * and the seven loops in f64. */
#ifndef EMBER_TEST_CONV_NAIVE_H
#define EMBER_TEST_CONV_NAIVE_H

#include <stdint.h>

#include "backend/backend_internal.h"

/* The shape of a convolution of x (n, c_in, h, w) into c_out channels, output sizes computed. */
em_conv2d_shape conv_test_shape(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out,
                                int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                int64_t pw, int64_t dh, int64_t dw, int64_t groups);
int64_t conv_x_count(const em_conv2d_shape *s);
int64_t conv_y_count(const em_conv2d_shape *s);
int64_t conv_w_count(const em_conv2d_shape *s);
/* y (N, C_out, H_out, W_out) from x (N, C_in, H, W), w (C_out, C_in/groups, KH, KW) and bias
 * (C_out) or NULL; or, given gy (like y), gx, gw and gb (C_out) instead. */
void conv_naive(const em_conv2d_shape *s, const double *x, const double *w, const double *bias,
                double *y, const double *gy, double *gx, double *gw, double *gb);

#endif
