/* Row kernels of csrc/qkernel_core.h (included once from it, not a public header): for output rows
 * [n0, n1) of one weight, the scalar reference paths and the AVX2 + FMA + F16C ones, exact fp32
 * and Q8-activation variants. Layouts and arithmetic: see the comment at the top of qkernel.c. */
#ifndef STRUCTGEN_QKERNEL_ROWS_H
#define STRUCTGEN_QKERNEL_ROWS_H

/* ---------------------------------------------------------------- scalar reference path */

static void int4_rows_scalar(const float *x, const float *xsum, const uint8_t *q, const void *sc,
                             const void *mn, int f16, float *y, int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs;
    for (int n = n0; n < n1; n++) {
        const uint8_t *qr = q + (size_t)n * (K / 2);
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
                acc += scale_at(sc, f16, (size_t)n * G + g) * dot + scale_at(mn, f16, (size_t)n * G + g) * xsum[m * G + g];
            }
            y[(size_t)m * N + n] = acc;
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

/* Scalar Q8-activation rows (same arithmetic as the AVX2 ones up to float summation order). */
static void int4q8_rows_scalar(const int8_t *xq, const float *xd, const float *xsum, const float *xdiff, const uint8_t *q,
                               const void *sc, const void *mn, int f16, float *y, int M, int N, int K, int gs,
                               int n0, int n1) {
    int G = K / gs, KB = K / 32;
    for (int n = n0; n < n1; n++) {
        const uint8_t *qr = q + (size_t)n * (K / 2);
        for (int m = 0; m < M; m++) {
            float acc = 0.f;
            for (int g = 0; g < G; g++) {
                float part = 0.f;
                for (int b = g * gs; b < (g + 1) * gs; b += 32) {
                    int32_t dot = 0;
                    for (int j = 0; j < 16; j++)
                        dot += (qr[b / 2 + j] & 0xF) * xq[(size_t)m * K + b + j] +
                               (qr[b / 2 + j] >> 4) * xq[(size_t)m * K + b + j + 16];
                    part += (float)dot * xd[(size_t)m * KB + b / 32];
                }
                float d = scale_at(sc, f16, (size_t)n * G + g);
                acc += d * part + scale_at(mn, f16, (size_t)n * G + g) * xsum[m * G + g] + 8.f * d * xdiff[m * G + g];
            }
            y[(size_t)m * N + n] = acc;
        }
    }
}

static void int8q8_rows_scalar(const int8_t *xq, const float *xd, const int8_t *q, const void *sc, int f16,
                               float *y, int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32;
    for (int n = n0; n < n1; n++)
        for (int m = 0; m < M; m++) {
            float acc = 0.f;
            for (int g = 0; g < G; g++) {
                float part = 0.f;
                for (int b = g * gs; b < (g + 1) * gs; b += 32) {
                    int32_t dot = 0;
                    for (int j = 0; j < 32; j++) dot += q[(size_t)n * K + b + j] * xq[(size_t)m * K + b + j];
                    part += (float)dot * xd[(size_t)m * KB + b / 32];
                }
                acc += scale_at(sc, f16, (size_t)n * G + g) * part;
            }
            y[(size_t)m * N + n] = acc;
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
 * products (maddubs / madd) scaled in fp32, in the same order for every M (q8_row_all).
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
        acc[m][u] = _mm256_fmadd_ps(_mm256_add_ps(t0, t1), _mm256_set1_ps(dsb[bi + u]), acc[m][u]);    \
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
 * prefill chunk give the same float. */
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

SGQ_AVX2 static inline __attribute__((always_inline)) void q8_rows_dot(
    const void *qr, const int8_t *xq, const float *xd, const float *dsb, int K, int KB, float *res,
    const int MM, const int int4) {
    __m256 acc[Q8_ROWS][QU];
    for (int m = 0; m < Q8_ROWS; m++)
        for (int u = 0; u < QU; u++) acc[m][u] = _mm256_setzero_ps();
    int bi = 0;
    for (; bi + QU <= KB; bi += QU)
        for (int u = 0; u < QU; u++)
            q8_block_dot(acc, q8_weights(qr, bi + u, int4), xq, xd, dsb[bi + u], K, KB, bi + u, u, MM, !int4);
    for (; bi < KB; bi++) q8_block_dot(acc, q8_weights(qr, bi, int4), xq, xd, dsb[bi], K, KB, bi, 0, MM, !int4);
    for (int m = 0; m < MM; m++)
        res[m] = hsum8(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[m][0], acc[m][1]), acc[m][2]), acc[m][3]));
}

/* y[m, n] = (Q8 dot of row m with weight row n) + tail[m], for all M activation rows */
SGQ_AVX2 static void q8_row_all(const void *qr, const int8_t *xq, const float *xd, const float *dsb,
                                const float *tail, float *y, int M, int N, int K, int n, const int int4) {
    int KB = K / 32;
    for (int m0 = 0; m0 < M; m0 += Q8_ROWS) {
        float res[Q8_ROWS];
        int mm = M - m0 >= Q8_ROWS ? Q8_ROWS : M - m0;
        const int8_t *xm = xq + (size_t)m0 * K;
        const float *dm = xd + (size_t)m0 * KB;
        switch (mm) {
            case 1: q8_rows_dot(qr, xm, dm, dsb, K, KB, res, 1, int4); break;
            case 2: q8_rows_dot(qr, xm, dm, dsb, K, KB, res, 2, int4); break;
            case 3: q8_rows_dot(qr, xm, dm, dsb, K, KB, res, 3, int4); break;
            default: q8_rows_dot(qr, xm, dm, dsb, K, KB, res, 4, int4); break;
        }
        for (int m = 0; m < mm; m++) y[(size_t)(m0 + m) * N + n] = res[m] + tail[m0 + m];
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

/* int4 rows n0..n1; xq/xd non-NULL selects the Q8 path. xsumt: [G, MAX_M] group sums of x. */
SGQ_AVX2 static void int4_rows_avx2(const float *x, const int8_t *xq, const float *xd, const float *xsum,
                                   const float *xdiff, const uint8_t *q, const void *sc, const void *mn, int f16,
                                   float *y, int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32;
    float dsb_buf[KB + 8], xd8[M * G + 1], mn32[G + 8], sc32[G + 8];
    for (int i = 0; i < M * G; i++) xd8[i] = xdiff ? 8.f * xdiff[i] : 0.f;
    const __m128i lomask = _mm_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    (void)ones;
    for (int n = n0; n < n1; n++) {
        const uint8_t *qr = q + (size_t)n * (K / 2);
        size_t ssz = f16 ? 2 : 4;
        const void *sr = (const char *)sc + (size_t)n * G * ssz, *mr = (const char *)mn + (size_t)n * G * ssz;
        /* row n's mins and scales in fp32, converted once for its M activation rows (F16C: exact, as
         * scale_at's, NaN payloads aside); fp32 tables are read in place */
        const float *mnf = (const float *)mr, *scf = (const float *)sr;
        if (f16) {
            expand_scales((const uint16_t *)mr, mn32, G, 1);
            expand_scales((const uint16_t *)sr, sc32, G, 1);
            mnf = mn32, scf = sc32;
        }
        float tail[MAX_M]; /* sum over groups of min * xsum (+ 8 * scale * xdiff on the Q8 path) */
        for (int m = 0; m < M; m++) {
            const float *xs = xsum + (size_t)m * G, *xf = xd8 + (size_t)m * G;
            __m256 t = _mm256_setzero_ps();
            int g = 0;
            for (; g + 8 <= G; g += 8) {
                t = _mm256_fmadd_ps(_mm256_loadu_ps(mnf + g), _mm256_loadu_ps(xs + g), t);
                t = _mm256_fmadd_ps(_mm256_loadu_ps(scf + g), _mm256_loadu_ps(xf + g), t);
            }
            float ts = hsum8(t);
            for (; g < G; g++) ts += mnf[g] * xs[g] + scf[g] * xf[g];
            tail[m] = ts;
        }
        const float *dsb = dsb_buf; /* per block: the group's scale */
        if (bpg == 1) dsb = scf;
        else expand_scales_f32(scf, dsb_buf, G, bpg);
        if (xq) {
            q8_row_all(qr, xq, xd, dsb, tail, y, M, N, K, n, 1);
        } else {
            SWITCH_M(UNPACK_INT4_F32, DOT_F32_STEP)
        }
    }
}

/* int8 rows n0..n1 with gs a multiple of 32 (per channel: gs = K); xq/xd non-NULL: Q8 path. */
SGQ_AVX2 static void int8_blocks_avx2(const float *x, const int8_t *xq, const float *xd, const int8_t *q,
                                     const void *sc, int f16, float *y, int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32;
    float dsb[KB + 8];
    const float tail[MAX_M] = {0};
    const __m256i ones = _mm256_set1_epi16(1);
    (void)ones;
    for (int n = n0; n < n1; n++) {
        const int8_t *qr = q + (size_t)n * K;
        if (f16) {
            expand_scales((const uint16_t *)sc + (size_t)n * G, dsb, G, bpg);
        } else {
            expand_scales_f32((const float *)sc + (size_t)n * G, dsb, G, bpg);
        }
        if (xq) {
            q8_row_all(qr, xq, xd, dsb, tail, y, M, N, K, n, 0);
        } else {
            SWITCH_M(UNPACK_INT8_F32, DOT_F32_STEP)
        }
    }
}
#endif /* SG_X86 */

#endif /* STRUCTGEN_QKERNEL_ROWS_H */
