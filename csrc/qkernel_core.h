/* The matmul core of structgen's CPU weight-only quantized kernels (layouts and arithmetic: see
 * csrc/qkernel.c): Q8 activation quantization and int4_mm / int8_mm over rows split across
 * OpenMP threads. Included by qkernel.c (its Python bindings, structgen.runtime.cpu._qkernel)
 * and by decodestep.c (the fused decode step); everything here is static, and each including
 * module holds its own ISA switch (use_avx2). */
#ifndef STRUCTGEN_QKERNEL_CORE_H
#define STRUCTGEN_QKERNEL_CORE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#ifndef SG_X86
#define SG_X86 1
#endif
#else
#ifndef SG_X86
#define SG_X86 0
#endif
#endif

#ifndef MAX_M
#define MAX_M 8
#endif

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 0x3FFu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static float scale_at(const void *s, int f16, size_t i) {
    return f16 ? half_to_float(((const uint16_t *)s)[i]) : ((const float *)s)[i];
}

#include "qkernel_rows.h"


static int use_avx2 = 0;

/* Split [0, N) into nt contiguous row ranges (multiples of 8 rows) and run fn on each. */
#define SPLIT_ROWS(NT, N, CALL)                                                                        \
    do {                                                                                               \
        int nt_ = (NT) < 1 ? 1 : (NT);                                                                 \
        if (nt_ == 1) {                                                                                \
            int n0 = 0, n1 = (N);                                                                      \
            CALL;                                                                                      \
        } else {                                                                                       \
            SPLIT_PARALLEL(nt_, N, CALL);                                                              \
        }                                                                                              \
    } while (0)

#ifdef _OPENMP
#define SPLIT_PARALLEL(NT, N, CALL)                                                                    \
    _Pragma("omp parallel num_threads(nt_)") {                                                        \
        int t_ = omp_get_thread_num(), T_ = omp_get_num_threads();                                     \
        int per_ = (((N) + T_ - 1) / T_ + 7) & ~7;                                                     \
        int n0 = t_ * per_, n1 = n0 + per_ > (N) ? (N) : n0 + per_;                                    \
        if (n0 < n1) { CALL; }                                                                         \
    }
#else
#define SPLIT_PARALLEL(NT, N, CALL)                                                                    \
    {                                                                                                  \
        int n0 = 0, n1 = (N);                                                                          \
        CALL;                                                                                          \
    }
#endif

/* x [M, K] -> xq int8 [M, K], xd [M, K/32]: per block of 32, d = max|x| / 127, q = round(x / d). */
static void quantize_q8(const float *x, int8_t *xq, float *xd, int M, int K) {
    for (int m = 0; m < M; m++)
        for (int b = 0; b < K; b += 32) {
            const float *xb = x + (size_t)m * K + b;
            float amax = 0.f;
            for (int j = 0; j < 32; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
            float d = amax / 127.f, id = amax > 0.f ? 127.f / amax : 0.f;
            xd[(size_t)m * (K / 32) + b / 32] = d;
            for (int j = 0; j < 32; j++) xq[(size_t)m * K + b + j] = (int8_t)lrintf(xb[j] * id);
        }
}

/* scales and mins: fp16 (f16 = 1) or fp32 [N, K/gs] */
static void int4_mm(const float *x, const uint8_t *q, const void *sc, const void *mn, int f16, float *y,
                    int M, int N, int K, int gs, int q8, int nt) {
    int G = K / gs;
    float *xsum = (float *)malloc(sizeof(float) * (size_t)M * G);
    int8_t *xq = q8 ? (int8_t *)malloc((size_t)M * K) : NULL;
    float *xd = q8 ? (float *)malloc(sizeof(float) * (size_t)M * (K / 32)) : NULL;
    for (int m = 0; m < M; m++)
        for (int g = 0; g < G; g++) {
            float s = 0.f;
            for (int k = g * gs; k < (g + 1) * gs; k++) s += x[(size_t)m * K + k];
            xsum[m * G + g] = s;
        }
    /* Q8: xdiff = sum(x) - sum(xd * xq) per group. The int4 codes q (0..15) are not centred, so the
     * integer dots use q and the tail adds 8 * scale * xdiff: the result is that of centred codes
     * (q - 8) times the quantized x plus (min + 8 * scale) * sum(x), halving the Q8 rounding error. */
    float *xdiff = q8 ? (float *)malloc(sizeof(float) * (size_t)M * G) : NULL;
    if (q8) {
        quantize_q8(x, xq, xd, M, K);
        for (int m = 0; m < M; m++)
            for (int g = 0; g < G; g++) {
                float s = 0.f;
                for (int b = g * gs; b < (g + 1) * gs; b += 32) {
                    int32_t t = 0;
                    for (int j = 0; j < 32; j++) t += xq[(size_t)m * K + b + j];
                    s += xd[(size_t)m * (K / 32) + b / 32] * (float)t;
                }
                xdiff[m * G + g] = xsum[m * G + g] - s;
            }
    }
    for (int m0 = 0; m0 < M; m0 += MAX_M) {
        int mm = M - m0 < MAX_M ? M - m0 : MAX_M;
        const float *xm = x + (size_t)m0 * K, *xs = xsum + (size_t)m0 * G;
        const float *xdf = q8 ? xdiff + (size_t)m0 * G : NULL;
        const int8_t *xqm = q8 ? xq + (size_t)m0 * K : NULL;
        const float *xdm = q8 ? xd + (size_t)m0 * (K / 32) : NULL;
        float *ym = y + (size_t)m0 * N;
#if SG_X86
        if (use_avx2) {
            SPLIT_ROWS(nt, N, int4_rows_avx2(xm, xqm, xdm, xs, xdf, q, sc, mn, f16, ym, mm, N, K, gs, n0, n1));
            continue;
        }
#endif
        if (q8) SPLIT_ROWS(nt, N, int4q8_rows_scalar(xqm, xdm, xs, xdf, q, sc, mn, f16, ym, mm, N, K, gs, n0, n1));
        else SPLIT_ROWS(nt, N, int4_rows_scalar(xm, xs, q, sc, mn, f16, ym, mm, N, K, gs, n0, n1));
    }
    free(xsum);
    free(xdiff);
    free(xq);
    free(xd);
}

static void int8_mm(const float *x, const int8_t *q, const void *sc, int f16, float *y, int M, int N, int K,
                    int gs, int q8, int nt) {
    int8_t *xq = q8 ? (int8_t *)malloc((size_t)M * K) : NULL;
    float *xd = q8 ? (float *)malloc(sizeof(float) * (size_t)M * (K / 32)) : NULL;
    if (q8) quantize_q8(x, xq, xd, M, K);
    for (int m0 = 0; m0 < M; m0 += MAX_M) {
        int mm = M - m0 < MAX_M ? M - m0 : MAX_M;
        const float *xm = x + (size_t)m0 * K;
        const int8_t *xqm = q8 ? xq + (size_t)m0 * K : NULL;
        const float *xdm = q8 ? xd + (size_t)m0 * (K / 32) : NULL;
        float *ym = y + (size_t)m0 * N;
#if SG_X86
        if (use_avx2) {
            if (gs % 32 == 0) SPLIT_ROWS(nt, N, int8_blocks_avx2(xm, xqm, xdm, q, sc, f16, ym, mm, N, K, gs, n0, n1));
            else SPLIT_ROWS(nt, N, int8_rows_avx2(xm, q, sc, f16, ym, mm, N, K, gs, n0, n1));
            continue;
        }
#endif
        if (q8) SPLIT_ROWS(nt, N, int8q8_rows_scalar(xqm, xdm, q, sc, f16, ym, mm, N, K, gs, n0, n1));
        else SPLIT_ROWS(nt, N, int8_rows_scalar(xm, q, sc, f16, ym, mm, N, K, gs, n0, n1));
    }
    free(xq);
    free(xd);
}

#endif /* STRUCTGEN_QKERNEL_CORE_H */
