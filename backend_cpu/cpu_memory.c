/* The CPU backend's memory entries: 64-byte aligned host allocations and plain copies; and what
 * it says about itself. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_features_internal.h"
#include "backend_cpu/cpu_kernels_internal.h"

#define CPU_ALIGN 64

void *em_cpu_alloc(size_t nbytes)
{
    /* aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a block */
    size_t rounded = nbytes ? (nbytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN : CPU_ALIGN;
    if (rounded < nbytes)
        return NULL;
    return aligned_alloc(CPU_ALIGN, rounded);
}

void em_cpu_free(void *ptr)
{
    free(ptr);
}

int em_cpu_copy_from_host(void *dst, const void *src_host, size_t nbytes)
{
    if (nbytes)
        memcpy(dst, src_host, nbytes);
    return EM_KERNEL_OK;
}

int em_cpu_copy_to_host(void *dst_host, const void *src, size_t nbytes)
{
    if (nbytes)
        memcpy(dst_host, src, nbytes);
    return EM_KERNEL_OK;
}

int em_cpu_synchronize(void)
{
    return EM_KERNEL_OK;
}

void em_cpu_describe(char *buf, size_t n)
{
    char blas[160];
    em_cpu_blas_describe(blas, sizeof blas);
    snprintf(buf, n, "%d OpenMP threads (%s), %s, %s", omp_get_max_threads(),
             em_cpu_threads_adaptive() ? "adaptive" : "fixed",
             !em_cpu_has_avx2()     ? "portable kernels (no AVX2)"
             : em_cpu_use_avx512() ? "AVX-512 and AVX2+FMA kernels"
                                   : "AVX2+FMA kernels",
             blas);
}

void em_cpu_details(char *buf, size_t n)
{
    const struct {
        const char *name;
        bool (*has)(void);
    } features[] = {{"AVX2+FMA", em_cpu_has_avx2},
                    {"AVX-512", em_cpu_has_avx512},
                    {"AVX-512 VNNI", em_cpu_has_avx512_vnni},
                    {"F16C", em_cpu_has_f16c},
                    {"AVX512_BF16", em_cpu_has_avx512_bf16},
                    {"AMX-BF16", em_cpu_has_amx_bf16},
                    {"AMX-INT8", em_cpu_has_amx_int8}};
    int at = snprintf(buf, n, "thread governor: %s\nCPU features:",
                      em_cpu_threads_adaptive()
                          ? "on (fewer threads while other processes hold the cores; "
                            "EMBER_ADAPTIVE_THREADS=0 turns it off)"
                          : "off (EMBER_ADAPTIVE_THREADS=0)");
    for (size_t i = 0; i < sizeof features / sizeof features[0] && at >= 0 && (size_t)at < n; i++)
        at += snprintf(buf + at, n - (size_t)at, "%s %s %s", i ? "," : "", features[i].name,
                       features[i].has() ? "yes" : "no");
    char products[640];
    em_cpu_products_describe(products, sizeof products);
    if (at >= 0 && (size_t)at < n)
        snprintf(buf + at, n - (size_t)at, "\nproducts on the cpu (engine, ISA):\n%s", products);
}
