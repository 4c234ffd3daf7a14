/* Python-binding pieces shared by the CPU-kernel extensions (dense, fused ops, decode step):
 * the isa() / set_isa() functions every one exposes (the run-time ISA choice of sg_simd.h: each
 * extension holds its own copy of it), and the METH_FASTCALL argument reader. Include after
 * Python.h and sg_simd.h; list SG_ISA_METHODS in the module's method table. */
#ifndef SG_PYBIND_H
#define SG_PYBIND_H

#include <string.h>

/* args[0 .. want) into v: ints (pointers, sizes) as they are, Python floats as their double's
 * bits (read back with sg_arg_float); TypeError on a wrong count, -1 with the error set */
static inline int sg_get_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, long long *v,
                              const char *name) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments", name, (int)want);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (PyFloat_Check(args[i])) {
            double f = PyFloat_AsDouble(args[i]);
            memcpy(&v[i], &f, sizeof f);
            continue;
        }
        v[i] = PyLong_AsLongLong(args[i]);
        if (v[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* the float that sg_get_args stored as bits */
static inline float sg_arg_float(long long bits) {
    double f;
    memcpy(&f, &bits, sizeof f);
    return (float)f;
}

/* isa() -> 'avx2' or 'scalar': the instruction set in use */
static PyObject *py_isa(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyUnicode_FromString(sg_use_avx2() ? "avx2" : "scalar");
}

/* set_isa('scalar' | 'avx2' | 'auto'): force the portable code or the AVX2 loops without
 * AVX-512 (tests), or back to detection */
static PyObject *py_set_isa(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    if (sg_set_isa(name) != 0) {
        PyErr_SetString(PyExc_ValueError, "isa must be 'scalar', 'avx2' or 'auto'");
        return NULL;
    }
    Py_RETURN_NONE;
}

#define SG_ISA_METHODS                                                                  \
    {"isa", py_isa, METH_NOARGS, "the instruction set in use: 'avx2' or 'scalar'"},     \
        {"set_isa", py_set_isa, METH_O, "force 'scalar' or 'avx2' (tests) or back to 'auto'"}

#endif /* SG_PYBIND_H */
