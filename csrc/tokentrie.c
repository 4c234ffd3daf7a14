/* structgen's token-trie walk: the next DFA state of every token of a vocabulary from one
 * state, in one depth-first pass over the token trie (structgen/fsm/index/trie.py).
 *
 * Why: the first mask of a DFA state steps every distinct token prefix the state can follow
 * through the DFA. In numpy that is one vectorised step per trie level (a few microseconds of
 * overhead per level, and a byte-level BPE can have tokens of tens of kilobytes); here it is
 * one table lookup per live prefix. A dead transition skips the node's whole subtree.
 *
 *   walk(byte, depth, skip, token, stack, out, mask, state, row_tables[, below[, firsts]])
 *     byte   uint8 [N]   the trie nodes in preorder, children by ascending byte
 *     depth  int32 [N]   1 for a token's first byte
 *     skip   int32 [N]   first node after the node's subtree
 *     token  int32 [N]   token id ending at the node, -1 if none
 *     stack  int32 [>= max depth + 1], scratch (state at each depth of the current path; the
 *            walk caches each depth's row pointer beside it)
 *     out    int32 [V]   written: out[token] = state after the token, for live tokens only;
 *            or None: only the mask is written (V = 32 x mask words)
 *     mask   int32 [>= ceil(V / 32)], zeroed by the caller: bit token % 32 of word token / 32
 *            set for every live token (the packed bitmask, least-significant bit first)
 *     state  the start state
 *     row_tables(s) -> (rows int32 [slots, 256], slot int64 [capacity]): the DFA's tables,
 *            after building the row of state s when s >= 0 (ByteDFA.row_tables); called
 *            once at the start (s = -1) and whenever a state without a built row is met.
 *            A row entry PENDING (-2) is a byte class not derived yet: row_tables(s, b) is
 *            called to derive the class of byte b in the row of s.
 *     below  None, or a tuple (bytes, ranks, ids): bytes uint64 [N][4] the bytes of each
 *            node's descendants (descendant_bytes), ranks int32 [N + 1] the number of nodes
 *            holding a token before each node, ids int32 the token of each such node in
 *            preorder; given, a live node whose state loops on all the bytes below it
 *            (row[b] == state) has its descendants' tokens written from ids (all live, all
 *            in that state), not stepped
 *     firsts None, or int32 [256]: the first-level node of each byte (-1: none; node i of
 *            depth 1 with byte[i] == b); given, the first level is read from it in byte
 *            order (the preorder of the first-level nodes), a node whose byte is dead in the
 *            start state's built row skipped without reading the trie's arrays (a state with
 *            a few first bytes reads a few of its ~256 first-level nodes, each otherwise a
 *            cache line in each of four arrays); the same out, mask, rows and count
 *   returns the number of live nodes visited.
 *
 *   walk_fused(same arguments) -> the same, with a missing row built by row_tables(s, b), b the
 *   byte read from s: one call builds the row (its classes PENDING) and derives b's class
 *   (ByteDFA.row_tables takes both), where walk makes two (row_tables(s), then (s, b)).
 *
 *   walk_direct(same arguments, dfa) -> the same as walk_fused for a ByteDFA dfa, whose missing
 *   rows and pending classes are built here in C over its own tables (csrc/dfa_rows.h: the
 *   same rows, state ids and order as row_tables(s, b)); row_tables is called only where that
 *   builder declines (an arena with AND / NOT terms, the row budget reached).
 *   walk_direct_whole(same arguments as walk_direct) -> walk_direct's result, the row of state
 *   built whole first when it is not (build_row_direct's work, on the same opened tables: one
 *   call for TokenIndex's whole walk); None, nothing walked, when that build declines (the
 *   caller calls dfa.row(state), then walk_direct).
 *
 *   descendant_bytes(byte, depth, out) -> None: out uint64 [N][4] = the bytes below each
 *   node (bit b % 64 of word b / 64), walk's below.
 *
 *   walk_bytes(data, state, row_tables) -> state after the bytes, -1 if dead (one token's
 *   step when its mask is known: the rows on its path were built by the mask's walk).
 *   walk_bytes_direct(data, state, row_tables, dfa) -> the same, a ByteDFA's tables read and
 *   its rows built as walk_direct's.
 *   build_row_direct(dfa, state) -> True when ByteDFA.row(state)'s work (the whole row) was
 *   done in C as walk_direct's builds, False when declined (the caller calls dfa.row(state)).
 *
 *   fill_row(dst, tensor, row, words) -> bool: the per-token write of a packed mask into
 *   one row of a CPU int32 bitmask tensor (Matcher.fill_bitmask, structgen/fsm/index/masks.py).
 *     dst    tuple (tensor, version, base, rows, stride, cols), the tensor's layout as read
 *            by masks.describe: base the address of element [0, 0] (data_ptr), rows x
 *            cols its shape, stride the words between rows (a row's words are contiguous)
 *     tensor the tensor to write; returns False without writing unless it is dst's tensor
 *            with the same tensor._version (bumped by every in-place op, metadata ones too;
 *            not compared when dst's version is None: an inference tensor, whose layout the
 *            caller has just read) and tensor.data_ptr() (a swapped or reallocated storage):
 *            the caller then reads the layout again
 *     row    the row to write; negative counts from the end (as numpy); IndexError outside
 *     words  the mask, in one of the forms of masks.row_form: None (all zero);
 *            a tuple (array, address, n) of n int32 words at address (kept alive by the
 *            array); bytes of (word index, word) int32 pairs, every other word zero (a
 *            sparse mask: only the pairs are read); or any contiguous buffer of n int32.
 *            Dense forms: min(n, cols) words copied, the words past them zeroed.
 *   row_form(mask) -> the form of masks.row_form for a C-contiguous int32 mask, in one
 *   pass (None for another array: the caller's numpy path).
 *
 *   fill_row(dst, tensor, row, forms, state) -> bool or None: the same with the mask
 *   taken from the dict forms (TokenIndex.fill_forms: state -> [form, used], used set to
 *   True here); None without writing when dst is current but state has no entry.
 *   fill_row(dst, tensor, row, forms, state, plan) -> the same; where state has no entry and
 *   plan is TokenIndex.cold_plan's tuple (a regex ByteDFA), the state's first mask is made
 *   here (cold_mask: TokenIndex.fill_form's work for a state whose mask is the whole trie
 *   walk, walk_direct_whole's, or, for a concatenation with a wide head, the head split's
 *   (TokenIndex._walk_split, called back: its lexical cache reads and stores as there), the
 *   EOS bits of an accepting state, the mask stored read-only in the index's mask cache and
 *   its form in forms) and written: True; None where that work takes another way (a count
 *   view, a head split that answers None, a byte-class table; settings without
 *   walk_direct), nothing else changed (a split that answers None answers None again, from
 *   its memo and kept tables, with nothing more counted).
 *   cold_mask(plan, forms, state) -> the mask or None: that cold mask made and stored
 *   without a write (a destination fill_row does not take: an ndarray bitmask).
 *   cold_step(plan, state, token) -> int or None: TokenIndex.token_step's work (the step
 *   memo missed) in one call: -1 for an id out of range or never allowed (not memoised), the
 *   cached row's entry, -1 where the cached mask refuses the token, else walk_bytes_direct
 *   (a grammar plan: its automaton's walk, GrammarAutomaton's Core.walk, where the plan holds
 *   one and it has room, else walk_bytes); memoised as there. None, nothing done, for a state
 *   with neither a row nor a mask cached.
 *
 *   count_reach(kind, args, nullable, depth, t, budget, limits) -> bool: whether a regex
 *   state's term meets a bounded repetition CountView.canonical would share (csrc/count_reach.h).
 *
 *   holding_trie(order, offsets, positions, totals, byte_mask, flat, starts, lengths, max_bytes,
 *   packed) -> None or (byte, depth, skip, token, dups) as bytes: the trie of the tokens of order
 *   holding a byte of byte_mask (TokenTrie.holding, structgen/fsm/index/trie.py), the same
 *   arrays as TokenTrie.build of them (preorder, children by ascending byte; a token with the
 *   bytes of the previous one is a dup of the node's first id), in one pass with a path stack.
 *     order     int32 [K] the token ids of a trie in its byte order (ties by id)
 *     offsets, positions: int64 [257], int32 [P]: the positions in order of the tokens
 *            holding byte b are positions[offsets[b]:offsets[b + 1]] (TokenTrie.byte_postings)
 *     totals    int64 [256]: the bytes of the tokens holding byte b, in all (None returned at
 *            once when one of the set's is past max_bytes)
 *     byte_mask bytes [32]: bit b % 8 of byte b / 8 set for each byte of the set
 *     flat, starts, lengths: uint8, int64 [V], int64 [V]: token i's bytes are
 *            flat[starts[i]:starts[i] + lengths[i]]
 *     max_bytes the most bytes the kept tokens may hold in all: None returned past it
 *     packed int32 [>= ceil(V / 32)], zeroed by the caller: the kept tokens' bits set (some
 *            of them, or none, when None is returned)
 *   byte uint8 [N], depth int32 [N], skip int32 [N], token int32 [N] and dups int64 [k][2]
 *   (id, the id holding its node) as bytes objects. Cost: O(the set's postings + K / 64 +
 *   the kept tokens' bytes).
 *
 *   byte_postings(order, flat, starts, lengths) -> (offsets int64 [257], positions int32 [P],
 *   totals int64 [256]) as bytes: holding_trie's tables for the token ids order (int32 [K]):
 *   the positions i of the tokens order[i] holding byte b are positions[offsets[b]:offsets[b +
 *   1]], ascending, and totals[b] their bytes in all (TokenTrie.byte_postings).
 *
 *   sorted_trie(ids, flat, starts, lengths) -> (byte, depth, skip, token, dups, max depth): the
 *   trie of the tokens ids (int32, in byte order, ties by id: TokenTrie.subset), as
 *   holding_trie's. ValueError for an id out of range or empty, or ids not in byte order.
 *
 *   bind_tensor_type(torch.Tensor) -> bool: fill_row reads _version and data_ptr() of a
 *   tensor of exactly that type through the type's own descriptors (see bound_type).
 *
 * Errors: ValueError on inconsistent arrays, IndexError for a row outside (fill_row);
 * exceptions of row_tables propagate (GrammarTooComplexError from a DFA budget). walk
 * releases the GIL while it steps through built rows (threads filling masks of different
 * grammars run it in parallel: structgen/fsm/grammar_pool.py) and holds it to call
 * row_tables; walk_bytes and fill_row hold it throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* walk_direct's row builder, with csrc/regex_derive.h's derivatives (that header's module
 * functions and the lowering's helpers are unused here) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "dfa_rows.h"
#pragma GCC diagnostic pop
#include "count_reach.h"

typedef struct {
    Py_buffer rows, slot;
    int held;
} Tables;

static void tables_release(Tables *t) {
    if (t->held) {
        PyBuffer_Release(&t->rows);
        PyBuffer_Release(&t->slot);
        t->held = 0;
    }
}

/* Call row_tables(s), or row_tables(s, b) when b >= 0 (derive the pending class of byte b in
 * the row of s), and hold the two buffers it returns. 0 on success, -1 with an error set. */
static int tables_fetch_byte(Tables *t, PyObject *fn, long s, long b) {
    PyObject *res;
    if (b < 0) {
        PyObject *arg = PyLong_FromLong(s);
        if (!arg) return -1;
        res = PyObject_CallOneArg(fn, arg);
        Py_DECREF(arg);
    } else {
        res = PyObject_CallFunction(fn, "ll", s, b);
    }
    if (!res) return -1;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
        tables_release(t);
        Py_DECREF(res);
        PyErr_SetString(PyExc_ValueError, "row_tables must return (rows, slot)");
        return -1;
    }
    if (t->held && t->rows.obj == PyTuple_GET_ITEM(res, 0)
        && t->slot.obj == PyTuple_GET_ITEM(res, 1)) {
        /* the same two arrays as held (row_tables answers its cached views until a table is
         * replaced; an ndarray's memory never moves while a buffer of it is held): kept */
        Py_DECREF(res);
        return 0;
    }
    tables_release(t);
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(res, 0), &t->rows, PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(res);
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(res, 1), &t->slot, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&t->rows);
        Py_DECREF(res);
        return -1;
    }
    t->held = 1;
    Py_DECREF(res); /* the buffers keep the arrays alive */
    return 0;
}

static int tables_fetch(Tables *t, PyObject *fn, long s) { return tables_fetch_byte(t, fn, s, -1); }

/* Hold the ByteDFA's own _rows and _slot as they are now (after dfa_build), read-only. */
static int tables_direct(Tables *t, DfaView *v) {
    tables_release(t);
    if (PyObject_GetBuffer(v->arr[DV_ROWS], &t->rows, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (PyObject_GetBuffer(v->arr[DV_SLOT], &t->slot, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&t->rows);
        return -1;
    }
    t->held = 1;
    return 0;
}

/* The work of row_tables(s, b) (b >= 0) or row_tables(s) (b < 0): in C when view is given and
 * dfa_build takes it (a direct build implies the fused call), else through fn. */
static int tables_build(Tables *t, PyObject *fn, DfaView *v, long s, long b) {
    if (v && b >= 0) {
        int done = dfa_build(v, s, (int)b);
        if (done < 0) return -1;
        if (done) return tables_direct(t, v);
    }
    return tables_fetch_byte(t, fn, s, b);
}

#define PENDING (-2) /* a row entry whose byte class is not derived yet (ByteDFA.PENDING) */

static int get(PyObject *obj, Py_buffer *b, int writable, Py_ssize_t itemsize, const char *name) {
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (b->len % itemsize) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_ValueError, "%s: size is not a multiple of %zd bytes", name, itemsize);
        return -1;
    }
    return 0;
}

/* The row of state s in the held tables, or NULL when it is not built. */
static inline const int32_t *row_of(const Tables *t, long s) {
    Py_ssize_t n_rows = t->rows.len / (256 * 4), n_slot = t->slot.len / 8;
    int64_t r = (s >= 0 && s < n_slot) ? ((const int64_t *)t->slot.buf)[s] : -1;
    return (r < 0 || r >= n_rows) ? NULL : (const int32_t *)t->rows.buf + r * 256;
}

/* Self-loop byte sets of states met by one walk: loops[s & (LOOP_SLOTS - 1)] holds the bytes b
 * with row[b] == s in s's row when last read (a derived entry never changes, so a set read
 * earlier is a subset of the true one: what the shortcut below needs; a state's set is read
 * again after a build in its row, which may derive more of its classes; a build elsewhere
 * leaves its row as it was). */
#define LOOP_SLOTS 64
typedef struct {
    int32_t state; /* -1: empty */
    uint64_t bits[4];
} LoopSet;

static inline const uint64_t *loop_bits(LoopSet *loops, const int32_t *row, int32_t s) {
    LoopSet *e = &loops[s & (LOOP_SLOTS - 1)];
    if (e->state != s) {
        e->state = s;
        for (int w = 0; w < 4; w++) {
            uint64_t bits = 0;
            for (int b = 0; b < 64; b++) bits |= (uint64_t)(row[w * 64 + b] == s) << b;
            e->bits[w] = bits;
        }
    }
    return e->bits;
}

/* The depth-first loop. stack[d] is the state after the first d bytes of the current path;
 * rowp[d] caches its row (NULL: not looked up yet), so siblings, and a child entered by a
 * self-loop (the inside of a string), read their parent's row without a slot lookup. After
 * row_tables is called again every cached row is dropped (a growth replaces the tables).
 * below (uint64 [N][4] or NULL): the bytes of each node's descendants (descendant_bytes); a
 * node whose state loops on every one of them has every descendant live in that same state,
 * so their tokens (ids[ranks[i + 1]:ranks[skip[i]]]) are written without a DFA step or a
 * branch per node (the same out, mask and count as stepping them: the inside of a string, an
 * e-mail's local part, a host name label).
 * The loop reads only the held buffers: the GIL is released for it and taken back to build a
 * missing row (row_tables runs Python) and to set an error. Another thread may grow the DFA
 * meanwhile: a growth replaces its tables (the held buffers keep the old ones alive, their
 * built rows unchanged), so a stale table shows a row as missing at worst, and the fetch
 * reads the live one. */
static long run(const uint8_t *byte, const int32_t *depth, const int32_t *skip,
                const int32_t *token, Py_ssize_t n, int32_t *stack, const int32_t **rowp,
                Py_ssize_t stack_n, int32_t *out, uint32_t *mask, Py_ssize_t vocab, long state,
                Tables *t, PyObject *fn, int fused, DfaView *view, const uint64_t *below,
                const int32_t *ranks, const int32_t *ids, Py_ssize_t n_ids,
                const int32_t *firsts) {
    long visited = 0;
    LoopSet loops[LOOP_SLOTS];
    for (int k = 0; k < LOOP_SLOTS; k++) loops[k].state = -1;
    for (Py_ssize_t k = 0; k < stack_n; k++) rowp[k] = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    stack[0] = (int32_t)state;
    Py_ssize_t i = 0, end = n;
    int next_byte = 0; /* firsts: the next first byte to try */
    for (;;) {
    if (firsts) { /* the next first-level node whose byte is not dead in the start row */
        const int32_t *start = row_of(t, state); /* read again: a build may refetch t */
        int b = next_byte;
        while (b < 256 && (firsts[b] < 0 || (start && start[b] == -1))) b++;
        if (b >= 256) break;
        next_byte = b + 1;
        i = firsts[b];
        end = i < n ? skip[i] : i;
        if (end <= i || end > n || depth[i] != 1) {
            PyEval_RestoreThread(ts);
            PyErr_SetString(PyExc_ValueError, "firsts: a node out of range or skip backwards");
            return -1;
        }
    }
    while (i < end) {
        int32_t d = depth[i];
        if (d < 1 || d >= stack_n) {
            PyEval_RestoreThread(ts);
            PyErr_SetString(PyExc_ValueError, "trie depth out of range of the stack");
            return -1;
        }
        const int32_t *row = rowp[d - 1];
        if (!row) {
            int32_t s = stack[d - 1];
            row = row_of(t, s);
            if (!row) { /* not built yet: build it, refetch the tables, drop cached rows */
                PyEval_RestoreThread(ts);
                /* fused: one call builds the row and derives the class of the byte read */
                if (tables_build(t, fn, view, s, fused ? byte[i] : -1) < 0) return -1;
                for (Py_ssize_t k = 0; k < stack_n; k++) rowp[k] = NULL;
                if (loops[s & (LOOP_SLOTS - 1)].state == s) loops[s & (LOOP_SLOTS - 1)].state = -1;
                row = row_of(t, s);
                if (!row) {
                    PyErr_Format(PyExc_ValueError, "row_tables(%d) did not build the row", (int)s);
                    return -1;
                }
                ts = PyEval_SaveThread();
            }
            rowp[d - 1] = row;
        }
        int32_t nxt = row[byte[i]];
        if (nxt == PENDING) { /* derive the byte's class, refetch the tables, drop cached rows */
            int32_t s = stack[d - 1];
            PyEval_RestoreThread(ts);
            if (tables_build(t, fn, view, s, byte[i]) < 0) return -1;
            for (Py_ssize_t k = 0; k < stack_n; k++) rowp[k] = NULL;
            if (loops[s & (LOOP_SLOTS - 1)].state == s) loops[s & (LOOP_SLOTS - 1)].state = -1;
            row = row_of(t, s);
            if (!row || row[byte[i]] == PENDING) {
                PyErr_Format(PyExc_ValueError, "row_tables(%d, %d) did not derive the class",
                             (int)s, (int)byte[i]);
                return -1;
            }
            rowp[d - 1] = row;
            nxt = row[byte[i]];
            ts = PyEval_SaveThread();
        }
        if (nxt < 0) {
            Py_ssize_t j = skip[i];
            if (j <= i) {
                PyEval_RestoreThread(ts);
                PyErr_SetString(PyExc_ValueError, "trie skip does not move forward");
                return -1;
            }
            i = j;
            continue;
        }
        rowp[d] = nxt == stack[d - 1] ? row : NULL;
        stack[d] = nxt;
        int32_t tok = token[i];
        if (tok >= 0) {
            if (tok >= vocab) {
                PyEval_RestoreThread(ts);
                PyErr_SetString(PyExc_ValueError, "trie token id outside out");
                return -1;
            }
            if (out) out[tok] = nxt;
            mask[tok >> 5] |= (uint32_t)1 << (tok & 31);
        }
        visited++;
        Py_ssize_t end = skip[i];
        if (below && end > i + 1) { /* descendants: do they all stay in nxt? */
            const int32_t *nrow = rowp[d] ? rowp[d] : (rowp[d] = row_of(t, nxt));
            if (nrow) {
                const uint64_t *lp = loop_bits(loops, nrow, nxt), *bl = below + 4 * i;
                if (!((bl[0] & ~lp[0]) | (bl[1] & ~lp[1]) | (bl[2] & ~lp[2]) | (bl[3] & ~lp[3]))) {
                    int32_t a = end > n ? -1 : ranks[i + 1], z = end > n ? -1 : ranks[end];
                    if (a < 0 || z < a || z > n_ids) {
                        PyEval_RestoreThread(ts);
                        PyErr_SetString(PyExc_ValueError, "trie skip or ranks out of range");
                        return -1;
                    }
                    /* the token ids of the subtree, contiguous in ids: no branch per node */
                    for (int32_t k = a; k < z; k++) {
                        uint32_t tj = (uint32_t)ids[k];
                        if (tj >= (uint64_t)vocab) {
                            PyEval_RestoreThread(ts);
                            PyErr_SetString(PyExc_ValueError, "trie token id outside out");
                            return -1;
                        }
                        mask[tj >> 5] |= (uint32_t)1 << (tj & 31);
                    }
                    if (out)
                        for (int32_t k = a; k < z; k++) out[ids[k]] = nxt;
                    visited += (long)(end - i - 1);
                    i = end;
                    continue;
                }
            }
        }
        i++;
    }
    if (!firsts) break;
    }
    PyEval_RestoreThread(ts);
    return visited;
}

/* The row of s whole in the opened view v: 1 when it is (already, or built here as
 * build_row_direct), 0 when dfa_build declines, -1 with an error set. */
static int row_whole(DfaView *v, long s) {
    if (s < v->buf[DV_SLOT].len / 8 && ((const int64_t *)v->buf[DV_SLOT].buf)[s] >= 0) {
        PyObject *key = PyLong_FromLong(s);
        if (key == NULL) return -1;
        int pending = PyDict_Contains(v->pending, key); /* ByteDFA.has_whole_row */
        Py_DECREF(key);
        if (pending <= 0) return pending < 0 ? -1 : 1;
    }
    return dfa_build(v, s, -1);
}

/* walk_impl with the mask's words given (cold_mask: a new bytes object's, zeroed): args[6]
 * is not read when mask_given is not NULL. */
static PyObject *walk_into(PyObject *const *args, Py_ssize_t nargs, int fused, int direct,
                           int whole, const Py_buffer *mask_given) {
    if (nargs < 9 + direct || nargs > 11 + direct) {
        PyErr_Format(PyExc_TypeError,
                     "%s(byte, depth, skip, token, stack, out, mask, state, row_tables%s[, below"
                     "[, firsts]])",
                     direct ? (whole ? "walk_direct_whole" : "walk_direct") : fused ? "walk_fused" : "walk",
                     direct ? ", dfa" : "");
        return NULL;
    }
    PyObject *below_obj = nargs >= 10 + direct ? args[9 + direct] : Py_None;
    PyObject *firsts_obj = nargs == 11 + direct ? args[10 + direct] : Py_None;
    long state = PyLong_AsLong(args[7]);
    if (state == -1 && PyErr_Occurred()) return NULL;
    if (state < 0) {
        PyErr_SetString(PyExc_ValueError, "state must be >= 0");
        return NULL;
    }
    Py_buffer b[7];
    static const Py_ssize_t size[7] = {1, 4, 4, 4, 4, 4, 4};
    static const char *names[7] = {"byte", "depth", "skip", "token", "stack", "out", "mask"};
    int got = 0;
    int has_out = args[5] != Py_None;
    for (; got < 7; got++) {
        if (got == 5 && !has_out) { /* no out: an empty buffer stands in for it */
            memset(&b[got], 0, sizeof(Py_buffer));
            continue;
        }
        if (got == 6 && mask_given) { /* (no object: releasing it is a no-op) */
            b[got] = *mask_given;
            continue;
        }
        if (get(args[got], &b[got], got >= 4, size[got], names[got]) < 0) break;
    }
    long visited = -1;
    Tables t = {.held = 0};
    DfaView view, *vp = NULL;
    int ready = got == 7;
    if (ready && direct) { /* the ByteDFA's tables, closed below whether or not it opened */
        vp = &view;
        ready = dfa_open(vp, args[9]) == 0;
    }
    int declined = 0;
    if (ready && whole) { /* the start row whole first (walk_direct_whole) */
        int built = row_whole(vp, state);
        declined = built == 0;
        ready = built > 0;
    }
    Py_buffer bb, rb, ib;
    int has_below = 0;
    if (ready && below_obj != Py_None) {
        if (!PyTuple_Check(below_obj) || PyTuple_GET_SIZE(below_obj) != 3) {
            PyErr_SetString(PyExc_TypeError, "below: a tuple (bytes below, ranks, ids)");
            ready = 0;
        } else if (get(PyTuple_GET_ITEM(below_obj, 0), &bb, 0, 8, "below") < 0) {
            ready = 0;
        } else if (get(PyTuple_GET_ITEM(below_obj, 1), &rb, 0, 4, "ranks") < 0) {
            PyBuffer_Release(&bb);
            ready = 0;
        } else if (get(PyTuple_GET_ITEM(below_obj, 2), &ib, 0, 4, "ids") < 0) {
            PyBuffer_Release(&bb);
            PyBuffer_Release(&rb);
            ready = 0;
        } else {
            has_below = 1;
        }
    }
    Py_buffer fb;
    int has_firsts = 0;
    if (ready && firsts_obj != Py_None) {
        if (get(firsts_obj, &fb, 0, 4, "firsts") < 0) {
            ready = 0;
        } else if (fb.len != 256 * 4) {
            PyBuffer_Release(&fb);
            PyErr_SetString(PyExc_ValueError, "firsts: 256 int32 node indices");
            ready = 0;
        } else {
            has_firsts = 1;
        }
    }
    if (ready) {
        Py_ssize_t n = b[0].len, vocab = has_out ? b[5].len / 4 : b[6].len / 4 * 32;
        if (b[1].len != 4 * n || b[2].len != 4 * n || b[3].len != 4 * n || b[4].len < 4) {
            PyErr_SetString(PyExc_ValueError, "byte, depth, skip, token: one entry per node");
        } else if (has_below && (bb.len != 32 * n || rb.len != 4 * (n + 1))) {
            PyErr_SetString(PyExc_ValueError, "below: four words per node; ranks: N + 1");
        } else if (b[6].len / 4 < (vocab + 31) / 32) {
            PyErr_SetString(PyExc_ValueError, "mask: fewer than ceil(len(out) / 32) words");
        } else if ((vp ? tables_direct(&t, vp) : tables_fetch(&t, args[8], -1)) == 0) {
            Py_ssize_t stack_n = b[4].len / 4;
            const int32_t **rowp = PyMem_Malloc((size_t)stack_n * sizeof(*rowp));
            if (!rowp) {
                PyErr_NoMemory();
            } else {
                visited = run(b[0].buf, b[1].buf, b[2].buf, b[3].buf, n, b[4].buf, rowp,
                              stack_n, has_out ? b[5].buf : NULL, b[6].buf, vocab, state, &t,
                              args[8], fused, vp, has_below ? bb.buf : NULL,
                              has_below ? rb.buf : NULL, has_below ? ib.buf : NULL,
                              has_below ? ib.len / 4 : 0, has_firsts ? fb.buf : NULL);
                PyMem_Free(rowp);
            }
        }
    }
    tables_release(&t);
    if (has_firsts) PyBuffer_Release(&fb);
    if (has_below) {
        PyBuffer_Release(&bb);
        PyBuffer_Release(&rb);
        PyBuffer_Release(&ib);
    }
    if (vp) dfa_close(vp);
    for (int k = 0; k < got; k++)
        if (k != 5 || has_out) PyBuffer_Release(&b[k]);
    if (declined) Py_RETURN_NONE;
    if (visited < 0) return NULL;
    return PyLong_FromLong(visited);
}

static PyObject *walk_impl(PyObject *const *args, Py_ssize_t nargs, int fused, int direct,
                           int whole) {
    return walk_into(args, nargs, fused, direct, whole, NULL);
}

static PyObject *walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    return walk_impl(args, nargs, 0, 0, 0);
}

/* walk_fused: walk with a missing row built by row_tables(s, b) (b the byte read from s),
 * one call that builds the row lazily and derives b's class (ByteDFA.row_tables), where walk
 * calls row_tables(s) and then row_tables(s, b) for the PENDING entry it finds. */
static PyObject *walk_fused(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    return walk_impl(args, nargs, 1, 0, 0);
}

/* walk_direct: walk_fused whose missing rows and pending classes of a ByteDFA `dfa` (args[9])
 * are built in C over its own tables (csrc/dfa_rows.h), row_tables called only where
 * dfa_build does not take the build (an arena with AND / NOT, the row budget reached). */
static PyObject *walk_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    return walk_impl(args, nargs, 1, 1, 0);
}

/* walk_direct_whole: walk_direct with the start state's row built whole first on the same
 * opened tables (build_row_direct + walk_direct in one call); None when the build declines. */
static PyObject *walk_direct_whole(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    return walk_impl(args, nargs, 1, 1, 1);
}

/* Hold a ByteDFA's own _rows and _slot (walk_bytes_direct's first look, no callback). */
static int tables_of_dfa(Tables *t, PyObject *dfa) {
    PyObject *rows = PyObject_GetAttrString(dfa, "_rows");
    PyObject *slot = rows ? PyObject_GetAttrString(dfa, "_slot") : NULL;
    int rc = -1;
    if (slot) {
        tables_release(t);
        if (PyObject_GetBuffer(rows, &t->rows, PyBUF_C_CONTIGUOUS) == 0) {
            if (PyObject_GetBuffer(slot, &t->slot, PyBUF_C_CONTIGUOUS) == 0) {
                t->held = 1;
                rc = 0;
            } else {
                PyBuffer_Release(&t->rows);
            }
        }
    }
    Py_XDECREF(rows);
    Py_XDECREF(slot);
    return rc;
}

/* The entry of byte b in the held row of state s: the entry, PENDING, or -3 when the row is
 * not built. */
static inline int32_t entry_of(const Tables *t, long s, int b) {
    const int32_t *row = row_of(t, s);
    return row ? row[b] : -3;
}

/* walk_bytes(data, state, row_tables) -> the state after reading data from state, -1 if it
 * dies (ByteDFA.walk over built rows; rows missing on the way are built via row_tables).
 * walk_bytes_direct(data, state, row_tables, dfa): the same with a ByteDFA's tables read
 * directly and its missing rows and pending classes built in C (csrc/dfa_rows.h, opened on
 * the first build), row_tables called only where dfa_build does not take the build. */
static PyObject *walk_bytes_impl(PyObject *const *args, Py_ssize_t nargs, int direct) {
    if (nargs != 3 + direct) {
        PyErr_SetString(PyExc_TypeError, direct ? "walk_bytes_direct(data, state, row_tables, dfa)"
                                                : "walk_bytes(data, state, row_tables)");
        return NULL;
    }
    long s = PyLong_AsLong(args[1]);
    if (s == -1 && PyErr_Occurred()) return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0) return NULL;
    Tables t = {.held = 0};
    DfaView view, *vp = NULL;
    int failed = (direct ? tables_of_dfa(&t, args[3]) : tables_fetch(&t, args[2], -1)) < 0;
    const uint8_t *p = data.buf;
    for (Py_ssize_t i = 0; !failed && s >= 0 && i < data.len; i++) {
        int32_t nxt = entry_of(&t, s, p[i]);
        if (nxt == -3 && !direct) { /* not built: row_tables(s), then its byte if pending */
            if (tables_fetch(&t, args[2], s) < 0) {
                failed = 1;
                break;
            }
            nxt = entry_of(&t, s, p[i]);
            if (nxt == -3) {
                PyErr_Format(PyExc_ValueError, "row_tables(%ld) did not build the row", s);
                failed = 1;
                break;
            }
        }
        if (nxt == -3 || nxt == PENDING) { /* build the row / derive the byte's class */
            if (direct && !vp) {
                vp = &view;
                failed = dfa_open(vp, args[3]) < 0;
            }
            if (failed || tables_build(&t, args[2], vp, s, p[i]) < 0) {
                failed = 1;
                break;
            }
            nxt = entry_of(&t, s, p[i]);
            if (nxt == -3 || nxt == PENDING) {
                PyErr_Format(PyExc_ValueError, "row_tables(%ld, %d) did not derive the class", s,
                             (int)p[i]);
                failed = 1;
                break;
            }
        }
        s = nxt;
    }
    tables_release(&t);
    if (vp) dfa_close(vp);
    PyBuffer_Release(&data);
    if (failed) return NULL;
    return PyLong_FromLong(s < 0 ? -1 : s);
}

static PyObject *walk_bytes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    return walk_bytes_impl(args, nargs, 0);
}

static PyObject *walk_bytes_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    return walk_bytes_impl(args, nargs, 1);
}

/* build_row_direct(dfa, state) -> bool: ByteDFA.row(state)'s work (the row whole, no
 * PENDING entry) done in C over dfa's tables (csrc/dfa_rows.h); False when that builder
 * declines (an arena with AND / NOT terms, the row budget reached): call dfa.row(state). */
static PyObject *build_row_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "build_row_direct(dfa, state)");
        return NULL;
    }
    long s = PyLong_AsLong(args[1]);
    if (s == -1 && PyErr_Occurred()) return NULL;
    DfaView view;
    int done = dfa_open(&view, args[0]) < 0 ? -1 : dfa_build(&view, s, -1);
    dfa_close(&view);
    if (done < 0) return NULL;
    return PyBool_FromLong(done);
}

static PyObject *str_version, *str_data_ptr; /* interned at module init */

/* The tensor type bound by bind_tensor_type (torch.Tensor) and the descriptors its _version
 * and data_ptr resolve to, valid while the type's version tag is `bound_tag` (CPython gives
 * a type a new tag whenever it or a base is modified: a patched attribute is seen). For a
 * tensor of exactly that type the checks call the descriptors directly, skipping the
 * attribute lookup and the bound-method call (~50 ns of ~290 ns; benchmarks/RESULTS.md);
 * the descriptors' C getters are what the lookup would call, so the values are the same.
 * Any other tensor (a subclass, Parameter), or a type modified since: the generic lookup. */
static PyTypeObject *bound_type;
static PyObject *bound_version, *bound_data_ptr;
static unsigned int bound_tag;

/* Resolve the descriptors on bound_type again; 1 when both are the C kinds expected (a
 * getset_descriptor, a method_descriptor) and the tag is known, else 0 (generic path). */
static int bind_descriptors(void) {
    Py_CLEAR(bound_version);
    Py_CLEAR(bound_data_ptr);
    bound_tag = 0;
    if (!bound_type) return 0;
    PyObject *v = PyObject_GetAttr((PyObject *)bound_type, str_version);
    PyObject *d = v ? PyObject_GetAttr((PyObject *)bound_type, str_data_ptr) : NULL;
    if (!v || !d || !Py_IS_TYPE(v, &PyGetSetDescr_Type) || !Py_IS_TYPE(d, &PyMethodDescr_Type)) {
        PyErr_Clear();
        Py_XDECREF(v);
        Py_XDECREF(d);
        return 0;
    }
    bound_version = v;
    bound_data_ptr = d;
    bound_tag = bound_type->tp_version_tag; /* assigned by the lookups; 0: none, generic */
    return bound_tag != 0;
}

/* bind_tensor_type(type) -> bool: see bound_type; True when the direct path is armed. */
static PyObject *bind_tensor_type(PyObject *self, PyObject *type) {
    (void)self;
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "bind_tensor_type: expected a type");
        return NULL;
    }
    Py_INCREF(type);
    Py_XSETREF(bound_type, (PyTypeObject *)type);
    return PyBool_FromLong(bind_descriptors());
}

/* 1 when attribute or method result `value` of the tensor equals `expected`, 0 when not, -1
 * with an error set. method: call it (data_ptr()), else read the attribute (_version). */
static int same_as(PyObject *tensor, PyObject *name, int method, PyObject *expected) {
    PyObject *value;
    if (Py_TYPE(tensor) == bound_type && bound_tag
        && (bound_type->tp_version_tag == bound_tag || bind_descriptors())) {
        value = method ? PyObject_Vectorcall(bound_data_ptr, &tensor, 1, NULL)
                       : Py_TYPE(bound_version)->tp_descr_get(bound_version, tensor,
                                                              (PyObject *)bound_type);
    } else {
        value = method ? PyObject_CallMethodNoArgs(tensor, name) : PyObject_GetAttr(tensor, name);
    }
    if (!value) return -1;
    int eq = PyObject_RichCompareBool(value, expected, Py_EQ);
    Py_DECREF(value);
    return eq;
}

/* Write one mask (a form of masks.row_form, see the header) into out[0 .. cols).
 * 0, or -1 with an error set. */
static int write_words(int32_t *out, Py_ssize_t cols, PyObject *words) {
    Py_ssize_t n = 0;
    if (PyBytes_CheckExact(words)) { /* sparse: (index, word) pairs over a zero row */
        const char *p = PyBytes_AS_STRING(words);
        Py_ssize_t pairs = PyBytes_GET_SIZE(words) / 8;
        memset(out, 0, (size_t)cols * 4);
        for (Py_ssize_t k = 0; k < pairs; k++) {
            int32_t pair[2];
            memcpy(pair, p + 8 * k, 8);
            if (pair[0] >= 0 && pair[0] < cols) out[pair[0]] = pair[1];
        }
        return 0;
    }
    if (PyTuple_CheckExact(words) && PyTuple_GET_SIZE(words) == 3) { /* dense, by address */
        const void *src = PyLong_AsVoidPtr(PyTuple_GET_ITEM(words, 1));
        n = PyLong_AsSsize_t(PyTuple_GET_ITEM(words, 2));
        if ((!src || n < 0) && !PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "fill_row: bad (array, address, n) words");
        if (PyErr_Occurred()) return -1;
        if (n > cols) n = cols;
        memcpy(out, src, (size_t)n * 4);
    } else if (words != Py_None) {
        Py_buffer b;
        if (PyObject_GetBuffer(words, &b, PyBUF_SIMPLE) < 0) return -1;
        n = b.len / 4;
        if (n > cols) n = cols;
        memcpy(out, b.buf, (size_t)n * 4);
        PyBuffer_Release(&b);
    }
    if (cols > n) memset(out + n, 0, (size_t)(cols - n) * 4);
    return 0;
}

/* ---- the regex automaton's cold mask and cold step in one call each --------------------------
 * (TokenIndex.cold_plan, Matcher.fill_bitmask / advance): what TokenIndex.fill_form and
 * token_step do in Python for a ByteDFA state whose mask is the whole trie walk, done here.
 * The plan is a tuple (CP_* below) built once per index; the settings it depends on (trie._c,
 * trie._direct, trie._below, terms._c) are read from their modules at each call, so a switch
 * mid-life is seen. Anything else declines (0 / None): the caller's Python path then does the
 * work, with the same result. */
enum {
    CP_TRIE_MOD, CP_TERMS_MOD, CP_TRIE, CP_BYTE, CP_DEPTH, CP_SKIP, CP_TOKEN, CP_STACK,
    CP_ROW_TABLES, CP_DFA, CP_DUPS, CP_EOS, CP_MASKS, CP_FROMBUFFER, CP_DTYPE, CP_ARENA,
    CP_COUNTS, CP_LEXICAL, CP_CLASSES, CP_LIMITS, CP_NUM_WORDS, CP_NEVER, CP_TOKEN_BYTES,
    CP_ROWS, CP_STEPS, CP_MAX_STEPS, CP_SPLIT, CP_SIZE
};

static PyObject *cp_names[12]; /* interned attribute names, made on first use */
static const char *const CP_NAMES[12] = {"_c", "_direct", "_below", "_terms", "subtree_tables",
                                         "first_nodes", "_accepting", "_data", "_max_bytes",
                                         "_max_entries", "put", "_num_boolean"};
enum { N_C, N_DIRECT, N_BELOW, N_TERMS, N_SUBTREE, N_FIRSTS, N_ACCEPTING, N_DATA, N_MAX_BYTES,
       N_MAX_ENTRIES, N_PUT, N_NUM_BOOLEAN };
static PyObject *cp_count_names[5];
static const char *const CP_COUNT_NAMES[5] = {"_compiled_counts", "max_byte_count", "_lists",
                                              "reach", "_limits"};

static PyObject *cp_attr(PyObject *obj, int k) { return attr_named(obj, &cp_names[k], CP_NAMES[k]); }

/* 1 when obj.<name> is truthy (is_none: is not None), 0 when not, -1 with an error set */
static int cp_flag(PyObject *obj, int k, int is_none) {
    PyObject *v = cp_attr(obj, k);
    if (v == NULL) return -1;
    int r = is_none ? v != Py_None : PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static long cp_long(PyObject *list, Py_ssize_t t) { return PyLong_AsLong(PyList_GET_ITEM(list, t)); }

static int popcount256(const Mask256 *m) {
    return __builtin_popcountll(m->w[0]) + __builtin_popcountll(m->w[1])
           + __builtin_popcountll(m->w[2]) + __builtin_popcountll(m->w[3]);
}

/* 1 when lexical_masks.split_key could give term t a key (a CONCAT whose head, as split_key
 * finds it, MIN_HEAD_BYTES or more bytes can start), 0 when it gives None for certain, -1 on
 * error (the arena holds no AND / NOT: checked by the caller) */
static int cp_head_wide(PyObject *kind, PyObject *args, PyObject *first, Py_ssize_t n, Py_ssize_t t,
                        long min_head) {
    if (t < 0 || t >= n) return 1; /* (not complete: the caller's Python path answers) */
    if (cp_long(kind, t) != K_CONCAT) return 0;
    PyObject *a = PyList_GET_ITEM(args, t);
    if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != 2) return 1;
    Py_ssize_t head = PyLong_AsSsize_t(PyTuple_GET_ITEM(a, 0));
    Py_ssize_t rest = PyLong_AsSsize_t(PyTuple_GET_ITEM(a, 1));
    if (PyErr_Occurred()) return -1;
    if (rest < 0 || rest >= n || head < 0 || head >= n) return 1;
    if (cp_long(kind, rest) == K_CONCAT) { /* x x{lo,hi} r: the head is x{lo,hi} */
        PyObject *ra = PyList_GET_ITEM(args, rest);
        if (!PyTuple_Check(ra) || PyTuple_GET_SIZE(ra) != 2) return 1;
        Py_ssize_t star = PyLong_AsSsize_t(PyTuple_GET_ITEM(ra, 0));
        if (star < 0 || star >= n) return PyErr_Occurred() ? -1 : 1;
        if (cp_long(kind, star) == K_REPEAT) {
            PyObject *sa = PyList_GET_ITEM(args, star);
            if (!PyTuple_Check(sa) || PyTuple_GET_SIZE(sa) < 1) return 1;
            Py_ssize_t x = PyLong_AsSsize_t(PyTuple_GET_ITEM(sa, 0));
            if (PyErr_Occurred()) return -1;
            if (x == head) head = star;
        }
    }
    for (int guard = 0; cp_long(kind, head) == K_CONCAT; guard++) { /* a spine: its first */
        PyObject *ha = PyList_GET_ITEM(args, head);
        if (guard > 1 << 20 || !PyTuple_Check(ha) || PyTuple_GET_SIZE(ha) != 2) return 1;
        head = PyLong_AsSsize_t(PyTuple_GET_ITEM(ha, 0));
        if (head < 0 || head >= n) return PyErr_Occurred() ? -1 : 1;
    }
    if (PyErr_Occurred()) return -1;
    Mask256 m;
    if (mask_of(PyList_GET_ITEM(first, head), &m) < 0) return -1;
    return popcount256(&m) >= min_head;
}

/* CountView.may_share(t) through the view's own attributes: 1 / 0, -1 with an error set */
static int cp_may_share(PyObject *counts, PyObject *arena, Py_ssize_t t, long min_shared) {
    PyObject *v[5];
    for (int k = 0; k < 5; k++) {
        v[k] = attr_named(k == 1 ? arena : counts, &cp_count_names[k], CP_COUNT_NAMES[k]);
        if (v[k] == NULL) {
            while (k--) Py_DECREF(v[k]);
            return -1;
        }
    }
    int r = PyObject_IsTrue(v[0]);
    long mbc = PyLong_AsLong(v[1]);
    if (r == 0 && mbc < min_shared && !PyErr_Occurred()) {
        r = 0;
    } else if (r >= 0 && !PyErr_Occurred()) {
        if (!PyTuple_Check(v[2]) || PyTuple_GET_SIZE(v[2]) != 4) {
            PyErr_SetString(PyExc_TypeError, "cold plan: CountView._lists is not 4 lists");
            r = -1;
        } else {
            PyObject *argv[7], *tv = PyLong_FromSsize_t(t);
            for (int k = 0; k < 4; k++) argv[k] = PyTuple_GET_ITEM(v[2], k);
            argv[4] = tv;
            argv[5] = v[3];
            argv[6] = v[4];
            PyObject *res = tv ? count_reach(NULL, argv, 7) : NULL;
            Py_XDECREF(tv);
            r = res == NULL ? -1 : res == Py_True;
            Py_XDECREF(res);
        }
    } else {
        r = -1;
    }
    for (int k = 0; k < 5; k++) Py_DECREF(v[k]);
    return r;
}

/* 1 when TokenIndex._walk gives regex term t its mask by the whole trie walk for certain (no
 * count view to share, no head split, no alternation of splits, no byte-class table), 2 when
 * its first way is a head split (a concatenation with a wide head, no count view to share:
 * the plan's CP_SPLIT, TokenIndex._walk_split, gives its mask or None), 0 when it may take
 * another way, -1 with an error set */
static int cp_whole(PyObject *plan, Py_ssize_t t) {
    PyObject *arena = PyTuple_GET_ITEM(plan, CP_ARENA), *limits = PyTuple_GET_ITEM(plan, CP_LIMITS);
    long lim[3];
    for (int k = 0; k < 3; k++) {
        lim[k] = PyLong_AsLong(PyTuple_GET_ITEM(limits, k)); /* head, class, shared */
        if (lim[k] == -1 && PyErr_Occurred()) return -1;
    }
    PyObject *nb = cp_attr(arena, N_NUM_BOOLEAN);
    if (nb == NULL) return -1;
    int boolean = PyObject_IsTrue(nb);
    Py_DECREF(nb);
    if (boolean) return boolean < 0 ? -1 : 0; /* (split_key's has_boolean: Python decides) */
    PyObject *counts = PyTuple_GET_ITEM(plan, CP_COUNTS);
    int share = cp_may_share(counts, arena, t, lim[2]);
    if (share) return share < 0 ? -1 : 0;
    PyObject *kind = PyObject_GetAttrString(arena, "kind");
    PyObject *args = kind ? PyObject_GetAttrString(arena, "args") : NULL;
    PyObject *first = args ? PyObject_GetAttrString(arena, "first") : NULL;
    int r = -1;
    if (first && (!PyList_CheckExact(kind) || !PyList_CheckExact(args) || !PyList_CheckExact(first)))
        PyErr_SetString(PyExc_TypeError, "cold plan: the arena's kind, args, first are not lists");
    else if (first) {
        Py_ssize_t n = PyList_GET_SIZE(kind);
        if (PyList_GET_SIZE(args) < n) n = PyList_GET_SIZE(args);
        if (PyList_GET_SIZE(first) < n) n = PyList_GET_SIZE(first);
        r = t >= 0 && t < n ? 1 : 0;
        if (r == 1 && PyTuple_GET_ITEM(plan, CP_LEXICAL) == Py_True) {
            long k = cp_long(kind, t);
            if (k == K_CONCAT) { /* 2: the head split answers first (CP_SPLIT) */
                int wide = cp_head_wide(kind, args, first, n, t, lim[0]);
                r = wide < 0 ? -1 : !wide ? 1 : PyTuple_GET_ITEM(plan, CP_SPLIT) != Py_None ? 2 : 0;
            } else if (k == K_ALT) {
                PyObject *members = PyList_GET_ITEM(args, t);
                if (!PyTuple_Check(members)) r = 0;
                for (Py_ssize_t j = 0; r == 1 && j < PyTuple_GET_SIZE(members); j++) {
                    Py_ssize_t u = PyLong_AsSsize_t(PyTuple_GET_ITEM(members, j));
                    int wide = u == -1 && PyErr_Occurred()
                                   ? -1 : cp_head_wide(kind, args, first, n, u, lim[0]);
                    r = wide < 0 ? -1 : !wide;
                }
            }
        }
        if (r == 1) { /* _walk_by_class: a table class it may start with lim[1] bytes of */
            Mask256 m;
            PyObject *classes = PyTuple_GET_ITEM(plan, CP_CLASSES);
            if (mask_of(PyList_GET_ITEM(first, t), &m) < 0) {
                r = -1;
            } else if (!PyBytes_Check(classes) || PyBytes_GET_SIZE(classes) % 32) {
                PyErr_SetString(PyExc_TypeError, "cold plan: classes are not 256-bit masks");
                r = -1;
            } else {
                const unsigned char *c = (const unsigned char *)PyBytes_AS_STRING(classes);
                for (Py_ssize_t j = 0; r == 1 && j < PyBytes_GET_SIZE(classes) / 32; j++) {
                    Mask256 both;
                    for (int w = 0; w < 4; w++) {
                        uint64_t x;
                        memcpy(&x, c + 32 * j + 8 * w, 8); /* little-endian words */
                        both.w[w] = m.w[w] & x;
                    }
                    if (popcount256(&both) >= lim[1]) r = 0;
                }
            }
        }
    }
    Py_XDECREF(kind);
    Py_XDECREF(args);
    Py_XDECREF(first);
    return r;
}

/* 1 when the plan's settings are the ones its C path takes: the C walk in use (trie._c), direct
 * rows (trie._direct) and the C derivatives (terms._c); 0 when not, -1 with an error set */
static int cp_settings(PyObject *plan) {
    PyObject *trie_mod = PyTuple_GET_ITEM(plan, CP_TRIE_MOD);
    int ok = cp_flag(trie_mod, N_C, 1);
    if (ok == 1) ok = cp_flag(trie_mod, N_DIRECT, 0);
    if (ok == 1) ok = cp_flag(PyTuple_GET_ITEM(plan, CP_TERMS_MOD), N_C, 1);
    return ok;
}

static PyObject *row_form(PyObject *self, PyObject *mask);

/* Store mask under state in the LRU cache lru (LRUCache.put's work: a new key appended to its
 * ordered dict where no bound is passed, else put itself); 0, or -1 with an error set */
static int cp_lru_put(PyObject *lru, PyObject *state, PyObject *mask) {
    PyObject *data = cp_attr(lru, N_DATA);
    PyObject *max_bytes = data ? cp_attr(lru, N_MAX_BYTES) : NULL;
    PyObject *max_entries = max_bytes ? cp_attr(lru, N_MAX_ENTRIES) : NULL;
    int rc = -1;
    if (max_entries) {
        int fits = max_bytes == Py_None && PyDict_Check(data);
        if (fits) fits = !PyDict_Contains(data, state);
        if (fits == 1 && max_entries != Py_None) {
            Py_ssize_t bound = PyLong_AsSsize_t(max_entries);
            fits = bound == -1 && PyErr_Occurred() ? -1 : PyDict_GET_SIZE(data) < bound;
        }
        if (fits == 1) { /* an OrderedDict: its own __setitem__ (it appends the new key) */
            rc = PyObject_SetItem(data, state, mask);
        } else if (fits == 0) {
            PyObject *put = cp_attr(lru, N_PUT);
            PyObject *res = put ? PyObject_CallFunctionObjArgs(put, state, mask, NULL) : NULL;
            rc = res ? 0 : -1;
            Py_XDECREF(res);
            Py_XDECREF(put);
        }
    }
    Py_XDECREF(data);
    Py_XDECREF(max_bytes);
    Py_XDECREF(max_entries);
    return rc;
}

/* fill_form's work after a cold mask arr of state was stored in the mask cache lru: its form
 * kept in forms beside the mask while the cache holds it, the form written into out[0 .. cols)
 * (out NULL: not written), *made = a new reference to arr (made not NULL); 1, or -1 with an
 * error set */
static int cp_keep_form(PyObject *lru, PyObject *forms, PyObject *state, PyObject *arr,
                        int32_t *out, Py_ssize_t cols, PyObject **made) {
    PyObject *form = row_form(NULL, arr), *data = form ? cp_attr(lru, N_DATA) : NULL;
    int kept = data ? PyDict_Contains(data, state) : -1;
    if (form == Py_None) {
        PyErr_SetString(PyExc_TypeError, "cold mask: no row form");
        kept = -1;
    }
    if (kept == 1) {
        PyObject *entry = PyList_New(2);
        if (entry) {
            PyList_SET_ITEM(entry, 0, Py_NewRef(form));
            PyList_SET_ITEM(entry, 1, Py_NewRef(Py_True));
        }
        kept = entry == NULL || PyDict_SetItem(forms, state, entry) < 0 ? -1 : 1;
        Py_XDECREF(entry);
    }
    int rc = kept < 0 || (out && write_words(out, cols, form) < 0) ? -1 : 1;
    if (rc == 1 && made) *made = Py_NewRef(arr);
    Py_XDECREF(form);
    Py_XDECREF(data);
    return rc;
}

/* The cold mask of state (a Python int) for forms (TokenIndex.fill_forms, no entry for it): its
 * mask walked whole (walk_direct_whole), its EOS bits set where it accepts, stored in the index's
 * mask cache and its form in forms, and the form written into out[0 .. cols) (out NULL: not
 * written; made not NULL: *made = a new reference to the mask). 1 done, 0 declined (nothing
 * changed: the caller's Python path), -1 with an error set. */
static int cold_mask(PyObject *plan, PyObject *forms, PyObject *state, int32_t *out,
                     Py_ssize_t cols, PyObject **made) {
    if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != CP_SIZE) {
        PyErr_SetString(PyExc_TypeError, "fill_row: the cold plan is not TokenIndex.cold_plan's");
        return -1;
    }
    int ok = cp_settings(plan);
    if (ok <= 0) return ok;
    long s = PyLong_AsLong(state);
    if (s == -1 && PyErr_Occurred()) return -1;
    PyObject *dfa = PyTuple_GET_ITEM(plan, CP_DFA), *lru = PyTuple_GET_ITEM(plan, CP_MASKS);
    { /* a mask cached without its form (next_states): bitmask's way, in Python */
        PyObject *data = cp_attr(lru, N_DATA);
        if (data == NULL) return -1;
        int has = PyDict_Check(data) ? PyDict_Contains(data, state) : 1;
        Py_DECREF(data);
        if (has) return has < 0 ? -1 : 0;
    }
    PyObject *terms = cp_attr(dfa, N_TERMS);
    if (terms == NULL) return -1;
    Py_ssize_t t = -1;
    if (PyList_CheckExact(terms) && s >= 0 && s < PyList_GET_SIZE(terms))
        t = PyLong_AsSsize_t(PyList_GET_ITEM(terms, s));
    Py_DECREF(terms);
    if (t == -1) return PyErr_Occurred() ? -1 : 0;
    ok = cp_whole(plan, t);
    if (ok <= 0) return ok;
    Py_ssize_t words = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, CP_NUM_WORDS));
    if (words < 0) return PyErr_Occurred() ? -1 : 0;
    PyObject *split = NULL;
    if (ok == 2) { /* _walk_split's mask (EOS bits not set), or None: declined */
        split = PyObject_CallOneArg(PyTuple_GET_ITEM(plan, CP_SPLIT), state);
        if (split == NULL) return -1;
        if (split == Py_None) {
            Py_DECREF(split);
            return 0;
        }
    }
    /* the walk's arguments; the trie's shortcut tables as trie.walk passes them */
    PyObject *trie_mod = PyTuple_GET_ITEM(plan, CP_TRIE_MOD), *trie = PyTuple_GET_ITEM(plan, CP_TRIE);
    PyObject *below = NULL, *firsts = NULL;
    int use_below = split ? 0 : cp_flag(trie_mod, N_BELOW, 0);
    if (use_below < 0) return -1;
    if (use_below) {
        below = cp_attr(trie, N_SUBTREE);
        if (below == NULL) return -1;
        if (below != Py_None && (firsts = cp_attr(trie, N_FIRSTS)) == NULL) {
            Py_DECREF(below);
            return -1;
        }
    }
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, 4 * words);
    PyObject *argv[12] = {PyTuple_GET_ITEM(plan, CP_BYTE), PyTuple_GET_ITEM(plan, CP_DEPTH),
                          PyTuple_GET_ITEM(plan, CP_SKIP), PyTuple_GET_ITEM(plan, CP_TOKEN),
                          PyTuple_GET_ITEM(plan, CP_STACK), Py_None, Py_None, state,
                          PyTuple_GET_ITEM(plan, CP_ROW_TABLES), dfa, below, firsts};
    PyObject *res = NULL, *arr = NULL;
    int rc = -1;
    if (bytes) {
        uint32_t *mask = (uint32_t *)PyBytes_AS_STRING(bytes);
        memset(mask, 0, 4 * words);
        Py_buffer mb;
        memset(&mb, 0, sizeof mb);
        mb.buf = mask;
        mb.len = 4 * words;
        mb.itemsize = 4;
        if (split) { /* the split's mask, its duplicate ids included (trie.walk's) */
            Py_buffer sb;
            rc = get(split, &sb, 0, 4, "split mask") < 0 ? -1 : 1; /* (released on failure) */
            if (rc == 1) {
                if (sb.len != 4 * words) {
                    PyErr_SetString(PyExc_ValueError, "cold mask: the split mask is not [words]");
                    rc = -1;
                } else {
                    memcpy(mask, sb.buf, 4 * words);
                }
                PyBuffer_Release(&sb);
            }
            res = Py_NewRef(Py_None);
        } else {
            res = walk_into(argv, firsts ? 12 : 10, 1, 1, 1, &mb);
            rc = res == NULL ? -1 : res == Py_None ? 0 : 1; /* None: the whole row declined */
        }
        PyObject *dups = split ? Py_None : PyTuple_GET_ITEM(plan, CP_DUPS);
        if (rc == 1 && dups != Py_None) { /* trie.walk's: a duplicate id live with its holder */
            Py_buffer db;
            if (get(dups, &db, 0, 16, "dups") < 0) {
                rc = -1;
            } else {
                const int64_t *d = db.buf;
                for (Py_ssize_t k = 0; k < db.len / 16; k++) {
                    int64_t dup = d[2 * k], holder = d[2 * k + 1];
                    if (dup < 0 || holder < 0 || dup >= 32 * words || holder >= 32 * words) {
                        PyErr_SetString(PyExc_ValueError, "dups: an id outside the mask");
                        rc = -1;
                        break;
                    }
                    if ((mask[holder >> 5] >> (holder & 31)) & 1)
                        mask[dup >> 5] |= (uint32_t)1 << (dup & 31);
                }
                PyBuffer_Release(&db);
            }
        }
        if (rc == 1) { /* an accepting state allows EOS (TokenIndex._walk's set_bits) */
            PyObject *acc = cp_attr(dfa, N_ACCEPTING);
            Py_buffer ab, eb;
            if (acc == NULL || get(acc, &ab, 0, 1, "_accepting") < 0) {
                rc = -1;
            } else {
                int accepting = s < ab.len && ((const uint8_t *)ab.buf)[s];
                PyBuffer_Release(&ab);
                if (accepting && get(PyTuple_GET_ITEM(plan, CP_EOS), &eb, 0, 8, "eos") < 0) {
                    rc = -1;
                } else if (accepting) {
                    const int64_t *e = eb.buf;
                    for (Py_ssize_t k = 0; k < eb.len / 8; k++) {
                        if (e[k] < 0 || e[k] >= 32 * words) {
                            PyErr_SetString(PyExc_IndexError, "eos: an id outside the mask");
                            rc = -1;
                            break;
                        }
                        mask[e[k] >> 5] |= (uint32_t)1 << (e[k] & 31);
                    }
                    PyBuffer_Release(&eb);
                }
            }
            Py_XDECREF(acc);
        }
        if (rc == 1) /* read-only int32 [words] over the bytes (np.frombuffer) */
            arr = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(plan, CP_FROMBUFFER), bytes,
                                               PyTuple_GET_ITEM(plan, CP_DTYPE), NULL);
        if (rc == 1 && (arr == NULL || cp_lru_put(lru, state, arr) < 0)) rc = -1;
    }
    if (rc == 1) rc = cp_keep_form(lru, forms, state, arr, out, cols, made);
    Py_XDECREF(arr);
    Py_XDECREF(res);
    Py_XDECREF(bytes);
    Py_XDECREF(below);
    Py_XDECREF(firsts);
    Py_XDECREF(split);
    return rc;
}

/* ---- a grammar automaton's cold mask in one call (TokenIndex.cold_plan of a GrammarAutomaton:
 * TokenIndex._grammar_mask's ways; fill_row / cold_mask dispatch on the plan's size). The plan's
 * entries, in the order of TokenIndex._make_grammar_plan: */
enum {
    GP_TRIE_MOD, GP_TRIE, GP_BYTE, GP_DEPTH, GP_SKIP, GP_TOKEN, GP_STACK, GP_ROW_TABLES, GP_DFA,
    GP_EOS, GP_MASKS, GP_FROMBUFFER, GP_DTYPE, GP_NUM_WORDS, GP_NODE_FREE_KEY, GP_TOKEN_ENDS,
    GP_NODE_FREE, GP_MAX_NODE_FREE, GP_SPLIT, GP_UNSPLIT, GP_NEVER, GP_ROWS, GP_STEPS,
    GP_MAX_STEPS, GP_TOKEN_BYTES, GP_WALK, GP_SIZE
};

/* The cold mask of grammar configuration state (no form, no cached mask) as
 * TokenIndex._grammar_mask makes it: the node-free mask of its key (node_free_key, called
 * back) when one is kept, else the head split's (_walk_split, called back unless the state is in
 * the plan's unsplit set, where it answers None without a call), else the trie walk
 * (walk, with the trie's subtree tables and first nodes); EOS bits where it accepts; the
 * node-free mask kept under its key; the mask stored read-only in the index's mask cache and
 * its form in forms, and written into out[0 .. cols) (out NULL: not written; made not NULL:
 * *made = a new reference to the mask). 1 done, 0 declined (nothing changed: the settings
 * TokenTrie.walk reads leave this walk, the subtree tables are not built yet, or the mask is
 * cached without a form), -1 with an error set. */
static int grammar_cold_mask(PyObject *plan, PyObject *forms, PyObject *state, int32_t *out,
                             Py_ssize_t cols, PyObject **made) {
    PyObject *trie_mod = PyTuple_GET_ITEM(plan, GP_TRIE_MOD), *trie = PyTuple_GET_ITEM(plan, GP_TRIE);
    PyObject *dfa = PyTuple_GET_ITEM(plan, GP_DFA), *lru = PyTuple_GET_ITEM(plan, GP_MASKS);
    int ok = cp_flag(trie_mod, N_C, 1); /* TokenTrie.walk's C walk, its subtree shortcut */
    if (ok == 1) ok = cp_flag(trie_mod, N_BELOW, 0);
    if (ok <= 0) return ok;
    long s = PyLong_AsLong(state);
    if (s == -1 && PyErr_Occurred()) return -1;
    Py_ssize_t words = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, GP_NUM_WORDS));
    if (words < 0) return PyErr_Occurred() ? -1 : 0;
    PyObject *below = NULL, *firsts = NULL;
    { /* the subtree tables only once built (TokenTrie.walk counts walks before building
       * them), and no mask cached without its form (bitmask's way, in Python) */
        PyObject *held = PyObject_GenericGetDict(trie, NULL);
        if (held == NULL) return -1;
        PyObject *name = name_of(&cp_names[N_SUBTREE], CP_NAMES[N_SUBTREE]);
        below = name ? PyDict_GetItemWithError(held, name) : NULL;
        Py_XINCREF(below);
        Py_DECREF(held);
        if (below == NULL) return PyErr_Occurred() ? -1 : 0;
        if (below == Py_None) {
            Py_DECREF(below);
            return 0;
        }
        PyObject *data = cp_attr(lru, N_DATA);
        int has = data == NULL ? -1 : PyDict_Check(data) ? PyDict_Contains(data, state) : 1;
        Py_XDECREF(data);
        if (has) {
            Py_DECREF(below);
            return has < 0 ? -1 : 0;
        }
        firsts = cp_attr(trie, N_FIRSTS);
        if (firsts == NULL) {
            Py_DECREF(below);
            return -1;
        }
    }
    PyObject *shared = Py_None, *hit = NULL, *split = NULL, *bytes = NULL, *arr = NULL;
    PyObject *node_free = PyTuple_GET_ITEM(plan, GP_NODE_FREE);
    int rc = -1;
    Py_INCREF(shared);
    if (PyTuple_GET_ITEM(plan, GP_NODE_FREE_KEY) != Py_None) {
        Py_SETREF(shared, PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(plan, GP_NODE_FREE_KEY),
                                                       state, PyTuple_GET_ITEM(plan, GP_TOKEN_ENDS),
                                                       NULL));
        if (shared == NULL) goto done;
        if (shared != Py_None) {
            hit = PyDict_GetItemWithError(node_free, shared);
            if (hit == NULL && PyErr_Occurred()) goto done;
            Py_XINCREF(hit);
        }
    }
    if (hit) {
        arr = Py_NewRef(hit);
    } else {
        PyObject *unsplit = PyTuple_GET_ITEM(plan, GP_UNSPLIT);
        int skip = PyAnySet_Check(unsplit) ? PySet_Contains(unsplit, state) : 0;
        if (skip < 0) goto done;
        if (PyTuple_GET_ITEM(plan, GP_SPLIT) != Py_None && !skip) { /* (skip: no key) */
            split = PyObject_CallOneArg(PyTuple_GET_ITEM(plan, GP_SPLIT), state);
            if (split == NULL) goto done;
        }
        bytes = PyBytes_FromStringAndSize(NULL, 4 * words);
        if (bytes == NULL) goto done;
        uint32_t *mask = (uint32_t *)PyBytes_AS_STRING(bytes);
        memset(mask, 0, 4 * words);
        if (split && split != Py_None) { /* the split's mask */
            Py_buffer sb;
            if (get(split, &sb, 0, 4, "split mask") < 0) goto done;
            int fits = sb.len == 4 * words;
            if (fits) memcpy(mask, sb.buf, 4 * words);
            PyBuffer_Release(&sb);
            if (!fits) {
                PyErr_SetString(PyExc_ValueError, "cold mask: the split mask is not [words]");
                goto done;
            }
        } else { /* TokenTrie.walk(dfa, state, None, mask): walk's call, no row built first */
            Py_buffer mb;
            memset(&mb, 0, sizeof mb);
            mb.buf = mask;
            mb.len = 4 * words;
            mb.itemsize = 4;
            PyObject *argv[11] = {PyTuple_GET_ITEM(plan, GP_BYTE), PyTuple_GET_ITEM(plan, GP_DEPTH),
                                  PyTuple_GET_ITEM(plan, GP_SKIP), PyTuple_GET_ITEM(plan, GP_TOKEN),
                                  PyTuple_GET_ITEM(plan, GP_STACK), Py_None, Py_None, state,
                                  PyTuple_GET_ITEM(plan, GP_ROW_TABLES), below, firsts};
            PyObject *res = walk_into(argv, 11, 0, 0, 0, &mb);
            if (res == NULL) goto done;
            Py_DECREF(res);
        }
        PyObject *acc = cp_attr(dfa, N_ACCEPTING); /* an accepting state allows EOS */
        Py_buffer ab, eb;
        if (acc == NULL) goto done;
        if (get(acc, &ab, 0, 1, "_accepting") < 0) {
            Py_DECREF(acc);
            goto done;
        }
        int accepting = s >= 0 && s < ab.len && ((const uint8_t *)ab.buf)[s];
        PyBuffer_Release(&ab);
        Py_DECREF(acc);
        if (accepting) {
            if (get(PyTuple_GET_ITEM(plan, GP_EOS), &eb, 0, 8, "eos") < 0) goto done;
            const int64_t *e = eb.buf;
            int bad = 0;
            for (Py_ssize_t k = 0; k < eb.len / 8 && !bad; k++) {
                bad = e[k] < 0 || e[k] >= 32 * words;
                if (!bad) mask[e[k] >> 5] |= (uint32_t)1 << (e[k] & 31);
            }
            PyBuffer_Release(&eb);
            if (bad) {
                PyErr_SetString(PyExc_IndexError, "eos: an id outside the mask");
                goto done;
            }
        }
        arr = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(plan, GP_FROMBUFFER), bytes,
                                           PyTuple_GET_ITEM(plan, GP_DTYPE), NULL);
        if (arr == NULL) goto done;
        if (shared != Py_None) { /* the node-free mask kept for the key's other configurations */
            Py_ssize_t bound = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, GP_MAX_NODE_FREE));
            if (bound == -1 && PyErr_Occurred()) goto done;
            if (!PyDict_Check(node_free)) {
                PyErr_SetString(PyExc_TypeError, "cold plan: the node-free masks are no dict");
                goto done;
            }
            if (PyDict_GET_SIZE(node_free) >= bound) PyDict_Clear(node_free);
            if (PyDict_SetItem(node_free, shared, arr) < 0) goto done;
        }
    }
    if (cp_lru_put(lru, state, arr) < 0) goto done;
    rc = cp_keep_form(lru, forms, state, arr, out, cols, made);
done:
    Py_XDECREF(arr);
    Py_XDECREF(bytes);
    Py_XDECREF(split);
    Py_XDECREF(hit);
    Py_XDECREF(shared);
    Py_XDECREF(below);
    Py_XDECREF(firsts);
    return rc;
}

/* cold_mask or grammar_cold_mask by the plan's size */
static int any_cold_mask(PyObject *plan, PyObject *forms, PyObject *state, int32_t *out,
                         Py_ssize_t cols, PyObject **made) {
    if (PyTuple_CheckExact(plan) && PyTuple_GET_SIZE(plan) == GP_SIZE)
        return grammar_cold_mask(plan, forms, state, out, cols, made);
    return cold_mask(plan, forms, state, out, cols, made);
}

/* cold_mask(plan, forms, state) -> the mask or None: fill_row's cold mask without the write,
 * for a destination fill_row does not take (an ndarray bitmask, a tensor written first): the
 * mask (int32 [num_words], read-only) made and stored as there; None, nothing changed, where
 * that work takes another way or state already has a form or a cached mask. */
static PyObject *cold_mask_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "cold_mask(TokenIndex.cold_plan, fill_forms, state)");
        return NULL;
    }
    int has = PyDict_Contains(args[1], args[2]);
    if (has) {
        if (has < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *made = NULL;
    int done = any_cold_mask(args[0], args[1], args[2], NULL, 0, &made);
    if (done < 0) return NULL;
    if (!done || !made) Py_RETURN_NONE;
    return made;
}

/* cold_step(plan, state, token) -> int or None: TokenIndex.token_step for the matcher's cold
 * advance (the step memo read and missed): the state after the token's bytes, -1 when refused
 * (an id out of range or never allowed: not memoised; refused by the state's cached row or
 * mask), memoised in the index's steps as there; None, nothing done, where that step takes
 * another way (no cached row or mask: ByteDFA.walk in Python; settings without walk_direct). */
static PyObject *cold_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    /* a grammar automaton's plan: its entries, its walk's settings, walk_bytes (not direct) */
    int grammar = nargs == 3 && PyTuple_CheckExact(args[0]) && PyTuple_GET_SIZE(args[0]) == GP_SIZE;
    if (!grammar
        && (nargs != 3 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != CP_SIZE)) {
        PyErr_SetString(PyExc_TypeError, "cold_step(TokenIndex.cold_plan, state, token)");
        return NULL;
    }
    const int CP_NEVER_ = grammar ? GP_NEVER : CP_NEVER, CP_ROWS_ = grammar ? GP_ROWS : CP_ROWS,
              CP_MASKS_ = grammar ? GP_MASKS : CP_MASKS, CP_STEPS_ = grammar ? GP_STEPS : CP_STEPS,
              CP_MAX_STEPS_ = grammar ? GP_MAX_STEPS : CP_MAX_STEPS,
              CP_TOKEN_BYTES_ = grammar ? GP_TOKEN_BYTES : CP_TOKEN_BYTES,
              CP_ROW_TABLES_ = grammar ? GP_ROW_TABLES : CP_ROW_TABLES,
              CP_DFA_ = grammar ? GP_DFA : CP_DFA;
    PyObject *plan = args[0], *state = args[1];
    long s = PyLong_AsLong(state);
    if (s == -1 && PyErr_Occurred()) return NULL;
    if (!PyIndex_Check(args[2])) Py_RETURN_NONE; /* (not an id: the Python step answers) */
    Py_ssize_t tok = PyNumber_AsSsize_t(args[2], NULL); /* clipped: out of range either way */
    if (tok == -1 && PyErr_Occurred()) return NULL;
    Py_buffer nb;
    if (get(PyTuple_GET_ITEM(plan, CP_NEVER_), &nb, 0, 1, "never") < 0) return NULL;
    int never = tok < 0 || tok >= nb.len || ((const uint8_t *)nb.buf)[tok];
    PyBuffer_Release(&nb);
    if (never) return PyLong_FromLong(-1);
    long nxt = -3; /* -3: not known yet */
    PyObject *rows = cp_attr(PyTuple_GET_ITEM(plan, CP_ROWS_), N_DATA);
    if (rows == NULL) return NULL;
    PyObject *row = PyDict_Check(rows) ? PyDict_GetItemWithError(rows, state) : NULL;
    if (row) { /* the cached next-state row */
        Py_buffer rb;
        if (get(row, &rb, 0, 4, "row") < 0) {
            Py_DECREF(rows);
            return NULL;
        }
        nxt = tok < rb.len / 4 ? ((const int32_t *)rb.buf)[tok] : -1;
        PyBuffer_Release(&rb);
    }
    Py_DECREF(rows);
    if (PyErr_Occurred()) return NULL;
    if (nxt == -3) {
        PyObject *masks = cp_attr(PyTuple_GET_ITEM(plan, CP_MASKS_), N_DATA);
        if (masks == NULL) return NULL;
        PyObject *mask = PyDict_Check(masks) ? PyDict_GetItemWithError(masks, state) : NULL;
        int bit = -1; /* -1: no cached mask */
        if (mask) {
            Py_buffer mb;
            if (get(mask, &mb, 0, 4, "mask") == 0) {
                bit = tok < 8 * mb.len && (((const uint32_t *)mb.buf)[tok >> 5] >> (tok & 31)) & 1;
                PyBuffer_Release(&mb);
            }
        }
        Py_DECREF(masks);
        if (PyErr_Occurred()) return NULL;
        if (bit < 0) Py_RETURN_NONE; /* no mask: ByteDFA.walk's whole rows, in Python */
        if (bit == 0) {
            nxt = -1; /* refused by the cached mask */
        } else {
            int ok = grammar ? cp_flag(PyTuple_GET_ITEM(plan, GP_TRIE_MOD), N_C, 1)
                             : cp_settings(plan);
            if (ok <= 0) {
                if (ok < 0) return NULL;
                Py_RETURN_NONE;
            }
            PyObject *data = PyList_GetItem(PyTuple_GET_ITEM(plan, CP_TOKEN_BYTES_), tok);
            if (data == NULL) return NULL;
            PyObject *argv[4] = {data, state, PyTuple_GET_ITEM(plan, CP_ROW_TABLES_),
                                 PyTuple_GET_ITEM(plan, CP_DFA_)};
            PyObject *res = NULL;
            if (grammar && PyTuple_GET_ITEM(plan, GP_WALK) != Py_None) {
                /* the automaton's own walk: no row built for the token's inner bytes */
                PyObject *wargs[2] = {state, data};
                res = PyObject_Vectorcall(PyTuple_GET_ITEM(plan, GP_WALK), wargs, 2, NULL);
                if (res == NULL) return NULL;
                if (res == Py_None) Py_CLEAR(res); /* no room: the row path grows the tables */
            }
            if (res == NULL) res = walk_bytes_impl(argv, grammar ? 3 : 4, !grammar);
            if (res == NULL) return NULL;
            nxt = PyLong_AsLong(res);
            Py_DECREF(res);
            if (nxt == -1 && PyErr_Occurred()) return NULL;
        }
    }
    PyObject *steps = PyTuple_GET_ITEM(plan, CP_STEPS_);
    Py_ssize_t bound = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, CP_MAX_STEPS_));
    if ((bound == -1 && PyErr_Occurred()) || !PyDict_CheckExact(steps)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "cold_step: steps is no dict");
        return NULL;
    }
    if (PyDict_GET_SIZE(steps) >= bound) PyDict_Clear(steps);
    PyObject *value = PyLong_FromLong(nxt);
    PyObject *key = value ? Py_BuildValue("(On)", state, tok) : NULL;
    int rc = key ? PyDict_SetItem(steps, key, value) : -1;
    Py_XDECREF(key);
    if (rc < 0) {
        Py_XDECREF(value);
        return NULL;
    }
    return value;
}

/* fill_row(dst, tensor, row, words): see the header. The check is three comparisons; the
 * write one memcpy of the mask's words and a memset of the words past the vocabulary, or
 * for a sparse mask a memset of the row and one store per nonzero word. */
static PyObject *fill_row(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs < 4 || nargs > 6 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 6
        || (nargs >= 5 && !PyDict_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError,
                        "fill_row((tensor, version, base, rows, stride, cols), tensor, row, "
                        "words) or (..., row, forms, state[, cold_plan])");
        return NULL;
    }
    PyObject *dst = args[0], *tensor = args[1];
    if (PyTuple_GET_ITEM(dst, 0) != tensor) Py_RETURN_FALSE;
    /* version None: an inference tensor (no version counter), dst read for this call */
    int eq = PyTuple_GET_ITEM(dst, 1) == Py_None
                 ? 1 : same_as(tensor, str_version, 0, PyTuple_GET_ITEM(dst, 1));
    if (eq > 0) eq = same_as(tensor, str_data_ptr, 1, PyTuple_GET_ITEM(dst, 2));
    if (eq < 0) return NULL;
    if (eq == 0) Py_RETURN_FALSE;
    void *base = PyLong_AsVoidPtr(PyTuple_GET_ITEM(dst, 2));
    if (!base) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "fill_row: null base");
        return NULL;
    }
    Py_ssize_t v[3];
    for (int k = 0; k < 3; k++) {
        v[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(dst, 3 + k));
        if (v[k] == -1 && PyErr_Occurred()) return NULL;
    }
    Py_ssize_t rows = v[0], stride = v[1], cols = v[2];
    Py_ssize_t row = PyNumber_AsSsize_t(args[2], PyExc_IndexError);
    if (row == -1 && PyErr_Occurred()) return NULL;
    if (row < 0) row += rows;
    if (row < 0 || row >= rows || cols < 0 || stride < 0) {
        PyErr_SetString(PyExc_IndexError, "fill_row: row out of range");
        return NULL;
    }
    int32_t *out = (int32_t *)base + row * stride;
    PyObject *words = args[3];
    if (nargs >= 5) { /* forms[state] = [form, used]: mark it used, write its form */
        PyObject *entry = PyDict_GetItemWithError(args[3], args[4]);
        if (!entry) {
            if (PyErr_Occurred()) return NULL;
            if (nargs == 6 && args[5] != Py_None) { /* the cold mask, in this call */
                int done = any_cold_mask(args[5], args[3], args[4], out, cols, NULL);
                if (done < 0) return NULL;
                if (done) Py_RETURN_TRUE;
            }
            Py_RETURN_NONE;
        }
        if (!PyList_CheckExact(entry) || PyList_GET_SIZE(entry) != 2) {
            PyErr_SetString(PyExc_TypeError, "fill_row: forms[state] must be [form, used]");
            return NULL;
        }
        words = PyList_GET_ITEM(entry, 0);
        Py_INCREF(words); /* held while writing (the list item may be replaced) */
        if (PyList_GET_ITEM(entry, 1) != Py_True) {
            Py_INCREF(Py_True);
            PyList_SetItem(entry, 1, Py_True); /* steals the reference */
        }
    } else {
        Py_INCREF(words);
    }
    int ok = write_words(out, cols, words);
    Py_DECREF(words);
    if (ok < 0) return NULL;
    Py_RETURN_TRUE;
}

/* row_form(mask) -> bytes | tuple: the form masks.row_form gives a cached mask (int32 [n],
 * C-contiguous, never mutated afterwards), in one pass instead of numpy's five calls (a cold
 * mask pays it once per state): bytes of native int32 (word index, word) pairs when at most
 * n / 8 words are nonzero (gathered in the same pass), else (mask, address, n) (the pass
 * stops at the (n / 8 + 1)-th nonzero word). None for anything else (another dtype,
 * a non-contiguous array): the caller's numpy path handles it. */
static PyObject *row_form(PyObject *self, PyObject *mask) {
    (void)self;
    Py_buffer b;
    if (PyObject_GetBuffer(mask, &b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const char *fmt = b.format ? b.format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    if (b.itemsize != 4 || (strcmp(fmt, "i") != 0 && strcmp(fmt, "l") != 0) || b.len % 4) {
        PyBuffer_Release(&b);
        Py_RETURN_NONE;
    }
    const int32_t *w = (const int32_t *)b.buf;
    Py_ssize_t n = b.len / 4, cap = n / 8, nonzero = 0; /* sparse: at most n / 8 nonzero */
    /* one pass: the (index, word) pairs gathered while there are at most cap of them, four
     * zero words skipped at a time; a dense mask stops at its (cap + 1)-th nonzero word */
    int32_t local[2 * 256];
    int32_t *pairs = cap <= 256 ? local : PyMem_Malloc((size_t)cap * 8);
    if (pairs == NULL) {
        PyBuffer_Release(&b);
        return PyErr_NoMemory();
    }
    Py_ssize_t i = 0;
    for (; i < n && nonzero <= cap; i++) {
        if (i + 4 <= n && (i & 3) == 0) {
            uint64_t lo, hi;
            memcpy(&lo, w + i, 8);
            memcpy(&hi, w + i + 2, 8);
            if (!(lo | hi)) {
                i += 3;
                continue;
            }
        }
        if (!w[i]) continue;
        if (nonzero < cap) {
            pairs[2 * nonzero] = (int32_t)i;
            pairs[2 * nonzero + 1] = w[i];
        }
        nonzero++;
    }
    PyObject *out;
    if (nonzero <= cap)
        out = PyBytes_FromStringAndSize((const char *)pairs, 8 * nonzero);
    else
        out = Py_BuildValue("(ONn)", mask, PyLong_FromVoidPtr(b.buf), n);
    if (pairs != local) PyMem_Free(pairs);
    PyBuffer_Release(&b);
    return out;
}

/* descendant_bytes(byte, depth, out): out (uint64 [N][4], written) = the bytes of each node's
 * descendants, bit b % 64 of word b / 64 (a leaf: all zero); byte uint8 [N] and depth int32 [N]
 * are the trie's preorder layout. ValueError on inconsistent arrays. */
static PyObject *descendant_bytes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "descendant_bytes(byte, depth, out)");
        return NULL;
    }
    Py_buffer bb, db, ob;
    if (get(args[0], &bb, 0, 1, "byte") < 0) return NULL;
    if (get(args[1], &db, 0, 4, "depth") < 0) {
        PyBuffer_Release(&bb);
        return NULL;
    }
    if (get(args[2], &ob, 1, 8, "out") < 0) {
        PyBuffer_Release(&bb);
        PyBuffer_Release(&db);
        return NULL;
    }
    Py_ssize_t n = bb.len;
    int ok = 0;
    Py_ssize_t *path = NULL;
    if (db.len != 4 * n || ob.len != 32 * n) {
        PyErr_SetString(PyExc_ValueError, "byte, depth, out: one entry (out: four words) per node");
    } else if (!(path = PyMem_Malloc(((size_t)n + 1) * sizeof(*path)))) {
        PyErr_NoMemory();
    } else {
        const uint8_t *byte = bb.buf;
        const int32_t *depth = db.buf;
        uint64_t *out = ob.buf;
        memset(out, 0, (size_t)ob.len);
        ok = 1;
        /* path[k]: the node at depth k + 1 on the current path; a node's bytes go to every
         * ancestor on the path: its parent's set, which is ORed into the grandparent's when
         * the parent's subtree closes (popped), and so on up */
        Py_ssize_t top = 0; /* nodes on the path */
        for (Py_ssize_t i = 0; i <= n; i++) {
            int32_t d = i < n ? depth[i] : 1;
            if (d < 1 || d > top + 1) {
                PyErr_SetString(PyExc_ValueError, "trie depth does not follow preorder");
                ok = 0;
                break;
            }
            while (top >= d) { /* close the subtrees of path nodes at depth >= d */
                Py_ssize_t c = path[--top];
                if (top > 0) {
                    uint64_t *p = out + 4 * path[top - 1];
                    for (int w = 0; w < 4; w++) p[w] |= out[4 * c + w];
                    p[byte[c] >> 6] |= (uint64_t)1 << (byte[c] & 63);
                }
            }
            if (i < n) path[top++] = i;
        }
    }
    PyMem_Free(path);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&ob);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* The trie of the tokens kept[0..n_kept) (ids in byte order, ties by id; their bytes total
 * bytes in all, the longest longest; each id's bytes inside flat, checked by the caller) as
 * holding_trie's (byte, depth, skip, token, dups) bytes objects and its max depth; NULL with ValueError when
 * kept is not in byte order. */
static PyObject *emit_trie(const int32_t *kept, Py_ssize_t n_kept, Py_ssize_t total,
                           Py_ssize_t longest, const uint8_t *flat, const int64_t *starts,
                           const int64_t *lengths) {
    PyObject *result = NULL;
    int32_t *path = NULL;
    uint8_t *nbyte = NULL;
    int32_t *ndepth = NULL, *nskip = NULL, *ntoken = NULL;
    int64_t *ndups = NULL;
    /* pass 2: each kept token adds the nodes past its common prefix with the previous one;
     * path[d] is the node at depth d + 1 on the current path, whose subtree ends (skip) at
     * the next node of depth <= d + 1 */
    size_t cap = (size_t)total + 1;
    nbyte = PyMem_Malloc(cap);
    ndepth = PyMem_Malloc(cap * 4);
    nskip = PyMem_Malloc(cap * 4);
    ntoken = PyMem_Malloc(cap * 4);
    ndups = PyMem_Malloc(((size_t)n_kept + 1) * 16);
    path = PyMem_Malloc(((size_t)longest + 1) * sizeof(*path));
    if (!nbyte || !ndepth || !nskip || !ntoken || !ndups || !path) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n = 0, n_dups = 0, top = 0; /* top: nodes on the path */
    int32_t prev = -1, holder = -1;
    for (Py_ssize_t i = 0; i < n_kept; i++) {
        int32_t id = kept[i];
        const uint8_t *b = flat + starts[id];
        int64_t len = lengths[id], lcp = 0;
        if (prev >= 0) {
            const uint8_t *a = flat + starts[prev];
            int64_t lim = lengths[prev] < len ? lengths[prev] : len;
            while (lcp < lim && a[lcp] == b[lcp]) lcp++;
            if (lcp < lim ? a[lcp] > b[lcp] : lengths[prev] > len) {
                PyErr_SetString(PyExc_ValueError, "token trie: the ids are not in byte order");
                goto done;
            }
        }
        prev = id;
        if (lcp == len) { /* the bytes of the previous token */
            ndups[2 * n_dups] = id;
            ndups[2 * n_dups + 1] = holder;
            n_dups++;
            continue;
        }
        while (top > lcp) nskip[path[--top]] = (int32_t)n;
        for (int64_t d = lcp; d < len; d++) {
            nbyte[n] = b[d];
            ndepth[n] = (int32_t)(d + 1);
            ntoken[n] = -1;
            path[top++] = (int32_t)n;
            n++;
        }
        ntoken[n - 1] = id;
        holder = id;
    }
    while (top > 0) nskip[path[--top]] = (int32_t)n;
    result = Py_BuildValue("(y#y#y#y#y#n)", (const char *)nbyte, n, (const char *)ndepth, 4 * n,
                           (const char *)nskip, 4 * n, (const char *)ntoken, 4 * n,
                           (const char *)ndups, 16 * n_dups, n ? longest : (Py_ssize_t)0);
done:
    PyMem_Free(path);
    PyMem_Free(nbyte);
    PyMem_Free(ndepth);
    PyMem_Free(nskip);
    PyMem_Free(ntoken);
    PyMem_Free(ndups);
    return result;
}

/* The (ids, flat, starts, lengths) arguments of sorted_trie and byte_postings, read only, into
 * held[0..4) (ids int32, flat bytes, starts and lengths int64); returns how many were acquired:
 * 4, or fewer with the error set (the caller releases those). */
static int get_token_slices(PyObject *const *args, Py_buffer *held[4], const char *ids_name) {
    const char *names[4] = {ids_name, "flat", "starts", "lengths"};
    static const Py_ssize_t sizes[4] = {4, 1, 8, 8};
    int got = 0;
    for (; got < 4; got++)
        if (get(args[got], held[got], 0, sizes[got], names[got]) < 0) break;
    return got;
}

/* 1 when id is one of the v tokens and its bytes (at least min_len of them) lie inside flat. */
static inline int token_in_flat(int32_t id, Py_ssize_t v, const int64_t *starts,
                                const int64_t *lengths, Py_ssize_t nflat, int64_t min_len) {
    return id >= 0 && id < v && lengths[id] >= min_len && starts[id] >= 0 &&
           starts[id] + lengths[id] <= nflat;
}

/* sorted_trie(ids, flat, starts, lengths): see the header. */
static PyObject *sorted_trie(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "sorted_trie(ids, flat, starts, lengths)");
        return NULL;
    }
    Py_buffer ib, fb, stb, lb;
    Py_buffer *held[4] = {&ib, &fb, &stb, &lb};
    int got = get_token_slices(args, held, "ids");
    PyObject *result = NULL;
    if (got == 4) {
        const int32_t *ids = ib.buf;
        const int64_t *starts = stb.buf, *lengths = lb.buf;
        Py_ssize_t k = ib.len / 4, v = lb.len / 8, total = 0, longest = 0;
        int ok = stb.len == lb.len;
        for (Py_ssize_t i = 0; ok && i < k; i++) {
            int32_t id = ids[i];
            ok = token_in_flat(id, v, starts, lengths, fb.len, 1);
            if (ok) {
                total += lengths[id];
                if (lengths[id] > longest) longest = lengths[id];
            }
        }
        if (!ok)
            PyErr_SetString(PyExc_ValueError,
                            "sorted_trie: an id out of range, empty or outside flat");
        else
            result = emit_trie(ids, k, total, longest, fb.buf, starts, lengths);
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(held[i]);
    return result;
}

/* byte_postings(order, flat, starts, lengths): see the header. */
static PyObject *byte_postings(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "byte_postings(order, flat, starts, lengths)");
        return NULL;
    }
    Py_buffer ob, fb, stb, lb;
    Py_buffer *held[4] = {&ob, &fb, &stb, &lb};
    int got = get_token_slices(args, held, "order");
    PyObject *result = NULL;
    int32_t *positions = NULL;
    if (got == 4) {
        const int32_t *order = ob.buf;
        const uint8_t *flat = fb.buf;
        const int64_t *starts = stb.buf, *lengths = lb.buf;
        Py_ssize_t k = ob.len / 4, v = lb.len / 8;
        int64_t offsets[257], totals[256], fill[256];
        memset(offsets, 0, sizeof(offsets));
        memset(totals, 0, sizeof(totals));
        int ok = stb.len == lb.len;
        /* pass 1: per byte, the tokens holding it (each token once) and their bytes */
        for (Py_ssize_t i = 0; ok && i < k; i++) {
            int32_t id = order[i];
            ok = token_in_flat(id, v, starts, lengths, fb.len, 0);
            if (!ok) break;
            uint64_t seen[4] = {0, 0, 0, 0};
            const uint8_t *b = flat + starts[id];
            for (int64_t j = 0; j < lengths[id]; j++) {
                uint8_t c = b[j];
                uint64_t bit = (uint64_t)1 << (c & 63);
                if (seen[c >> 6] & bit) continue;
                seen[c >> 6] |= bit;
                offsets[c + 1]++;
                totals[c] += lengths[id];
            }
        }
        if (!ok) {
            PyErr_SetString(PyExc_ValueError,
                            "byte_postings: an id out of range or its bytes outside flat");
        } else {
            for (int c = 0; c < 256; c++) offsets[c + 1] += offsets[c];
            memcpy(fill, offsets, sizeof(fill));
            if (!(positions = PyMem_Malloc(((size_t)offsets[256] + 1) * sizeof(*positions)))) {
                PyErr_NoMemory();
            } else {
                /* pass 2: the positions, ascending within each byte */
                for (Py_ssize_t i = 0; i < k; i++) {
                    int32_t id = order[i];
                    uint64_t seen[4] = {0, 0, 0, 0};
                    const uint8_t *b = flat + starts[id];
                    for (int64_t j = 0; j < lengths[id]; j++) {
                        uint8_t c = b[j];
                        uint64_t bit = (uint64_t)1 << (c & 63);
                        if (seen[c >> 6] & bit) continue;
                        seen[c >> 6] |= bit;
                        positions[fill[c]++] = (int32_t)i;
                    }
                }
                result = Py_BuildValue("(y#y#y#)", (const char *)offsets, (Py_ssize_t)sizeof(offsets),
                                       (const char *)positions, (Py_ssize_t)(4 * offsets[256]),
                                       (const char *)totals, (Py_ssize_t)sizeof(totals));
            }
        }
    }
    PyMem_Free(positions);
    for (int i = 0; i < got; i++) PyBuffer_Release(held[i]);
    return result;
}

/* holding_trie: see the header. */
static PyObject *holding_trie(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "holding_trie(order, offsets, positions, totals, byte_mask, flat, "
                        "starts, lengths, max_bytes, packed)");
        return NULL;
    }
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[8]);
    if (max_bytes == -1 && PyErr_Occurred()) return NULL;
    Py_buffer ob, fb_off, pb_pos, tb, mb, fb, stb, lb, pb;
    Py_buffer *held[9] = {&ob, &fb_off, &pb_pos, &tb, &mb, &fb, &stb, &lb, &pb};
    int got = 0;
    static const char *names[9] = {"order", "offsets", "positions", "totals", "byte_mask",
                                   "flat",  "starts",  "lengths",   "packed"};
    static const Py_ssize_t sizes[9] = {4, 8, 4, 8, 1, 1, 8, 8, 4};
    for (; got < 9; got++) {
        PyObject *a = args[got < 8 ? got : 9];
        if (get(a, held[got], got == 8, sizes[got], names[got]) < 0) break;
    }
    PyObject *result = NULL;
    int32_t *kept = NULL;
    uint64_t *seen = NULL;
    if (got < 9) goto done;
    Py_ssize_t k = ob.len / 4, v = lb.len / 8, nflat = fb.len, npos = pb_pos.len / 4;
    if (mb.len != 32 || fb_off.len != 257 * 8 || tb.len != 256 * 8 || stb.len != 8 * v ||
        pb.len * 8 < v) {
        PyErr_SetString(PyExc_ValueError,
                        "holding_trie: offsets [257], totals [256], starts / lengths [V], "
                        "byte_mask 32 bytes, packed >= V bits");
        goto done;
    }
    const int32_t *order = ob.buf, *positions = pb_pos.buf;
    const int64_t *offsets = fb_off.buf;
    const uint8_t *m8 = mb.buf, *flat = fb.buf;
    const int64_t *starts = stb.buf, *lengths = lb.buf;
    uint32_t *packed = pb.buf;
    for (int c = 0; c < 256; c++) { /* one byte's tokens past the bound: refused at once */
        if (((m8[c >> 3] >> (c & 7)) & 1) && ((const int64_t *)tb.buf)[c] > max_bytes) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    Py_ssize_t words = (k + 63) / 64;
    if (!(kept = PyMem_Malloc(((size_t)k + 1) * sizeof(*kept))) ||
        !(seen = PyMem_Calloc((size_t)words + 1, sizeof(*seen)))) {
        PyErr_NoMemory();
        goto done;
    }
    /* pass 1: the positions holding a byte of the set (a bitmap over order), then the kept
     * tokens in order, their bits and their bytes in all */
    for (int c = 0; c < 256; c++) {
        if (!((m8[c >> 3] >> (c & 7)) & 1)) continue;
        int64_t lo = offsets[c], hi = offsets[c + 1];
        if (lo < 0 || hi < lo || hi > npos) {
            PyErr_SetString(PyExc_ValueError, "holding_trie: offsets outside positions");
            goto done;
        }
        for (int64_t j = lo; j < hi; j++) {
            int32_t at = positions[j];
            if (at < 0 || at >= k) {
                PyErr_SetString(PyExc_ValueError, "holding_trie: a position is outside order");
                goto done;
            }
            seen[at >> 6] |= (uint64_t)1 << (at & 63);
        }
    }
    Py_ssize_t n_kept = 0, total = 0, longest = 0;
    for (Py_ssize_t w = 0; w < words; w++) {
        for (uint64_t bits = seen[w]; bits; bits &= bits - 1) {
            int32_t id = order[64 * w + __builtin_ctzll(bits)];
            if (id < 0 || id >= v) {
                PyErr_SetString(PyExc_ValueError, "holding_trie: an id of order is out of range");
                goto done;
            }
            int64_t len = lengths[id];
            if (len < 1 || starts[id] < 0 || starts[id] + len > nflat) {
                PyErr_SetString(PyExc_ValueError,
                                "holding_trie: a kept token's bytes are outside flat");
                goto done;
            }
            kept[n_kept++] = id;
            packed[id >> 5] |= (uint32_t)1 << (id & 31);
            total += len;
            if (len > longest) longest = len;
            if (total > max_bytes) goto refused; /* no need to read the rest */
        }
    }
    if (total > max_bytes) {
    refused:
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = emit_trie(kept, n_kept, total, longest, flat, starts, lengths);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(held[i]);
    PyMem_Free(kept);
    PyMem_Free(seen);
    return result;
}

static PyMethodDef methods[] = {
    {"byte_postings", (PyCFunction)(void (*)(void))byte_postings, METH_FASTCALL,
     "byte_postings(order, flat, starts, lengths) -> (offsets, positions, totals) bytes"},
    {"sorted_trie", (PyCFunction)(void (*)(void))sorted_trie, METH_FASTCALL,
     "sorted_trie(ids, flat, starts, lengths) -> (byte, depth, skip, token, dups, max depth)"},
    {"holding_trie", (PyCFunction)(void (*)(void))holding_trie, METH_FASTCALL,
     "holding_trie(order, offsets, positions, totals, byte_mask, flat, starts, lengths, "
     "max_bytes, packed) -> arrays | None"},
    {"descendant_bytes", (PyCFunction)(void (*)(void))descendant_bytes, METH_FASTCALL,
     "descendant_bytes(byte, depth, out): the bytes below each trie node -> None"},
    {"walk_bytes", (PyCFunction)(void (*)(void))walk_bytes, METH_FASTCALL,
     "walk_bytes(data, state, row_tables) -> state after data, -1 if it dies"},
    {"build_row_direct", (PyCFunction)(void (*)(void))build_row_direct, METH_FASTCALL,
     "build_row_direct(dfa, state) -> bool: a ByteDFA's whole row built in C (False: declined)"},
    {"cold_mask", (PyCFunction)(void (*)(void))cold_mask_py, METH_FASTCALL,
     "cold_mask(cold_plan, fill_forms, state) -> mask | None"},
    {"cold_step", (PyCFunction)(void (*)(void))cold_step, METH_FASTCALL,
     "cold_step(cold_plan, state, token) -> int | None"},
    {"walk_bytes_direct", (PyCFunction)(void (*)(void))walk_bytes_direct, METH_FASTCALL,
     "walk_bytes_direct(data, state, row_tables, dfa): walk_bytes, a ByteDFA's rows built in C"},
    {"fill_row", (PyCFunction)(void (*)(void))fill_row, METH_FASTCALL,
     "fill_row(dst, tensor, row, words | forms, state) -> bool | None: write one mask row"},
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(byte, depth, skip, token, stack, out, mask, state, row_tables) -> live nodes"},
    {"walk_fused", (PyCFunction)(void (*)(void))walk_fused, METH_FASTCALL,
     "walk_fused(...): walk, a missing row built with row_tables(s, b) -> live nodes"},
    {"walk_direct", (PyCFunction)(void (*)(void))walk_direct, METH_FASTCALL,
     "walk_direct(..., row_tables, dfa): walk_fused, a ByteDFA's rows built in C -> live nodes"},
    {"walk_direct_whole", (PyCFunction)(void (*)(void))walk_direct_whole, METH_FASTCALL,
     "walk_direct with the start row built whole first; None when that build declines"},
    {"count_reach", (PyCFunction)(void (*)(void))count_reach, METH_FASTCALL,
     "count_reach(kind, args, nullable, depth, t, budget, limits) -> bool (csrc/count_reach.h)"},
    {"row_form", row_form, METH_O, "row_form(mask) -> bytes | (mask, address, n) | None"},
    {"bind_tensor_type", bind_tensor_type, METH_O,
     "bind_tensor_type(torch.Tensor) -> bool: fill_row's checks call its descriptors directly"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tokentrie",
                                    "Token-trie walk over a byte DFA (see csrc/tokentrie.c).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__tokentrie(void) {
    str_version = PyUnicode_InternFromString("_version");
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    if (!str_version || !str_data_ptr || dfa_rows_init() < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    /* the walks read PENDING row entries (ByteDFA rows built for them): an extension without
     * this constant would take them for dead bytes, so trie.py builds whole rows for it */
    if (m && PyModule_AddIntConstant(m, "PENDING", PENDING) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
