/* CPU feature detection: cpuid and the compiler's checks read once, on the first question, into
 * one set that every kernel and `ember info` ask through cpu_features_internal.h;
 * EMBER_CPU_ISA=avx2 reports no more than AVX2, so every kernel runs as on such a CPU. */
#include <cpuid.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu_features_internal.h"

typedef struct {
    bool avx2, avx512, avx512_vnni, f16c, avx512_bf16, amx_bf16, amx_int8;
} cpu_features;

static cpu_features found;
static pthread_once_t found_once = PTHREAD_ONCE_INIT;

/* Whether the OS saves the AMX tile state: XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA). */
static bool os_keeps_tiles(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return false;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const uint32_t tiles = (1u << 17) | (1u << 18);
    return (lo & tiles) == tiles;
}

static void detect(void)
{
    unsigned a, b, c, d, edx7 = 0, eax7_1 = 0; /* cpuid leaf 7 subleaf 0 EDX, subleaf 1 EAX */
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        edx7 = d;
        if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d))
            eax7_1 = a;
    }
    cpu_features f = {0};
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
               && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
    /* F16C from cpuid: clang's __builtin_cpu_supports does not know it */
    f.f16c = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    f.avx512_bf16 = f.avx512 && (eax7_1 & (1u << 5));
    bool tiles = os_keeps_tiles();
    f.amx_bf16 = tiles && (edx7 & (1u << 22));
    f.amx_int8 = tiles && (edx7 & (1u << 25));
    if (em_cpu_isa_capped()) /* as on a CPU with AVX2 at most */
        f.avx512 = f.avx512_vnni = f.avx512_bf16 = f.amx_bf16 = f.amx_int8 = false;
    found = f;
}

bool em_cpu_isa_capped(void)
{
    const char *isa = getenv("EMBER_CPU_ISA");
    return isa && !strcmp(isa, "avx2");
}

static const cpu_features *features(void)
{
    pthread_once(&found_once, detect);
    return &found;
}

bool em_cpu_has_avx2(void)
{
    return features()->avx2;
}

bool em_cpu_has_avx512(void)
{
    return features()->avx512;
}

bool em_cpu_has_avx512_vnni(void)
{
    return features()->avx512_vnni;
}

bool em_cpu_has_f16c(void)
{
    return features()->f16c;
}

bool em_cpu_has_avx512_bf16(void)
{
    return features()->avx512_bf16;
}

bool em_cpu_has_amx_bf16(void)
{
    return features()->amx_bf16;
}

bool em_cpu_has_amx_int8(void)
{
    return features()->amx_int8;
}

static bool avx512_off; /* em_cpu_set_avx512(false) */

bool em_cpu_use_avx512(void)
{
    return !__atomic_load_n(&avx512_off, __ATOMIC_RELAXED) && em_cpu_has_avx512();
}

void em_cpu_set_avx512(bool on)
{
    __atomic_store_n(&avx512_off, !on, __ATOMIC_RELAXED);
}
