/* The grammar automaton's configuration step and row building in C
 * (structgen/fsm/grammar/automaton.py, GrammarAutomaton; its Python path is the reference).
 *
 * Why: a context-free grammar's cold mask is mostly building automaton rows, and in Python a
 * row costs tens of microseconds of interpreter work whatever it finds in the memos (the
 * joint byte classes' key tuple, one memoised step per class, interning a configuration as a
 * sorted tuple of tuples, the numpy row write). Here the configurations, their lexemes, the
 * byte classes of each lexer state and the step memo are C tables; Python is called back only
 * for what is new: a lexer state's row and flags (the regex layer's lazy ByteDFA; built here
 * over its tables after set_lexers), the chart node after a lexeme ends (the Earley parser; a
 * direct C call into csrc/earley.c's charts after set_charts) and the lexemes a chart node
 * starts (read from the charts' lists after set_starts).
 *
 * A lexeme is (terminal t, chart node, lexer state s), interned to an id. A configuration is a
 * sorted (by (t, node, s)), duplicate-free list of lexeme ids plus an accepting flag, interned
 * to an id in order of discovery. The step of a configuration on a byte b: the lexemes whose
 * lexer state moves on b, each to (t, node, s2); the result keeps the moved lexemes that can
 * go on (live), adds the lexemes started at the node after each moved lexeme that accepts
 * there, and is accepting when one such node is final. It depends on the moved lexemes alone,
 * so it is memoised on their ids in configuration order (automaton.py's _step memo).
 *
 *   Core()
 *   core.intern(triples, accepting, acc) -> configuration id, or -1 for the dead configuration
 *       triples   iterable of (t, node, s) int triples; accepting bool
 *       acc       writable numpy bool [capacity]: acc[id] written for a new configuration
 *   core.build_row(owner, state, rows, slot, acc) -> None
 *       owner     the GrammarAutomaton; called back:
 *                   owner._c_lexer_row(t, s) -> bytes: int32 [256] next lexer state (-1
 *                       dead), then uint8 [256] the _c_lexer_flags of that next state (255:
 *                       not given, asked of _c_lexer_flags when a step needs it)
 *                   owner._c_lexer_flags(t, s) -> int, bit 0 accepting, bit 1 live (a way on)
 *                   owner._c_end(t, node) -> the node after lexeme t ends at node (not
 *                       called after set_charts)
 *                   owner._c_node(node) -> (((t, initial lexer state), ...), final)
 *       state     the configuration whose row is built
 *       rows      writable int32 [slots, 256]: rows[slot] is written (next configuration per
 *                 byte, -1 dead), only once every step succeeded
 *       acc       as for intern; needs room for 256 new configurations past num_configs
 *   core.attach(owner) -> None: the GrammarAutomaton whose rows row_tables builds (a weak
 *       reference: the automaton holds the core) and its lock (owner._lock, held strongly);
 *       the buffers of its tables are held while they are its tables
 *   core.row_tables(state=-1) -> (rows, slot): GrammarAutomaton.row_tables without the
 *       interpreter on the common path: the row of state built in C under owner._lock into
 *       owner._rows[owner._num_rows] (owner._slot[state] published last, owner._num_rows
 *       advanced), when the tables have room and owner.max_states allows; else, and for the
 *       read-only views when the arrays changed, owner._row_tables_py(state) (the Python
 *       path: it grows the tables, raises the budget error)
 *   core.set_groups(groups) -> None, before anything is interned
 *       groups    ints: groups[t] the lexer of terminal t; terminals of one group share one
 *                 automaton (fsm/grammar/lexers.py), so its lexer states, their rows and byte
 *                 classes are read once for all of them; without it each terminal is its own
 *   core.set_charts(charts, own_end) -> None: the lexeme ends of build_row / row_tables from
 *       charts (an _earley.Charts, csrc/earley.c) by a C call to its scan, instead of
 *       owner._c_end (a Python frame per scan); own_end: bytes [num lexers], 1 where a
 *       lexeme ends at its own node (%ignore terminals, the lead-in). Same nodes: _c_end
 *       calls the same scan.
 *   core.set_starts(expected, final, movable, initial, ignored) -> None: the lexemes a chart
 *       node starts read from the charts' own lists instead of owner._c_node (a Python frame
 *       and a tuple per node): expected, final the charts' lists (held: nodes are appended to
 *       them, never replaced; a node not in them yet is asked of _c_node); movable bytes
 *       [num lexers], 1 where the terminal's lexer can move from its initial state; initial
 *       ints [num lexers], that state; ignored the %ignore terminals every node starts (the
 *       movable ones, in order). Same lexemes in the same order as _c_node's.
 *   core.set_lexers(dfas) -> None: dfas[g] the ByteDFA (structgen/fsm/regex/lazy_dfa.py) of
 *       lexer group g, or None. A lexer state of a group with one is read here instead of
 *       through owner._c_lexer_row: a literal (term one byte b, or CONCAT(b, rest), no AND /
 *       NOT) leads on b to the state of rest (ByteDFA.state_of_term), any other state's row is
 *       the ByteDFA's own, built whole over its tables by csrc/dfa_rows.h (ByteDFA.row: the
 *       same derivatives, states and numbering); the flags of the states a row leads to are
 *       read off their terms where the arena holds no AND / NOT (else asked of
 *       owner._c_lexer_flags when a step needs them). The callbacks still answer where this
 *       declines: the ByteDFA's row budget reached (they raise its error), a term nested past
 *       regex_derive.h's BY_DEPTH.
 *   core.config(id) -> ((t, node, s), ...)
 *   core.num_configs, core.num_steps (memoised steps), core.num_lexemes
 * Exceptions of the callbacks propagate (GrammarTooComplexError from the Earley budget): what
 * was interned before stays consistent, the row is not written. The GIL is held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sg_earley_api.h"
#include "sg_intmaps.h"

/* the lexer rows in C (set_lexers): the shared ByteDFA's rows and states built over its own
 * tables by csrc/dfa_rows.h (that header's other helpers are unused here) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "dfa_rows.h"
#pragma GCC diagnostic pop

/* ---- the core ---------------------------------------------------------------------- */

enum { UNKNOWN = -2, FLAGS_UNKNOWN = 255 };

typedef struct { /* a lexer state (t, s) */
    int32_t t, s;
    int32_t flags;  /* UNKNOWN, else bit 0 accepting, bit 1 live */
    int32_t ncls;   /* UNKNOWN until its row is read */
    int16_t *cls;   /* [256]: class of each byte, -1 dead */
    int32_t *next;  /* [ncls]: next lexer state of each class */
} LState;

typedef struct { /* a lexeme (t, node, s) */
    int32_t t, node, s, ls;
    int32_t end;    /* UNKNOWN, else the node after it ends here (unused unless accepting) */
    int32_t *moved; /* [ncls of ls]: the lexeme after each class, or NULL */
} Lexeme;

typedef struct { /* a chart node */
    int32_t known, final, off, len; /* its starts: lexeme ids starts.d[off .. off + len) */
} Node;

typedef struct { /* a buffer held on an array while the owner keeps that array */
    PyObject *obj;
    Py_buffer view;
} Held;

typedef struct { /* the byte classes of a tuple of lexer states read together */
    int16_t cls[256];   /* joint class of each byte, -1 where no lexer state moves */
    int32_t ncls, k;    /* classes; lexer states */
    int16_t *lexcls;    /* [ncls * k]: each lexer state's own class on the joint class (-1) */
} Joint;

typedef struct {
    PyObject_HEAD
    Map3 ls_ids, lex_ids, ends;
    LState *ls;
    Py_ssize_t n_ls, cap_ls;
    Lexeme *lex;
    Py_ssize_t n_lex, cap_lex;
    Node *nodes;
    Py_ssize_t cap_nodes;
    IVec starts;
    IVec cfg_off, cfg_len, cfg_lex; /* configurations: lexeme ids cfg_lex[off .. off + len) */
    MapV cfgs, steps;
    int32_t *groups; /* [n_groups]: the lexer (shared automaton) of each terminal; NULL: t */
    Py_ssize_t n_groups;
    MapV joint_ids;  /* lexer-state ids of a configuration, in its order -> joint classes */
    Joint *joints;
    Py_ssize_t n_joints, cap_joints;
    PyObject *owner;                       /* weak reference to the GrammarAutomaton (attach) */
    PyObject *lock;                        /* its _lock (attach) */
    Held held_slot, held_rows, held_acc;   /* its tables' buffers, while they are its tables */
    PyObject *tables, *rows_seen, *slot_seen; /* row_tables' last answer and its arrays */
    PyObject *charts;           /* the C Earley charts (set_charts), or NULL: _c_end called */
    const SgEarleyApi *earley;  /* their scan (the _earley capsule) */
    uint8_t *own_end;           /* [n_own_end]: 1 where a lexeme ends at its own node */
    Py_ssize_t n_own_end;
    PyObject *expected, *final; /* the charts' lists (set_starts), or NULL: _c_node called */
    int32_t *initial;           /* [n_start_lexers]: the initial lexer state of each terminal */
    uint8_t *movable;           /* [n_start_lexers]: 1 where that lexer can move from it */
    Py_ssize_t n_start_lexers;
    int32_t *ignored;           /* [n_ignored]: the %ignore terminals every node starts */
    Py_ssize_t n_ignored;
    PyObject *lexer_dfas;       /* set_lexers: a list, the ByteDFA of each lexer group or None */
    DfaView *views;             /* [n_views]: each group's tables, opened on first use */
    uint8_t *view_open;         /* [n_views]: 1 where views[g] is open */
    Py_ssize_t n_views;
} Core;

/* the lexer state s of terminal t, keyed by t's lexer: terminals sharing one automaton
 * share its states (the callbacks are asked with the first terminal that met the state) */
static int32_t lstate_of(Core *c, int32_t t, int32_t s) {
    int32_t g = t;
    if (c->groups != NULL) {
        if (t < 0 || t >= c->n_groups) {
            PyErr_Format(PyExc_IndexError, "terminal %d has no lexer group", t);
            return -1;
        }
        g = c->groups[t];
    }
    int32_t id = map3_get(&c->ls_ids, g, s, 0);
    if (id >= 0)
        return id;
    id = (int32_t)c->n_ls;
    if (grow((void **)&c->ls, &c->cap_ls, id, sizeof(LState)) < 0)
        return -1;
    c->ls[id] = (LState){t, s, UNKNOWN, UNKNOWN, NULL, NULL};
    if (map3_put(&c->ls_ids, g, s, 0, id) < 0)
        return -1;
    c->n_ls++;
    return id;
}

static int32_t lexeme_of(Core *c, int32_t t, int32_t node, int32_t s) {
    int32_t id = map3_get(&c->lex_ids, t, node, s);
    if (id >= 0)
        return id;
    int32_t ls = lstate_of(c, t, s);
    if (ls < 0)
        return -1;
    id = (int32_t)c->n_lex;
    if (grow((void **)&c->lex, &c->cap_lex, id, sizeof(Lexeme)) < 0)
        return -1;
    c->lex[id] = (Lexeme){t, node, s, ls, UNKNOWN, NULL};
    if (map3_put(&c->lex_ids, t, node, s, id) < 0)
        return -1;
    c->n_lex++;
    return id;
}

static int call_int(PyObject *owner, const char *name, int32_t a, int32_t b, int32_t *out) {
    PyObject *r = PyObject_CallMethod(owner, name, "ii", a, b);
    if (r == NULL)
        return -1;
    long v = PyLong_AsLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = (int32_t)v;
    return 0;
}

/* ---- the lexer rows in C (set_lexers) ----------------------------------------------- */

/* interned attribute names (module init) */
static PyObject *S_slot, *S_rows, *S_acc, *S_num_rows, *S_max_states, *S_lock, *S_slow,
    *S_acquire, *S_release, *S_complete, *S_dense;

/* the tables of group g's ByteDFA (set_lexers), opened on first use; NULL without an error
 * where the group has none (its rows come from owner._c_lexer_row), NULL with one on error */
static DfaView *lexer_view(Core *c, int32_t g) {
    if (c->lexer_dfas == NULL || g < 0 || g >= c->n_views)
        return NULL;
    if (!c->view_open[g]) {
        PyObject *dfa = PyList_GET_ITEM(c->lexer_dfas, g);
        if (dfa == Py_None)
            return NULL;
        if (dfa_open(&c->views[g], dfa) < 0) {
            dfa_close(&c->views[g]);
            return NULL;
        }
        c->view_open[g] = 1;
    }
    return &c->views[g];
}

/* _c_lexer_flags of the lexer state whose term is d, read off the term where it holds no AND /
 * NOT (bit 0: nullable, the state accepts; bit 1: first(d) not empty, it can go on:
 * automaton.py _live_after's reading); FLAGS_UNKNOWN where it may hold one (boolean: the
 * arena holds some; asked of _c_lexer_flags when a step needs it); -1 with an error set */
static int term_flags(DfaView *v, PyObject *d, int boolean) {
    if (boolean) {
        int hb = has_boolean_c(v->dv, d, 0);
        if (hb == BY_PY || hb == 1)
            return FLAGS_UNKNOWN;
        if (hb < 0)
            return -1;
    }
    Py_ssize_t ti = ix(d);
    Mask256 first;
    int null = PyObject_IsTrue(PyList_GET_ITEM(v->dv->cx.nullable, ti));
    if (null < 0 || first_mask(v->dv, ti, &first) < 0)
        return -1;
    int live = (first.w[0] | first.w[1] | first.w[2] | first.w[3]) != 0;
    return null | (live << 1);
}

/* owner._c_lexer_row(t, s)'s answer for lexer state s of a group with a ByteDFA, under its
 * lock: a literal (term one byte b, or CONCAT(b, rest), no AND / NOT) leads on b to the state
 * of rest (interned as ByteDFA.state_of_term: a new state makes the automaton incomplete),
 * its flags read off rest; any other state's row is the ByteDFA's own, built whole as
 * ByteDFA.row (dfa_rows.h dfa_build_locked: the same derivatives, states and order as the
 * Python _build_row / _derive_all), its targets' flags read off their terms where the arena
 * holds no AND / NOT (else FLAGS_UNKNOWN). 1 done; 0 declined (the row budget reached, a
 * nesting past BY_DEPTH, an odd term: the Python callback answers, and raises); -1 error. */
static int lexer_row_locked(DfaView *v, long s, int32_t *row, uint8_t *flag_of) {
    if (s < 0 || s >= PyList_GET_SIZE(v->terms))
        return 0;
    PyObject *mx = PyObject_GetAttr(v->dfa, S_max_states);
    v->max_states = mx ? PyLong_AsLong(mx) : -1;
    Py_XDECREF(mx);
    if (v->max_states == -1 && PyErr_Occurred())
        return -1;
    PyObject *nb = PyObject_GetAttr(v->arena, dv_str_num_boolean);
    long nbool = nb ? PyLong_AsLong(nb) : -1;
    Py_XDECREF(nb);
    if (nbool == -1 && PyErr_Occurred())
        return -1;
    int boolean = nbool != 0;
    if (dfa_arrays(v) < 0)
        return -1;
    Ctx *cx = &v->dv->cx;
    cx->arena = v->arena;
    PyObject *t = PyList_GET_ITEM(v->terms, s);
    long kind = term_kind(cx, t);
    PyObject *head = NULL, *rest = NULL;  /* borrowed */
    if (kind == K_CONCAT) {
        PyObject *a = PyList_GET_ITEM(cx->args, ix(t));
        if (term_kind(cx, PyTuple_GET_ITEM(a, 0)) == K_BYTES) {
            head = PyTuple_GET_ITEM(a, 0);
            rest = PyTuple_GET_ITEM(a, 1);
        }
    } else if (kind == K_BYTES) {
        head = t;
    }
    if (PyErr_Occurred())
        return -1;
    if (head != NULL) {
        Mask256 m;
        if (mask_of(PyTuple_GET_ITEM(PyList_GET_ITEM(cx->args, ix(head)), 0), &m) < 0)
            return -1;
        int bits = 0;
        for (int k = 0; k < 4; k++)
            bits += __builtin_popcountll(m.w[k]);
        if (bits == 0)
            return 0;
        if (bits > 1)
            head = NULL;  /* a class: derived */
        else if (boolean) {
            int hb = has_boolean_c(v->dv, t, 0);
            if (hb == BY_PY)
                return 0;
            if (hb < 0)
                return -1;
            if (hb)
                head = NULL;  /* the tail may be empty: derived, its emptiness asked */
        }
        if (head != NULL) {  /* automaton.py _literal_row */
            PyObject *eps = NULL;
            if (rest == NULL && (rest = eps = PyLong_FromLong(T_EPS)) == NULL)
                return -1;
            Py_ssize_t before = PyList_GET_SIZE(v->terms);
            long next = ix(rest) == T_EMPTY ? -1 : dfa_state_id(v, rest);
            int flags = next < 0 ? -1 : term_flags(v, rest, 0);  /* rest holds no AND / NOT */
            Py_XDECREF(eps);
            if (next < 0 || flags < 0)
                return PyErr_Occurred() ? -1 : 0;
            if (PyList_GET_SIZE(v->terms) > before  /* ByteDFA.state_of_term's new state */
                && (PyObject_SetAttr(v->dfa, S_complete, Py_False) < 0
                    || PyObject_SetAttr(v->dfa, S_dense, Py_None) < 0))
                return -1;
            int b = mask_lowest(&m);
            for (int k = 0; k < 256; k++)
                row[k] = -1;
            memset(flag_of, FLAGS_UNKNOWN, 256);
            row[b] = (int32_t)next;
            flag_of[b] = (uint8_t)flags;
            return 1;
        }
    }
    int rc = dfa_build_locked(v, s, -1);  /* ByteDFA.row(s) */
    if (rc <= 0)
        return rc;
    int64_t slot = ((const int64_t *)v->buf[DV_SLOT].buf)[s];
    if (slot < 0 || slot >= v->buf[DV_ROWS].len / (256 * 4)) {
        PyErr_SetString(PyExc_SystemError, "cfgrows: a lexer row not published");
        return -1;
    }
    memcpy(row, (const int32_t *)v->buf[DV_ROWS].buf + slot * 256, 256 * sizeof(int32_t));
    memset(flag_of, FLAGS_UNKNOWN, 256);
    if (boolean)
        return 1;  /* the targets' flags asked of _c_lexer_flags, as before */
    int32_t last = -1;
    int flags = FLAGS_UNKNOWN;
    for (int b = 0; b < 256; b++) {
        if (row[b] < 0)
            continue;
        if (row[b] != last) {
            if (row[b] >= PyList_GET_SIZE(v->terms)) {
                PyErr_SetString(PyExc_SystemError, "cfgrows: a lexer row names no state");
                return -1;
            }
            last = row[b];
            flags = term_flags(v, PyList_GET_ITEM(v->terms, last), 0);
            if (flags < 0)
                return -1;
        }
        flag_of[b] = (uint8_t)flags;
    }
    return 1;
}

/* lexer_row_locked under the ByteDFA's lock (group g); 1 done, 0 declined (no ByteDFA for
 * the group, or the Python callback must answer), -1 with an error set */
static int lexer_row_c(Core *c, int32_t g, int32_t s, int32_t *row, uint8_t *flag_of) {
    DfaView *v = lexer_view(c, g);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (dv_acquire(v) < 0)
        return -1;
    return dv_release(v, lexer_row_locked(v, s, row, flag_of));
}

/* the byte classes of lexer state ls (its row read from Python once), and the flags of the
 * lexer states it leads to where the answer carries them */
static int lstate_row(Core *c, PyObject *owner, int32_t ls) {
    if (c->ls[ls].ncls != UNKNOWN)
        return 0;
    int32_t row[256];
    uint8_t flag_of[256];
    int32_t g = c->groups != NULL ? c->groups[c->ls[ls].t] : c->ls[ls].t;
    int done = lexer_row_c(c, g, c->ls[ls].s, row, flag_of);
    if (done < 0)
        return -1;
    if (!done) {
        PyObject *r = PyObject_CallMethod(owner, "_c_lexer_row", "ii", c->ls[ls].t, c->ls[ls].s);
        if (r == NULL)
            return -1;
        if (!PyBytes_Check(r) || PyBytes_GET_SIZE(r) != 256 * 5) {
            Py_DECREF(r);
            PyErr_SetString(PyExc_TypeError,
                            "_c_lexer_row must return 1280 bytes (int32 [256], uint8 [256])");
            return -1;
        }
        memcpy(row, PyBytes_AS_STRING(r), sizeof row);
        memcpy(flag_of, PyBytes_AS_STRING(r) + sizeof row, sizeof flag_of);
        Py_DECREF(r);
    }
    int16_t *cls = malloc(256 * sizeof(int16_t));
    int32_t *next = malloc(256 * sizeof(int32_t));
    uint8_t flags[256];
    if (cls == NULL || next == NULL) {
        free(cls);
        free(next);
        PyErr_NoMemory();
        return -1;
    }
    int32_t n = 0;
    for (int b = 0; b < 256; b++) {
        if (row[b] < 0) {
            cls[b] = -1;
            continue;
        }
        int32_t k = 0;
        while (k < n && next[k] != row[b])
            k++;
        if (k == n) {
            flags[n] = flag_of[b];
            next[n++] = row[b];
        }
        cls[b] = (int16_t)k;
    }
    LState *st = &c->ls[ls];
    st->cls = cls;
    st->next = next;
    st->ncls = n;
    int32_t t = st->t;
    for (int32_t k = 0; k < n; k++) { /* FLAGS_UNKNOWN: _c_lexer_flags asked when needed */
        if (flags[k] == FLAGS_UNKNOWN)
            continue;
        int32_t id = lstate_of(c, t, c->ls[ls].next[k]); /* (c->ls may move) */
        if (id < 0)
            return -1;
        if (c->ls[id].flags == UNKNOWN)
            c->ls[id].flags = flags[k];
    }
    return 0;
}

/* the lexeme after each class of lexeme id (interned once) */
static int lexeme_moves(Core *c, PyObject *owner, int32_t id) {
    if (c->lex[id].moved != NULL)
        return 0;
    int32_t ls = c->lex[id].ls;
    if (lstate_row(c, owner, ls) < 0)
        return -1;
    int32_t n = c->ls[ls].ncls;
    int32_t *moved = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (moved == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int32_t k = 0; k < n; k++) {
        /* c->lex and c->ls may move while interning: read through the tables each time */
        int32_t m = lexeme_of(c, c->lex[id].t, c->lex[id].node, c->ls[c->lex[id].ls].next[k]);
        if (m < 0) {
            free(moved);
            return -1;
        }
        moved[k] = m;
    }
    c->lex[id].moved = moved;
    return 0;
}

/* the lexemes node starts read from the charts' lists (set_starts): each expected terminal
 * whose lexer can move, then the %ignore ones, at their initial lexer states (_starts_of's
 * order); 1 done, 0 not (a node the lists do not hold yet: _c_node asked), -1 error */
static int node_from_lists(Core *c, int32_t node, IVec *ids, int *is_final) {
    if (c->expected == NULL || node >= PyList_GET_SIZE(c->expected) ||
        node >= PyList_GET_SIZE(c->final))
        return 0;
    PyObject *exp = PyList_GET_ITEM(c->expected, node);
    if (!PyList_Check(exp))
        return 0;
    *is_final = PyObject_IsTrue(PyList_GET_ITEM(c->final, node));
    if (*is_final < 0)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(exp); i++) {
        long t = PyLong_AsLong(PyList_GET_ITEM(exp, i));
        if (t == -1 && PyErr_Occurred())
            return -1;
        if (t < 0 || t >= c->n_start_lexers) {
            PyErr_Format(PyExc_IndexError, "node %d expects terminal %ld, which has no lexer",
                         (int)node, t);
            return -1;
        }
        if (!c->movable[t])
            continue;
        int32_t id = lexeme_of(c, (int32_t)t, node, c->initial[t]);
        if (id < 0 || ivec_push(ids, id) < 0)
            return -1;
    }
    for (Py_ssize_t i = 0; i < c->n_ignored; i++) {
        int32_t t = c->ignored[i];
        int32_t id = lexeme_of(c, t, node, c->initial[t]);
        if (id < 0 || ivec_push(ids, id) < 0)
            return -1;
    }
    return 1;
}

static int node_info(Core *c, PyObject *owner, int32_t node) {
    if (grow((void **)&c->nodes, &c->cap_nodes, node, sizeof(Node)) < 0)
        return -1;
    if (c->nodes[node].known)
        return 0;
    IVec ids = {0};
    int is_final = 0, rc = node_from_lists(c, node, &ids, &is_final);
    if (rc != 0)
        goto store;
    PyObject *r = PyObject_CallMethod(owner, "_c_node", "i", node);
    if (r == NULL)
        return -1;
    PyObject *starts, *final;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "_c_node must return (starts, final)");
        return -1;
    }
    starts = PySequence_Fast(PyTuple_GET_ITEM(r, 0), "_c_node: starts must be a sequence");
    final = PyTuple_GET_ITEM(r, 1);
    if (starts == NULL) {
        Py_DECREF(r);
        return -1;
    }
    is_final = PyObject_IsTrue(final);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(starts);
    rc = is_final < 0 ? -1 : 0;
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        int t, s;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(starts, i), "ii", &t, &s)) {
            rc = -1;
            break;
        }
        int32_t id = lexeme_of(c, t, node, s);
        rc = id < 0 ? -1 : ivec_push(&ids, id);
    }
    Py_DECREF(starts);
    Py_DECREF(r);
    rc = rc < 0 ? -1 : 1;
store:
    if (rc == 1 && ivec_reserve(&c->starts, ids.n) == 0) {
        Node *nd = &c->nodes[node];
        nd->off = (int32_t)c->starts.n;
        nd->len = (int32_t)ids.n;
        nd->final = is_final;
        if (ids.n)
            memcpy(c->starts.d + c->starts.n, ids.d, (size_t)ids.n * 4);
        c->starts.n += ids.n;
        nd->known = 1;
        rc = 0;
    } else {
        rc = -1;
    }
    free(ids.d);
    return rc;
}

static inline int lex_less(const Lexeme *x, const Lexeme *y) {
    if (x->t != y->t)
        return x->t < y->t;
    if (x->node != y->node)
        return x->node < y->node;
    return x->s < y->s;
}

/* intern the lexemes ids[0 .. n) (sorted here, duplicates dropped) with accepting; writes
 * acc[id] for a new configuration; -1 for the dead one, -3 on error */
static int32_t intern_config(Core *c, int32_t *ids, Py_ssize_t n, int accepting, char *acc,
                             Py_ssize_t acc_cap) {
    for (Py_ssize_t i = 1; i < n; i++) { /* insertion sort by (t, node, s): n is small */
        int32_t x = ids[i];
        Py_ssize_t j = i;
        while (j > 0 && lex_less(&c->lex[x], &c->lex[ids[j - 1]])) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = x;
    }
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (m == 0 || ids[i] != ids[m - 1])
            ids[m++] = ids[i];
    if (m == 0 && !accepting)
        return -1;
    ids[m] = accepting; /* the key: lexeme ids then the flag (room reserved by the caller) */
    uint64_t h = hseq(ids, m + 1);
    int32_t sid = mapv_get(&c->cfgs, ids, m + 1, h);
    if (sid != INT32_MIN)
        return sid;
    sid = (int32_t)c->cfg_off.n;
    if (sid >= acc_cap) {
        PyErr_SetString(PyExc_RuntimeError, "accepting array too small for a new configuration");
        return -3;
    }
    if (ivec_reserve(&c->cfg_lex, m) < 0 || ivec_push(&c->cfg_off, (int32_t)c->cfg_lex.n) < 0)
        return -3;
    if (ivec_push(&c->cfg_len, (int32_t)m) < 0) {
        c->cfg_off.n--;
        return -3;
    }
    memcpy(c->cfg_lex.d + c->cfg_lex.n, ids, (size_t)m * 4);
    c->cfg_lex.n += m;
    if (mapv_put(&c->cfgs, ids, m + 1, h, sid) < 0) {
        c->cfg_off.n--;
        c->cfg_len.n--;
        c->cfg_lex.n -= m;
        return -3;
    }
    acc[sid] = (char)(accepting != 0);
    return sid;
}

/* the chart node after a lexeme of terminal t begun at node ends: with set_charts, the node
 * itself for an %ignore terminal or the lead-in, else the C charts' scan (no interpreter);
 * otherwise owner._c_end(t, node). 0, or -1 with an exception set */
static int lexeme_end(Core *c, PyObject *owner, int32_t t, int32_t node, int32_t *end) {
    if (c->charts == NULL)
        return call_int(owner, "_c_end", t, node, end);
    if (t < 0 || t >= c->n_own_end) {
        PyErr_Format(PyExc_IndexError, "terminal %d has no lexer", (int)t);
        return -1;
    }
    *end = c->own_end[t] ? node : c->earley->scan(c->charts, node, t);
    return *end < 0 ? -1 : 0;
}

/* the configuration after a byte that moves the lexemes moved[0 .. n) (memoised); -3 on error */
static int32_t step(Core *c, PyObject *owner, const int32_t *moved, Py_ssize_t n, IVec *scratch,
                    IVec *ended, char *acc, Py_ssize_t acc_cap) {
    uint64_t h = hseq(moved, n);
    int32_t hit = mapv_get(&c->steps, moved, n, h);
    if (hit != INT32_MIN)
        return hit;
    scratch->n = 0;
    int accepting = 0;
    ended->n = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t id = moved[i];
        LState *st = &c->ls[c->lex[id].ls];
        if (st->flags == UNKNOWN) {
            int32_t f;
            if (call_int(owner, "_c_lexer_flags", st->t, st->s, &f) < 0)
                return -3;
            st = &c->ls[c->lex[id].ls];
            st->flags = f;
        }
        int32_t flags = st->flags;
        if (flags & 1) {
            Lexeme *lx = &c->lex[id];
            if (lx->end == UNKNOWN) {
                int32_t end = map3_get(&c->ends, lx->t, lx->node, 0);
                if (end < 0) {
                    if (lexeme_end(c, owner, lx->t, lx->node, &end) < 0)
                        return -3;
                    if (map3_put(&c->ends, c->lex[id].t, c->lex[id].node, 0, end) < 0)
                        return -3;
                }
                c->lex[id].end = end;
            }
            int32_t end = c->lex[id].end;
            Py_ssize_t k = 0;
            while (k < ended->n && ended->d[k] != end)
                k++;
            if (k == ended->n && ivec_push(ended, end) < 0)
                return -3;
        }
        if ((flags & 2) && ivec_push(scratch, id) < 0)
            return -3;
    }
    for (Py_ssize_t k = 0; k < ended->n; k++) {
        if (node_info(c, owner, ended->d[k]) < 0)
            return -3;
        Node *nd = &c->nodes[ended->d[k]];
        accepting |= nd->final;
        if (ivec_reserve(scratch, nd->len) < 0)
            return -3;
        memcpy(scratch->d + scratch->n, c->starts.d + nd->off, (size_t)nd->len * 4);
        scratch->n += nd->len;
    }
    if (ivec_reserve(scratch, 1) < 0) /* room for the key's flag */
        return -3;
    int32_t sid = intern_config(c, scratch->d, scratch->n, accepting, acc, acc_cap);
    if (sid == -3)
        return -3;
    if (mapv_put(&c->steps, moved, n, h, sid) < 0)
        return -3;
    return sid;
}

static int get_writable(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != itemsize) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s: wrong item size", what);
        return -1;
    }
    return 0;
}

static PyObject *core_intern(Core *c, PyObject *args) {
    PyObject *triples, *acc_obj;
    int accepting;
    if (!PyArg_ParseTuple(args, "OpO", &triples, &accepting, &acc_obj))
        return NULL;
    PyObject *seq = PySequence_Fast(triples, "intern: triples must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_buffer acc;
    if (get_writable(acc_obj, &acc, 1, "acc") < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int32_t *ids = malloc((size_t)(n + 1) * sizeof(int32_t));
    int32_t sid = -3;
    if (ids == NULL) {
        PyErr_NoMemory();
    } else {
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            int t, node, s;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iii", &t, &node, &s))
                break;
            if ((ids[i] = lexeme_of(c, t, node, s)) < 0)
                break;
        }
        if (i == n)
            sid = intern_config(c, ids, n, accepting, acc.buf, acc.len);
    }
    free(ids);
    PyBuffer_Release(&acc);
    Py_DECREF(seq);
    return sid == -3 ? NULL : PyLong_FromLong(sid);
}

/* the joint byte classes of the lexer states of lexemes[0 .. k) (their rows read first):
 * bytes on which every lexer state moves alike share a class; memoised on the lexer-state
 * ids, so configurations that differ only in chart nodes (the same lexers at another
 * nesting) share it. The index into c->joints, or -1 with an exception set */
static int32_t joint_of(Core *c, const int32_t *lexemes, Py_ssize_t k, int32_t *key) {
    for (Py_ssize_t i = 0; i < k; i++)
        key[i] = c->lex[lexemes[i]].ls;
    uint64_t h = hseq(key, k);
    int32_t hit = mapv_get(&c->joint_ids, key, k, h);
    if (hit != INT32_MIN)
        return hit;
    int32_t id = (int32_t)c->n_joints;
    if (grow((void **)&c->joints, &c->cap_joints, id, sizeof(Joint)) < 0)
        return -1;
    Joint *j = &c->joints[id];
    int16_t *lexcls = malloc((size_t)256 * (size_t)(k ? k : 1) * sizeof(int16_t));
    if (lexcls == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int32_t n = 0;
    for (int b = 0; b < 256; b++) {
        int16_t *mine = lexcls + (size_t)n * k; /* the candidate new class's vector */
        int live = 0;
        for (Py_ssize_t i = 0; i < k; i++) {
            mine[i] = c->ls[key[i]].cls[b];
            live |= mine[i] >= 0;
        }
        if (!live) {
            j->cls[b] = -1;
            continue;
        }
        int32_t m = 0; /* an earlier class with the same vector (classes are few) */
        while (m < n && memcmp(lexcls + (size_t)m * k, mine, (size_t)k * sizeof(int16_t)) != 0)
            m++;
        if (m == n)
            n++;
        j->cls[b] = (int16_t)m;
    }
    int16_t *fit = realloc(lexcls, (size_t)(n ? n : 1) * (size_t)(k ? k : 1) * sizeof(int16_t));
    if (fit != NULL) /* shrunk to the classes found (a failed shrink keeps the block) */
        lexcls = fit;
    j->ncls = n;
    j->k = (int32_t)k;
    j->lexcls = lexcls;
    if (mapv_put(&c->joint_ids, key, k, h, id) < 0) {
        free(lexcls);
        return -1;
    }
    c->n_joints++;
    return id;
}

/* write the row of configuration state into row (int32 [256]), only once every step succeeded;
 * acc: the accepting array, acc_cap its length. 0, or -1 with an exception set */
static int build_row_into(Core *c, PyObject *owner, int32_t state, int32_t *row, char *acc,
                          Py_ssize_t acc_cap) {
    int rc = -1;
    IVec scratch = {0}, ended = {0};
    int32_t *lexemes = NULL, *vec = NULL, **moved = NULL;
    Py_ssize_t k = c->cfg_len.d[state];
    lexemes = malloc((size_t)(k ? k : 1) * sizeof(int32_t));
    vec = malloc((size_t)(k ? k : 1) * 2 * sizeof(int32_t));
    if (lexemes == NULL || vec == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(lexemes, c->cfg_lex.d + c->cfg_off.d[state], (size_t)k * 4);
    for (Py_ssize_t i = 0; i < k; i++)
        if (lexeme_moves(c, owner, lexemes[i]) < 0)
            goto done;
    /* the joint classes of the lexemes' lexer states, and each lexeme's moved lexemes:
     * malloc'd blocks that stay put while the steps below intern new lexemes (the tables
     * holding the pointers may move) */
    moved = malloc((size_t)(k ? k : 1) * sizeof(int32_t *));
    if (moved == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++)
        moved[i] = c->lex[lexemes[i]].moved;
    int32_t jid = joint_of(c, lexemes, k, vec);
    if (jid < 0)
        goto done;
    const Joint *j = &c->joints[jid]; /* the steps below add no joint: c->joints stays put */
    const int16_t *lexcls = j->lexcls, *jcls = j->cls;
    int32_t ncls = j->ncls, target[256];
    for (int32_t m = 0; m < ncls; m++) {
        Py_ssize_t n = 0;
        for (Py_ssize_t i = 0; i < k; i++) {
            int16_t cl = lexcls[(size_t)m * k + i];
            if (cl >= 0)
                vec[n++] = moved[i][cl];
        }
        target[m] = step(c, owner, vec, n, &scratch, &ended, acc, acc_cap);
        if (target[m] == -3)
            goto done;
    }
    int32_t out[256];
    for (int b = 0; b < 256; b++)
        out[b] = jcls[b] >= 0 ? target[jcls[b]] : -1;
    memcpy(row, out, sizeof out);
    rc = 0;
done:
    free(scratch.d);
    free(ended.d);
    free(lexemes);
    free(vec);
    free(moved);
    return rc;
}

static PyObject *core_build_row(Core *c, PyObject *args) {
    PyObject *owner, *rows_obj, *acc_obj;
    int state;
    Py_ssize_t slot;
    if (!PyArg_ParseTuple(args, "OiOnO", &owner, &state, &rows_obj, &slot, &acc_obj))
        return NULL;
    if (state < 0 || state >= c->cfg_off.n) {
        PyErr_Format(PyExc_IndexError, "build_row: no configuration %d", state);
        return NULL;
    }
    Py_buffer rows, acc;
    if (get_writable(rows_obj, &rows, 4, "rows") < 0)
        return NULL;
    if (get_writable(acc_obj, &acc, 1, "acc") < 0) {
        PyBuffer_Release(&rows);
        return NULL;
    }
    int rc = -1;
    if (slot < 0 || (slot + 1) * 256 * 4 > rows.len)
        PyErr_SetString(PyExc_IndexError, "build_row: slot past the rows array");
    else
        rc = build_row_into(c, owner, state, (int32_t *)rows.buf + slot * 256, acc.buf, acc.len);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&acc);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- row_tables in C: the token-trie walk's callback without the interpreter ------------ */


/* the owner (a GrammarAutomaton) of an attached core, a new reference; NULL with an error */
static PyObject *owner_of(Core *c) {
    if (c->owner == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "row_tables: the core is not attached");
        return NULL;
    }
    PyObject *owner = PyWeakref_GetObject(c->owner);
    if (owner == NULL)
        return NULL;
    if (owner == Py_None) {
        PyErr_SetString(PyExc_RuntimeError, "row_tables: the automaton is gone");
        return NULL;
    }
    Py_INCREF(owner);
    return owner;
}

static int attr_ssize(PyObject *owner, PyObject *name, Py_ssize_t *out) {
    PyObject *v = PyObject_GetAttr(owner, name);
    if (v == NULL)
        return -1;
    *out = PyLong_AsSsize_t(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* h holds a writable buffer on now (the owner's current array; itemsize checked): kept while
 * the owner keeps that array (the tables are replaced, never resized, and only under the
 * owner's lock), taken again when it changed. 0, or -1 with an exception set */
static int held_on(Held *h, PyObject *now, Py_ssize_t itemsize, const char *what) {
    if (h->obj == now)
        return 0;
    if (h->obj != NULL) {
        PyBuffer_Release(&h->view);
        Py_CLEAR(h->obj);
    }
    if (get_writable(now, &h->view, itemsize, what) < 0)
        return -1;
    Py_INCREF(now);
    h->obj = now;
    return 0;
}

static void held_clear(Held *h) {
    if (h->obj != NULL) {
        PyBuffer_Release(&h->view);
        Py_CLEAR(h->obj);
    }
}

/* the owner's array attribute name held in h; 0, or -1 with an exception set */
static int held_attr(Held *h, PyObject *owner, PyObject *name, Py_ssize_t itemsize) {
    PyObject *now = PyObject_GetAttr(owner, name);
    if (now == NULL)
        return -1;
    int rc = held_on(h, now, itemsize, PyUnicode_AsUTF8(name));
    Py_DECREF(now);
    return rc;
}

/* slot[state] of the owner's current _slot array: >= 0 built, -1 not, -2 out of range,
 * -3 error */
static Py_ssize_t slot_of(Core *c, PyObject *owner, int32_t state) {
    if (held_attr(&c->held_slot, owner, S_slot, 8) < 0)
        return -3;
    const int64_t *slot = c->held_slot.view.buf;
    if (state >= c->held_slot.view.len / 8)
        return -2;
    return slot[state] >= 0 ? slot[state] : -1;
}

/* build the row of state in C under the owner's lock when the tables have room and the row
 * budget allows: 1 built (or found built), 0 not tried (the Python path must grow a table or
 * raise the budget error), -1 error (the row left unbuilt) */
static int fast_build(Core *c, PyObject *owner, int32_t state) {
    PyObject *r = PyObject_CallMethodNoArgs(c->lock, S_acquire);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    int rc = -1;
    Py_ssize_t num_rows, max_states;
    if (attr_ssize(owner, S_num_rows, &num_rows) < 0 ||
        attr_ssize(owner, S_max_states, &max_states) < 0)
        goto unlock;
    if (held_attr(&c->held_slot, owner, S_slot, 8) < 0 ||
        held_attr(&c->held_rows, owner, S_rows, 4) < 0 ||
        held_attr(&c->held_acc, owner, S_acc, 1) < 0)
        goto unlock;
    int64_t *slot = c->held_slot.view.buf;
    Py_ssize_t cap = c->held_slot.view.len / 8, acc_len = c->held_acc.view.len;
    if (state < 0 || state >= c->cfg_off.n || state >= cap) {
        PyErr_Format(PyExc_IndexError, "row_tables: no configuration %d", state);
        goto unlock;
    }
    if (slot[state] >= 0) {
        rc = 1; /* built meanwhile */
        goto unlock;
    }
    if (num_rows >= max_states || num_rows >= c->held_rows.view.len / 1024 ||
        c->cfg_off.n + 256 > cap || c->cfg_off.n + 256 > acc_len) {
        rc = 0; /* the Python path grows the tables or raises the budget error */
        goto unlock;
    }
    /* the held views stay the owner's tables while the lock is held (no growth meanwhile) */
    if (build_row_into(c, owner, state, (int32_t *)c->held_rows.view.buf + num_rows * 256,
                       c->held_acc.view.buf, acc_len) < 0)
        goto unlock;
    PyObject *n = PyLong_FromSsize_t(num_rows + 1);
    if (n == NULL || PyObject_SetAttr(owner, S_num_rows, n) < 0) {
        Py_XDECREF(n);
        goto unlock;
    }
    Py_DECREF(n);
    slot[state] = num_rows; /* published last, as the Python path */
    rc = 1;
unlock:;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* release the lock whatever happened */
    r = PyObject_CallMethodNoArgs(c->lock, S_release);
    if (r == NULL) {
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        return -1;
    }
    Py_DECREF(r);
    PyErr_Restore(et, ev, tb);
    return rc;
}

static PyObject *core_row_tables(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    long state = -1;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "row_tables(state=-1) takes at most one argument");
        return NULL;
    }
    if (nargs == 1) {
        state = PyLong_AsLong(args[0]);
        if (state == -1 && PyErr_Occurred())
            return NULL;
    }
    PyObject *owner = owner_of(c);
    if (owner == NULL)
        return NULL;
    PyObject *out = NULL;
    int slow = 0;
    if (state >= 0) {
        Py_ssize_t at = slot_of(c, owner, (int32_t)state);
        if (at == -3)
            goto done;
        if (at == -1) {
            int rc = fast_build(c, owner, (int32_t)state);
            if (rc < 0)
                goto done;
            slow = rc == 0;
        } else if (at == -2) {
            slow = 1; /* out of range: the Python path raises */
        }
    }
    if (!slow && c->tables != NULL) {
        PyObject *rows = PyObject_GetAttr(owner, S_rows);
        PyObject *slot = rows ? PyObject_GetAttr(owner, S_slot) : NULL;
        int same = slot != NULL && rows == c->rows_seen && slot == c->slot_seen;
        Py_XDECREF(rows);
        Py_XDECREF(slot);
        if (slot == NULL)
            goto done;
        if (same) {
            out = c->tables;
            Py_INCREF(out);
            goto done;
        }
    }
    /* the Python path: builds what the fast path did not, and the read-only views */
    PyObject *arg = PyLong_FromLong(slow ? state : -1L);
    if (arg == NULL)
        goto done;
    out = PyObject_CallMethodOneArg(owner, S_slow, arg);
    Py_DECREF(arg);
    if (out != NULL) {
        PyObject *rows = PyObject_GetAttr(owner, S_rows);
        PyObject *slot = rows ? PyObject_GetAttr(owner, S_slot) : NULL;
        if (slot == NULL) {
            Py_XDECREF(rows);
            Py_CLEAR(out);
            goto done;
        }
        Py_XSETREF(c->rows_seen, rows);
        Py_XSETREF(c->slot_seen, slot);
        Py_INCREF(out);
        Py_XSETREF(c->tables, out);
    }
done:
    Py_DECREF(owner);
    return out;
}

/* the configuration after byte b of configuration state without its row: build_row_into's
 * step for the one class b is in (the lexemes that move on b, in the configuration's order:
 * the same step memo key, so the same configuration). -1 dead, -3 on error */
static int32_t byte_step(Core *c, PyObject *owner, int32_t state, int b, IVec *vec, IVec *scratch,
                         IVec *ended, char *acc, Py_ssize_t acc_cap) {
    Py_ssize_t k = c->cfg_len.d[state];
    vec->n = 0;
    if (ivec_reserve(vec, k ? k : 1) < 0)
        return -3;
    for (Py_ssize_t i = 0; i < k; i++) {
        int32_t id = c->cfg_lex.d[c->cfg_off.d[state] + i]; /* (cfg_lex may move: read again) */
        if (lexeme_moves(c, owner, id) < 0)
            return -3;
        int16_t cl = c->ls[c->lex[id].ls].cls[b];
        if (cl >= 0)
            vec->d[vec->n++] = c->lex[id].moved[cl];
    }
    if (vec->n == 0)
        return -1; /* no lexeme moves on b: the row's entry is -1 (no class holds b) */
    return step(c, owner, vec->d, vec->n, scratch, ended, acc, acc_cap);
}

/* walk(state, data) -> int or None: the configuration after data's bytes from state, -1 when
 * it dies (GrammarAutomaton.walk), under the owner's lock, building no row: a built row's
 * entry is read, a missing one is the step of the byte's class alone (byte_step). None,
 * nothing walked, where the tables lack room for a new configuration per byte (the row path
 * grows them). Raises what a step raises (a budget, the callbacks). */
static PyObject *core_walk(Core *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "walk(state, data) takes two arguments");
        return NULL;
    }
    long s = PyLong_AsLong(args[0]);
    if (s == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(args[1], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *owner = owner_of(c);
    if (owner == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *r = PyObject_CallMethodNoArgs(c->lock, S_acquire);
    if (r == NULL) {
        Py_DECREF(owner);
        PyBuffer_Release(&data);
        return NULL;
    }
    Py_DECREF(r);
    PyObject *out = NULL;
    IVec vec = {0}, scratch = {0}, ended = {0};
    if (held_attr(&c->held_slot, owner, S_slot, 8) < 0 ||
        held_attr(&c->held_rows, owner, S_rows, 4) < 0 ||
        held_attr(&c->held_acc, owner, S_acc, 1) < 0)
        goto unlock;
    const int64_t *slot = c->held_slot.view.buf;
    const int32_t *rows = c->held_rows.view.buf;
    Py_ssize_t cap = c->held_slot.view.len / 8, acc_len = c->held_acc.view.len;
    Py_ssize_t n_rows = c->held_rows.view.len / 1024;
    if (s < -1 || s >= c->cfg_off.n || s >= cap) {
        PyErr_Format(PyExc_IndexError, "walk: no configuration %ld", s);
        goto unlock;
    }
    if (c->cfg_off.n + data.len + 1 > cap || c->cfg_off.n + data.len + 1 > acc_len) {
        out = Py_None; /* a new configuration per byte may not fit: the row path grows */
        Py_INCREF(out);
        goto unlock;
    }
    const uint8_t *p = data.buf;
    for (Py_ssize_t i = 0; s >= 0 && i < data.len; i++) {
        int64_t at = slot[s];
        if (at >= 0 && at < n_rows) {
            s = rows[at * 256 + p[i]];
            continue;
        }
        int32_t nxt = byte_step(c, owner, (int32_t)s, p[i], &vec, &scratch, &ended,
                                c->held_acc.view.buf, acc_len);
        if (nxt == -3)
            goto unlock;
        s = nxt;
    }
    out = PyLong_FromLong(s < 0 ? -1 : s);
unlock:;
    free(vec.d);
    free(scratch.d);
    free(ended.d);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* release the lock whatever happened */
    r = PyObject_CallMethodNoArgs(c->lock, S_release);
    if (r == NULL) {
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        Py_CLEAR(out);
    } else {
        Py_DECREF(r);
        PyErr_Restore(et, ev, tb);
    }
    Py_DECREF(owner);
    PyBuffer_Release(&data);
    return out;
}

static PyObject *core_attach(Core *c, PyObject *owner) {
    PyObject *lock = PyObject_GetAttr(owner, S_lock);
    if (lock == NULL)
        return NULL;
    PyObject *ref = PyWeakref_NewRef(owner, NULL);
    if (ref == NULL) {
        Py_DECREF(lock);
        return NULL;
    }
    Py_XSETREF(c->owner, ref);
    Py_XSETREF(c->lock, lock);
    held_clear(&c->held_slot);
    held_clear(&c->held_rows);
    held_clear(&c->held_acc);
    Py_CLEAR(c->tables);
    Py_CLEAR(c->rows_seen);
    Py_CLEAR(c->slot_seen);
    Py_RETURN_NONE;
}

static PyObject *core_set_groups(Core *c, PyObject *arg) {
    if (c->n_ls > 0) {
        PyErr_SetString(PyExc_RuntimeError, "set_groups: lexer states already interned");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(arg, "set_groups: groups must be a sequence of ints");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int32_t *groups = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (groups == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long g = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (g == -1 && PyErr_Occurred()) {
            free(groups);
            Py_DECREF(seq);
            return NULL;
        }
        groups[i] = (int32_t)g;
    }
    Py_DECREF(seq);
    free(c->groups);
    c->groups = groups;
    c->n_groups = n;
    Py_RETURN_NONE;
}

static PyObject *core_set_charts(Core *c, PyObject *args) {
    PyObject *charts;
    Py_buffer own;
    if (!PyArg_ParseTuple(args, "Oy*", &charts, &own))
        return NULL;
    const SgEarleyApi *api = PyCapsule_Import(SG_EARLEY_API_NAME, 0);
    if (api == NULL) {
        PyBuffer_Release(&own);
        return NULL;
    }
    if (!PyObject_TypeCheck(charts, api->charts_type)) {
        PyBuffer_Release(&own);
        PyErr_SetString(PyExc_TypeError, "set_charts: charts must be an _earley.Charts");
        return NULL;
    }
    uint8_t *flags = malloc(own.len ? (size_t)own.len : 1);
    if (flags == NULL) {
        PyBuffer_Release(&own);
        return PyErr_NoMemory();
    }
    memcpy(flags, own.buf, (size_t)own.len);
    free(c->own_end);
    c->own_end = flags;
    c->n_own_end = own.len;
    PyBuffer_Release(&own);
    Py_INCREF(charts);
    Py_XSETREF(c->charts, charts);
    c->earley = api;
    Py_RETURN_NONE;
}

/* ints of a sequence as a malloc'd int32 array (*out, *n); 0, or -1 with an exception set */
static int int32s_of(PyObject *arg, const char *what, int32_t **out, Py_ssize_t *n) {
    PyObject *seq = PySequence_Fast(arg, what);
    if (seq == NULL)
        return -1;
    *n = PySequence_Fast_GET_SIZE(seq);
    *out = malloc((size_t)(*n ? *n : 1) * sizeof(int32_t));
    if (*out == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            free(*out);
            *out = NULL;
            Py_DECREF(seq);
            return -1;
        }
        (*out)[i] = (int32_t)v;
    }
    Py_DECREF(seq);
    return 0;
}

static PyObject *core_set_starts(Core *c, PyObject *args) {
    PyObject *expected, *final, *initial_obj, *ignored_obj;
    Py_buffer movable;
    if (!PyArg_ParseTuple(args, "O!O!y*OO", &PyList_Type, &expected, &PyList_Type, &final,
                          &movable, &initial_obj, &ignored_obj))
        return NULL;
    int32_t *initial = NULL, *ignored = NULL;
    Py_ssize_t n_initial = 0, n_ignored = 0;
    uint8_t *mov = NULL;
    if (int32s_of(initial_obj, "set_starts: initial must be a sequence of ints", &initial,
                  &n_initial) < 0 ||
        int32s_of(ignored_obj, "set_starts: ignored must be a sequence of ints", &ignored,
                  &n_ignored) < 0)
        goto fail;
    if (movable.len != n_initial) {
        PyErr_SetString(PyExc_ValueError, "set_starts: movable and initial differ in length");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n_ignored; i++)
        if (ignored[i] < 0 || ignored[i] >= n_initial) {
            PyErr_Format(PyExc_IndexError, "set_starts: ignored terminal %d has no lexer",
                         (int)ignored[i]);
            goto fail;
        }
    mov = malloc(movable.len ? (size_t)movable.len : 1);
    if (mov == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    memcpy(mov, movable.buf, (size_t)movable.len);
    PyBuffer_Release(&movable);
    free(c->initial);
    free(c->movable);
    free(c->ignored);
    c->initial = initial;
    c->movable = mov;
    c->n_start_lexers = n_initial;
    c->ignored = ignored;
    c->n_ignored = n_ignored;
    Py_INCREF(expected);
    Py_XSETREF(c->expected, expected);
    Py_INCREF(final);
    Py_XSETREF(c->final, final);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&movable);
    free(initial);
    free(ignored);
    return NULL;
}

/* set_lexers(dfas): dfas[g] the ByteDFA of lexer group g (set_groups' groups; without them,
 * of terminal g), or None; a lexer state of a group with one has its row and its targets'
 * flags built here over the ByteDFA's tables (lexer_row_c) instead of owner._c_lexer_row */
static PyObject *core_set_lexers(Core *c, PyObject *arg) {
    if (!PyList_CheckExact(arg)) {
        PyErr_SetString(PyExc_TypeError, "set_lexers(dfas: list)");
        return NULL;
    }
    if (c->lexer_dfas != NULL) {
        PyErr_SetString(PyExc_ValueError, "set_lexers: the lexers are set already");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(arg);
    c->views = PyMem_Calloc(n ? n : 1, sizeof(DfaView));
    c->view_open = PyMem_Calloc(n ? n : 1, 1);
    if (c->views == NULL || c->view_open == NULL) {
        PyMem_Free(c->views);
        PyMem_Free(c->view_open);
        c->views = NULL;
        c->view_open = NULL;
        return PyErr_NoMemory();
    }
    c->n_views = n;
    c->lexer_dfas = PyList_GetSlice(arg, 0, n);  /* a copy: entries stay as given */
    if (c->lexer_dfas == NULL)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *core_config(Core *c, PyObject *arg) {
    Py_ssize_t sid = PyLong_AsSsize_t(arg);
    if (sid == -1 && PyErr_Occurred())
        return NULL;
    if (sid < 0 || sid >= c->cfg_off.n) {
        PyErr_Format(PyExc_IndexError, "config: no configuration %zd", sid);
        return NULL;
    }
    Py_ssize_t n = c->cfg_len.d[sid];
    const int32_t *ids = c->cfg_lex.d + c->cfg_off.d[sid];
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Lexeme *lx = &c->lex[ids[i]];
        PyObject *t = Py_BuildValue("(iii)", lx->t, lx->node, lx->s);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, t);
    }
    return out;
}

static PyObject *core_counts(Core *c, void *which) {
    switch ((intptr_t)which) {
    case 0:
        return PyLong_FromSsize_t(c->cfg_off.n);
    case 1:
        return PyLong_FromSize_t(c->steps.n);
    default:
        return PyLong_FromSsize_t(c->n_lex);
    }
}

static void core_dealloc(Core *c) {
    for (Py_ssize_t i = 0; i < c->n_ls; i++) {
        free(c->ls[i].cls);
        free(c->ls[i].next);
    }
    for (Py_ssize_t i = 0; i < c->n_lex; i++)
        free(c->lex[i].moved);
    free(c->ls);
    free(c->lex);
    free(c->nodes);
    free(c->ls_ids.e);
    free(c->lex_ids.e);
    free(c->ends.e);
    free(c->starts.d);
    free(c->cfg_off.d);
    free(c->cfg_len.d);
    free(c->cfg_lex.d);
    free(c->cfgs.e);
    free(c->cfgs.pool.d);
    free(c->steps.e);
    free(c->steps.pool.d);
    free(c->groups);
    for (Py_ssize_t i = 0; i < c->n_joints; i++)
        free(c->joints[i].lexcls);
    free(c->joints);
    free(c->joint_ids.e);
    free(c->joint_ids.pool.d);
    Py_XDECREF(c->owner);
    Py_XDECREF(c->lock);
    Py_XDECREF(c->charts);
    free(c->own_end);
    Py_XDECREF(c->expected);
    Py_XDECREF(c->final);
    free(c->initial);
    free(c->movable);
    free(c->ignored);
    held_clear(&c->held_slot);
    held_clear(&c->held_rows);
    held_clear(&c->held_acc);
    Py_XDECREF(c->tables);
    Py_XDECREF(c->rows_seen);
    Py_XDECREF(c->slot_seen);
    for (Py_ssize_t g = 0; g < c->n_views; g++)
        if (c->view_open[g])
            dfa_close(&c->views[g]);
    PyMem_Free(c->views);
    PyMem_Free(c->view_open);
    Py_XDECREF(c->lexer_dfas);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyMethodDef core_methods[] = {
    {"intern", (PyCFunction)core_intern, METH_VARARGS,
     "intern(triples, accepting, acc) -> configuration id (-1: dead)"},
    {"build_row", (PyCFunction)core_build_row, METH_VARARGS,
     "build_row(owner, state, rows, slot, acc): write rows[slot], the row of state"},
    {"config", (PyCFunction)core_config, METH_O, "config(id) -> ((t, node, s), ...)"},
    {"set_charts", (PyCFunction)core_set_charts, METH_VARARGS,
     "set_charts(charts, own_end): lexeme ends from the C charts' scan, not _c_end"},
    {"set_starts", (PyCFunction)core_set_starts, METH_VARARGS,
     "set_starts(expected, final, movable, initial, ignored): node starts read in C, not _c_node"},
    {"attach", (PyCFunction)core_attach, METH_O,
     "attach(owner): row_tables builds the rows of owner (held by a weak reference)"},
    {"walk", (PyCFunction)(void (*)(void))core_walk, METH_FASTCALL,
     "walk(state, data) -> the configuration after data (-1 dead), no row built; None: no room"},
    {"row_tables", (PyCFunction)(void (*)(void))core_row_tables, METH_FASTCALL,
     "row_tables(state=-1) -> (rows, slot): GrammarAutomaton.row_tables, the row built in C"},
    {"set_lexers", (PyCFunction)core_set_lexers, METH_O,
     "set_lexers(dfas): dfas[g] the ByteDFA of lexer group g or None: its rows built in C"},
    {"set_groups", (PyCFunction)core_set_groups, METH_O,
     "set_groups(groups): groups[t] the lexer of terminal t (before anything is interned)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef core_getset[] = {
    {"num_configs", (getter)core_counts, NULL, "configurations interned", (void *)0},
    {"num_steps", (getter)core_counts, NULL, "steps memoised", (void *)1},
    {"num_lexemes", (getter)core_counts, NULL, "lexemes interned", (void *)2},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "structgen.fsm.grammar._cfgrows.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The grammar automaton's configurations, lexemes and step memo (see the module).",
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)core_dealloc,
    .tp_methods = core_methods,
    .tp_getset = core_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cfgrows",
    "The grammar automaton's configuration step and row building (csrc/cfgrows.c).", -1, NULL,
};

PyMODINIT_FUNC PyInit__cfgrows(void) {
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {{&S_slot, "_slot"},         {&S_rows, "_rows"},
                 {&S_acc, "_accepting"},     {&S_num_rows, "_num_rows"},
                 {&S_max_states, "max_states"}, {&S_lock, "_lock"},
                 {&S_slow, "_row_tables_py"}, {&S_acquire, "acquire"},
                 {&S_release, "release"},    {&S_complete, "_complete"},
                 {&S_dense, "_dense"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*names[i].slot == NULL &&
            (*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL)
            return NULL;
    if (dfa_rows_init() < 0 || PyType_Ready(&CoreType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "Core", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
