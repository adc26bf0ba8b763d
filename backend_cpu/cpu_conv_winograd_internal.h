/* Winograd f32 convolution of cpu_conv_winograd.c: 3x3, stride-1, undilated, ungrouped layers
 * on AVX2+FMA CPUs, forward and both gradients. cpu_conv.c asks whether a shape fits (and
 * whether it pays) and otherwise keeps its other paths. */
#ifndef EMBER_CPU_CONV_WINOGRAD_INTERNAL_H
#define EMBER_CPU_CONV_WINOGRAD_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend_internal.h"

/* Whether the Winograd kernels can run s on this CPU (3x3, stride 1, dilation 1, groups 1; for
 * grad_input also pad <= 2 on both axes). */
bool em_cpu_conv_winograd_can(const em_conv2d_shape *s, bool grad_input);
/* Whether cpu_conv.c takes them for s: em_cpu_conv_winograd_can and measured to pay (enough
 * channels on both sides). EMBER_WINOGRAD=0 in the environment turns them off, =1 takes them
 * wherever they can run. */
bool em_cpu_conv_winograd_chosen(const em_conv2d_shape *s, bool grad_input);

/* The images x, y, gy and gx are of dt (f32, f16 or bf16: a half chunk of 16 images widened
 * and narrowed in cache, the same bits as widening the whole batch first); weights, bias and
 * their gradients f32. */
int em_cpu_conv_winograd_forward(const em_conv2d_shape *s, em_dtype dt,
                                 const void *x,     // (N, C_in, H, W)
                                 const float *w,    // (C_out, C_in, 3, 3)
                                 const float *bias, // (C_out) or NULL
                                 void *y);          // (N, C_out, H_out, W_out)
int em_cpu_conv_winograd_grad_input(const em_conv2d_shape *s, em_dtype dt,
                                    const void *gy, // (N, C_out, H_out, W_out)
                                    const float *w, // (C_out, C_in, 3, 3)
                                    void *gx);      // (N, C_in, H, W)
/* gw and gbias = sums over the batch (N >= 1), cut into fixed blocks of images whose partial
 * sums are added in block order: the same bits on any number of threads. */
int em_cpu_conv_winograd_grad_weight(const em_conv2d_shape *s, em_dtype dt,
                                     const void *gy, // (N, C_out, H_out, W_out)
                                     const void *x,  // (N, C_in, H, W)
                                     float *gw,      // (C_out, C_in, 3, 3)
                                     float *gbias);  // (C_out) or NULL

#endif
