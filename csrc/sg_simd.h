/* Shared helpers of structgen's CPU kernels: bf16 <-> fp32, run-time ISA choice, and the
 * AVX2+FMA vector loops (dot product, axpy, exp) with portable scalar twins, and AVX-512F
 * twins of some that give the same bits.
 *
 * dt: 0 = fp32, 1 = bf16 (stored as uint16, the top half of an fp32; rounding to nearest
 * even, as torch's float -> bfloat16 conversion), 2 = IEEE fp16 (binary16, rounding to nearest
 * even as torch's float -> float16; KV caches only: sg_ld / sg_st / sg_round / sg_load8_kv and
 * the attention loops take it, the activation and weight loops do not).
 * exp: range reduction x = n ln2 + r, |r| <= ln2 / 2, then a degree-6 polynomial for e^r
 * (Cephes' expf coefficients), relative error ~2e-7 over [-87, 88]; inputs below -87 give 0.
 */
#ifndef SG_SIMD_H
#define SG_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SG_X86 1
#else
#define SG_X86 0
#endif

static int sg_isa_avx2 = -1; /* -1: not decided yet */

static inline int sg_use_avx2(void) {
    if (sg_isa_avx2 < 0) {
#if SG_X86
        __builtin_cpu_init();
        /* F16C (fp16 KV loads) comes with every AVX2 CPU; checked all the same */
        sg_isa_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
#else
        sg_isa_avx2 = 0;
#endif
    }
    return sg_isa_avx2;
}

static int sg_isa_avx512 = -1; /* -1: not decided yet */

/* AVX-512F, used where its loops give the AVX2 path's floats bit for bit (sg_exp16, the
 * attention's weighted sums): only with AVX2 in use */
static inline int sg_use_avx512(void) {
    if (sg_isa_avx512 < 0) {
#if SG_X86
        sg_isa_avx512 = sg_use_avx2() && __builtin_cpu_supports("avx512f");
#else
        sg_isa_avx512 = 0;
#endif
    }
    return sg_isa_avx512;
}

/* "scalar" forces the portable code (tests), "avx2" the AVX2 loops without AVX-512 (tests: the
 * AVX-512 loops give the same bits), "auto" goes back to detection; -1 if unknown */
static inline int sg_set_isa(const char *name) {
    if (strcmp(name, "scalar") == 0) {
        sg_isa_avx2 = sg_isa_avx512 = 0;
        return 0;
    }
    if (strcmp(name, "avx2") == 0) {
        sg_isa_avx2 = -1;
        sg_isa_avx512 = 0;
        return 0;
    }
    if (strcmp(name, "auto") == 0) {
        sg_isa_avx2 = sg_isa_avx512 = -1;
        return 0;
    }
    return -1;
}

static inline float sg_bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t sg_float_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40); /* quiet NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* IEEE binary16 -> fp32 (exact; subnormals normalised, inf / NaN kept) */
static inline float sg_f16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
    if (e == 0x1f)
        bits = sign | 0x7f800000u | (m << 13);
    else if (e)
        bits = sign | ((e + 112u) << 23) | (m << 13);
    else if (!m)
        bits = sign;
    else { /* m * 2^-24: shift the leading one up to bit 10 */
        uint32_t s = 0;
        while (!(m & 0x400u)) m <<= 1, s++;
        bits = sign | ((113u - s) << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* fp32 -> IEEE binary16, round to nearest even in integer arithmetic (no dependence on the FP
 * environment): overflow to inf from 65520, subnormals below 2^-14, NaN -> quiet NaN */
static inline uint16_t sg_float_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;
    if (ax >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 (the tie above 65504) */
    if (ax >= 0x38800000u) {                       /* >= 2^-14: normal; rebias 127 -> 15 */
        uint32_t r = ax - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return sign | (uint16_t)(r >> 13);
    }
    if (ax <= 0x33000000u) return sign; /* <= 2^-25 (the tie with 2^-24 goes to even 0) */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - (ax >> 23); /* 14 .. 24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | (uint16_t)q; /* q == 0x400 is the smallest normal, correctly encoded */
}

static inline float sg_ld(const void *p, size_t i, int dt) {
    if (dt == 2) return sg_f16_to_float(((const uint16_t *)p)[i]);
    return dt ? sg_bf16_to_float(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void sg_st(void *p, size_t i, float v, int dt) {
    if (dt == 2)
        ((uint16_t *)p)[i] = sg_float_to_f16(v);
    else if (dt)
        ((uint16_t *)p)[i] = sg_float_to_bf16(v);
    else
        ((float *)p)[i] = v;
}

/* v rounded to the storage dtype (identity for fp32) */
static inline float sg_round(float v, int dt) {
    if (dt == 2) return sg_f16_to_float(sg_float_to_f16(v));
    return dt ? sg_bf16_to_float(sg_float_to_bf16(v)) : v;
}

#if SG_X86
__attribute__((target("avx2,fma"))) static inline float sg_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 values at p[i..i+7] as fp32 (dt 0 or 1) */
__attribute__((target("avx2,fma"))) static inline __m256 sg_load8(const void *p, size_t i, int dt) {
    if (dt) {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    return _mm256_loadu_ps((const float *)p + i);
}

/* sg_load8 of a KV cache, fp16 (dt 2: F16C's exact widening) included; its callers carry the
 * f16c target too (a function apart, so that the weight loops keep plain avx2,fma) */
__attribute__((target("avx2,fma,f16c"))) static inline __m256 sg_load8_kv(const void *p, size_t i, int dt) {
    if (dt == 2) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return sg_load8(p, i, dt);
}

/* exp(x) on vectors: x clamped to [SG_EXP_LO, SG_EXP_HI], n = round(x * log2 e), r = x - n ln 2
 * (ln 2 in two parts), a degree-7 polynomial in r times 2^n; below SG_EXP_LO, 0. One set of
 * constants for sg_exp8 and sg_exp16, whose lanes must agree bit for bit. */
#define SG_EXP_HI 88.3762626647949f
#define SG_EXP_LO -87.3365447504f
#define SG_EXP_LOG2E 1.44269504088896341f
#define SG_EXP_LN2_HI 0.693359375f
#define SG_EXP_LN2_LO -2.12194440e-4f
#define SG_EXP_P0 1.9875691500e-4f
#define SG_EXP_P1 1.3981999507e-3f
#define SG_EXP_P2 8.3334519073e-3f
#define SG_EXP_P3 4.1665795894e-2f
#define SG_EXP_P4 1.6666665459e-1f
#define SG_EXP_P5 5.0000001201e-1f

__attribute__((target("avx2,fma"))) static inline __m256 sg_exp8(__m256 x) {
    const __m256 hi = _mm256_set1_ps(SG_EXP_HI), lo = _mm256_set1_ps(SG_EXP_LO);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(SG_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SG_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SG_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(SG_EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SG_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SG_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SG_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SG_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SG_EXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* sg_exp8 on 16 lanes: each lane's value the one sg_exp8 gives (the same operations in the
 * same order; roundscale with imm 8 is round_ps's nearest-even, maskz the andnot of the underflow
 * lanes) */
__attribute__((target("avx512f,avx2,fma"))) static inline __m512 sg_exp16(__m512 x) {
    const __m512 hi = _mm512_set1_ps(SG_EXP_HI), lo = _mm512_set1_ps(SG_EXP_LO);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(_mm512_min_ps(x, hi), lo);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(SG_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SG_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SG_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(SG_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SG_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SG_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SG_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SG_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SG_EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps((__mmask16)~under, p, _mm512_castsi512_ps(e));
}

/* 16 values at p[i..i+15] as fp32 (dt 2: fp16, AVX-512F's exact widening) */
__attribute__((target("avx512f,avx2,fma"))) static inline __m512 sg_load16(const void *p, size_t i, int dt) {
    if (dt == 2) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
    if (dt) {
        __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_loadu_ps((const float *)p + i);
}

__attribute__((target("avx2,fma,f16c"))) static float sg_dot_avx2(const float *q, const void *k, size_t off,
                                                            int d, int dt) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= d; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), sg_load8_kv(k, off + i, dt), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), sg_load8_kv(k, off + i + 8, dt), a1);
    }
    for (; i + 8 <= d; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), sg_load8_kv(k, off + i, dt), a0);
    float s = sg_hsum8(_mm256_add_ps(a0, a1));
    for (; i < d; i++) s += q[i] * sg_ld(k, off + i, dt);
    return s;
}

__attribute__((target("avx2,fma,f16c"))) static void sg_axpy_avx2(float *acc, float a, const void *v,
                                                            size_t off, int d, int dt) {
    __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= d; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(av, sg_load8_kv(v, off + i, dt), _mm256_loadu_ps(acc + i)));
    for (; i < d; i++) acc[i] += a * sg_ld(v, off + i, dt);
}

__attribute__((target("avx2,fma"))) static float sg_exp_sub_sum_avx2(float *x, int n, float m) {
    __m256 mv = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = sg_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    float s = sg_hsum8(sum);
    for (; i < n; i++) s += (x[i] = expf(x[i] - m));
    return s;
}

/* sg_exp_sub_sum_avx2 with 16 exps per instruction: the same values, and the same sum (each
 * 16 added to the 8-lane sum as its two halves in order, as the AVX2 loop adds them) */
__attribute__((target("avx512f,avx2,fma"))) static float sg_exp_sub_sum_avx512(float *x, int n, float m) {
    __m512 mv = _mm512_set1_ps(m);
    __m256 sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = sg_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
        _mm512_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
        sum = _mm256_add_ps(sum, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    }
    for (; i + 8 <= n; i += 8) {
        __m256 e = sg_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(m)));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    float s = sg_hsum8(sum);
    for (; i < n; i++) s += (x[i] = expf(x[i] - m));
    return s;
}

/* the largest of x[0 .. n), n >= 1 (NaNs skipped, as the scalar loop's x > m test does) */
__attribute__((target("avx2,fma"))) static float sg_max_avx2(const float *x, int n) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    int i = 0;
    for (; i + 16 <= n; i += 16) { /* max_ps(x, m) keeps m where x is NaN */
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    }
    for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    float t[8], m = -INFINITY;
    _mm256_storeu_ps(t, _mm256_max_ps(m0, m1));
    for (int l = 0; l < 8; l++) m = t[l] > m ? t[l] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

__attribute__((target("avx2,fma"))) static void sg_exp_inplace_avx2(float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, sg_exp8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) x[i] = expf(x[i]);
}
#endif

/* q[0..d) . k[off..off+d) (q fp32, k in dt) */
static inline float sg_dot(const float *q, const void *k, size_t off, int d, int dt) {
#if SG_X86
    if (sg_use_avx2()) return sg_dot_avx2(q, k, off, d, dt);
#endif
    float s = 0.f;
    for (int i = 0; i < d; i++) s += q[i] * sg_ld(k, off + i, dt);
    return s;
}

/* acc[0..d) += a * v[off..off+d) */
static inline void sg_axpy(float *acc, float a, const void *v, size_t off, int d, int dt) {
#if SG_X86
    if (sg_use_avx2()) {
        sg_axpy_avx2(acc, a, v, off, d, dt);
        return;
    }
#endif
    for (int i = 0; i < d; i++) acc[i] += a * sg_ld(v, off + i, dt);
}

/* max of x[0 .. n) (-inf for n = 0; NaNs skipped). Exact whatever the path: a max does not
 * round, so the lane order does not change it (up to the sign of a zero max, which no
 * exp(x - m) that follows can tell apart) */
static inline float sg_max(const float *x, int n) {
#if SG_X86
    if (sg_use_avx2()) return sg_max_avx2(x, n);
#endif
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* x[i] = exp(x[i] - m) for i < n; returns the sum */
static inline float sg_exp_sub_sum(float *x, int n, float m) {
#if SG_X86
    if (sg_use_avx512()) return sg_exp_sub_sum_avx512(x, n, m);
    if (sg_use_avx2()) return sg_exp_sub_sum_avx2(x, n, m);
#endif
    float s = 0.f;
    for (int i = 0; i < n; i++) s += (x[i] = expf(x[i] - m));
    return s;
}

/* x[i] = exp(x[i]) for i < n */
static inline void sg_exp_inplace(float *x, int n) {
#if SG_X86
    if (sg_use_avx2()) {
        sg_exp_inplace_avx2(x, n);
        return;
    }
#endif
    for (int i = 0; i < n; i++) x[i] = expf(x[i]);
}

#endif /* SG_SIMD_H */
