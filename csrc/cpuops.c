/* Python bindings of structgen's fused CPU decoder ops (the ops and why: cpuops_core.h).
 * Exposed as structgen.runtime.cpu._cpuops (METH_FASTCALL, raw data pointers as ints;
 * structgen/runtime/cpu/ops.py checks shapes, dtypes and strides).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cpuops_core.h"
#include "sg_pybind.h"

/* ------------------------------------------------------------------ Python bindings */
#define PTR(i) ((void *)(intptr_t)v[i])

/* add_rms_norm(res, rs, delta_or_0, ds, w, out, os, T, H, eps, dt, threads) */
static PyObject *py_add_rms_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long v[12];
    if (sg_get_args(args, nargs, 12, v, "add_rms_norm")) return NULL;
    Py_BEGIN_ALLOW_THREADS
    add_rms_norm(PTR(0), (long)v[1], PTR(2), (long)v[3], PTR(4), PTR(5), (long)v[6], (int)v[7],
                 (int)v[8], sg_arg_float(v[9]), (int)v[10], (int)v[11]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* rope_store_kv(q, qs, k, ks, v, vs, cos, sin, qnw_or_0, knw_or_0, eps, kc, vc, slots,
 *               T, H, KVH, d, dt, threads) */
static PyObject *py_rope_store_kv(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long v[20];
    if (sg_get_args(args, nargs, 20, v, "rope_store_kv")) return NULL;
    if (v[17] > MAX_HEAD_DIM || v[17] % 2) {
        PyErr_SetString(PyExc_ValueError, "rope_store_kv: head_dim must be even and <= 512");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rope_store_kv(PTR(0), (long)v[1], PTR(2), (long)v[3], PTR(4), (long)v[5], PTR(6), PTR(7), PTR(8),
                  PTR(9), sg_arg_float(v[10]), PTR(11), PTR(12), (const int64_t *)PTR(13), (int)v[14],
                  (int)v[15], (int)v[16], (int)v[17], (int)v[18] & 0xff, (int)v[18] >> 8,
                  (int)v[19]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* paged_attention(q, qs, kc, vc, pt, pt_stride, seq, pos, ps, T, H, KVH, d, scale, window, out,
 *                 dt, threads); dt = q/out dtype | KV cache dtype << 8 (0 fp32, 1 bf16, 2 fp16 for the
 *                 cache only), as for
 *                 rope_store_kv */
static PyObject *py_paged_attention(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long v[18];
    if (sg_get_args(args, nargs, 18, v, "paged_attention")) return NULL;
    if (v[12] > MAX_HEAD_DIM || v[10] < 1 || v[11] < 1 || v[10] % v[11]) {
        PyErr_SetString(PyExc_ValueError, "paged_attention: need head_dim <= 512, heads % kv_heads == 0");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    paged_attention(PTR(0), (long)v[1], PTR(2), PTR(3), (const int64_t *)PTR(4), (long)v[5],
                    (const int64_t *)PTR(6), (const int64_t *)PTR(7), (int)v[8], (int)v[9],
                    (int)v[10], (int)v[11], (int)v[12], sg_arg_float(v[13]), (int)v[14], PTR(15),
                    (int)v[16] & 0xff, (int)v[16] >> 8, (int)v[17]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* silu_mul(g, gs, u, us, out, os, T, I, dt, threads) */
static PyObject *py_silu_mul(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long v[10];
    if (sg_get_args(args, nargs, 10, v, "silu_mul")) return NULL;
    Py_BEGIN_ALLOW_THREADS
    silu_mul(PTR(0), (long)v[1], PTR(2), (long)v[3], PTR(4), (long)v[5], (int)v[6], (int)v[7],
             (int)v[8], (int)v[9]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"add_rms_norm", (PyCFunction)(void (*)(void))py_add_rms_norm, METH_FASTCALL,
     "add_rms_norm(res, rs, delta_or_0, ds, w, out, os, T, H, eps, dt, threads)"},
    {"rope_store_kv", (PyCFunction)(void (*)(void))py_rope_store_kv, METH_FASTCALL,
     "rope_store_kv(q, qs, k, ks, v, vs, cos, sin, qnw, knw, eps, kc, vc, slots, T, H, KVH, d, dt, threads)"},
    {"paged_attention", (PyCFunction)(void (*)(void))py_paged_attention, METH_FASTCALL,
     "paged_attention(q, qs, kc, vc, pt, pt_stride, seq, pos, ps, T, H, KVH, d, scale, window, out, dt, threads)"},
    {"silu_mul", (PyCFunction)(void (*)(void))py_silu_mul, METH_FASTCALL,
     "silu_mul(g, gs, u, us, out, os, T, I, dt, threads)"},
    SG_ISA_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cpuops",
                                    "structgen's fused CPU decoder ops (see csrc/cpuops.c)", -1,
                                    methods};

PyMODINIT_FUNC PyInit__cpuops(void) { return PyModule_Create(&module); }
