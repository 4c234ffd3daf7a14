"""Sensitivity of the default (Q8-activation) model's first-token logprobs to a relative
perturbation of 1e-7 of one op's output (the size of a float32 summation-order change).

The packaged model's per-op path on the capital-of-France chat prompt: unperturbed, then layer
``LAYER``'s o_proj output times ``1 + 1e-7 * N(0, 1)`` for 6 seeds, then float32 activations.
See benchmarks/RESULTS.md, "#21: the 8-row int4 tail re-examined".

    PYTHONPATH=. OMP_NUM_THREADS=2 python benchmarks/q8_sensitivity.py [LAYER]
"""

import sys

import torch

from structgen.runtime.loader import load_model
from structgen.runtime.models.testing import PagedSequences
from structgen.runtime.quantization.linear import _set_activation_dtype

loaded = load_model(None, quantization="gguf")
model, tok = loaded.model, loaded.tokenizer
text = tok.apply_chat_template(
    [{"role": "user", "content": "What is the capital of France?"}],
    add_generation_prompt=True,
    tokenize=False,
)
ids = tok(text, add_special_tokens=False).input_ids


def run():
    seq = PagedSequences(model, num_pages=64, page_size=16)
    lp = torch.log_softmax(seq.step({0: ids})[0].double(), -1)
    return lp


base = run()
top = base.topk(3).indices.tolist()
print("base", [(t, round(float(base[t]), 3)) for t in top])
target = model.model.layers[int(sys.argv[1]) if len(sys.argv) > 1 else 0].self_attn.o_proj
orig = target.forward
for seed in range(6):
    g = torch.Generator().manual_seed(seed)

    def f(x, g=g):
        y = orig(x)
        return y * (1 + 1e-7 * torch.randn(y.shape, generator=g))

    target.forward = f
    lp = run()
    print(
        "seed",
        seed,
        [(t, round(float(lp[t]), 3)) for t in top],
        "max|dlogprob|",
        round(float((lp - base).abs().max()), 3),
    )
target.forward = orig
_set_activation_dtype(model, torch.float32)
lp = run()
print(
    "fp32 activations",
    [(t, round(float(lp[t]), 3)) for t in top],
    "max|dlogprob| vs Q8",
    round(float((lp - base).abs().max()), 3),
)
