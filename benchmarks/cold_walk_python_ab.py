"""Same-process A/B of the Python around a cold mask's walk: ``TokenIndex._walk`` and
``TokenTrie.walk`` of a baseline checkout (loaded from its files) against this checkout's,
on the recursive schema's grammar states with their rows already built (SmolLM2): what the
wrappers cost a mask apart from first-time row building. Asserts equal masks first.

    PYTHONPATH=. python benchmarks/cold_walk_python_ab.py --baseline /path/to/base [--reps 21]
"""

import argparse
import importlib.util
import json
import statistics as st
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.bench_grammar as bg  # noqa: E402
from benchmarks.cold_ab import _StructgenOf  # noqa: E402
from structgen.fsm.index import token_index as TI  # noqa: E402
from structgen.fsm.index import trie as T  # noqa: E402


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


ap = argparse.ArgumentParser()
ap.add_argument("--baseline", required=True, help="a checkout whose index/*.py is the old side")
ap.add_argument("--reps", type=int, default=21)
args = ap.parse_args()
BT = load("structgen.fsm.index.trie_base", f"{args.baseline}/structgen/fsm/index/trie.py")
BI = load(
    "structgen.fsm.index.token_index_base", f"{args.baseline}/structgen/fsm/index/token_index.py"
)
tok = bg.smollm2_tokenizer()
eng = _StructgenOf("new", "structgen", tok)
case = json.loads(bg.COLD_SCHEMAS.read_text())["recursive"]
ids = tok.encode(json.dumps(case["instance"], separators=(",", ":")), add_special_tokens=False)
buf = torch.zeros((1, eng.words), dtype=torch.int32)
m = eng.compile(case["schema"]).matcher()
states = []
for t in ids:
    states.append(m.state)
    m.fill_bitmask(buf, 0)
    m.advance(t)
idx = m._index
tr = idx._trie
dfa = m._dfa
uniq = list(dict.fromkeys(states))
newW, oldW = T.TokenTrie.walk, BT.TokenTrie.walk
newI, oldI = TI.TokenIndex._walk, BI.TokenIndex._walk


def run(trie_walk, index_walk):
    T.TokenTrie.walk = trie_walk
    TI.TokenIndex._walk = index_walk
    a = time.thread_time_ns()
    for s in uniq:
        for _ in range(20):
            idx._walk(s, None)
    return (time.thread_time_ns() - a) / 20 / len(uniq) / 1000


for s in uniq:  # exactness on these states
    T.TokenTrie.walk, TI.TokenIndex._walk = oldW, oldI
    a = idx._walk(s, None)
    T.TokenTrie.walk, TI.TokenIndex._walk = newW, newI
    b = idx._walk(s, None)
    assert np.array_equal(a, b)
o, n = [], []
for _rep in range(args.reps):
    o.append(run(oldW, oldI))
    n.append(run(newW, newI))
print(
    len(uniq),
    "states; TokenIndex._walk per mask on warm rows: old %.2f us new %.2f us old/new %.3f"
    % (st.median(o), st.median(n), st.median(o) / st.median(n)),
)
print("per-rep ratio median %.3f" % st.median([a / b for a, b in zip(o, n)]))

# this checkout's layers on the same states (rows built): the raw C walk of the whole trie,
# TokenTrie.walk around it, TokenIndex._walk (a split state's head part from the cache) and
# Matcher.fill_bitmask with the state's mask and form dropped (the whole cold-mask path)
T.TokenTrie.walk, TI.TokenIndex._walk = newW, newI
stack = np.empty(tr.max_depth + 1, np.int32)
tabs = T._tables(dfa)
below = tr.subtree_tables


def raw(s):
    mask = np.zeros(idx.num_words, np.int32)
    T._c.walk(tr.byte, tr.depth, tr.skip, tr.token, stack, None, mask, int(s), tabs, below)


def trie_walk(s):
    tr.walk(dfa, s, None, np.zeros(idx.num_words, np.int32))


def fill(s):
    idx._masks.pop(s, None)
    idx.fill_forms.pop(s, None)
    m._history[-1] = (s, False)
    m.fill_bitmask(buf, 0)


layers = {"raw C walk": raw, "TokenTrie.walk": trie_walk}
layers |= {"TokenIndex._walk": lambda s: idx._walk(s, None), "fill_bitmask (cold)": fill}
times = {k: [] for k in layers}
for _rep in range(args.reps):
    for k, f in layers.items():
        a = time.thread_time_ns()
        for s in uniq:
            f(s)
        times[k].append((time.thread_time_ns() - a) / len(uniq) / 1000)
print("| layer (this checkout) | us a mask (median of reps) |\n|---|---|")
for k, v in times.items():
    print(f"| {k} | {st.median(v):.2f} |")
