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
 * KV cache (0 for an absent bias or q/k norm) and its sliding window (0: none). All tensors
 * in one dtype dt (0 fp32, 1 bf16), row-major and contiguous; the caller
 * (structgen/runtime/cpu/decode_step.py) checks that once per plan.
 *
 * Exposed as structgen.runtime.cpu._decodestep (METH_FASTCALL, raw pointers as ints).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cpuops_core.h"
#include "dense_core.h"
#include "sg_pybind.h"

enum {
    LF_IN_NORM, LF_QKV_W, LF_QKV_B, LF_O_W, LF_O_B, LF_POST_NORM, LF_GU_W, LF_GU_B, LF_DOWN_W,
    LF_DOWN_B, LF_K_CACHE, LF_V_CACHE, LF_Q_NORM, LF_K_NORM, LF_WINDOW, LF_COUNT
};

typedef struct {
    int T, H, NH, KVH, d, I, ps, dt, threads;
    long pt_stride;
    float eps, qk_eps, scale;
    const void *cos_t, *sin_t;
    const int64_t *slots, *pt, *seq, *pos;
} step_dims;

/* y [T, N] = x [T, K] (dt, contiguous) @ w.T (+ b), through the fp32 copy xf when x is bf16 */
static void mm(const void *x, const void *w, const void *b, void *y, int N, int K, float *xf,
               const step_dims *s) {
    dense_mm(x_as_fp32(x, K, s->dt, s->T, K, xf), w, s->dt, b, y, s->T, N, K, s->threads);
}

#define LP(f) ((void *)(intptr_t)ly[f])

/* The layers of ``table`` over res; the last layer's MLP output goes to mlp. 0, or -1 when out
 * of memory (nothing written then). */
static int decode_layers(const int64_t *table, int L, void *res, void *mlp, const step_dims *s) {
    int T = s->T, H = s->H, d = s->d, I = s->I, dt = s->dt, th = s->threads;
    int nqkv = (s->NH + 2 * s->KVH) * d, nq = s->NH * d, kmax = H;
    size_t es = dt ? 2 : 4;
    if (nq > kmax) kmax = nq;
    if (I > kmax) kmax = I;
    size_t n_h = (size_t)T * H, n_qkv = (size_t)T * nqkv, n_att = (size_t)T * nq;
    size_t n_gu = (size_t)T * 2 * I, n_act = (size_t)T * I;
    char *ws = (char *)malloc(es * (2 * n_h + n_qkv + n_att + n_gu + n_act) + sizeof(float) * T * kmax);
    if (!ws) return -1;
    char *h = ws, *o = h + es * n_h, *qkv = o + es * n_h, *att = qkv + es * n_qkv;
    char *gu = att + es * n_att, *act = gu + es * n_gu;
    float *xf = (float *)(act + es * n_act);
    for (int l = 0; l < L; l++) {
        const int64_t *ly = table + (size_t)l * LF_COUNT;
        add_rms_norm(res, H, l ? mlp : NULL, H, LP(LF_IN_NORM), h, H, T, H, s->eps, dt, th);
        mm(h, LP(LF_QKV_W), LP(LF_QKV_B), qkv, nqkv, H, xf, s);
        rope_store_kv(qkv, nqkv, qkv + es * nq, nqkv, qkv + es * (nq + (size_t)s->KVH * d), nqkv,
                      s->cos_t, s->sin_t, LP(LF_Q_NORM), LP(LF_K_NORM), s->qk_eps, LP(LF_K_CACHE),
                      LP(LF_V_CACHE), s->slots, T, s->NH, s->KVH, d, dt, th);
        paged_attention(qkv, nqkv, LP(LF_K_CACHE), LP(LF_V_CACHE), s->pt, s->pt_stride, s->seq,
                        s->pos, s->ps, T, s->NH, s->KVH, d, s->scale, (int)ly[LF_WINDOW], att, dt, th);
        mm(att, LP(LF_O_W), LP(LF_O_B), o, H, nq, xf, s);
        add_rms_norm(res, H, o, H, LP(LF_POST_NORM), h, H, T, H, s->eps, dt, th);
        mm(h, LP(LF_GU_W), LP(LF_GU_B), gu, 2 * I, H, xf, s);
        silu_mul(gu, 2 * I, gu + es * I, 2 * I, act, I, T, I, dt, th);
        mm(act, LP(LF_DOWN_W), LP(LF_DOWN_B), mlp, H, I, xf, s);
    }
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
        .pos = (const int64_t *)PTR(19), .ps = (int)v[20], .dt = (int)v[21], .threads = (int)v[22],
    };
    if (s.T < 1 || s.T > MAX_M || s.H < 1 || s.I < 1 || s.d < 2 || s.d % 2 || s.d > MAX_HEAD_DIM
        || s.KVH < 1 || s.NH % s.KVH || (s.dt != 0 && s.dt != 1) || s.ps < 1 || v[1] < 1) {
        PyErr_SetString(PyExc_ValueError, "decode_layers: need 1 <= T <= 8, even head_dim <= 512, "
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

static PyMethodDef methods[] = {
    {"decode_layers", (PyCFunction)(void (*)(void))py_decode_layers, METH_FASTCALL,
     "decode_layers(table, L, res, mlp, T, H, NH, KVH, d, I, eps, qk_eps, scale, cos, sin, slots, "
     "pt, pt_stride, seq, pos, page_size, dt, threads)"},
    SG_ISA_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_decodestep",
                                    "structgen's fused CPU decode step (see csrc/decodestep.c)", -1,
                                    methods};

PyMODINIT_FUNC PyInit__decodestep(void) { return PyModule_Create(&module); }
