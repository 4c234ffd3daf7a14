/* Whether a regex state's term can have a count to share, read in C (for
 * structgen/fsm/index/count_masks.py CountView.may_share).
 *
 * CountView.canonical(t) walks t as far as _canon does (concatenation spines up to `reach`
 * non-nullable heads, alternations' members, repetitions' bodies), interning the canonical term
 * only where it meets a repetition X{lo,hi} of a byte class with a finite hi >= MIN_SHARED_HI
 * that some token holds MIN_RUN bytes of in a row. Most states of a schema have none within
 * reach, and for them canonical's answer is (t, no bounds) after ~6 Python calls per state.
 * count_reach makes the same walk without interning anything and answers whether such a
 * repetition is met at all (the vocabulary's MIN_RUN test left out: a superset), so a 0 here
 * means canonical's answer is (t, no bounds), exactly.
 *
 *   count_reach(kind, args, nullable, depth, t, budget, limits) -> bool
 *     kind, args, nullable, depth: the TermArena's lists (only ever appended to)
 *     t       the term; budget: canonical's reach
 *     limits  (min_hi, max_depth, max_members, max_spine): count_masks.py's MIN_SHARED_HI,
 *             _MAX_DEPTH, _MAX_MEMBERS, _MAX_SPINE, which bound _canon's walk the same way
 *   True: a repetition is met (or the walk passed REACH_MAX_VISITS terms or REACH_MAX_LEVEL
 *   levels: "maybe", the caller canonicalises); False: none.
 *
 * Errors: TypeError for arguments of the wrong type, IndexError for a term outside the
 * arena. The GIL is held throughout; nothing is written. Called without the automaton's lock:
 * a term and its subterms were appended to all four lists before the term's id was handed out,
 * so the walk reads only terms below the shortest list's length (another thread may be
 * between two appends of a new term).
 */
#ifndef SG_COUNT_REACH_H
#define SG_COUNT_REACH_H

#include <Python.h>

enum {
    CR_BYTES = 2, CR_CONCAT = 3, CR_ALT = 4, CR_REPEAT = 5, /* terms.py's kinds */
    CR_INF = -1,                                           /* terms.py's INF */
    REACH_MAX_VISITS = 4096, /* terms visited per call before answering "maybe" */
    REACH_MAX_LEVEL = 256,   /* recursion levels before answering "maybe" */
};

typedef struct {
    PyObject *kind, *args, *nullable, *depth; /* borrowed lists */
    Py_ssize_t n; /* terms complete in all four lists (another thread may be mid-intern) */
    long min_hi, max_depth, max_members, max_spine;
    long visits;
} Reach;

static long reach_long(PyObject *list, Py_ssize_t t) {
    return PyLong_AsLong(PyList_GET_ITEM(list, t));
}

static Py_ssize_t reach_arg(PyObject *args, Py_ssize_t k) {
    return PyLong_AsSsize_t(PyTuple_GET_ITEM(args, k));
}

/* 1: a repetition to share is met walking t with budget as _canon(t, budget) walks; 0: none
 * (with an error set the answer is meaningless: the caller checks PyErr_Occurred) */
static int reach_term(Reach *r, Py_ssize_t t, long budget, int level) {
    if (budget <= 0)
        return 0;
    if (t < 0 || t >= r->n) {
        PyErr_Format(PyExc_IndexError, "count_reach: term %zd outside the arena", t);
        return 0;
    }
    if (++r->visits > REACH_MAX_VISITS || level > REACH_MAX_LEVEL)
        return 1;
    long k = reach_long(r->kind, t);
    if ((k != CR_REPEAT && k != CR_ALT && k != CR_CONCAT) || reach_long(r->depth, t) > r->max_depth)
        return 0;
    PyObject *a = PyList_GET_ITEM(r->args, t);
    if (!PyTuple_CheckExact(a) || PyTuple_GET_SIZE(a) < (k == CR_REPEAT ? 3 : k == CR_CONCAT ? 2 : 0)) {
        PyErr_Format(PyExc_TypeError, "count_reach: term %zd has malformed arguments", t);
        return 0;
    }
    if (k == CR_REPEAT) { /* (x, lo, hi) */
        Py_ssize_t x = reach_arg(a, 0);
        if (x < 0 || x >= r->n)
            return 0;
        if (reach_long(r->kind, x) == CR_BYTES) {
            long hi = (long)reach_arg(a, 2);
            return hi != CR_INF && hi >= r->min_hi;
        }
        return reach_term(r, x, budget, level + 1);
    }
    if (k == CR_ALT) { /* members */
        Py_ssize_t n = PyTuple_GET_SIZE(a);
        if (n > r->max_members)
            return 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (reach_term(r, reach_arg(a, i), budget, level + 1) || PyErr_Occurred())
                return 1;
        return 0;
    }
    Py_ssize_t cur = t; /* a concatenation: its spine's heads, then what is left of it */
    long left = budget, heads = 0;
    while (left > 0 && heads < r->max_spine) {
        if (cur < 0 || cur >= r->n || reach_long(r->kind, cur) != CR_CONCAT)
            break;
        PyObject *ca = PyList_GET_ITEM(r->args, cur);
        if (!PyTuple_CheckExact(ca) || PyTuple_GET_SIZE(ca) != 2) {
            PyErr_Format(PyExc_TypeError, "count_reach: term %zd has malformed arguments", cur);
            return 0;
        }
        Py_ssize_t h = reach_arg(ca, 0);
        cur = reach_arg(ca, 1);
        if (reach_term(r, h, left, level + 1) || PyErr_Occurred())
            return 1;
        left -= PyList_GET_ITEM(r->nullable, h) != Py_True;
        heads++;
    }
    return left > 0 ? reach_term(r, cur, left, level + 1) : 0;
}

/* count_reach(kind, args, nullable, depth, t, budget, limits): see the header */
static PyObject *count_reach(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1])
        || !PyList_CheckExact(args[2]) || !PyList_CheckExact(args[3])
        || !PyTuple_CheckExact(args[6]) || PyTuple_GET_SIZE(args[6]) != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "count_reach(kind, args, nullable, depth, t, budget, "
                        "(min_hi, max_depth, max_members, max_spine))");
        return NULL;
    }
    Reach r = {args[0], args[1], args[2], args[3], PyList_GET_SIZE(args[0]), 0, 0, 0, 0, 0};
    for (int k = 1; k < 4; k++) /* a term and its subterms are complete in all four */
        if (PyList_GET_SIZE(args[k]) < r.n)
            r.n = PyList_GET_SIZE(args[k]);
    long *lim[4] = {&r.min_hi, &r.max_depth, &r.max_members, &r.max_spine};
    for (int k = 0; k < 4; k++) {
        *lim[k] = PyLong_AsLong(PyTuple_GET_ITEM(args[6], k));
        if (*lim[k] == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_ssize_t t = PyLong_AsSsize_t(args[4]);
    long budget = PyLong_AsLong(args[5]);
    if ((t == -1 || budget == -1) && PyErr_Occurred())
        return NULL;
    int found = reach_term(&r, t, budget, 0);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(found);
}

#endif
