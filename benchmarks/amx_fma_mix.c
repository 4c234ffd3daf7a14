/* How much float work the CPU does while its AMX unit multiplies: 512-bit and 256-bit FMA
 * throughput alone and with one TDPBSSD (AMX int8 tile dot product, 16 x 16 x 32 here: the int4
 * tile kernel's block) or one TILESTORED (a 16 x 64-byte tile to memory) per iteration.
 *
 * Why: the AMX int4 tile kernel (csrc/qkernel_amx.h) does per 32-input block of 16 rows x 16
 * columns one TDPBSSD, one TILESTORED and 80 zmm float operations (the per-block scaling: convert,
 * multiply, fused multiply-add per row; the Q4_1 tail: two fused multiply-adds per row and group),
 * so its speed is set by how the vector units fare beside the tile unit.
 *
 * Build and run (x86-64 Linux with AMX-INT8, gcc >= 11), from the repository root:
 *     gcc -O2 -std=gnu11 -Icsrc -o /tmp/amx_fma_mix benchmarks/amx_fma_mix.c -lm && /tmp/amx_fma_mix
 * Prints ns per iteration (the calling thread's CPU time, best of 3) for 12, 24, 48 and 96
 * independent FMAs per iteration, zmm and ymm, alone / with a TDPBSSD / with a TILESTORED. */
#define _GNU_SOURCE
#include <stdio.h>
#include <time.h>

#include "qkernel_core.h"

#if SG_HAVE_AMX
static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* mode 0: FMAs only; 1: + tilezero and TDPBSSD; 2: + TILESTORED. R rounds of 12 FMAs. */
#define MIX(NAME, VEC, SET1, FMA, ADD, WIDTH)                                                        \
    SGQ_AMX __attribute__((noinline)) static float NAME(int mode, int R, long n, int8_t *a,         \
                                                          uint8_t *b, int32_t *c) {                \
        amx_config();                                                                              \
        _tile_loadd(0, a, 32);                                                                     \
        _tile_loadd(2, b, 64);                                                                     \
        VEC acc[12];                                                                               \
        for (int i = 0; i < 12; i++) acc[i] = SET1(i * 0.001f);                                    \
        VEC x = SET1(0.999f), y = SET1(0.0001f);                                                   \
        for (long k = 0; k < n; k++) {                                                             \
            if (mode == 1) {                                                                       \
                _tile_zero(4);                                                                     \
                _tile_dpbssd(4, 0, 2);                                                             \
            } else if (mode == 2) {                                                                \
                _tile_stored(4, c, 64);                                                            \
            }                                                                                      \
            for (int r = 0; r < R; r++) {                                                          \
                _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) acc[i] = FMA(acc[i], x, y);  \
                __asm__ volatile("" ::"v"(acc[0]), "v"(acc[5]), "v"(acc[11]));                     \
            }                                                                                      \
        }                                                                                          \
        _tile_release();                                                                           \
        VEC s = acc[0];                                                                            \
        for (int i = 1; i < 12; i++) s = ADD(s, acc[i]);                                           \
        float o[WIDTH];                                                                            \
        memcpy(o, &s, sizeof o);                                                                   \
        return o[0];                                                                               \
    }
MIX(mix_zmm, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16)
MIX(mix_ymm, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 8)

int main(void) {
    use_avx2 = 1;
    if (!amx_supported()) {
        printf("no AMX-INT8 here (or the kernel refused the tile state)\n");
        return 1;
    }
    int8_t *a = aligned_alloc(64, 4096);
    uint8_t *b = aligned_alloc(64, 4096);
    int32_t *c = aligned_alloc(64, 4096);
    memset(a, 1, 4096), memset(b, 1, 4096);
    printf("| FMAs per iteration | width | alone ns | + TDPBSSD ns | + TILESTORED ns |\n");
    printf("|---|---|---|---|---|\n");
    for (int R = 1; R <= 8; R *= 2)
        for (int w = 0; w < 2; w++) {
            double best[3];
            for (int mode = 0; mode < 3; mode++) {
                long n = 12000000 / R;
                best[mode] = 1e9;
                for (int rep = 0; rep < 3; rep++) {
                    double t = thread_seconds();
                    volatile float sink = w ? mix_ymm(mode, R, n, a, b, c) : mix_zmm(mode, R, n, a, b, c);
                    (void)sink;
                    t = (thread_seconds() - t) / n * 1e9;
                    best[mode] = t < best[mode] ? t : best[mode];
                }
            }
            printf("| %d | %s | %.2f | %.2f | %.2f |\n", 12 * R, w ? "ymm" : "zmm", best[0], best[1], best[2]);
        }
    return 0;
}
#else
int main(void) {
    printf("built without AMX support\n");
    return 1;
}
#endif
