/* The int4-tile x Q8 matmul on AMX (Intel Advanced Matrix Extensions, TDPBSSD) for many activation
 * rows (included once from csrc/qkernel_core.h after qkernel_tiles.h, not a public header).
 *
 * The same integers and floats as int4t_rows_avx2 / int4t_rows_vnni / int4t_rows_scalar (the
 * contract at the top of qkernel_tiles.h), so a row's result never depends on which path or how
 * many rows ran:
 *   dot[m, c]  = the exact int32 block dot of 32 codes (0..15) and 32 activations (-127..127),
 *                here one TDPBSSD of a 16 x 32 activation tile and a 32 x 16 weight tile into a
 *                zeroed int32 tile (integer sums are exact in any order);
 *   acc[m, c]  = fmaf((float)dot, sc[c, g(b)] * xd[m, b], acc) for b = 0, 1, ... in order;
 *   y[m, 8t+c] = acc + tile_tail_avx2's tail (float add; the tail's fused multiply-adds are
 *                tile_tail_avx2's, lane for lane).
 * Per output element these are the 8-lane paths' float operations in the same order; lanes are
 * independent, so one 16-lane AVX-512 instruction per activation row covers both tiles of a pair.
 * Work unit: a pair of weight tiles (16 output columns) x 16 activation rows. The pair's codes are
 * unpacked once per call into TDPBSSD's B layout (per block: 8 rows of 64 bytes, row r holding
 * inputs 4r..4r+3 of the 16 columns; qkernel_tiles.h's tile bytes are already in that order, low
 * nibbles for inputs 0..15 and high nibbles for 16..31) and reused by every row group. Rows past
 * M read a zero-padded copy of the activations and are not stored; a missing second tile of the
 * pair (odd tile count, or past this thread's column range) is zero codes and is not stored.
 *
 * Linux only: the kernel must grant the AMX tile state to the process first (arch_prctl
 * ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); amx_supported() asks once and is 0 where it is refused,
 * the CPU lacks AMX-INT8 / AVX-512BW, or STRUCTGEN_NO_AMX=1. */
#ifndef STRUCTGEN_QKERNEL_AMX_H
#define STRUCTGEN_QKERNEL_AMX_H

#if SG_X86 && defined(__linux__) && (__GNUC__ >= 11 || defined(__clang__))
#define SG_HAVE_AMX 1
#include <sys/syscall.h>
#include <unistd.h>

#define SGQ_AMX __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,amx-tile,amx-int8")))

/* Activation rows per AMX tile (its row count) */
#define AMX_ROWS 16

/* 1 if int4t_rows_amx may run here: the CPU has AMX-TILE, AMX-INT8 and AVX-512 F/BW/DQ/VL, the kernel
 * granted the tile data state, and STRUCTGEN_NO_AMX is not 1. The CPU and kernel answers are
 * asked once per process; the environment on every call (set_amx is rare). */
static int amx_supported(void) {
    static int granted = -1;
    const char *off = getenv("STRUCTGEN_NO_AMX");
    if (off && strcmp(off, "1") == 0) return 0;
    if (granted < 0) {
        unsigned a, b, c, d;
        int cpu = 0;
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
            __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
            /* CPUID.(EAX=7, ECX=0):EDX bit 24 AMX-TILE, bit 25 AMX-INT8 */
            __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
            cpu = ((d >> 24) & 1) && ((d >> 25) & 1);
        }
        /* ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 */
        granted = cpu && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    }
    return granted;
}

/* The tile configuration (palette 1): tmm0 / tmm1 activations 16 rows x 32 bytes, tmm2 / tmm3
 * weight codes 8 x 64 bytes (32 inputs x 16 columns, 4 inputs per 32-bit lane), tmm4-7 the int32
 * block dots 16 x 16. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;

SGQ_AMX static void amx_config(void) {
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int s = 0; s < 2; s++) {
        cfg.colsb[s] = 32, cfg.rows[s] = AMX_ROWS; /* activations */
        cfg.colsb[s + 2] = 64, cfg.rows[s + 2] = 8; /* weight codes */
    }
    for (int s = 4; s < 8; s++) cfg.colsb[s] = 64, cfg.rows[s] = AMX_ROWS; /* int32 block dots */
    /* not _tile_loadconfig: gcc 12's names only the first 8 bytes of the configuration as its
     * memory operand, so the stores filling the rest could be removed as dead */
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

/* B tiles of a tile pair, all K / 32 blocks: bt[b * 512 + r * 64 + h * 32 + 4 c + i] = the code of
 * column c of tile (h ? qt1 : qt0) for input 4 r + i of block b (qt1 NULL: zeros). */
SGQ_AMX static void amx_unpack_pair(const uint8_t *qt0, const uint8_t *qt1, int KB, uint8_t *bt) {
    const __m512i lomask = _mm512_set1_epi8(0x0F);
    for (int b = 0; b < KB; b++)
        for (int j = 0; j < 4; j++) {
            __m256i r0 = _mm256_loadu_si256((const __m256i *)(qt0 + (size_t)b * 128 + j * 32));
            __m256i r1 = qt1 ? _mm256_loadu_si256((const __m256i *)(qt1 + (size_t)b * 128 + j * 32))
                             : _mm256_setzero_si256();
            __m512i raw = _mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1);
            _mm512_storeu_si512(bt + (size_t)b * 512 + j * 64, _mm512_and_si512(raw, lomask));
            _mm512_storeu_si512(bt + (size_t)b * 512 + (j + 4) * 64,
                                _mm512_and_si512(_mm512_srli_epi16(raw, 4), lomask));
        }
}

/* Int4-tile Q8 rows [n0, n1) on AMX (arguments as int4t_rows_avx2). Work unit: a pair of weight
 * tiles (16 columns, lanes 0-7 tile tb and 8-15 tile tb + 1, one zmm per activation row) x 16
 * activation rows, its 16 accumulators in registers: first the tail (both tiles' lanes at once,
 * the rows' chains interleaved), then the blocks in order, each block's TDPBSSD issued two blocks
 * before its dots are stored (sources alternating between two tile pairs, dots rotating over four
 * tiles) and its dots scaled two blocks after the store; then one masked store of the 16 columns
 * per row. Returns 0, or -1 when a scratch buffer cannot be allocated (nothing written: the caller
 * runs another path). */
SGQ_AMX static int int4t_rows_amx(const int8_t *xq, const float *xd, const float *xsum, const float *xdiff,
                                  const uint8_t *q, const void *tiles, int f16, float *y, int M, int N, int K,
                                  int gs, int n0, int n1) {
    int G = K / gs, KB = K / 32, bpg = gs / 32, NT = (N + 7) / 8;
    uint8_t *bt = (uint8_t *)aligned_alloc(64, (size_t)KB * 512);
    int8_t *xpad = (int8_t *)aligned_alloc(64, (size_t)AMX_ROWS * K);
    int RG = (M + AMX_ROWS - 1) / AMX_ROWS;
    float *xdl = (float *)malloc(sizeof(float) * (size_t)RG * KB * AMX_ROWS);
    float *xsl = (float *)malloc(sizeof(float) * (size_t)RG * G * 2 * AMX_ROWS);
    /* the pair's tables, 16 lanes per group: mins then scales of tile tb (lanes 0-7) and tb + 1
     * (8-15, zeros where it is missing); mnT .. scT1 the 8-lane halves tile_tables_avx2 fills */
    float *tab = (float *)aligned_alloc(64, sizeof(float) * ((size_t)G * 64 + 16));
    if (!bt || !xpad || !xdl || !tab || !xsl) {
        free(bt), free(xpad), free(xdl), free(tab), free(xsl);
        return -1;
    }
    float *mn16 = tab, *sc16 = tab + (size_t)G * 16, *mnT = tab + (size_t)G * 32, *scT = mnT + G * 8;
    float *mnT1 = mnT + G * 16, *scT1 = mnT + G * 24;
    /* per row group, the rows' activation scales block by block (xdl[(rg * KB + b) * 16 + m], 0
     * past M) and the last group's zero-padded activations, once for all tile pairs */
    for (int rg = 0; rg < RG; rg++)
        for (int b = 0; b < KB; b++)
            for (int m = 0; m < AMX_ROWS; m++) {
                int r = rg * AMX_ROWS + m;
                xdl[((size_t)rg * KB + b) * AMX_ROWS + m] = r < M ? xd[(size_t)r * KB + b] : 0.f;
            }
    for (int rg = 0; rg < RG; rg++)
        for (int g = 0; g < G; g++)
            for (int m = 0; m < AMX_ROWS; m++) {
                int r = rg * AMX_ROWS + m;
                float *xv = xsl + ((size_t)rg * G + g) * 2 * AMX_ROWS;
                xv[m] = r < M ? xsum[(size_t)r * G + g] : 0.f;
                xv[AMX_ROWS + m] = r < M ? 8.f * xdiff[(size_t)r * G + g] : 0.f;
            }
    if (M % AMX_ROWS) {
        memset(xpad, 0, (size_t)AMX_ROWS * K);
        memcpy(xpad, xq + (size_t)(M - M % AMX_ROWS) * K, (size_t)(M % AMX_ROWS) * K);
    }
    amx_config();
    int32_t cbuf[4][AMX_ROWS * 16] __attribute__((aligned(64)));
    float tails[AMX_ROWS * 16] __attribute__((aligned(64)));
    for (int tb = n0 / 8; tb * 8 < n1; tb += 2) {
        int has1 = tb + 1 < NT && (tb + 1) * 8 < n1;
        const uint8_t *qt0 = q + (size_t)tb * TILE_BYTES(K);
        /* the next pair's codes (tiles tb + 2 and tb + 3 where they hold columns below n1; their
         * bytes follow this pair's, 128 per tile and block), requested block by block during this
         * pair's first row group: a prefetch only, no result depends on it */
        int nnext = tb + 2 < NT && (tb + 2) * 8 < n1 ? (tb + 3 < NT && (tb + 3) * 8 < n1 ? 2 : 1) : 0;
        const char *qnext = (const char *)(qt0 + 2 * TILE_BYTES(K));
        amx_unpack_pair(qt0, has1 ? qt0 + TILE_BYTES(K) : NULL, KB, bt);
        int a0, a1, b0 = 8, b1 = 8;
        tile_cols(tb, n0, n1, &a0, &a1);
        tile_tables_avx2(tiles, f16, G, (size_t)tb, mnT, scT);
        if (has1) {
            tile_cols(tb + 1, n0, n1, &b0, &b1);
            tile_tables_avx2(tiles, f16, G, (size_t)tb + 1, mnT1, scT1);
        } else {
            memset(mnT1, 0, sizeof(float) * G * 16);
        }
        for (int g = 0; g < G; g++) {
            _mm512_store_ps(mn16 + g * 16, _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(mnT + g * 8)),
                                                              _mm256_loadu_ps(mnT1 + g * 8), 1));
            _mm512_store_ps(sc16 + g * 16, _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(scT + g * 8)),
                                                              _mm256_loadu_ps(scT1 + g * 8), 1));
        }
        /* the pair's columns in y: lanes [a0, a1) and [8 + b0, 8 + b1) */
        __mmask16 cols = (__mmask16)((((1u << a1) - 1) & ~((1u << a0) - 1)) |
                                     ((((1u << b1) - 1) & ~((1u << b0) - 1)) << 8));
        for (int m0 = 0; m0 < M; m0 += AMX_ROWS) {
            int mm = M - m0 < AMX_ROWS ? M - m0 : AMX_ROWS;
            const int8_t *xa = mm < AMX_ROWS ? xpad : xq + (size_t)m0 * K;
            const float *xdg = xdl + (size_t)(m0 / AMX_ROWS) * KB * AMX_ROWS;
            /* the tail first (tile_tail_avx2's float operations, both tiles' lanes in one zmm
             * per row, the rows' 16 chains interleaved), kept in tails until the end */
            const float *xsg = xsl + (size_t)(m0 / AMX_ROWS) * G * 2 * AMX_ROWS;
            __m512 tl[AMX_ROWS];
#pragma GCC unroll 16
            for (int m = 0; m < AMX_ROWS; m++) tl[m] = _mm512_setzero_ps();
            for (int g = 0; g < G; g++) {
                __m512 mnv = _mm512_load_ps(mn16 + g * 16), scv = _mm512_load_ps(sc16 + g * 16);
                const float *xsv = xsg + g * 2 * AMX_ROWS;
#pragma GCC unroll 16
                for (int m = 0; m < AMX_ROWS; m++) {
                    tl[m] = _mm512_fmadd_ps(mnv, _mm512_set1_ps(xsv[m]), tl[m]);
                    tl[m] = _mm512_fmadd_ps(scv, _mm512_set1_ps(xsv[AMX_ROWS + m]), tl[m]);
                }
            }
#pragma GCC unroll 16
            for (int m = 0; m < AMX_ROWS; m++) _mm512_store_ps(tails + m * 16, tl[m]);
            __m512 acc[AMX_ROWS];
#pragma GCC unroll 16
            for (int m = 0; m < AMX_ROWS; m++) acc[m] = _mm512_setzero_ps();
#define AMX_ISSUE(A, B, C, blk)                                    \
    do {                                                           \
        _tile_loadd(A, xa + (size_t)(blk) * 32, K);                \
        _tile_loadd(B, bt + (size_t)(blk) * 512, 64);              \
        _tile_zero(C);                                             \
        _tile_dpbssd(C, A, B);                                     \
    } while (0)
/* step bb: block bb's dots (TDPBSSD issued two blocks earlier) stored from tile C, block bb + 2's
 * TDPBSSD issued into the sources block bb used (A, B) and dot tile C2, and block bb - 2's dots
 * (stored two blocks earlier) scaled into the accumulators */
#define AMX_STEP(bb, C, A, B, C2)                                                                   \
    do {                                                                                           \
        if ((bb) < KB) {                                                                           \
            for (int t_ = 0; t_ < pf_tiles; t_++) {                                                \
                const char *p_ = qnext + (size_t)t_ * TILE_BYTES(K) + (size_t)(bb) * 128;          \
                _mm_prefetch(p_, _MM_HINT_T1);                                                     \
                _mm_prefetch(p_ + 64, _MM_HINT_T1);                                                \
            }                                                                                      \
            _tile_stored(C, cbuf[(bb) & 3], 64);                                                   \
            if ((bb) + 2 < KB) AMX_ISSUE(A, B, C2, (bb) + 2);                                      \
        }                                                                                          \
        if ((bb) >= 2 && (bb) < KB + 2) {                                                          \
            int pb = (bb) - 2;                                                                     \
            const int32_t *cb = cbuf[pb & 3];                                                      \
            const float *xdb = xdg + (size_t)pb * AMX_ROWS;                                        \
            __m512 scv = _mm512_load_ps(scb);                                                      \
            _Pragma("GCC unroll 16") for (int m = 0; m < AMX_ROWS; m++) {                          \
                __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(cb + m * 16));                   \
                acc[m] = _mm512_fmadd_ps(dot, _mm512_mul_ps(scv, _mm512_set1_ps(xdb[m])), acc[m]); \
            }                                                                                      \
            if (++gb == bpg) gb = 0, scb += 16;                                                    \
        }                                                                                          \
    } while (0)
            /* the tile loads' asm (gcc's _tile_loadd) names no memory operand: every store to bt,
             * xpad and the tables is made before them */
            __asm__ volatile("" ::: "memory");
            AMX_ISSUE(0, 2, 4, 0);
            if (KB > 1) AMX_ISSUE(1, 3, 5, 1);
            /* the next pair's tiles to request during this row group's blocks (the first) */
            int pf_tiles = m0 == 0 ? nnext : 0;
            /* scb: the scales of block pb's group; gb: pb's index in the group */
            const float *scb = sc16;
            int gb = 0;
            for (int b = 0; b < KB + 2; b += 4) {
                AMX_STEP(b, 4, 0, 2, 6);
                AMX_STEP(b + 1, 5, 1, 3, 7);
                AMX_STEP(b + 2, 6, 0, 2, 4);
                AMX_STEP(b + 3, 7, 1, 3, 5);
            }
#undef AMX_STEP
#undef AMX_ISSUE
#pragma GCC unroll 16
            for (int m = 0; m < AMX_ROWS; m++)
                if (m < mm)
                    _mm512_mask_storeu_ps(y + (size_t)(m0 + m) * N + (size_t)tb * 8, cols,
                                          _mm512_add_ps(acc[m], _mm512_load_ps(tails + m * 16)));
        }
    }
    _tile_release();
    free(bt), free(xpad), free(xdl), free(tab), free(xsl);
    return 0;
}
#else
#define SG_HAVE_AMX 0
#endif

#endif /* STRUCTGEN_QKERNEL_AMX_H */
