/* What the CPU can run, each feature checked once at run time (backend_cpu/cpu_features.c); the
 * kernels pick their bodies by it and `ember info` reports it. Not installed. */
#ifndef EMBER_CPU_FEATURES_INTERNAL_H
#define EMBER_CPU_FEATURES_INTERNAL_H

#include <stdbool.h>

bool em_cpu_has_avx2(void);        /* AVX2 and FMA */
bool em_cpu_has_avx512(void);      /* AVX-512 F, BW, DQ and VL, on top of AVX2 */
bool em_cpu_has_avx512_vnni(void); /* AVX-512 VNNI, on top of em_cpu_has_avx512 */
bool em_cpu_has_f16c(void);        /* AVX and F16C */
/* oneDNN's products use them (cpu_dnnl.c). AVX512_BF16 on top of em_cpu_has_avx512; AMX-BF16
 * and AMX-INT8 where the OS also keeps the tile state (XCR0 bits 17 and 18). */
bool em_cpu_has_avx512_bf16(void);
bool em_cpu_has_amx_bf16(void);
bool em_cpu_has_amx_int8(void);
/* EMBER_CPU_ISA=avx2: the features above report AVX2 at most and oneDNN is held to AVX2, so the
 * kernels an AVX2-only CPU runs run here (GCC's target_clones still pick by the CPU itself). */
bool em_cpu_isa_capped(void);

/* Kernels with an AVX-512 body take it when em_cpu_use_avx512, which tests turn off to run the
 * AVX2 body on the same CPU. */
bool em_cpu_use_avx512(void);
void em_cpu_set_avx512(bool on); /* on: where the CPU has it (the default) */

#endif
