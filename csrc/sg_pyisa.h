/* The isa() / set_isa() Python functions every CPU-kernel extension exposes (the run-time ISA
 * choice of sg_simd.h: each extension holds its own copy of it). Include after Python.h and
 * sg_simd.h; list SG_ISA_METHODS in the module's method table. */
#ifndef SG_PYISA_H
#define SG_PYISA_H

/* isa() -> 'avx2' or 'scalar': the instruction set in use */
static PyObject *py_isa(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyUnicode_FromString(sg_use_avx2() ? "avx2" : "scalar");
}

/* set_isa('scalar' | 'auto'): force the portable code (tests), or back to detection */
static PyObject *py_set_isa(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    if (sg_set_isa(name) != 0) {
        PyErr_SetString(PyExc_ValueError, "isa must be 'scalar' or 'auto'");
        return NULL;
    }
    Py_RETURN_NONE;
}

#define SG_ISA_METHODS                                                                  \
    {"isa", py_isa, METH_NOARGS, "the instruction set in use: 'avx2' or 'scalar'"},     \
        {"set_isa", py_set_isa, METH_O, "force 'scalar' (tests) or back to 'auto'"}

#endif /* SG_PYISA_H */
