/* The matmul core of structgen's CPU weight-only quantized kernels (layouts and arithmetic: see
 * csrc/qkernel.c): Q8 activation quantization and int4_mm / int8_mm over rows split across
 * OpenMP threads. Each matmul is an activation side prepared once (q_act_prep) and row ranges
 * (int4_rows / int8_rows) that threads run independently; the fused decode step runs them in its
 * own parallel region (team_rows). Included by qkernel.c (its Python bindings,
 * structgen.runtime.cpu._qkernel) and by decodestep.c (the fused decode step); everything here
 * is static, and each including module holds its own ISA switch (use_avx2). */
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
#include "qkernel_tiles.h"
#include "qkernel_amx.h"
#include "qkernel_i8tiles.h"


static int use_avx2 = 0;
/* int4t_rows' Q8 path on AVX-VNNI (int4t_rows_vnni; only with use_avx2, and M > 1: at M = 1 its
 * one vpdpbusd chain per row measured 0.90-1.02x of AVX2's, benchmarks/RESULTS.md session 22 k3) and
 * int8_rows' (int8q8_rows_vnni, from INT8_VNNI_MIN_M rows on: at M = 1 it measured 1.01-1.07x
 * of int8q8_rows_avx2, benchmarks/RESULTS.md session 23 k4) */
static int use_vnni = 0;
/* int4t_rows' Q8 path on AMX (int4t_rows_amx) from AMX_MIN_M rows on (only with use_avx2): at 9-15
 * rows (one 16-row tile group, rows past M zeros) it measured 1.02-2.03x of int4t_rows_vnni (whose
 * ninth row starts a second group of 8) at SmolLM2-135M's shapes, at 8 rows 0.85-1.25x
 * (benchmarks/RESULTS.md session 24 a5) */
static int use_amx = 0;
#define AMX_MIN_M 9
/* int8t_rows on AMX (int8t_rows_amx) from this many rows on (with use_amx): at the lm_head's
 * 49152 x 576 one 16-row AMX group (rows past M zeros) measured 0.77 / 0.97 / 1.02 / 1.03 / 1.17 /
 * 1.29x of int8t_rows_vnni at 1 / 2 / 3 / 4 / 6 / 8 rows (benchmarks/RESULTS.md session 26 l8) */
#ifndef I8T_AMX_MIN_M
#define I8T_AMX_MIN_M 5
#endif
/* int8_rows' Q8 path on AVX-VNNI (int8q8_rows_vnni) from this many rows on (with use_vnni) */
#ifndef INT8_VNNI_MIN_M
#define INT8_VNNI_MIN_M 1
#endif

/* This thread's share [*n0, *n1) of N weight rows in the enclosing OpenMP team: contiguous
 * ranges of a multiple of 8 rows (all of them outside a region); possibly empty. */
static void team_rows(int N, int *n0, int *n1) {
#ifdef _OPENMP
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    int t = 0, nt = 1;
#endif
    int per = ((N + nt - 1) / nt + 7) & ~7;
    long a = (long)t * per, b = a + per;
    *n0 = a < N ? (int)a : N;
    *n1 = b < N ? (int)b : N;
}

/* Run CALL (which uses n0, n1) over this thread's rows, with NT threads in a region of its own */
#ifdef _OPENMP
#define SPLIT_ROWS(NT, N, CALL)                                                                    \
    do {                                                                                           \
        int nt_ = (NT) < 1 ? 1 : (NT);                                                             \
        _Pragma("omp parallel num_threads(nt_) if (nt_ > 1)") {                                    \
            int n0, n1;                                                                            \
            team_rows(N, &n0, &n1);                                                                \
            if (n0 < n1) { CALL; }                                                                 \
        }                                                                                          \
    } while (0)
#else
#define SPLIT_ROWS(NT, N, CALL)                                                                    \
    do {                                                                                           \
        int n0 = 0, n1 = (N);                                                                      \
        (void)(NT);                                                                                \
        CALL;                                                                                      \
    } while (0)
#endif

/* x [M, K] -> xq int8 [M, K], xd [M, K/32]: per block of 32, d = max|x| / 127, q = round(x / d). */
static void quantize_q8(const float *x, int8_t *xq, float *xd, int M, int K) {
#if SG_X86
    if (use_avx2) {
        quantize_q8_avx2(x, xq, xd, M, K);
        return;
    }
#endif
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

/* The activation side of a quantized matmul over x [M, K]: group sums xsum [M, K/gs] (int4),
 * and with q8 the int8 activations xq [M, K], their block scales xd [M, K/32] and (int4) xdiff
 * [M, K/gs]; NULL where unused. */
typedef struct {
    float *xsum, *xdiff, *xd;
    int8_t *xq;
} q_act;

/* Fill a (its buffers sized as above) for x: what every row range of the matmul reads. */
static void q_act_prep(const float *x, int M, int K, int gs, int int4, int q8, const q_act *a) {
    int G = K / gs;
    if (int4)
        for (int m = 0; m < M; m++)
            for (int g = 0; g < G; g++) {
                float s = 0.f;
                for (int k = g * gs; k < (g + 1) * gs; k++) s += x[(size_t)m * K + k];
                a->xsum[m * G + g] = s;
            }
    if (!q8) return;
    quantize_q8(x, a->xq, a->xd, M, K);
    /* int4 Q8: xdiff = sum(x) - sum(xd * xq) per group. The int4 codes q (0..15) are not
     * centred, so the integer dots use q and the tail adds 8 * scale * xdiff: the result is that
     * of centred codes (q - 8) times the quantized x plus (min + 8 * scale) * sum(x), halving the
     * Q8 rounding error. */
    if (int4)
        for (int m = 0; m < M; m++)
            for (int g = 0; g < G; g++) {
                float s = 0.f;
                for (int b = g * gs; b < (g + 1) * gs; b += 32) {
                    int32_t t = 0;
                    for (int j = 0; j < 32; j++) t += a->xq[(size_t)m * K + b + j];
                    s += a->xd[(size_t)m * (K / 32) + b / 32] * (float)t;
                }
                a->xdiff[m * G + g] = a->xsum[m * G + g] - s;
            }
}

/* Allocate a's buffers for M x K (group gs); 0, or -1 when out of memory (a then freed) */
static int q_act_alloc(q_act *a, int M, int K, int gs, int int4, int q8) {
    size_t mg = (size_t)M * (K / gs);
    a->xsum = int4 ? (float *)malloc(sizeof(float) * mg) : NULL;
    a->xdiff = int4 && q8 ? (float *)malloc(sizeof(float) * mg) : NULL;
    a->xq = q8 ? (int8_t *)malloc((size_t)M * K) : NULL;
    a->xd = q8 ? (float *)malloc(sizeof(float) * (size_t)M * (K / 32)) : NULL;
    if ((int4 && !a->xsum) || (int4 && q8 && !a->xdiff) || (q8 && (!a->xq || !a->xd))) {
        free(a->xsum), free(a->xdiff), free(a->xq), free(a->xd);
        return -1;
    }
    return 0;
}

static void q_act_free(q_act *a) { free(a->xsum), free(a->xdiff), free(a->xq), free(a->xd); }

/* y[:, n0:n1] of int4_mm, its activation side a prepared (q_act_prep); tiles: the weight's tile
 * table of mins and scales [ceil(N/8), K/gs, 2, 8], fp16 (f16 = 1) or fp32 (layout: qkernel.c) */
static void int4_rows(const float *x, const uint8_t *q, const void *tiles, int f16,
                      float *y, int M, int N, int K, int gs, int q8, const q_act *a, int n0,
                      int n1) {
    int G = K / gs;
    for (int m0 = 0; m0 < M; m0 += MAX_M) {
        int mm = M - m0 < MAX_M ? M - m0 : MAX_M;
        const float *xm = x + (size_t)m0 * K, *xs = a->xsum + (size_t)m0 * G;
        const float *xdf = q8 ? a->xdiff + (size_t)m0 * G : NULL;
        const int8_t *xqm = q8 ? a->xq + (size_t)m0 * K : NULL;
        const float *xdm = q8 ? a->xd + (size_t)m0 * (K / 32) : NULL;
        float *ym = y + (size_t)m0 * N;
#if SG_X86
        if (use_avx2) {
            int4_rows_avx2(xm, xqm, xdm, xs, xdf, q, tiles, f16, ym, mm, N, K, gs, n0, n1);
            continue;
        }
#endif
        if (q8) int4q8_rows_scalar(xqm, xdm, xs, xdf, q, tiles, f16, ym, mm, N, K, gs, n0, n1);
        else int4_rows_scalar(xm, xs, q, tiles, f16, ym, mm, N, K, gs, n0, n1);
    }
}

/* y[:, n0:n1] of int8_mm, its activation side a prepared. Q8 (gs a multiple of 32): every M in
 * one pass over the weight rows (int8q8_rows_*: each row's floats independent of M, the same on
 * every path); exact fp32: MAX_M rows at a time. */
static void int8_rows(const float *x, const int8_t *q, const void *sc, int f16, float *y, int M,
                      int N, int K, int gs, int q8, const q_act *a, int n0, int n1) {
    if (q8) {
#if SG_X86
        if (use_avx2 && use_vnni && M >= INT8_VNNI_MIN_M)
            int8q8_rows_vnni(a->xq, a->xd, q, sc, f16, y, M, N, K, gs, n0, n1);
        else if (use_avx2)
            int8q8_rows_avx2(a->xq, a->xd, q, sc, f16, y, M, N, K, gs, n0, n1);
        else
#endif
            int8q8_rows_scalar(a->xq, a->xd, q, sc, f16, y, M, N, K, gs, n0, n1);
        return;
    }
    for (int m0 = 0; m0 < M; m0 += MAX_M) {
        int mm = M - m0 < MAX_M ? M - m0 : MAX_M;
        const float *xm = x + (size_t)m0 * K;
        float *ym = y + (size_t)m0 * N;
#if SG_X86
        if (use_avx2) {
            if (gs % 32 == 0) int8_blocks_avx2(xm, q, sc, f16, ym, mm, N, K, gs, n0, n1);
            else int8_rows_avx2(xm, q, sc, f16, ym, mm, N, K, gs, n0, n1);
            continue;
        }
#endif
        int8_rows_scalar(xm, q, sc, f16, ym, mm, N, K, gs, n0, n1);
    }
}

/* y [M, N] = x [M, K] @ dequant(W).T over nt threads (rows split); tiles: the weight's tile table
 * of mins and scales (int4_rows), fp16 (f16 = 1) or fp32 */
static inline void int4_mm(const float *x, const uint8_t *q, const void *tiles, int f16, float *y,
                           int M, int N, int K, int gs, int q8, int nt) {
    q_act a;
    if (q_act_alloc(&a, M, K, gs, 1, q8)) return;
    q_act_prep(x, M, K, gs, 1, q8, &a);
    SPLIT_ROWS(nt, N, int4_rows(x, q, tiles, f16, y, M, N, K, gs, q8, &a, n0, n1));
    q_act_free(&a);
}

/* y[:, n0:n1] of int4t_mm, its activation side a prepared (xsum; with q8 also xq, xd, xdiff); q:
 * the int4 tile layout (qkernel_tiles.h), tiles: the tile table of mins and scales (int4_rows) */
static void int4t_rows(const float *x, const uint8_t *q, const void *tiles, int f16, float *y, int M,
                       int N, int K, int gs, int q8, const q_act *a, int n0, int n1) {
#if SG_X86
    if (use_avx2) {
#if SG_HAVE_AMX
        if (q8 && use_amx && M >= AMX_MIN_M &&
            int4t_rows_amx(a->xq, a->xd, a->xsum, a->xdiff, q, tiles, f16, y, M, N, K, gs, n0, n1) == 0)
            return;
#endif
        if (q8 && use_vnni && M > 1) int4t_rows_vnni(a->xq, a->xd, a->xsum, a->xdiff, q, tiles, f16, y, M, N, K, gs, n0, n1);
        else if (q8) int4t_rows_avx2(a->xq, a->xd, a->xsum, a->xdiff, q, tiles, f16, y, M, N, K, gs, n0, n1);
        else int4t_exact_rows_avx2(x, a->xsum, q, tiles, f16, y, M, N, K, gs, n0, n1);
        return;
    }
#endif
    if (q8) int4t_rows_scalar(a->xq, a->xd, a->xsum, a->xdiff, q, tiles, f16, y, M, N, K, gs, n0, n1);
    else int4t_exact_rows_scalar(x, a->xsum, q, tiles, f16, y, M, N, K, gs, n0, n1);
}

/* y [M, N] = x [M, K] @ dequant(W).T, W in the int4 tile layout, over nt threads (N split on
 * multiples of 8): any M, each row's floats independent of M and nt; q8: int8 activations */
static inline void int4t_mm(const float *x, const uint8_t *q, const void *tiles, int f16, float *y,
                            int M, int N, int K, int gs, int q8, int nt) {
    q_act a;
    if (q_act_alloc(&a, M, K, gs, 1, q8)) return;
    q_act_prep(x, M, K, gs, 1, q8, &a);
    SPLIT_ROWS(nt, N, int4t_rows(x, q, tiles, f16, y, M, N, K, gs, q8, &a, n0, n1));
    q_act_free(&a);
}

/* y[:, n0:n1] of int8t_mm, its activation side a prepared (q8: xq, xd); q: the int8 tile layout,
 * sct: its fp32 scale table (qkernel_i8tiles.h). The same floats on every path and for every M. */
static void int8t_rows(const int8_t *q, const float *sct, float *y, int M, int N, int K, int gs,
                       const q_act *a, int n0, int n1) {
#if SG_X86
    if (use_avx2) {
#if SG_HAVE_AMX
        if (use_amx && M >= I8T_AMX_MIN_M && int8t_rows_amx(a->xq, a->xd, q, sct, y, M, N, K, gs, n0, n1) == 0)
            return;
#endif
        if (use_vnni) int8t_rows_vnni(a->xq, a->xd, q, sct, y, M, N, K, gs, n0, n1);
        else int8t_rows_avx2(a->xq, a->xd, q, sct, y, M, N, K, gs, n0, n1);
        return;
    }
#endif
    int8t_rows_scalar(a->xq, a->xd, q, sct, y, M, N, K, gs, n0, n1);
}

/* y [M, N] = x [M, K] @ dequant(W).T with Q8 activations, W in the int8 tile layout (gs a
 * multiple of 32), over nt threads (N split on multiples of 8): each row's floats independent
 * of M, nt and the path. Returns 0, or -1 when out of memory (y not written). */
static inline int int8t_mm(const float *x, const int8_t *q, const float *sct, float *y, int M, int N, int K,
                           int gs, int nt) {
    q_act a;
    if (q_act_alloc(&a, M, K, gs, 0, 1)) return -1;
    q_act_prep(x, M, K, gs, 0, 1, &a);
    SPLIT_ROWS(nt, N, int8t_rows(q, sct, y, M, N, K, gs, &a, n0, n1));
    q_act_free(&a);
    return 0;
}

static inline void int8_mm(const float *x, const int8_t *q, const void *sc, int f16, float *y,
                           int M, int N, int K, int gs, int q8, int nt) {
    q_act a;
    if (q_act_alloc(&a, M, K, gs, 0, q8)) return;
    q_act_prep(x, M, K, gs, 0, q8, &a);
    SPLIT_ROWS(nt, N, int8_rows(x, q, sc, f16, y, M, N, K, gs, q8, &a, n0, n1));
    q_act_free(&a);
}

#endif /* STRUCTGEN_QKERNEL_CORE_H */
