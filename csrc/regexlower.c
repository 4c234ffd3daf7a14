/* structgen's one-pass regex lowering in C: the token loop of structgen/fsm/regex/lower.py
 * (tokenizer, group matching, the parser over the shared group memo) and the arena's
 * concatenation constructors (regex/terms.py TermArena.concat / _concat2 / bytes_then), writing
 * the same terms, in the same order, into the same Python-level arena.
 *
 * Why: a JSON Schema compile spends most of its time lowering the converter's regex texts to
 * arena terms; in Python that is a few microseconds per token and per new term (interpreter
 * dispatch around tuple keys, dict lookups and list appends). Here the same operations run
 * without the interpreter; the rarely met parts stay in Python and are called back (classes,
 * escapes, non-ASCII literals: memoised per text; alternation and counted repetition: the
 * arena's own smart constructors).
 *
 *   lower(text, helper, memo, max_nesting, arena, low) -> int term, or None
 *     text        the regex (str), plain syntax as regex/lower.py's docstring lists it
 *     helper      the Python _Parser of text: helper._literal_items(run) (a non-ASCII literal
 *                 run -> list of bytes and terms), helper._literal(char) -> term, helper.atom(text)
 *                 (an escape, class or '.' token -> term; may raise regex/lower.py _Bail)
 *     memo        dict shared by the texts of one pattern (same keys and values as the
 *                 Python parser writes: group text -> term or tuple of items, literal
 *                 character / escape / class text -> term)
 *     max_nesting deepest group nesting taken (deeper: None)
 *     arena       the TermArena: its lists kind/args/nullable/first/depth, dict _ids, list
 *                 _single, int max_terms and methods alt/repeat/byteset/_add are used
 *     low         the regex/parse.py _Lowering: low.check_deadline() is called every 1024 tokens
 *   None means: syntax left to re's parser (the caller's fallback), exactly where the Python
 *   path returns None. Exceptions of the callbacks and the arena propagate
 *   (GrammarTooComplexError for the term, nesting and time budgets).
 *
 * Term ids are Python ints throughout (items of lists and memo tuples, as in Python).
 * The GIL is held (every step touches Python objects).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "regex_tokens.h"

enum { T_EMPTY = 0, T_EPS = 1, K_CONCAT = 3, MAX_DEPTH = 100000, SPINE0 = 256, SPINE_MAX = 256 };
typedef struct {
    PyObject *ids, *kind, *args, *nullable, *first, *depth, *single;  /* borrowed */
    Py_ssize_t max_terms;
    PyObject *arena, *helper, *memo, *low, *text;                     /* borrowed */
    PyObject *concat_kind;                                            /* owned: int 3 */
} Ctx;

/* ---- arena constructors (regex/terms.py TermArena) ------------------------------ */

static long term_kind(Ctx *cx, PyObject *t) {
    return PyLong_AsLong(PyList_GET_ITEM(cx->kind, PyLong_AsSsize_t(t)));
}

/* _concat2(h, t): new reference */
static PyObject *concat2(Ctx *cx, PyObject *h, PyObject *t) {
    PyObject *key = PyTuple_Pack(3, cx->concat_kind, h, t);
    if (key == NULL)
        return NULL;
    PyObject *hit = PyDict_GetItemWithError(cx->ids, key);
    if (hit != NULL) {
        Py_DECREF(key);
        Py_INCREF(hit);
        return hit;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    Py_ssize_t hi = PyLong_AsSsize_t(h), ti = PyLong_AsSsize_t(t);
    int nh = PyObject_IsTrue(PyList_GET_ITEM(cx->nullable, hi));
    int nt = PyObject_IsTrue(PyList_GET_ITEM(cx->nullable, ti));
    PyObject *fh = PyList_GET_ITEM(cx->first, hi);
    PyObject *first = nh ? PyNumber_Or(fh, PyList_GET_ITEM(cx->first, ti)) : (Py_INCREF(fh), fh);
    long dh = PyLong_AsLong(PyList_GET_ITEM(cx->depth, hi)) + 1;
    long dt = PyLong_AsLong(PyList_GET_ITEM(cx->depth, ti));
    long depth = dh > dt ? dh : dt;
    PyObject *args = PyTuple_Pack(2, h, t);
    PyObject *dep = PyLong_FromLong(depth);
    PyObject *result = NULL;
    if (first == NULL || args == NULL || dep == NULL)
        goto done;
    PyObject *null = (nh && nt) ? Py_True : Py_False;
    Py_ssize_t tid = PyList_GET_SIZE(cx->kind);
    if (depth > MAX_DEPTH || tid >= cx->max_terms) {  /* the arena raises its budget error */
        result = PyObject_CallMethod(cx->arena, "_add", "OOOOOO", key, cx->concat_kind, args,
                                     null, first, dep);
        goto done;
    }
    result = PyLong_FromSsize_t(tid);
    if (result == NULL || PyDict_SetItem(cx->ids, key, result) < 0
        || PyList_Append(cx->kind, cx->concat_kind) < 0 || PyList_Append(cx->args, args) < 0
        || PyList_Append(cx->nullable, null) < 0 || PyList_Append(cx->first, first) < 0
        || PyList_Append(cx->depth, dep) < 0)
        Py_CLEAR(result);
done:
    Py_DECREF(key);
    Py_XDECREF(first);
    Py_XDECREF(args);
    Py_XDECREF(dep);
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
            h = bit ? PyObject_CallMethod(cx->arena, "byteset", "O", bit) : NULL;
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
    return PyObject_CallMethod(cx->arena, "alt", "O", alts);
}

/* ---- the parser (_Parser.run) ----------------------------------------------------- */

static PyObject *slice(Ctx *cx, Py_ssize_t a, Py_ssize_t b) {
    return PyUnicode_Substring(cx->text, a, b);
}

static int append_steal(PyObject *list, PyObject *item) {
    if (item == NULL)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

static int extend(PyObject *list, PyObject *seqobj) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    return PyList_SetSlice(list, n, n, seqobj);
}

/* a literal run's sequence items appended to items (_Parser._literal_items); -1 on error */
static int literal_items(Ctx *cx, PyObject *items, Py_ssize_t a, Py_ssize_t b) {
    PyObject *run = slice(cx, a, b);
    if (run == NULL)
        return -1;
    int rc;
    if (PyUnicode_IS_ASCII(run)) {
        rc = append_steal(items, PyBytes_FromStringAndSize((const char *)PyUnicode_DATA(run), b - a));
    } else {
        PyObject *more = PyObject_CallMethod(cx->helper, "_literal_items", "O", run);
        rc = more == NULL ? -1 : extend(items, more);
        Py_XDECREF(more);
    }
    Py_DECREF(run);
    return rc;
}

/* memo[key] or compute(key) stored there: new reference */
static PyObject *memo_or(Ctx *cx, PyObject *key, const char *method) {
    PyObject *hit = PyDict_GetItemWithError(cx->memo, key);
    if (hit != NULL) {
        Py_INCREF(hit);
        return hit;
    }
    if (PyErr_Occurred())
        return NULL;
    PyObject *term = PyObject_CallMethod(cx->helper, method, "O", key);
    if (term != NULL && PyDict_SetItem(cx->memo, key, term) < 0)
        Py_CLEAR(term);
    return term;
}


typedef struct {
    PyObject *alts, *items;
    Py_ssize_t open;
} Frame;

/* The parser's state (_Parser.run): the open groups, each with its finished alternatives and
 * the items of the current one; the current group's lists; whether a quantifier may follow. */
typedef struct {
    Ctx *cx;
    const Token *toks;
    Py_ssize_t n;
    const Py_ssize_t *close;
    Frame *frames;
    Py_ssize_t nf;
    PyObject *alts, *items;
    int quantifiable;
} Parser;

/* Each handler takes token i: 0 done, -1 error, 1 bail (syntax for re). */

static int quantified_at(const Parser *ps, Py_ssize_t i) {
    return i + 1 < ps->n && ps->toks[i + 1].kind == TK_QUANT;
}

/* a literal run; a quantifier after it takes its last character (a term) */
static int on_literal(Parser *ps, Py_ssize_t i) {
    const Token *m = &ps->toks[i];
    ps->quantifiable = 1;
    if (!quantified_at(ps, i))
        return literal_items(ps->cx, ps->items, m->start, m->end);
    if (m->end - m->start > 1 && literal_items(ps->cx, ps->items, m->start, m->end - 1) < 0)
        return -1;
    PyObject *ch = slice(ps->cx, m->end - 1, m->end);
    if (ch == NULL)
        return -1;
    PyObject *term = memo_or(ps->cx, ch, "_literal");
    Py_DECREF(ch);
    return append_steal(ps->items, term);
}

/* a group's "(": its memoised term or items, skipping to its ")"; else a new frame */
static int on_open(Parser *ps, Py_ssize_t *i) {
    Py_ssize_t j = ps->close[*i];
    PyObject *key = slice(ps->cx, ps->toks[*i].start, ps->toks[j].end);
    if (key == NULL)
        return -1;
    PyObject *hit = PyDict_GetItemWithError(ps->cx->memo, key);
    Py_DECREF(key);
    if (hit != NULL) {
        int q = quantified_at(ps, j);
        *i = j;
        ps->quantifiable = q;
        if (!PyTuple_CheckExact(hit))
            return PyList_Append(ps->items, hit);
        if (q)  /* a sequence group under a quantifier: its term */
            return append_steal(ps->items, seq(ps->cx, hit));
        return extend(ps->items, hit);
    }
    if (PyErr_Occurred())
        return -1;
    Frame *f = &ps->frames[ps->nf++];
    f->alts = ps->alts;
    f->items = ps->items;
    f->open = *i;
    ps->alts = PyList_New(0);
    ps->items = PyList_New(0);
    ps->quantifiable = 0;
    return ps->alts == NULL || ps->items == NULL ? -1 : 0;
}

/* a group's ")": a sequence group's items join the enclosing sequence (built once onto what
 * follows), any other group becomes its alternation term; memoised by the group's text */
static int on_close(Parser *ps, Py_ssize_t i) {
    PyObject *galts = ps->alts, *gitems = ps->items;
    Frame *f = &ps->frames[--ps->nf];
    int quantified = quantified_at(ps, i), rc = -1;
    ps->alts = f->alts;
    ps->items = f->items;
    ps->quantifiable = quantified;
    PyObject *key = slice(ps->cx, ps->toks[f->open].start, ps->toks[i].end);
    if (key != NULL) {
        if (PyList_GET_SIZE(galts) == 0 && !quantified) {
            PyObject *tup = PyList_AsTuple(gitems);
            if (tup != NULL && PyDict_SetItem(ps->cx->memo, key, tup) == 0)
                rc = extend(ps->items, gitems);
            Py_XDECREF(tup);
        } else {
            PyObject *term = close_alt(ps->cx, galts, gitems);
            if (term != NULL && PyDict_SetItem(ps->cx->memo, key, term) == 0)
                rc = PyList_Append(ps->items, term);
            Py_XDECREF(term);
        }
        Py_DECREF(key);
    }
    Py_DECREF(galts);
    Py_DECREF(gitems);
    return rc;
}

static int on_alt(Parser *ps) {
    if (append_steal(ps->alts, seq(ps->cx, ps->items)) < 0)
        return -1;
    Py_SETREF(ps->items, PyList_New(0));
    ps->quantifiable = 0;
    return ps->items == NULL ? -1 : 0;
}

/* a quantifier: the last item repeated (the arena's repeat) */
static int on_quant(Parser *ps, Py_ssize_t i) {
    const Token *m = &ps->toks[i];
    if (!ps->quantifiable || m->lo < 0 || m->hi == -2 || (m->hi != INF && m->hi < m->lo))
        return 1;  /* nothing to repeat, a repeated repeat, or re's error */
    ps->quantifiable = 0;
    Py_ssize_t last = PyList_GET_SIZE(ps->items) - 1;
    PyObject *term = PyObject_CallMethod(ps->cx->arena, "repeat", "OLL",
                                         PyList_GET_ITEM(ps->items, last), m->lo, m->hi);
    return term == NULL ? -1 : PyList_SetItem(ps->items, last, term);  /* steals term */
}

/* an escape, class or '.': the same text is the same term */
static int on_atom(Parser *ps, Py_ssize_t i) {
    PyObject *key = slice(ps->cx, ps->toks[i].start, ps->toks[i].end);
    if (key == NULL)
        return -1;
    PyObject *term = memo_or(ps->cx, key, "atom");
    Py_DECREF(key);
    ps->quantifiable = 1;
    return append_steal(ps->items, term);
}

static int step(Parser *ps, Py_ssize_t *i) {
    switch (ps->toks[*i].kind) {
    case TK_LITERAL:
        return on_literal(ps, *i);
    case TK_OPEN:
        return on_open(ps, i);
    case TK_CLOSE:
        return on_close(ps, *i);
    case TK_ALT:
        return on_alt(ps);
    case TK_QUANT:
        return on_quant(ps, *i);
    default:
        return on_atom(ps, *i);
    }
}

/* The token loop; returns a new reference, Py_None for a bail, NULL on error. */
static PyObject *run(Ctx *cx, const Token *toks, Py_ssize_t n, const Py_ssize_t *close) {
    Parser ps = {cx, toks, n, close, PyMem_Malloc(sizeof(Frame) * (n + 1)), 0,
                 PyList_New(0), PyList_New(0), 0};
    PyObject *result = NULL;
    int rc = ps.frames == NULL || ps.alts == NULL || ps.items == NULL ? -1 : 0;
    if (ps.frames == NULL)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        if ((i & 1023) == 1023) {  /* the lowering's time budget */
            PyObject *r = PyObject_CallMethod(cx->low, "check_deadline", NULL);
            if (r == NULL)
                break;
            Py_DECREF(r);
        }
        rc = step(&ps, &i);
    }
    if (rc == 0 && !PyErr_Occurred())
        result = close_alt(cx, ps.alts, ps.items);
    else if (rc == 1)
        result = Py_NewRef(Py_None);
    while (ps.nf > 0) {
        ps.nf--;
        Py_XDECREF(ps.frames[ps.nf].alts);
        Py_XDECREF(ps.frames[ps.nf].items);
    }
    Py_XDECREF(ps.alts);
    Py_XDECREF(ps.items);
    PyMem_Free(ps.frames);
    return result;
}

static PyObject *get_attr(PyObject *obj, const char *name, PyTypeObject *type) {
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v != NULL && type != NULL && !PyObject_TypeCheck(v, type)) {
        PyErr_Format(PyExc_TypeError, "arena.%s has the wrong type", name);
        Py_CLEAR(v);
    }
    return v;
}

static PyObject *py_lower(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "lower(text, helper, memo, max_nesting, arena, low)");
        return NULL;
    }
    if (!PyUnicode_Check(args[0]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "lower: text must be str and memo a dict");
        return NULL;
    }
    Ctx cx = {0};
    cx.text = args[0];
    cx.helper = args[1];
    cx.memo = args[2];
    Py_ssize_t max_nesting = PyLong_AsSsize_t(args[3]);
    if (max_nesting == -1 && PyErr_Occurred())
        return NULL;
    cx.arena = args[4];
    cx.low = args[5];
    PyObject *owned[8] = {0};
    PyObject *result = NULL, *mt = NULL;
    Token *toks = NULL;
    Py_ssize_t *close = NULL, n = 0;
    owned[0] = cx.ids = get_attr(cx.arena, "_ids", &PyDict_Type);
    owned[1] = cx.kind = get_attr(cx.arena, "kind", &PyList_Type);
    owned[2] = cx.args = get_attr(cx.arena, "args", &PyList_Type);
    owned[3] = cx.nullable = get_attr(cx.arena, "nullable", &PyList_Type);
    owned[4] = cx.first = get_attr(cx.arena, "first", &PyList_Type);
    owned[5] = cx.depth = get_attr(cx.arena, "depth", &PyList_Type);
    owned[6] = cx.single = get_attr(cx.arena, "_single", &PyList_Type);
    owned[7] = cx.concat_kind = PyLong_FromLong(K_CONCAT);
    for (int k = 0; k < 8; k++)
        if (owned[k] == NULL)
            goto done;
    if (PyList_GET_SIZE(cx.single) != 256) {
        PyErr_SetString(PyExc_ValueError, "arena._single must have 256 entries");
        goto done;
    }
    mt = PyObject_GetAttrString(cx.arena, "max_terms");
    if (mt == NULL || ((cx.max_terms = PyLong_AsSsize_t(mt)) == -1 && PyErr_Occurred()))
        goto done;
    int ok = scan(cx.text, max_nesting, &toks, &close, &n);
    if (ok < 0)
        goto done;
    if (ok == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = run(&cx, toks, n, close);
done:
    for (int k = 0; k < 8; k++)
        Py_XDECREF(owned[k]);
    Py_XDECREF(mt);
    PyMem_Free(toks);
    PyMem_Free(close);
    return result;
}

static PyMethodDef methods[] = {
    {"lower", (PyCFunction)(void (*)(void))py_lower, METH_FASTCALL,
     "lower(text, helper, memo, max_nesting, arena, low) -> term or None (see csrc/regexlower.c)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_regexlower",
    "One-pass regex lowering to arena terms (structgen/fsm/regex/lower.py's C path).", -1, methods,
};

PyMODINIT_FUNC PyInit__regexlower(void) { return PyModule_Create(&module); }
