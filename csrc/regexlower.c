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

#include "regex_arena.h"
#include "regex_derive.h"

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

/* ---- ascii_class (regex/lower.py ascii_class's text) -------------------------------- */

/* code point c (< 0x80) as regex/escape.py escape_class_char writes it inside a class */
static Py_ssize_t class_char(unsigned c, char *out) {
    static const char hex[] = "0123456789abcdef";
    if (c < 0x20 || c == 0x7F) {
        out[0] = '\\';
        out[1] = 'x';
        out[2] = hex[c >> 4];
        out[3] = hex[c & 15];
        return 4;
    }
    if (c == '\\' || c == ']' || c == '^' || c == '-' || c == '[') {
        out[0] = '\\';
        out[1] = (char)c;
        return 2;
    }
    out[0] = (char)c;
    return 1;
}

#define ASCII_CLASS_MAX (2 + 128 * 9) /* at most 64 runs of one ("\xHH"), or fewer longer ones */

/* Write the class token of the ASCII bytes set in (lo: bits 0-63, hi: bits 64-127) into buf
 * (ASCII_CLASS_MAX bytes): "[", each run of set bits as one char or a range, "]", exactly as
 * regex/lower.py's Python loop writes it. Returns the bytes written. */
static Py_ssize_t ascii_class_write(unsigned long long lo, unsigned long long hi, char *buf) {
    Py_ssize_t n = 0;
    buf[n++] = '[';
    unsigned b = 0;
    while (b < 128) {
        if (!(b < 64 ? (lo >> b & 1) : (hi >> (b - 64) & 1))) {
            b++;
            continue;
        }
        unsigned end = b;
        while (end + 1 < 128
               && (end + 1 < 64 ? (lo >> (end + 1) & 1) : (hi >> (end + 1 - 64) & 1)))
            end++;
        n += class_char(b, buf + n);
        if (end != b) {
            buf[n++] = '-';
            n += class_char(end, buf + n);
        }
        b = end + 1;
    }
    buf[n++] = ']';
    return n;
}

/* ascii_class_text(mask) -> str: the class token of the ASCII bytes in mask (an int with
 * bits below 0x80 only, nonzero: checked by the caller), its runs of set bits as ranges,
 * exactly as regex/lower.py's Python loop writes it */
static PyObject *py_ascii_class_text(PyObject *self, PyObject *mask) {
    (void)self;
    unsigned long long lo = PyLong_AsUnsignedLongLongMask(mask);
    if (lo == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    PyObject *shift = PyLong_FromLong(64);
    PyObject *high = shift ? PyNumber_Rshift(mask, shift) : NULL;
    Py_XDECREF(shift);
    if (high == NULL)
        return NULL;
    unsigned long long hi = PyLong_AsUnsignedLongLongMask(high);
    Py_DECREF(high);
    if (hi == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    char buf[ASCII_CLASS_MAX];
    Py_ssize_t n = ascii_class_write(lo, hi, buf);
    return PyUnicode_FromStringAndSize(buf, n);
}

/* ---- key_trie_text (json_schema/objects.py _key_not_in's text) ----------------------- */

#define KT_MAX_DEPTH 512 /* a longer name: the Python path */

typedef struct {
    int first, next, ends; /* first child, next sibling (-1: none), a name ends here */
    Py_UCS4 ch;            /* the unit leading here (the root's unused) */
} KtNode;

typedef struct {
    Py_UCS4 *buf;
    Py_ssize_t n, cap;
} KtOut;

static int kt_put(KtOut *o, const Py_UCS4 *s, Py_ssize_t k) {
    if (o->n + k > o->cap) {
        Py_ssize_t cap = (o->cap + k) * 2;
        Py_UCS4 *buf = PyMem_Realloc(o->buf, cap * sizeof(Py_UCS4));
        if (buf == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->buf = buf;
        o->cap = cap;
    }
    memcpy(o->buf + o->n, s, k * sizeof(Py_UCS4));
    o->n += k;
    return 0;
}

static int kt_ascii(KtOut *o, const char *s) {
    Py_UCS4 tmp[8];
    Py_ssize_t k = (Py_ssize_t)strlen(s);
    for (Py_ssize_t j = 0; j < k; j++)
        tmp[j] = (unsigned char)s[j];
    return kt_put(o, tmp, k);
}

/* the plain units 0x20..0x7F but '"' and '\\' (objects.py _PLAIN_UNITS), as two words */
static const unsigned long long KT_PLAIN_LO = 0xFFFFFFFB00000000ULL; /* 0x20..0x3F but 0x22 */
static const unsigned long long KT_PLAIN_HI = 0xFFFFFFFFEFFFFFFFULL; /* 0x40..0x7F but 0x5C */

static int kt_plain(Py_UCS4 c) {
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

typedef struct {
    KtNode *nodes;
    KtOut out;
    const Py_UCS4 *tail, *other;
    Py_ssize_t ntail, nother;
    PyObject *classes; /* [(token, mask)] in the order the Python build writes them */
} Kt;

/* the class token of (lo, hi) appended to o and its (token, mask) to kt->classes */
static int kt_class(Kt *kt, unsigned long long lo, unsigned long long hi) {
    char buf[ASCII_CLASS_MAX];
    Py_ssize_t n = ascii_class_write(lo, hi, buf);
    Py_UCS4 ucs[sizeof buf];
    for (Py_ssize_t j = 0; j < n; j++)
        ucs[j] = (unsigned char)buf[j];
    if (kt_put(&kt->out, ucs, n) < 0)
        return -1;
    PyObject *token = PyUnicode_FromStringAndSize(buf, n);
    PyObject *h = token ? PyLong_FromUnsignedLongLong(hi) : NULL;
    PyObject *l = h ? PyLong_FromUnsignedLongLong(lo) : NULL;
    PyObject *s64 = l ? PyLong_FromLong(64) : NULL;
    PyObject *hs = s64 ? PyNumber_Lshift(h, s64) : NULL;
    PyObject *mask = hs ? PyNumber_Or(hs, l) : NULL;
    PyObject *pair = mask ? PyTuple_Pack(2, token, mask) : NULL;
    int rc = pair ? PyList_Append(kt->classes, pair) : -1;
    Py_XDECREF(token);
    Py_XDECREF(h);
    Py_XDECREF(l);
    Py_XDECREF(s64);
    Py_XDECREF(hs);
    Py_XDECREF(mask);
    Py_XDECREF(pair);
    return rc;
}

/* node's text: "(?:" unit-leaving-here ("|" literal child)* ")" ["?"]; the leaving unit as
 * objects.py _ascii_left(split=True) writes it */
static int kt_write(Kt *kt, int node, int depth) {
    if (depth > KT_MAX_DEPTH + 1) {
        PyErr_SetString(PyExc_RecursionError, "key_trie_text: too deep");
        return -1;
    }
    KtOut *o = &kt->out;
    if (kt_ascii(o, "(?:") < 0)
        return -1;
    Py_ssize_t unit_at = o->n; /* the leaving unit is written after the children's bits */
    unsigned long long lo = KT_PLAIN_LO, hi = KT_PLAIN_HI;
    for (int c = kt->nodes[node].first; c >= 0; c = kt->nodes[c].next) {
        Py_UCS4 ch = kt->nodes[c].ch;
        if (ch < 64)
            lo &= ~(1ULL << ch);
        else
            hi &= ~(1ULL << (ch - 64));
    }
    /* children first (their classes are recorded before this node's, as in Python) into a
     * buffer of their own, then this node's unit, then the children's text */
    KtOut saved = *o;
    KtOut kids = {NULL, 0, 0};
    kt->out = kids;
    int rc = 0;
    for (int c = kt->nodes[node].first; c >= 0 && rc == 0; c = kt->nodes[c].next) {
        Py_UCS4 ch = kt->nodes[c].ch;
        rc = kt_ascii(&kt->out, "|");
        if (rc == 0) {
            if (strchr(".^$*+?{}[]|()", (int)ch) != NULL && ch != 0) {
                Py_UCS4 esc[2] = {'\\', ch};
                rc = kt_put(&kt->out, esc, 2);
            } else if (ch == 0x7F) {
                rc = kt_ascii(&kt->out, "\\x7f");
            } else {
                rc = kt_put(&kt->out, &ch, 1);
            }
        }
        if (rc == 0)
            rc = kt_write(kt, c, depth + 1);
    }
    kids = kt->out;
    kt->out = saved;
    o = &kt->out;
    (void)unit_at;
    if (rc == 0) {
        int has = lo != 0 || hi != 0;
        if (kt->ntail == 1) {
            if (has)
                rc = kt_class(kt, lo, hi);
            if (rc == 0 && has)
                rc = kt_put(o, kt->tail, 1) < 0 || kt_ascii(o, "|") < 0 ? -1 : 0;
            if (rc == 0)
                rc = kt_put(o, kt->other, kt->nother) < 0 || kt_put(o, kt->tail, 1) < 0 ? -1 : 0;
        } else {
            rc = kt_ascii(o, "(?:");
            if (rc == 0 && has)
                rc = kt_class(kt, lo, hi) < 0 || kt_ascii(o, "|") < 0 ? -1 : 0;
            if (rc == 0)
                rc = kt_put(o, kt->other, kt->nother) < 0 || kt_ascii(o, ")") < 0
                             || kt_put(o, kt->tail, kt->ntail) < 0
                         ? -1
                         : 0;
        }
    }
    if (rc == 0 && kids.n)
        rc = kt_put(o, kids.buf, kids.n);
    PyMem_Free(kids.buf);
    if (rc == 0)
        rc = kt_ascii(o, kt->nodes[node].ends ? ")" : ")?");
    return rc;
}

/* key_trie_text(names, tail, other) -> (text, [(token, mask)]) or None: objects.py
 * _key_not_in's text for names whose characters are all plain printable ASCII (0x20..0x7F
 * but '"' and '\\': each its own unit) and at most KT_MAX_DEPTH long; None otherwise (the
 * Python path). The class tokens are listed in the order the Python build writes them, for
 * the caller to keep as atom recipes (regex/lower.py ascii_class). */
static PyObject *py_key_trie_text(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyTuple_Check(args[0]) || !PyUnicode_Check(args[1])
        || !PyUnicode_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "key_trie_text(names: tuple, tail: str, other: str)");
        return NULL;
    }
    PyObject *names = args[0];
    Py_ssize_t num = PyTuple_GET_SIZE(names), total = 1;
    for (Py_ssize_t i = 0; i < num; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_Check(name))
            Py_RETURN_NONE;
        Py_ssize_t len = PyUnicode_GET_LENGTH(name);
        if (len > KT_MAX_DEPTH)
            Py_RETURN_NONE;
        int kind = PyUnicode_KIND(name);
        const void *data = PyUnicode_DATA(name);
        for (Py_ssize_t j = 0; j < len; j++)
            if (!kt_plain(PyUnicode_READ(kind, data, j)))
                Py_RETURN_NONE;
        total += len;
    }
    Kt kt = {0};
    PyObject *result = NULL;
    Py_UCS4 *tail = PyUnicode_AsUCS4Copy(args[1]);
    Py_UCS4 *other = tail ? PyUnicode_AsUCS4Copy(args[2]) : NULL;
    kt.nodes = other ? PyMem_Malloc(total * sizeof(KtNode)) : NULL;
    kt.classes = kt.nodes ? PyList_New(0) : NULL;
    if (kt.classes == NULL) {
        if (tail && other && !kt.nodes)
            PyErr_NoMemory();
        goto done;
    }
    kt.tail = tail;
    kt.ntail = PyUnicode_GET_LENGTH(args[1]);
    kt.other = other;
    kt.nother = PyUnicode_GET_LENGTH(args[2]);
    int used = 1;
    kt.nodes[0] = (KtNode){-1, -1, 0, 0};
    for (Py_ssize_t i = 0; i < num; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        int kind = PyUnicode_KIND(name);
        const void *data = PyUnicode_DATA(name);
        int node = 0;
        for (Py_ssize_t j = 0; j < PyUnicode_GET_LENGTH(name); j++) {
            Py_UCS4 ch = PyUnicode_READ(kind, data, j);
            int c = kt.nodes[node].first, last = -1;
            while (c >= 0 && kt.nodes[c].ch != ch) {
                last = c;
                c = kt.nodes[c].next;
            }
            if (c < 0) { /* a new child, after its siblings (dict insertion order) */
                c = used++;
                kt.nodes[c] = (KtNode){-1, -1, 0, ch};
                if (last < 0)
                    kt.nodes[node].first = c;
                else
                    kt.nodes[last].next = c;
            }
            node = c;
        }
        kt.nodes[node].ends = 1;
    }
    if (kt_write(&kt, 0, 0) == 0) {
        PyObject *text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, kt.out.buf, kt.out.n);
        if (text != NULL) {
            result = PyTuple_Pack(2, text, kt.classes);
            Py_DECREF(text);
        }
    }
done:
    PyMem_Free(kt.out.buf);
    PyMem_Free(kt.nodes);
    Py_XDECREF(kt.classes);
    PyMem_Free(tail);
    PyMem_Free(other);
    return result;
}

/* True when o holds no reference the cyclic collector must follow: an int, a bool, None, a
 * float, bytes or str, or a tuple or frozenset of such (nested at most 8 deep). */
static int acyclic_atom(PyObject *o, int depth) {
    if (o == Py_None || PyLong_CheckExact(o) || PyBool_Check(o) || PyFloat_CheckExact(o)
        || PyBytes_CheckExact(o) || PyUnicode_CheckExact(o))
        return 1;
    if (depth >= 8)
        return 0;
    if (PyTuple_CheckExact(o)) {
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(o); k++)
            if (!acyclic_atom(PyTuple_GET_ITEM(o, k), depth + 1))
                return 0;
        return 1;
    }
    if (PyFrozenSet_CheckExact(o)) {
        Py_ssize_t pos = 0;
        PyObject *item;
        Py_hash_t h;
        while (_PySet_NextEntry(o, &pos, &item, &h))
            if (!acyclic_atom(item, depth + 1))
                return 0;
        return 1;
    }
    return 0;
}

/* untrack_atoms(obj) -> bool: see the method table. */
static PyObject *py_untrack_atoms(PyObject *self, PyObject *o) {
    (void)self;
    if (PyList_CheckExact(o)) {
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(o); k++)
            if (!acyclic_atom(PyList_GET_ITEM(o, k), 0))
                Py_RETURN_FALSE;
    } else if (PyDict_CheckExact(o)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(o, &pos, &key, &value))
            if (!acyclic_atom(key, 0) || !acyclic_atom(value, 0))
                Py_RETURN_FALSE;
    } else {
        Py_RETURN_FALSE;
    }
    if (PyObject_GC_IsTracked(o))
        PyObject_GC_UnTrack(o);
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"lower", (PyCFunction)(void (*)(void))py_lower, METH_FASTCALL,
     "lower(text, helper, memo, max_nesting, arena, low) -> term or None (see csrc/regexlower.c)"},
    {"context", py_context, METH_O,
     "context(arena) -> capsule: the arena's tables for derivative and front"},
    {"derivative", (PyCFunction)(void (*)(void))py_derivative, METH_FASTCALL,
     "derivative(arena, context, t, b) -> term: TermArena.derivative in C (csrc/regex_derive.h)"},
    {"fill_row", (PyCFunction)(void (*)(void))py_fill_row, METH_FASTCALL,
     "fill_row(arena, context, t, row, ids, state_of): a whole DFA row (csrc/regex_derive.h)"},
    {"front", (PyCFunction)(void (*)(void))py_front, METH_FASTCALL,
     "front(arena, context, t) -> frozenset: TermArena.front in C (csrc/regex_derive.h)"},
    {"ascii_class_text", py_ascii_class_text, METH_O,
     "ascii_class_text(mask) -> str: regex/lower.py ascii_class's token for a nonzero mask "
     "of bytes below 0x80"},
    {"key_trie_text", (PyCFunction)(void (*)(void))py_key_trie_text, METH_FASTCALL,
     "key_trie_text(names, tail, other) -> (text, [(token, mask)]) or None: "
     "json_schema/objects.py _key_not_in's text for plain ASCII names"},
    {"untrack_atoms", py_untrack_atoms, METH_O,
     "untrack_atoms(obj) -> bool: take a list or dict whose items (keys and values) are all "
     "ints, bools, None, floats, bytes, str, or tuples and frozensets of those out of the "
     "cyclic collector's view (True), as CPython does for such tuples and dicts itself; "
     "False, nothing done, for anything else. Such a container can be in no reference "
     "cycle, so the collector loses nothing; it is still freed by its reference count, "
     "and items added later must be of the same kinds (the caller's contract)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_regexlower",
    "One-pass regex lowering to arena terms (structgen/fsm/regex/lower.py's C path).", -1, methods,
};

PyMODINIT_FUNC PyInit__regexlower(void) { return PyModule_Create(&module); }
