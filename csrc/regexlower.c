/* structgen's one-pass regex lowering in C: the token loop of structgen/fsm/regex/lower.py
 * (tokenizer, group matching, the parser over the shared group memo) and the arena's smart
 * constructors (regex/terms.py TermArena), writing the same terms, in the same order, into the
 * same Python-level arena.
 *
 * Why: a JSON Schema compile spends most of its time lowering the converter's regex texts to
 * arena terms; in Python that is a few microseconds per token and per new term (interpreter
 * dispatch around tuple keys, dict lookups and list appends). Here the same operations run
 * without the interpreter, the arena's smart constructors included (byteset, alt, alt_members,
 * repeat, _concat2: the same keys, values and interning order as terms.py) and the import of
 * the atom recipes kept across compiles (recipes.py import_term). Only the rare parts stay in
 * Python and are called back: an atom not in the recipe cache (helper.atom), a quantified
 * single character (helper._literal), a literal stretch holding a lone surrogate
 * (helper._stretch), an UNTIL node (arena.until) and the arena's budget errors (arena._add).
 *
 *   lower(text, helper, memo, max_nesting, arena, low[, atom_recipes]) -> int term, or None
 *     text        the regex (str), plain syntax as regex/lower.py's docstring lists it
 *     helper      the Python _Parser of text (the callbacks above; helper.atom may raise
 *                 regex/lower.py _Bail)
 *     memo        dict shared by the texts of one pattern (same keys and values as the
 *                 Python parser writes: group text -> term or tuple of items, literal
 *                 character / escape / class text -> term)
 *     max_nesting deepest group nesting taken (deeper: None)
 *     arena       the TermArena: its lists kind/args/nullable/first/depth, dict _ids, list
 *                 _single, int max_terms and methods until/_add are used
 *     low         the regex/parse.py _Lowering: low.shared (the definitions' terms, for
 *                 placeholders in literal runs); low.check_deadline() every 1024 tokens
 *     atom_recipes regex/lower.py _ATOM_RECIPES (escape / class / '.' text -> recipe tuple or
 *                 term int); absent: every atom is asked of helper.atom
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

/* ---- recipes (regex/recipes.py import_term) --------------------------------------- */

/* position i of a recipe: ids[i], or EMPTY / EPS for -2 / -1; borrowed */
static PyObject *recipe_at(PyObject **ids, Py_ssize_t n, PyObject *pos, PyObject *fixed[2]) {
    Py_ssize_t i = PyLong_AsSsize_t(pos);
    if (i >= n || i < -2) {
        PyErr_SetString(PyExc_ValueError, "recipe position out of range");
        return NULL;
    }
    return i >= 0 ? ids[i] : fixed[i + 2];
}

/* one recipe node interned from the terms of the nodes before it: new reference */
static PyObject *import_node(Ctx *cx, PyObject *node, PyObject **ids, Py_ssize_t n,
                             PyObject *fixed[2]) {
    long k = PyLong_AsLong(PyTuple_GET_ITEM(node, 0));
    if (k == K_BYTES)
        return byteset(cx, PyTuple_GET_ITEM(node, 1));
    if (k == K_CONCAT) {
        PyObject *h = recipe_at(ids, n, PyTuple_GET_ITEM(node, 1), fixed);
        PyObject *t = h ? recipe_at(ids, n, PyTuple_GET_ITEM(node, 2), fixed) : NULL;
        return t ? concat2(cx, h, t) : NULL;
    }
    if (k == K_REPEAT) {
        PyObject *x = recipe_at(ids, n, PyTuple_GET_ITEM(node, 1), fixed);
        long long lo = PyLong_AsLongLong(PyTuple_GET_ITEM(node, 2));
        long long hi = PyLong_AsLongLong(PyTuple_GET_ITEM(node, 3));
        return x == NULL || PyErr_Occurred() ? NULL : repeat(cx, x, lo, hi);
    }
    if (k == K_ALT) {  /* the members sorted again by their ids in this arena */
        PyObject *pos = PyTuple_GET_ITEM(node, 1);
        Py_ssize_t m = PyTuple_GET_SIZE(pos);
        Member *members = PyMem_Malloc(sizeof(Member) * (m + 1));
        if (members == NULL)
            return PyErr_NoMemory();
        PyObject *result = NULL;
        Py_ssize_t j = 0;
        for (; j < m; j++) {
            PyObject *t = recipe_at(ids, n, PyTuple_GET_ITEM(pos, j), fixed);
            if (t == NULL)
                break;
            members[j] = (Member){ix(t), t};
        }
        if (j == m) {
            qsort(members, m, sizeof(Member), cmp_member);
            PyObject *tup = term_tuple(members, m);
            result = tup ? alt_members(cx, tup) : NULL;
            Py_XDECREF(tup);
        }
        PyMem_Free(members);
        return result;
    }
    /* UNTIL (trigger, k, cont): the arena's own constructor */
    PyObject *cont = recipe_at(ids, n, PyTuple_GET_ITEM(node, 3), fixed);
    return cont ? PyObject_CallMethod(cx->arena, "until", "OOO", PyTuple_GET_ITEM(node, 1), cont,
                                      PyTuple_GET_ITEM(node, 2))
                : NULL;
}

/* import_term(arena, recipe): the recipe's nodes interned bottom-up, the last one's term;
 * new reference */
static PyObject *import_recipe(Ctx *cx, PyObject *recipe) {
    Py_ssize_t n = PyTuple_GET_SIZE(recipe);
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "an empty recipe");
        return NULL;
    }
    PyObject **ids = PyMem_Calloc(n, sizeof(PyObject *));
    if (ids == NULL)
        return PyErr_NoMemory();
    PyObject *fixed[2] = {PyLong_FromLong(T_EMPTY), PyLong_FromLong(T_EPS)};
    Py_ssize_t k = 0;
    for (; k < n; k++) {
        ids[k] = import_node(cx, PyTuple_GET_ITEM(recipe, k), ids, k, fixed);
        if (ids[k] == NULL)
            break;
    }
    PyObject *result = k == n ? Py_NewRef(ids[n - 1]) : NULL;
    for (Py_ssize_t j = 0; j < n; j++)
        Py_XDECREF(ids[j]);
    Py_DECREF(fixed[0]);
    Py_DECREF(fixed[1]);
    PyMem_Free(ids);
    return result;
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

/* the UTF-8 bytes of run[a:b] appended to items; the helper's term for a text with a lone
 * surrogate (_Parser._stretch); -1 on error */
static int stretch(Ctx *cx, PyObject *items, PyObject *run, Py_ssize_t a, Py_ssize_t b) {
    PyObject *text = PyUnicode_Substring(run, a, b);
    if (text == NULL)
        return -1;
    PyObject *data = PyUnicode_AsUTF8String(text);
    if (data == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        PyErr_Clear();
        data = PyObject_CallMethod(cx->helper, "_stretch", "O", text);
    }
    Py_DECREF(text);
    return append_steal(items, data);
}

/* a non-ASCII literal run's items (_Parser._literal_items): the stretches between
 * placeholders as bytes, each placeholder's definition term; -1 on error */
static int literal_items_unicode(Ctx *cx, PyObject *items, PyObject *run) {
    int kind = PyUnicode_KIND(run);
    const void *data = PyUnicode_DATA(run);
    Py_ssize_t n = PyUnicode_GET_LENGTH(run), start = 0;
    Py_ssize_t num_shared = PyList_GET_SIZE(cx->shared);
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = (Py_ssize_t)PyUnicode_READ(kind, data, k) - PLACEHOLDER_BASE;
        if (i < 0 || i >= num_shared)
            continue;
        if (k > start && stretch(cx, items, run, start, k) < 0)
            return -1;
        if (PyList_Append(items, PyList_GET_ITEM(cx->shared, i)) < 0)
            return -1;
        start = k + 1;
    }
    return start < n ? stretch(cx, items, run, start, n) : 0;
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
        rc = literal_items_unicode(cx, items, run);
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

/* an escape, class or '.' token's term (_Parser.atom), memoised in memo: a recipe kept in
 * _ATOM_RECIPES is imported here, anything else asked of helper.atom; new reference */
static PyObject *atom(Ctx *cx, PyObject *key) {
    PyObject *hit = PyDict_GetItemWithError(cx->memo, key);
    if (hit != NULL || PyErr_Occurred())
        return Py_XNewRef(hit);
    PyObject *recipe = cx->recipes ? PyDict_GetItemWithError(cx->recipes, key) : NULL;
    PyObject *term;
    if (recipe != NULL && PyLong_CheckExact(recipe)) {
        term = Py_NewRef(recipe);
    } else if (recipe != NULL && PyTuple_CheckExact(recipe)) {
        Py_INCREF(recipe);  /* held while importing */
        term = import_recipe(cx, recipe);
        Py_DECREF(recipe);
    } else {
        term = PyErr_Occurred() ? NULL : PyObject_CallMethod(cx->helper, "atom", "O", key);
    }
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
    PyObject *term = repeat(ps->cx, PyList_GET_ITEM(ps->items, last), m->lo, m->hi);
    return term == NULL ? -1 : PyList_SetItem(ps->items, last, term);  /* steals term */
}

/* an escape, class or '.': the same text is the same term */
static int on_atom(Parser *ps, Py_ssize_t i) {
    PyObject *key = slice(ps->cx, ps->toks[i].start, ps->toks[i].end);
    if (key == NULL)
        return -1;
    PyObject *term = atom(ps->cx, key);
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
        PyErr_Format(PyExc_TypeError, "%s has the wrong type", name);
        Py_CLEAR(v);
    }
    return v;
}

static PyObject *py_lower(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "lower(text, helper, memo, max_nesting, arena, low[, atom_recipes])");
        return NULL;
    }
    if (!PyUnicode_Check(args[0]) || !PyDict_Check(args[2])
        || (nargs == 7 && !PyDict_Check(args[6]))) {
        PyErr_SetString(PyExc_TypeError, "lower: text must be str, memo and atom_recipes dicts");
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
    cx.recipes = nargs == 7 ? args[6] : NULL;
    enum { NUM_OWNED = 12 };
    PyObject *owned[NUM_OWNED] = {0};
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
    owned[7] = cx.k_concat = PyLong_FromLong(K_CONCAT);
    owned[8] = cx.k_bytes = PyLong_FromLong(K_BYTES);
    owned[9] = cx.k_alt = PyLong_FromLong(K_ALT);
    owned[10] = cx.k_repeat = PyLong_FromLong(K_REPEAT);
    owned[11] = cx.shared = get_attr(cx.low, "shared", &PyList_Type);
    for (int k = 0; k < NUM_OWNED; k++)
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
    for (int k = 0; k < NUM_OWNED; k++)
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
