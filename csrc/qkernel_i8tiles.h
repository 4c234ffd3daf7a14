/* The int8 x Q8 matmul over int8 weight tiles (included once from csrc/qkernel_core.h after
 * qkernel_amx.h, not a public header): the GGUF Q8_0 lm_head's kernel at any number of
 * activation rows, one arithmetic on every path (scalar, AVX2, AVX-VNNI, AMX).
 *
 * Layout (structgen/runtime/quantization/formats.py, pack_int8_tiles): an int8 weight [N, K]
 * regrouped 16 weight rows at a time, int8 [ceil(N/16), K/32, 8, 16, 4]: tile t, block b (32
 * inputs), quad j (0..7), column c (0..15), byte i (0..3) is W[16 t + c, 32 b + 4 j + i]; rows
 * past N are zeros. A block of a tile is 512 bytes: exactly TDPBSSD's B tile (8 rows of 64
 * bytes, row j holding inputs 4j..4j+3 of the 16 columns), loaded as it is; an 8-column half h
 * of a quad is the 32 bytes at j * 64 + h * 32 (one ymm: 4 inputs of 8 columns). The values are
 * the weight's own (no requantization). Scale table sct float32 [ceil(N/16), K/gs, 16]:
 * sct[t, g, c] = scale[16 t + c, g] (0 past N; fp16 scales convert exactly).
 *
 * Arithmetic, per activation row m (xq int8 [M, K] in -127..127, block scales xd [M, K/32]:
 * quantize_q8) and output column n = 16 t + c, the same integers and floats for every M, every
 * row grouping, every thread split and every path:
 *   dot[b]  = sum over the 32 inputs k of block b of W[n, k] * xq[m, k]: the exact int32 block
 *             dot (|dot| <= 32 * 128 * 127; integer sums are exact in any order);
 *   acc     = fmaf((float)dot[b], sct[t, g(b), c] * xd[m, b], acc) for b = 0, 1, ... in order,
 *             from acc = 0 (the scale product rounded to float first);
 *   y[m, n] = acc.
 * One float multiply and one fused multiply-add per (row, column, block): lanes are output
 * columns (no horizontal sums), 8 per ymm, 16 per zmm. The block dots, by path:
 *   scalar: the integer sum;
 *   AVX2:   per quad maddubs(|w|, sign(x, w)) (int16 pairs at most 2 * 128 * 127 = 32512: no
 *           saturation) then madd with ones, added in int32;
 *   VNNI:   vpdpbusd(x + 128, w) from -128 * sum(w) per column (the activations offset to
 *           unsigned bytes once per call; the offset's sum per block and column once per tile);
 *   AMX:    one TDPBSSD of a 16-row activation tile and the block's B tile into a zeroed tile. */
#ifndef STRUCTGEN_QKERNEL_I8TILES_H
#define STRUCTGEN_QKERNEL_I8TILES_H

/* Output columns per int8 tile, and the bytes of one tile of a K-input weight */
#define I8T_COLS 16
#define I8T_TILE_BYTES(K) ((size_t)(K) * I8T_COLS)
/* Activation rows sharing each loaded weight vector in the AVX2 / VNNI kernels */
#define I8T_ROWS 8

/* The int8 weight of column c (0..15), input k of tile qt */
static inline int i8t_code(const int8_t *qt, int c, int k) {
    return qt[(size_t)(k / 32) * 512 + (k % 32 / 4) * 64 + c * 4 + k % 4];
}

/* Scalar int8-tile Q8 rows [n0, n1) of y [M, N] (the arithmetic above) */
static void int8t_rows_scalar(const int8_t *xq, const float *xd, const int8_t *q, const float *sct, float *y,
                              int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32;
    for (int n = n0; n < n1; n++) {
        int t = n / I8T_COLS, c = n % I8T_COLS;
        const int8_t *qt = q + (size_t)t * I8T_TILE_BYTES(K);
        const float *st = sct + (size_t)t * G * I8T_COLS;
        for (int m = 0; m < M; m++) {
            const int8_t *xm = xq + (size_t)m * K;
            float acc = 0.f;
            for (int b = 0; b < KB; b++) {
                int32_t dot = 0;
                for (int k = b * 32; k < b * 32 + 32; k++) dot += i8t_code(qt, c, k) * xm[k];
                acc = fmaf((float)dot, st[(b / bpg) * I8T_COLS + c] * xd[(size_t)m * KB + b], acc);
            }
            y[(size_t)m * N + n] = acc;
        }
    }
}

#if SG_X86
/* Block dots of one 8-column half: PREP once per quad (w: its 32 bytes), DOT per activation row
 * (xb: the row's 4 bytes of the quad, xq or the offset xa), into the int32 sum s */
#define I8T_PREP_AVX2(w) const __m256i wa_ = _mm256_abs_epi8(w);
#define I8T_DOT_AVX2(s, w, xb)                                                                          \
    _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(wa_, _mm256_sign_epi8(_mm256_set1_epi32(xb), w)), \
                                          _mm256_set1_epi16(1)))
#define I8T_PREP_VNNI(w)
#define I8T_DOT_VNNI(s, w, xb) _mm256_dpbusd_avx_epi32(s, _mm256_set1_epi32(xb), w)

/* acc[m] (m < MM) for MM activation rows xa + m K (xd at their first row) against all blocks of
 * the 8-column half qh (quad j of block b at qh + b * 512 + j * 64); sch: the half's scales
 * (group g at sch + g * 16); s0: each block's starting int32 sums (VNNI: -128 * sum(w)) or NULL */
#define I8T_ROWS_DOT(NAME, ATTR, PREP, DOT)                                                             \
    ATTR static inline __attribute__((always_inline)) void NAME(__m256 *acc, const int8_t *qh,          \
                                                                const uint8_t *xa, const float *xd,     \
                                                                const float *sch, const int32_t *s0,    \
                                                                int K, int KB, int bpg, const int MM) { \
        for (int m = 0; m < MM; m++) acc[m] = _mm256_setzero_ps();                                      \
        for (int b = 0; b < KB; b++) {                                                                  \
            __m256i s[I8T_ROWS];                                                                        \
            __m256i st = s0 ? _mm256_loadu_si256((const __m256i *)(s0 + b * 8)) : _mm256_setzero_si256(); \
            for (int m = 0; m < MM; m++) s[m] = st;                                                     \
            for (int j = 0; j < 8; j++) {                                                               \
                __m256i w = _mm256_loadu_si256((const __m256i *)(qh + (size_t)b * 512 + j * 64));        \
                PREP(w)                                                                                 \
                for (int m = 0; m < MM; m++) {                                                          \
                    int32_t xb;                                                                         \
                    memcpy(&xb, xa + (size_t)m * K + b * 32 + 4 * j, 4);                                \
                    s[m] = DOT(s[m], w, xb);                                                            \
                    if (MM > 2) TILE_PIN(s[m]);                                                         \
                }                                                                                       \
            }                                                                                           \
            __m256 scv = _mm256_loadu_ps(sch + (b / bpg) * 16);                                         \
            for (int m = 0; m < MM; m++)                                                                \
                acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[m]),                                      \
                                         _mm256_mul_ps(scv, _mm256_set1_ps(xd[(size_t)m * KB + b])), acc[m]); \
        }                                                                                               \
    }
I8T_ROWS_DOT(i8t_rows_dot_avx2, SGQ_AVX2, I8T_PREP_AVX2, I8T_DOT_AVX2)
I8T_ROWS_DOT(i8t_rows_dot_vnni, SGQ_VNNI, I8T_PREP_VNNI, I8T_DOT_VNNI)

/* One activation row (xa: its offset bytes xq + 128, xd its block scales) against all blocks of the
 * 16-column tile qt on AVX-VNNI, both halves in one pass over the tile's bytes: per block and half
 * the int32 sum of vpdpbusd(x + 128, w) less that of vpdpbusd(128, w), the same exact block dot as
 * i8t_rows_dot_vnni's, then its float epilogue; acc[0], acc[1]: columns 0-7 and 8-15 */
SGQ_VNNI static inline void i8t_row1_vnni(__m256 *acc, const int8_t *qt, const uint8_t *xa, const float *xd,
                                          const float *st, int KB, int bpg) {
    const __m256i off = _mm256_set1_epi8((char)0x80);
    acc[0] = acc[1] = _mm256_setzero_ps();
    for (int b = 0; b < KB; b++) {
        __m256i s0 = _mm256_setzero_si256(), s1 = s0, c0 = s0, c1 = s0;
        for (int j = 0; j < 8; j++) {
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(qt + (size_t)b * 512 + j * 64));
            __m256i w1 = _mm256_loadu_si256((const __m256i *)(qt + (size_t)b * 512 + j * 64 + 32));
            int32_t xb;
            memcpy(&xb, xa + b * 32 + 4 * j, 4);
            __m256i xv = _mm256_set1_epi32(xb);
            s0 = _mm256_dpbusd_avx_epi32(s0, xv, w0), s1 = _mm256_dpbusd_avx_epi32(s1, xv, w1);
            c0 = _mm256_dpbusd_avx_epi32(c0, off, w0), c1 = _mm256_dpbusd_avx_epi32(c1, off, w1);
        }
        __m256 xdv = _mm256_set1_ps(xd[b]);
        const float *sg = st + (size_t)(b / bpg) * I8T_COLS;
        acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s0, c0)), _mm256_mul_ps(_mm256_loadu_ps(sg), xdv), acc[0]);
        acc[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s1, c1)), _mm256_mul_ps(_mm256_loadu_ps(sg + 8), xdv), acc[1]);
    }
}

/* Int8-tile Q8 rows [n0, n1) by 8-column halves (the arithmetic above), row groups of I8T_ROWS by
 * ROWS_DOT; OFFSET: the VNNI dot (activations as unsigned bytes xq + 128, each block's sums
 * started at -128 * sum(w)). Where its working memory cannot be allocated, the scalar path gives
 * the same floats. */
#define INT8T_ROWS(NAME, ATTR, ROWS_DOT, OFFSET)                                                        \
    ATTR static void NAME(const int8_t *xq, const float *xd, const int8_t *q, const float *sct, float *y, \
                          int M, int N, int K, int gs, int n0, int n1) {                                \
        int G = K / gs, KB = K / 32, bpg = gs / 32;                                                     \
        int32_t *s0 = OFFSET ? (int32_t *)malloc(sizeof(int32_t) * (size_t)KB * 8 + (size_t)M * K) : NULL; \
        if (OFFSET && !s0) {                                                                            \
            int8t_rows_scalar(xq, xd, q, sct, y, M, N, K, gs, n0, n1);                                  \
            return;                                                                                     \
        }                                                                                               \
        const uint8_t *xa = (const uint8_t *)xq;                                                        \
        if (OFFSET) {                                                                                   \
            uint8_t *xu = (uint8_t *)(s0 + (size_t)KB * 8);                                             \
            for (size_t i = 0; i < (size_t)M * K; i++) xu[i] = (uint8_t)xq[i] ^ 0x80u;                  \
            xa = xu;                                                                                    \
        }                                                                                               \
        if (OFFSET && M == 1) { /* one row: whole tiles, each byte read once */                         \
            for (int t = n0 / I8T_COLS; t * I8T_COLS < n1; t++) {                                       \
                __m256 acc[2];                                                                          \
                i8t_row1_vnni(acc, q + (size_t)t * I8T_TILE_BYTES(K), xa, xd, sct + (size_t)t * G * I8T_COLS, KB, bpg); \
                for (int h = 0; h < 2; h++) {                                                           \
                    int c0, c1;                                                                         \
                    tile_cols(2 * t + h, n0, n1, &c0, &c1);                                             \
                    if (c0 < c1) tile_store(y + (size_t)(2 * t + h) * 8, acc[h], c0, c1);               \
                }                                                                                       \
            }                                                                                           \
            free(s0);                                                                                   \
            return;                                                                                     \
        }                                                                                               \
        for (int h8 = n0 / 8; h8 * 8 < n1; h8++) {                                                      \
            int t = h8 / 2, h = h8 % 2, c0, c1;                                                         \
            tile_cols(h8, n0, n1, &c0, &c1);                                                            \
            const int8_t *qh = q + (size_t)t * I8T_TILE_BYTES(K) + h * 32;                              \
            const float *sch = sct + (size_t)t * G * I8T_COLS + h * 8;                                  \
            if (OFFSET)                                                                                 \
                for (int b = 0; b < KB; b++) {                                                          \
                    __m256i s = _mm256_setzero_si256();                                                 \
                    for (int j = 0; j < 8; j++)                                                         \
                        s = _mm256_dpbusd_avx_epi32(s, _mm256_set1_epi8((char)0x80),                    \
                                                    _mm256_loadu_si256((const __m256i *)(qh + (size_t)b * 512 + j * 64))); \
                    _mm256_storeu_si256((__m256i *)(s0 + b * 8), _mm256_sub_epi32(_mm256_setzero_si256(), s)); \
                }                                                                                       \
            for (int m0 = 0; m0 < M; m0 += I8T_ROWS) {                                                  \
                int mm = M - m0 < I8T_ROWS ? M - m0 : I8T_ROWS;                                         \
                const uint8_t *xm = xa + (size_t)m0 * K;                                                \
                const float *dm = xd + (size_t)m0 * KB;                                                 \
                __m256 acc[I8T_ROWS];                                                                   \
                switch (mm) {                                                                           \
                    case 1: ROWS_DOT(acc, qh, xm, dm, sch, s0, K, KB, bpg, 1); break;                   \
                    case 2: ROWS_DOT(acc, qh, xm, dm, sch, s0, K, KB, bpg, 2); break;                   \
                    case 3: ROWS_DOT(acc, qh, xm, dm, sch, s0, K, KB, bpg, 3); break;                   \
                    case 4: ROWS_DOT(acc, qh, xm, dm, sch, s0, K, KB, bpg, 4); break;                   \
                    case 5: ROWS_DOT(acc, qh, xm, dm, sch, s0, K, KB, bpg, 5); break;                   \
                    case 6: ROWS_DOT(acc, qh, xm, dm, sch, s0, K, KB, bpg, 6); break;                   \
                    case 7: ROWS_DOT(acc, qh, xm, dm, sch, s0, K, KB, bpg, 7); break;                   \
                    default: ROWS_DOT(acc, qh, xm, dm, sch, s0, K, KB, bpg, I8T_ROWS); break;           \
                }                                                                                       \
                for (int m = 0; m < mm; m++) tile_store(y + (size_t)(m0 + m) * N + (size_t)h8 * 8, acc[m], c0, c1); \
            }                                                                                           \
        }                                                                                               \
        free(s0);                                                                                       \
    }
INT8T_ROWS(int8t_rows_avx2, SGQ_AVX2, i8t_rows_dot_avx2, 0)
INT8T_ROWS(int8t_rows_vnni, SGQ_VNNI, i8t_rows_dot_vnni, 1)
#endif /* SG_X86 */

#if SG_HAVE_AMX
/* Int8-tile Q8 rows [n0, n1) on AMX (the arithmetic above). Work unit: a tile (16 columns, one
 * zmm per activation row) x 16 activation rows, its 16 accumulators in registers: the blocks in
 * order, each block's TDPBSSD (A: the rows' 32 activation bytes, B: the block's 512 weight bytes
 * as stored) issued two blocks before its dots are stored (sources alternating between two tile
 * pairs, dots rotating over four tiles) and its dots scaled two blocks after the store (the
 * pipeline of int4t_rows_amx); then one masked store of the tile's columns per row. Rows past M
 * read a zero-padded copy of the activations and are not stored. Returns 0, or -1 when a
 * scratch buffer cannot be allocated (nothing written: the caller runs another path). */
SGQ_AMX static int int8t_rows_amx(const int8_t *xq, const float *xd, const int8_t *q, const float *sct, float *y,
                                  int M, int N, int K, int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32;
    int RG = (M + AMX_ROWS - 1) / AMX_ROWS;
    int8_t *xpad = (int8_t *)aligned_alloc(64, (size_t)AMX_ROWS * K);
    float *xdl = (float *)aligned_alloc(64, sizeof(float) * (size_t)RG * KB * AMX_ROWS);
    if (!xpad || !xdl) {
        free(xpad), free(xdl);
        return -1;
    }
    (void)G;
    /* per row group, the rows' activation scales block by block (0 past M) */
    for (int rg = 0; rg < RG; rg++)
        for (int b = 0; b < KB; b++)
            for (int m = 0; m < AMX_ROWS; m++) {
                int r = rg * AMX_ROWS + m;
                xdl[((size_t)rg * KB + b) * AMX_ROWS + m] = r < M ? xd[(size_t)r * KB + b] : 0.f;
            }
    if (M % AMX_ROWS) {
        memset(xpad, 0, (size_t)AMX_ROWS * K);
        memcpy(xpad, xq + (size_t)(M - M % AMX_ROWS) * K, (size_t)(M % AMX_ROWS) * K);
    }
    amx_config();
    int32_t cbuf[4][AMX_ROWS * 16] __attribute__((aligned(64)));
    for (int t = n0 / I8T_COLS; t * I8T_COLS < n1; t++) {
        const int8_t *qt = q + (size_t)t * I8T_TILE_BYTES(K);
        const float *st = sct + (size_t)t * (K / gs) * I8T_COLS;
        int c0 = n0 > t * I8T_COLS ? n0 - t * I8T_COLS : 0;
        int c1 = n1 - t * I8T_COLS < I8T_COLS ? n1 - t * I8T_COLS : I8T_COLS;
        __mmask16 cols = (__mmask16)((((1u << c1) - 1) & ~((1u << c0) - 1)) & 0xFFFFu);
        for (int m0 = 0; m0 < M; m0 += AMX_ROWS) {
            int mm = M - m0 < AMX_ROWS ? M - m0 : AMX_ROWS;
            const int8_t *xa = mm < AMX_ROWS ? xpad : xq + (size_t)m0 * K;
            const float *xdg = xdl + (size_t)(m0 / AMX_ROWS) * KB * AMX_ROWS;
            __m512 acc[AMX_ROWS];
#pragma GCC unroll 16
            for (int m = 0; m < AMX_ROWS; m++) acc[m] = _mm512_setzero_ps();
#define I8T_ISSUE(A, B, C, blk)                                    \
    do {                                                           \
        _tile_loadd(A, xa + (size_t)(blk) * 32, K);                \
        _tile_loadd(B, qt + (size_t)(blk) * 512, 64);              \
        _tile_zero(C);                                             \
        _tile_dpbssd(C, A, B);                                     \
    } while (0)
/* step bb: block bb's dots stored from tile C, block bb + 2's TDPBSSD issued into the sources
 * block bb used (A, B) and dot tile C2, block bb - 2's dots scaled into the accumulators */
#define I8T_STEP(bb, C, A, B, C2)                                                                   \
    do {                                                                                           \
        if ((bb) < KB) {                                                                           \
            _tile_stored(C, cbuf[(bb) & 3], 64);                                                   \
            if ((bb) + 2 < KB) I8T_ISSUE(A, B, C2, (bb) + 2);                                      \
        }                                                                                          \
        if ((bb) >= 2 && (bb) < KB + 2) {                                                          \
            int pb = (bb) - 2;                                                                     \
            const int32_t *cb = cbuf[pb & 3];                                                      \
            const float *xdb = xdg + (size_t)pb * AMX_ROWS;                                        \
            __m512 scv = _mm512_loadu_ps(st + (size_t)(pb / bpg) * I8T_COLS);                      \
            _Pragma("GCC unroll 16") for (int m = 0; m < AMX_ROWS; m++) {                          \
                __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(cb + m * 16));                   \
                acc[m] = _mm512_fmadd_ps(dot, _mm512_mul_ps(scv, _mm512_set1_ps(xdb[m])), acc[m]); \
            }                                                                                      \
        }                                                                                          \
    } while (0)
            /* the tile loads' asm (gcc's _tile_loadd) names no memory operand: every store to
             * xpad is made before them */
            __asm__ volatile("" ::: "memory");
            I8T_ISSUE(0, 2, 4, 0);
            if (KB > 1) I8T_ISSUE(1, 3, 5, 1);
            for (int b = 0; b < KB + 2; b += 4) {
                I8T_STEP(b, 4, 0, 2, 6);
                I8T_STEP(b + 1, 5, 1, 3, 7);
                I8T_STEP(b + 2, 6, 0, 2, 4);
                I8T_STEP(b + 3, 7, 1, 3, 5);
            }
#undef I8T_STEP
#undef I8T_ISSUE
#pragma GCC unroll 16
            for (int m = 0; m < AMX_ROWS; m++)
                if (m < mm) _mm512_mask_storeu_ps(y + (size_t)(m0 + m) * N + (size_t)t * I8T_COLS, cols, acc[m]);
        }
    }
    _tile_release();
    free(xpad), free(xdl);
    return 0;
}
#endif /* SG_HAVE_AMX */

#endif /* STRUCTGEN_QKERNEL_I8TILES_H */
