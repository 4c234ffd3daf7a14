/* Dequantization of ggml block types straight into the final float tensor.
 *
 * structgen.runtime.quantization._kquant.dequantize(type_id, src, dst, n_rows, row_elems,
 * rows, out_bf16): reads n_rows rows of row_elems weights in ggml blocks from the address src
 * (row i of the source starts at i * row_elems / block_elems * block_bytes) and writes row r
 * of the output, float32 or (out_bf16 != 0) bfloat16 rounded to nearest even, at dst + r *
 * row_elems elements. rows is 0 (output row r is source row r) or the address of n_rows int64
 * source-row indices (a row permutation applied while dequantizing: llama.cpp's q/k rotary
 * order undone without a second copy). Rows are shared among the OpenMP threads.
 *
 * Block layouts and formulas are ggml's (ggml-common.h, dequantize_row_* in ggml-quants.c),
 * evaluated in float32 in the same order (the build's -ffp-contract=off keeps the compiler
 * from contracting a*b+c into an FMA):
 *   Q4_0 (18 B / 32): d fp16, qs[16]; x[j] = (lo(qs[j]) - 8) * d, x[j+16] = (hi(qs[j]) - 8) * d
 *   Q4_1 (20 B / 32): d, m fp16, qs[16]; x = q * d + m
 *   Q8_0 (34 B / 32): d fp16, qs[32] int8; x = q * d
 *   Q4_K (144 B / 256): d, dmin fp16, scales[12] (eight 6-bit scale/min pairs), qs[128];
 *       sub-block s of 32: x = (d * sc[s]) * q - (dmin * mn[s])
 *   Q6_K (210 B / 256): ql[128], qh[64], scales[16] int8, d fp16; 16 weights per scale:
 *       x = (d * sc) * (q6 - 32)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "sg_simd.h" /* sg_f16_to_float, sg_float_to_bf16 */

static inline float rd16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return sg_f16_to_float(h);
}

/* each block decoder writes block_elems floats to y */
static void block_q4_0(const uint8_t *b, float *y) {
    float d = rd16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((int)(qs[j] & 0x0F) - 8) * d;
        y[j + 16] = (float)((int)(qs[j] >> 4) - 8) * d;
    }
}

static void block_q4_1(const uint8_t *b, float *y) {
    float d = rd16(b), m = rd16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0x0F) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static void block_q8_0(const uint8_t *b, float *y) {
    float d = rd16(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++) y[j] = (float)qs[j] * d;
}

/* ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void block_q4_k(const uint8_t *b, float *y) {
    float d = rd16(b), dmin = rd16(b + 2);
    const uint8_t *scales = b + 4, *q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
        uint8_t sc, mn;
        scale_min_k4(is, scales, &sc, &mn);
        float d1 = d * (float)sc, m1 = dmin * (float)mn;
        scale_min_k4(is + 1, scales, &sc, &mn);
        float d2 = d * (float)sc, m2 = dmin * (float)mn;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0x0F) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        q += 32;
    }
}

static void block_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = rd16(b + 208);
    for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = (int)((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = (int)((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[is + 0] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

typedef void (*block_fn)(const uint8_t *, float *);

static int block_info(int type_id, block_fn *fn, int *elems, int *bytes) {
    switch (type_id) {
    case 2: *fn = block_q4_0, *elems = 32, *bytes = 18; return 0;
    case 3: *fn = block_q4_1, *elems = 32, *bytes = 20; return 0;
    case 8: *fn = block_q8_0, *elems = 32, *bytes = 34; return 0;
    case 12: *fn = block_q4_k, *elems = 256, *bytes = 144; return 0;
    case 14: *fn = block_q6_k, *elems = 256, *bytes = 210; return 0;
    default: return -1;
    }
}

static PyObject *py_dequantize(PyObject *self, PyObject *args) {
    (void)self;
    int type_id, out_bf16;
    unsigned long long src_addr, dst_addr, rows_addr;
    Py_ssize_t n_rows, row_elems;
    if (!PyArg_ParseTuple(args, "iKKnnKp", &type_id, &src_addr, &dst_addr, &n_rows, &row_elems,
                          &rows_addr, &out_bf16))
        return NULL;
    block_fn fn;
    int elems, bytes;
    if (block_info(type_id, &fn, &elems, &bytes) != 0) {
        PyErr_Format(PyExc_ValueError, "ggml type %d has no dequantizer here", type_id);
        return NULL;
    }
    if (n_rows < 0 || row_elems <= 0 || row_elems % elems != 0) {
        PyErr_Format(PyExc_ValueError, "row length %zd is not a multiple of the block (%d)",
                     row_elems, elems);
        return NULL;
    }
    const uint8_t *src = (const uint8_t *)(uintptr_t)src_addr;
    const int64_t *rows = (const int64_t *)(uintptr_t)rows_addr;
    const Py_ssize_t nb = row_elems / elems, row_bytes = nb * bytes;
    Py_BEGIN_ALLOW_THREADS
#pragma omp parallel
    {
        float tmp[256];
#pragma omp for schedule(static)
        for (Py_ssize_t r = 0; r < n_rows; r++) {
            const uint8_t *s = src + (rows ? rows[r] : r) * row_bytes;
            if (out_bf16) {
                uint16_t *o = (uint16_t *)(uintptr_t)dst_addr + r * row_elems;
                for (Py_ssize_t b = 0; b < nb; b++) {
                    fn(s + b * bytes, tmp);
                    for (int j = 0; j < elems; j++) o[b * elems + j] = sg_float_to_bf16(tmp[j]);
                }
            } else {
                float *o = (float *)(uintptr_t)dst_addr + r * row_elems;
                for (Py_ssize_t b = 0; b < nb; b++) fn(s + b * bytes, o + b * elems);
            }
        }
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"dequantize", py_dequantize, METH_VARARGS,
     "dequantize(type_id, src, dst, n_rows, row_elems, rows, out_bf16): ggml blocks at address "
     "src -> float32 (or bfloat16) rows at dst; rows: 0 or the address of int64 source rows"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kquant",
                                    "ggml block dequantization into the final tensor", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kquant(void) { return PyModule_Create(&module); }
