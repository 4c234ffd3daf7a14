/* structgen's CPU weight-only quantized matmul: y[M, N] = x[M, K] @ dequant(W[N, K]).T at small M.
 *
 * Layouts (built by structgen/runtime/quantization/formats.py, lossless repacks of our int4 / int8
 * formats and of GGUF Q4_0 / Q4_1 / Q8_0 blocks):
 *   int4: q uint8 [N, K/2]; per row, each block of 32 weights is 16 bytes, byte j holding weight j
 *         in its low nibble and weight j + 16 in its high nibble (ggml's block order); scales and
 *         mins fp16 [N, K/gs]: w = scale * q + min (gs a multiple of 32).
 *   int8: q int8 [N, K]; scales [N, K/gs] (fp16 or fp32): w = scale * q (gs = K: per channel;
 *         gs a multiple of 8 otherwise, 32 for Q8_0).
 * Activations fp32 [M, K] row-major, output fp32 [M, N] row-major (overwritten).
 * Two paths per layout:
 *   exact: accumulation in fp32, per 32-weight block sum(q * x) times the group scale, plus
 *     min * sum(x over the group) for int4: x @ dequant(W).T up to float32 summation order;
 *   q8 (llama.cpp's scheme, ggml Q8_0 activations): x rounded to int8 per block of 32
 *     (d = max|x| / 127), integer block dots (maddubs / madd), scaled in fp32; int4 codes are
 *     centred (q - 8) through an exact correction term (see int4_mm). K % 32 == 0.
 *
 * An AVX2 + FMA + F16C path (chosen at run time with __builtin_cpu_supports) and a portable
 * scalar one; rows split over OpenMP threads when built with it. Exposed to Python as the
 * module structgen.runtime.cpu._qkernel with METH_FASTCALL functions taking raw data
 * pointers (ints) and sizes; callers (structgen/runtime/cpu/quant.py) check shapes,
 * dtypes and contiguity.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SG_X86 1
#else
#define SG_X86 0
#endif

#define MAX_M 8

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

static void int4_mm(const float *x, const uint8_t *q, const uint16_t *sc, const uint16_t *mn, float *y,
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
            SPLIT_ROWS(nt, N, int4_rows_avx2(xm, xqm, xdm, xs, xdf, q, sc, mn, ym, mm, N, K, gs, n0, n1));
            continue;
        }
#endif
        if (q8) SPLIT_ROWS(nt, N, int4q8_rows_scalar(xqm, xdm, xs, xdf, q, sc, mn, ym, mm, N, K, gs, n0, n1));
        else SPLIT_ROWS(nt, N, int4_rows_scalar(xm, xs, q, sc, mn, ym, mm, N, K, gs, n0, n1));
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

/* Rows [n0, n1) of the weight as fp32 [n1 - n0, K] (prefill: dequantize a tile, then BLAS). */
static void int4_dequant(const uint8_t *q, const uint16_t *sc, const uint16_t *mn, float *out, int n0, int n1,
                         int K, int gs) {
    int G = K / gs;
    for (int n = n0; n < n1; n++) {
        const uint8_t *qr = q + (size_t)n * (K / 2);
        float *o = out + (size_t)(n - n0) * K;
        for (int g = 0; g < G; g++) {
            float d = half_to_float(sc[(size_t)n * G + g]), mg = half_to_float(mn[(size_t)n * G + g]);
            for (int b = g * gs; b < (g + 1) * gs; b += 32)
                for (int j = 0; j < 16; j++) {
                    o[b + j] = d * (float)(qr[b / 2 + j] & 0xF) + mg;
                    o[b + j + 16] = d * (float)(qr[b / 2 + j] >> 4) + mg;
                }
        }
    }
}

static void int8_dequant(const int8_t *q, const void *sc, int f16, float *out, int n0, int n1, int K, int gs) {
    int G = K / gs;
    for (int n = n0; n < n1; n++) {
        float *o = out + (size_t)(n - n0) * K;
        for (int g = 0; g < G; g++) {
            float d = scale_at(sc, f16, (size_t)n * G + g);
            for (int k = g * gs; k < (g + 1) * gs; k++) o[k] = d * (float)q[(size_t)n * K + k];
        }
    }
}

/* ---------------------------------------------------------------- Python bindings */

static int get_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, void **ptrs, int nptr,
                    long long *ints) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "expected %zd arguments, got %zd", want, nargs);
        return -1;
    }
    for (int i = 0; i < nptr; i++) {
        ptrs[i] = PyLong_AsVoidPtr(args[i]);
        if (PyErr_Occurred()) return -1;
    }
    for (Py_ssize_t i = nptr; i < want; i++) {
        ints[i - nptr] = PyLong_AsLongLong(args[i]);
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

static PyObject *py_int4_mm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *p[5];
    long long v[6]; /* M, N, K, gs, q8, threads */
    if (get_args(args, nargs, 11, p, 5, v) < 0) return NULL;
    if (v[3] <= 0 || v[3] % 32 || v[2] % v[3] || v[0] < 0 || v[1] < 0) {
        PyErr_SetString(PyExc_ValueError, "int4_mm: group size must be a positive multiple of 32 dividing K");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    int4_mm(p[0], p[1], p[2], p[3], p[4], (int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], (int)v[5]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_int8_mm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *p[4];
    long long v[7]; /* M, N, K, gs, scale_f16, q8, threads */
    if (get_args(args, nargs, 11, p, 4, v) < 0) return NULL;
    if (v[3] <= 0 || v[3] % (v[5] ? 32 : 8) || v[2] % v[3] || v[0] < 0 || v[1] < 0) {
        PyErr_SetString(PyExc_ValueError, "int8_mm: group size must be a positive multiple of 8 (32 with q8) dividing K");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    int8_mm(p[0], p[1], p[2], (int)v[4], p[3], (int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[5], (int)v[6]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_int4_dequant(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *p[4];
    long long v[4]; /* n0, n1, K, gs */
    if (get_args(args, nargs, 8, p, 4, v) < 0) return NULL;
    if (v[3] <= 0 || v[3] % 32 || v[2] % v[3]) {
        PyErr_SetString(PyExc_ValueError, "int4_dequant: group size must be a positive multiple of 32 dividing K");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    int4_dequant(p[0], p[1], p[2], p[3], (int)v[0], (int)v[1], (int)v[2], (int)v[3]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_int8_dequant(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *p[3];
    long long v[5]; /* n0, n1, K, gs, scale_f16 */
    if (get_args(args, nargs, 8, p, 3, v) < 0) return NULL;
    if (v[3] <= 0 || v[2] % v[3]) {
        PyErr_SetString(PyExc_ValueError, "int8_dequant: group size must divide K");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    int8_dequant(p[0], p[1], (int)v[4], p[2], (int)v[0], (int)v[1], (int)v[2], (int)v[3]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_isa(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(use_avx2 ? "avx2" : "scalar");
}

static PyObject *py_set_isa(PyObject *self, PyObject *arg) {
    int want = PyObject_IsTrue(arg);
    if (want < 0) return NULL;
#if SG_X86
    use_avx2 = want && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    use_avx2 = 0;
#endif
    return py_isa(self, NULL);
}

static PyMethodDef methods[] = {
    {"int4_mm", (PyCFunction)(void (*)(void))py_int4_mm, METH_FASTCALL,
     "int4_mm(x, q, scales, mins, y, M, N, K, group, q8, threads): y = x @ dequant(W).T (pointers; q8: int8 activations)"},
    {"int8_mm", (PyCFunction)(void (*)(void))py_int8_mm, METH_FASTCALL,
     "int8_mm(x, q, scales, y, M, N, K, group, scale_f16, q8, threads): y = x @ dequant(W).T (pointers; q8: int8 activations)"},
    {"int4_dequant", (PyCFunction)(void (*)(void))py_int4_dequant, METH_FASTCALL,
     "int4_dequant(q, scales, mins, out, n0, n1, K, group): rows n0..n1 as fp32 (pointers)"},
    {"int8_dequant", (PyCFunction)(void (*)(void))py_int8_dequant, METH_FASTCALL,
     "int8_dequant(q, scales, out, n0, n1, K, group, scale_f16): rows n0..n1 as fp32 (pointers)"},
    {"isa", py_isa, METH_NOARGS, "the instruction set in use: 'avx2' or 'scalar'"},
    {"set_isa", py_set_isa, METH_O, "set_isa(use_simd): use AVX2 if asked and supported; returns isa()"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_qkernel",
                                    "structgen's CPU int4 / int8 weight-only matmul kernels (see csrc/qkernel.c)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__qkernel(void) {
    py_set_isa(NULL, Py_True);
    return PyModule_Create(&moddef);
}
