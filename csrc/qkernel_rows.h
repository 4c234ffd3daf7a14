/* Row kernels of csrc/qkernel_core.h (included once from it, not a public header): for output rows
 * [n0, n1) of one weight, the scalar reference paths and the AVX2 + FMA + F16C ones, exact fp32
 * and Q8-activation variants. Layouts and arithmetic: see the comment at the top of qkernel.c. */
#ifndef STRUCTGEN_QKERNEL_ROWS_H
#define STRUCTGEN_QKERNEL_ROWS_H

/* ---------------------------------------------------------------- scalar reference path */

/* Tile tb's mins and scales in fp32, mnT / scT [G][8] (lane r: weight row 8 tb + r), from the
 * tile table [ceil(N/8), G, 2, 8] (fp16 or fp32; see the layout comment in qkernel.c). */
static void tile_tables_scalar(const void *tiles, int f16, int G, size_t tb, float *mnT, float *scT) {
    for (int g = 0; g < G; g++)
        for (int r = 0; r < 8; r++) {
            mnT[g * 8 + r] = scale_at(tiles, f16, (tb * G + g) * 16 + r);
            scT[g * 8 + r] = scale_at(tiles, f16, (tb * G + g) * 16 + 8 + r);
        }
}

/* The int4 tail of activation row m and lane r, summed over g = 0..G-1 in order: min * xsum, then
 * (Q8 path, xd8 non-NULL) 8 * scale * xdiff, each one fused multiply-add (tile_tail_avx2's lanes). */
static float tile_tail_scalar(const float *mnT, const float *scT, const float *xsum, const float *xd8,
                              int G, int m, int r) {
    float t = 0.f;
    for (int g = 0; g < G; g++) {
        t = fmaf(mnT[g * 8 + r], xsum[m * G + g], t);
        if (xd8) t = fmaf(scT[g * 8 + r], xd8[m * G + g], t);
    }
    return t;
}

/* Exact float32 int4 rows: per group scale * sum(q * x), plus the tile tail (the AVX2 block sums
 * differ from these in float summation order only; the tail is the same float). */
static void int4_rows_scalar(const float *x, const float *xsum, const uint8_t *q, const void *tiles,
                             int f16, float *y, int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs;
    float mnT[G * 8 + 1], scT[G * 8 + 1];
    for (int n = n0; n < n1; n++) {
        const uint8_t *qr = q + (size_t)n * (K / 2);
        int r = n % 8;
        if (n == n0 || r == 0) tile_tables_scalar(tiles, f16, G, (size_t)n / 8, mnT, scT);
        for (int m = 0; m < M; m++) {
            const float *xr = x + (size_t)m * K;
            float acc = 0.f;
            for (int g = 0; g < G; g++) {
                float dot = 0.f;
                for (int b = g * gs; b < (g + 1) * gs; b += 32) {
                    const uint8_t *qb = qr + b / 2;
                    for (int j = 0; j < 16; j++) {
                        dot += (float)(qb[j] & 0xF) * xr[b + j] + (float)(qb[j] >> 4) * xr[b + j + 16];
                    }
                }
                acc += scT[g * 8 + r] * dot;
            }
            y[(size_t)m * N + n] = acc + tile_tail_scalar(mnT, scT, xsum, NULL, G, m, r);
        }
    }
}

static void int8_rows_scalar(const float *x, const int8_t *q, const void *sc, int f16, float *y,
                             int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs;
    for (int n = n0; n < n1; n++) {
        const int8_t *qr = q + (size_t)n * K;
        for (int m = 0; m < M; m++) {
            const float *xr = x + (size_t)m * K;
            float acc = 0.f;
            for (int g = 0; g < G; g++) {
                float dot = 0.f;
                for (int k = g * gs; k < (g + 1) * gs; k++) dot += (float)qr[k] * xr[k];
                acc += scale_at(sc, f16, (size_t)n * G + g) * dot;
            }
            y[(size_t)m * N + n] = acc;
        }
    }
}

/* Scalar Q8-activation int4 rows, bit for bit the AVX2 ones (int4_rows_avx2): per block of 32 the
 * integer dots of lanes l = 0..7 (weights 4l..4l+3, as madd leaves them), each lane accumulated
 * with a fused multiply-add into accumulator bi % 4 (blocks past the last whole run of 4: 0),
 * the accumulators combined ((a0 + a1) + a2) + a3, the lanes ((l0 + l1) + (l2 + l3)) +
 * ((l4 + l5) + (l6 + l7)) (reduce8_avx2's order), plus the tile tail. */
static void int4q8_rows_scalar(const int8_t *xq, const float *xd, const float *xsum, const float *xdiff,
                               const uint8_t *q, const void *tiles, int f16, float *y, int M, int N, int K,
                               int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32, KBU = KB - KB % 4;
    float mnT[G * 8 + 1], scT[G * 8 + 1], xd8[M * G + 1];
    for (int i = 0; i < M * G; i++) xd8[i] = 8.f * xdiff[i];
    for (int n = n0; n < n1; n++) {
        const uint8_t *qr = q + (size_t)n * (K / 2);
        int r = n % 8;
        if (n == n0 || r == 0) tile_tables_scalar(tiles, f16, G, (size_t)n / 8, mnT, scT);
        for (int m = 0; m < M; m++) {
            const int8_t *xm = xq + (size_t)m * K;
            float acc[4][8] = {{0.f}};
            for (int bi = 0; bi < KB; bi++) {
                float dx = scT[(bi / bpg) * 8 + r] * xd[(size_t)m * KB + bi];
                int u = bi < KBU ? bi % 4 : 0;
                for (int l = 0; l < 8; l++) {
                    int32_t dot = 0;
                    for (int j = 4 * l; j < 4 * l + 4; j++) {
                        int w = j < 16 ? qr[bi * 16 + j] & 0xF : qr[bi * 16 + j - 16] >> 4;
                        dot += w * xm[bi * 32 + j];
                    }
                    acc[u][l] = fmaf((float)dot, dx, acc[u][l]);
                }
            }
            float s[8];
            for (int l = 0; l < 8; l++) s[l] = ((acc[0][l] + acc[1][l]) + acc[2][l]) + acc[3][l];
            float v = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
            y[(size_t)m * N + n] = v + tile_tail_scalar(mnT, scT, xsum, xd8, G, m, r);
        }
    }
}

/* Scalar Q8-activation int8 rows, bit for bit the AVX2 / VNNI ones (int8q8_rows_avx2 /
 * int8q8_rows_vnni): per block of 32 the exact integer dots of lanes l = 0..7 (weights 4l..4l+3,
 * as madd / vpdpbusd leave them), each lane accumulated with a fused multiply-add of the block's
 * scale product (weight scale times xd, one fp32 product) into accumulator bi % 4 (blocks past
 * the last whole run of 4: 0), the accumulators combined ((a0 + a1) + a2) + a3, the lanes
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) (hsum8's order). */
static void int8q8_rows_scalar(const int8_t *xq, const float *xd, const int8_t *q, const void *sc, int f16,
                               float *y, int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32, KBU = KB - KB % 4;
    for (int n = n0; n < n1; n++) {
        const int8_t *qr = q + (size_t)n * K;
        for (int m = 0; m < M; m++) {
            const int8_t *xm = xq + (size_t)m * K;
            float acc[4][8] = {{0.f}};
            for (int bi = 0; bi < KB; bi++) {
                float dx = scale_at(sc, f16, (size_t)n * G + bi / bpg) * xd[(size_t)m * KB + bi];
                int u = bi < KBU ? bi % 4 : 0;
                for (int l = 0; l < 8; l++) {
                    int32_t dot = 0;
                    for (int j = 32 * bi + 4 * l; j < 32 * bi + 4 * l + 4; j++) dot += qr[j] * xm[j];
                    acc[u][l] = fmaf((float)dot, dx, acc[u][l]);
                }
            }
            float s[8];
            for (int l = 0; l < 8; l++) s[l] = ((acc[0][l] + acc[1][l]) + acc[2][l]) + acc[3][l];
            y[(size_t)m * N + n] = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
        }
    }
}

/* ---------------------------------------------------------------- AVX2 path */
#if SG_X86
#define SGQ_AVX2 __attribute__((target("avx2,fma,f16c")))

SGQ_AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

SGQ_AVX2 static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* One int8 row, groups of gs (multiple of 8; blocks of 32 while they fit, then 8). */
#define INT8_ROW_BODY(MM)                                                                              \
    {                                                                                                  \
        __m256 acc[MM];                                                                                \
        for (int m = 0; m < MM; m++) acc[m] = _mm256_setzero_ps();                                     \
        for (int g = 0; g < G; g++) {                                                                  \
            __m256 part[MM];                                                                           \
            for (int m = 0; m < MM; m++) part[m] = _mm256_setzero_ps();                                \
            int b = g * gs, end = (g + 1) * gs;                                                        \
            for (; b + 32 <= end; b += 32) {                                                           \
                __m256i raw = _mm256_loadu_si256((const __m256i *)(qr + b));                           \
                __m128i r0 = _mm256_castsi256_si128(raw), r1 = _mm256_extracti128_si256(raw, 1);       \
                __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(r0));                              \
                __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(r0, 8)));           \
                __m256 w2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(r1));                              \
                __m256 w3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(r1, 8)));           \
                for (int m = 0; m < MM; m++) {                                                         \
                    const float *xb = x + (size_t)m * K + b;                                           \
                    __m256 t0 = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));                                \
                    __m256 t1 = _mm256_mul_ps(w2, _mm256_loadu_ps(xb + 16));                           \
                    t0 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + 8), t0);                             \
                    t1 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), t1);                            \
                    part[m] = _mm256_add_ps(part[m], _mm256_add_ps(t0, t1));                           \
                }                                                                                      \
            }                                                                                          \
            for (; b < end; b += 8) {                                                                  \
                __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(qr + b)))); \
                for (int m = 0; m < MM; m++)                                                           \
                    part[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (size_t)m * K + b), part[m]);    \
            }                                                                                          \
            __m256 d = _mm256_set1_ps(f16 ? h2f(((const uint16_t *)sr)[g]) : ((const float *)sr)[g]);  \
            for (int m = 0; m < MM; m++) acc[m] = _mm256_fmadd_ps(d, part[m], acc[m]);                 \
        }                                                                                              \
        for (int m = 0; m < MM; m++) y[(size_t)m * N + n] = hsum8(acc[m]);                             \
    }

SGQ_AVX2 static void int8_rows_avx2(const float *x, const int8_t *q, const void *sc, int f16, float *y,
                                   int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs;
    size_t ssz = f16 ? 2 : 4;
    for (int n = n0; n < n1; n++) {
        const int8_t *qr = q + (size_t)n * K;
        const char *sr = (const char *)sc + (size_t)n * G * ssz;
        switch (M) {
            case 1: INT8_ROW_BODY(1) break;
            case 2: INT8_ROW_BODY(2) break;
            case 3: INT8_ROW_BODY(3) break;
            case 4: INT8_ROW_BODY(4) break;
            case 5: INT8_ROW_BODY(5) break;
            case 6: INT8_ROW_BODY(6) break;
            case 7: INT8_ROW_BODY(7) break;
            default: INT8_ROW_BODY(8) break;
        }
    }
}

/* Row kernels over blocks of 32 weights. Each block's weight scale (its group's) is expanded
 * into dsb[K/32] once per row; U independent accumulators per activation row (U = 4 at M = 1)
 * hide the FMA latency. Float path: sum over the block of q * x in fp32 (U, hence the rounding,
 * depends on M). Q8 path (llama.cpp's Q8_0 activations, x ~= xd * xq per block): integer dot
 * products (maddubs / madd) scaled in fp32, in the same order for every M (int4: q8_rows_vec;
 * int8: int8q8_rows_avx2 / int8q8_rows_vnni below, the same arithmetic with 8 rows per block load).
 * int4 adds min * sum(x over the group) per group (xsum, exact fp32). */
#define NACC(MM) ((MM) == 1 ? 4 : (MM) == 2 ? 2 : 1)

#define UNPACK_INT4_F32()                                                                                \
    __m128i raw = _mm_loadu_si128((const __m128i *)(qr + (size_t)(bi + u) * 16));                     \
    __m128i lo = _mm_and_si128(raw, lomask);                                                           \
    __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), lomask);                                        \
    __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));                                          \
    __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));                       \
    __m256 w2 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));                                          \
    __m256 w3 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));

#define UNPACK_INT8_F32()                                                                                \
    __m256i raw = _mm256_loadu_si256((const __m256i *)(qr + (size_t)(bi + u) * 32));                  \
    __m128i r0 = _mm256_castsi256_si128(raw), r1 = _mm256_extracti128_si256(raw, 1);                   \
    __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(r0));                                          \
    __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(r0, 8)));                       \
    __m256 w2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(r1));                                          \
    __m256 w3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(r1, 8)));

#define DOT_F32_STEP()                                                                                   \
    _Pragma("GCC unroll 8") for (int m = 0; m < MMK; m++) {                                                                     \
        const float *xb = x + (size_t)m * K + (size_t)(bi + u) * 32;                                   \
        __m256 t0 = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));                                            \
        __m256 t1 = _mm256_mul_ps(w2, _mm256_loadu_ps(xb + 16));                                       \
        t0 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + 8), t0);                                         \
        t1 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), t1);                                        \
        acc[m][u] = _mm256_fmadd_ps(_mm256_add_ps(t0, t1), _mm256_set1_ps(dsb[(size_t)(bi + u) * ds]), acc[m][u]); \
    }




/* The block loop of one row for a compile-time MM, given UNPACK and STEP for one block (bi + u). */
#define BLOCK_ROW(MM, UNPACK, STEP)                                                                    \
    {                                                                                                  \
        enum { U = NACC(MM), MMK = MM };                                                                         \
        __m256 acc[MM][U];                                                                             \
        for (int m = 0; m < MM; m++)                                                                   \
            for (int u = 0; u < U; u++) acc[m][u] = _mm256_setzero_ps();                               \
        int bi = 0;                                                                                    \
        for (; bi + U <= KB; bi += U)                                                                  \
            _Pragma("GCC unroll 8") for (int u = 0; u < U; u++) { UNPACK() STEP() }                                             \
        for (; bi < KB; bi++) {                                                                        \
            const int u = 0;                                                                           \
            UNPACK() STEP()                                                                             \
        }                                                                                              \
        for (int m = 0; m < MM; m++) {                                                                 \
            __m256 s = acc[m][0];                                                                      \
            for (int u = 1; u < U; u++) s = _mm256_add_ps(s, acc[m][u]);                               \
            y[(size_t)m * N + n] = hsum8(s) + tail[m];                                                 \
        }                                                                                              \
    }

#define SWITCH_M(UNPACK, STEP)                                                                         \
    switch (M) {                                                                                       \
        case 1: BLOCK_ROW(1, UNPACK, STEP) break;                                                      \
        case 2: BLOCK_ROW(2, UNPACK, STEP) break;                                                      \
        case 3: BLOCK_ROW(3, UNPACK, STEP) break;                                                      \
        case 4: BLOCK_ROW(4, UNPACK, STEP) break;                                                      \
        case 5: BLOCK_ROW(5, UNPACK, STEP) break;                                                      \
        case 6: BLOCK_ROW(6, UNPACK, STEP) break;                                                      \
        case 7: BLOCK_ROW(7, UNPACK, STEP) break;                                                      \
        default: BLOCK_ROW(8, UNPACK, STEP) break;                                                     \
    }

/* Q8 rows, the same arithmetic for every M (batch invariance): each activation row m of
 * weight row n is summed over QU accumulators (block bi into accumulator bi % QU while whole
 * runs of QU blocks last, the rest into accumulator 0), combined ((a0 + a1) + a2) + a3, then
 * reduced across lanes, whatever M is. Rows are taken up to Q8_ROWS at a time (each weight block
 * unpacked once for them, Q8_ROWS * QU accumulators), so M = 1 and a row inside M = 8 or any
 * prefill chunk give the same float. Used by the int4 rows layout (int4_rows_avx2); int8 rows take
 * int8q8_rows_avx2 / int8q8_rows_vnni (below), whose floats are these with int4 = 0. */
#define QU 4
#ifndef Q8_ROWS
#define Q8_ROWS 4 /* activation rows sharing one unpack of a weight block */
#endif

SGQ_AVX2 static inline __attribute__((always_inline)) void q8_block_dot(
    __m256 acc[Q8_ROWS][QU], const __m256i w, const int8_t *xq, const float *xd, float dw, int K, int KB,
    int bi, int u, const int MM, const int sign) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int m = 0; m < MM; m++) {
        __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + (size_t)m * K + (size_t)bi * 32));
        __m256i p = sign ? _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w))
                         : _mm256_maddubs_epi16(w, xv);
        p = _mm256_madd_epi16(p, ones);
        acc[m][u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * xd[(size_t)m * KB + bi]),
                                    acc[m][u]);
    }
}

/* w of block bi: int4 codes (0..15) widened to bytes, or the int8 weights themselves */
SGQ_AVX2 static inline __attribute__((always_inline)) __m256i q8_weights(const void *qr, int bi, const int int4) {
    if (int4) {
        const __m128i lomask = _mm_set1_epi8(0x0F);
        __m128i raw = _mm_loadu_si128((const __m128i *)((const uint8_t *)qr + (size_t)bi * 16));
        return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(raw, lomask)),
                                       _mm_and_si128(_mm_srli_epi16(raw, 4), lomask), 1);
    }
    return _mm256_loadu_si256((const __m256i *)((const int8_t *)qr + (size_t)bi * 32));
}

/* res[m] = ((a0 + a1) + a2) + a3 of activation row m against weight row qr (lanes not yet summed);
 * block bi's weight scale is dsb[bi * ds] */
SGQ_AVX2 static inline __attribute__((always_inline)) void q8_rows_dot(
    const void *qr, const int8_t *xq, const float *xd, const float *dsb, int ds, int K, int KB,
    __m256 *res, const int MM, const int int4) {
    __m256 acc[Q8_ROWS][QU];
    for (int m = 0; m < Q8_ROWS; m++)
        for (int u = 0; u < QU; u++) acc[m][u] = _mm256_setzero_ps();
    int bi = 0;
    for (; bi + QU <= KB; bi += QU)
        for (int u = 0; u < QU; u++)
            q8_block_dot(acc, q8_weights(qr, bi + u, int4), xq, xd, dsb[(size_t)(bi + u) * ds], K, KB, bi + u, u,
                         MM, !int4);
    for (; bi < KB; bi++)
        q8_block_dot(acc, q8_weights(qr, bi, int4), xq, xd, dsb[(size_t)bi * ds], K, KB, bi, 0, MM, !int4);
    for (int m = 0; m < MM; m++)
        res[m] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[m][0], acc[m][1]), acc[m][2]), acc[m][3]);
}

/* The lanes of res[m] (Q8 dots of activation rows m0.. with weight row qr) for all M rows: up to
 * Q8_ROWS rows per pass over the weight row */
SGQ_AVX2 static inline __attribute__((always_inline)) void q8_rows_vec(
    const void *qr, const int8_t *xq, const float *xd, const float *dsb, int ds, __m256 *res, int M,
    int K, const int int4) {
    int KB = K / 32;
    for (int m0 = 0; m0 < M; m0 += Q8_ROWS) {
        int mm = M - m0 >= Q8_ROWS ? Q8_ROWS : M - m0;
        const int8_t *xm = xq + (size_t)m0 * K;
        const float *dm = xd + (size_t)m0 * KB;
        switch (mm) {
            case 1: q8_rows_dot(qr, xm, dm, dsb, ds, K, KB, res + m0, 1, int4); break;
            case 2: q8_rows_dot(qr, xm, dm, dsb, ds, K, KB, res + m0, 2, int4); break;
            case 3: q8_rows_dot(qr, xm, dm, dsb, ds, K, KB, res + m0, 3, int4); break;
            default: q8_rows_dot(qr, xm, dm, dsb, ds, K, KB, res + m0, 4, int4); break;
        }
    }
}

/* quantize_q8 (qkernel_core.h) with the same results: the block maximum of |x| is exact in any
 * order (a NaN is skipped in both), x * id is the same fp32 product, and the conversion rounds
 * to nearest even as lrintf does in the default rounding mode (finite inputs). */
SGQ_AVX2 static void quantize_q8_avx2(const float *x, int8_t *xq, float *xd, int M, int K) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); /* undo the packs' lanes */
    for (int m = 0; m < M; m++)
        for (int b = 0; b < K; b += 32) {
            const float *xb = x + (size_t)m * K + b;
            __m256 v[4], mx = _mm256_setzero_ps();
            for (int i = 0; i < 4; i++) {
                v[i] = _mm256_loadu_ps(xb + 8 * i);
                mx = _mm256_max_ps(_mm256_and_ps(v[i], abs_mask), mx); /* NaN lanes keep mx */
            }
            __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
            h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            h = _mm_max_ss(h, _mm_movehdup_ps(h));
            float amax = _mm_cvtss_f32(h);
            float d = amax / 127.f, id = amax > 0.f ? 127.f / amax : 0.f;
            xd[(size_t)m * (K / 32) + b / 32] = d;
            __m256 idv = _mm256_set1_ps(id);
            __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v[0], idv));
            __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v[1], idv));
            __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v[2], idv));
            __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v[3], idv));
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
            _mm256_storeu_si256((__m256i *)(xq + (size_t)m * K + b),
                                _mm256_permutevar8x32_epi32(p, order));
        }
}

/* fp16 [G] -> fp32 per block [G * bpg] (each group's value repeated over its blocks). */
SGQ_AVX2 static inline void expand_scales(const uint16_t *h, float *dsb, int G, int bpg) {
    if (bpg == 1) {
        int g = 0;
        for (; g + 8 <= G; g += 8) _mm256_storeu_ps(dsb + g, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + g))));
        for (; g < G; g++) dsb[g] = h2f(h[g]);
        return;
    }
    for (int g = 0; g < G; g++) {
        float d = h2f(h[g]);
        for (int j = 0; j < bpg; j++) dsb[g * bpg + j] = d;
    }
}

/* fp32 [G] -> per block [G * bpg] */
static inline void expand_scales_f32(const float *s, float *dsb, int G, int bpg) {
    for (int g = 0; g < G; g++)
        for (int j = 0; j < bpg; j++) dsb[g * bpg + j] = s[g];
}

/* Tile tb's mins and scales as fp32 [G][8] (tile_tables_scalar's values: F16C is exact). */
SGQ_AVX2 static inline void tile_tables_avx2(const void *tiles, int f16, int G, size_t tb, float *mnT, float *scT) {
    if (f16) {
        const uint16_t *t = (const uint16_t *)tiles + tb * G * 16;
        for (int g = 0; g < G; g++) {
            _mm256_storeu_ps(mnT + g * 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + g * 16))));
            _mm256_storeu_ps(scT + g * 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + g * 16 + 8))));
        }
        return;
    }
    const float *t = (const float *)tiles + tb * G * 16;
    for (int g = 0; g < G; g++) {
        _mm256_storeu_ps(mnT + g * 8, _mm256_loadu_ps(t + g * 16));
        _mm256_storeu_ps(scT + g * 8, _mm256_loadu_ps(t + g * 16 + 8));
    }
}

/* tail[m], lane r: the int4 tail of activation row m and weight row 8 tb + r, summed over
 * g = 0..G-1 in order (min * xsum, then 8 * scale * xdiff where xd8 is non-NULL), one fused
 * multiply-add each: 8 weight rows per vector, the same float for every M (tile_tail_scalar). */
SGQ_AVX2 static inline void tile_tail_avx2(const float *mnT, const float *scT, const float *xsum,
                                           const float *xd8, int M, int G, __m256 *tail) {
    for (int m = 0; m < M; m++) tail[m] = _mm256_setzero_ps();
    for (int g = 0; g < G; g++) {
        __m256 mn = _mm256_loadu_ps(mnT + g * 8), sc = _mm256_loadu_ps(scT + g * 8);
        for (int m = 0; m < M; m++) {
            tail[m] = _mm256_fmadd_ps(mn, _mm256_set1_ps(xsum[m * G + g]), tail[m]);
            if (xd8) tail[m] = _mm256_fmadd_ps(sc, _mm256_set1_ps(xd8[m * G + g]), tail[m]);
        }
    }
}

/* Lane r of the result: the sum of v[r]'s 8 lanes, ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)):
 * the horizontal sums of 8 (activation row, weight row) pairs in 6 hadds, 2 permutes and an add
 * instead of 8 hsum8s. */
SGQ_AVX2 static inline __m256 reduce8_avx2(const __m256 *v) {
    __m256 h01 = _mm256_hadd_ps(v[0], v[1]), h23 = _mm256_hadd_ps(v[2], v[3]);
    __m256 h45 = _mm256_hadd_ps(v[4], v[5]), h67 = _mm256_hadd_ps(v[6], v[7]);
    __m256 a = _mm256_hadd_ps(h01, h23), b = _mm256_hadd_ps(h45, h67);
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

/* int4 rows n0..n1 a tile of 8 weight rows at a time; xq/xd non-NULL selects the Q8 path. The
 * tile's mins and scales come from the tile table (layout: qkernel.c), its tail by tile_tail_avx2;
 * on the Q8 path the 8 rows' lanes are summed together (reduce8_avx2) and the tail added as a
 * vector. int4q8_rows_scalar computes the same floats. */
SGQ_AVX2 static void int4_rows_avx2(const float *x, const int8_t *xq, const float *xd, const float *xsum,
                                   const float *xdiff, const uint8_t *q, const void *tiles, int f16,
                                   float *y, int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32;
    float mnT[G * 8], scT[G * 8], dsb_buf[bpg == 1 ? 1 : KB * 8], xd8[M * G + 1];
    for (int i = 0; i < M * G; i++) xd8[i] = xdiff ? 8.f * xdiff[i] : 0.f;
    const __m128i lomask = _mm_set1_epi8(0x0F);
    const int ds = 8; /* dsb + r: weight row r's block scales, stride 8 */
    for (int tb = n0 / 8; tb * 8 < n1; tb++) {
        int r0 = n0 > tb * 8 ? n0 - tb * 8 : 0, r1 = n1 < tb * 8 + 8 ? n1 - tb * 8 : 8;
        tile_tables_avx2(tiles, f16, G, (size_t)tb, mnT, scT);
        __m256 tailv[MAX_M];
        tile_tail_avx2(mnT, scT, xsum, xdiff ? xd8 : NULL, M, G, tailv);
        const float *dsbT = scT; /* [KB][8]: each block's scale, for the tile's 8 rows */
        if (bpg > 1) {
            for (int bi = 0; bi < KB; bi++) _mm256_storeu_ps(dsb_buf + bi * 8, _mm256_loadu_ps(scT + (bi / bpg) * 8));
            dsbT = dsb_buf;
        }
        if (xq) {
            __m256 sums[8][MAX_M];
            for (int r = 0; r < 8; r++) {
                if (r < r0 || r >= r1) {
                    for (int m = 0; m < M; m++) sums[r][m] = _mm256_setzero_ps();
                    continue;
                }
                q8_rows_vec(q + (size_t)(tb * 8 + r) * (K / 2), xq, xd, dsbT + r, ds, sums[r], M, K, 1);
            }
            for (int m = 0; m < M; m++) {
                __m256 v[8];
                for (int r = 0; r < 8; r++) v[r] = sums[r][m];
                __m256 res = _mm256_add_ps(reduce8_avx2(v), tailv[m]);
                float *ym = y + (size_t)m * N + (size_t)tb * 8;
                if (r0 == 0 && r1 == 8) {
                    _mm256_storeu_ps(ym, res);
                } else {
                    float lanes[8];
                    _mm256_storeu_ps(lanes, res);
                    for (int r = r0; r < r1; r++) ym[r] = lanes[r];
                }
            }
            continue;
        }
        float tails[MAX_M][8];
        for (int m = 0; m < M; m++) _mm256_storeu_ps(tails[m], tailv[m]);
        for (int r = r0; r < r1; r++) {
            int n = tb * 8 + r;
            const uint8_t *qr = q + (size_t)n * (K / 2);
            const float *dsb = dsbT + r;
            float tail[MAX_M];
            for (int m = 0; m < M; m++) tail[m] = tails[m][r];
            SWITCH_M(UNPACK_INT4_F32, DOT_F32_STEP)
        }
    }
}

/* Exact float32 int8 rows n0..n1 with gs a multiple of 32 (per channel: gs = K); Q8
 * activations: int8q8_rows_avx2 / int8q8_rows_vnni. */
SGQ_AVX2 static void int8_blocks_avx2(const float *x, const int8_t *q, const void *sc, int f16, float *y,
                                     int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32;
    float dsb[KB + 8];
    const float tail[MAX_M] = {0};
    const int ds = 1;
    for (int n = n0; n < n1; n++) {
        const int8_t *qr = q + (size_t)n * K;
        if (f16) {
            expand_scales((const uint16_t *)sc + (size_t)n * G, dsb, G, bpg);
        } else {
            expand_scales_f32((const float *)sc + (size_t)n * G, dsb, G, bpg);
        }
        SWITCH_M(UNPACK_INT8_F32, DOT_F32_STEP)
    }
}

/* ---------------------------------------------------------------- int8 x Q8 rows, rows in registers
 *
 * y[m, n] for activation rows m (xq int8 [M, K], block scales xd [M, K/32]) and int8 weight rows n
 * in [n0, n1), gs a multiple of 32, with the arithmetic of int8q8_rows_scalar (lanes l = 0..7 of a
 * block: the exact int32 dot of inputs 4l..4l+3; per lane fmaf(dot, dw * xd, acc[bi % 4]); the 4
 * accumulators ((a0 + a1) + a2) + a3; hsum8), the same floats for every M and row grouping. Each
 * weight block is loaded once per group of up to I8_ROWS activation rows and dotted against all
 * of them; the group's scale products dw * xd[m] of a block are one vector multiply (xd transposed
 * per group once per call, xdT). Two block dots of the same int32s:
 *   AVX2: maddubs(|w|, sign(x, w)) then madd with ones (int16 pairs at most 2 * 128 * 127 = 32512:
 *         no saturation; xq is in -127..127, quantize_q8);
 *   VNNI: vpdpbusd(-128 * sum(w), x + 128, w): the activations offset to unsigned bytes once per
 *         call (xa), the offset's 128 * sum(w) per lane (one vpdpbusd per block and row group)
 *         taken back as the dot's starting value, so one instruction per (row, block).
 * Up to 2 rows, all 4 accumulators of each row stay live (blocks in order, 4 chains); from 3 rows
 * on, one accumulator per row at a time (pass u: blocks u, u + 4, ..., and for u = 0 then the
 * blocks past the last whole run of 4), each pass added into the row's sum in order. */
#define I8_ROWS 8
#ifndef I8_PREFETCH
#define I8_PREFETCH 4 /* weight rows ahead that are prefetched */
#endif
#define SGQ_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

/* Block dots, given the block's weights w: PREP once per (weight row, row group), DOT per row
 * (xb: the row's 32 activation bytes, xq or the offset xa) */
#define I8_PREP_AVX2(w) const __m256i wp_ = _mm256_abs_epi8(w);
#define I8_DOT_AVX2(w, xb)                                                                              \
    _mm256_madd_epi16(_mm256_maddubs_epi16(wp_, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(xb)), w)), \
                      _mm256_set1_epi16(1))
#define I8_PREP_VNNI(w)                                                                                 \
    const __m256i wp_ = _mm256_sub_epi32(                                                               \
        _mm256_setzero_si256(), _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), w));
#define I8_DOT_VNNI(w, xb) _mm256_dpbusd_avx_epi32(wp_, _mm256_loadu_si256((const __m256i *)(xb)), w)

/* acc[m] (m < MM) += block bi's dots of rows xa + m K with weight row qr times sdx[bi * 8 + m] */
#define I8_STEP(PREP, DOT, acc, bi)                                                                     \
    {                                                                                                   \
        __m256i w = _mm256_loadu_si256((const __m256i *)(qr + (size_t)(bi) * 32));                      \
        PREP(w)                                                                                         \
        _Pragma("GCC unroll 8") for (int m = 0; m < MM; m++) acc =                                      \
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT(w, xa + (size_t)m * K + (size_t)(bi) * 32)),          \
                            _mm256_broadcast_ss(sdx + (size_t)(bi) * 8 + m), acc);                      \
    }

/* res[m] (m < MM, lanes not yet summed) for MM activation rows xa + m K against weight row qr;
 * sdx[bi * 8 + m]: block bi's scale product for row m */
#define I8_ROW_DOT(NAME, ATTR, PREP, DOT)                                                               \
    ATTR static inline __attribute__((always_inline)) void NAME(__m256 *res, const int8_t *qr,          \
                                                                const int8_t *xa, const float *sdx,     \
                                                                int K, int KB, const int MM) {          \
        int KBU = KB - KB % QU;                                                                         \
        if (MM <= 2) {                                                                                  \
            __m256 acc[2][QU];                                                                          \
            for (int m = 0; m < MM; m++)                                                                \
                for (int u = 0; u < QU; u++) acc[m][u] = _mm256_setzero_ps();                           \
            int bi = 0;                                                                                 \
            for (; bi < KBU; bi += QU)                                                                  \
                _Pragma("GCC unroll 4") for (int u = 0; u < QU; u++) I8_STEP(PREP, DOT, acc[m][u], bi + u) \
            for (; bi < KB; bi++) I8_STEP(PREP, DOT, acc[m][0], bi)                                     \
            for (int m = 0; m < MM; m++)                                                                \
                res[m] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[m][0], acc[m][1]), acc[m][2]), acc[m][3]); \
            return;                                                                                     \
        }                                                                                               \
        for (int u = 0; u < QU; u++) {                                                                  \
            __m256 acc[I8_ROWS];                                                                        \
            for (int m = 0; m < MM; m++) acc[m] = _mm256_setzero_ps();                                  \
            for (int bi = u; bi < KBU; bi += QU) I8_STEP(PREP, DOT, acc[m], bi)                         \
            if (u == 0)                                                                                 \
                for (int bi = KBU; bi < KB; bi++) I8_STEP(PREP, DOT, acc[m], bi)                        \
            for (int m = 0; m < MM; m++) res[m] = u ? _mm256_add_ps(res[m], acc[m]) : acc[m];           \
        }                                                                                               \
    }
I8_ROW_DOT(i8_row_dot_avx2, SGQ_AVX2, I8_PREP_AVX2, I8_DOT_AVX2)
I8_ROW_DOT(i8_row_dot_vnni, SGQ_VNNI, I8_PREP_VNNI, I8_DOT_VNNI)

/* Int8 Q8 rows [n0, n1) (the arithmetic above), row groups by ROW_DOT; OFFSET: the activations
 * as unsigned bytes xq + 128 (the VNNI dot). Working tables (xdT, and with OFFSET the offset
 * bytes) are allocated per call; where that fails, int8q8_rows_scalar gives the same floats. */
#define INT8Q8_ROWS(NAME, ATTR, ROW_DOT, OFFSET)                                                        \
    ATTR static void NAME(const int8_t *xq, const float *xd, const int8_t *q, const void *sc, int f16,  \
                          float *y, int M, int N, int K, int gs, int n0, int n1) {                      \
        int G = K / gs, KB = K / 32, bpg = gs / 32, MG = (M + I8_ROWS - 1) / I8_ROWS;                   \
        size_t nxd = (size_t)MG * KB * I8_ROWS;                                                         \
        float *xdT = (float *)malloc(sizeof(float) * nxd + (OFFSET ? (size_t)M * K : 0));               \
        if (!xdT) {                                                                                     \
            int8q8_rows_scalar(xq, xd, q, sc, f16, y, M, N, K, gs, n0, n1);                             \
            return;                                                                                     \
        }                                                                                               \
        for (int g8 = 0; g8 < MG; g8++) /* xdT[g8][bi][r] = xd[8 g8 + r, bi], 0 past M */              \
            for (int bi = 0; bi < KB; bi++)                                                             \
                for (int r = 0; r < I8_ROWS; r++) {                                                     \
                    int m = g8 * I8_ROWS + r;                                                           \
                    xdT[((size_t)g8 * KB + bi) * I8_ROWS + r] = m < M ? xd[(size_t)m * KB + bi] : 0.f;  \
                }                                                                                       \
        const int8_t *xa = xq;                                                                          \
        if (OFFSET) {                                                                                   \
            uint8_t *xu = (uint8_t *)(xdT + nxd);                                                       \
            for (size_t i = 0; i < (size_t)M * K; i++) xu[i] = (uint8_t)xq[i] ^ 0x80u;                  \
            xa = (const int8_t *)xu;                                                                    \
        }                                                                                               \
        float dsb[KB + 8], sdx[KB * I8_ROWS + 8];                                                       \
        for (int n = n0; n < n1; n++) {                                                                 \
            const int8_t *qr = q + (size_t)n * K;                                                       \
            if (n + I8_PREFETCH < n1) /* a later row's lines (the passes below read a row out of order) */ \
                for (int k = 0; k < K; k += 64) _mm_prefetch((const char *)(qr + (size_t)I8_PREFETCH * K + k), _MM_HINT_T0); \
            if (f16) expand_scales((const uint16_t *)sc + (size_t)n * G, dsb, G, bpg);                  \
            else expand_scales_f32((const float *)sc + (size_t)n * G, dsb, G, bpg);                     \
            for (int g8 = 0; g8 < MG; g8++) {                                                           \
                int m0 = g8 * I8_ROWS, mm = M - m0 < I8_ROWS ? M - m0 : I8_ROWS;                        \
                const float *xt = xdT + (size_t)g8 * KB * I8_ROWS;                                      \
                for (int bi = 0; bi < KB; bi++) /* the scale products dw * xd of the group's rows */   \
                    _mm256_storeu_ps(sdx + bi * I8_ROWS,                                                \
                                     _mm256_mul_ps(_mm256_set1_ps(dsb[bi]), _mm256_loadu_ps(xt + bi * I8_ROWS))); \
                const int8_t *xm = xa + (size_t)m0 * K;                                                 \
                __m256 res[I8_ROWS];                                                                    \
                switch (mm) {                                                                           \
                    case 1: ROW_DOT(res, qr, xm, sdx, K, KB, 1); break;                                 \
                    case 2: ROW_DOT(res, qr, xm, sdx, K, KB, 2); break;                                 \
                    case 3: ROW_DOT(res, qr, xm, sdx, K, KB, 3); break;                                 \
                    case 4: ROW_DOT(res, qr, xm, sdx, K, KB, 4); break;                                 \
                    case 5: ROW_DOT(res, qr, xm, sdx, K, KB, 5); break;                                 \
                    case 6: ROW_DOT(res, qr, xm, sdx, K, KB, 6); break;                                 \
                    case 7: ROW_DOT(res, qr, xm, sdx, K, KB, 7); break;                                 \
                    default: ROW_DOT(res, qr, xm, sdx, K, KB, I8_ROWS); break;                          \
                }                                                                                       \
                for (int m = 0; m < mm; m++) y[(size_t)(m0 + m) * N + n] = hsum8(res[m]);               \
            }                                                                                           \
        }                                                                                               \
        free(xdT);                                                                                      \
    }
INT8Q8_ROWS(int8q8_rows_avx2, SGQ_AVX2, i8_row_dot_avx2, 0)
INT8Q8_ROWS(int8q8_rows_vnni, SGQ_VNNI, i8_row_dot_vnni, 1)
#endif /* SG_X86 */

#endif /* STRUCTGEN_QKERNEL_ROWS_H */
