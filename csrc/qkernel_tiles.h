/* The int4 x Q8 matmul over int4 weight tiles (included once from csrc/qkernel_core.h, not a
 * public header): 8 output columns per 256-bit vector, llama.cpp's "repack 8x8" idea in our own
 * layout and arithmetic.
 *
 * Layout (structgen/runtime/quantization/formats.py, pack_int4_tiles): the int4 "rows" weight
 * (qkernel.c) regrouped 8 weight rows at a time, uint8 [ceil(N/8), K/32, 4, 8, 4]: tile t, block b
 * (32 inputs), quad j (0..3), column c (0..7), byte i (0..3) is byte 4 j + i of block b of weight
 * row 8 t + c in the rows layout, i.e. input 4 j + i of the block in its low nibble and input
 * 16 + 4 j + i in its high nibble. Rows past N are zero codes. One 32-byte load is 4 packed bytes
 * of each of the 8 columns; its low nibbles are inputs 4j..4j+3 of the 8 columns, its high
 * nibbles inputs 16+4j..16+4j+3.
 *
 * Arithmetic, per activation row m, tile t and block b (the same integers and floats for every M,
 * every row grouping and every thread split, scalar and AVX2 alike):
 *   s16[c, p]  = sum over the 8 quads (j = 0..3, low then high nibbles) of maddubs(codes, xq):
 *                int16 pairs, |each maddubs lane| <= 2 * 15 * 127 = 3810, so the sum of 8 is
 *                at most 30480 (no saturation; xq is in -127..127, quantize_q8);
 *   dot[c]     = s16[c, 0] + s16[c, 1] (madd with ones): the exact int32 block dot of column c;
 *   acc[c]     = fmaf((float)dot[c], sc[c, g(b)] * xd[m, b], acc[c]), b = 0, 1, ... in order;
 *   y[m, 8t+c] = acc[c] + tail[c], tail the int4 tile tail of qkernel_rows.h (min * xsum, then
 *                8 * scale * xdiff, per group in order: tile_tail_avx2 / tile_tail_scalar).
 * No horizontal sums: lanes are output columns. Up to TILE_ROWS activation rows share each
 * unpacked weight vector. Exact float32 activations (int4t_exact_rows_*): per group the float
 * dot of codes and x, times the scale, plus the exact tail (min * xsum). */
#ifndef STRUCTGEN_QKERNEL_TILES_H
#define STRUCTGEN_QKERNEL_TILES_H

/* Activation rows sharing one unpack of a weight tile's block: 8 int16 sums live plus the quad's
 * codes (13 ymm registers); 8 measured faster than 4 and 6 (benchmarks/RESULTS.md, session 22 k2) */
#define TILE_ROWS 8

/* Bytes of one tile (8 weight rows) of a K-input weight: 8 * K / 2 */
#define TILE_BYTES(K) ((size_t)(K) * 4)

/* Tiles ahead whose codes the Q8 tile kernels (int4t_rows_avx2 / _vnni) request at each tile */
#ifndef TILE_PREFETCH
#define TILE_PREFETCH 2
#endif

/* The int4 code of column c, input k (0..K-1) of tile qt */
static inline int tile_code(const uint8_t *qt, int c, int k) {
    int b = k / 32, kk = k % 32, hi = kk >= 16, j = (kk % 16) / 4, i = kk % 4;
    uint8_t v = qt[(size_t)b * 128 + j * 32 + c * 4 + i];
    return hi ? v >> 4 : v & 0xF;
}

/* Columns [*c0, *c1) of tile tb that fall in [n0, n1) */
static inline void tile_cols(int tb, int n0, int n1, int *c0, int *c1) {
    *c0 = n0 > tb * 8 ? n0 - tb * 8 : 0;
    *c1 = n1 - tb * 8 < 8 ? n1 - tb * 8 : 8;
}

/* Scalar int4-tile Q8 rows [n0, n1), bit for bit int4t_rows_avx2. */
static void int4t_rows_scalar(const int8_t *xq, const float *xd, const float *xsum, const float *xdiff,
                              const uint8_t *q, const void *tiles, int f16, float *y, int M, int N, int K,
                              int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32;
    float mnT[G * 8 + 1], scT[G * 8 + 1], xd8[M * G + 1];
    for (int i = 0; i < M * G; i++) xd8[i] = 8.f * xdiff[i];
    for (int tb = n0 / 8; tb * 8 < n1; tb++) {
        const uint8_t *qt = q + (size_t)tb * TILE_BYTES(K);
        tile_tables_scalar(tiles, f16, G, (size_t)tb, mnT, scT);
        int r0, r1;
        tile_cols(tb, n0, n1, &r0, &r1);
        for (int m = 0; m < M; m++) {
            const int8_t *xm = xq + (size_t)m * K;
            for (int c = r0; c < r1; c++) {
                float acc = 0.f;
                for (int b = 0; b < KB; b++) {
                    int32_t dot = 0;
                    for (int k = b * 32; k < b * 32 + 32; k++) dot += tile_code(qt, c, k) * xm[k];
                    acc = fmaf((float)dot, scT[(b / bpg) * 8 + c] * xd[(size_t)m * KB + b], acc);
                }
                y[(size_t)m * N + tb * 8 + c] = acc + tile_tail_scalar(mnT, scT, xsum, xd8, G, m, c);
            }
        }
    }
}


/* Exact float32 int4-tile rows [n0, n1) (x float32, no activation rounding), bit for bit
 * int4t_exact_rows_avx2: per group, lane c's dot over its blocks in order, inputs 4j + i
 * (j = 0..3, i = 0..3) into a low chain and 16 + 4j + i into a high chain (one fused
 * multiply-add each), then acc = fmaf(scale, low + high, acc), then y = acc + the exact tile tail
 * (min * xsum). */
static void int4t_exact_rows_scalar(const float *x, const float *xsum, const uint8_t *q, const void *tiles,
                                    int f16, float *y, int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs;
    float mnT[G * 8 + 1], scT[G * 8 + 1];
    for (int tb = n0 / 8; tb * 8 < n1; tb++) {
        const uint8_t *qt = q + (size_t)tb * TILE_BYTES(K);
        tile_tables_scalar(tiles, f16, G, (size_t)tb, mnT, scT);
        int r0, r1;
        tile_cols(tb, n0, n1, &r0, &r1);
        for (int m = 0; m < M; m++) {
            const float *xm = x + (size_t)m * K;
            for (int c = r0; c < r1; c++) {
                float acc = 0.f;
                for (int g = 0; g < G; g++) {
                    float lo = 0.f, hi = 0.f;
                    for (int b = g * gs / 32; b < (g + 1) * gs / 32; b++)
                        for (int j = 0; j < 4; j++)
                            for (int i = 0; i < 4; i++) {
                                int k = b * 32 + 4 * j + i;
                                lo = fmaf((float)tile_code(qt, c, k), xm[k], lo);
                                hi = fmaf((float)tile_code(qt, c, k + 16), xm[k + 16], hi);
                            }
                    acc = fmaf(scT[g * 8 + c], lo + hi, acc);
                }
                y[(size_t)m * N + tb * 8 + c] = acc + tile_tail_scalar(mnT, scT, xsum, NULL, G, m, c);
            }
        }
    }
}

#if SG_X86
/* ym[c] = lane c of v for c in [c0, c1) */
SGQ_AVX2 static inline void tile_store(float *ym, __m256 v, int c0, int c1) {
    if (c0 == 0 && c1 == 8) {
        _mm256_storeu_ps(ym, v);
        return;
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, v);
    for (int c = c0; c < c1; c++) ym[c] = lanes[c];
}

/* Pin v to a register at this point of the program (an empty asm; volatile and the memory
 * clobber keep the pins in order with the activation loads). Without it gcc (12, -O3)
 * reassociates each row's int16 sums into a tree over all 8 products of the block and computes
 * every row's products first, keeping them live at once: 4 rows spilled ~65 ymm values per block
 * to the stack. The integers are the same in any order (no int16 sum saturates or wraps). */
#define TILE_PIN(v) __asm__ volatile("" : "+x"(v) : : "memory")

/* acc[m] (m < MM) += the block dots of activation rows xq + m K with the 8 columns of tile block
 * qb, scaled by scv * xd[m] (the arithmetic in the comment at the top). One quad at a time: its
 * low and high codes, then per row two products added into the row's int16 sum, pinned there
 * (TILE_PIN), so what is live is the MM sums, the quad's codes and the mask. */
SGQ_AVX2 static inline __attribute__((always_inline)) void tile_block_dot(
    __m256 *acc, const uint8_t *qb, const int8_t *xq, const float *xd, __m256 scv, int K, int KB,
    const int MM) {
    const __m256i lomask = _mm256_set1_epi8(0x0F);
    __m256i s16[TILE_ROWS];
    for (int j = 0; j < 4; j++) {
        __m256i raw = _mm256_loadu_si256((const __m256i *)(qb + j * 32));
        __m256i lo = _mm256_and_si256(raw, lomask);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), lomask);
        for (int m = 0; m < MM; m++) {
            const int8_t *xb = xq + (size_t)m * K;
            int32_t a, b;
            memcpy(&a, xb + 4 * j, 4);
            memcpy(&b, xb + 16 + 4 * j, 4);
            __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(a)),
                                         _mm256_maddubs_epi16(hi, _mm256_set1_epi32(b)));
            s16[m] = j ? _mm256_add_epi16(s16[m], p) : p;
            if (MM > 2) TILE_PIN(s16[m]);
        }
    }
    for (int m = 0; m < MM; m++) {
        __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16[m], _mm256_set1_epi16(1)));
        acc[m] = _mm256_fmadd_ps(dot, _mm256_mul_ps(scv, _mm256_set1_ps(xd[(size_t)m * KB])), acc[m]);
    }
}

/* tile_block_dot with vpdpbusd (AVX-VNNI, VEX form): per row one int32 sum of 4 u8 * s8 products
 * per lane and instruction, the same exact int32 block dot as the maddubs + madd chain (no int16
 * stage, so nothing can saturate; the AVX2 one cannot either, see the top). */
SGQ_VNNI static inline __attribute__((always_inline)) void tile_block_dot_vnni(
    __m256 *acc, const uint8_t *qb, const int8_t *xq, const float *xd, __m256 scv, int K, int KB,
    const int MM) {
    const __m256i lomask = _mm256_set1_epi8(0x0F);
    __m256i s32[TILE_ROWS];
    for (int m = 0; m < MM; m++) s32[m] = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i raw = _mm256_loadu_si256((const __m256i *)(qb + j * 32));
        __m256i lo = _mm256_and_si256(raw, lomask);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), lomask);
        for (int m = 0; m < MM; m++) {
            const int8_t *xb = xq + (size_t)m * K;
            int32_t a, b;
            memcpy(&a, xb + 4 * j, 4);
            memcpy(&b, xb + 16 + 4 * j, 4);
            s32[m] = _mm256_dpbusd_avx_epi32(s32[m], lo, _mm256_set1_epi32(a));
            s32[m] = _mm256_dpbusd_avx_epi32(s32[m], hi, _mm256_set1_epi32(b));
            if (MM > 2) TILE_PIN(s32[m]);
        }
    }
    for (int m = 0; m < MM; m++) {
        __m256 dot = _mm256_cvtepi32_ps(s32[m]);
        acc[m] = _mm256_fmadd_ps(dot, _mm256_mul_ps(scv, _mm256_set1_ps(xd[(size_t)m * KB])), acc[m]);
    }
}

/* acc[m] for MM activation rows (xq, xd at their first row) against all K / 32 blocks of tile qt,
 * block dots by BLOCK_DOT (tile_block_dot or tile_block_dot_vnni); ATTR: the ISA of the caller */
#define TILE_ROWS_DOT(NAME, ATTR, BLOCK_DOT)                                                             \
    ATTR static inline __attribute__((always_inline)) void NAME(__m256 *acc, const uint8_t *qt,          \
                                                                const int8_t *xq, const float *xd,       \
                                                                const float *scT, int K, int bpg,        \
                                                                const int MM) {                          \
        int KB = K / 32;                                                                                 \
        for (int m = 0; m < MM; m++) acc[m] = _mm256_setzero_ps();                                       \
        for (int g = 0, b = 0; b < KB; g++) {                                                            \
            __m256 scv = _mm256_loadu_ps(scT + g * 8);                                                   \
            for (int e = b + bpg; b < e; b++)                                                            \
                BLOCK_DOT(acc, qt + (size_t)b * 128, xq + (size_t)b * 32, xd + b, scv, K, KB, MM);       \
        }                                                                                                \
    }
TILE_ROWS_DOT(tile_rows_dot, SGQ_AVX2, tile_block_dot)
TILE_ROWS_DOT(tile_rows_dot_vnni, SGQ_VNNI, tile_block_dot_vnni)

/* Int4-tile Q8 rows [n0, n1) (see the comment at the top), row blocks by ROWS_DOT; the AVX2 and
 * the VNNI instances give the same floats (the same int32 block dots, then the same float ops). */
#define INT4T_ROWS(NAME, ATTR, ROWS_DOT)                                                                 \
    ATTR static void NAME(const int8_t *xq, const float *xd, const float *xsum, const float *xdiff,      \
                          const uint8_t *q, const void *tiles, int f16, float *y, int M, int N, int K,   \
                          int gs, int n0, int n1) {                                                      \
        int G = K / gs, KB = K / 32, bpg = gs / 32;                                                      \
        float mnT[G * 8], scT[G * 8];                                                                    \
        float *xd8 = (float *)malloc(sizeof(float) * ((size_t)M * G + 1));                               \
        if (!xd8) return;                                                                                \
        for (size_t i = 0; i < (size_t)M * G; i++) xd8[i] = 8.f * xdiff[i];                              \
        for (int tb = n0 / 8; tb * 8 < n1; tb++) {                                                       \
            const uint8_t *qt = q + (size_t)tb * TILE_BYTES(K);                                          \
            int r0, r1;                                                                                  \
            if ((tb + TILE_PREFETCH) * 8 < n1) /* a later tile's codes, requested ahead */               \
                for (size_t c_ = 0; c_ < TILE_BYTES(K); c_ += 64)                                        \
                    _mm_prefetch((const char *)qt + TILE_PREFETCH * TILE_BYTES(K) + c_, _MM_HINT_T0);    \
            tile_cols(tb, n0, n1, &r0, &r1);                                                             \
            tile_tables_avx2(tiles, f16, G, (size_t)tb, mnT, scT);                                       \
            for (int m0 = 0; m0 < M; m0 += TILE_ROWS) {                                                  \
                int mm = M - m0 < TILE_ROWS ? M - m0 : TILE_ROWS;                                        \
                const int8_t *xm = xq + (size_t)m0 * K;                                                  \
                const float *dm = xd + (size_t)m0 * KB;                                                  \
                __m256 acc[TILE_ROWS], tail[TILE_ROWS];                                                  \
                switch (mm) {                                                                            \
                    case 1: ROWS_DOT(acc, qt, xm, dm, scT, K, bpg, 1); break;                            \
                    case 2: ROWS_DOT(acc, qt, xm, dm, scT, K, bpg, 2); break;                            \
                    case 3: ROWS_DOT(acc, qt, xm, dm, scT, K, bpg, 3); break;                            \
                    case 4: ROWS_DOT(acc, qt, xm, dm, scT, K, bpg, 4); break;                            \
                    case 5: ROWS_DOT(acc, qt, xm, dm, scT, K, bpg, 5); break;                            \
                    case 6: ROWS_DOT(acc, qt, xm, dm, scT, K, bpg, 6); break;                            \
                    case 7: ROWS_DOT(acc, qt, xm, dm, scT, K, bpg, 7); break;                            \
                    default: ROWS_DOT(acc, qt, xm, dm, scT, K, bpg, TILE_ROWS); break;                   \
                }                                                                                        \
                tile_tail_avx2(mnT, scT, xsum + (size_t)m0 * G, xd8 + (size_t)m0 * G, mm, G, tail);      \
                for (int m = 0; m < mm; m++) {                                                           \
                    __m256 res = _mm256_add_ps(acc[m], tail[m]);                                         \
                    tile_store(y + (size_t)(m0 + m) * N + (size_t)tb * 8, res, r0, r1);                  \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
        free(xd8);                                                                                       \
    }
INT4T_ROWS(int4t_rows_avx2, SGQ_AVX2, tile_rows_dot)
INT4T_ROWS(int4t_rows_vnni, SGQ_VNNI, tile_rows_dot_vnni)

/* 1 if this CPU runs the VNNI kernels (int4t_rows_vnni, int8q8_rows_vnni: AVX-VNNI plus AVX2 +
 * FMA + F16C) and the environment does not turn them off (STRUCTGEN_NO_VNNI=1: benchmarks, A/B).
 * Asked once per process (the decode step asks on every call); tests pick paths with
 * _qkernel.set_vnni. */
static inline int tile_vnni_supported(void) {
    static int answer = -1; /* a race writes the same value */
    if (answer < 0) {
        __builtin_cpu_init();
        const char *off = getenv("STRUCTGEN_NO_VNNI");
        answer = __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2") &&
                 __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
                 !(off && strcmp(off, "1") == 0);
    }
    return answer;
}

/* AVX2 exact float32 int4-tile rows [n0, n1): int4t_exact_rows_scalar's floats, 8 columns per
 * vector (byte i of each 32-bit lane widened to a float per input). */
SGQ_AVX2 static void int4t_exact_rows_avx2(const float *x, const float *xsum, const uint8_t *q, const void *tiles,
                                          int f16, float *y, int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs, bpg = gs / 32;
    float mnT[G * 8], scT[G * 8];
    const __m256i lomask = _mm256_set1_epi8(0x0F), byte = _mm256_set1_epi32(0xFF);
    for (int tb = n0 / 8; tb * 8 < n1; tb++) {
        const uint8_t *qt = q + (size_t)tb * TILE_BYTES(K);
        int r0, r1;
        tile_cols(tb, n0, n1, &r0, &r1);
        tile_tables_avx2(tiles, f16, G, (size_t)tb, mnT, scT);
        __m256 tail[MAX_M];
        for (int m0 = 0; m0 < M; m0 += MAX_M) {
            int mm = M - m0 < MAX_M ? M - m0 : MAX_M;
            tile_tail_avx2(mnT, scT, xsum + (size_t)m0 * G, NULL, mm, G, tail);
            for (int m = 0; m < mm; m++) {
                const float *xm = x + (size_t)(m0 + m) * K;
                __m256 acc = _mm256_setzero_ps();
                for (int g = 0; g < G; g++) {
                    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
                    for (int b = g * bpg; b < (g + 1) * bpg; b++)
                        for (int j = 0; j < 4; j++) {
                            __m256i raw = _mm256_loadu_si256((const __m256i *)(qt + (size_t)b * 128 + j * 32));
                            __m256i wl = _mm256_and_si256(raw, lomask);
                            __m256i wh = _mm256_and_si256(_mm256_srli_epi16(raw, 4), lomask);
                            const float *xb = xm + b * 32 + 4 * j;
                            for (int i = 0; i < 4; i++) {
                                __m256 cl = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(wl, 8 * i), byte));
                                __m256 ch = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(wh, 8 * i), byte));
                                lo = _mm256_fmadd_ps(cl, _mm256_set1_ps(xb[i]), lo);
                                hi = _mm256_fmadd_ps(ch, _mm256_set1_ps(xb[16 + i]), hi);
                            }
                        }
                    acc = _mm256_fmadd_ps(_mm256_loadu_ps(scT + g * 8), _mm256_add_ps(lo, hi), acc);
                }
                tile_store(y + (size_t)(m0 + m) * N + (size_t)tb * 8, _mm256_add_ps(acc, tail[m]), r0, r1);
            }
        }
    }
}
#endif /* SG_X86 */

#endif /* STRUCTGEN_QKERNEL_TILES_H */
