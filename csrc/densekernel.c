/* Python binding of structgen's CPU dense small-M matmul (the kernel and why: dense_core.h).
 * Exposed as structgen.runtime.cpu._densekernel (METH_FASTCALL, raw data pointers as ints;
 * the caller, structgen/runtime/cpu/dense.py, checks shapes and dtypes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dense_core.h"
#include "sg_pybind.h"

/* dense_mm(x_ptr, ldx, w_ptr, dt, bias_ptr_or_0, y_ptr, M, N, K, threads) -> None;
 * dt: 0 fp32, 1 bf16 (x, w, bias and y all in dt) */
static PyObject *py_dense_mm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "dense_mm takes 10 arguments");
        return NULL;
    }
    long long v[10];
    for (int i = 0; i < 10; i++) {
        v[i] = PyLong_AsLongLong(args[i]);
        if (v[i] == -1 && PyErr_Occurred()) return NULL;
    }
    int bf16 = (int)v[3], M = (int)v[6], N = (int)v[7], K = (int)v[8];
    if (M < 1 || M > MAX_M || N < 1 || K < 1 || v[1] < K || (bf16 != 0 && bf16 != 1)) {
        PyErr_SetString(PyExc_ValueError, "dense_mm: need 1 <= M <= 8, N >= 1, K >= 1, ldx >= K, dt 0 or 1");
        return NULL;
    }
    const void *x = (const void *)(intptr_t)v[0];
    float stack_buf[X_STACK_FLOATS], *heap_buf = NULL, *buf = stack_buf;
    if ((bf16 || v[1] != K) && (size_t)M * K > X_STACK_FLOATS) {
        heap_buf = buf = (float *)malloc((size_t)M * K * sizeof(float));
        if (!heap_buf) return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    const float *xf = x_as_fp32(x, v[1], bf16, M, K, buf);
    dense_mm(xf, (const void *)(intptr_t)v[2], bf16, (const void *)(intptr_t)v[4],
             (void *)(intptr_t)v[5], M, N, K, (int)v[9]);
    Py_END_ALLOW_THREADS
    free(heap_buf);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"dense_mm", (PyCFunction)(void (*)(void))py_dense_mm, METH_FASTCALL,
     "dense_mm(x, ldx, w, dt, bias_or_0, y, M, N, K, threads): y = x @ w.T (+ bias), raw pointers, "
     "dt 0 fp32 / 1 bf16 for all four"},
    SG_ISA_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_densekernel",
                                    "structgen's CPU dense small-M matmul (see csrc/densekernel.c)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__densekernel(void) { return PyModule_Create(&module); }
