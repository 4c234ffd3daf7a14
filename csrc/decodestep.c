/* structgen's fused CPU decode step: every decoder layer of a small step in one call.
 *
 * Why: with the weight matmuls (dense_core.h) and the ops around them (cpuops_core.h) in C,
 * a bf16 batch-1 decode step of a 30-layer model still spent about a third of its time in
 * the Python between those calls: ~9 calls per layer, each with its checks, a torch.empty
 * for its output and the argument conversion. This file runs the same kernels, in the same
 * order and on the same buffers' layouts, for all layers in one call (the GIL released
 * throughout), so its results equal the per-op path bit for bit.
 *
 * One layer (Llama-style pre-norm block with a SwiGLU MLP; the residual stream res [T, H] is
 * updated in place, delta is the previous layer's MLP output, NULL for the first layer):
 *
 *   h    = add_rms_norm(res += delta, input_layernorm)
 *   qkv  = h @ W_qkv.T (+ b)                 [T, (NH + 2 KVH) d]   one fused matmul
 *   rope_store_kv(q, k, v)                   optional per-head q/k norm, RoPE, K/V to slots
 *   attn = paged_attention(q)                [T, NH d]             through the page table
 *   o    = attn @ W_o.T (+ b)                [T, H]
 *   h    = add_rms_norm(res += o, post_attention_layernorm)
 *   gu   = h @ W_gate_up.T (+ b)             [T, 2 I]              one fused matmul
 *   act  = silu(gate) * up                   [T, I]
 *   mlp  = act @ W_down.T (+ b)              [T, H]                the next layer's delta
 *
 * Layer table: int64 [L, LF_COUNT] (fields below): data pointers of the layer's weights and
 * KV cache (0 for an absent bias or q/k norm) and its sliding window (0: none). Activations,
 * norms, biases and the KV cache in one dtype dt (0 fp32, 1 bf16), row-major and contiguous.
 * Each of the four matmuls has a format word (LF_*_FMT, fmt_* below): float weights in dt
 * (dense_core.h), or structgen's quantized layouts run by the quantized kernel
 * (qkernel_core.h: int4 "tiles" (qkernel_tiles.h, FMT_INT4T, what QuantLinear stores on CPU)
 * or "rows" with fp16 or fp32 scales and mins, from int4-gNN, GGUF Q4_0/Q4_1 and Q4_K;
 * row-major int8 with fp16/fp32 scales, from int8 and GGUF Q8_0), with the weight's scales
 * pointer in LF_*_S (int4: its tile table of mins and scales, see qkernel.c; LF_*_MN is not
 * read, 0) and, for int8 activations (Q8_0-style, per row and
 * per block of 32), the q8 bit. A quantized matmul's fp32 output is rounded to dt and its
 * bias then added in dt, as QuantLinear.forward does. The caller
 * (structgen/runtime/cpu/decode_step.py) checks all of it once per plan.
 *
 * Split q/k/v or gate/up (LF_QKV_PARTS, LF_GU_PARTS): where a layer's members differ in
 * quantized kind (llama.cpp's Q4_K_M files store some attn_v / ffn_up as Q6_K next to Q4_K
 * q/k, gate) they are not fused into one weight. Such a slot then has up to 3 parts of
 * LP_COUNT fields each (weight, bias, format word, scales, mins, rows; rows 0: no part; part
 * 0's rows 0: the slot is one matmul over LF_QKV_W ... as above), each run as the member's own
 * quantized matmul (the kernel call the per-op path makes for that member, so bit for bit
 * the same) into the next rows-wide band of the slot's output columns.
 *
 * Threads: the whole step is one OpenMP parallel region of ``threads`` threads (llama.cpp's
 * way: threads held across the graph, a barrier between dependent ops) instead of a region per
 * op: about 150 fork/joins per step of a 30-layer model, each a chance for a thread of a loaded
 * machine to be descheduled or asleep when the next op needs it. Each layer is five phases
 * ending at a barrier (see layer()); every thread computes the small serial pieces (residual
 * add, RMS norm, the int8 activation quantization, the bf16 -> fp32 input copy) for itself
 * rather than waiting for one thread to publish them. Every output element is still computed
 * by one thread with the arithmetic of the per-op kernels, so the result does not depend on
 * the thread count (tests/runtime/cpu/test_decode_step_threads.py, with set_stagger).
 *
 * Rows: up to MAX_STEP_ROWS (64) tokens a call (the caller sends more than 8 only as decode rows,
 * one token a sequence). The matmuls take all of them per weight tile or block of weight rows
 * (int4 tiles and int8 with int8 activations: every row per weight tile or row; float, int4 rows
 * and exact-fp32 int8, which take MAX_M = 8 rows at a time: chunks of 8 rows per block of weight
 * rows, so the weight comes from memory once a step instead of once per 8 rows); each row's
 * arithmetic is that of a call of its 8-row chunk (tests/runtime/cpu/test_decode_step*.py: one
 * call == calls of 8 rows, bit for bit).
 *
 * Exposed as structgen.runtime.cpu._decodestep (METH_FASTCALL, raw pointers as ints).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

static void stagger(void);
#define SG_ITEM_HOOK() stagger() /* a late thread's attention items are late too */
#include "cpuops_core.h"
#include "dense_core.h"
#include "qkernel_core.h"
#include "sg_pybind.h"

enum {
    LF_IN_NORM, LF_QKV_W, LF_QKV_B, LF_O_W, LF_O_B, LF_POST_NORM, LF_GU_W, LF_GU_B, LF_DOWN_W,
    LF_DOWN_B, LF_K_CACHE, LF_V_CACHE, LF_Q_NORM, LF_K_NORM, LF_WINDOW,
    LF_QKV_FMT, LF_QKV_S, LF_QKV_MN, LF_O_FMT, LF_O_S, LF_O_MN, LF_GU_FMT, LF_GU_S, LF_GU_MN,
    LF_DOWN_FMT, LF_DOWN_S, LF_DOWN_MN,
    LF_QKV_PARTS, LF_GU_PARTS = LF_QKV_PARTS + 3 * 6, LF_COUNT = LF_GU_PARTS + 3 * 6
};

/* Rows (tokens) one call takes: decode steps of up to 64 sequences run as one call, so each
 * weight is read from memory once per step and reused for every row from cache. */
#define MAX_STEP_ROWS 64
/* Weight rows per block of the row-layout quantized matmuls over more than MAX_M rows (int4_rows,
 * and int8_rows with float32 activations, take MAX_M rows at a time): a multiple of 8 (a block's per-element arithmetic is
 * that of any 8-aligned thread split), 64 rows of K = 1536 int8 being 96 KiB (L2) */
#define Q_ROW_BLOCK 64

/* One part of a split slot: its fields, from LF_*_PARTS + part * LP_COUNT */
enum { LP_W, LP_B, LP_FMT, LP_S, LP_MN, LP_N, LP_COUNT };
#define MAX_PARTS 3

/* A matmul's format word: kind | scale_f16 << 2 | q8 << 3 | group << 4 */
enum { FMT_FLOAT = 0, FMT_INT4 = 1, FMT_INT8 = 2, FMT_INT4T = 3 };
#define FMT_KIND(f) ((int)((f) & 3))
#define FMT_SCALE_F16(f) ((int)(((f) >> 2) & 1))
#define FMT_Q8(f) ((int)(((f) >> 3) & 1))
#define FMT_GROUP(f) ((int)((f) >> 4))

typedef struct {
    int T, H, NH, KVH, d, I, ps, dt, kdt, threads; /* dt: activations; kdt: KV cache */
    long pt_stride;
    float eps, qk_eps, scale;
    const void *cos_t, *sin_t;
    const int64_t *slots, *pt, *seq, *pos;
    struct step_barrier *bar; /* the step's barrier (decode_layers) */
} step_dims;

#define LP(f) ((void *)(intptr_t)ly[f])

/* One thread's scratch: its own copy of the residual stream res [T, H] and of the normed
 * activations h [T, H] (dt; every thread computes the norms itself, the same values, so they
 * need no barrier), its fp32 copy of a matmul's input xf [T, kmax] (bf16 x), its fp32 output
 * rows yf [T, nmax] (see mm_rows) and the activation side of a quantized matmul (q_act, kept
 * for the next matmul over the same input while prep_ok). */
typedef struct {
    void *res, *h;
    float *xf, *yf;
    q_act a;
    int prep_ok, prep_gs, prep_int4, prep_q8;
} thread_scratch;

/* Test hook (set_stagger): thread stagger_thread sleeps stagger_us at the start of every phase
 * and of every attention work item it takes, so that a missing barrier shows up as a wrong
 * result instead of a rare race. */
static int stagger_thread = -1, stagger_us = 0;

static void stagger(void) {
#ifdef _OPENMP
    if (stagger_us > 0 && omp_get_thread_num() == stagger_thread) {
        struct timespec ts = {0, (long)stagger_us * 1000L};
        nanosleep(&ts, NULL);
    }
#endif
}

/* This thread's share [*u0, *u1) of n units: contiguous, as even as it goes */
static void team_range(int n, int *u0, int *u1) {
#ifdef _OPENMP
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    int t = 0, nt = 1;
#endif
    int per = (n + nt - 1) / nt;
    long a = (long)t * per, b = a + per;
    *u0 = a < n ? (int)a : n;
    *u1 = b < n ? (int)b : n;
}

/* Rows [n0, n1) of y [T, N] (row stride ldy, dt) = x32 [T, K] @ W.T (+ b), on this thread alone,
 * for the matmul whose weight, bias, format word, scales and mins pointers are p[LP_W .. LP_MN]:
 * float weights (ldy == N) by dense_rows; quantized ones by int4_rows / int8_rows into ts->yf
 * where the output is bf16, has a bias or is strided, then rounded and biased as
 * QuantLinear.forward does. */
static void mm_rows(const float *x32, const int64_t *p, void *y, int N, int ldy, int K, int n0,
                    int n1, thread_scratch *ts, const step_dims *s) {
    const void *w = (const void *)(intptr_t)p[LP_W], *b = (const void *)(intptr_t)p[LP_B];
    const void *sc = (const void *)(intptr_t)p[LP_S]; /* int4: the tile table */
    int64_t fmt = p[LP_FMT];
    int kind = FMT_KIND(fmt), gs = FMT_GROUP(fmt), q8 = FMT_Q8(fmt), f16 = FMT_SCALE_F16(fmt);
    if (n0 >= n1) return;
    if (kind == FMT_FLOAT) {
        if (s->T <= MAX_M) {
            dense_rows(x32, w, s->dt, b, y, s->T, N, K, n0, n1);
            return;
        }
        /* over MAX_M rows: per block of weight rows (read from memory once, then from cache),
         * the rows in chunks of MAX_M from row 0 (the kernel's rounding depends on the rows a
         * call holds: these are the chunks of consecutive MAX_M-row steps) */
        size_t es = s->dt ? 2 : 4;
        for (int nb = n0; nb < n1; nb += ROW_BLOCK) {
            int ne = n1 - nb < ROW_BLOCK ? n1 : nb + ROW_BLOCK;
            for (int m0 = 0; m0 < s->T; m0 += MAX_M)
                dense_rows(x32 + (size_t)m0 * K, w, s->dt, b, (char *)y + es * (size_t)m0 * N,
                           s->T - m0 < MAX_M ? s->T - m0 : MAX_M, N, K, nb, ne);
        }
        return;
    }
    int direct = !s->dt && !b && ldy == N; /* fp32 without bias: the kernel writes y itself */
    float *out = direct ? (float *)y : ts->yf;
    int int4 = kind == FMT_INT4 || kind == FMT_INT4T;
    if (!(ts->prep_ok && ts->prep_gs == gs && ts->prep_int4 == int4 && ts->prep_q8 == q8)) {
        q_act_prep(x32, s->T, K, gs, int4, q8, &ts->a);
        ts->prep_ok = 1, ts->prep_gs = gs, ts->prep_int4 = int4, ts->prep_q8 = q8;
    }
    if (kind == FMT_INT4T) /* tile by tile, all T rows per tile (from cache after the first 8) */
        int4t_rows(x32, w, sc, f16, out, s->T, N, K, gs, q8, &ts->a, n0, n1);
    else if (!int4 && q8) /* int8q8_rows_*: one pass over the weight rows for any T */
        int8_rows(x32, w, sc, f16, out, s->T, N, K, gs, q8, &ts->a, n0, n1);
    else /* these loop over chunks of MAX_M rows outside their weight rows: over MAX_M rows, give
          * them blocks of Q_ROW_BLOCK weight rows so that the later chunks read them from cache */
        for (int nb = n0; nb < n1; nb += s->T <= MAX_M ? n1 - n0 : Q_ROW_BLOCK) {
            int ne = s->T <= MAX_M || n1 - nb < Q_ROW_BLOCK ? n1 : nb + Q_ROW_BLOCK;
            if (int4) int4_rows(x32, w, sc, f16, out, s->T, N, K, gs, q8, &ts->a, nb, ne);
            else int8_rows(x32, w, sc, f16, out, s->T, N, K, gs, q8, &ts->a, nb, ne);
        }
    if (direct) return;
    for (int t = 0; t < s->T; t++) {
        const float *o = out + (size_t)t * N;
        if (!s->dt) { /* fp32 (+ bias) */
            float *yo = (float *)y + (size_t)t * ldy;
            for (int j = n0; j < n1; j++) yo[j] = b ? o[j] + ((const float *)b)[j] : o[j];
            continue;
        }
        uint16_t *yo = (uint16_t *)y + (size_t)t * ldy; /* bf16: round, add the bias, round */
        for (int j = n0; j < n1; j++) {
            uint16_t r = sg_float_to_bf16(o[j]);
            yo[j] = b ? sg_float_to_bf16(sg_bf16_to_float(r) + sg_ld(b, j, 1)) : r;
        }
    }
}

/* Columns [c0, c1) of y [T, N] = x32 [T, K] @ W.T (+ b) on this thread alone, for the matmul
 * whose weight pointer is in field wf of layer row ly (its bias at wf + 1, format word, scales
 * and mins at ff, ff + 1, ff + 2), or, where pf >= 0 and part 0 of the parts at field pf has
 * rows, for each part's share of [c0, c1) within its band of columns. */
static void mm_cols(const int64_t *ly, int wf, int ff, int pf, const float *x32, void *y, int N,
                    int K, int c0, int c1, thread_scratch *ts, const step_dims *s) {
    if (pf >= 0 && ly[pf + LP_N]) {
        size_t es = s->dt ? 2 : 4;
        int col = 0;
        for (int i = 0; i < MAX_PARTS && ly[pf + i * LP_COUNT + LP_N]; i++) {
            const int64_t *p = ly + pf + i * LP_COUNT;
            int np = (int)p[LP_N], a = c0 > col ? c0 : col, b = c1 < col + np ? c1 : col + np;
            if (a < b) mm_rows(x32, p, (char *)y + es * col, np, N, K, a - col, b - col, ts, s);
            col += np;
        }
        return;
    }
    int64_t p[LP_COUNT] = {ly[wf], ly[wf + 1], ly[ff], ly[ff + 1], ly[ff + 2], N};
    mm_rows(x32, p, y, N, N, K, c0, c1, ts, s);
}

/* x [T, K] in dt as this thread's fp32 matmul input (a new input: the q_act kept is stale) */
static const float *mm_input(const void *x, int K, thread_scratch *ts, const step_dims *s) {
    ts->prep_ok = 0;
    return x_as_fp32(x, K, s->dt, s->T, K, ts->xf);
}

/* The step's barrier: OpenMP's (libgomp) spins for a long while (GOMP_SPINCOUNT, ~300k
 * pauses) before it sleeps, which on a loaded machine burns the time slice its late partner
 * thread needs. This one spins SPIN_PAUSES pauses (a few microseconds: a quiet machine's waits
 * end there), then yields the CPU between checks. A centralized counter with a generation
 * number; the last thread to arrive resets the count and releases the others. Acquire/release
 * order makes every write before the barrier visible after it. One per call (on its stack). */
typedef struct step_barrier {
    atomic_int count, gen;
} step_barrier;

#define SPIN_PAUSES 4000
static int spin_pauses = SPIN_PAUSES; /* set_spin: benchmarks' A/B of the spin length */

static void barrier_wait(step_barrier *b) {
#ifdef _OPENMP
    int n = omp_get_num_threads();
#else
    int n = 1;
#endif
    if (n == 1) return;
    int g = atomic_load_explicit(&b->gen, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) == n - 1) {
        atomic_store_explicit(&b->count, 0, memory_order_relaxed);
        atomic_store_explicit(&b->gen, g + 1, memory_order_release);
        return;
    }
    for (int i = 0; atomic_load_explicit(&b->gen, memory_order_acquire) == g; i++) {
        if (i < spin_pauses) {
#if SG_X86
            _mm_pause();
#endif
        } else {
            sched_yield();
        }
    }
}

#define BARRIER() barrier_wait(s->bar)

#define COL_UNIT 64 /* columns per unit of the gate/up split (a multiple of 8: see silu_mul_cols) */

/* One layer, run by every thread of the region; five barriers (six when a sequence spans
 * several attention key chunks):
 *   A  this thread's res += delta, h = norm(res) (all of it, privately); its whole heads of
 *      qkv = h @ W_qkv.T, then their q/k norm and rotary, K/V to the cache          | barrier
 *   B  attention work units shared dynamically (paged_attention_tiles, then _merge
 *      where a sequence spans several key chunks)                                | barrier(s)
 *   C  its rows of o = attn @ W_o.T                                                 | barrier
 *   D  res += o, h = norm(res) privately; its columns j of gate and up (units of COL_UNIT),
 *      then act[:, j] = silu(gate) * up                                             | barrier
 *   E  its rows of mlp = act @ W_down.T                                             | barrier */
static void layer(const int64_t *ly, int first_layer, void *mlp, void *qkv, void *att, void *o,
                  void *gu, void *act, float *part, thread_scratch *ts, const step_dims *s) {
    int T = s->T, H = s->H, d = s->d, I = s->I, dt = s->dt, NH = s->NH, KVH = s->KVH;
    int nqkv = (NH + 2 * KVH) * d, nq = NH * d, u0, u1, n0, n1;
    size_t es = dt ? 2 : 4;
    char *k = (char *)qkv + es * nq, *v = (char *)qkv + es * (nq + (size_t)KVH * d);
    /* A */
    stagger();
    add_rms_norm_rows(ts->res, H, first_layer ? NULL : mlp, H, LP(LF_IN_NORM), ts->h, H, 0, T, H,
                      s->eps, dt);
    const float *x32 = mm_input(ts->h, H, ts, s);
    team_range(NH + 2 * KVH, &u0, &u1); /* whole heads: q, then k, then v */
    mm_cols(ly, LF_QKV_W, LF_QKV_FMT, LF_QKV_PARTS, x32, qkv, nqkv, H, u0 * d, u1 * d, ts, s);
    for (int hd = u0; hd < u1; hd++)
        for (int t = 0; t < T; t++) {
            size_t coff = (size_t)t * d, off = (size_t)t * nqkv;
            if (hd < NH) {
                rope_head(qkv, off + (size_t)hd * d, s->cos_t, s->sin_t, coff, LP(LF_Q_NORM),
                          s->qk_eps, d, dt);
            } else if (hd < NH + KVH) {
                size_t koff = off + (size_t)(hd - NH) * d;
                rope_head(k, koff, s->cos_t, s->sin_t, coff, LP(LF_K_NORM), s->qk_eps, d, dt);
                kv_store(LP(LF_K_CACHE), k, koff, s->slots, t, KVH, hd - NH, d, dt, s->kdt);
            } else {
                size_t voff = off + (size_t)(hd - NH - KVH) * d;
                kv_store(LP(LF_V_CACHE), v, voff, s->slots, t, KVH, hd - NH - KVH, d, dt, s->kdt);
            }
        }
    BARRIER();
    /* B */
    stagger();
    long first[MAX_STEP_ROWS + 1], tile[MAX_STEP_ROWS + 1], ufirst[MAX_STEP_ROWS + 1];
    int window = (int)ly[LF_WINDOW];
    attn_items(first, s->pos, T, NH, KVH, d, window);
    /* rows of sequences behind one cached prefix in tiles: each shared K/V block loaded once */
    long ntiles = attn_tiles(tile, ufirst, first, s->seq, s->pos, s->pt, s->pt_stride, s->ps, T,
                             NH, KVH, window);
    paged_attention_tiles(qkv, nqkv, LP(LF_K_CACHE), LP(LF_V_CACHE), s->pt, s->pt_stride, s->seq,
                          s->pos, s->ps, T, NH, KVH, d, s->scale, window, att, dt, s->kdt, first,
                          tile, ufirst, ntiles, part);
    BARRIER();
    if (attn_needs_merge(first, T, NH, KVH)) {
        paged_attention_merge(T, NH, KVH, d, att, dt, first, part);
        BARRIER();
    }
    /* C */
    stagger();
    x32 = mm_input(att, nq, ts, s);
    team_rows(H, &n0, &n1);
    mm_cols(ly, LF_O_W, LF_O_FMT, -1, x32, o, H, nq, n0, n1, ts, s);
    BARRIER();
    /* D */
    stagger();
    add_rms_norm_rows(ts->res, H, o, H, LP(LF_POST_NORM), ts->h, H, 0, T, H, s->eps, dt);
    x32 = mm_input(ts->h, H, ts, s);
    team_range((I + COL_UNIT - 1) / COL_UNIT, &u0, &u1);
    int j0 = u0 * COL_UNIT, j1 = u1 * COL_UNIT < I ? u1 * COL_UNIT : I;
    if (j0 < j1) {
        mm_cols(ly, LF_GU_W, LF_GU_FMT, LF_GU_PARTS, x32, gu, 2 * I, H, j0, j1, ts, s);
        mm_cols(ly, LF_GU_W, LF_GU_FMT, LF_GU_PARTS, x32, gu, 2 * I, H, I + j0, I + j1, ts, s);
        for (int t = 0; t < T; t++)
            silu_mul_cols(gu, 2 * I, (char *)gu + es * I, 2 * I, act, I, t, j0, j1, dt);
    }
    BARRIER();
    /* E */
    stagger();
    x32 = mm_input(act, I, ts, s);
    team_rows(H, &n0, &n1);
    mm_cols(ly, LF_DOWN_W, LF_DOWN_FMT, -1, x32, mlp, H, I, n0, n1, ts, s);
    BARRIER();
}

/* The layers of ``table`` over res; the last layer's MLP output goes to mlp. One OpenMP parallel
 * region for the whole step (see layer): its threads each own a share of every matmul's rows and
 * meet at a barrier only where one op reads what others wrote. 0, or -1 when out of memory
 * (nothing written then). */
static int decode_layers(const int64_t *table, int L, void *res, void *mlp, const step_dims *dims) {
    step_barrier bar;
    atomic_init(&bar.count, 0);
    atomic_init(&bar.gen, 0);
    step_dims sd = *dims;
    sd.bar = &bar;
    const step_dims *s = &sd;
    int T = s->T, H = s->H, d = s->d, I = s->I, dt = s->dt, th = s->threads < 1 ? 1 : s->threads;
    int nqkv = (s->NH + 2 * s->KVH) * d, nq = s->NH * d, kmax = H;
    size_t es = dt ? 2 : 4;
    if (nq > kmax) kmax = nq;
    if (I > kmax) kmax = I;
    size_t n_h = (size_t)T * H, n_qkv = (size_t)T * nqkv, n_att = (size_t)T * nq;
    size_t n_gu = (size_t)T * 2 * I, n_act = (size_t)T * I;
    size_t nmax = (size_t)nqkv > 2 * (size_t)I ? (size_t)nqkv : 2 * (size_t)I;
    if ((size_t)H > nmax) nmax = H;
    long first[MAX_STEP_ROWS + 1]; /* attention work items: the most (no window) size the partials */
    attn_items(first, s->pos, T, s->NH, s->KVH, d, 0);
    size_t n_part = attn_item_floats(s->NH, s->KVH, d) * (size_t)first[T];
    /* per thread, in floats: res and h (dt), xf, yf, xsum, xdiff (groups of >= 8 columns),
     * xd (blocks of 32), xq (int8) */
    size_t n_rh = (2 * n_h * es + 3) / 4, n_grp = (size_t)T * (kmax / 8 + 1);
    size_t f_thread = n_rh + (size_t)T * (kmax + nmax) + 2 * n_grp + (size_t)T * (kmax / 32 + 1) +
                      ((size_t)T * kmax + 3) / 4 + 16;
    char *ws = (char *)malloc(es * (n_qkv + n_att + n_h + n_gu + n_act) +
                              sizeof(float) * (n_part + f_thread * th));
    thread_scratch *scr = (thread_scratch *)malloc(sizeof(thread_scratch) * th);
    if (!ws || !scr) {
        free(ws);
        free(scr);
        return -1;
    }
    char *qkv = ws, *att = qkv + es * n_qkv, *o = att + es * n_att, *gu = o + es * n_h;
    char *act = gu + es * n_gu;
    float *part = (float *)(act + es * n_act), *thr = part + n_part;
    for (int i = 0; i < th; i++) {
        float *f = thr + f_thread * i;
        scr[i].res = f;
        scr[i].h = (char *)f + es * n_h;
        scr[i].xf = f + n_rh;
        scr[i].yf = scr[i].xf + (size_t)T * kmax;
        scr[i].a.xsum = scr[i].yf + (size_t)T * nmax;
        scr[i].a.xdiff = scr[i].a.xsum + n_grp;
        scr[i].a.xd = scr[i].a.xdiff + n_grp;
        scr[i].a.xq = (int8_t *)(scr[i].a.xd + (size_t)T * (kmax / 32 + 1));
        scr[i].prep_ok = 0;
    }
#if SG_X86
    use_avx2 = sg_use_avx2() && __builtin_cpu_supports("f16c"); /* the quantized kernel's ISA */
    use_vnni = use_avx2 && tile_vnni_supported();
#if SG_HAVE_AMX
    use_amx = use_avx2 && amx_supported(); /* int4 tiles from AMX_MIN_M rows: wide steps */
#endif
#endif
#ifdef _OPENMP
#pragma omp parallel num_threads(th)
#endif
    {
#ifdef _OPENMP
        thread_scratch *ts = scr + omp_get_thread_num();
#else
        thread_scratch *ts = scr;
#endif
        memcpy(ts->res, res, es * n_h); /* res is only read until the end */
        for (int l = 0; l < L; l++)
            layer(table + (size_t)l * LF_COUNT, l == 0, mlp, qkv, att, o, gu, act, part, ts, s);
#ifdef _OPENMP
        if (omp_get_thread_num() == 0)
#endif
            memcpy(res, ts->res, es * n_h); /* after the last barrier: no thread reads res */
    }
    free(scr);
    free(ws);
    return 0;
}

#define NARGS 23
#define PTR(i) ((void *)(intptr_t)v[i])

/* decode_layers(table, L, res, mlp, T, H, NH, KVH, d, I, eps, qk_eps, scale, cos, sin, slots,
 *               pt, pt_stride, seq, pos, page_size, dt, threads); eps, qk_eps and scale are
 * Python floats, the rest ints (pointers as ints) */
static PyObject *py_decode_layers(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long v[NARGS];
    if (sg_get_args(args, nargs, NARGS, v, "decode_layers")) return NULL;
    step_dims s = {
        .T = (int)v[4], .H = (int)v[5], .NH = (int)v[6], .KVH = (int)v[7], .d = (int)v[8],
        .I = (int)v[9], .eps = sg_arg_float(v[10]), .qk_eps = sg_arg_float(v[11]),
        .scale = sg_arg_float(v[12]),
        .cos_t = PTR(13), .sin_t = PTR(14), .slots = (const int64_t *)PTR(15),
        .pt = (const int64_t *)PTR(16), .pt_stride = (long)v[17], .seq = (const int64_t *)PTR(18),
        .pos = (const int64_t *)PTR(19), .ps = (int)v[20], .dt = (int)v[21] & 0xff, .kdt = (int)v[21] >> 8, .threads = (int)v[22],
    };
    if (s.T < 1 || s.T > MAX_STEP_ROWS || s.H < 1 || s.I < 1 || s.d < 2 || s.d % 2 || s.d > MAX_HEAD_DIM
        || s.KVH < 1 || s.NH % s.KVH || (s.dt != 0 && s.dt != 1) || s.ps < 1 || v[1] < 1) {
        PyErr_SetString(PyExc_ValueError, "decode_layers: need 1 <= T <= 64, even head_dim <= 512, "
                                          "heads % kv_heads == 0, dt 0 or 1");
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_layers((const int64_t *)PTR(0), (int)v[1], PTR(2), PTR(3), &s);
    Py_END_ALLOW_THREADS
    if (rc) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* set_stagger(thread, us): the test hook above (us 0: off) */
static PyObject *py_set_stagger(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long v[2];
    if (sg_get_args(args, nargs, 2, v, "set_stagger")) return NULL;
    stagger_thread = (int)v[0];
    stagger_us = v[1] > 0 && v[1] < 1000000 ? (int)v[1] : 0;
    Py_RETURN_NONE;
}

static PyObject *py_set_spin(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long v[1];
    if (sg_get_args(args, nargs, 1, v, "set_spin")) return NULL;
    spin_pauses = v[0] < 0 ? SPIN_PAUSES : v[0] > 100000000 ? 100000000 : (int)v[0];
    Py_RETURN_NONE;
}

/* max_threads(): omp_get_max_threads() of this extension's OpenMP runtime (the process's
 * OMP_NUM_THREADS, else the CPUs the process may run on); 1 without OpenMP. The C kernels'
 * thread count where torch is not loaded (structgen/runtime/cpu/threads.py). */
static PyObject *py_max_threads(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    (void)args;
    if (sg_get_args(args, nargs, 0, NULL, "max_threads")) return NULL;
#ifdef _OPENMP
    return PyLong_FromLong((long)omp_get_max_threads());
#else
    return PyLong_FromLong(1L);
#endif
}

static PyMethodDef methods[] = {
    {"max_threads", (PyCFunction)(void (*)(void))py_max_threads, METH_FASTCALL,
     "max_threads(): omp_get_max_threads() (1 without OpenMP)"},
    {"decode_layers", (PyCFunction)(void (*)(void))py_decode_layers, METH_FASTCALL,
     "decode_layers(table, L, res, mlp, T, H, NH, KVH, d, I, eps, qk_eps, scale, cos, sin, slots, "
     "pt, pt_stride, seq, pos, page_size, dt, threads)"},
    {"set_stagger", (PyCFunction)(void (*)(void))py_set_stagger, METH_FASTCALL,
     "set_stagger(thread, us): tests only; thread `thread` sleeps `us` microseconds at the start "
     "of every phase of a step (0: off)"},
    {"set_spin", (PyCFunction)(void (*)(void))py_set_spin, METH_FASTCALL,
     "set_spin(pauses): benchmarks only; pauses a barrier waiter spins before it yields "
     "(negative: the default, 4000)"},
    SG_ISA_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_decodestep",
                                    "structgen's fused CPU decode step (see csrc/decodestep.c)", -1,
                                    methods};

PyMODINIT_FUNC PyInit__decodestep(void) { return PyModule_Create(&module); }
