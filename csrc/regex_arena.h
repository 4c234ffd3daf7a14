/* The arena's smart constructors in C (structgen/fsm/regex/terms.py TermArena: byteset,
 * _concat2, concat, alt, alt_members, repeat, bytes_then, seq), writing into the Python-level
 * arena (its lists kind/args/nullable/first/depth and dict _ids) the same keys, values and
 * interning order as terms.py. Shared by the regex lowering (csrc/regexlower.c) and the
 * derivatives (csrc/regex_derive.h). The GIL is held throughout.
 */
#ifndef SG_REGEX_ARENA_H
#define SG_REGEX_ARENA_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "regex_tokens.h"  /* INF */

enum { T_EMPTY = 0, T_EPS = 1, K_BYTES = 2, K_CONCAT = 3, K_ALT = 4, K_REPEAT = 5, K_UNTIL = 6,
       MAX_DEPTH = 100000, SPINE0 = 256, SPINE_MAX = 256,
       PLACEHOLDER_BASE = 0xF0000 };
typedef struct {
    PyObject *ids, *kind, *args, *nullable, *first, *depth, *single;  /* borrowed */
    Py_ssize_t max_terms;
    PyObject *arena, *helper, *memo, *low, *text;                     /* borrowed */
    PyObject *recipes;  /* borrowed: lower.py's _ATOM_RECIPES, or NULL (always ask helper.atom) */
    PyObject *shared;   /* owned: low.shared, the definitions' terms placeholders stand for */
    PyObject *k_bytes, *k_concat, *k_alt, *k_repeat;                  /* owned: ints 2 3 4 5 */
} Ctx;

/* item appended to list, its reference taken (NULL: the error already set); -1 on error */
static int append_steal(PyObject *list, PyObject *item) {
    if (item == NULL)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

/* seqobj's items appended to list; -1 on error */
static int extend(PyObject *list, PyObject *seqobj) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    return PyList_SetSlice(list, n, n, seqobj);
}

/* ---- arena constructors (regex/terms.py TermArena) ------------------------------ */

static long term_kind(Ctx *cx, PyObject *t) {
    return PyLong_AsLong(PyList_GET_ITEM(cx->kind, PyLong_AsSsize_t(t)));
}

static Py_ssize_t ix(PyObject *t) { return PyLong_AsSsize_t(t); }

/* arena._ids[key] if interned: new reference; NULL without an error set if not */
static PyObject *lookup(Ctx *cx, PyObject *key) {
    PyObject *hit = PyDict_GetItemWithError(cx->ids, key);
    Py_XINCREF(hit);
    return hit;
}

/* arena._add(key, kind, args, nullable, first, depth) for a key not interned: new reference.
 * Past the depth or term budget the arena's own _add is called, which raises its error. */
static PyObject *add(Ctx *cx, PyObject *key, PyObject *kind, PyObject *args, int null,
                     PyObject *first, long depth) {
    PyObject *dep = PyLong_FromLong(depth);
    if (dep == NULL)
        return NULL;
    PyObject *nul = null ? Py_True : Py_False, *result;
    Py_ssize_t tid = PyList_GET_SIZE(cx->kind);
    if (depth > MAX_DEPTH || tid >= cx->max_terms) {
        result = PyObject_CallMethod(cx->arena, "_add", "OOOOOO", key, kind, args, nul, first, dep);
    } else {
        result = PyLong_FromSsize_t(tid);
        if (result == NULL || PyDict_SetItem(cx->ids, key, result) < 0
            || PyList_Append(cx->kind, kind) < 0 || PyList_Append(cx->args, args) < 0
            || PyList_Append(cx->nullable, nul) < 0 || PyList_Append(cx->first, first) < 0
            || PyList_Append(cx->depth, dep) < 0)
            Py_CLEAR(result);
    }
    Py_DECREF(dep);
    return result;
}

static long depth_of(Ctx *cx, Py_ssize_t t) {
    return PyLong_AsLong(PyList_GET_ITEM(cx->depth, t));
}

static int nullable_of(Ctx *cx, Py_ssize_t t) {
    return PyList_GET_ITEM(cx->nullable, t) == Py_True;
}

/* _concat2(h, t): new reference */
static PyObject *concat2(Ctx *cx, PyObject *h, PyObject *t) {
    PyObject *key = PyTuple_Pack(3, cx->k_concat, h, t);
    if (key == NULL)
        return NULL;
    PyObject *hit = lookup(cx, key);
    if (hit != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return hit;
    }
    Py_ssize_t hi = ix(h), ti = ix(t);
    int nh = nullable_of(cx, hi), nt = nullable_of(cx, ti);
    PyObject *fh = PyList_GET_ITEM(cx->first, hi);
    PyObject *first = nh ? PyNumber_Or(fh, PyList_GET_ITEM(cx->first, ti)) : Py_NewRef(fh);
    long dh = depth_of(cx, hi) + 1, dt = depth_of(cx, ti);
    PyObject *args = PyTuple_Pack(2, h, t), *result = NULL;
    if (first != NULL && args != NULL)
        result = add(cx, key, cx->k_concat, args, nh && nt, first, dh > dt ? dh : dt);
    Py_DECREF(key);
    Py_XDECREF(first);
    Py_XDECREF(args);
    return result;
}

/* byteset(mask): one byte out of the 256-bit int mask, EMPTY for 0; new reference */
static PyObject *byteset(Ctx *cx, PyObject *mask) {
    int nonzero = PyObject_IsTrue(mask);
    if (nonzero <= 0)
        return nonzero < 0 ? NULL : PyLong_FromLong(T_EMPTY);
    PyObject *key = PyTuple_Pack(2, cx->k_bytes, mask);
    if (key == NULL)
        return NULL;
    PyObject *result = lookup(cx, key);
    if (result == NULL && !PyErr_Occurred()) {
        PyObject *args = PyTuple_Pack(1, mask);
        if (args != NULL)
            result = add(cx, key, cx->k_bytes, args, 0, mask, 0);
        Py_XDECREF(args);
    }
    Py_DECREF(key);
    return result;
}

/* alt_members(members): the ALT term of a sorted, distinct, flat tuple (terms.py); new ref */
static PyObject *alt_members(Ctx *cx, PyObject *members) {
    PyObject *key = PyTuple_Pack(2, cx->k_alt, members);
    if (key == NULL)
        return NULL;
    PyObject *result = lookup(cx, key);
    if (result != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return result;
    }
    PyObject *first = PyLong_FromLong(0);
    int null = 0;
    long depth = 0;
    for (Py_ssize_t k = 0; first != NULL && k < PyTuple_GET_SIZE(members); k++) {
        Py_ssize_t t = ix(PyTuple_GET_ITEM(members, k));
        Py_SETREF(first, PyNumber_Or(first, PyList_GET_ITEM(cx->first, t)));
        null = null || nullable_of(cx, t);
        long d = depth_of(cx, t);
        depth = d > depth ? d : depth;
    }
    if (first != NULL)
        result = add(cx, key, cx->k_alt, members, null, first, depth + 1);
    Py_DECREF(key);
    Py_XDECREF(first);
    return result;
}

/* a term: its id, and the int object that names it (borrowed: the arena's or the caller's,
 * reused in the tuples built from it, as the Python constructors reuse their ints) */
typedef struct {
    Py_ssize_t id;
    PyObject *obj;
} Member;

static int cmp_member(const void *a, const void *b) {
    Py_ssize_t x = ((const Member *)a)->id, y = ((const Member *)b)->id;
    return (x > y) - (x < y);
}

/* a tuple of the terms ms[0..n): new reference */
static PyObject *term_tuple(const Member *ms, Py_ssize_t n) {
    PyObject *tup = PyTuple_New(n);
    for (Py_ssize_t k = 0; tup != NULL && k < n; k++)
        PyTuple_SET_ITEM(tup, k, Py_NewRef(ms[k].obj));
    return tup;
}

/* alt(items): terms.py TermArena.alt for a list: flattened, byte sets merged into one,
 * EPS dropped beside a nullable member, sorted and deduplicated; new reference */
static PyObject *alt(Ctx *cx, PyObject *items) {
    Py_ssize_t n = PyList_GET_SIZE(items);
    if (n == 1)
        return Py_NewRef(PyList_GET_ITEM(items, 0));
    Py_ssize_t cap = 16, num = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t t = ix(PyList_GET_ITEM(items, k));
        if (term_kind(cx, PyList_GET_ITEM(items, k)) == K_ALT)
            cap += PyTuple_GET_SIZE(PyList_GET_ITEM(cx->args, t));
        else
            cap++;
    }
    Member *flat = PyMem_Malloc(sizeof(Member) * cap);
    if (flat == NULL)
        return PyErr_NoMemory();
    PyObject *mask = NULL, *result = NULL, *bs = NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t t = ix(PyList_GET_ITEM(items, k));
        long kt = PyLong_AsLong(PyList_GET_ITEM(cx->kind, t));
        PyObject *a = PyList_GET_ITEM(cx->args, t);
        if (kt == K_ALT) {
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(a); j++) {
                Py_ssize_t u = ix(PyTuple_GET_ITEM(a, j));
                if (PyLong_AsLong(PyList_GET_ITEM(cx->kind, u)) == K_BYTES) {
                    PyObject *m = PyTuple_GET_ITEM(PyList_GET_ITEM(cx->args, u), 0);
                    Py_XSETREF(mask, mask == NULL ? Py_NewRef(m) : PyNumber_Or(mask, m));
                    if (mask == NULL)
                        goto done;
                } else {
                    flat[num++] = (Member){u, PyTuple_GET_ITEM(a, j)};
                }
            }
        } else if (kt == K_BYTES) {
            PyObject *m = PyTuple_GET_ITEM(a, 0);
            Py_XSETREF(mask, mask == NULL ? Py_NewRef(m) : PyNumber_Or(mask, m));
            if (mask == NULL)
                goto done;
        } else if (t != T_EMPTY) {
            flat[num++] = (Member){t, PyList_GET_ITEM(items, k)};
        }
    }
    if (mask != NULL) {
        bs = byteset(cx, mask);  /* held until the members' tuple is built */
        if (bs == NULL)
            goto done;
        Py_ssize_t b = ix(bs);
        if (b != T_EMPTY)
            flat[num++] = (Member){b, bs};
    }
    qsort(flat, num, sizeof(Member), cmp_member);
    Py_ssize_t m = 0;
    for (Py_ssize_t k = 0; k < num; k++)
        if (m == 0 || flat[m - 1].id != flat[k].id)
            flat[m++] = flat[k];
    num = m;
    if (num > 1 && flat[0].id == T_EPS) {  /* sorted: EPS (1) leads when present */
        int other_nullable = 0;
        for (Py_ssize_t k = 1; k < num && !other_nullable; k++)
            other_nullable = nullable_of(cx, flat[k].id);
        if (other_nullable) {
            memmove(flat, flat + 1, sizeof(Member) * (num - 1));
            num--;
        }
    }
    if (num == 0) {
        result = PyLong_FromLong(T_EMPTY);
    } else if (num == 1) {
        result = Py_NewRef(flat[0].obj);
    } else {
        PyObject *members = term_tuple(flat, num);
        if (members != NULL)
            result = alt_members(cx, members);
        Py_XDECREF(members);
    }
done:
    Py_XDECREF(mask);
    Py_XDECREF(bs);
    PyMem_Free(flat);
    return result;
}

/* repeat(x, lo, hi): x{lo,hi} kept as a count (hi INF: unbounded), terms.py; new reference */
static PyObject *repeat(Ctx *cx, PyObject *x, long long lo, long long hi) {
    if (hi != INF && hi < lo)
        return PyLong_FromLong(T_EMPTY);
    Py_ssize_t xi = ix(x);
    if (xi == T_EMPTY)
        return PyLong_FromLong(lo == 0 ? T_EPS : T_EMPTY);
    if (xi == T_EPS || hi == 0)
        return PyLong_FromLong(T_EPS);
    if (nullable_of(cx, xi))
        lo = 0;
    if (lo == 1 && hi == 1)
        return Py_NewRef(x);
    if (PyLong_AsLong(PyList_GET_ITEM(cx->kind, xi)) == K_REPEAT) {
        PyObject *a = PyList_GET_ITEM(cx->args, xi);  /* (y*){lo,hi} == y* for hi >= 1 */
        if (PyLong_AsLong(PyTuple_GET_ITEM(a, 1)) == 0 && PyLong_AsLong(PyTuple_GET_ITEM(a, 2)) == INF)
            return Py_NewRef(x);
    }
    PyObject *plo = PyLong_FromLongLong(lo), *phi = PyLong_FromLongLong(hi);
    PyObject *key = (plo && phi) ? PyTuple_Pack(4, cx->k_repeat, x, plo, phi) : NULL;
    PyObject *result = key ? lookup(cx, key) : NULL;
    if (key != NULL && result == NULL && !PyErr_Occurred()) {
        PyObject *args = PyTuple_Pack(3, x, plo, phi);
        if (args != NULL)
            result = add(cx, key, cx->k_repeat, args, lo == 0, PyList_GET_ITEM(cx->first, xi),
                         depth_of(cx, xi) + 1);
        Py_XDECREF(args);
    }
    Py_XDECREF(plo);
    Py_XDECREF(phi);
    Py_XDECREF(key);
    return result;
}

/* concat(head, tail), re-associated to the right: new reference */
static PyObject *concat(Ctx *cx, PyObject *head, PyObject *tail) {
    long hv = PyLong_AsLong(head), tv = PyLong_AsLong(tail);
    if (hv == T_EMPTY || tv == T_EMPTY)
        return PyLong_FromLong(T_EMPTY);
    if (hv == T_EPS) {
        Py_INCREF(tail);
        return tail;
    }
    if (tv == T_EPS) {
        Py_INCREF(head);
        return head;
    }
    PyObject *heads[SPINE0];
    PyObject **hs = heads, **big = NULL;
    Py_ssize_t nh = 0, cap = SPINE0;
    PyObject *whole = head;
    while (term_kind(cx, head) == K_CONCAT) {  /* a concat spine is as long as its text */
        if (nh == SPINE_MAX) {  /* a long spine stays whole, as the head (terms.py) */
            PyMem_Free(big);
            return concat2(cx, whole, tail);
        }
        PyObject *a = PyList_GET_ITEM(cx->args, PyLong_AsSsize_t(head));
        if (nh + 1 >= cap) {
            PyObject **grown = PyMem_Malloc(sizeof(PyObject *) * cap * 2);
            if (grown == NULL) {
                PyMem_Free(big);
                return PyErr_NoMemory();
            }
            memcpy(grown, hs, sizeof(PyObject *) * nh);
            PyMem_Free(big);
            hs = big = grown;
            cap *= 2;
        }
        hs[nh++] = PyTuple_GET_ITEM(a, 0);
        head = PyTuple_GET_ITEM(a, 1);
    }
    hs[nh++] = head;
    Py_INCREF(tail);
    PyObject *result = tail;
    for (Py_ssize_t k = nh - 1; k >= 0 && result != NULL; k--) {
        PyObject *next = concat2(cx, hs[k], result);
        Py_DECREF(result);
        result = next;
    }
    PyMem_Free(big);
    return result;
}

/* bytes_then(data, tail): new reference */
static PyObject *bytes_then(Ctx *cx, PyObject *data, PyObject *tail) {
    if (PyLong_AsLong(tail) == T_EMPTY) {
        Py_INCREF(tail);
        return tail;
    }
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_INCREF(tail);
    PyObject *result = tail;
    for (Py_ssize_t k = PyBytes_GET_SIZE(data) - 1; k >= 0; k--) {
        PyObject *h = PyList_GET_ITEM(cx->single, b[k]);
        if (h == Py_None) {
            PyObject *mask = PyLong_FromLong(1);
            PyObject *shift = PyLong_FromLong(b[k]);
            PyObject *bit = (mask && shift) ? PyNumber_Lshift(mask, shift) : NULL;
            Py_XDECREF(mask);
            Py_XDECREF(shift);
            h = bit ? byteset(cx, bit) : NULL;
            Py_XDECREF(bit);
            if (h == NULL || PyList_SetItem(cx->single, b[k], h) < 0) {  /* steals h */
                Py_DECREF(result);
                return NULL;
            }
        }
        PyObject *next;
        if (PyLong_AsLong(result) == T_EPS) {
            Py_INCREF(h);
            next = h;
        } else {
            next = concat2(cx, h, result);
        }
        Py_DECREF(result);
        result = next;
        if (result == NULL)
            return NULL;
    }
    return result;
}

/* _seq(items): items a list or tuple of terms and literal bytes; new reference */
static PyObject *seq(Ctx *cx, PyObject *items) {
    PyObject *result = PyLong_FromLong(T_EPS);
    for (Py_ssize_t k = PySequence_Fast_GET_SIZE(items) - 1; k >= 0 && result != NULL; k--) {
        PyObject *item = PySequence_Fast_GET_ITEM(items, k);
        PyObject *next = PyBytes_CheckExact(item) ? bytes_then(cx, item, result)
                                                  : concat(cx, item, result);
        Py_DECREF(result);
        result = next;
    }
    return result;
}

/* arena.alt(alts + [seq(items)]): new reference */
static PyObject *close_alt(Ctx *cx, PyObject *alts, PyObject *items) {
    PyObject *last = seq(cx, items);
    if (last == NULL || PyList_Append(alts, last) < 0) {
        Py_XDECREF(last);
        return NULL;
    }
    Py_DECREF(last);
    return alt(cx, alts);
}

#endif  /* SG_REGEX_ARENA_H */
