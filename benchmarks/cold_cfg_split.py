"""Cold masks of the context-free grammars with and without the shared head parts, same process.

Each grammar of ``bench_grammar.py --grammars`` (``grammar_cfg_mode.py``: its files, its long
valid texts, the first ``MAX_FORCED`` tokens) is compiled afresh and forced token by token
with the lexical cache on (``structgen``: configurations inside a lexeme split on the lexer
state) and off (``structgen-whole``: every first mask walked whole), the two alternated pass
by pass, every cache emptied before each compile. Thread CPU time of the masks, mean per
token, median over the passes; the collector is frozen after the setup (a full collection
over two vocabularies' objects costs ~0.2 s, which otherwise lands on one pass at random).

    PYTHONPATH=. python benchmarks/cold_cfg_split.py [passes]   # passes default to 5
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grammar_cfg_mode import DATA, MAX_FORCED, _Structgen, _StructgenWhole, _valid_texts  # noqa: E402

import benchmarks.bench_grammar as bg  # noqa: E402


def main() -> None:
    passes = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tok = bg.smollm2_tokenizer()
    engines = [_Structgen(tok), _StructgenWhole(tok)]
    gc.collect()
    gc.freeze()
    print("| grammar | structgen us | structgen-whole us | whole / split |\n|---|---|---|---|")
    for name, valid in _valid_texts().items():
        path = DATA / name
        text = path.read_text(encoding="utf-8")
        ids = tok.encode(valid, add_special_tokens=False)[:MAX_FORCED]
        res: dict[str, list[float]] = {e.name: [] for e in engines}
        for p in range(passes):
            for eng in engines if p % 2 == 0 else engines[::-1]:
                g = eng.compile(text, path)
                buf = torch.zeros((1, eng.words), dtype=torch.int32)
                m, total = g.matcher(), 0.0
                for t in ids:
                    t0 = time.thread_time()
                    m.fill_bitmask(buf, 0)
                    total += time.thread_time() - t0
                    if not m.advance(t):
                        raise AssertionError(f"{eng.name} rejected the valid text of {name}")
                res[eng.name].append(total / len(ids) * 1e6)
        split, whole = (statistics.median(res[e.name]) for e in engines)
        print(f"| {name} | {split:.1f} | {whole:.1f} | {whole / split:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
