/* structgen's CPU dense matmul at small M: y[M, N] = x[M, K] @ W[N, K].T (+ bias[N]).
 *
 * Why: a batch-1 decode step is a chain of matrix-vector products over weights that do not
 * fit in cache, so its speed is memory bandwidth. torch's CPU linear runs M = 1 on one
 * thread (MKL's sgemv), and M = 2..8 (speculative verification, jump-forward runs) through a
 * GEMM that packs the weight first, about 2x the traffic of one pass. This kernel streams W
 * once for all M rows and splits W's rows over OpenMP threads, so both cores pull from memory.
 *
 * Layouts: x fp32 [M, K] row-major, W fp32 or bf16 [N, K] row-major, bias fp32 [N] or NULL,
 * y fp32 [M, N] row-major (overwritten). Accumulation in fp32 (the same as torch's bf16
 * linear on CPU); the summation order differs from MKL's, so results agree to rounding.
 *
 * An AVX2 + FMA path chosen at run time (__builtin_cpu_supports) and a portable scalar one.
 * Exposed to Python as structgen.runtime.models._densekernel (METH_FASTCALL, raw data pointers
 * as ints; the caller, structgen/runtime/models/dense_kernel.py, checks shapes and dtypes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
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
#define ROW_BLOCK 16

static inline float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void rows_scalar(const float *x, const void *w, int bf16, const float *bias, float *y,
                        int M, int N, int K, int n0, int n1) {
    for (int n = n0; n < n1; n++) {
        for (int m = 0; m < M; m++) {
            const float *xr = x + (size_t)m * K;
            float acc = 0.f;
            if (bf16) {
                const uint16_t *wr = (const uint16_t *)w + (size_t)n * K;
                for (int k = 0; k < K; k++) acc += xr[k] * bf16_to_float(wr[k]);
            } else {
                const float *wr = (const float *)w + (size_t)n * K;
                for (int k = 0; k < K; k++) acc += xr[k] * wr[k];
            }
            y[(size_t)m * N + n] = acc + (bias ? bias[n] : 0.f);
        }
    }
}

#if SG_X86
__attribute__((target("avx2,fma"))) static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) static inline __m256 load_w(const void *w, int bf16, size_t i) {
    if (bf16) {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    return _mm256_loadu_ps((const float *)w + i);
}

__attribute__((target("avx2,fma"))) static void rows_avx2(const float *x, const void *w, int bf16,
                                                         const float *bias, float *y, int M, int N,
                                                         int K, int n0, int n1) {
    for (int n = n0; n < n1; n++) {
        __m256 acc0[MAX_M], acc1[MAX_M];
        for (int m = 0; m < M; m++) acc0[m] = acc1[m] = _mm256_setzero_ps();
        size_t base = (size_t)n * K;
        int k = 0;
        for (; k + 16 <= K; k += 16) {
            __m256 w0 = load_w(w, bf16, base + k), w1 = load_w(w, bf16, base + k + 8);
            for (int m = 0; m < M; m++) {
                const float *xr = x + (size_t)m * K + k;
                acc0[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr), acc0[m]);
                acc1[m] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + 8), acc1[m]);
            }
        }
        for (int m = 0; m < M; m++) {
            float s = hsum8(_mm256_add_ps(acc0[m], acc1[m]));
            const float *xr = x + (size_t)m * K;
            for (int kk = k; kk < K; kk++)
                s += xr[kk] * (bf16 ? bf16_to_float(((const uint16_t *)w)[base + kk])
                                    : ((const float *)w)[base + kk]);
            y[(size_t)m * N + n] = s + (bias ? bias[n] : 0.f);
        }
    }
}
#endif

static int use_avx2 = -1; /* -1: not decided yet */

static void dense_mm(const float *x, const void *w, int bf16, const float *bias, float *y, int M,
                     int N, int K, int threads) {
    if (use_avx2 < 0) {
#if SG_X86
        __builtin_cpu_init();
        use_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
        use_avx2 = 0;
#endif
    }
    int blocks = (N + ROW_BLOCK - 1) / ROW_BLOCK;
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : 1)
#endif
    for (int b = 0; b < blocks; b++) {
        int n0 = b * ROW_BLOCK, n1 = n0 + ROW_BLOCK < N ? n0 + ROW_BLOCK : N;
#if SG_X86
        if (use_avx2) {
            rows_avx2(x, w, bf16, bias, y, M, N, K, n0, n1);
            continue;
        }
#endif
        rows_scalar(x, w, bf16, bias, y, M, N, K, n0, n1);
    }
}

/* dense_mm(x_ptr, w_ptr, w_is_bf16, bias_ptr_or_0, y_ptr, M, N, K, threads) -> None */
static PyObject *py_dense_mm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "dense_mm takes 9 arguments");
        return NULL;
    }
    long long v[9];
    for (int i = 0; i < 9; i++) {
        v[i] = PyLong_AsLongLong(args[i]);
        if (v[i] == -1 && PyErr_Occurred()) return NULL;
    }
    int M = (int)v[5], N = (int)v[6], K = (int)v[7];
    if (M < 1 || M > MAX_M || N < 1 || K < 1) {
        PyErr_SetString(PyExc_ValueError, "dense_mm: need 1 <= M <= 8, N >= 1, K >= 1");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    dense_mm((const float *)(intptr_t)v[0], (const void *)(intptr_t)v[1], (int)v[2],
             (const float *)(intptr_t)v[3], (float *)(intptr_t)v[4], M, N, K, (int)v[8]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_isa(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (use_avx2 < 0) {
        float x = 0.f, w = 0.f, y;
        dense_mm(&x, &w, 0, NULL, &y, 1, 1, 1, 1);
    }
    return PyUnicode_FromString(use_avx2 ? "avx2" : "scalar");
}

static PyObject *py_set_isa(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    if (strcmp(name, "scalar") == 0) {
        use_avx2 = 0;
    } else if (strcmp(name, "auto") == 0) {
        use_avx2 = -1;
    } else {
        PyErr_SetString(PyExc_ValueError, "isa must be 'scalar' or 'auto'");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"dense_mm", (PyCFunction)(void (*)(void))py_dense_mm, METH_FASTCALL,
     "dense_mm(x, w, w_is_bf16, bias_or_0, y, M, N, K, threads): y = x @ w.T (+ bias), raw pointers"},
    {"isa", py_isa, METH_NOARGS, "the instruction set in use: 'avx2' or 'scalar'"},
    {"set_isa", py_set_isa, METH_O, "force 'scalar' (tests) or back to 'auto'"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_densekernel",
                                    "structgen's CPU dense small-M matmul (see csrc/densekernel.c)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__densekernel(void) { return PyModule_Create(&module); }
