/* structgen's CPU weight-only quantized matmul: y[M, N] = x[M, K] @ dequant(W[N, K]).T at small M.
 *
 * Layouts (built by structgen/runtime/quantization/formats.py, lossless repacks of our int4 / int8
 * formats and of GGUF Q4_0 / Q4_1 / Q8_0 blocks):
 *   int4: q uint8 [N, K/2]; per row, each block of 32 weights is 16 bytes, byte j holding weight j
 *         in its low nibble and weight j + 16 in its high nibble (ggml's block order); scales and
 *         mins [N, K/gs], fp16 or fp32 (a scale_f16 flag; fp32 holds GGUF Q4_K's d * sc and
 *         -dmin * m exactly): w = scale * q + min (gs a multiple of 32).
 *   int4 tile table (what the matmul reads; the [N, K/gs] tables serve int4_dequant): the mins
 *         and scales of 8 weight rows side by side, [ceil(N/8), K/gs, 2, 8] in their dtype:
 *         tiles[t, g, 0, r] = mins[8 t + r, g], tiles[t, g, 1, r] = scales[8 t + r, g] (rows past N:
 *         0), built once per weight (structgen/runtime/quantization/formats.py, int4_scale_tiles),
 *         so the tail sum over g of min * xsum (+ 8 * scale * xdiff) runs 8 weight rows per vector.
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

#include "qkernel_core.h"

/* Rows [n0, n1) of the weight as fp32 [n1 - n0, K] (prefill: dequantize a tile, then BLAS). */
static void int4_dequant(const uint8_t *q, const void *sc, const void *mn, int f16, float *out, int n0, int n1,
                         int K, int gs) {
    int G = K / gs;
    for (int n = n0; n < n1; n++) {
        const uint8_t *qr = q + (size_t)n * (K / 2);
        float *o = out + (size_t)(n - n0) * K;
        for (int g = 0; g < G; g++) {
            float d = scale_at(sc, f16, (size_t)n * G + g), mg = scale_at(mn, f16, (size_t)n * G + g);
            for (int b = g * gs; b < (g + 1) * gs; b += 32)
                for (int j = 0; j < 16; j++) {
                    o[b + j] = d * (float)(qr[b / 2 + j] & 0xF) + mg;
                    o[b + j + 16] = d * (float)(qr[b / 2 + j] >> 4) + mg;
                }
        }
    }
}

/* Rows [n0, n1) of an int4 tile-layout weight (qkernel_tiles.h) as fp32 [n1 - n0, K] */
static void int4t_dequant(const uint8_t *q, const void *sc, const void *mn, int f16, float *out, int n0, int n1,
                          int K, int gs) {
    int G = K / gs;
    for (int n = n0; n < n1; n++) {
        const uint8_t *qt = q + (size_t)(n / 8) * TILE_BYTES(K);
        float *o = out + (size_t)(n - n0) * K;
        for (int g = 0; g < G; g++) {
            float d = scale_at(sc, f16, (size_t)n * G + g), mg = scale_at(mn, f16, (size_t)n * G + g);
            for (int k = g * gs; k < (g + 1) * gs; k++) o[k] = d * (float)tile_code(qt, n % 8, k) + mg;
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

/* The int8 tile layout of a row-major int8 weight q [N, K] (qkernel_i8tiles.h): out int8
 * [ceil(N/16), K/32, 8, 16, 4], zeros for rows past N (the lossless regrouping
 * formats.pack_int8_tiles makes, 4 bytes at a time), and where sc is not NULL its scale table
 * sct fp32 [ceil(N/16), K/gs, 16] from the scales sc [N, K/gs] (fp16 with f16, else fp32); q NULL:
 * the table only. */
static void int8t_pack(const int8_t *q, const void *sc, int8_t *out, float *sct, int N, int K, int gs, int f16) {
    int KB = K / 32, NT = (N + I8T_COLS - 1) / I8T_COLS, G = K / gs;
    if (sc)
        for (int t = 0; t < NT; t++)
            for (int g = 0; g < G; g++)
                for (int c = 0; c < I8T_COLS; c++) {
                    int n = t * I8T_COLS + c;
                    sct[((size_t)t * G + g) * I8T_COLS + c] = n < N ? scale_at(sc, f16, (size_t)n * G + g) : 0.f;
                }
    for (int t = 0; q && t < NT; t++)
        for (int c = 0; c < I8T_COLS; c++) {
            int n = t * I8T_COLS + c;
            int8_t *o = out + (size_t)t * I8T_TILE_BYTES(K) + c * 4;
            if (n >= N) {
                for (int b = 0; b < KB; b++)
                    for (int j = 0; j < 8; j++) memset(o + (size_t)b * 512 + j * 64, 0, 4);
                continue;
            }
            const int8_t *qr = q + (size_t)n * K;
            for (int b = 0; b < KB; b++)
                for (int j = 0; j < 8; j++) memcpy(o + (size_t)b * 512 + j * 64, qr + b * 32 + j * 4, 4);
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
    void *p[4]; /* x, q, tiles, y */
    long long v[7]; /* M, N, K, gs, scale_f16, q8, threads */
    if (get_args(args, nargs, 11, p, 4, v) < 0) return NULL;
    if (v[3] <= 0 || v[3] % 32 || v[2] % v[3] || v[0] < 0 || v[1] < 0) {
        PyErr_SetString(PyExc_ValueError, "int4_mm: group size must be a positive multiple of 32 dividing K");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    int4_mm(p[0], p[1], p[2], (int)v[4], p[3], (int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[5], (int)v[6]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_int4t_mm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *p[4]; /* x, q (int4 tiles), tiles (mins and scales), y */
    long long v[7]; /* M, N, K, gs, scale_f16, q8, threads */
    if (get_args(args, nargs, 11, p, 4, v) < 0) return NULL;
    if (v[3] <= 0 || v[3] % 32 || v[2] % v[3] || v[0] < 0 || v[1] < 0) {
        PyErr_SetString(PyExc_ValueError, "int4t_mm: group size must be a positive multiple of 32 dividing K");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    int4t_mm(p[0], p[1], p[2], (int)v[4], p[3], (int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[5], (int)v[6]);
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

static PyObject *py_int8t_mm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *p[4]; /* x, q (int8 tiles), sct (fp32 scale table), y */
    long long v[5]; /* M, N, K, gs, threads */
    int rc;
    if (get_args(args, nargs, 9, p, 4, v) < 0) return NULL;
    if (v[3] <= 0 || v[3] % 32 || v[2] % v[3] || v[0] < 0 || v[1] < 0) {
        PyErr_SetString(PyExc_ValueError, "int8t_mm: group size must be a positive multiple of 32 dividing K");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = int8t_mm(p[0], p[1], p[2], p[3], (int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4]);
    Py_END_ALLOW_THREADS
    if (rc) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *py_int8t_pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *p[4]; /* q [N, K], scales [N, K/gs] (0: none), out [16 ceil(N/16), K], sct */
    long long v[4]; /* N, K, gs, scale_f16 */
    if (get_args(args, nargs, 8, p, 4, v) < 0) return NULL;
    if (v[0] < 0 || v[1] <= 0 || v[1] % 32 || v[2] <= 0 || v[1] % v[2]) {
        PyErr_SetString(PyExc_ValueError, "int8t_pack: K must be a positive multiple of 32, the group size dividing it");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    int8t_pack(p[0], p[1], p[2], p[3], (int)v[0], (int)v[1], (int)v[2], (int)v[3]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_int4_dequant(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *p[4];
    long long v[5]; /* n0, n1, K, gs, scale_f16 */
    if (get_args(args, nargs, 9, p, 4, v) < 0) return NULL;
    if (v[3] <= 0 || v[3] % 32 || v[2] % v[3]) {
        PyErr_SetString(PyExc_ValueError, "int4_dequant: group size must be a positive multiple of 32 dividing K");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    int4_dequant(p[0], p[1], p[2], (int)v[4], p[3], (int)v[0], (int)v[1], (int)v[2], (int)v[3]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_int4t_dequant(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *p[4];
    long long v[5]; /* n0, n1, K, gs, scale_f16 */
    if (get_args(args, nargs, 9, p, 4, v) < 0) return NULL;
    if (v[3] <= 0 || v[3] % 32 || v[2] % v[3]) {
        PyErr_SetString(PyExc_ValueError, "int4t_dequant: group size must be a positive multiple of 32 dividing K");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    int4t_dequant(p[0], p[1], p[2], (int)v[4], p[3], (int)v[0], (int)v[1], (int)v[2], (int)v[3]);
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
    use_vnni = 0;
    use_amx = 0;
    return py_isa(self, NULL);
}

static PyObject *py_vnni(PyObject *self, PyObject *unused) { return PyBool_FromLong(use_vnni); }

static PyObject *py_set_vnni(PyObject *self, PyObject *arg) {
    int want = PyObject_IsTrue(arg);
    if (want < 0) return NULL;
#if SG_X86
    use_vnni = want && use_avx2 && tile_vnni_supported();
#endif
    return py_vnni(self, NULL);
}

static PyObject *py_amx(PyObject *self, PyObject *unused) { return PyBool_FromLong(use_amx); }

static PyObject *py_set_amx(PyObject *self, PyObject *arg) {
    int want = PyObject_IsTrue(arg);
    if (want < 0) return NULL;
#if SG_HAVE_AMX
    use_amx = want && use_avx2 && amx_supported();
#endif
    return py_amx(self, NULL);
}

static PyMethodDef methods[] = {
    {"int4_mm", (PyCFunction)(void (*)(void))py_int4_mm, METH_FASTCALL,
     "int4_mm(x, q, tiles, y, M, N, K, group, scale_f16, q8, threads): y = x @ dequant(W).T (pointers; tiles: the [ceil(N/8), K/group, 2, 8] mins/scales table; q8: int8 activations)"},
    {"int4t_mm", (PyCFunction)(void (*)(void))py_int4t_mm, METH_FASTCALL,
     "int4t_mm(x, q, tiles, y, M, N, K, group, scale_f16, q8, threads): y = x @ dequant(W).T (pointers; q: the int4 tile layout [ceil(N/8), K/32, 4, 8, 4], qkernel_tiles.h; q8: int8 activations)"},
    {"int4t_dequant", (PyCFunction)(void (*)(void))py_int4t_dequant, METH_FASTCALL,
     "int4t_dequant(q, scales, mins, out, n0, n1, K, group, scale_f16): rows n0..n1 of an int4 tile-layout weight as fp32 (pointers)"},
    {"int8_mm", (PyCFunction)(void (*)(void))py_int8_mm, METH_FASTCALL,
     "int8_mm(x, q, scales, y, M, N, K, group, scale_f16, q8, threads): y = x @ dequant(W).T (pointers; q8: int8 activations)"},
    {"int8t_mm", (PyCFunction)(void (*)(void))py_int8t_mm, METH_FASTCALL,
     "int8t_mm(x, q, sct, y, M, N, K, group, threads): y = x @ dequant(W).T with int8 activations (pointers; q: the int8 tile layout [ceil(N/16), K/32, 8, 16, 4], sct: fp32 scales [ceil(N/16), K/group, 16], qkernel_i8tiles.h)"},
    {"int8t_pack", (PyCFunction)(void (*)(void))py_int8t_pack, METH_FASTCALL,
     "int8t_pack(q, scales, out, sct, N, K, group, scale_f16): out (int8 [16 ceil(N/16), K]) = the int8 tile layout of the row-major int8 q [N, K], and unless scales is 0, sct (fp32 [ceil(N/16), K/group, 16]) its scale table (pointers)"},
    {"int4_dequant", (PyCFunction)(void (*)(void))py_int4_dequant, METH_FASTCALL,
     "int4_dequant(q, scales, mins, out, n0, n1, K, group, scale_f16): rows n0..n1 as fp32 (pointers)"},
    {"int8_dequant", (PyCFunction)(void (*)(void))py_int8_dequant, METH_FASTCALL,
     "int8_dequant(q, scales, out, n0, n1, K, group, scale_f16): rows n0..n1 as fp32 (pointers)"},
    {"isa", py_isa, METH_NOARGS, "the instruction set in use: 'avx2' or 'scalar'"},
    {"set_isa", py_set_isa, METH_O, "set_isa(use_simd): use AVX2 if asked and supported; returns isa()"},
    {"vnni", py_vnni, METH_NOARGS, "whether the q8 paths of int4t_mm and int8_mm use AVX-VNNI (vpdpbusd)"},
    {"set_vnni", py_set_vnni, METH_O,
     "set_vnni(use): use AVX-VNNI for the q8 paths of int4t_mm and int8_mm if asked, AVX2 is in use, the CPU has it and STRUCTGEN_NO_VNNI was not 1 at the first ask (once per process); returns vnni()"},
    {"amx", py_amx, METH_NOARGS, "whether int4t_mm's q8 path (from 9 rows) and int8t_mm (from 5) use AMX (TDPBSSD)"},
    {"set_amx", py_set_amx, METH_O,
     "set_amx(use): use AMX for int4t_mm's q8 path (>= 9 rows) and int8t_mm (>= 5 rows) if asked, AVX2 is in use, the CPU has AMX-INT8 and AVX-512, Linux grants the tile state and STRUCTGEN_NO_AMX is not 1; returns amx()"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_qkernel",
                                    "structgen's CPU int4 / int8 weight-only matmul kernels (see csrc/qkernel.c)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__qkernel(void) {
    py_set_isa(NULL, Py_True);
    py_set_vnni(NULL, Py_True);
    py_set_amx(NULL, Py_True);
    return PyModule_Create(&moddef);
}
