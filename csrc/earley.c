/* The Earley charts' scan step in C (structgen/fsm/grammar/earley.py, EarleyCharts; its
 * Python path is the reference and builds the same nodes, in the same order).
 *
 * Why: a scan costs 15-25 us of interpreter work in Python (the kernel's items, the closure
 * of the items with an origin, interning the node as a frozenset, its waiting lists), and the
 * long tokens of a large vocabulary cross many lexeme boundaries: a third of a cold pass of
 * json.gbnf on a 150k BPE, two fifths of llama.cpp's c.gbnf on SmolLM2.
 *
 * The algorithm is earley.py's, step for step: items (p, dot, origin), origin -1 for SELF;
 * the closure of the items with an origin (_close_own, each completion's cascade memoised per
 * (nonterminal, origin) in a bounded cache emptied past max_completed_items), the SELF items
 * from per-nonterminal predicted sets, nodes interned by (incomplete items, final) and indexed
 * by their items with an origin, Leo's right-recursion origins (_item) and canonical origins
 * (_canonical, first seen wins). Every order that decides which origin is seen first is the
 * reference's: the agenda is a stack, a node's waiting lists are in sorted item order, seeds
 * and kernels follow them; node ids are therefore equal.
 *
 *   Charts(rhs, lhs, by_lhs, nullable_nt, nullable_t, start, max_items, too_complex)
 *       rhs          list of tuples of ints: the symbols of each production (>= 0 a
 *                    nonterminal, < 0 terminal -1 - s)
 *       lhs          list of ints: the nonterminal of each production
 *       by_lhs       list (per nonterminal) of lists of production ids that can finish
 *       nullable_nt  bytes [num nonterminals]: 1 where it derives the empty string
 *       nullable_t   bytes [num terminals]: 1 where the terminal's regex accepts ""
 *       start        the start nonterminal (production 0 is S' -> start)
 *       max_items    budget of items over all nodes
 *       too_complex  the exception class raised past the budget (GrammarTooComplexError)
 *   charts.scan(node, terminal) -> the node after one lexeme of terminal at node (memoised);
 *       IndexError for a node not built, too_complex past the budget (nothing recorded)
 *   _C_API: a capsule (sg_earley_api.h) with scan as a C function, which the grammar
 *       automaton's row builder (csrc/cfgrows.c) calls without a Python frame per scan
 *   charts.items(node) -> frozenset of (p, dot, origin): the node's incomplete items
 *   charts.waiting(node) -> {symbol: [items waiting on it, in sorted order]}
 *   charts.expected, charts.final: lists (one entry per node: the sorted terminal ids it
 *       can scan, whether the parse may end there), appended to as nodes are built
 *   charts.root, charts.num_nodes, charts.num_items, charts.max_items (settable),
 *   charts.max_completed_items (settable; default max_items)
 * The GIL is held throughout; a Charts is not shared between threads without a lock (the
 * grammar automaton calls it under its own).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sg_earley_api.h"
#include "sg_intmaps.h"

#define SELF (-1)

typedef struct {
    int32_t p, d, o;
} Item;

static inline int item_cmp(const void *a, const void *b) {
    const Item *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    if (x->o != y->o)
        return x->o < y->o ? -1 : 1;
    return 0;
}

/* room for extra more Items in the array *d holding n of *cap (doubled from 64, as
 * sg_intmaps.h's ivec_reserve); -1 with MemoryError set */
static int items_reserve(Item **d, size_t n, size_t *cap, size_t extra) {
    if (n + extra <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < n + extra)
        c *= 2;
    Item *a = realloc(*d, c * sizeof(Item));
    if (a == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *d = a;
    *cap = c;
    return 0;
}

/* ---- sets of items and of ints, emptied in O(1) by a generation count ---------------- */

typedef struct {
    Item it;
    uint32_t gen;
} ISlot;

typedef struct {
    ISlot *e;
    size_t cap;
    uint32_t gen;
    Item *list; /* the members, in insertion order */
    size_t n, lcap;
} ISet;

static inline size_t hitem(Item x) {
    uint64_t k = ((uint64_t)(uint32_t)x.p << 32) ^ ((uint64_t)(uint32_t)x.d << 20);
    return (size_t)mix(k ^ ((uint64_t)(uint32_t)x.o * 0x9e3779b97f4a7c15ULL));
}

static void iset_clear(ISet *s) {
    s->n = 0;
    if (++s->gen == 0) { /* wrapped: stamps of the old generations could collide */
        for (size_t i = 0; i < s->cap; i++)
            s->e[i].gen = 0;
        s->gen = 1;
    }
}

static inline int iset_has(const ISet *s, Item x) {
    if (s->cap == 0)
        return 0;
    size_t mask = s->cap - 1;
    for (size_t i = hitem(x) & mask;; i = (i + 1) & mask) {
        const ISlot *e = &s->e[i];
        if (e->gen != s->gen)
            return 0;
        if (e->it.p == x.p && e->it.d == x.d && e->it.o == x.o)
            return 1;
    }
}

static int iset_grow(ISet *s) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    ISlot *e = calloc(cap, sizeof(ISlot));
    if (e == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    free(s->e);
    s->e = e;
    s->cap = cap;
    if (s->gen == 0)
        s->gen = 1;
    for (size_t j = 0; j < s->n; j++) { /* the members are in the list */
        size_t i = hitem(s->list[j]) & (cap - 1);
        while (e[i].gen == s->gen)
            i = (i + 1) & (cap - 1);
        e[i].it = s->list[j];
        e[i].gen = s->gen;
    }
    return 0;
}

/* 1 when x was added, 0 when present, -1 on error */
static int iset_add(ISet *s, Item x) {
    if (s->gen == 0)
        s->gen = 1;
    if (2 * (s->n + 1) > s->cap && iset_grow(s) < 0)
        return -1;
    size_t mask = s->cap - 1;
    size_t i = hitem(x) & mask;
    for (;; i = (i + 1) & mask) {
        ISlot *e = &s->e[i];
        if (e->gen != s->gen)
            break;
        if (e->it.p == x.p && e->it.d == x.d && e->it.o == x.o)
            return 0;
    }
    if (items_reserve(&s->list, s->n, &s->lcap, 1) < 0)
        return -1;
    s->e[i].it = x;
    s->e[i].gen = s->gen;
    s->list[s->n++] = x;
    return 1;
}

static void iset_free(ISet *s) {
    free(s->e);
    free(s->list);
}

typedef struct { /* a set of nonterminals: stamp per nonterminal */
    uint32_t *stamp;
    uint32_t gen;
    IVec list;
} WSet;

static void wset_clear(WSet *w, Py_ssize_t num_nt) {
    w->list.n = 0;
    if (++w->gen == 0) {
        memset(w->stamp, 0, (size_t)num_nt * sizeof(uint32_t));
        w->gen = 1;
    }
}

static inline int wset_add(WSet *w, int32_t x) {
    if (w->stamp[x] == w->gen)
        return 0;
    w->stamp[x] = w->gen;
    return ivec_push(&w->list, x);
}

/* a closure's scratch: the items, the incomplete ones, the nonterminals waited on, the agenda */
typedef struct {
    ISet items, live;
    WSet waits;
    Item *agenda;
    size_t na, acap;
} Level;

static int push(Level *L, Item x) {
    if (items_reserve(&L->agenda, L->na, &L->acap, 1) < 0)
        return -1;
    L->agenda[L->na++] = x;
    return 0;
}

/* ---- the charts ----------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    Py_ssize_t num_prods, num_nt, num_t;
    int32_t *body_off, *body_len, *bodies, *lhs_of; /* productions */
    int32_t *by_off, *by_len, *by;                  /* productions of each nonterminal */
    uint8_t *null_nt, *null_t;
    int32_t start;
    Py_ssize_t max_items, num_items, max_completed, completed_items;
    PyObject *too_complex;
    PyObject *expected, *final; /* Python lists, one entry per node */
    /* nodes: incomplete items sorted, in node_items (3 ints each) from node_off[n] */
    IVec node_off, node_len, node_items;
    Map3 waiting; /* (node, symbol, 0) -> offset in wait_pool of [len, items...] */
    IVec wait_pool;
    MapV ids;    /* [final, sorted incomplete items...] -> node */
    MapV by_own; /* [final, sorted incomplete items with an origin...] -> node */
    Map3 scans;  /* (node, terminal, 0) -> node */
    Map3 completed; /* (nonterminal, origin, 0) -> offset in comp_pool (see completion) */
    IVec comp_pool;
    Map3 canon;  /* (nonterminal, node, 0) -> canonical node */
    MapV canon_of; /* [nonterminal, sorted seeds...] -> node */
    int32_t *pred_off; /* per nonterminal: offset in pred_pool of [len, items...], -1 unknown */
    IVec pred_pool;
    Level l0, l1;      /* a node's closure; a completion's closure inside it */
    ISet scratch, sc2; /* a node's whole item set; a SELF closure */
    IVec key;          /* a key being built */
} Charts;

static inline int nullable(const Charts *c, int32_t sym) {
    return sym >= 0 ? c->null_nt[sym] : c->null_t[-1 - sym];
}

static inline const Item *items_at(const IVec *pool, int32_t off) {
    return (const Item *)(pool->d + off);
}

/* waiting(node, sym): the items of node waiting on sym (n set, NULL when none) */
static inline const Item *waiting_of(const Charts *c, int32_t node, int32_t sym, int32_t *n) {
    int32_t off = map3_get(&c->waiting, node, sym, 0);
    if (off < 0) {
        *n = 0;
        return NULL;
    }
    *n = c->wait_pool.d[off];
    return items_at(&c->wait_pool, off + 1);
}

static int push_items(IVec *v, const Item *it, Py_ssize_t n) {
    if (ivec_reserve(v, 3 * n) < 0)
        return -1;
    memcpy(v->d + v->n, it, (size_t)n * sizeof(Item));
    v->n += 3 * n;
    return 0;
}

/* the key [head, items...] in c->key; its hash */
static int make_key(Charts *c, int32_t head, const Item *it, Py_ssize_t n, uint64_t *h) {
    c->key.n = 0;
    if (ivec_push(&c->key, head) < 0 || push_items(&c->key, it, n) < 0)
        return -1;
    *h = hseq(c->key.d, c->key.n);
    return 0;
}

static int32_t canonical(Charts *c, int32_t lhs, int32_t origin, int *err) {
    int32_t hit = map3_get(&c->canon, lhs, origin, 0);
    if (hit >= 0)
        return hit;
    if (lhs == c->start) {
        hit = origin;
    } else {
        int32_t n;
        const Item *w = waiting_of(c, origin, lhs, &n);
        Item *seeds = malloc(((size_t)n + 1) * sizeof(Item));
        if (seeds == NULL) {
            PyErr_NoMemory();
            *err = 1;
            return -1;
        }
        for (int32_t i = 0; i < n; i++)
            seeds[i] = (Item){w[i].p, w[i].d + 1, w[i].o == SELF ? origin : w[i].o};
        qsort(seeds, (size_t)n, sizeof(Item), item_cmp);
        int32_t m = 0; /* a frozenset: duplicates once */
        for (int32_t i = 0; i < n; i++)
            if (m == 0 || item_cmp(&seeds[m - 1], &seeds[i]) != 0)
                seeds[m++] = seeds[i];
        uint64_t h;
        int bad = make_key(c, lhs, seeds, m, &h) < 0;
        free(seeds);
        if (bad) {
            *err = 1;
            return -1;
        }
        hit = mapv_get(&c->canon_of, c->key.d, c->key.n, h);
        if (hit == INT32_MIN) {
            hit = origin;
            if (mapv_put(&c->canon_of, c->key.d, c->key.n, h, hit) < 0) {
                *err = 1;
                return -1;
            }
        }
    }
    if (map3_put(&c->canon, lhs, origin, 0, hit) < 0) {
        *err = 1;
        return -1;
    }
    return hit;
}

/* earley.py's _item: Leo's origin at the top of a right-recursive chain, made canonical */
static Item make_item(Charts *c, int32_t p, int32_t dot, int32_t origin, int *err) {
    int32_t lhs = c->lhs_of[p];
    if (dot == c->body_len[p] - 1) {
        for (;;) {
            int32_t n;
            const Item *above = waiting_of(c, origin, lhs, &n);
            if (n != 1)
                break;
            Item q = above[0];
            if (q.o == SELF || c->lhs_of[q.p] != lhs || q.d != c->body_len[q.p] - 1)
                break;
            origin = q.o;
        }
    }
    return (Item){p, dot, canonical(c, lhs, origin, err)};
}

static int completion(Charts *c, int32_t lhs, int32_t origin, int32_t *out);

/* earley.py's _close_own into L (emptied by the caller) */
static int close_own(Charts *c, Level *L, const Item *seeds, Py_ssize_t nseeds, int compute) {
    L->na = 0;
    for (Py_ssize_t i = 0; i < nseeds; i++) {
        int r = iset_add(&L->items, seeds[i]);
        if (r < 0 || (r == 1 && push(L, seeds[i]) < 0))
            return -1;
    }
    int err = 0;
    while (L->na) {
        Item x = L->agenda[--L->na];
        if (x.d < c->body_len[x.p]) {
            if (iset_add(&L->live, x) < 0)
                return -1;
            int32_t sym = c->bodies[c->body_off[x.p] + x.d];
            if (sym >= 0 && wset_add(&L->waits, sym) < 0)
                return -1;
            if (nullable(c, sym)) {
                Item y = {x.p, x.d + 1, x.o};
                int r = iset_add(&L->items, y);
                if (r < 0 || (r == 1 && push(L, y) < 0))
                    return -1;
            }
            continue;
        }
        int32_t lhs = c->lhs_of[x.p];
        int32_t off = map3_get(&c->completed, lhs, x.o, 0);
        if (off < 0 && compute && completion(c, lhs, x.o, &off) < 0)
            return -1;
        if (off >= 0) { /* the memoised cascade: [n, items..., nw, waits..., nl, live...] */
            const int32_t *d = c->comp_pool.d + off;
            int32_t n = d[0];
            for (int32_t i = 0; i < n; i++)
                if (iset_add(&L->items, items_at(&c->comp_pool, off + 1 + 3 * i)[0]) < 0)
                    return -1;
            d = c->comp_pool.d + off + 1 + 3 * n;
            int32_t nw = d[0];
            for (int32_t i = 0; i < nw; i++)
                if (wset_add(&L->waits, d[1 + i]) < 0)
                    return -1;
            int32_t loff = off + 2 + 3 * n + nw;
            int32_t nl = c->comp_pool.d[loff];
            for (int32_t i = 0; i < nl; i++)
                if (iset_add(&L->live, items_at(&c->comp_pool, loff + 1 + 3 * i)[0]) < 0)
                    return -1;
            continue;
        }
        int32_t n;
        const Item *w = waiting_of(c, x.o, lhs, &n);
        for (int32_t i = 0; i < n; i++) {
            Item q = w[i];
            Item y = make_item(c, q.p, q.d + 1, q.o == SELF ? x.o : q.o, &err);
            if (err)
                return -1;
            int r = iset_add(&L->items, y);
            if (r < 0 || (r == 1 && push(L, y) < 0))
                return -1;
        }
    }
    return 0;
}

static int contains_final(const Item *it, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (it[i].p == 0 && it[i].d == 1 && it[i].o == 0)
            return 1;
    return 0;
}

/* earley.py's _completion: [n, items..., nw, waits..., nl, sorted live..., has (0, 1, 0)] at
 * *out in comp_pool, memoised (the memo emptied past max_completed_items) */
static int completion(Charts *c, int32_t lhs, int32_t origin, int32_t *out) {
    int32_t n;
    const Item *w = waiting_of(c, origin, lhs, &n);
    Item *seeds = malloc(((size_t)n + 1) * sizeof(Item));
    if (seeds == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int err = 0;
    for (int32_t i = 0; i < n && !err; i++)
        seeds[i] = make_item(c, w[i].p, w[i].d + 1, w[i].o == SELF ? origin : w[i].o, &err);
    Level *L = &c->l1;
    iset_clear(&L->items);
    iset_clear(&L->live);
    wset_clear(&L->waits, c->num_nt);
    int bad = err || close_own(c, L, seeds, n, 0) < 0;
    free(seeds);
    if (bad)
        return -1;
    Py_ssize_t ni = (Py_ssize_t)L->items.n;
    c->completed_items += ni;
    if (c->completed_items > c->max_completed) { /* a cache: emptied past its bound */
        for (size_t i = 0; i < c->completed.cap; i++)
            c->completed.e[i].a = -1;
        c->completed.n = 0;
        c->comp_pool.n = 0;
        c->completed_items = ni;
    }
    qsort(L->live.list, L->live.n, sizeof(Item), item_cmp);
    IVec *v = &c->comp_pool;
    int32_t off = (int32_t)v->n;
    if (ivec_push(v, (int32_t)ni) < 0 || push_items(v, L->items.list, ni) < 0 ||
        ivec_push(v, (int32_t)L->waits.list.n) < 0 ||
        ivec_reserve(v, L->waits.list.n) < 0)
        return -1;
    memcpy(v->d + v->n, L->waits.list.d, (size_t)L->waits.list.n * 4);
    v->n += L->waits.list.n;
    if (ivec_push(v, (int32_t)L->live.n) < 0 || push_items(v, L->live.list, L->live.n) < 0 ||
        ivec_push(v, contains_final(L->items.list, ni)) < 0)
        return -1;
    if (map3_put(&c->completed, lhs, origin, 0, off) < 0)
        return -1;
    *out = off;
    return 0;
}

/* earley.py's _self_closure of start into s (emptied here) */
static int self_closure(Charts *c, ISet *s, const Item *start, Py_ssize_t n) {
    iset_clear(s);
    for (Py_ssize_t i = 0; i < n; i++)
        if (iset_add(s, start[i]) < 0)
            return -1;
    for (size_t k = 0; k < s->n; k++) { /* the list is the agenda: a set's closure */
        Item x = s->list[k];
        if (x.d >= c->body_len[x.p])
            continue;
        int32_t sym = c->bodies[c->body_off[x.p] + x.d];
        if (sym >= 0)
            for (int32_t j = 0; j < c->by_len[sym]; j++)
                if (iset_add(s, (Item){c->by[c->by_off[sym] + j], 0, SELF}) < 0)
                    return -1;
        if (nullable(c, sym) && iset_add(s, (Item){x.p, x.d + 1, SELF}) < 0)
            return -1;
    }
    return 0;
}

/* earley.py's _predicted: offset in pred_pool of [len, incomplete SELF items...] */
static int32_t predicted(Charts *c, int32_t sym) {
    if (c->pred_off[sym] >= 0)
        return c->pred_off[sym];
    Item *start = malloc(((size_t)c->by_len[sym] + 1) * sizeof(Item));
    if (start == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int32_t j = 0; j < c->by_len[sym]; j++)
        start[j] = (Item){c->by[c->by_off[sym] + j], 0, SELF};
    int bad = self_closure(c, &c->sc2, start, c->by_len[sym]) < 0;
    free(start);
    if (bad)
        return -1;
    IVec *v = &c->pred_pool;
    int32_t off = (int32_t)v->n;
    if (ivec_push(v, 0) < 0)
        return -1;
    int32_t m = 0;
    for (size_t k = 0; k < c->sc2.n; k++) {
        Item x = c->sc2.list[k];
        if (x.d < c->body_len[x.p]) {
            if (push_items(v, &x, 1) < 0)
                return -1;
            m++;
        }
    }
    v->d[off] = m;
    c->pred_off[sym] = off;
    return off;
}

static int cmp_sym_item(const void *a, const void *b) { /* (symbol, index) pairs */
    const int32_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : (x[1] > y[1]);
}

/* earley.py's _new_node: live sorted, n items */
static int32_t new_node(Charts *c, const Item *live, Py_ssize_t n, int final) {
    c->num_items += n;
    if (c->num_items > c->max_items) {
        PyErr_Format(c->too_complex,
                     "the grammar's parser exceeds %zd Earley items; simplify the grammar or "
                     "shorten the output",
                     c->max_items);
        return -1;
    }
    int32_t nid = (int32_t)c->node_off.n;
    int32_t *pairs = malloc(((size_t)n + 1) * 2 * sizeof(int32_t));
    if (pairs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        pairs[2 * i] = c->bodies[c->body_off[live[i].p] + live[i].d];
        pairs[2 * i + 1] = (int32_t)i;
    }
    qsort(pairs, (size_t)n, 2 * sizeof(int32_t), cmp_sym_item);
    PyObject *expected = PyList_New(0);
    if (expected == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n;) {
        int32_t sym = pairs[2 * i];
        Py_ssize_t j = i;
        while (j < n && pairs[2 * j] == sym)
            j++;
        int32_t off = (int32_t)c->wait_pool.n;
        if (ivec_push(&c->wait_pool, (int32_t)(j - i)) < 0)
            goto fail;
        for (Py_ssize_t k = i; k < j; k++)
            if (push_items(&c->wait_pool, &live[pairs[2 * k + 1]], 1) < 0)
                goto fail;
        if (map3_put(&c->waiting, nid, sym, 0, off) < 0)
            goto fail;
        if (sym < 0) {
            PyObject *t = PyLong_FromLong(-1 - sym);
            if (t == NULL || PyList_Append(expected, t) < 0) {
                Py_XDECREF(t);
                goto fail;
            }
            Py_DECREF(t);
        }
        i = j;
    }
    if (PyList_Sort(expected) < 0 || PyList_Append(c->expected, expected) < 0 ||
        PyList_Append(c->final, final ? Py_True : Py_False) < 0)
        goto fail;
    Py_DECREF(expected);
    free(pairs);
    if (ivec_push(&c->node_off, (int32_t)c->node_items.n) < 0 ||
        ivec_push(&c->node_len, (int32_t)n) < 0 || push_items(&c->node_items, live, n) < 0)
        return -1;
    return nid;
fail:
    Py_XDECREF(expected);
    free(pairs);
    return -1;
}

/* earley.py's _intern_node; roots: the root's own SELF items (NULL otherwise) */
static int32_t intern_node(Charts *c, const Item *own, Py_ssize_t nown, const int32_t *waits,
                           Py_ssize_t nw, int final, const Item *roots, Py_ssize_t nr) {
    ISet *s = &c->scratch;
    iset_clear(s);
    for (Py_ssize_t i = 0; i < nown; i++)
        if (iset_add(s, own[i]) < 0)
            return -1;
    for (Py_ssize_t k = 0; k < nw; k++) {
        int32_t off = predicted(c, waits[k]);
        if (off < 0)
            return -1;
        int32_t m = c->pred_pool.d[off];
        for (int32_t i = 0; i < m; i++)
            if (iset_add(s, items_at(&c->pred_pool, off + 1 + 3 * i)[0]) < 0)
                return -1;
    }
    for (Py_ssize_t i = 0; i < nr; i++)
        if (iset_add(s, roots[i]) < 0)
            return -1;
    qsort(s->list, s->n, sizeof(Item), item_cmp);
    uint64_t h;
    if (make_key(c, final, s->list, (Py_ssize_t)s->n, &h) < 0)
        return -1;
    int32_t nid = mapv_get(&c->ids, c->key.d, c->key.n, h);
    if (nid == INT32_MIN) {
        nid = new_node(c, s->list, (Py_ssize_t)s->n, final);
        if (nid < 0)
            return -1;
        if (make_key(c, final, s->list, (Py_ssize_t)s->n, &h) < 0 ||
            mapv_put(&c->ids, c->key.d, c->key.n, h, nid) < 0)
            return -1;
    }
    if (roots == NULL) {
        if (make_key(c, final, own, nown, &h) < 0 ||
            mapv_put(&c->by_own, c->key.d, c->key.n, h, nid) < 0)
            return -1;
    }
    return nid;
}

/* earley.py's _node */
static int32_t node_of(Charts *c, const Item *kernel, Py_ssize_t nk) {
    if (nk == 1 && kernel[0].o != SELF && kernel[0].d == c->body_len[kernel[0].p]) {
        int32_t lhs = c->lhs_of[kernel[0].p], off = map3_get(&c->completed, lhs, kernel[0].o, 0);
        if (off < 0 && completion(c, lhs, kernel[0].o, &off) < 0)
            return -1;
        const int32_t *d = c->comp_pool.d + off;
        int32_t n = d[0], nw = d[1 + 3 * n], nl = d[2 + 3 * n + nw];
        const Item *live = items_at(&c->comp_pool, off + 3 + 3 * n + nw);
        int final = (kernel[0].p == 0 && kernel[0].d == 1 && kernel[0].o == 0) ||
                    d[3 + 3 * n + nw + 3 * nl];
        uint64_t h;
        if (make_key(c, final, live, nl, &h) < 0)
            return -1;
        int32_t nid = mapv_get(&c->by_own, c->key.d, c->key.n, h);
        if (nid != INT32_MIN)
            return nid;
        /* copies: intern_node grows no pool these point into but comp_pool stays put */
        return intern_node(c, live, nl, d + 2 + 3 * n, nw, final, NULL, 0);
    }
    Level *L = &c->l0;
    iset_clear(&L->items);
    iset_clear(&L->live);
    wset_clear(&L->waits, c->num_nt);
    Py_ssize_t nown = 0, nroot = 0;
    Item *own = malloc(((size_t)nk + 1) * 2 * sizeof(Item));
    if (own == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Item *roots = own + nk + 1;
    for (Py_ssize_t i = 0; i < nk; i++) {
        if (kernel[i].o == SELF)
            roots[nroot++] = kernel[i];
        else
            own[nown++] = kernel[i];
    }
    int32_t nid = -1;
    if (close_own(c, L, own, nown, 1) < 0)
        goto done;
    qsort(L->live.list, L->live.n, sizeof(Item), item_cmp);
    int final = iset_has(&L->items, (Item){0, 1, 0});
    if (nroot == 0) {
        uint64_t h;
        if (make_key(c, final, L->live.list, (Py_ssize_t)L->live.n, &h) < 0)
            goto done;
        nid = mapv_get(&c->by_own, c->key.d, c->key.n, h);
        if (nid == INT32_MIN)
            nid = intern_node(c, L->live.list, (Py_ssize_t)L->live.n, L->waits.list.d,
                              L->waits.list.n, final, NULL, 0);
        goto done;
    }
    /* the root: its SELF kernel closed; the parse may end where it starts */
    if (self_closure(c, &c->sc2, roots, nroot) < 0)
        goto done;
    if (!final && c->node_off.n == 0 && iset_has(&c->sc2, (Item){0, 1, SELF}))
        final = 1;
    Py_ssize_t m = 0;
    Item *inc = malloc((c->sc2.n + 1) * sizeof(Item));
    if (inc == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k < c->sc2.n; k++)
        if (c->sc2.list[k].d < c->body_len[c->sc2.list[k].p])
            inc[m++] = c->sc2.list[k];
    nid = intern_node(c, L->live.list, (Py_ssize_t)L->live.n, L->waits.list.d, L->waits.list.n,
                      final, inc, m);
    free(inc);
done:
    free(own);
    return nid;
}

/* charts.scan(node, t) as a C call: the node, or -1 with an exception set (the capsule's
 * scan, sg_earley_api.h) */
static int32_t scan_node(PyObject *self, int32_t node, int32_t t) {
    Charts *c = (Charts *)self;
    if (node < 0 || node >= c->node_off.n || t < 0 || t >= c->num_t) {
        PyErr_Format(PyExc_IndexError, "scan(%d, %d): no such node or terminal", (int)node,
                     (int)t);
        return -1;
    }
    int32_t nid = map3_get(&c->scans, node, t, 0);
    if (nid >= 0)
        return nid;
    int32_t n;
    const Item *w = waiting_of(c, node, -1 - t, &n);
    /* make_item reads waiting lists and grows no pool they live in: w stays valid */
    Item *kernel = malloc(((size_t)n + 1) * sizeof(Item));
    if (kernel == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int err = 0;
    for (int32_t i = 0; i < n && !err; i++)
        kernel[i] = make_item(c, w[i].p, w[i].d + 1, w[i].o == SELF ? node : w[i].o, &err);
    nid = err ? -1 : node_of(c, kernel, n);
    free(kernel);
    if (nid < 0)
        return -1;
    if (map3_put(&c->scans, node, t, 0, nid) < 0)
        return -1;
    return nid;
}

static PyObject *charts_scan(Charts *c, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "scan(node, terminal)");
        return NULL;
    }
    long node = PyLong_AsLong(args[0]), t = PyLong_AsLong(args[1]);
    if ((node == -1 || t == -1) && PyErr_Occurred())
        return NULL;
    if (node < 0 || node > INT32_MAX || t < 0 || t > INT32_MAX) {
        PyErr_Format(PyExc_IndexError, "scan(%ld, %ld): no such node or terminal", node, t);
        return NULL;
    }
    int32_t nid = scan_node((PyObject *)c, (int32_t)node, (int32_t)t);
    return nid < 0 ? NULL : PyLong_FromLong(nid);
}

static PyObject *item_tuple(Item x) { return Py_BuildValue("(iii)", x.p, x.d, x.o); }

static int node_arg(Charts *c, PyObject *arg, int32_t *node) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (n < 0 || n >= c->node_off.n) {
        PyErr_Format(PyExc_IndexError, "no chart node %ld", n);
        return -1;
    }
    *node = (int32_t)n;
    return 0;
}

static PyObject *charts_items(Charts *c, PyObject *arg) {
    int32_t node;
    if (node_arg(c, arg, &node) < 0)
        return NULL;
    PyObject *out = PyFrozenSet_New(NULL);
    if (out == NULL)
        return NULL;
    const Item *it = items_at(&c->node_items, c->node_off.d[node]);
    for (int32_t i = 0; i < c->node_len.d[node]; i++) {
        PyObject *t = item_tuple(it[i]);
        if (t == NULL || PySet_Add(out, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(t);
    }
    return out;
}

static PyObject *charts_waiting(Charts *c, PyObject *arg) {
    int32_t node;
    if (node_arg(c, arg, &node) < 0)
        return NULL;
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    const Item *it = items_at(&c->node_items, c->node_off.d[node]);
    for (int32_t i = 0; i < c->node_len.d[node]; i++) { /* keys in first-appearance order */
        int32_t sym = c->bodies[c->body_off[it[i].p] + it[i].d];
        PyObject *key = PyLong_FromLong(sym);
        if (key == NULL)
            goto fail;
        int has = PyDict_Contains(out, key);
        if (has == 0) {
            int32_t n;
            const Item *w = waiting_of(c, node, sym, &n);
            PyObject *lst = PyList_New(n);
            if (lst == NULL) {
                Py_DECREF(key);
                goto fail;
            }
            for (int32_t j = 0; j < n; j++) {
                PyObject *t = item_tuple(w[j]);
                if (t == NULL) {
                    Py_DECREF(lst);
                    Py_DECREF(key);
                    goto fail;
                }
                PyList_SET_ITEM(lst, j, t);
            }
            has = PyDict_SetItem(out, key, lst);
            Py_DECREF(lst);
        }
        Py_DECREF(key);
        if (has < 0)
            goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* a list of ints (or a tuple) into a new int32 array */
static int32_t *int_array(PyObject *seq, Py_ssize_t *n) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (fast == NULL)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(fast);
    int32_t *a = malloc(((size_t)*n + 1) * sizeof(int32_t));
    if (a == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            free(a);
            Py_DECREF(fast);
            return NULL;
        }
        a[i] = (int32_t)v;
    }
    Py_DECREF(fast);
    return a;
}

/* a list of sequences of ints into offsets, lengths and one flat array */
static int flatten(PyObject *seqs, Py_ssize_t *n, int32_t **off, int32_t **len, int32_t **flat) {
    PyObject *fast = PySequence_Fast(seqs, "expected a list of sequences of ints");
    if (fast == NULL)
        return -1;
    *n = PySequence_Fast_GET_SIZE(fast);
    *off = malloc(((size_t)*n + 1) * sizeof(int32_t));
    *len = malloc(((size_t)*n + 1) * sizeof(int32_t));
    IVec all = {0};
    if (*off == NULL || *len == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        Py_ssize_t m;
        int32_t *a = int_array(PySequence_Fast_GET_ITEM(fast, i), &m);
        if (a == NULL)
            goto fail;
        (*off)[i] = (int32_t)all.n;
        (*len)[i] = (int32_t)m;
        int bad = ivec_reserve(&all, m + 1) < 0;
        if (!bad) {
            memcpy(all.d + all.n, a, (size_t)m * 4);
            all.n += m;
        }
        free(a);
        if (bad)
            goto fail;
    }
    if (ivec_reserve(&all, 1) < 0)
        goto fail;
    *flat = all.d;
    Py_DECREF(fast);
    return 0;
fail:
    free(all.d);
    Py_DECREF(fast);
    return -1;
}

static void charts_free_tables(Charts *c) {
    free(c->body_off), free(c->body_len), free(c->bodies), free(c->lhs_of);
    free(c->by_off), free(c->by_len), free(c->by), free(c->null_nt), free(c->null_t);
    free(c->node_off.d), free(c->node_len.d), free(c->node_items.d);
    free(c->waiting.e), free(c->wait_pool.d), free(c->ids.e), free(c->ids.pool.d);
    free(c->by_own.e), free(c->by_own.pool.d), free(c->scans.e), free(c->completed.e);
    free(c->comp_pool.d), free(c->canon.e), free(c->canon_of.e), free(c->canon_of.pool.d);
    free(c->pred_off), free(c->pred_pool.d), free(c->key.d);
    Level *ls[2] = {&c->l0, &c->l1};
    for (int i = 0; i < 2; i++) {
        iset_free(&ls[i]->items), iset_free(&ls[i]->live);
        free(ls[i]->waits.stamp), free(ls[i]->waits.list.d), free(ls[i]->agenda);
    }
    iset_free(&c->scratch), iset_free(&c->sc2);
}

static void charts_dealloc(Charts *c) {
    charts_free_tables(c);
    Py_XDECREF(c->too_complex);
    Py_XDECREF(c->expected);
    Py_XDECREF(c->final);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static uint8_t *flags_of(PyObject *b, Py_ssize_t *n) {
    char *s;
    if (PyBytes_AsStringAndSize(b, &s, n) < 0)
        return NULL;
    uint8_t *a = malloc((size_t)*n + 1);
    if (a == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(a, s, (size_t)*n);
    return a;
}

static int charts_init(Charts *c, PyObject *args, PyObject *kw) {
    PyObject *rhs, *lhs, *by_lhs, *nnt, *nt, *too_complex;
    int start;
    Py_ssize_t max_items;
    static char *names[] = {"rhs",   "lhs",       "by_lhs",      "nullable_nt", "nullable_t",
                            "start", "max_items", "too_complex", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOSSinO", names, &rhs, &lhs, &by_lhs, &nnt, &nt,
                                     &start, &max_items, &too_complex))
        return -1;
    if (c->bodies != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Charts is initialised once");
        return -1;
    }
    Py_ssize_t nl, nb;
    if (flatten(rhs, &c->num_prods, &c->body_off, &c->body_len, &c->bodies) < 0)
        return -1;
    if ((c->lhs_of = int_array(lhs, &nl)) == NULL)
        return -1;
    if (flatten(by_lhs, &c->num_nt, &c->by_off, &c->by_len, &c->by) < 0)
        return -1;
    if ((c->null_nt = flags_of(nnt, &nb)) == NULL || (c->null_t = flags_of(nt, &c->num_t)) == NULL)
        return -1;
    if (nl != c->num_prods || nb != c->num_nt || c->num_prods == 0 || start < 0 ||
        start >= c->num_nt) {
        PyErr_SetString(PyExc_ValueError, "Charts: rhs, lhs, by_lhs, nullable_nt disagree");
        return -1;
    }
    for (Py_ssize_t p = 0; p < c->num_prods; p++) { /* every symbol within the tables */
        if (c->lhs_of[p] < 0 || c->lhs_of[p] >= c->num_nt)
            goto bad_symbol;
        for (int32_t i = 0; i < c->body_len[p]; i++) {
            int32_t s = c->bodies[c->body_off[p] + i];
            if (s >= c->num_nt || (s < 0 && -1 - s >= c->num_t))
                goto bad_symbol;
        }
    }
    for (Py_ssize_t i = 0; i < c->by_off[c->num_nt - 1] + c->by_len[c->num_nt - 1]; i++)
        if (c->by[i] < 0 || c->by[i] >= c->num_prods)
            goto bad_symbol;
    c->start = start;
    c->max_items = c->max_completed = max_items;
    Py_INCREF(too_complex);
    c->too_complex = too_complex;
    c->expected = PyList_New(0);
    c->final = PyList_New(0);
    c->pred_off = malloc((size_t)c->num_nt * sizeof(int32_t));
    c->l0.waits.stamp = calloc((size_t)c->num_nt, sizeof(uint32_t));
    c->l1.waits.stamp = calloc((size_t)c->num_nt, sizeof(uint32_t));
    if (c->expected == NULL || c->final == NULL || c->pred_off == NULL ||
        c->l0.waits.stamp == NULL || c->l1.waits.stamp == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < c->num_nt; i++)
        c->pred_off[i] = -1;
    Item root = {0, 0, SELF};
    return node_of(c, &root, 1) < 0 ? -1 : 0;
bad_symbol:
    PyErr_SetString(PyExc_ValueError, "Charts: a symbol or production id out of range");
    return -1;
}

static PyObject *get_num_nodes(Charts *c, void *x) {
    (void)x;
    return PyLong_FromSsize_t(c->node_off.n);
}
static PyObject *get_num_items(Charts *c, void *x) {
    (void)x;
    return PyLong_FromSsize_t(c->num_items);
}
static PyObject *get_max_items(Charts *c, void *x) {
    (void)x;
    return PyLong_FromSsize_t(c->max_items);
}
/* a settable count: an int >= 0 */
static int set_count(Py_ssize_t *dst, PyObject *v, const char *name) {
    Py_ssize_t n = v ? PyLong_AsSsize_t(v) : -1;
    if (n < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s must be an int >= 0", name);
        return -1;
    }
    *dst = n;
    return 0;
}
static int set_max_items(Charts *c, PyObject *v, void *x) {
    (void)x;
    return set_count(&c->max_items, v, "max_items");
}
static PyObject *get_max_completed(Charts *c, void *x) {
    (void)x;
    return PyLong_FromSsize_t(c->max_completed);
}
static int set_max_completed(Charts *c, PyObject *v, void *x) {
    (void)x;
    return set_count(&c->max_completed, v, "max_completed_items");
}
static PyObject *get_completed_items(Charts *c, void *x) {
    (void)x;
    return PyLong_FromSsize_t(c->completed.n ? c->completed_items : 0);
}
static PyObject *get_expected(Charts *c, void *x) {
    (void)x;
    Py_INCREF(c->expected);
    return c->expected;
}
static PyObject *get_final(Charts *c, void *x) {
    (void)x;
    Py_INCREF(c->final);
    return c->final;
}

static PyGetSetDef charts_getset[] = {
    {"num_nodes", (getter)get_num_nodes, NULL, "nodes built", NULL},
    {"num_items", (getter)get_num_items, NULL, "items over all nodes built", NULL},
    {"max_items", (getter)get_max_items, (setter)set_max_items, "the item budget", NULL},
    {"max_completed_items", (getter)get_max_completed, (setter)set_max_completed,
     "bound on the items the completion memo holds", NULL},
    {"completed_items", (getter)get_completed_items, NULL, "items the completion memo holds",
     NULL},
    {"expected", (getter)get_expected, NULL, "per node: sorted terminal ids it can scan", NULL},
    {"final", (getter)get_final, NULL, "per node: whether the parse may end there", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef charts_methods[] = {
    {"scan", (PyCFunction)(void (*)(void))charts_scan, METH_FASTCALL,
     "scan(node, terminal) -> the node after one lexeme of terminal"},
    {"items", (PyCFunction)charts_items, METH_O, "items(node) -> frozenset of (p, dot, origin)"},
    {"waiting", (PyCFunction)charts_waiting, METH_O,
     "waiting(node) -> {symbol: [items waiting on it]}"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ChartsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "structgen.fsm.grammar._earley.Charts",
    .tp_basicsize = sizeof(Charts),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The Earley charts of one grammar (csrc/earley.c)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)charts_init,
    .tp_dealloc = (destructor)charts_dealloc,
    .tp_methods = charts_methods,
    .tp_getset = charts_getset,
};

/* derivers(rhs, lhs, num_nt, dead, only) -> list of bool (structgen/fsm/grammar/earley.py
 * _derivers, its Python loop the reference): per nonterminal, whether it derives a string of
 * usable terminal symbols (s < 0 usable when not in dead and, only not None, in only). rhs: a
 * sequence of int sequences (production bodies), lhs: ints, num_nt: nonterminals; a symbol
 * outside [-inf, num_nt) or a lhs outside [0, num_nt) raises ValueError. The least fixpoint of
 * the same worklist (the agenda's order changes nothing in it). */
static PyObject *py_derivers(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "derivers(rhs, lhs, num_nt, dead, only)");
        return NULL;
    }
    Py_ssize_t num_nt = PyLong_AsSsize_t(args[2]);
    if (num_nt < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "derivers: num_nt < 0");
        return NULL;
    }
    PyObject *dead = args[3], *only = args[4];
    int any_dead = PyObject_IsTrue(dead);
    int has_only = only != Py_None, empty_only = 0;
    if (any_dead < 0)
        return NULL;
    if (has_only && (empty_only = !PyObject_IsTrue(only)) && PyErr_Occurred())
        return NULL;
    PyObject *bodies = PySequence_Fast(args[0], "derivers: rhs must be a sequence");
    PyObject *heads = bodies ? PySequence_Fast(args[1], "derivers: lhs must be a sequence") : NULL;
    PyObject *out = NULL;
    Py_ssize_t n = bodies ? PySequence_Fast_GET_SIZE(bodies) : 0;
    int32_t *lhs_of = NULL, *pending = NULL, *count = NULL, *off = NULL, *users = NULL,
            *agenda = NULL;
    uint8_t *derives = NULL;
    PyObject **fast = NULL;
    if (heads == NULL)
        goto done;
    if (PySequence_Fast_GET_SIZE(heads) != n) {
        PyErr_SetString(PyExc_ValueError, "derivers: rhs and lhs differ in length");
        goto done;
    }
    lhs_of = PyMem_Malloc(sizeof(int32_t) * (n + 1));
    pending = PyMem_Malloc(sizeof(int32_t) * (n + 1));
    count = PyMem_Calloc(num_nt + 1, sizeof(int32_t));
    off = PyMem_Calloc(num_nt + 2, sizeof(int32_t));
    agenda = PyMem_Malloc(sizeof(int32_t) * (num_nt + 1));
    derives = PyMem_Calloc(num_nt + 1, 1);
    fast = PyMem_Calloc(n + 1, sizeof(PyObject *));
    if (!lhs_of || !pending || !count || !off || !agenda || !derives || !fast) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t total = 0, top = 0;
    for (Py_ssize_t p = 0; p < n; p++) {  /* which productions count, their nonterminals */
        long h = PyLong_AsLong(PySequence_Fast_GET_ITEM(heads, p));
        if (h < 0 || h >= num_nt) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "derivers: production %zd's lhs %ld", p, h);
            goto done;
        }
        lhs_of[p] = (int32_t)h;
        pending[p] = -1;
        fast[p] = PySequence_Fast(PySequence_Fast_GET_ITEM(bodies, p),
                                  "derivers: a body must be a sequence");
        if (fast[p] == NULL)
            goto done;
        Py_ssize_t k = PySequence_Fast_GET_SIZE(fast[p]), nts = 0;
        int terminal = 0, usable = 1;
        for (Py_ssize_t i = 0; i < k; i++) {
            PyObject *sym = PySequence_Fast_GET_ITEM(fast[p], i);
            long s = PyLong_AsLong(sym);
            if ((s == -1 && PyErr_Occurred()) || s >= num_nt) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_ValueError, "derivers: symbol %ld past the nonterminals", s);
                goto done;
            }
            if (s >= 0) {
                nts++;
                continue;
            }
            terminal = 1;
            if (usable && any_dead) {
                int in = PySet_Contains(dead, sym);
                if (in < 0)
                    goto done;
                usable = !in;
            }
            if (usable && has_only && !empty_only) {
                int in = PySet_Contains(only, sym);
                if (in < 0)
                    goto done;
                usable = in;
            }
        }
        if (terminal && (empty_only || !usable))
            continue;  /* never finishes */
        pending[p] = (int32_t)nts;
        total += nts;
        for (Py_ssize_t i = 0; i < k; i++) {
            long s = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast[p], i));
            if (s >= 0)
                count[s]++;
        }
        if (nts == 0 && !derives[h]) {
            derives[h] = 1;
            agenda[top++] = (int32_t)h;
        }
    }
    users = PyMem_Malloc(sizeof(int32_t) * (total + 1));
    if (users == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t s = 0; s < num_nt; s++)  /* users of each nonterminal, per occurrence */
        off[s + 1] = off[s] + count[s];
    memset(count, 0, sizeof(int32_t) * (num_nt + 1));
    for (Py_ssize_t p = 0; p < n; p++) {
        if (pending[p] < 0)
            continue;
        Py_ssize_t k = PySequence_Fast_GET_SIZE(fast[p]);
        for (Py_ssize_t i = 0; i < k; i++) {
            long s = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast[p], i));
            if (s >= 0)
                users[off[s] + count[s]++] = (int32_t)p;
        }
    }
    while (top > 0) {
        int32_t s = agenda[--top];
        for (int32_t j = off[s]; j < off[s + 1]; j++) {
            int32_t p = users[j];
            if (pending[p] > 0 && --pending[p] == 0 && !derives[lhs_of[p]]) {
                derives[lhs_of[p]] = 1;
                agenda[top++] = lhs_of[p];
            }
        }
    }
    out = PyList_New(num_nt);
    for (Py_ssize_t s = 0; out != NULL && s < num_nt; s++)
        PyList_SET_ITEM(out, s, Py_NewRef(derives[s] ? Py_True : Py_False));
done:
    if (fast != NULL)
        for (Py_ssize_t p = 0; p < n; p++)
            Py_XDECREF(fast[p]);
    PyMem_Free(fast);
    PyMem_Free(lhs_of);
    PyMem_Free(pending);
    PyMem_Free(count);
    PyMem_Free(off);
    PyMem_Free(users);
    PyMem_Free(agenda);
    PyMem_Free(derives);
    Py_XDECREF(bodies);
    Py_XDECREF(heads);
    return out;
}

static PyMethodDef module_methods[] = {
    {"derivers", (PyCFunction)(void (*)(void))py_derivers, METH_FASTCALL,
     "derivers(rhs, lhs, num_nt, dead, only) -> list of bool (earley.py _derivers)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_earley", "Earley charts' scan step in C (csrc/earley.c)", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__earley(void) {
    if (PyType_Ready(&ChartsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ChartsType);
    if (PyModule_AddObject(m, "Charts", (PyObject *)&ChartsType) < 0) {
        Py_DECREF(&ChartsType);
        Py_DECREF(m);
        return NULL;
    }
    static SgEarleyApi api;
    api.charts_type = &ChartsType;
    api.scan = scan_node;
    PyObject *capsule = PyCapsule_New(&api, SG_EARLEY_API_NAME, NULL);
    if (capsule == NULL || PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
