/* structgen's CPU dense matmul at small M: y[M, N] = x[M, K] @ W[N, K].T (+ bias[N]).
 *
 * Why: a batch-1 decode step is a chain of matrix-vector products over weights that do not
 * fit in cache, so its speed is memory bandwidth. torch's CPU linear runs M = 1 on one
 * thread (MKL's sgemv), and M = 2..8 (speculative verification, jump-forward runs) through a
 * GEMM that packs the weight first, about 2x the traffic of one pass. This kernel streams W
 * once for all M rows and splits W's rows over OpenMP threads, so both cores pull from memory
 * (dense_mm_body shares them among the threads of an enclosing region: the fused decode step).
 *
 * Register blocking (AVX2 path), so that M = 2..8 costs little more than M = 1: one
 * specialised loop per (M, bf16) takes R weight rows at a time (R_FOR_M: 4 for M <= 2, 3 for
 * M <= 4, 2 for M <= 6, 1 above) and keeps the R*M fp32 accumulators in registers; per 8 k it
 * loads R weight vectors and M x vectors (the x load folds into the FMA) for R*M FMAs. M, R
 * are compile-time constants, the loops unroll fully, R*M + R <= 16 ymm registers (no
 * spills). The next R weight rows are prefetched one block ahead. M = 7, 8 with x past L1
 * (M * K > SPLIT_X_FLOATS, e.g. K = 1536) run two passes of <= 4 x rows over blocks of 3
 * weight rows (the second pass re-reads them from cache) instead of re-reading all of x from
 * L2 for every weight row.
 * M <= 4 with weight rows under 2 KiB (bf16, K = 576) instead read one row at a time with
 * K unrolled (stream_avx2): one sequential stream rather than several short ones.
 * The floor is the FMA count (M per weight element): on a 2-FMA/cycle core M = 8 needs
 * 4 cycles per 8 weights, close to what DRAM delivers per core, more so for bf16 weights.
 *
 * Layouts: one dtype dt for all four (0 fp32, 1 bf16): x [M, K] with row stride ldx (unit stride
 * along K), W [N, K] row-major, bias [N] or NULL, y [M, N] row-major (overwritten). bf16 x is
 * widened once per call into an fp32 scratch copy (M * K values, a few KiB) that every thread
 * reads; each bf16 output is the fp32 sum plus the bias, rounded once to nearest even (what
 * torch's `F.linear(x.float(), w.float(), b.float()).to(torch.bfloat16)` gives). So a bf16
 * linear needs no torch conversion op around the call. Accumulation in fp32 (the same as
 * torch's bf16 linear on CPU); the summation order differs from MKL's, so results agree to
 * rounding.
 *
 * An AVX2 + FMA path chosen at run time (sg_simd.h: sg_use_avx2) and a portable scalar one.
 * Included by densekernel.c (its Python binding, structgen.runtime.cpu._densekernel) and by
 * decodestep.c (the fused decode step); everything here is static.
 */
#ifndef SG_DENSE_CORE_H
#define SG_DENSE_CORE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "sg_simd.h" /* SG_X86, ISA choice, bf16 <-> fp32, sg_hsum8, sg_load8 */

#define MAX_M 8
#define MAX_R 4      /* weight rows per register block */
#define MAX_U 4      /* K unroll of stream_avx2 */
#define ROW_BLOCK 48 /* weight rows per OpenMP work item: a multiple of every R */
#define STREAM_MAX_M 4 /* M <= 4 with weight rows under 2 KiB: one row at a time (stream_avx2) */
#define STREAM_MAX_ROW_BYTES 2048
#define SPLIT_M 4    /* M = 7, 8 with x past L1: two passes of <= 4 rows over 3 weight rows */
#define SPLIT_X_FLOATS 6144 /* x above 24 KiB (M * K floats) no longer stays in the 32 KiB L1 */

#define X_STACK_FLOATS 8192 /* fp32 copy of x on the stack up to 32 KiB, else malloc */

/* y[i] = v in the output dtype (bf16: rounded to nearest even) */
static inline void y_store(void *y, size_t i, float v, int bf16) { sg_st(y, i, v, bf16); }

/* the bias of output n in fp32 (0 without bias) */
static inline float bias_at(const void *bias, int n, int bf16) { return bias ? sg_ld(bias, n, bf16) : 0.f; }

static void rows_scalar(const float *x, const void *w, int bf16, const void *bias, void *y,
                        int M, int N, int K, int n0, int n1) {
    for (int n = n0; n < n1; n++) {
        for (int m = 0; m < M; m++) {
            const float *xr = x + (size_t)m * K;
            float acc = 0.f;
            if (bf16) {
                const uint16_t *wr = (const uint16_t *)w + (size_t)n * K;
                for (int k = 0; k < K; k++) acc += xr[k] * sg_bf16_to_float(wr[k]);
            } else {
                const float *wr = (const float *)w + (size_t)n * K;
                for (int k = 0; k < K; k++) acc += xr[k] * wr[k];
            }
            y_store(y, (size_t)m * N + n, acc + bias_at(bias, n, bf16), bf16);
        }
    }
}

/* x: fp32 [M, K] contiguous (the scratch copy for bf16); w, bias, y in the loop's dtype */
typedef void (*rows_fn)(const float *x, const void *w, const void *bias, void *y, int N, int K,
                        int n0, int n1);

#if SG_X86
#define SG_AVX2 __attribute__((target("avx2,fma")))
#define SG_INLINE static inline __attribute__((always_inline))

/* Weight rows n .. n+R-1 against M rows of x, into y[:, n .. n+R-1]. M, R, bf16 and pf are
 * constants at every call site; acc[r][m] then lives in registers. With pf, each 64-byte
 * line of the next R weight rows is prefetched one block ahead (the hardware prefetcher
 * alone leaves the loads waiting once there is more arithmetic per byte). K % 8 in scalar. */
SG_AVX2 SG_INLINE void block_avx2(const float *x, const void *w, const void *bias, void *y,
                                  int N, int K, int n, const int M, const int R, const int bf16,
                                  const int pf) {
    __m256 acc[MAX_R][MAX_M];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int m = 0; m < M; m++) acc[r][m] = _mm256_setzero_ps();
    const size_t base = (size_t)n * K, esize = bf16 ? 2 : 4;
    const int do_pf = pf && n + 2 * R <= N; /* the next R rows exist */
    const char *next = (const char *)w + (base + (size_t)R * K) * esize;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        if (do_pf && ((k * esize) & 63) == 0) {
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                _mm_prefetch(next + ((size_t)r * K + k) * esize, _MM_HINT_T0);
        }
        __m256 wv[MAX_R];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) wv[r] = sg_load8(w, base + (size_t)r * K + k, bf16);
#pragma GCC unroll 8
        for (int m = 0; m < M; m++) {
            const __m256 xv = _mm256_loadu_ps(x + (size_t)m * K + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r][m] = _mm256_fmadd_ps(wv[r], xv, acc[r][m]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
#pragma GCC unroll 8
        for (int m = 0; m < M; m++) {
            float s = sg_hsum8(acc[r][m]);
            const float *xr = x + (size_t)m * K;
            for (int kk = k; kk < K; kk++) s += xr[kk] * sg_ld(w, base + (size_t)r * K + kk, bf16);
            y_store(y, (size_t)m * N + n + r, s + bias_at(bias, n + r, bf16), bf16);
        }
    }
}

/* One weight row n against M rows of x, K unrolled U times (U*M accumulators + U weight
 * vectors in registers): W read as one sequential stream, which the hardware prefetcher
 * follows, with each line of row n + 2 prefetched. Measured on Zen 3, M <= 4: about 10%
 * faster than blocks of several rows when rows are short (bf16, K = 576: 1152 bytes, so a
 * block reads several 18-line streams at once), no faster at 2304 bytes (fp32, K = 576),
 * slower at 6 KiB (fp32, K = 1536). pick_avx2 chooses by M and the row's bytes. */
SG_AVX2 SG_INLINE void stream_avx2(const float *x, const void *w, const void *bias, void *y,
                                   int N, int K, int n, const int M, const int U, const int bf16) {
    __m256 acc[MAX_U][MAX_M];
#pragma GCC unroll 8
    for (int u = 0; u < U; u++)
#pragma GCC unroll 8
        for (int m = 0; m < M; m++) acc[u][m] = _mm256_setzero_ps();
    const size_t base = (size_t)n * K, esize = bf16 ? 2 : 4;
    const int do_pf = n + 2 < N;
    const char *next = (const char *)w + (base + 2 * (size_t)K) * esize;
    int k = 0;
    for (; k + 8 * U <= K; k += 8 * U) {
        if (do_pf && ((k * esize) & 63) < 8 * U * esize) {
#pragma GCC unroll 4
            for (size_t b = 0; b < 8 * U * esize; b += 64)
                _mm_prefetch(next + k * esize + b, _MM_HINT_T0);
        }
        __m256 wv[MAX_U];
#pragma GCC unroll 8
        for (int u = 0; u < U; u++) wv[u] = sg_load8(w, base + k + 8 * u, bf16);
#pragma GCC unroll 8
        for (int m = 0; m < M; m++)
#pragma GCC unroll 8
            for (int u = 0; u < U; u++) {
                const __m256 xv = _mm256_loadu_ps(x + (size_t)m * K + k + 8 * u);
                acc[u][m] = _mm256_fmadd_ps(wv[u], xv, acc[u][m]);
            }
    }
    for (; k + 8 <= K; k += 8) {
        const __m256 wv = sg_load8(w, base + k, bf16);
#pragma GCC unroll 8
        for (int m = 0; m < M; m++)
            acc[0][m] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (size_t)m * K + k), acc[0][m]);
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; m++) {
#pragma GCC unroll 8
        for (int u = 1; u < U; u++) acc[0][m] = _mm256_add_ps(acc[0][m], acc[u][m]);
        float s = sg_hsum8(acc[0][m]);
        const float *xr = x + (size_t)m * K;
        for (int kk = k; kk < K; kk++) s += xr[kk] * sg_ld(w, base + kk, bf16);
        y_store(y, (size_t)m * N + n, s + bias_at(bias, n, bf16), bf16);
    }
}

/* K-unroll of stream_avx2 for M rows of x: U*M + U <= 16 registers */
#define U_FOR_M(M) ((M) <= 2 ? 4 : (M) == 3 ? 3 : 2)
#define SG_ROWS_STREAM(M, BF)                                                                    \
    SG_AVX2 static void rows_stream_##M##_##BF(const float *x, const void *w, const void *bias,  \
                                               void *y, int N, int K, int n0, int n1) {         \
        for (int n = n0; n < n1; n++) stream_avx2(x, w, bias, y, N, K, n, M, U_FOR_M(M), BF);   \
    }
SG_ROWS_STREAM(1, 0) SG_ROWS_STREAM(1, 1) SG_ROWS_STREAM(2, 0) SG_ROWS_STREAM(2, 1)
SG_ROWS_STREAM(3, 0) SG_ROWS_STREAM(3, 1) SG_ROWS_STREAM(4, 0) SG_ROWS_STREAM(4, 1)
/* [bf16][M - 1] */
static const rows_fn rows_stream[2][4] = {
    {rows_stream_1_0, rows_stream_2_0, rows_stream_3_0, rows_stream_4_0},
    {rows_stream_1_1, rows_stream_2_1, rows_stream_3_1, rows_stream_4_1},
};

/* Weight rows per register block for M rows of x in one pass: R*M accumulators + R weight
 * vectors within the 16 ymm registers (the x vector is a memory operand of the FMA). */
#define R_FOR_M(M) ((M) <= 2 ? 4 : (M) <= 4 ? 3 : (M) <= 6 ? 2 : 1)

/* rows_avx2_<M>_<bf16>: weight rows [n0, n1) in blocks of R_FOR_M(M), the rest one by one */
#define SG_ROWS_AVX2(M, BF)                                                                      \
    SG_AVX2 static void rows_avx2_##M##_##BF(const float *x, const void *w, const void *bias,    \
                                             void *y, int N, int K, int n0, int n1) {           \
        int n = n0;                                                                              \
        for (; n + R_FOR_M(M) <= n1; n += R_FOR_M(M))                                            \
            block_avx2(x, w, bias, y, N, K, n, M, R_FOR_M(M), BF, 1);                            \
        for (; n < n1; n++) block_avx2(x, w, bias, y, N, K, n, M, 1, BF, 1);                     \
    }

/* rows_split_<M>_<bf16> (M = 7, 8): per block of 3 weight rows, x rows 0..3, then 4..M-1 over
 * the same weight rows (now in L1). With R = 1 and x past L1, each weight row would stream
 * all of x from L2 again; here x is read once per 3 weight rows. */
#define SG_ROWS_SPLIT(M, BF)                                                                     \
    SG_AVX2 static void rows_split_##M##_##BF(const float *x, const void *w, const void *bias,   \
                                              void *y, int N, int K, int n0, int n1) {          \
        const float *x2 = x + (size_t)SPLIT_M * K;                                               \
        void *y2 = (char *)y + (size_t)SPLIT_M * N * ((BF) ? 2 : 4); /* output row SPLIT_M */   \
        int n = n0;                                                                              \
        for (; n + 3 <= n1; n += 3) {                                                            \
            block_avx2(x, w, bias, y, N, K, n, SPLIT_M, 3, BF, 1);                               \
            block_avx2(x2, w, bias, y2, N, K, n, (M) - SPLIT_M, 3, BF, 0);                       \
        }                                                                                        \
        for (; n < n1; n++) {                                                                    \
            block_avx2(x, w, bias, y, N, K, n, SPLIT_M, 1, BF, 1);                               \
            block_avx2(x2, w, bias, y2, N, K, n, (M) - SPLIT_M, 1, BF, 0);                       \
        }                                                                                        \
    }

#define SG_ROWS_AVX2_BOTH(M) SG_ROWS_AVX2(M, 0) SG_ROWS_AVX2(M, 1)
SG_ROWS_AVX2_BOTH(1) SG_ROWS_AVX2_BOTH(2) SG_ROWS_AVX2_BOTH(3) SG_ROWS_AVX2_BOTH(4)
SG_ROWS_AVX2_BOTH(5) SG_ROWS_AVX2_BOTH(6) SG_ROWS_AVX2_BOTH(7) SG_ROWS_AVX2_BOTH(8)
SG_ROWS_SPLIT(7, 0) SG_ROWS_SPLIT(7, 1) SG_ROWS_SPLIT(8, 0) SG_ROWS_SPLIT(8, 1)

/* [bf16][M - 1] */
static const rows_fn rows_avx2[2][MAX_M] = {
    {rows_avx2_1_0, rows_avx2_2_0, rows_avx2_3_0, rows_avx2_4_0, rows_avx2_5_0, rows_avx2_6_0,
     rows_avx2_7_0, rows_avx2_8_0},
    {rows_avx2_1_1, rows_avx2_2_1, rows_avx2_3_1, rows_avx2_4_1, rows_avx2_5_1, rows_avx2_6_1,
     rows_avx2_7_1, rows_avx2_8_1},
};
/* [bf16][M - 7] */
static const rows_fn rows_split[2][2] = {{rows_split_7_0, rows_split_8_0},
                                         {rows_split_7_1, rows_split_8_1}};

/* the AVX2 loop for this call */
static rows_fn pick_avx2(int bf16, int M, int K) {
    const long long row_bytes = (long long)K * (bf16 ? 2 : 4);
    if (M <= STREAM_MAX_M && row_bytes < STREAM_MAX_ROW_BYTES) return rows_stream[bf16 != 0][M - 1];
    if (M >= 7 && (long long)M * K > SPLIT_X_FLOATS) return rows_split[bf16 != 0][M - 7];
    return rows_avx2[bf16 != 0][M - 1];
}
#endif

/* x [M, K] (row stride ldx, in dt) as fp32 rows of K floats: x itself when it already is that,
 * else the copy written to buf */
static const float *x_as_fp32(const void *x, long long ldx, int bf16, int M, int K, float *buf) {
    if (!bf16 && ldx == K) return (const float *)x;
    for (int m = 0; m < M; m++) {
        float *dst = buf + (size_t)m * K;
        if (bf16) {
            const uint16_t *src = (const uint16_t *)x + (size_t)m * ldx;
            for (int k = 0; k < K; k++) dst[k] = sg_bf16_to_float(src[k]);
        } else {
            memcpy(dst, (const float *)x + (size_t)m * ldx, (size_t)K * sizeof(float));
        }
    }
    return buf;
}

/* y[:, n0:n1) of y = x @ w.T (+ bias), all in dt (bf16 != 0: bf16, else fp32); see the header
 * comment. Each output element is computed the same way whatever the range. */
static void dense_rows(const float *xf, const void *w, int bf16, const void *bias, void *y, int M,
                       int N, int K, int n0, int n1) {
#if SG_X86
    if (sg_use_avx2()) {
        pick_avx2(bf16, M, K)(xf, w, bias, y, N, K, n0, n1);
        return;
    }
#endif
    rows_scalar(xf, w, bf16, bias, y, M, N, K, n0, n1);
}

/* dense_rows over all N rows, blocks of ROW_BLOCK rows shared among the threads of the enclosing
 * parallel region (orphaned omp for: outside a region the caller runs them all); returns after
 * the loop's barrier. */
static void dense_mm_body(const float *xf, const void *w, int bf16, const void *bias, void *y,
                          int M, int N, int K) {
    int blocks = (N + ROW_BLOCK - 1) / ROW_BLOCK;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (int b = 0; b < blocks; b++)
        dense_rows(xf, w, bf16, bias, y, M, N, K, b * ROW_BLOCK,
                   (b + 1) * ROW_BLOCK < N ? (b + 1) * ROW_BLOCK : N);
}

/* dense_mm_body in a parallel region of its own */
static inline void dense_mm(const float *xf, const void *w, int bf16, const void *bias, void *y,
                            int M, int N, int K, int threads) {
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
#endif
    dense_mm_body(xf, w, bf16, bias, y, M, N, K);
}

#endif /* SG_DENSE_CORE_H */
