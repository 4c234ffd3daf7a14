/* Brzozowski derivatives and fronts of arena terms in C (structgen/fsm/regex/terms.py
 * TermArena.derivative and TermArena.front), for the lazy DFA's row builder
 * (structgen/fsm/regex/lazy_dfa.py: one row per new state, one derivative per byte class).
 *
 *   context(arena) -> capsule
 *     the arena's lists and caches, held once (TermArena keeps it as _cctx: the lists are
 *     only ever appended to, never replaced), and each term's first set as a C mask once
 *     read (first_mask); every call below takes the arena and it.
 *   derivative(arena, context, t, b) -> int term
 *     TermArena.derivative(t, b) for a term of kind BYTES, CONCAT, ALT or REPEAT: the same
 *     recursion and simplifications, the smart constructors of csrc/regex_arena.h, so the
 *     same terms are interned in the same order as the Python method (same ids); every
 *     derivative taken on the way is stored in arena._deriv (key t << 8 | b), as there.
 *     Subterms of kind UNTIL, AND or NOT are handed to arena.derivative (Python). A long
 *     alternation's members by first byte (TermArena._alt_members) read from its grouping in
 *     arena._alt_index, built here when missing (alt_groups_of: the Python method's groups).
 *   fill_row(arena, context, t, row, ids, state_of) -> None
 *     ByteDFA._build_row's whole row of term t in an arena without AND / NOT: the row (a
 *     writable int32 [256]) set to -1, then each live class of first(t) in the refinement of
 *     front(t) (by lowest byte, as _live_classes) to the state of the derivative by its lowest byte: ids
 *     (ByteDFA._ids) read, state_of (ByteDFA._state_of) called for a new term; a literal's row
 *     (one byte, or CONCAT(byte, tail)) without a derivative, as _literal_row.
 *   The row builder itself (row_fill, for fill_row and csrc/dfa_rows.h) takes the state of a
 *   term from a StateIdFn (Python's _state_of here, dfa_rows.h's C one there) and can build a
 *   lazy row for the token-trie walk (ROW_PENDING classes, one derived: _build_row(lazy=True)
 *   then _derive_class); row_derive_class derives one pending class later.
 *   front(arena, context, t) -> frozenset of int masks
 *     TermArena.front(t), stored in arena._front for t and every subterm on the way, as there.
 *
 * Both are called by the Python methods after their own checks (first byte, cache, depth: a
 * term deeper than terms.py's _SHALLOW has its subterms' results cached bottom-up first), so
 * the recursion here is at most _SHALLOW levels deep. Exceptions of the arena (its term and
 * depth budgets, GrammarTooComplexError) propagate. The GIL is held.
 */
#ifndef SG_REGEX_DERIVE_H
#define SG_REGEX_DERIVE_H

#include "regex_arena.h"

enum { ALT_INDEX_MIN = 8, K_AND = 7, K_NOT = 8, SHALLOW = 64 /* terms.py _SHALLOW */,
       ROW_PENDING = -2 /* lazy_dfa.py PENDING: a row entry whose class is not derived yet */ };

typedef struct {
    uint64_t w[4];
} Mask256;

typedef struct {
    Ctx cx;                 /* the constructors' view of the arena (owned references) */
    PyObject *deriv;        /* owned: arena._deriv */
    PyObject *front;        /* owned: arena._front */
    PyObject *alt_index;    /* owned: arena._alt_index */
    PyObject *has_bool;     /* owned: arena._has_boolean */
    PyObject *empty;        /* owned: arena._empty */
    /* first(t) of the terms read so far as C masks (first_mask): firsts[t] valid where
     * known[t]; room for cap_firsts terms. A term's first never changes (the arena's lists
     * are only appended to while a context exists), so an entry is read from arena.first
     * once. */
    Mask256 *firsts;
    uint8_t *known;
    Py_ssize_t cap_firsts;
} Deriv;

/* The arena attributes the row builder reads and sets per derivative, as interned names
 * made on first use (the GIL is held): a name given as C text would be a new str per call,
 * hashed and missed by the type's attribute cache each time. Borrowed, process-lifetime;
 * NULL with an error set where the name cannot be made. */
static PyObject *nm_bottom_up_active, *nm_deep_levels;

static PyObject *name_of(PyObject **slot, const char *text) {
    if (*slot == NULL)
        *slot = PyUnicode_InternFromString(text);
    return *slot;
}

/* obj.<name> through an interned name; new reference, NULL with an error set */
static PyObject *attr_named(PyObject *obj, PyObject **slot, const char *text) {
    PyObject *name = name_of(slot, text);
    return name == NULL ? NULL : PyObject_GetAttr(obj, name);
}

/* the 256-bit mask int v as 32 little-endian bytes; 0, or -1 with an error set */
static int mask_bytes(PyObject *v, unsigned char buf[32]) {
#if PY_VERSION_HEX >= 0x030D0000
    return PyLong_AsNativeBytes(v, buf, 32,
                                Py_ASNATIVEBYTES_LITTLE_ENDIAN | Py_ASNATIVEBYTES_UNSIGNED_BUFFER)
                   < 0
               ? -1
               : 0;
#else
    return _PyLong_AsByteArray((PyLongObject *)v, buf, 32, 1, 0) < 0 ? -1 : 0;
#endif
}

/* bit b of the 256-bit mask int: 1 / 0, -1 on error */
static int mask_bit(PyObject *mask, int b) {
    unsigned char buf[32];
    return mask_bytes(mask, buf) < 0 ? -1 : (buf[b >> 3] >> (b & 7)) & 1;
}

static int mask_of(PyObject *v, Mask256 *m) {
    unsigned char buf[32];
    if (mask_bytes(v, buf) < 0)
        return -1;
    for (int k = 0; k < 4; k++) {
        uint64_t x = 0;
        for (int j = 7; j >= 0; j--)
            x = (x << 8) | buf[8 * k + j];
        m->w[k] = x;
    }
    return 0;
}

static int mask_lowest(const Mask256 *m) {
    for (int k = 0; k < 4; k++)
        if (m->w[k])
            return 64 * k + __builtin_ctzll(m->w[k]);
    return -1;
}

/* *out = first(t) (arena.first[t]) as a C mask, converted once per term and kept in the
 * context (copied out: a later call may move the table); 0, or -1 with an error set */
static int first_mask(Deriv *dv, Py_ssize_t t, Mask256 *out) {
    if (t >= 0 && t < dv->cap_firsts && dv->known[t]) {
        *out = dv->firsts[t];
        return 0;
    }
    Py_ssize_t n = PyList_GET_SIZE(dv->cx.first);
    if (t < 0 || t >= n) {
        PyErr_Format(PyExc_IndexError, "first_mask: no term %zd", t);
        return -1;
    }
    if (t >= dv->cap_firsts) {
        Py_ssize_t cap = dv->cap_firsts ? dv->cap_firsts : 4096;
        while (cap < n)
            cap *= 2;
        Mask256 *firsts = PyMem_Realloc(dv->firsts, sizeof(Mask256) * cap);
        if (firsts == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        dv->firsts = firsts;
        uint8_t *known = PyMem_Realloc(dv->known, cap);
        if (known == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(known + dv->cap_firsts, 0, cap - dv->cap_firsts);
        dv->known = known;
        dv->cap_firsts = cap;
    }
    if (mask_of(PyList_GET_ITEM(dv->cx.first, t), &dv->firsts[t]) < 0)
        return -1;
    dv->known[t] = 1;
    *out = dv->firsts[t];
    return 0;
}

/* bit b of first(t): 1 / 0, -1 with an error set */
static int first_bit(Deriv *dv, Py_ssize_t t, int b) {
    Mask256 m;
    return first_mask(dv, t, &m) < 0 ? -1 : (int)((m.w[b >> 6] >> (b & 63)) & 1);
}

static void deriv_close(Deriv *dv) {
    Ctx *cx = &dv->cx;
    PyObject *owned[] = {cx->ids, cx->kind, cx->args, cx->nullable, cx->first, cx->depth,
                         cx->single, cx->k_bytes, cx->k_concat, cx->k_alt, cx->k_repeat,
                         dv->deriv, dv->front, dv->alt_index, dv->has_bool, dv->empty};
    for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++)
        Py_XDECREF(owned[k]);
    PyMem_Free(dv->firsts);
    PyMem_Free(dv->known);
}

static PyObject *attr_of(PyObject *obj, const char *name, PyTypeObject *type) {
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v != NULL && !PyObject_TypeCheck(v, type)) {
        PyErr_Format(PyExc_TypeError, "arena.%s has the wrong type", name);
        Py_CLEAR(v);
    }
    return v;
}

/* the arena's tables and caches; 0, or -1 with an error set (deriv_close in both cases) */
static int deriv_open(Deriv *dv, PyObject *arena) {
    memset(dv, 0, sizeof *dv);
    Ctx *cx = &dv->cx;
    cx->arena = arena;
    if ((cx->ids = attr_of(arena, "_ids", &PyDict_Type)) == NULL
        || (cx->kind = attr_of(arena, "kind", &PyList_Type)) == NULL
        || (cx->args = attr_of(arena, "args", &PyList_Type)) == NULL
        || (cx->nullable = attr_of(arena, "nullable", &PyList_Type)) == NULL
        || (cx->first = attr_of(arena, "first", &PyList_Type)) == NULL
        || (cx->depth = attr_of(arena, "depth", &PyList_Type)) == NULL
        || (cx->single = attr_of(arena, "_single", &PyList_Type)) == NULL
        || (dv->deriv = attr_of(arena, "_deriv", &PyDict_Type)) == NULL
        || (dv->front = attr_of(arena, "_front", &PyDict_Type)) == NULL
        || (dv->alt_index = attr_of(arena, "_alt_index", &PyDict_Type)) == NULL
        || (dv->has_bool = attr_of(arena, "_has_boolean", &PyDict_Type)) == NULL
        || (dv->empty = attr_of(arena, "_empty", &PyDict_Type)) == NULL
        || (cx->k_bytes = PyLong_FromLong(K_BYTES)) == NULL
        || (cx->k_concat = PyLong_FromLong(K_CONCAT)) == NULL
        || (cx->k_alt = PyLong_FromLong(K_ALT)) == NULL
        || (cx->k_repeat = PyLong_FromLong(K_REPEAT)) == NULL)
        return -1;
    PyObject *mt = PyObject_GetAttrString(arena, "max_terms");
    if (mt == NULL)
        return -1;
    cx->max_terms = PyLong_AsSsize_t(mt);
    Py_DECREF(mt);
    return cx->max_terms == -1 && PyErr_Occurred() ? -1 : 0;
}

/* repeat(x, lo, hi) as TermArena.repeat, with its record of the largest finite count of a
 * byte class (arena.max_byte_count) when it interns one; new reference */
static PyObject *repeat_counted(Deriv *dv, PyObject *x, long long lo, long long hi) {
    Ctx *cx = &dv->cx;
    PyObject *r = repeat(cx, x, lo, hi);
    if (r == NULL || hi == INF || term_kind(cx, r) != K_REPEAT || term_kind(cx, x) != K_BYTES
        || PyTuple_GET_ITEM(PyList_GET_ITEM(cx->args, ix(r)), 0) != x)
        return r;  /* not interned by this call's own path (the body is x only there) */
    PyObject *cur = PyObject_GetAttrString(cx->arena, "max_byte_count");
    long long c = cur ? PyLong_AsLongLong(cur) : -1;
    Py_XDECREF(cur);
    int rc = (c == -1 && PyErr_Occurred()) ? -1 : 0;
    if (rc == 0 && hi > c) {
        PyObject *v = PyLong_FromLongLong(hi);
        rc = v ? PyObject_SetAttrString(cx->arena, "max_byte_count", v) : -1;
        Py_XDECREF(v);
    }
    if (rc < 0)
        Py_CLEAR(r);
    return r;
}

static PyObject *derive(Deriv *dv, PyObject *t, int b);

/* *acc |= f (Python's ``acc |= f`` on a set: the same insertion order); -1 on error */
static int ior(PyObject **acc, PyObject *f) {
    PyObject *r = PyNumber_InPlaceOr(*acc, f);
    if (r == NULL)
        return -1;
    Py_SETREF(*acc, r);
    return 0;
}

/* TermArena._alt_members' grouping of alternation t, built once and stored in
 * arena._alt_index[t]: [(first mask, (members with that first, in order)), ...], the masks in
 * order of first appearance (a dict's order, as the Python method's). Borrowed reference (the
 * index holds it), NULL with an error set */
static PyObject *alt_groups_of(Deriv *dv, PyObject *t, PyObject *members) {
    PyObject *by_mask = PyDict_New(), *groups = NULL;
    if (by_mask == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(members); k++) {
        PyObject *u = PyTuple_GET_ITEM(members, k);
        PyObject *mask = PyList_GET_ITEM(dv->cx.first, ix(u));
        PyObject *us = PyDict_GetItemWithError(by_mask, mask);
        if (us == NULL) {
            if (PyErr_Occurred() || (us = PyList_New(0)) == NULL)
                goto done;
            int rc = PyDict_SetItem(by_mask, mask, us);
            Py_DECREF(us);  /* the dict holds it */
            if (rc < 0)
                goto done;
        }
        if (PyList_Append(us, u) < 0)
            goto done;
    }
    groups = PyList_New(PyDict_GET_SIZE(by_mask));
    Py_ssize_t pos = 0, k = 0;
    PyObject *mask, *us;
    while (groups != NULL && PyDict_Next(by_mask, &pos, &mask, &us)) {
        PyObject *tup = PyList_AsTuple(us);
        PyObject *pair = tup == NULL ? NULL : PyTuple_Pack(2, mask, tup);
        Py_XDECREF(tup);
        if (pair == NULL)
            Py_CLEAR(groups);
        else
            PyList_SET_ITEM(groups, k++, pair);
    }
    if (groups != NULL && PyDict_SetItem(dv->alt_index, t, groups) < 0)
        Py_CLEAR(groups);
    Py_XDECREF(groups);  /* alive in the index (borrowed from here on) */
done:
    Py_DECREF(by_mask);
    return groups;
}

/* the members of alternation t that byte b can start (TermArena._alt_members): a tuple,
 * new reference */
static PyObject *alt_members_of(Deriv *dv, PyObject *t, int b) {
    PyObject *members = PyList_GET_ITEM(dv->cx.args, ix(t));
    if (PyTuple_GET_SIZE(members) < ALT_INDEX_MIN)
        return Py_NewRef(members);
    PyObject *groups = PyDict_GetItemWithError(dv->alt_index, t);
    if (groups == NULL && (PyErr_Occurred() || (groups = alt_groups_of(dv, t, members)) == NULL))
        return NULL;
    PyObject *out = PyList_New(0);
    for (Py_ssize_t k = 0; out != NULL && k < PyList_GET_SIZE(groups); k++) {
        PyObject *g = PyList_GET_ITEM(groups, k);
        int in = mask_bit(PyTuple_GET_ITEM(g, 0), b);
        if (in < 0 || (in && extend(out, PyTuple_GET_ITEM(g, 1)) < 0))
            Py_CLEAR(out);
    }
    if (out == NULL)
        return NULL;
    PyObject *tup = PyList_AsTuple(out);
    Py_DECREF(out);
    return tup;
}

/* d(x{lo,hi}) = d(x) x{lo-1,hi-1}: the rest interned first, as in Python */
static PyObject *derive_repeat(Deriv *dv, PyObject *a, int b) {
    PyObject *x = PyTuple_GET_ITEM(a, 0);
    long long lo = PyLong_AsLongLong(PyTuple_GET_ITEM(a, 1));
    long long hi = PyLong_AsLongLong(PyTuple_GET_ITEM(a, 2));
    if (PyErr_Occurred())
        return NULL;
    PyObject *rest = repeat_counted(dv, x, lo > 0 ? lo - 1 : 0, hi == INF ? INF : hi - 1);
    if (rest == NULL)
        return NULL;
    PyObject *d = derive(dv, x, b), *result = NULL;
    if (d != NULL)
        result = concat(&dv->cx, d, rest);
    Py_XDECREF(d);
    Py_DECREF(rest);
    return result;
}

/* d(a | b | ...) = da | db | ... over the members b can start */
static PyObject *derive_alt(Deriv *dv, PyObject *t, int b) {
    PyObject *members = alt_members_of(dv, t, b);
    if (members == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(members);
    PyObject *parts = PyList_New(n), *result = NULL;
    Py_ssize_t k = 0;
    for (; parts != NULL && k < n; k++) {
        PyObject *d = derive(dv, PyTuple_GET_ITEM(members, k), b);
        if (d == NULL)
            break;
        PyList_SET_ITEM(parts, k, d);
    }
    if (parts != NULL && k == n)
        result = alt(&dv->cx, parts);
    Py_XDECREF(parts);
    Py_DECREF(members);
    return result;
}

/* d(h1 h2 ... hn) walking the spine while heads are nullable (no recursion on the tail) */
static PyObject *derive_concat(Deriv *dv, PyObject *t, int b) {
    Ctx *cx = &dv->cx;
    PyObject *parts = PyList_New(0), *cur = t;
    if (parts == NULL)
        return NULL;
    for (;;) {
        if (term_kind(cx, cur) != K_CONCAT) {
            if (append_steal(parts, derive(dv, cur, b)) < 0)
                goto fail;
            break;
        }
        PyObject *a = PyList_GET_ITEM(cx->args, ix(cur));
        PyObject *h = PyTuple_GET_ITEM(a, 0), *tail = PyTuple_GET_ITEM(a, 1);
        Py_ssize_t hi = ix(h);
        int in = first_bit(dv, hi, b);
        if (in < 0)
            goto fail;
        if (in) {
            PyObject *d = derive(dv, h, b);
            PyObject *c = d ? concat(cx, d, tail) : NULL;
            Py_XDECREF(d);
            if (append_steal(parts, c) < 0)
                goto fail;
        }
        if (!nullable_of(cx, hi))
            break;
        cur = tail;
    }
    PyObject *result = alt(cx, parts);
    Py_DECREF(parts);
    return result;
fail:
    Py_DECREF(parts);
    return NULL;
}

/* TermArena.derivative(t, b): new reference */
static PyObject *derive(Deriv *dv, PyObject *t, int b) {
    Ctx *cx = &dv->cx;
    Py_ssize_t ti = ix(t);
    int in = first_bit(dv, ti, b);
    if (in <= 0)
        return in < 0 ? NULL : PyLong_FromLong(T_EMPTY);
    PyObject *key = PyLong_FromSsize_t((ti << 8) | b);
    if (key == NULL)
        return NULL;
    PyObject *hit = PyDict_GetItemWithError(dv->deriv, key);
    if (hit != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return Py_XNewRef(hit);
    }
    PyObject *result;
    switch (term_kind(cx, t)) {
    case K_BYTES:
        result = PyLong_FromLong(T_EPS);
        break;
    case K_REPEAT:
        result = derive_repeat(dv, PyList_GET_ITEM(cx->args, ti), b);
        break;
    case K_ALT:
        result = derive_alt(dv, t, b);
        break;
    case K_CONCAT:
        result = derive_concat(dv, t, b);
        break;
    default:  /* UNTIL, AND, NOT: the Python method (it stores its result) */
        Py_DECREF(key);
        return PyObject_CallMethod(cx->arena, "derivative", "Oi", t, b);
    }
    if (result != NULL && PyDict_SetItem(dv->deriv, key, result) < 0)
        Py_CLEAR(result);
    Py_DECREF(key);
    return result;
}

/* TermArena.front(t): a frozenset of int masks, new reference; stored in arena._front.
 * The frozensets made here are untracked by the cyclic GC: they hold ints only, so they can
 * never be part of a cycle, and they are most of the tracked objects of a compile (one per
 * term whose front was read, ~8,000 in a MaskBench document with a pattern + maxLength
 * string), which each collection of the older generations, set off by the allocations of
 * a mask's rows, would walk again. */
static PyObject *front_of(Deriv *dv, PyObject *t) {
    PyObject *hit = PyDict_GetItemWithError(dv->front, t);
    if (hit != NULL || PyErr_Occurred())
        return Py_XNewRef(hit);
    Ctx *cx = &dv->cx;
    Py_ssize_t ti = ix(t);
    PyObject *a = PyList_GET_ITEM(cx->args, ti), *acc = NULL, *result = NULL;
    long k = term_kind(cx, t);
    if (k == K_UNTIL)  /* the KMP step: the Python method */
        return PyObject_CallMethod(cx->arena, "front", "O", t);
    if ((acc = PySet_New(NULL)) == NULL)
        return NULL;
    int rc = 0;
    if (k == K_BYTES) {
        rc = PySet_Add(acc, PyTuple_GET_ITEM(a, 0));
    } else if (k == K_REPEAT) {
        Py_DECREF(acc);
        result = front_of(dv, PyTuple_GET_ITEM(a, 0));
        goto store;
    } else if (k == K_ALT || k == K_AND || k == K_NOT) {
        for (Py_ssize_t j = 0; rc == 0 && j < PyTuple_GET_SIZE(a); j++) {
            PyObject *f = front_of(dv, PyTuple_GET_ITEM(a, j));
            rc = f ? ior(&acc, f) : -1;
            Py_XDECREF(f);
        }
    } else if (k == K_CONCAT) {
        PyObject *cur = t;
        for (;;) {
            if (term_kind(cx, cur) != K_CONCAT) {
                PyObject *f = front_of(dv, cur);
                rc = f ? ior(&acc, f) : -1;
                Py_XDECREF(f);
                break;
            }
            PyObject *ca = PyList_GET_ITEM(cx->args, ix(cur));
            PyObject *h = PyTuple_GET_ITEM(ca, 0);
            PyObject *f = front_of(dv, h);
            rc = f ? ior(&acc, f) : -1;
            Py_XDECREF(f);
            if (rc < 0 || !nullable_of(cx, ix(h)))
                break;
            cur = PyTuple_GET_ITEM(ca, 1);
        }
    }
    if (rc == 0 && (result = PyFrozenSet_New(acc)) != NULL)
        PyObject_GC_UnTrack(result);  /* ints only: never in a cycle (see front_of) */
    Py_DECREF(acc);
store:
    if (result != NULL && PyDict_SetItem(dv->front, t, result) < 0)
        Py_CLEAR(result);
    return result;
}

/* ---- whole rows (lazy_dfa.py ByteDFA._build_row, _literal_row) ------------------------ */


/* arena.<name> = v (an int or a bool): 0, or -1 with an error set */
static int set_flag(PyObject *arena, PyObject **slot, const char *text, PyObject *v) {
    PyObject *name = v == NULL ? NULL : name_of(slot, text);
    int rc = name == NULL ? -1 : PyObject_SetAttr(arena, name, v);
    Py_XDECREF(v);
    return rc;
}

/* TermArena._subterms(t, b): a new list (b < 0: front's, every member, no byte filter) */
static PyObject *subterms_of(Deriv *dv, PyObject *t, int b) {
    Ctx *cx = &dv->cx;
    long k = term_kind(cx, t);
    PyObject *a = PyList_GET_ITEM(cx->args, ix(t)), *out = PyList_New(0), *all = NULL;
    if (out == NULL)
        return NULL;
    if (k == K_REPEAT) {
        all = PyTuple_GetSlice(a, 0, 1);
    } else if (k == K_ALT) {
        all = b < 0 ? Py_NewRef(a) : alt_members_of(dv, t, b);
    } else if (k == K_AND || k == K_NOT) {
        all = Py_NewRef(a);
    } else if (k == K_CONCAT) {  /* the heads up to the first one not nullable, else the end */
        if ((all = PyList_New(0)) == NULL)
            goto fail;
        PyObject *cur = t;
        for (;;) {
            if (term_kind(cx, cur) != K_CONCAT) {
                if (PyList_Append(all, cur) < 0)
                    goto fail;
                break;
            }
            PyObject *ca = PyList_GET_ITEM(cx->args, ix(cur));
            PyObject *h = PyTuple_GET_ITEM(ca, 0);
            if (PyList_Append(all, h) < 0)
                goto fail;
            if (!nullable_of(cx, ix(h)))
                break;
            cur = PyTuple_GET_ITEM(ca, 1);
        }
    } else {
        return out;
    }
    if (all == NULL)
        goto fail;
    PyObject *seq = PySequence_Fast(all, "subterms");
    if (seq == NULL)
        goto fail;
    for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(seq); j++) {
        PyObject *u = PySequence_Fast_GET_ITEM(seq, j);
        int in = b < 0 ? 1 : first_bit(dv, ix(u), b);
        if (in < 0 || (in && PyList_Append(out, u) < 0)) {
            Py_DECREF(seq);
            goto fail;
        }
    }
    Py_DECREF(seq);
    Py_DECREF(all);
    return out;
fail:
    Py_XDECREF(all);
    Py_DECREF(out);
    return NULL;
}

/* TermArena.derivative(t, b) with its handling of deep terms, in C: the same terms in the
 * same order. A term deeper than SHALLOW of kind CONCAT / ALT / AND / NOT (while fewer than
 * SHALLOW such levels are open, arena._deep_levels) has its subterms derived first, each
 * through this function, then itself one level deep (derive, arena._bottom_up_active set);
 * past them, and for other deep kinds, the Python method's bottom-up fill. New reference. */
static PyObject *derive_deep(Deriv *dv, PyObject *t, int b) {
    Ctx *cx = &dv->cx;
    Py_ssize_t ti = ix(t);
    if (depth_of(cx, ti) <= SHALLOW)
        return derive(dv, t, b);
    int in = first_bit(dv, ti, b);
    if (in <= 0)
        return in < 0 ? NULL : PyLong_FromLong(T_EMPTY);
    PyObject *key = PyLong_FromSsize_t((ti << 8) | b);
    if (key == NULL)
        return NULL;
    PyObject *hit = PyDict_GetItemWithError(dv->deriv, key);
    Py_DECREF(key);
    if (hit != NULL || PyErr_Occurred())
        return Py_XNewRef(hit);
    PyObject *arena = cx->arena;
    PyObject *active = attr_named(arena, &nm_bottom_up_active, "_bottom_up_active");
    PyObject *levels = active ? attr_named(arena, &nm_deep_levels, "_deep_levels") : NULL;
    int on = active ? PyObject_IsTrue(active) : -1;
    long level = levels ? PyLong_AsLong(levels) : -1;
    Py_XDECREF(active);
    Py_XDECREF(levels);
    if (on < 0 || (level == -1 && PyErr_Occurred()))
        return NULL;
    long k = term_kind(cx, t);
    int spine = k == K_CONCAT || k == K_ALT || k == K_AND || k == K_NOT;
    if (on || !spine || level >= SHALLOW)  /* not deep here, or bottom-up: the Python method */
        return PyObject_CallMethod(arena, "derivative", "Oi", t, b);
    if (set_flag(arena, &nm_deep_levels, "_deep_levels", PyLong_FromLong(level + 1)) < 0)
        return NULL;
    PyObject *result = NULL, *subs = subterms_of(dv, t, b);
    int ok = subs != NULL;
    for (Py_ssize_t j = 0; ok && j < PyList_GET_SIZE(subs); j++) {
        PyObject *d = derive_deep(dv, PyList_GET_ITEM(subs, j), b);
        ok = d != NULL;
        Py_XDECREF(d);
    }
    Py_XDECREF(subs);
    if (ok && k > K_REPEAT) {  /* AND / NOT: the Python branches (its subterms cached) */
        PyObject *key2 = PyLong_FromSsize_t((ti << 8) | b);
        result = key2 ? PyObject_CallMethod(arena, "_derivative_here", "OiO", t, b, key2) : NULL;
        Py_XDECREF(key2);
    } else if (ok) {
        if (set_flag(arena, &nm_bottom_up_active, "_bottom_up_active", Py_NewRef(Py_True)) == 0) {
            result = derive(dv, t, b);
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            if (set_flag(arena, &nm_bottom_up_active, "_bottom_up_active", Py_NewRef(Py_False)) < 0)
                Py_CLEAR(result);
            if (type != NULL)
                PyErr_Restore(type, value, tb);
        }
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (set_flag(arena, &nm_deep_levels, "_deep_levels", PyLong_FromLong(level)) < 0)
        Py_CLEAR(result);
    if (type != NULL)
        PyErr_Restore(type, value, tb);
    return result;
}

/* derivative / front of a term the row builder starts from, as the Python methods (a term
 * deeper than SHALLOW: derive_deep; its front filled bottom-up, front_top), in C; new ref */
static PyObject *derive_top(Deriv *dv, PyObject *t, int b) {
    return derive_deep(dv, t, b);
}

static PyObject *front_top(Deriv *dv, PyObject *t) {
    if (depth_of(&dv->cx, ix(t)) <= SHALLOW)
        return front_of(dv, t);
    PyObject *hit = PyDict_GetItemWithError(dv->front, t);
    if (hit != NULL || PyErr_Occurred())
        return Py_XNewRef(hit);
    PyObject *arena = dv->cx.arena;
    PyObject *active = attr_named(arena, &nm_bottom_up_active, "_bottom_up_active");
    int on = active ? PyObject_IsTrue(active) : -1;
    Py_XDECREF(active);
    if (on)
        return on < 0 ? NULL : front_of(dv, t);
    /* TermArena._bottom_up(t, -1): each term's front once its subterms' are stored,
     * children before parents from an explicit stack, _bottom_up_active set meanwhile */
    if (set_flag(arena, &nm_bottom_up_active, "_bottom_up_active", Py_NewRef(Py_True)) < 0)
        return NULL;
    PyObject *stack = PyList_New(0);
    int rc = stack == NULL || PyList_Append(stack, t) < 0 ? -1 : 0;
    while (rc == 0 && PyList_GET_SIZE(stack) > 0) {
        Py_ssize_t n = PyList_GET_SIZE(stack);
        PyObject *u = PyList_GET_ITEM(stack, n - 1);
        int done = PyDict_Contains(dv->front, u);
        if (done) {
            rc = done < 0 ? -1 : PyList_SetSlice(stack, n - 1, n, NULL);
            continue;
        }
        PyObject *subs = subterms_of(dv, u, -1);
        if (subs == NULL) {
            rc = -1;
            break;
        }
        Py_ssize_t missing = 0;
        for (Py_ssize_t j = 0; rc == 0 && j < PyList_GET_SIZE(subs); j++) {
            PyObject *c = PyList_GET_ITEM(subs, j);
            int in = PyDict_Contains(dv->front, c);
            if (in < 0 || (!in && (missing++, PyList_Append(stack, c) < 0)))
                rc = -1;
        }
        Py_DECREF(subs);
        if (rc == 0 && !missing) {
            Py_INCREF(u);
            rc = PyList_SetSlice(stack, n - 1, n, NULL);
            PyObject *f = rc == 0 ? front_of(dv, u) : NULL;
            rc = f == NULL ? -1 : 0;
            Py_XDECREF(f);
            Py_DECREF(u);
        }
    }
    Py_XDECREF(stack);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (set_flag(arena, &nm_bottom_up_active, "_bottom_up_active", Py_NewRef(Py_False)) < 0)
        rc = -1;
    if (type != NULL)
        PyErr_Restore(type, value, tb);
    if (rc < 0)
        return NULL;
    hit = PyDict_GetItemWithError(dv->front, t);
    if (hit == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "front_top: no front stored");
    return Py_XNewRef(hit);
}

static int cmp_lowest(const void *a, const void *b) {  /* classes are disjoint: no ties */
    return mask_lowest((const Mask256 *)a) - mask_lowest((const Mask256 *)b);
}

/* A row's state ids: state_id(env, d) is the state of term d, added when new (ByteDFA._state_of);
 * -1 with an error set on failure. */
typedef long (*StateIdFn)(void *env, PyObject *d);

typedef struct {
    PyObject *ids, *state_of;  /* borrowed: ByteDFA._ids and ByteDFA._state_of */
} PyStateIds;

/* the state of term d through Python (ids.get(d), else state_of(d): a new state) */
static long py_state_id(void *env, PyObject *d) {
    PyStateIds *p = env;
    PyObject *sid = PyDict_GetItemWithError(p->ids, d);
    if (sid != NULL)
        return PyLong_AsLong(sid);
    if (PyErr_Occurred())
        return -1;
    sid = PyObject_CallOneArg(p->state_of, d);
    long v = sid ? PyLong_AsLong(sid) : -1;
    Py_XDECREF(sid);
    return v;
}

/* row[where] = the state of the derivative of t by byte b (-1 when EMPTY) for every byte of
 * `where`; 0, or -1 with an error set */
/* 1 when d is EMPTY, or (check_empty: its row's term holds AND / NOT) arena.is_empty(d) (the
 * Python search, as _build_row asks it); 0 when d is live; -1 with an error set */
/* Emptiness without the interpreter where TermArena.is_empty needs no search: the same
 * answers and the same entries stored in arena._has_boolean and arena._empty as the Python
 * methods, so a later search (which reads those memos) runs as it would have. Each returns
 * BY_PY where the Python method must decide (a deeper nesting than BY_DEPTH, an
 * intersection / complement / trigger to search), -2 with an error set. */
enum { BY_PY = -1, BY_PARTS = -3, BY_DEPTH = 48 };

/* TermArena.has_boolean(t): 1 / 0, storing each visited term's answer as it does */
static int has_boolean_c(Deriv *dv, PyObject *t, int depth) {
    PyObject *hit = PyDict_GetItemWithError(dv->has_bool, t);
    if (hit != NULL)
        return hit == Py_True;
    if (PyErr_Occurred())
        return -2;
    if (depth > BY_DEPTH)
        return BY_PY;
    Ctx *cx = &dv->cx;
    long k = term_kind(cx, t);
    PyObject *a = PyList_GET_ITEM(cx->args, ix(t));
    Py_ssize_t lo = 0, hi = 0;  /* _children(kind, args): a[lo:hi] */
    if (k == K_CONCAT || k == K_ALT || k == K_AND || k == K_NOT)
        hi = PyTuple_GET_SIZE(a);
    else if (k == K_REPEAT)
        hi = 1;
    else if (k == K_UNTIL)
        lo = 2, hi = PyTuple_GET_SIZE(a);
    int any = k == K_AND || k == K_NOT;
    for (Py_ssize_t j = lo; j < hi; j++) {  /* every child, as the post-order walk stores */
        int c = has_boolean_c(dv, PyTuple_GET_ITEM(a, j), depth + 1);
        if (c < 0)
            return c;
        any |= c;
    }
    if (PyDict_SetItem(dv->has_bool, t, any ? Py_True : Py_False) < 0)
        return -2;
    return any;
}

/* TermArena._known_empty(t): 1 / 0, or BY_PARTS where it would return None */
static int known_empty_c(Deriv *dv, PyObject *t, int depth) {
    if (ix(t) == T_EMPTY)
        return 1;
    int hb = has_boolean_c(dv, t, depth);
    if (hb <= 0)
        return hb;  /* 0: no AND / NOT, live; BY_PY, -2 */
    PyObject *hit = PyDict_GetItemWithError(dv->empty, t);
    if (hit != NULL)
        return hit == Py_True;
    return PyErr_Occurred() ? -2 : BY_PARTS;
}

/* TermArena._empty_by_parts(t) for t holding AND / NOT, not memoised: the items of its
 * _emptiness_parts in order, the first that decides ends it, each decided frame stored in
 * arena._empty; BY_PY at the first item only a search decides (nothing stored past it) */
static int empty_by_parts_c(Deriv *dv, PyObject *t, int depth) {
    Ctx *cx = &dv->cx;
    if (depth > BY_DEPTH)
        return BY_PY;
    long k = term_kind(cx, t);
    PyObject *a = PyList_GET_ITEM(cx->args, ix(t));
    int every;
    Py_ssize_t n;
    if (k == K_ALT)
        every = 1, n = PyTuple_GET_SIZE(a);
    else if (k == K_CONCAT)
        every = 0, n = PyTuple_GET_SIZE(a);
    else if (k == K_REPEAT) {
        long long lo = PyLong_AsLongLong(PyTuple_GET_ITEM(a, 1));
        if (lo == -1 && PyErr_Occurred())
            return -2;
        every = 0, n = lo > 0 ? 1 : 0;
    } else
        return BY_PY;  /* AND, NOT: a search; UNTIL: left to the Python method */
    int result = every;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *v = PyTuple_GET_ITEM(a, j);
        int value = known_empty_c(dv, v, depth + 1);
        if (value == BY_PARTS)
            value = empty_by_parts_c(dv, v, depth + 1);
        if (value < 0)
            return value;
        if (value != every) {
            result = !every;
            break;
        }
    }
    if (PyDict_SetItem(dv->empty, t, result ? Py_True : Py_False) < 0)
        return -2;
    return result;
}

static int dead_term(Deriv *dv, PyObject *d, int check_empty) {
    if (ix(d) == T_EMPTY)
        return 1;
    if (!check_empty)
        return 0;
    int known = known_empty_c(dv, d, 0);  /* is_empty: has_boolean, then the memo */
    if (known == BY_PARTS)
        known = empty_by_parts_c(dv, d, 0);
    if (known != BY_PY)
        return known < 0 ? -1 : known;
    PyObject *r = PyObject_CallMethod(dv->cx.arena, "is_empty", "O", d);
    int dead = r == NULL ? -1 : PyObject_IsTrue(r);
    Py_XDECREF(r);
    return dead;
}

static int derive_into(Deriv *dv, PyObject *t, int b, const Mask256 *where, int32_t *row,
                       StateIdFn state_id, void *env, int check_empty) {
    PyObject *d = derive_top(dv, t, b);
    if (d == NULL)
        return -1;
    int dead = dead_term(dv, d, check_empty);
    long sid = dead ? -1 : state_id(env, d);
    Py_DECREF(d);
    if (dead < 0)
        return -1;
    if (sid == -1 && PyErr_Occurred())
        return -1;
    for (int k = 0; k < 4; k++)
        for (uint64_t w = where->w[k]; w; w &= w - 1)
            row[64 * k + __builtin_ctzll(w)] = (int32_t)sid;
    return 0;
}

/* The refinement of first by the masks of front(t) (lazy_dfa.py _live_classes): into
 * classes[0 .. *n) (room for 257), by lowest byte. 0, or -1 with an error set. */
static int row_classes(Deriv *dv, PyObject *t, const Mask256 *first, Mask256 *classes, int *n) {
    PyObject *front = front_top(dv, t);
    if (front == NULL)
        return -1;
    PyObject *it = PyObject_GetIter(front);
    Py_DECREF(front);
    if (it == NULL)
        return -1;
    int num = 1, rc = 0;
    classes[0] = *first;
    PyObject *item;
    while (rc == 0 && (item = PyIter_Next(it)) != NULL) {  /* refine_classes(first, front) */
        Mask256 m;
        rc = mask_of(item, &m);
        Py_DECREF(item);
        int was = num;
        num = 0;
        Mask256 refined[257];
        for (int c = 0; rc == 0 && c < was; c++) {
            Mask256 in, out;
            int any_in = 0, any_out = 0;
            for (int k = 0; k < 4; k++) {
                in.w[k] = classes[c].w[k] & m.w[k];
                out.w[k] = classes[c].w[k] ^ in.w[k];
                any_in |= in.w[k] != 0;
                any_out |= out.w[k] != 0;
            }
            if (any_in && any_out) {
                refined[num++] = in;
                refined[num++] = out;
            } else {
                refined[num++] = classes[c];
            }
        }
        memcpy(classes, refined, sizeof(Mask256) * num);
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    qsort(classes, num, sizeof(Mask256), cmp_lowest);  /* by lowest byte, as _live_classes */
    *n = num;
    return rc;
}

/* The row of term t (no AND / NOT in the arena) into row[256]: -1, then for each live class
 * of first(t) in the refinement of front(t) (by lowest byte, as lazy_dfa.py _live_classes)
 * the state of the derivative by the class's lowest byte; a literal (one byte b, or
 * CONCAT(b, tail)) takes EPS / tail without a derivative, as _literal_row.
 * lazy_byte >= 0: a row for the token-trie walk (ByteDFA._build_row(lazy=True), then
 * _derive_class(lazy_byte)): with several classes every live byte is ROW_PENDING and only the
 * class of lazy_byte (if live) is derived. Returns the number of classes left ROW_PENDING
 * (0: the row is whole), or -1 with an error set. */
static int row_fill(Deriv *dv, PyObject *t, int32_t *row, StateIdFn state_id, void *env,
                    int lazy_byte, int check_empty) {
    Ctx *cx = &dv->cx;
    Py_ssize_t ti = ix(t);
    Mask256 first;
    if (first_mask(dv, ti, &first) < 0)
        return -1;
    for (int b = 0; b < 256; b++)
        row[b] = -1;
    int num_bits = 0;
    for (int k = 0; k < 4; k++)
        num_bits += __builtin_popcountll(first.w[k]);
    if (num_bits == 0)
        return 0;
    long kind = term_kind(cx, t);
    if (num_bits == 1) {
        int b = mask_lowest(&first);
        PyObject *d = NULL;
        if (kind == K_BYTES) {
            d = PyLong_FromLong(T_EPS);
        } else if (kind == K_CONCAT) {
            PyObject *a = PyList_GET_ITEM(cx->args, ti);
            if (term_kind(cx, PyTuple_GET_ITEM(a, 0)) == K_BYTES)
                d = Py_NewRef(PyTuple_GET_ITEM(a, 1));
        }
        if (d == NULL && PyErr_Occurred())
            return -1;
        if (d == NULL)  /* a repetition or alternation only b can start */
            return derive_into(dv, t, b, &first, row, state_id, env, check_empty) < 0 ? -1 : 0;
        int dead = dead_term(dv, d, check_empty);
        long sid = dead ? -1 : state_id(env, d);
        Py_DECREF(d);
        if (dead < 0 || (sid == -1 && PyErr_Occurred()))
            return -1;
        row[b] = (int32_t)sid;
        return 0;
    }
    Mask256 *classes = PyMem_Malloc(sizeof(Mask256) * 257);
    if (classes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int n = 0, rc = row_classes(dv, t, &first, classes, &n);
    if (rc == 0 && lazy_byte >= 0 && n > 1) {  /* ROW_PENDING classes, lazy_byte's derived */
        for (int k = 0; k < 4; k++)
            for (uint64_t w = first.w[k]; w; w &= w - 1)
                row[64 * k + __builtin_ctzll(w)] = ROW_PENDING;
        int c = 0;
        while (c < n && !((classes[c].w[lazy_byte >> 6] >> (lazy_byte & 63)) & 1))
            c++;
        rc = n;
        if (c < n) {
            rc = derive_into(dv, t, mask_lowest(&classes[c]), &classes[c], row, state_id, env,
                             check_empty);
            rc = rc < 0 ? -1 : n - 1;
        }
    } else {
        for (int c = 0; rc == 0 && c < n; c++)
            rc = derive_into(dv, t, mask_lowest(&classes[c]), &classes[c], row, state_id, env,
                             check_empty);
    }
    PyMem_Free(classes);
    return rc;
}

/* Derive the ROW_PENDING class of byte b in row (built by row_fill with its classes pending;
 * ByteDFA._derive_class): the class is the bytes of first(t) inside exactly the masks of
 * front(t) that b is in (its class in the refinement), derived by its lowest byte. Returns the
 * number of ROW_PENDING entries left in the row, or -1 with an error set. */
static inline int row_derive_class(Deriv *dv, PyObject *t, int32_t *row, int b, StateIdFn state_id,
                            void *env) {
    if (row[b] == ROW_PENDING) {
        Mask256 cls;
        if (first_mask(dv, ix(t), &cls) < 0)
            return -1;
        PyObject *front = front_top(dv, t);
        PyObject *it = front ? PyObject_GetIter(front) : NULL;
        Py_XDECREF(front);
        if (it == NULL)
            return -1;
        PyObject *item;
        int rc = 0;
        while (rc == 0 && (item = PyIter_Next(it)) != NULL) {
            Mask256 m;
            rc = mask_of(item, &m);
            Py_DECREF(item);
            if (rc < 0)
                break;
            int in = (m.w[b >> 6] >> (b & 63)) & 1;
            for (int k = 0; k < 4; k++)
                cls.w[k] &= in ? m.w[k] : ~m.w[k];
        }
        Py_DECREF(it);
        if (rc < 0 || PyErr_Occurred())
            return -1;
        if (derive_into(dv, t, mask_lowest(&cls), &cls, row, state_id, env, 0) < 0)
            return -1;
    }
    int left = 0;
    for (int k = 0; k < 256; k++)
        left += row[k] == ROW_PENDING;
    return left;
}

/* ---- the module's functions: a context per arena, then calls over it ------------------ */

static const char CONTEXT_NAME[] = "structgen.regex_derive.context";

static void context_free(PyObject *capsule) {
    Deriv *dv = PyCapsule_GetPointer(capsule, CONTEXT_NAME);
    if (dv != NULL) {
        deriv_close(dv);
        PyMem_Free(dv);
    }
}

/* context(arena) -> capsule: the arena's tables and caches held once (the arena keeps it as
 * _cctx; it holds no reference to the arena itself) */
static PyObject *py_context(PyObject *self, PyObject *arena) {
    (void)self;
    Deriv *dv = PyMem_Malloc(sizeof *dv);
    if (dv == NULL)
        return PyErr_NoMemory();
    if (deriv_open(dv, arena) < 0) {
        deriv_close(dv);
        PyMem_Free(dv);
        return NULL;
    }
    dv->cx.arena = NULL;  /* borrowed per call */
    PyObject *capsule = PyCapsule_New(dv, CONTEXT_NAME, context_free);
    if (capsule == NULL) {
        deriv_close(dv);
        PyMem_Free(dv);
    }
    return capsule;
}

/* the context of args[1] for the arena args[0], term args[2] checked; NULL on error */
static Deriv *context_of(PyObject *const *args, Py_ssize_t *t) {
    Deriv *dv = PyCapsule_GetPointer(args[1], CONTEXT_NAME);
    if (dv == NULL)
        return NULL;
    *t = PyLong_CheckExact(args[2]) ? PyLong_AsSsize_t(args[2]) : -1;
    if (*t < 0 || *t >= PyList_GET_SIZE(dv->cx.kind)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "not a term of this arena");
        return NULL;
    }
    dv->cx.arena = args[0];
    return dv;
}

static PyObject *py_derivative(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4 || !PyLong_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "derivative(arena, context, t: int, b: int)");
        return NULL;
    }
    Py_ssize_t t;
    long b = PyLong_AsLong(args[3]);
    if (b == -1 && PyErr_Occurred())
        return NULL;
    if (b < 0 || b > 255) {
        PyErr_Format(PyExc_ValueError, "derivative: byte %ld out of range", b);
        return NULL;
    }
    Deriv *dv = context_of(args, &t);
    return dv == NULL ? NULL : derive(dv, args[2], (int)b);
}

static PyObject *py_front(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "front(arena, context, t: int)");
        return NULL;
    }
    Py_ssize_t t;
    Deriv *dv = context_of(args, &t);
    return dv == NULL ? NULL : front_of(dv, args[2]);
}

/* fill_row(arena, context, t, row, ids, state_of[, check_empty]) -> None; row: writable
 * int32 [256]; check_empty true (t holds AND / NOT): a derivative is live only when
 * arena.is_empty says so, as _build_row's Python loop */
static PyObject *py_fill_row(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if ((nargs != 6 && nargs != 7) || !PyDict_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "fill_row(arena, context, t, row, ids: dict, state_of[, check_empty])");
        return NULL;
    }
    int check_empty = nargs == 7 ? PyObject_IsTrue(args[6]) : 0;
    if (check_empty < 0)
        return NULL;
    Py_ssize_t t;
    Deriv *dv = context_of(args, &t);
    if (dv == NULL)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[3], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    int rc = -1;
    if (view.itemsize != 4 || view.len != 256 * 4 || view.format == NULL
        || (strcmp(view.format, "i") != 0 && strcmp(view.format, "=i") != 0
            && strcmp(view.format, "<i") != 0))
        PyErr_SetString(PyExc_ValueError, "fill_row: row must be a contiguous int32 [256]");
    else {
        PyStateIds env = {args[4], args[5]};
        rc = row_fill(dv, args[2], (int32_t *)view.buf, py_state_id, &env, -1, check_empty);
    }
    PyBuffer_Release(&view);
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

#endif  /* SG_REGEX_DERIVE_H */
