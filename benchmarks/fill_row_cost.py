"""Where a warm mask write's time goes: ``masks.fill_row`` (``fsm/index/masks.py``, C in
``csrc/tokentrie.c``) per row size, against its fixed part (the call and the tensor checks:
``tensor._version`` and ``tensor.data_ptr()``) and a numpy copy of the same words.

Seeded random dense masks of SmolLM2's row (1,536 words) and the 150k BPE's (4,688 words)
written into a ``[1, words]`` int32 tensor; every variant called ``--calls`` times per round,
interleaved, ``--rounds`` rounds; thread CPU time per call (us), median over the rounds. The
collector is frozen after setup. Each write is checked against the mask first.

    PYTHONPATH=. python benchmarks/fill_row_cost.py [--calls 5000] [--rounds 21]
        [--baseline PATH/_tokentrie.so]

``--baseline``: another build of the extension (say main's ``csrc/tokentrie.c``) loaded beside
this one; its ``fill_row`` is timed on the same tensors, interleaved, and each row says the
ratio this / baseline.
"""

from __future__ import annotations

import argparse
import gc
import importlib.machinery
import importlib.util
import statistics
import time

import numpy as np
import torch

from structgen.fsm.index import masks


def _load(path: str):
    """The ``_tokentrie`` extension module built at ``path`` (a second copy, own name)."""
    loader = importlib.machinery.ExtensionFileLoader("_tokentrie", path)
    spec = importlib.util.spec_from_file_location("_tokentrie", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _variants(words: int, rng, base_fill=None) -> dict:
    """The timed callables for one row size (each checked once against the mask)."""
    mask = rng.integers(1, 2**31 - 1, words, dtype=np.int64).astype(np.int32)
    mask.setflags(write=False)
    form = masks.row_form(mask)
    assert isinstance(form, tuple), "a dense mask's form is (array, address, n)"
    t = torch.zeros((1, words), dtype=torch.int32)
    masks.write(t, 0, None)
    dst = masks.describe(t)
    assert masks.fill_row(dst, t, 0, form) is True
    assert np.array_equal(t[0].numpy(), mask)
    out = t[0].numpy()
    fill = masks.fill_row
    timed = {
        f"fill_row dense, {words} words": lambda: fill(dst, t, 0, form),
        f"fill_row zero row (memset), {words} words": lambda: fill(dst, t, 0, b""),
        f"np.copyto, {words} words": lambda: np.copyto(out, mask),
    }
    if base_fill is not None:
        t.zero_()
        dst = masks.describe(t)  # the version moved
        assert base_fill(dst, t, 0, form) is True and np.array_equal(t[0].numpy(), mask)
        timed[f"baseline fill_row dense, {words} words"] = lambda: base_fill(dst, t, 0, form)
        timed[f"baseline fill_row zero row, {words} words"] = lambda: base_fill(dst, t, 0, b"")
        timed[f"fill_row dense, {words} words"] = lambda: fill(dst, t, 0, form)
        timed[f"fill_row zero row (memset), {words} words"] = lambda: fill(dst, t, 0, b"")
    return timed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--baseline", help="another build of _tokentrie (.so) to time beside")
    args = ap.parse_args()
    base_fill = _load(args.baseline).fill_row if args.baseline else None
    rng = np.random.default_rng(0)
    one = torch.zeros((1, 1), dtype=torch.int32)
    masks.write(one, 0, None)
    one_dst = masks.describe(one)
    fill = masks.fill_row
    timed = {
        "empty lambda (loop overhead)": lambda: None,
        "tensor._version": lambda: one._version,
        "tensor.data_ptr()": lambda: one.data_ptr(),
        "fill_row, 1-word row (call + checks)": lambda: fill(one_dst, one, 0, b""),
    }
    if base_fill is not None:
        assert base_fill(one_dst, one, 0, b"") is True
        timed["baseline fill_row, 1-word row"] = lambda: base_fill(one_dst, one, 0, b"")
    for words in (1536, 4688):
        timed.update(_variants(words, rng, base_fill))
    gc.collect()
    gc.freeze()
    res: dict[str, list[float]] = {k: [] for k in timed}
    for _ in range(args.rounds):
        for key, fn in timed.items():
            t0 = time.thread_time()
            for _ in range(args.calls):
                fn()
            res[key].append((time.thread_time() - t0) / args.calls * 1e6)
    med = {key: statistics.median(v) for key, v in res.items()}
    print("| variant | us per call (median) | this / baseline |\n|---|---|---|")
    pairs = {
        "fill_row, 1-word row (call + checks)": "baseline fill_row, 1-word row",
        **{
            f"fill_row dense, {w} words": f"baseline fill_row dense, {w} words"
            for w in (1536, 4688)
        },
        **{
            f"fill_row zero row (memset), {w} words": f"baseline fill_row zero row, {w} words"
            for w in (1536, 4688)
        },
    }
    for key, v in med.items():
        base = med.get(pairs.get(key, ""))
        print(f"| {key} | {v:.3f} | {f'{v / base:.3f}x' if base else ''} |")


if __name__ == "__main__":
    main()
