/* The lazy DFA's rows built from the token-trie walk without entering the interpreter
 * (structgen/fsm/regex/lazy_dfa.py ByteDFA: row_tables(s, b), _build_row(lazy=True),
 * _derive_class, _state_of), for csrc/tokentrie.c's walk_direct.
 *
 * The state table stays the ByteDFA's own (its list _terms, dict _ids, dict _pending, arrays
 * _rows / _slot / _accepting / _num_out, int _num_rows): this code writes them exactly as the
 * Python methods do, in the same order, with the derivatives and row classes of
 * csrc/regex_derive.h (the arena's context capsule, arena._cctx), so the automaton, its state
 * numbering and its rows are the ones the Python callback builds. A row left with ROW_PENDING
 * classes gets the _pending entry None (ByteDFA._derive_class rebuilds the entry from the row
 * when Python next needs it); a row with none left has its entry removed.
 *
 *   dfa_open(view, dfa) / dfa_close(view): the ByteDFA's tables held for one walk.
 *   dfa_build(view, s, b) -> 1: row_tables(s, b)'s work done here (the row of s built with
 *     b's class derived, or b's pending class derived); 0: not taken here (the row budget is
 *     reached: the caller calls row_tables(s, b), whose Python path raises the budget
 *     error); -1 with an error set.
 *   dfa_build(view, s, -1) -> the same for ByteDFA.row(s): the row of s built whole, or
 *     its pending classes all derived (by lowest byte, as _derive_all).
 *
 * The interpreter is entered only to grow a table (ByteDFA._grow_states, _new_row_slot: each
 * doubles it), for a term deeper than regex_derive.h's SHALLOW or of kind UNTIL (as there), for
 * the emptiness of each derivative of a term holding AND / NOT (TermArena.is_empty: such a row
 * is built whole, as _build_row does) and to take and release ByteDFA.lock (every change of the tables is made under it). The GIL is
 * held throughout.
 */
#ifndef SG_DFA_ROWS_H
#define SG_DFA_ROWS_H

#include "regex_derive.h"

typedef struct {
    PyObject *dfa;                                   /* borrowed: the ByteDFA */
    PyObject *terms, *ids, *pending, *lock, *arena;  /* owned: its _terms, _ids, _pending, ... */
    PyObject *capsule;                               /* owned: arena._cctx */
    Deriv *dv;                                       /* the capsule's context */
    long max_states;
    PyObject *arr[4];                                /* owned: _rows, _slot, _accepting, _num_out */
    Py_buffer buf[4];                                /* writable views of arr (held when arr[k]) */
} DfaView;

enum { DV_ROWS, DV_SLOT, DV_ACCEPTING, DV_NUM_OUT };
static const char *const DV_NAMES[4] = {"_rows", "_slot", "_accepting", "_num_out"};
static const Py_ssize_t DV_ITEMSIZE[4] = {4, 8, 1, 4};
static PyObject *dv_names[4];  /* DV_NAMES interned (regex_derive.h name_of), on first use */

static PyObject *dv_str_acquire, *dv_str_release, *dv_str_num_rows, *dv_str_num_boolean,
    *dv_str_has_boolean;

/* the module's interned names; 0, or -1 with an error set (at module init) */
static int dfa_rows_init(void) {
    dv_str_acquire = PyUnicode_InternFromString("acquire");
    dv_str_release = PyUnicode_InternFromString("release");
    dv_str_num_rows = PyUnicode_InternFromString("_num_rows");
    dv_str_num_boolean = PyUnicode_InternFromString("_num_boolean");
    dv_str_has_boolean = PyUnicode_InternFromString("has_boolean");
    return dv_str_acquire && dv_str_release && dv_str_num_rows && dv_str_num_boolean &&
                   dv_str_has_boolean
               ? 0
               : -1;
}

static void dfa_close(DfaView *v) {
    for (int k = 0; k < 4; k++) {
        if (v->arr[k] != NULL)
            PyBuffer_Release(&v->buf[k]);
        Py_CLEAR(v->arr[k]);
    }
    Py_CLEAR(v->terms);
    Py_CLEAR(v->ids);
    Py_CLEAR(v->pending);
    Py_CLEAR(v->lock);
    Py_CLEAR(v->arena);
    Py_CLEAR(v->capsule);
}

/* the four arrays as they are now (a growth replaces them): buffers taken again only for an
 * array not held yet; 0, or -1 with an error set */
static int dfa_arrays(DfaView *v) {
    for (int k = 0; k < 4; k++) {
        PyObject *a = attr_named(v->dfa, &dv_names[k], DV_NAMES[k]);
        if (a == NULL)
            return -1;
        if (a == v->arr[k]) {
            Py_DECREF(a);
            continue;
        }
        if (v->arr[k] != NULL)
            PyBuffer_Release(&v->buf[k]);
        Py_XSETREF(v->arr[k], a);
        if (PyObject_GetBuffer(a, &v->buf[k], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
            < 0) {
            Py_CLEAR(v->arr[k]);
            return -1;
        }
        if (v->buf[k].itemsize != DV_ITEMSIZE[k]) {
            PyBuffer_Release(&v->buf[k]);
            Py_CLEAR(v->arr[k]);
            PyErr_Format(PyExc_ValueError, "ByteDFA.%s: unexpected item size", DV_NAMES[k]);
            return -1;
        }
    }
    return 0;
}

/* the ByteDFA's tables and its arena's context; 0, or -1 with an error set (dfa_close after
 * either) */
static int dfa_open(DfaView *v, PyObject *dfa) {
    memset(v, 0, sizeof *v);
    v->dfa = dfa;
    if ((v->terms = PyObject_GetAttrString(dfa, "_terms")) == NULL
        || (v->ids = PyObject_GetAttrString(dfa, "_ids")) == NULL
        || (v->pending = PyObject_GetAttrString(dfa, "_pending")) == NULL
        || (v->lock = PyObject_GetAttrString(dfa, "_lock")) == NULL
        || (v->arena = PyObject_GetAttrString(dfa, "arena")) == NULL)
        return -1;
    if (!PyList_CheckExact(v->terms) || !PyDict_CheckExact(v->ids)
        || !PyDict_CheckExact(v->pending)) {
        PyErr_SetString(PyExc_TypeError, "walk_direct: dfa is not a ByteDFA");
        return -1;
    }
    PyObject *mx = PyObject_GetAttrString(dfa, "max_states");
    v->max_states = mx ? PyLong_AsLong(mx) : -1;
    Py_XDECREF(mx);
    if (v->max_states == -1 && PyErr_Occurred())
        return -1;
    v->capsule = PyObject_GetAttrString(v->arena, "_cctx");
    if (v->capsule == Py_None) {
        Py_SETREF(v->capsule, PyObject_CallMethod(v->arena, "_context", NULL));
    }
    if (v->capsule == NULL || (v->dv = PyCapsule_GetPointer(v->capsule, CONTEXT_NAME)) == NULL)
        return -1;
    return dfa_arrays(v);
}

/* ByteDFA._state_of(d) (a StateIdFn): the state of term d, added when new; -1 with an error */
static long dfa_state_id(void *env, PyObject *d) {
    DfaView *v = env;
    PyObject *sid = PyDict_GetItemWithError(v->ids, d);
    if (sid != NULL)
        return PyLong_AsLong(sid);
    if (PyErr_Occurred())
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(v->terms);
    if (n >= v->buf[DV_SLOT].len / 8 || n >= v->buf[DV_ACCEPTING].len
        || n >= v->buf[DV_NUM_OUT].len / 4) {
        PyObject *r = PyObject_CallMethod(v->dfa, "_grow_states", NULL);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        if (dfa_arrays(v) < 0)
            return -1;
    }
    Py_ssize_t ti = ix(d);
    Mask256 first;
    int null = PyObject_IsTrue(PyList_GET_ITEM(v->dv->cx.nullable, ti));
    if (null < 0 || first_mask(v->dv, ti, &first) < 0)
        return -1;
    PyObject *key = PyLong_FromSsize_t(n);
    int rc = key == NULL || PyDict_SetItem(v->ids, d, key) < 0 || PyList_Append(v->terms, d) < 0;
    Py_XDECREF(key);
    if (rc)
        return -1;
    int count = 0;
    for (int k = 0; k < 4; k++)
        count += __builtin_popcountll(first.w[k]);
    ((uint8_t *)v->buf[DV_ACCEPTING].buf)[n] = (uint8_t)null;
    ((int32_t *)v->buf[DV_NUM_OUT].buf)[n] = count;
    return (long)n;
}

/* _pending[s] = None (classes left) or removed (none left); 0, or -1 with an error set */
static int dfa_mark_pending(DfaView *v, long s, int left) {
    PyObject *key = PyLong_FromLong(s);
    if (key == NULL)
        return -1;
    int rc = 0;
    if (left) {
        PyObject *cur = PyDict_GetItemWithError(v->pending, key);
        if (cur != Py_None)
            rc = PyErr_Occurred() ? -1 : PyDict_SetItem(v->pending, key, Py_None);
    } else {
        int has = PyDict_Contains(v->pending, key);
        rc = has < 0 ? -1 : has ? PyDict_DelItem(v->pending, key) : 0;
    }
    Py_DECREF(key);
    return rc;
}

/* dfa_build's work (b >= 0) or dfa_build_whole's (b < 0), under the lock */
static int dfa_build_locked(DfaView *v, long s, int b) {
    if (s < 0 || s >= PyList_GET_SIZE(v->terms) || b > 255) {
        PyErr_Format(PyExc_ValueError, "walk_direct: no state %ld / byte %d", s, b);
        return -1;
    }
    PyObject *t = PyList_GET_ITEM(v->terms, s);
    PyObject *nb = PyObject_GetAttr(v->arena, dv_str_num_boolean);
    long boolean = nb ? PyLong_AsLong(nb) : -1;
    Py_XDECREF(nb);
    if (boolean == -1 && PyErr_Occurred())
        return -1;
    if (dfa_arrays(v) < 0)
        return -1;
    v->dv->cx.arena = v->arena;
    int has = 0;
    if (boolean) {  /* the arena holds AND / NOT terms: does this state's term? */
        has = has_boolean_c(v->dv, t, 0);  /* arena.has_boolean, its memo, in C */
        if (has == BY_PY) {                 /* nested past BY_DEPTH: the Python walk */
            PyObject *hb = PyObject_CallMethodOneArg(v->arena, dv_str_has_boolean, t);
            has = hb ? PyObject_IsTrue(hb) : -1;
            Py_XDECREF(hb);
        }
        if (has < 0)
            return -1;
        /* without: its derivatives hold none and each non-EMPTY one is live. With: as
         * _build_row, the row whole (never PENDING), each derivative's emptiness asked of
         * arena.is_empty (in C where no search is needed: dead_term) */
    }
    int64_t slot = ((const int64_t *)v->buf[DV_SLOT].buf)[s];
    int left;
    if (slot < 0) {
        PyObject *nr = PyObject_GetAttr(v->dfa, dv_str_num_rows);
        long num_rows = nr ? PyLong_AsLong(nr) : -1;
        Py_XDECREF(nr);
        if (num_rows == -1 && PyErr_Occurred())
            return -1;
        if (num_rows >= v->max_states)
            return 0;  /* the Python path raises the budget's error */
        if (num_rows >= v->buf[DV_ROWS].len / (256 * 4)) {
            PyObject *r = PyObject_CallMethod(v->dfa, "_new_row_slot", NULL);
            if (r == NULL)
                return -1;
            Py_DECREF(r);
            if (dfa_arrays(v) < 0)
                return -1;
        }
        int32_t *row = (int32_t *)v->buf[DV_ROWS].buf + (Py_ssize_t)num_rows * 256;
        /* b < 0: whole (not lazy) */
        left = row_fill(v->dv, t, row, dfa_state_id, v, has ? -1 : b, has);
        if (left < 0)
            return -1;
        if (has) {
            int32_t live = 0;
            for (int c = 0; c < 256; c++)
                live += row[c] >= 0;
            ((int32_t *)v->buf[DV_NUM_OUT].buf)[s] = live;
        }
        nr = PyLong_FromLong(num_rows + 1);
        if (nr == NULL || PyObject_SetAttr(v->dfa, dv_str_num_rows, nr) < 0) {
            Py_XDECREF(nr);
            return -1;
        }
        Py_DECREF(nr);
        ((int64_t *)v->buf[DV_SLOT].buf)[s] = num_rows;  /* published after the row */
        return left ? (dfa_mark_pending(v, s, 1) < 0 ? -1 : 1) : 1;
    }
    if (slot >= v->buf[DV_ROWS].len / (256 * 4)) {
        PyErr_Format(PyExc_ValueError, "walk_direct: row slot %lld outside _rows", (long long)slot);
        return -1;
    }
    int32_t *row = (int32_t *)v->buf[DV_ROWS].buf + slot * 256;
    if (b >= 0) {
        if (row[b] != ROW_PENDING)
            return 1;  /* derived meanwhile (another thread) */
        left = row_derive_class(v->dv, t, row, b, dfa_state_id, v);
    } else {  /* every pending class by lowest byte (_derive_all: classes in that order) */
        left = 0;
        for (int c = 0; c < 256 && left >= 0; c++)
            if (row[c] == ROW_PENDING)
                left = row_derive_class(v->dv, t, row, c, dfa_state_id, v);
        if (left > 0) {
            PyErr_SetString(PyExc_SystemError, "dfa_rows: a class left pending");
            return -1;
        }
    }
    if (left < 0)
        return -1;
    return dfa_mark_pending(v, s, left) < 0 ? -1 : 1;
}

/* Take the ByteDFA's lock (v->lock.acquire()); 0, or -1 with an error set. */
static int dv_acquire(DfaView *v) {
    PyObject *r = PyObject_CallMethodNoArgs(v->lock, dv_str_acquire);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Release the ByteDFA's lock after work that returned rc, keeping the work's pending error
 * (if any) across the release; rc, or -1 with the release's error set where it failed. */
static int dv_release(DfaView *v, int rc) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = PyObject_CallMethodNoArgs(v->lock, dv_str_release);
    if (r == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    Py_DECREF(r);
    PyErr_Restore(type, value, tb);
    return rc;
}

/* See the header: 1 done, 0 not taken here, -1 with an error set. b < 0: dfa_build_whole. */
static int dfa_build(DfaView *v, long s, int b) {
    if (dv_acquire(v) < 0)
        return -1;
    return dv_release(v, dfa_build_locked(v, s, b));
}

#endif /* SG_DFA_ROWS_H */
