/* structgen's fused CPU ops for the decoder's per-layer work around the matmuls.
 *
 * Why: after the weight matmuls (csrc/densekernel.c, csrc/qkernel.c), a batch-1 decode step
 * of a 30-layer model spent about half its time in ~25 small torch ops per layer (norms,
 * rotary, K/V stores, page gathers, SDPA, residual adds, SiLU) and the Python around them.
 * Each op here does in one pass what several torch ops did, on the tensors in place:
 *
 *   add_rms_norm   residual += delta (optional), out = weight * rmsnorm(residual)
 *                  (transformers' LlamaRMSNorm; vLLM's fused_add_rms_norm)
 *   rope_store_kv  optional per-head q/k RMSNorm (Qwen3), rotary embedding of q and k in
 *                  place (rotate-half layout, RoFormer, arXiv:2104.09864), K/V written to
 *                  their cache slots
 *   paged_attention  causal softmax attention of each query token to its sequence's keys,
 *                  read through the page table in place (no gather copy), GQA/MQA by head
 *                  mapping, optional sliding window; for short extensions (decode,
 *                  jump-forward, speculative verification): O(tokens x keys) work
 *   silu_mul       out = silu(gate) * up (gate and up may be two halves of one fused output)
 *
 * Dtypes: activations, norm weights and KV cache all fp32 (dt = 0) or all bf16 (dt = 1), or a KV
 * cache of its own dtype (kdt: fp32, bf16 or fp16 = 2; rounded on store, widened on load);
 * math in fp32. In bf16 the intermediate roundings follow transformers' order where it
 * rounds (normed value before the weight product; silu before the product), elsewhere one
 * rounding at the end. Layouts are row-major with the row strides given (elements).
 *
 * AVX2+FMA paths chosen at run time (__builtin_cpu_supports) where the loops are hot
 * (attention dot products, weighted sums, exp), portable scalar code otherwise; the attention's
 * AVX-512 loops, where the CPU has them, compute every lane as the AVX2 loops do (same floats).
 * In fp32 the norm's weight product, the rotation, SiLU's divide and product and the fp16 K/V
 * store (F16C) run 8 lanes at a time with the scalar code's operations, so its bits (a NaN
 * stored to fp16 is the scalar code's quiet NaN).
 *
 * Threads: each op is a ``*_body`` that shares its loops among the threads of the enclosing
 * OpenMP parallel region (orphaned ``omp for``) and returns after the loop's barrier, its
 * output complete for every thread; the fused decode step calls the bodies from its one
 * region. Outside any region the calling thread runs all of it. The op itself opens a region
 * for one call, and only when the work is large enough to pay for the fork/join. Every output
 * element is computed by one thread in the same order whatever the split, so results do not
 * depend on the thread count.
 * Included by cpuops.c (the Python bindings, structgen.runtime.cpu._cpuops) and by
 * decodestep.c (the fused decode step); everything here is static.
 */
#ifndef SG_CPUOPS_CORE_H
#define SG_CPUOPS_CORE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "sg_simd.h"

#ifndef SG_ITEM_HOOK
#define SG_ITEM_HOOK() /* decodestep.c: its test hook, at each attention work item */
#endif

#define MAX_HEAD_DIM 512
#define PAR_MIN_WORK 65536 /* elements below which a region runs on one thread */

/* ------------------------------------------------------------------ add_rms_norm */
/* row t of add_rms_norm */
#if SG_X86
/* out[i] = w[i] * (x[i] * r), i < n, fp32: the scalar loop's two roundings, 8 lanes at a time */
__attribute__((target("avx2,fma"))) static void scale_weight_f32_avx2(const float *x,
                                                                     const float *w, float r,
                                                                     float *out, int n) {
    __m256 vr = _mm256_set1_ps(r);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 nx = _mm256_mul_ps(_mm256_loadu_ps(x + i), vr);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), nx));
    }
    for (; i < n; i++) out[i] = w[i] * (x[i] * r);
}
#endif

/* out row t = w * rmsnorm(res row t), its sum of squares ss given */
static inline void rms_norm_finish(const void *res, long rs, const void *w, void *out, long os,
                                   int t, int H, double ss, float eps, int dt) {
    float r = 1.0f / sqrtf((float)(ss / H) + eps);
#if SG_X86
    if (!dt && sg_use_avx2()) {
        scale_weight_f32_avx2((const float *)res + (size_t)t * rs, (const float *)w, r,
                              (float *)out + (size_t)t * os, H);
        return;
    }
#endif
    for (int i = 0; i < H; i++) {
        float n = sg_round(sg_ld(res, (size_t)t * rs + i, dt) * r, dt);
        sg_st(out, (size_t)t * os + i, sg_ld(w, i, dt) * n, dt);
    }
}

static inline void add_rms_norm_row(void *res, long rs, const void *delta, long ds, const void *w,
                                    void *out, long os, int t, int H, float eps, int dt) {
    double ss = 0.0;
    float h;
    for (int i = 0; i < H; i++) {
        h = sg_ld(res, (size_t)t * rs + i, dt);
        if (delta) {
            h = sg_round(h + sg_ld(delta, (size_t)t * ds + i, dt), dt);
            sg_st(res, (size_t)t * rs + i, h, dt);
        }
        ss += (double)h * h;
    }
    rms_norm_finish(res, rs, w, out, os, t, H, ss, eps, dt);
}

#define NORM_ROWS 8 /* fp32 rows whose sums of squares are added side by side */

#if SG_X86
#define NORM_PIECE 64 /* elements per row whose squares are made before they are summed */

/* ss[j] = sum over i < H of (double)h * h, h = r0[j rs + i] (+= d0[j ds + i] first, stored),
 * j < NORM_ROWS, each row's terms added in order: the adds and squares 8 lanes at a time (exact:
 * a float's square is exact in double), the sums side by side as add_rms_norm_rows8_f32 */
__attribute__((target("avx2,fma"))) static void norm_squares8_avx2(float *r0, long rs,
                                                                  const float *d0, long ds,
                                                                  int H, double *ss) {
    double sq[NORM_ROWS][NORM_PIECE];
    double acc[NORM_ROWS];
    for (int j = 0; j < NORM_ROWS; j++) acc[j] = ss[j];
    for (int i0 = 0; i0 < H; i0 += NORM_PIECE) {
        int n = H - i0 < NORM_PIECE ? H - i0 : NORM_PIECE;
        for (int j = 0; j < NORM_ROWS; j++) {
            float *r = r0 + (size_t)j * rs + i0;
            const float *d = d0 ? d0 + (size_t)j * ds + i0 : NULL;
            int i = 0;
            for (; i + 8 <= n; i += 8) {
                __m256 h = _mm256_loadu_ps(r + i);
                if (d) {
                    h = _mm256_add_ps(h, _mm256_loadu_ps(d + i));
                    _mm256_storeu_ps(r + i, h);
                }
                __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(h));
                __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(h, 1));
                _mm256_storeu_pd(sq[j] + i, _mm256_mul_pd(lo, lo));
                _mm256_storeu_pd(sq[j] + i + 4, _mm256_mul_pd(hi, hi));
            }
            for (; i < n; i++) {
                float h = r[i];
                if (d) {
                    h += d[i];
                    r[i] = h;
                }
                sq[j][i] = (double)h * h;
            }
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < NORM_ROWS; j++) acc[j] += sq[j][i];
    }
    for (int j = 0; j < NORM_ROWS; j++) ss[j] = acc[j];
}
#endif

/* rows t .. t + NORM_ROWS - 1 of add_rms_norm in fp32 with their sums of squares interleaved:
 * each row's terms added in its own order in double, as add_rms_norm_row adds them (the same
 * bits), NORM_ROWS chains of adds in flight instead of one add's latency per element */
static inline void add_rms_norm_rows8_f32(float *res, long rs, const float *delta, long ds,
                                          const void *w, void *out, long os, int t, int H,
                                          float eps) {
    double ss[NORM_ROWS] = {0.0};
    float *r0 = res + (size_t)t * rs;
#if SG_X86
    if (sg_use_avx2()) {
        norm_squares8_avx2(r0, rs, delta ? delta + (size_t)t * ds : NULL, ds, H, ss);
        for (int j = 0; j < NORM_ROWS; j++)
            rms_norm_finish(res, rs, w, out, os, t + j, H, ss[j], eps, 0);
        return;
    }
#endif
    if (delta) {
        const float *d0 = delta + (size_t)t * ds;
        for (int i = 0; i < H; i++)
            for (int j = 0; j < NORM_ROWS; j++) {
                float h = r0[(size_t)j * rs + i] + d0[(size_t)j * ds + i];
                r0[(size_t)j * rs + i] = h;
                ss[j] += (double)h * h;
            }
    } else {
        for (int i = 0; i < H; i++)
            for (int j = 0; j < NORM_ROWS; j++) {
                float h = r0[(size_t)j * rs + i];
                ss[j] += (double)h * h;
            }
    }
    for (int j = 0; j < NORM_ROWS; j++)
        rms_norm_finish(res, rs, w, out, os, t + j, H, ss[j], eps, 0);
}

/* rows [t0, t1) of add_rms_norm: fp32 in groups of NORM_ROWS (add_rms_norm_rows8_f32), the rest
 * row by row; every row's bits those of add_rms_norm_row */
static inline void add_rms_norm_rows(void *res, long rs, const void *delta, long ds, const void *w,
                                     void *out, long os, int t0, int t1, int H, float eps,
                                     int dt) {
    int t = t0;
    if (!dt)
        for (; t + NORM_ROWS <= t1; t += NORM_ROWS)
            add_rms_norm_rows8_f32((float *)res, rs, (const float *)delta, ds, w, out, os, t, H,
                                   eps);
    for (; t < t1; t++) add_rms_norm_row(res, rs, delta, ds, w, out, os, t, H, eps, dt);
}

static void add_rms_norm_body(void *res, long rs, const void *delta, long ds, const void *w,
                              void *out, long os, int T, int H, float eps, int dt) {
    int groups = (T + NORM_ROWS - 1) / NORM_ROWS;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (int g = 0; g < groups; g++) {
        int t1 = (g + 1) * NORM_ROWS < T ? (g + 1) * NORM_ROWS : T;
        add_rms_norm_rows(res, rs, delta, ds, w, out, os, g * NORM_ROWS, t1, H, eps, dt);
    }
}

static inline void add_rms_norm(void *res, long rs, const void *delta, long ds, const void *w,
                                void *out, long os, int T, int H, float eps, int dt, int threads) {
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if ((long)T * H >= PAR_MIN_WORK)
#endif
    add_rms_norm_body(res, rs, delta, ds, w, out, os, T, H, eps, dt);
}

/* ------------------------------------------------------------------ rope_store_kv */
#if SG_X86
/* y[i] = a c0 - b s0, y[i + half] = b c1 + a s1 (a = v[i], b = v[i + half], c0 = c[i], c1 =
 * c[i + half], likewise s) for i below half rounded down to 8, fp32, with rope_head's scalar
 * roundings (products rounded, then the sum: no fused multiply-add); returns where it stopped */
__attribute__((target("avx2,fma"))) static int rotate_half_f32_avx2(float *y, const float *v,
                                                                   const float *c, const float *s,
                                                                   int half) {
    int i = 0;
    for (; i + 8 <= half; i += 8) {
        __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + half);
        __m256 y0 = _mm256_sub_ps(_mm256_mul_ps(a, _mm256_loadu_ps(c + i)),
                                  _mm256_mul_ps(b, _mm256_loadu_ps(s + i)));
        __m256 y1 = _mm256_add_ps(_mm256_mul_ps(b, _mm256_loadu_ps(c + i + half)),
                                  _mm256_mul_ps(a, _mm256_loadu_ps(s + i + half)));
        _mm256_storeu_ps(y + i, y0);
        _mm256_storeu_ps(y + i + half, y1);
    }
    return i;
}
#endif

/* one head vector x[d] (in place): optional RMSNorm with weight nw, then rotate-half RoPE */
static void rope_head(void *x, size_t off, const void *cs, const void *sn, size_t coff,
                      const void *nw, float eps, int d, int dt) {
    float v[MAX_HEAD_DIM];
    for (int i = 0; i < d; i++) v[i] = sg_ld(x, off + i, dt);
    if (nw) {
        double ss = 0.0;
        for (int i = 0; i < d; i++) ss += (double)v[i] * v[i];
        float r = 1.0f / sqrtf((float)(ss / d) + eps);
        for (int i = 0; i < d; i++) v[i] = sg_round(sg_ld(nw, i, dt) * sg_round(v[i] * r, dt), dt);
    }
    int half = d / 2, i = 0;
#if SG_X86
    if (!dt && sg_use_avx2())
        i = rotate_half_f32_avx2((float *)x + off, v, (const float *)cs + coff,
                                 (const float *)sn + coff, half);
#endif
    for (; i < half; i++) {
        float a = v[i], b = v[i + half];
        float c0 = sg_ld(cs, coff + i, dt), c1 = sg_ld(cs, coff + i + half, dt);
        float s0 = sg_ld(sn, coff + i, dt), s1 = sg_ld(sn, coff + i + half, dt);
        sg_st(x, off + i, a * c0 - b * s0, dt);
        sg_st(x, off + i + half, b * c1 + a * s1, dt);
    }
}

#if SG_X86
/* y[i] = x[i] as fp16, i < n: F16C's conversion rounding to nearest even, which is
 * sg_float_to_f16's for every float but a NaN (F16C keeps the payload's top bits, sg_float_to_f16
 * gives the quiet NaN 0x7e00): 8 lanes holding a NaN, and the last n % 8, go through
 * sg_float_to_f16 */
__attribute__((target("avx2,fma,f16c"))) static void f32_to_f16_avx2(uint16_t *y, const float *x,
                                                                    int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int j = i; j < i + 8; j++) y[j] = sg_float_to_f16(x[j]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) y[i] = sg_float_to_f16(x[i]);
}
#endif

/* head h (of KVH) of token t's vector at src[off ..] (dtype dt) to its cache slot (dtype kdt:
 * rounded to nearest even when the cache is narrower, as torch's .to) */
static inline void kv_store(void *cache, const void *src, size_t off, const int64_t *slots, int t,
                            int KVH, int h, int d, int dt, int kdt) {
    size_t dst = ((size_t)slots[t] * KVH + h) * d;
    if (dt == kdt) {
        size_t es = dt ? 2 : 4;
        memcpy((char *)cache + dst * es, (const char *)src + off * es, (size_t)d * es);
        return;
    }
#if SG_X86
    if (!dt && kdt == 2 && sg_use_avx2()) {
        f32_to_f16_avx2((uint16_t *)cache + dst, (const float *)src + off, d);
        return;
    }
#endif
    for (int i = 0; i < d; i++) sg_st(cache, dst + i, sg_ld(src, off + i, dt), kdt);
}

static void rope_store_kv_body(void *q, long qs, void *k, long ks, const void *v, long vs,
                               const void *cos_t, const void *sin_t, const void *qnw,
                               const void *knw, float eps, void *kc, void *vc,
                               const int64_t *slots, int T, int H, int KVH, int d, int dt,
                               int kdt) {
    int items = H + KVH;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (long it = 0; it < (long)T * items; it++) {
        int t = (int)(it / items), h = (int)(it % items);
        size_t coff = (size_t)t * d;
        if (h < H) {
            rope_head(q, (size_t)t * qs + (size_t)h * d, cos_t, sin_t, coff, qnw, eps, d, dt);
            continue;
        }
        h -= H;
        size_t koff = (size_t)t * ks + (size_t)h * d;
        rope_head(k, koff, cos_t, sin_t, coff, knw, eps, d, dt);
        kv_store(kc, k, koff, slots, t, KVH, h, d, dt, kdt);
        kv_store(vc, v, (size_t)t * vs + (size_t)h * d, slots, t, KVH, h, d, dt, kdt);
    }
}

static inline void rope_store_kv(void *q, long qs, void *k, long ks, const void *v, long vs,
                          const void *cos_t, const void *sin_t, const void *qnw, const void *knw,
                          float eps, void *kc, void *vc, const int64_t *slots, int T, int H,
                          int KVH, int d, int dt, int kdt, int threads) {
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if ((long)T * (H + KVH) * d >= PAR_MIN_WORK)
#endif
    rope_store_kv_body(q, qs, k, ks, v, vs, cos_t, sin_t, qnw, knw, eps, kc, vc, slots, T, H, KVH,
                       d, dt, kdt);
}

/* ------------------------------------------------------------------ paged_attention */
#define MAX_GROUP 16 /* query heads per KV head attended together */
#define ROW_VECS 24 /* query head vectors (rows x heads) of a tile of rows attended together */
#define KEY_CHUNK 256 /* keys per work item: long sequences split over the threads */
#ifndef KV_PREFETCH
#define KV_PREFETCH 16 /* keys ahead whose K/V rows the score pass requests */
#endif

/* element offsets of key/value positions lo .. hi of KV head kvh, through the sequence's pages:
 * offs[j - lo] (one division for the chunk, then a walk along the pages) */
static inline void kv_offs(size_t *offs, const int64_t *pages, int ps, int KVH, int kvh, int d,
                           int lo, int hi) {
    int p = lo / ps, s = lo % ps;
    size_t row = (size_t)KVH * d;
    for (int j = lo; j <= hi; j++) {
        offs[j - lo] = ((size_t)pages[p] * ps + s) * row + (size_t)kvh * d;
        if (++s == ps) s = 0, p++;
    }
}

#if SG_X86
/* sc[g * n + r] = q_g . k[offs[r]] for GN (<= 3) heads (q_g at q + g * d) and 4 keys, d % 8 == 0:
 * each K vector loaded once for the GN heads. Every sum in one fixed order: 8 lanes along d
 * (FMA), then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). GN and kdt are constants where
 * it is inlined (12 accumulators + GN queries + 1 key: the 16 ymm registers). */
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void qk_tile_avx2(
    const float *q, int GN, int d, const void *k, const size_t *offs, int kdt, float *sc, size_t n) {
    __m256 a[3][4], qv[3];
    for (int g = 0; g < GN; g++)
        for (int r = 0; r < 4; r++) a[g][r] = _mm256_setzero_ps();
    for (int i = 0; i < d; i += 8) {
        for (int g = 0; g < GN; g++) qv[g] = _mm256_loadu_ps(q + (size_t)g * d + i);
        for (int r = 0; r < 4; r++) {
            __m256 kv = sg_load8_kv(k, offs[r] + i, kdt);
            for (int g = 0; g < GN; g++) a[g][r] = _mm256_fmadd_ps(qv[g], kv, a[g][r]);
        }
    }
    for (int g = 0; g < GN; g++) {
        __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[g][0], a[g][1]), _mm256_hadd_ps(a[g][2], a[g][3]));
        _mm_storeu_ps(sc + (size_t)g * n, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
    }
}

/* acc[g * d + i] += sum_{r < nk} p[g * n + r] * v[offs[r] + i] for GN (<= 3) heads and
 * i in i0 .. i0 + 8 * IB (IB <= 4): each V vector loaded once for the GN heads; every element's
 * sum in key order r = 0, 1, .. (one FMA each), accumulated in registers. */
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void pv_tile_avx2(
    float *acc, int GN, int IB, int d, int i0, const float *p, size_t n, const void *v,
    const size_t *offs, int nk, int kdt) {
    __m256 a[3][4], pv[3];
    for (int g = 0; g < GN; g++)
        for (int b = 0; b < IB; b++) a[g][b] = _mm256_loadu_ps(acc + (size_t)g * d + i0 + 8 * b);
    for (int r = 0; r < nk; r++) {
        for (int g = 0; g < GN; g++) pv[g] = _mm256_broadcast_ss(p + (size_t)g * n + r);
        for (int b = 0; b < IB; b++) {
            __m256 vv = sg_load8_kv(v, offs[r] + i0 + 8 * b, kdt);
            for (int g = 0; g < GN; g++) a[g][b] = _mm256_fmadd_ps(pv[g], vv, a[g][b]);
        }
    }
    for (int g = 0; g < GN; g++)
        for (int b = 0; b < IB; b++) _mm256_storeu_ps(acc + (size_t)g * d + i0 + 8 * b, a[g][b]);
}

/* scores of R rows' G heads each (row r's head g at qv + (r * G + g) * d) against keys offs[0 ..),
 * row r's first nb[r] * 8 keys, into sc[(r * G + g) * ns + ..]: keys in tiles of 4 (outer: each
 * tile's K rows come into L1 once for the R rows), heads in tiles of 3 (then 2 or 1). m: the
 * keys of the longest row (prefetched). Each score is qk_tile_avx2's whatever R. */
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void qk_rows_avx2(
    const float *qv, int R, int G, int d, const void *k, const void *v, const size_t *offs,
    const int *nb, int m, int kdt, float *sc, size_t ns) {
    size_t row_bytes = (size_t)d * (kdt ? 2 : 4);
    int jmax = 0;
    for (int r = 0; r < R; r++) jmax = nb[r] * 8 > jmax ? nb[r] * 8 : jmax;
    for (int r = 0; r < KV_PREFETCH && r < m; r++) /* the chunk's first keys */
        for (size_t c = 0; c < row_bytes; c += 64) {
            _mm_prefetch((const char *)k + offs[r] * (kdt ? 2 : 4) + c, _MM_HINT_T0);
            _mm_prefetch((const char *)v + offs[r] * (kdt ? 2 : 4) + c, _MM_HINT_T1);
        }
    for (int j = 0; j < jmax; j += 4) {
        /* the K and V rows KV_PREFETCH keys ahead, requested now: the page walk defeats the
         * hardware prefetcher at each page boundary and the rows are 1 / KVH of each slot */
        for (int r = j + KV_PREFETCH; r < j + KV_PREFETCH + 4 && r < m; r++)
            for (size_t c = 0; c < row_bytes; c += 64) {
                _mm_prefetch((const char *)k + offs[r] * (kdt ? 2 : 4) + c, _MM_HINT_T0);
                _mm_prefetch((const char *)v + offs[r] * (kdt ? 2 : 4) + c, _MM_HINT_T1);
            }
        for (int r = 0; r < R; r++) {
            if (j >= nb[r] * 8) continue;
            const float *q = qv + (size_t)r * G * d;
            float *s = sc + (size_t)r * G * ns + j;
            int g = 0;
            for (; g + 3 <= G; g += 3) qk_tile_avx2(q + (size_t)g * d, 3, d, k, offs + j, kdt, s + g * ns, ns);
            if (G - g == 2) qk_tile_avx2(q + (size_t)g * d, 2, d, k, offs + j, kdt, s + g * ns, ns);
            if (G - g == 1) qk_tile_avx2(q + (size_t)g * d, 1, d, k, offs + j, kdt, s + g * ns, ns);
        }
    }
}

/* row r's acc (G x d, at acc + r * as) += its weights (G x n[r], stride ns, at sc + r * G * ns)
 * times V rows offs[0 .. n[r]), d % 8 == 0: keys in blocks of 8 (outer: each block's V rows come
 * into L1 once for the R rows), heads in tiles of 3 (then 2 or 1), head dims in tiles of 32
 * (then 8); each element's sum the same FMA chain in key order whatever R and the block size */
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void pv_rows_avx2(
    float *acc, size_t as, int R, int G, int d, const float *sc, size_t ns, const void *v,
    const size_t *offs, const int *n, int m, int kdt) {
    for (int j = 0; j < m; j += 8)
        for (int r = 0; r < R; r++) {
            if (j >= n[r]) continue;
            int nk = n[r] - j < 8 ? n[r] - j : 8;
            for (int g = 0; g < G; g += 3) {
                float *ag = acc + (size_t)r * as + (size_t)g * d;
                const float *pg = sc + ((size_t)r * G + g) * ns + j;
                int i = 0;
                if (G - g >= 3) {
                    for (; i + 32 <= d; i += 32) pv_tile_avx2(ag, 3, 4, d, i, pg, ns, v, offs + j, nk, kdt);
                    for (; i < d; i += 8) pv_tile_avx2(ag, 3, 1, d, i, pg, ns, v, offs + j, nk, kdt);
                } else if (G - g == 2) {
                    for (; i + 32 <= d; i += 32) pv_tile_avx2(ag, 2, 4, d, i, pg, ns, v, offs + j, nk, kdt);
                    for (; i < d; i += 8) pv_tile_avx2(ag, 2, 1, d, i, pg, ns, v, offs + j, nk, kdt);
                } else {
                    for (; i + 32 <= d; i += 32) pv_tile_avx2(ag, 1, 4, d, i, pg, ns, v, offs + j, nk, kdt);
                    for (; i < d; i += 8) pv_tile_avx2(ag, 1, 1, d, i, pg, ns, v, offs + j, nk, kdt);
                }
            }
        }
}

/* pv_tile_avx2 over 16 head dims per register: i in i0 .. i0 + 16 * IB (IB <= 4). Each element's
 * sum is the same chain of FMAs in key order, so the floats are pv_tile_avx2's. */
__attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static inline void pv_tile_avx512(
    float *acc, int GN, int IB, int d, int i0, const float *p, size_t n, const void *v,
    const size_t *offs, int nk, int kdt) {
    __m512 a[3][4], pv[3];
    for (int g = 0; g < GN; g++)
        for (int b = 0; b < IB; b++) a[g][b] = _mm512_loadu_ps(acc + (size_t)g * d + i0 + 16 * b);
    for (int r = 0; r < nk; r++) {
        for (int g = 0; g < GN; g++) pv[g] = _mm512_set1_ps(p[(size_t)g * n + r]);
        for (int b = 0; b < IB; b++) {
            __m512 vv = sg_load16(v, offs[r] + i0 + 16 * b, kdt);
            for (int g = 0; g < GN; g++) a[g][b] = _mm512_fmadd_ps(pv[g], vv, a[g][b]);
        }
    }
    for (int g = 0; g < GN; g++)
        for (int b = 0; b < IB; b++) _mm512_storeu_ps(acc + (size_t)g * d + i0 + 16 * b, a[g][b]);
}

#define PV_KEYS_512 16 /* keys per block of pv_rows_avx512 */

/* pv_rows_avx2 for d % 16 == 0 on AVX-512: keys in blocks of PV_KEYS_512, head dims in tiles of
 * 64 (then 16); the same floats */
__attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static inline void pv_rows_avx512(
    float *acc, size_t as, int R, int G, int d, const float *sc, size_t ns, const void *v,
    const size_t *offs, const int *n, int m, int kdt) {
    for (int j = 0; j < m; j += PV_KEYS_512)
        for (int r = 0; r < R; r++) {
            if (j >= n[r]) continue;
            int nk = n[r] - j < PV_KEYS_512 ? n[r] - j : PV_KEYS_512;
            for (int g = 0; g < G; g += 3) {
                float *ag = acc + (size_t)r * as + (size_t)g * d;
                const float *pg = sc + ((size_t)r * G + g) * ns + j;
                int i = 0;
                if (G - g >= 3) {
                    for (; i + 64 <= d; i += 64) pv_tile_avx512(ag, 3, 4, d, i, pg, ns, v, offs + j, nk, kdt);
                    for (; i < d; i += 16) pv_tile_avx512(ag, 3, 1, d, i, pg, ns, v, offs + j, nk, kdt);
                } else if (G - g == 2) {
                    for (; i + 64 <= d; i += 64) pv_tile_avx512(ag, 2, 4, d, i, pg, ns, v, offs + j, nk, kdt);
                    for (; i < d; i += 16) pv_tile_avx512(ag, 2, 1, d, i, pg, ns, v, offs + j, nk, kdt);
                } else {
                    for (; i + 64 <= d; i += 64) pv_tile_avx512(ag, 1, 4, d, i, pg, ns, v, offs + j, nk, kdt);
                    for (; i < d; i += 16) pv_tile_avx512(ag, 1, 1, d, i, pg, ns, v, offs + j, nk, kdt);
                }
            }
        }
}

/* 8 key values at k[off .. off + 8) in both halves of a register (a load, no shuffle for fp32) */
__attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static inline __m512 sg_load8x2(
    const void *k, size_t off, int kdt) {
    if (kdt == 2)
        return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)((const uint16_t *)k + off))));
    if (kdt) {
        __m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)((const uint16_t *)k + off)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps((const float *)k + off))));
}

/* qk_tile_avx2's sums for two query vectors per register: lanes 0..7 one vector's 8 lanes along
 * d, lanes 8..15 the next one's (qp: PN (<= 3) pairs, pair p's d / 8 steps of 16 floats at
 * qp + p * 2 * d), against 8 keys offs[0 .. 8) (each key's 8 values broadcast to both halves):
 * every lane the same FMA chain as in qk_tile_avx2, then per half the same pairwise sums
 * (hadd's, emulated within each 128-bit lane by two shuffles and an add; low + high 128 bits).
 * Writes vector x's scores (x = 2 * p (+1)) to sc + x * ns where want[x]. */
__attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static inline void qk_pairs_avx512(
    const float *qp, int PN, int d, const void *k, const size_t *offs, int kdt, float *sc,
    size_t ns, const unsigned char *want) {
    __m512 a[3][8], qv[3];
    for (int p = 0; p < PN; p++)
        for (int r = 0; r < 8; r++) a[p][r] = _mm512_setzero_ps();
    for (int i = 0; i < d; i += 8) {
        for (int p = 0; p < PN; p++) qv[p] = _mm512_loadu_ps(qp + (size_t)p * 2 * d + 2 * i);
        for (int r = 0; r < 8; r++) {
            __m512 kv = sg_load8x2(k, offs[r] + i, kdt);
            for (int p = 0; p < PN; p++) a[p][r] = _mm512_fmadd_ps(qv[p], kv, a[p][r]);
        }
    }
#define SG_HADD512(x, y) _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xDD))
    for (int p = 0; p < PN; p++)
        for (int h = 0; h < 8; h += 4) {
            __m512 u = SG_HADD512(SG_HADD512(a[p][h], a[p][h + 1]), SG_HADD512(a[p][h + 2], a[p][h + 3]));
            u = _mm512_add_ps(u, _mm512_shuffle_f32x4(u, u, 0xB1)); /* 128-bit lanes 0 + 1, 2 + 3 */
            if (want[2 * p]) _mm_storeu_ps(sc + (size_t)2 * p * ns + h, _mm512_castps512_ps128(u));
            if (want[2 * p + 1])
                _mm_storeu_ps(sc + (size_t)(2 * p + 1) * ns + h, _mm512_extractf32x4_ps(u, 2));
        }
#undef SG_HADD512
}

/* qk_rows_avx2 on AVX-512 (the same floats): the R * G query vectors in pairs (qp: pair p at
 * qp + p * 2 * d, as qk_pairs_avx512 reads them; V = R * G vectors, an odd last one paired with a
 * copy of itself), pairs in tiles of 3, keys in tiles of 8 */
__attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static inline void qk_rows_avx512(
    const float *qp, int R, int G, int d, const void *k, const void *v, const size_t *offs,
    const int *nb, int m, int kdt, float *sc, size_t ns) {
    size_t row_bytes = (size_t)d * (kdt ? 2 : 4);
    int V = R * G, P = (V + 1) / 2, jmax = 0;
    unsigned char want[ROW_VECS + 2];
    for (int r = 0; r < R; r++) jmax = nb[r] * 8 > jmax ? nb[r] * 8 : jmax;
    for (int r = 0; r < KV_PREFETCH && r < m; r++) /* the chunk's first keys */
        for (size_t c = 0; c < row_bytes; c += 64) {
            _mm_prefetch((const char *)k + offs[r] * (kdt ? 2 : 4) + c, _MM_HINT_T0);
            _mm_prefetch((const char *)v + offs[r] * (kdt ? 2 : 4) + c, _MM_HINT_T1);
        }
    for (int j = 0; j < jmax; j += 8) {
        for (int r = j + KV_PREFETCH; r < j + KV_PREFETCH + 8 && r < m; r++)
            for (size_t c = 0; c < row_bytes; c += 64) {
                _mm_prefetch((const char *)k + offs[r] * (kdt ? 2 : 4) + c, _MM_HINT_T0);
                _mm_prefetch((const char *)v + offs[r] * (kdt ? 2 : 4) + c, _MM_HINT_T1);
            }
        for (int x = 0; x < 2 * P; x++) want[x] = x < V && j < nb[x / G] * 8;
        for (int p = 0; p < P; p += 3) {
            int pn = P - p < 3 ? P - p : 3, any = 0;
            for (int x = 2 * p; x < 2 * (p + pn); x++) any |= want[x];
            if (!any) continue;
            const float *q = qp + (size_t)p * 2 * d;
            float *s = sc + (size_t)2 * p * ns + j;
            if (pn == 3) qk_pairs_avx512(q, 3, d, k, offs + j, kdt, s, ns, want + 2 * p);
            else if (pn == 2) qk_pairs_avx512(q, 2, d, k, offs + j, kdt, s, ns, want + 2 * p);
            else qk_pairs_avx512(q, 1, d, k, offs + j, kdt, s, ns, want + 2 * p);
        }
    }
}

/* the AVX2 and AVX-512 passes of attend_rows, specialised for the cache dtype */
__attribute__((target("avx2,fma,f16c"))) static void qk_rows_f32(const float *qv, int R, int G, int d, const void *k, const void *v, const size_t *offs, const int *nb, int m, float *sc, size_t ns) { qk_rows_avx2(qv, R, G, d, k, v, offs, nb, m, 0, sc, ns); }
__attribute__((target("avx2,fma,f16c"))) static void qk_rows_bf16(const float *qv, int R, int G, int d, const void *k, const void *v, const size_t *offs, const int *nb, int m, float *sc, size_t ns) { qk_rows_avx2(qv, R, G, d, k, v, offs, nb, m, 1, sc, ns); }
__attribute__((target("avx2,fma,f16c"))) static void qk_rows_f16(const float *qv, int R, int G, int d, const void *k, const void *v, const size_t *offs, const int *nb, int m, float *sc, size_t ns) { qk_rows_avx2(qv, R, G, d, k, v, offs, nb, m, 2, sc, ns); }
__attribute__((target("avx512f,avx2,fma,f16c"))) static void qk_rows512_f32(const float *qp, int R, int G, int d, const void *k, const void *v, const size_t *offs, const int *nb, int m, float *sc, size_t ns) { qk_rows_avx512(qp, R, G, d, k, v, offs, nb, m, 0, sc, ns); }
__attribute__((target("avx512f,avx2,fma,f16c"))) static void qk_rows512_bf16(const float *qp, int R, int G, int d, const void *k, const void *v, const size_t *offs, const int *nb, int m, float *sc, size_t ns) { qk_rows_avx512(qp, R, G, d, k, v, offs, nb, m, 1, sc, ns); }
__attribute__((target("avx512f,avx2,fma,f16c"))) static void qk_rows512_f16(const float *qp, int R, int G, int d, const void *k, const void *v, const size_t *offs, const int *nb, int m, float *sc, size_t ns) { qk_rows_avx512(qp, R, G, d, k, v, offs, nb, m, 2, sc, ns); }
__attribute__((target("avx2,fma,f16c"))) static void pv_rows_f32(float *acc, size_t as, int R, int G, int d, const float *sc, size_t ns, const void *v, const size_t *offs, const int *n, int m) { pv_rows_avx2(acc, as, R, G, d, sc, ns, v, offs, n, m, 0); }
__attribute__((target("avx2,fma,f16c"))) static void pv_rows_bf16(float *acc, size_t as, int R, int G, int d, const float *sc, size_t ns, const void *v, const size_t *offs, const int *n, int m) { pv_rows_avx2(acc, as, R, G, d, sc, ns, v, offs, n, m, 1); }
__attribute__((target("avx2,fma,f16c"))) static void pv_rows_f16(float *acc, size_t as, int R, int G, int d, const float *sc, size_t ns, const void *v, const size_t *offs, const int *n, int m) { pv_rows_avx2(acc, as, R, G, d, sc, ns, v, offs, n, m, 2); }
__attribute__((target("avx512f,avx2,fma,f16c"))) static void pv_rows512_f32(float *acc, size_t as, int R, int G, int d, const float *sc, size_t ns, const void *v, const size_t *offs, const int *n, int m) { pv_rows_avx512(acc, as, R, G, d, sc, ns, v, offs, n, m, 0); }
__attribute__((target("avx512f,avx2,fma,f16c"))) static void pv_rows512_bf16(float *acc, size_t as, int R, int G, int d, const float *sc, size_t ns, const void *v, const size_t *offs, const int *n, int m) { pv_rows_avx512(acc, as, R, G, d, sc, ns, v, offs, n, m, 1); }
__attribute__((target("avx512f,avx2,fma,f16c"))) static void pv_rows512_f16(float *acc, size_t as, int R, int G, int d, const float *sc, size_t ns, const void *v, const size_t *offs, const int *n, int m) { pv_rows_avx512(acc, as, R, G, d, sc, ns, v, offs, n, m, 2); }
#endif

/* a thread's scratch for attend_rows: one chunk's scores, scaled queries and partials of a tile's
 * rows, the shared K/V offsets and each row's own */
struct attn_scratch {
    float sc[KEY_CHUNK * ROW_VECS];
    float qv[ROW_VECS * MAX_HEAD_DIM];
    float qp[(ROW_VECS + 1) * MAX_HEAD_DIM]; /* qv in pairs (qk_rows_avx512) */
    float q1[(MAX_GROUP + 1) * MAX_HEAD_DIM]; /* one row's qv in pairs */
    float acc[ROW_VECS * MAX_HEAD_DIM];
    size_t offs[KEY_CHUNK];
    size_t own[KEY_CHUNK * ROW_VECS]; /* row r's keys past the shared ones at own + r * KEY_CHUNK */
};

#if SG_X86
/* y[i] = x[i] * a, i < n, fp32, 8 lanes at a time */
__attribute__((target("avx2,fma"))) static void scale_f32_avx2(float *y, const float *x, float a,
                                                              int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
    for (; i < n; i++) y[i] = x[i] * a;
}

/* o[i] += w * p[i] (the product rounded, then the sum: no multiply-add), i < n, 8 lanes */
__attribute__((target("avx2,fma"))) static void add_scaled_f32_avx2(float *o, float w,
                                                                   const float *p, int n) {
    __m256 vw = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_loadu_ps(o + i),
                                              _mm256_mul_ps(vw, _mm256_loadu_ps(p + i))));
    for (; i < n; i++) o[i] += w * p[i];
}

/* y[i] = o[i] / den, i < n, fp32, 8 lanes at a time */
__attribute__((target("avx2,fma"))) static void div_f32_avx2(float *y, const float *o, float den,
                                                            int n) {
    __m256 vd = _mm256_set1_ps(den);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_div_ps(_mm256_loadu_ps(o + i), vd));
    for (; i < n; i++) y[i] = o[i] / den;
}
#endif

/* keys lo .. lo + n - 1 whose page is the same in every row's page table (pages[r]), n at most
 * every row's own count (n[r]); all of them when the rows share one page table */
static inline int attn_shared_keys(const int64_t *const *pages, int R, int ps, int lo,
                                   const int *n, int nmax) {
    int same = 1, nmin = nmax;
    for (int r = 1; r < R; r++) same &= pages[r] == pages[0];
    if (same) return nmax;
    for (int r = 0; r < R; r++) nmin = n[r] < nmin ? n[r] : nmin;
    int k = 0;
    while (k < nmin) {
        int p = (lo + k) / ps;
        for (int r = 1; r < R; r++)
            if (pages[r][p] != pages[0][p]) return k;
        k = (p + 1) * ps - lo;
    }
    return nmin;
}

/* Partial attention of R query rows (row r's queries at q + qoff[r], over the page table pages[r]:
 * tokens of one sequence, or of sequences whose tables agree on leading pages), G heads each (all
 * on KV head kvh, R * G <= ROW_VECS), over key positions lo .. hi[r] of one chunk (lo <= hi[r] <
 * lo + KEY_CHUNK): each K/V vector is loaded once for the G heads, and each tile of the keys whose
 * page all rows share into L1 once for the R rows; then each row's own keys on their own. Writes,
 * per row r and head g, the chunk's max score part[r][g], its sum of exp(score - max)
 * part[r][G + g], and the unnormalised part[r][2 * G + g * d .. +d) = sum exp(score - max) v
 * (flash-decoding's split-K partials, Dao et al. 2023). Every row's arithmetic is the one it has
 * alone (R = 1): its own keys in order, the same summation orders (each score on its own, each
 * weighted sum one FMA chain in key order through acc); only the loop order across rows changes.
 * ws: the calling thread's scratch. */
static void attend_rows(const void *q, const size_t *qoff, int R, int G, const void *kc,
                        const void *vc, const int64_t *const *pages, int ps, int KVH, int kvh,
                        int d, int lo, const int *hi, float scale, struct attn_scratch *ws,
                        float *const *part, int dt, int kdt) {
    float *qv = ws->qv, *sc = ws->sc, *acc = ws->acc;
    size_t *offs = ws->offs, *own = ws->own, as = (size_t)G * d;
    ptrdiff_t st = R > 1 ? part[1] - part[0] : 0;
    int direct = st >= 0; /* rows' partials equally spaced (one row, a prefill tile): acc in place */
    for (int r = 2; r < R; r++) direct &= part[r] - part[0] == r * st;
    if (direct) acc = part[0] + 2 * G, as = R > 1 ? (size_t)st : as;
    int n[ROW_VECS], nb[ROW_VECS], j0[ROW_VECS], nmax = 0;
    for (int r = 0; r < R; r++) {
        n[r] = hi[r] - lo + 1, j0[r] = 0;
        nmax = n[r] > nmax ? n[r] : nmax;
#if SG_X86
        if (!dt && sg_use_avx2()) {
            scale_f32_avx2(qv + (size_t)r * G * d, (const float *)q + qoff[r], scale, G * d);
            continue;
        }
#endif
        for (int g = 0; g < G; g++)
            for (int i = 0; i < d; i++)
                qv[((size_t)r * G + g) * d + i] = sg_ld(q, qoff[r] + (size_t)g * d + i, dt) * scale;
    }
    size_t ns = (size_t)nmax; /* score stride of a (row, head) */
    /* keys 0 .. S - 1 of the chunk through the shared offsets (the vector passes: 0 .. Sv - 1,
     * whole tiles of 8 unless all), the rest through each row's own */
    int S = attn_shared_keys(pages, R, ps, lo, n, nmax), Sv = S == nmax ? S : S / 8 * 8;
    int ns_[ROW_VECS], nbs[ROW_VECS];
    if (S) kv_offs(offs, pages[0], ps, KVH, kvh, d, lo, lo + S - 1);
    for (int r = 0; r < R; r++) {
        if (n[r] > Sv) kv_offs(own + (size_t)r * KEY_CHUNK, pages[r], ps, KVH, kvh, d, lo + Sv, lo + n[r] - 1);
        ns_[r] = n[r] < Sv ? n[r] : Sv;
    }
#define ROW_OFF(r, j) ((j) < Sv ? offs[j] : own[(size_t)(r) * KEY_CHUNK + (j) - Sv])
#if SG_X86
    int vec = sg_use_avx2() && d % 8 == 0;
    if (vec) {
        for (int r = 0; r < R; r++) {
            nb[r] = n[r] / 8, j0[r] = n[r] / 8 * 8;
            nbs[r] = (nb[r] * 8 < Sv ? nb[r] * 8 : Sv) / 8;
        }
        if (sg_use_avx512()) {
            int V = R * G;
            float *qp = ws->qp;
            for (int x = 0; x < V + (V & 1); x++) { /* an odd last vector paired with itself */
                const float *src = qv + (size_t)(x < V ? x : V - 1) * d;
                float *dst = qp + (size_t)(x / 2) * 2 * d + (x & 1) * 8;
                for (int i = 0; i < d; i += 8) memcpy(dst + 2 * i, src + i, 8 * sizeof(float));
            }
            if (Sv) (kdt == 2 ? qk_rows512_f16 : kdt ? qk_rows512_bf16 : qk_rows512_f32)(qp, R, G, d, kc, vc, offs, nbs, Sv, sc, ns);
            for (int r = 0; r < R; r++) {
                if (nb[r] * 8 <= Sv) continue;
                float *q1 = ws->q1;
                int nb1 = nb[r] - Sv / 8;
                for (int x = 0; x < G + (G & 1); x++) { /* row r's vectors, paired among themselves */
                    const float *src = qv + ((size_t)r * G + (x < G ? x : G - 1)) * d;
                    float *dst = q1 + (size_t)(x / 2) * 2 * d + (x & 1) * 8;
                    for (int i = 0; i < d; i += 8) memcpy(dst + 2 * i, src + i, 8 * sizeof(float));
                }
                (kdt == 2 ? qk_rows512_f16 : kdt ? qk_rows512_bf16 : qk_rows512_f32)(q1, 1, G, d, kc, vc, own + (size_t)r * KEY_CHUNK, &nb1, n[r] - Sv, sc + (size_t)r * G * ns + Sv, ns);
            }
        } else {
            if (Sv) (kdt == 2 ? qk_rows_f16 : kdt ? qk_rows_bf16 : qk_rows_f32)(qv, R, G, d, kc, vc, offs, nbs, Sv, sc, ns);
            for (int r = 0; r < R; r++) {
                if (nb[r] * 8 <= Sv) continue;
                int nb1 = nb[r] - Sv / 8;
                (kdt == 2 ? qk_rows_f16 : kdt ? qk_rows_bf16 : qk_rows_f32)(qv + (size_t)r * G * d, 1, G, d, kc, vc, own + (size_t)r * KEY_CHUNK, &nb1, n[r] - Sv, sc + (size_t)r * G * ns + Sv, ns);
            }
        }
    }
#endif
    for (int r = 0; r < R; r++)
        for (int j = j0[r]; j < n[r]; j++)
            for (int g = 0; g < G; g++) {
                size_t rg = (size_t)r * G + g;
                sc[rg * ns + j] = sg_dot(qv + rg * d, kc, ROW_OFF(r, j), d, kdt);
            }
    for (int r = 0; r < R; r++) {
        for (int g = 0; g < G; g++) {
            float *row = sc + ((size_t)r * G + g) * ns, mx = sg_max(row, n[r]);
            part[r][g] = mx;
            part[r][G + g] = sg_exp_sub_sum(row, n[r], mx);
        }
        memset(acc + r * as, 0, sizeof(float) * G * d);
    }
    int done = 0;
#if SG_X86
    if (vec) {
        int w512 = d % 16 == 0 && sg_use_avx512();
        if (Sv) (w512 ? (kdt == 2 ? pv_rows512_f16 : kdt ? pv_rows512_bf16 : pv_rows512_f32) : (kdt == 2 ? pv_rows_f16 : kdt ? pv_rows_bf16 : pv_rows_f32))(acc, as, R, G, d, sc, ns, vc, offs, ns_, Sv);
        for (int r = 0; r < R; r++) {
            if (n[r] <= Sv) continue;
            int n1 = n[r] - Sv; /* the same FMA chains, continued through acc */
            (w512 ? (kdt == 2 ? pv_rows512_f16 : kdt ? pv_rows512_bf16 : pv_rows512_f32) : (kdt == 2 ? pv_rows_f16 : kdt ? pv_rows_bf16 : pv_rows_f32))(acc + r * as, as, 1, G, d, sc + (size_t)r * G * ns + Sv, ns, vc, own + (size_t)r * KEY_CHUNK, &n1, n1);
        }
        done = 1;
    }
#endif
    if (!done)
        for (int r = 0; r < R; r++)
            for (int j = 0; j < n[r]; j++)
                for (int g = 0; g < G; g++) {
                    size_t rg = (size_t)r * G + g;
                    sg_axpy(acc + r * as + (size_t)g * d, sc[rg * ns + j], vc, ROW_OFF(r, j), d, kdt);
                }
#undef ROW_OFF
    if (!direct)
        for (int r = 0; r < R; r++) memcpy(part[r] + 2 * G, acc + r * as, sizeof(float) * G * d);
}


/* query heads per work item: one KV head's group, or 1 when the group is over MAX_GROUP */
static inline int attn_heads_per_item(int H, int KVH) {
    return H / KVH <= MAX_GROUP ? H / KVH : 1;
}

/* The work items of a call, in (token, head group, key chunk) order: first[t] is token t's first
 * item, first[T] the count (first: T + 1 longs). Returns the work (keys x heads x head_dim). */
static long attn_items(long *first, const int64_t *pos, int T, int H, int KVH, int d, int window) {
    int per_token = H / attn_heads_per_item(H, KVH);
    long work = 0;
    first[0] = 0;
    for (int t = 0; t < T; t++) {
        int hi = (int)pos[t], lo = window > 0 && hi - window + 1 > 0 ? hi - window + 1 : 0;
        first[t + 1] = first[t] + (long)per_token * ((hi - lo) / KEY_CHUNK + 1);
        work += (long)(hi - lo + 1) * H * d;
    }
    return work;
}

/* floats of partial results per work item: m[G], l[G], acc[G * d] */
static inline size_t attn_item_floats(int H, int KVH, int d) {
    return (size_t)attn_heads_per_item(H, KVH) * (d + 2);
}

/* first key of token t (window: keys hi - window + 1 .. hi) */
static inline int attn_lo(const int64_t *pos, int t, int window) {
    int hi = (int)pos[t];
    return window > 0 && hi - window + 1 > 0 ? hi - window + 1 : 0;
}

/* The tiles of rows of a call (attend_rows): runs of up to ROW_VECS / G consecutive tokens with
 * the same first key, each of the run's sequence or of one whose page table has the run's first
 * page there (a prefill chunk's tokens in tiles of 8 for groups of 3 heads; decode rows of
 * sequences behind one cached prefix); tile[i] is tile i's first token, tile[n] = T, and its work
 * units (head group, key chunk of its longest row) are ufirst[i] .. ufirst[i + 1). tile, ufirst:
 * T + 1 longs each. Returns the tile count n. */
static long attn_tiles(long *tile, long *ufirst, const long *first, const int64_t *seq,
                       const int64_t *pos, const int64_t *pt, long pt_stride, int ps, int T,
                       int H, int KVH, int window) {
    int G = attn_heads_per_item(H, KVH), rmax = ROW_VECS / G;
    long nt = 0;
    ufirst[0] = 0;
    for (int t = 0; t < T;) {
        int u = t + 1, lo = attn_lo(pos, t, window);
        long items = first[t + 1] - first[t];
        int64_t page = pt[(size_t)seq[t] * pt_stride + lo / ps];
        while (u < T && u - t < rmax && attn_lo(pos, u, window) == lo &&
               (seq[u] == seq[t] || pt[(size_t)seq[u] * pt_stride + lo / ps] == page)) {
            if (first[u + 1] - first[u] > items) items = first[u + 1] - first[u];
            u++;
        }
        tile[nt] = t;
        ufirst[nt + 1] = ufirst[nt] + items;
        nt++;
        t = u;
    }
    tile[nt] = T;
    return nt;
}

/* Merge the nc chunks' partials (from item base) of token tt, head group hg into out (fp32: the
 * weighted sums and the division 8 lanes at a time, the scalar code's operations) */
static void attn_merge(const float *part, size_t stride, long base, long nc, int G, int H, int d,
                       int tt, int hg, void *out, int dt) {
    for (int g = 0; g < G; g++) {
        float mx = -INFINITY, den = 0.f, o[MAX_HEAD_DIM];
        for (long c = 0; c < nc; c++) {
            float mc = part[stride * (size_t)(base + c) + g];
            mx = mc > mx ? mc : mx;
        }
        memset(o, 0, sizeof(float) * d);
        for (long c = 0; c < nc; c++) {
            const float *pc = part + stride * (size_t)(base + c);
            float w = expf(pc[g] - mx);
            den += w * pc[G + g];
#if SG_X86
            if (sg_use_avx2()) {
                add_scaled_f32_avx2(o, w, pc + 2 * G + (size_t)g * d, d);
                continue;
            }
#endif
            for (int i = 0; i < d; i++) o[i] += w * pc[2 * G + g * d + i];
        }
        size_t ooff = ((size_t)tt * H + (size_t)hg * G + g) * d;
#if SG_X86
        if (!dt && sg_use_avx2()) {
            div_f32_avx2((float *)out + ooff, o, den, d);
            continue;
        }
#endif
        for (int i = 0; i < d; i++) sg_st(out, ooff + i, o[i] / den, dt);
    }
}

/* true when some (token, head group) spans several key chunks: paged_attention_merge has work */
static inline int attn_needs_merge(const long *first, int T, int H, int KVH) {
    return first[T] != (long)T * (H / attn_heads_per_item(H, KVH));
}

/* This thread's attend_rows scratch. Out of line on purpose: with the thread-local's address
 * taken inside paged_attention_tiles, the compiler re-derived it (a __tls_get_addr call in a
 * dlopen'd module) at each of its ~40 uses in the inlined item loop instead of keeping it. */
__attribute__((noinline)) static struct attn_scratch *attn_scratch_of_thread(void) {
    static __thread struct attn_scratch scratch;
    return &scratch;
}

/* The work units of the tiles (attn_tiles; NULL: each token its own tile, ufirst = first) shared
 * dynamically among the team, without a barrier at the end: a unit is a tile's (head group, key
 * chunk), its rows' partials written to their items of ``first`` (attn_items); a (token, head
 * group) of one chunk is merged into out by the unit's thread, the others (attn_needs_merge) by
 * paged_attention_merge after a barrier. part: attn_item_floats x first[T] floats, shared by the
 * team. */
static void paged_attention_tiles(const void *q, long qs, const void *kc, const void *vc,
                                  const int64_t *pt, long pt_stride, const int64_t *seq,
                                  const int64_t *pos, int ps, int T, int H, int KVH, int d,
                                  float scale, int window, void *out, int dt, int kdt,
                                  const long *first, const long *tile, const long *ufirst,
                                  long ntiles, float *part) {
    struct attn_scratch *ws = attn_scratch_of_thread(); /* one TLS lookup per call */
    int group = H / KVH, G = attn_heads_per_item(H, KVH), per_token = H / G;
    if (!tile) ufirst = first, ntiles = T;
    long units = ufirst[ntiles];
    size_t stride = attn_item_floats(H, KVH, d);
    long i = 0;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
    for (long u = 0; u < units; u++) {
        SG_ITEM_HOOK();
        while (u >= ufirst[i + 1]) i++;
        while (u < ufirst[i]) i--;
        int t = tile ? (int)tile[i] : (int)i, R = tile ? (int)(tile[i + 1] - tile[i]) : 1;
        int lo = attn_lo(pos, t, window), hi[ROW_VECS], row[ROW_VECS], nr = 0;
        long ncmax = (ufirst[i + 1] - ufirst[i]) / per_token, k = u - ufirst[i];
        int hg = (int)(k / ncmax), c = (int)(k % ncmax), c_lo = lo + c * KEY_CHUNK;
        size_t qoff[ROW_VECS];
        const int64_t *pages[ROW_VECS];
        float *pr[ROW_VECS];
        for (int r = 0; r < R; r++) { /* the tile's rows with a key chunk c */
            long nc = (first[t + r + 1] - first[t + r]) / per_token;
            if (c >= nc) continue;
            int h = (int)pos[t + r];
            hi[nr] = c_lo + KEY_CHUNK - 1 < h ? c_lo + KEY_CHUNK - 1 : h;
            qoff[nr] = (size_t)(t + r) * qs + (size_t)hg * G * d;
            pages[nr] = pt + (size_t)seq[t + r] * pt_stride;
            pr[nr] = part + stride * (size_t)(first[t + r] + hg * nc + c);
            row[nr++] = t + r;
        }
        attend_rows(q, qoff, nr, G, kc, vc, pages, ps, KVH, hg * G / group, d, c_lo, hi, scale,
                    ws, pr, dt, kdt);
        for (int r = 0; r < nr; r++)
            if (first[row[r] + 1] - first[row[r]] == per_token)
                attn_merge(part, stride, first[row[r]] + hg, 1, G, H, d, row[r], hg, out, dt);
    }
}

/* The (token, head group)s of several chunks merged from the partials of paged_attention_tiles
 * (all written: after a barrier), shared among the team, without a barrier at the end. */
static void paged_attention_merge(int T, int H, int KVH, int d, void *out, int dt,
                                  const long *first, const float *part) {
    int G = attn_heads_per_item(H, KVH), per_token = H / G;
    size_t stride = attn_item_floats(H, KVH, d);
#ifdef _OPENMP
#pragma omp for schedule(static) nowait
#endif
    for (long th = 0; th < (long)T * per_token; th++) {
        int tt = (int)(th / per_token), hg = (int)(th % per_token);
        long nc = (first[tt + 1] - first[tt]) / per_token, base = first[tt] + (long)hg * nc;
        if (nc > 1) attn_merge(part, stride, base, nc, G, H, d, tt, hg, out, dt);
    }
}

static inline void paged_attention(const void *q, long qs, const void *kc, const void *vc,
                                   const int64_t *pt, long pt_stride, const int64_t *seq,
                                   const int64_t *pos, int ps, int T, int H, int KVH, int d,
                                   float scale, int window, void *out, int dt, int kdt,
                                   int threads) {
    long *first = (long *)malloc(sizeof(long) * 3 * ((size_t)T + 1));
    if (!first) return;
    long *tile = first + T + 1, *ufirst = tile + T + 1;
    long work = attn_items(first, pos, T, H, KVH, d, window);
    long ntiles = attn_tiles(tile, ufirst, first, seq, pos, pt, pt_stride, ps, T, H, KVH, window);
    float *part = (float *)malloc(sizeof(float) * attn_item_floats(H, KVH, d) * (size_t)first[T]);
    if (part) {
        (void)threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if (work >= PAR_MIN_WORK)
#endif
    {
        paged_attention_tiles(q, qs, kc, vc, pt, pt_stride, seq, pos, ps, T, H, KVH, d, scale,
                              window, out, dt, kdt, first, tile, ufirst, ntiles, part);
        if (attn_needs_merge(first, T, H, KVH)) {
#ifdef _OPENMP
#pragma omp barrier
#endif
            paged_attention_merge(T, H, KVH, d, out, dt, first, part);
        }
    }
    }
    free(part);
    free(first);
}

/* ------------------------------------------------------------------ silu_mul */
#define SILU_CHUNK 256 /* elements per work item (and per exp call) */

/* out[t, i0 .. i1) of silu_mul, i0 a multiple of 8: pieces of up to SILU_CHUNK through one exp
 * call each (each element takes the same exp path, vector or scalar tail, whatever the split) */
#if SG_X86
/* silu_mul_cols for fp32 rows g, u, out [n], n <= SILU_CHUNK: the same exp call, the other loops
 * 8 lanes at a time with the scalar loop's operations (negate; 1 + e, divide, product) */
__attribute__((target("avx2,fma"))) static void silu_mul_f32_avx2(const float *g, const float *u,
                                                                 float *out, int n) {
    float e[SILU_CHUNK];
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(e + i, _mm256_xor_ps(_mm256_loadu_ps(g + i), sign));
    for (; i < n; i++) e[i] = -g[i];
    sg_exp_inplace(e, n);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 den = _mm256_add_ps(one, _mm256_loadu_ps(e + i));
        __m256 s = _mm256_div_ps(_mm256_loadu_ps(g + i), den);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) out[i] = g[i] / (1.0f + e[i]) * u[i];
}
#endif

static inline void silu_mul_cols(const void *g_, long gs, const void *u, long us, void *out,
                                 long os, int t, int i0, int i1, int dt) {
    float g[SILU_CHUNK], e[SILU_CHUNK];
#if SG_X86
    if (!dt && sg_use_avx2()) {
        for (; i0 < i1; i0 += SILU_CHUNK)
            silu_mul_f32_avx2((const float *)g_ + (size_t)t * gs + i0,
                              (const float *)u + (size_t)t * us + i0,
                              (float *)out + (size_t)t * os + i0,
                              i1 - i0 < SILU_CHUNK ? i1 - i0 : SILU_CHUNK);
        return;
    }
#endif
    for (; i0 < i1; i0 += SILU_CHUNK) {
        int n = i1 - i0 < SILU_CHUNK ? i1 - i0 : SILU_CHUNK;
        for (int i = 0; i < n; i++) {
            g[i] = sg_ld(g_, (size_t)t * gs + i0 + i, dt);
            e[i] = -g[i];
        }
        sg_exp_inplace(e, n);
        for (int i = 0; i < n; i++) {
            float s = sg_round(g[i] / (1.0f + e[i]), dt);
            sg_st(out, (size_t)t * os + i0 + i, s * sg_ld(u, (size_t)t * us + i0 + i, dt), dt);
        }
    }
}

static void silu_mul_body(const void *g_, long gs, const void *u, long us, void *out, long os,
                          int T, int I, int dt) {
    int chunks = (I + SILU_CHUNK - 1) / SILU_CHUNK;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (long it = 0; it < (long)T * chunks; it++) { /* (token, chunk of SILU_CHUNK) */
        int t = (int)(it / chunks), i0 = (int)(it % chunks) * SILU_CHUNK;
        silu_mul_cols(g_, gs, u, us, out, os, t, i0, i0 + SILU_CHUNK < I ? i0 + SILU_CHUNK : I, dt);
    }
}

static inline void silu_mul(const void *g_, long gs, const void *u, long us, void *out, long os,
                            int T, int I, int dt, int threads) {
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if ((long)T * I >= PAR_MIN_WORK)
#endif
    silu_mul_body(g_, gs, u, us, out, os, T, I, dt);
}

#endif /* SG_CPUOPS_CORE_H */
