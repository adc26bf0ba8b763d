/* The direct f32 convolution of cpu_conv_direct.c: stride-1 layers on AVX2+FMA CPUs, without a
 * column matrix. cpu_conv.c asks whether a shape fits and otherwise keeps its GEMM path. The
 * images (x, y, gy, gx) are of dt: f32, or f16/bf16 widened to f32 as they are read and the
 * outputs rounded back, with the bits of the f32 kernels on the widened images; weights and
 * their gradients are f32. */
#ifndef EMBER_CPU_CONV_DIRECT_INTERNAL_H
#define EMBER_CPU_CONV_DIRECT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend_internal.h"

/* Whether forward and grad_weight of s run direct on this CPU (groups 1, stride 1, a kernel
 * larger than 1x1, output rows of 8 or more, C_in*KH*KW small enough for the cache). */
bool em_cpu_conv_direct_fits(const em_conv2d_shape *s);
/* Whether grad_input of s runs direct: as em_cpu_conv_direct_fits for the forward pass over gy
 * with the flipped weights, which needs pad <= (K-1)*dilation on both axes. */
bool em_cpu_conv_direct_grad_input_fits(const em_conv2d_shape *s);

int em_cpu_conv_direct_forward(const em_conv2d_shape *s, em_dtype dt,
                               const void *x,     // (N, C_in, H, W)
                               const float *w,    // (C_out, C_in, KH, KW)
                               const float *bias, // (C_out) or NULL
                               void *y);          // (N, C_out, H_out, W_out)
int em_cpu_conv_direct_grad_input(const em_conv2d_shape *s, em_dtype dt,
                                  const void *gy, // (N, C_out, H_out, W_out)
                                  const float *w, // (C_out, C_in, KH, KW)
                                  void *gx);      // (N, C_in, H, W)
/* gw and gbias = sums over the batch, cut into `blocks` fixed blocks of images whose partial
 * sums are added in block order: the same bits on any number of threads. */
int em_cpu_conv_direct_grad_weight(const em_conv2d_shape *s, int64_t blocks, em_dtype dt,
                                   const void *gy, // (N, C_out, H_out, W_out)
                                   const void *x,  // (N, C_in, H, W)
                                   float *gw,       // (C_out, C_in, KH, KW)
                                   float *gbias);   // (C_out) or NULL
/* out (n) = the sum of part (blocks, n) over its blocks, added in block order. */
void em_cpu_sum_blocks_f32(const float *part, int64_t blocks, int64_t n, float *out);

#endif
