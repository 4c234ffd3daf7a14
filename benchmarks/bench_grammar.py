"""Grammar engines side by side: structgen vs xgrammar, llguidance, outlines-core.

Same tokenizers (SmolLM2's 49k; a 150k byte-level BPE trained locally with `tokenizers`
on the corpus JSON plus the Python standard library's and installed packages' sources,
cached in ~/.cache/structgen; full mode or --tokenizers bpe150k), same schemas (a seeded sample of
every MaskBench subset in shared/corpora/jsonschemabench/plain), each peer where it imports.

Measured per engine:
  * compile time per schema (median / p90 / max; best of 3, the engines interleaved per
    schema: this host's speed drifts) and time to first mask (first compile's matcher);
  * per-token mask time forcing each valid instance (compact, schema order) token by
    token: warm (second pass, states built) median / p99, cold (first pass) p99;
  * per subset: fraction compiled, valid instances rejected, invalid instances accepted;
  * structgen jump-forward on the valid instances: model steps skipped in a simulated decode
    (pooled over tokens and mean per instance), with allow_extra_properties True and False,
    beside the canonical tokens lying wholly inside forced text for structgen and xgrammar.

Run:  python benchmarks/bench_grammar.py [--quick] [--per-subset 4] [--out benchmarks/RESULTS.md]
      python benchmarks/bench_grammar.py --gbnf-sweep [--gbnf-names json,c] [--tokenizers T]
      (llama.cpp's grammars/*.gbnf, #24: structgen, llguidance, XGrammar)
      python benchmarks/bench_grammar.py --grammars [--cold-engines a,b] [--tokenizers T]
      (context-free grammars: grammar_cfg_mode.py, compile by process CPU time, best of 7,
      collector frozen after setup; structgen-whole, the shared head parts off, when named;
      T: smollm2 (the default in these two modes), bpe150k or both)
      python benchmarks/bench_grammar.py --batch [--batch-size 64] [--batch-threads 2]
      (batch mode: 64 matchers over 64 distinct MaskBench schemas stepping together, cold-empty
      and warm, alone and overlapped with a simulated 5 / 30 ms forward; compile apart)
Cold modes only (issue #22: cold-empty, cold-shared, warm; the five schemas of
benchmarks/data/cold_schemas.json plus the first N MaskBench members per subset):
      python benchmarks/bench_grammar.py --cold [--cold-per-subset 60] [--cold-engines a,b]
      [--cold-clock cpu|wall] (cold modes by CPU time by default: see COLD_CLOCKS)
Peers: pip install xgrammar llguidance outlines-core (optional).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.corpus import canonical  # noqa: E402 - the corpus tests' serialization
from benchmarks.support import smollm2_tokenizer  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpora" / "jsonschemabench" / "plain"


def pct(xs, q):
    return float(np.percentile(xs, q)) if xs else float("nan")


# ---------------------------------------------------------------------------- engines
class Structgen:
    name = "structgen"
    share_lexical = True  # the masks' shared head parts (fsm/index/lexical_masks.py)

    def __init__(self, tok):
        from structgen.fsm import Vocabulary
        from structgen.fsm.index.lexical_masks import LexicalMaskCache

        self.vocab = Vocabulary.from_tokenizer(tok)
        self.words = (self.vocab.vocab_size + 31) // 32
        if not self.share_lexical:
            self.vocab.lexical_masks = LexicalMaskCache(self.vocab, 0, auto_prepare=False)
        # the vocabulary's per-tokenizer tables (token trie and its walk's tables, id tables,
        # the pinned head parts of the JSON string interiors), built lazily by the first
        # schema's masks otherwise: preprocessing, as the peers' TokenizerInfo / LLTokenizer
        # constructors do theirs, timed apart, not per-schema time
        self.vocab.prepare()

    def reset(self):
        """Cold-empty's state before a compile, untimed: the process as setup left it
        (``clear_cache(memos=True)``: no memo of an earlier compile; ``prepare``'s warm-up
        again; ``Vocabulary.clear_tables``: no exit trie or count table an earlier request
        built; the warm-up's grammars freed), so each run of a schema pays that schema's own
        text, class and table work.
        """
        from structgen.fsm import clear_cache

        clear_cache(memos=True)
        self.vocab.clear_tables()
        self.vocab.prepare()
        self.vocab.lexical_masks.clear()
        # free the grammars prepare's warm-up compiled here, untimed: the timed compile's own
        # clear_cache then finds nothing to free (a fresh request frees nothing either)
        clear_cache()

    def compile(self, schema):
        from structgen.fsm import clear_cache, compile_json_schema

        clear_cache()
        self.vocab.lexical_masks.clear()  # cold-empty: no head part an earlier schema stored
        # the spec's reading of a schema silent on additionalProperties (extra keys allowed,
        # as the peers and the corpus tests do): the bench counts spec-valid instances
        return compile_json_schema(schema, self.vocab, strict=False, allow_extra_properties=True)

    def matcher(self, g):
        return g.matcher()

    def mask(self, m, buf):
        m.fill_bitmask(buf, 0)

    def accept(self, m, t):
        return m.advance(t)

    def accepting(self, m):
        return m.is_accepting()


class XGrammar:
    name = "xgrammar"

    def __init__(self, tok):
        import xgrammar as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok))
        self.compiler = xgr.GrammarCompiler(self.info, cache_enabled=False)
        self.words = (self.info.vocab_size + 31) // 32

    def compile(self, schema):
        return self.compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(",", ":")
        )

    def matcher(self, g):
        return self.xgr.GrammarMatcher(g)

    def mask(self, m, buf):
        m.fill_next_token_bitmask(buf, 0)

    def accept(self, m, t):
        return m.accept_token(t)

    def accepting(self, m):
        return m.accept_token(self.info.stop_token_ids[0]) if self.info.stop_token_ids else True


class LLGuidance:
    name = "llguidance"

    def __init__(self, tok):
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(tok)
        self.words = (self.tok.vocab_size + 31) // 32

    def compile(self, schema):
        grm = self.llg.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False}
        )
        m = self.llg.LLMatcher(self.tok, grm)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return grm

    def matcher(self, g):
        return self.llg.LLMatcher(self.tok, g)

    def mask(self, m, buf):
        self.llg.torch.fill_next_token_bitmask(m, buf, 0)

    def accept(self, m, t):
        return m.consume_token(t)

    def accepting(self, m):
        return m.is_accepting()


class OutlinesCore:
    name = "outlines-core"

    def __init__(self, tok):
        import outlines_core

        from structgen.fsm import Vocabulary

        self.oc = outlines_core
        v = Vocabulary.from_tokenizer(tok)
        eos = min(v.eos_token_ids)
        mapping: dict[bytes, list[int]] = {}
        for i, b in enumerate(v.token_bytes):
            if b and i not in v.special_token_ids:
                mapping.setdefault(b, []).append(i)
        self.vocab = outlines_core.Vocabulary(eos, mapping)
        self.eos = eos
        self.words = (v.vocab_size + 31) // 32

    def compile(self, schema):
        from outlines_core.json_schema import build_regex_from_schema

        return self.oc.Index(build_regex_from_schema(json.dumps(schema)), self.vocab)

    def matcher(self, g):
        return self.oc.Guide(g)

    def mask(self, m, buf):
        m.write_mask_into(buf.data_ptr(), buf.numel(), buf.element_size())

    def accept(self, m, t):
        try:
            m.advance(t)
            return True
        except Exception:
            return False

    def accepting(self, m):
        return m.is_finished() or self.eos in m.get_tokens()


class StructgenWhole(Structgen):
    """structgen with the shared head parts off (no entries, nothing pinned): every first
    mask walks the whole token trie; only in ``--cold`` runs that name it in
    ``--cold-engines`` (the before / after of the split in one interleaved run)."""

    name = "structgen-whole"
    share_lexical = False


ENGINES = [Structgen, XGrammar, LLGuidance, OutlinesCore]
COLD_ONLY_ENGINES = [StructgenWhole]


# ---------------------------------------------------------------------------- data
def load_sample(per_subset: int, max_tests: int, seed: int = 0):
    out = []
    for sub in sorted(p.name for p in CORPUS.iterdir() if p.is_dir()):
        files = sorted((CORPUS / sub).glob("*.json"))
        rng = random.Random(f"{seed}:{sub}")
        for f in rng.sample(files, min(per_subset, len(files))):
            d = json.loads(f.read_text())
            # canonical form (issue 3): object keys in schema property order, compact;
            # key order never changes JSON Schema validity, and every engine gets the same text
            tests = [
                (
                    t["valid"],
                    json.dumps(
                        canonical(t["data"], d["schema"], d["schema"]),
                        separators=(",", ":"),
                        ensure_ascii=False,
                    ),
                )
                for t in d.get("tests", [])
            ][:max_tests]
            out.append((sub, f.name, d["schema"], tests))
    return out


BPE_VOCAB = 150_000
BPE_MAX_TOKEN_CHARS = 32  # byte-level chars = bytes; uncapped, runs in the text became 93 kB tokens
BPE_TRAIN_BYTES = 60_000_000  # ~60 s on 2 cores; the corpus JSON alone gave only ~49.7k merges
BPE_SUFFIXES = (".py", ".pyi", ".txt", ".rst", ".md")


def _bpe_sources() -> list[Path]:
    """Training files, in a fixed order: the MaskBench JSON, then the Python standard
    library's sources and text, then the installed packages' under sys.prefix (offline)."""
    import sysconfig

    std = Path(sysconfig.get_paths()["stdlib"])
    out = sorted(CORPUS.rglob("*.json"))
    out += sorted(
        p
        for p in std.rglob("*")
        if "site-packages" not in p.parts and p.suffix in BPE_SUFFIXES and p.is_file()
    )
    out += sorted(
        p for p in Path(sys.prefix).rglob("*") if p.suffix in BPE_SUFFIXES and p.is_file()
    )
    return out


def _bpe_texts(paths: list[Path]):
    total = 0
    for p in paths:
        if total >= BPE_TRAIN_BYTES:
            return
        try:
            text = p.read_bytes()[:1_000_000].decode("utf-8", "ignore")
        except OSError:
            continue
        total += len(text)
        yield text


BPE_CACHE_PREFIX = f"bench_bpe{BPE_VOCAB // 1000}k-"
"""Start of the cached tokenizer files' names (then the sources' key and ``.json``)."""


def bpe_cache_dir() -> Path:
    """Where ``bpe_150k_tokenizer`` caches its trained tokenizer (``$XDG_CACHE_HOME`` or
    ``~/.cache``, then ``structgen``)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "structgen"


def bpe_150k_tokenizer():
    """A 150k-token byte-level BPE trained locally with `tokenizers` (deterministic for a
    given set of files), cached under ~/.cache/structgen keyed by the files and settings;
    ``tok.bench_label`` names its actual vocabulary size and how long training took."""
    import hashlib

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    paths = _bpe_sources()
    key = hashlib.sha256(
        repr(
            (
                BPE_VOCAB,
                BPE_MAX_TOKEN_CHARS,
                BPE_TRAIN_BYTES,
                [(str(p), p.stat().st_size) for p in paths],
            )
        ).encode()
    ).hexdigest()[:16]
    path = bpe_cache_dir() / f"{BPE_CACHE_PREFIX}{key}.json"
    if path.exists():
        tok, how = Tokenizer.from_file(str(path)), f"cached {path.name}"
    else:
        t0 = time.perf_counter()
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=BPE_VOCAB,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            max_token_length=BPE_MAX_TOKEN_CHARS,
            show_progress=False,
        )
        tok.train_from_iterator(_bpe_texts(paths), trainer)
        how = f"trained in {time.perf_counter() - t0:.0f} s"
        path.parent.mkdir(parents=True, exist_ok=True)
        tok.save(str(path))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    longest = max(len(t) for t in tok.get_vocab())
    fast.bench_label = (
        f"byte-level BPE, {len(fast):,} tokens (local; longest {longest} bytes; "
        f"{BPE_TRAIN_BYTES // 10**6} MB of corpus JSON + Python sources; {how})"
    )
    print(fast.bench_label, flush=True)
    return fast


# ---------------------------------------------------------------------------- measuring
def run_engine(eng, tok, sample):
    compile_s, first_mask_s, cold, warm = [], [], [], []
    by_name: dict[str, float] = {}  # schema -> compile s (best_of_interleaved refines it)
    per_sub: dict[str, dict] = {}
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    for sub, name, schema, tests in tqdm(sample, desc=eng.name, leave=False):
        s = per_sub.setdefault(
            sub,
            {
                "schemas": 0,
                "compiled": 0,
                "valid": 0,
                "valid_rej": 0,
                "invalid": 0,
                "invalid_acc": 0,
            },
        )
        s["schemas"] += 1
        try:
            t0 = time.perf_counter()
            g = eng.compile(schema)
            t1 = time.perf_counter()
            m = eng.matcher(g)
            eng.mask(m, buf)
            t2 = time.perf_counter()
        except BaseException as exc:  # peers' Rust panics are BaseExceptions
            if isinstance(exc, KeyboardInterrupt):
                raise
            continue
        s["compiled"] += 1
        compile_s.append(t1 - t0)
        by_name[name] = t1 - t0
        first_mask_s.append(t2 - t1)
        for valid, text in tests:
            ids = tok.encode(text, add_special_tokens=False)
            for timings in (cold, warm) if valid else (None,):
                m = eng.matcher(g)
                ok = True
                for t in ids:
                    t0 = time.perf_counter()
                    eng.mask(m, buf)
                    if timings is not None:
                        timings.append(time.perf_counter() - t0)
                    if not eng.accept(m, t):
                        ok = False
                        break
                ok = ok and eng.accepting(m)
            if valid:
                s["valid"] += 1
                s["valid_rej"] += not ok
            else:
                s["invalid"] += 1
                s["invalid_acc"] += ok
    return {
        "compile": compile_s,
        "compile_by_name": by_name,
        "first_mask": first_mask_s,
        "cold": cold,
        "warm": warm,
        "subsets": per_sub,
    }


def best_of_interleaved(
    engines: dict, sample, results: dict, repeats: int = 3, cap_s: float = 0.2
) -> None:
    """Compile each schema ``repeats - 1`` more times with every engine in turn (per schema:
    A B C D, A B C D) and keep each engine's best time, in ``results[name]["compile"]``.

    This host's speed drifts by up to 1.6x over tens of seconds (the same Python loop takes
    200 or 320 ms of CPU time), and run_engine measures one engine after the other; taking
    the minimum over passes interleaved per schema gives every engine the same phases.
    Engine-schema pairs whose first compile took over ``cap_s`` seconds keep that one time.
    """
    for _sub, name, schema, _tests in tqdm(sample, desc="compile, interleaved", leave=False):
        for _ in range(repeats - 1):
            for eng_name, eng in engines.items():
                times = results[eng_name]["compile_by_name"]
                if name not in times or times[name] > cap_s:
                    continue
                t0 = time.perf_counter()
                try:
                    eng.compile(schema)
                except Exception:  # compiled the first time: a failure now is not timed
                    continue
                times[name] = min(times[name], time.perf_counter() - t0)
    for eng_name in engines:
        results[eng_name]["compile"] = list(results[eng_name]["compile_by_name"].values())


def _forced_tokens(ids, decode, forced_at, advance) -> int | None:
    """How many of the canonical tokens ``ids`` lie wholly inside the text the grammar
    forces where they start (``forced_at()`` before each ``advance``); None if a token is
    refused. Engine-neutral: no planner, no retokenization."""
    n = 0
    for t in ids:
        piece = decode(t)
        if piece and forced_at().startswith(piece):
            n += 1
        if not advance(t):
            return None
    return n


def jump_forward_stats(
    tok, sample, allow_extra_properties: bool = True, xgrammar: bool = True
) -> dict:
    """structgen's jump-forward on the valid instances, in a simulated decode.

    The "model" emits the canonical tokenization of the rest of the instance one token at
    a time; before each model step ``plan_jump_forward`` may append the forced text (as
    the engine does). Per instance: ``model`` steps taken and ``tokens`` (canonical token
    count of the whole instance); skipped = 1 - model / tokens. Only instances the grammar
    accepts and the simulation reproduces exactly are counted.

    Also per instance, engine-neutral: ``forced`` = canonical tokens lying wholly inside
    grammar-forced text (``Matcher.forced_bytes``), and ``xgr_forced`` the same count
    with xgrammar's ``find_jump_forward_string`` (its JSON Schema compile with the bench's
    compact separators and ``strict_mode = not allow_extra_properties``; None where
    xgrammar is not installed, fails to compile or refuses the instance).
    """
    from structgen.fsm import Vocabulary, clear_cache, compile_json_schema
    from structgen.fsm.jump_forward import plan_jump_forward

    vocab = Vocabulary.from_tokenizer(tok)

    def encode(text):
        return tok.encode(text, add_special_tokens=False)

    def piece(t):
        return vocab.decode([t])

    xgr = xcomp = None
    if xgrammar:
        try:
            import xgrammar as xgr

            info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok))
            xcomp = xgr.GrammarCompiler(info, cache_enabled=False)
        except BaseException as exc:  # not installed, or a native failure
            if isinstance(exc, KeyboardInterrupt):
                raise
            xgr = xcomp = None

    rows = []
    for _, name, schema, tests in sample:
        clear_cache()  # one grammar's per-state tables alive at a time (150k vocab: memory)
        try:
            g = compile_json_schema(
                schema, vocab, strict=False, allow_extra_properties=allow_extra_properties
            )
        except Exception:
            continue
        xg = None
        if xcomp is not None:
            try:
                xg = xcomp.compile_json_schema(
                    json.dumps(schema),
                    any_whitespace=False,
                    separators=(",", ":"),
                    strict_mode=not allow_extra_properties,
                )
            except BaseException as exc:  # unsupported keyword, or a native failure
                if isinstance(exc, KeyboardInterrupt):
                    raise
        for valid, text in tests:
            if not valid or not g.matches(text):
                continue
            target = text.encode()
            m, gen = g.matcher(), []
            n_model = 0
            for _ in range(4 * len(target) + 8):
                have = vocab.decode(gen)
                if have == target or m.is_terminated():
                    break
                plan = plan_jump_forward(m, gen, encode, vocab)
                if plan:
                    m.rollback(plan.num_drop)
                    for t in plan.append:
                        m.advance(t)
                    gen = gen[: len(gen) - plan.num_drop] + list(plan.append)
                    continue
                # the "model" emits the canonical token of the rest of the instance
                rest = encode(target[len(have) :].decode("utf-8", "ignore"))
                if not rest or not m.advance(rest[0]):
                    break
                gen.append(rest[0])
                n_model += 1
            if vocab.decode(gen) != target:
                continue
            ids = encode(text)
            m = g.matcher()
            forced = _forced_tokens(ids, piece, m.forced_bytes, m.advance)
            xgr_forced = None
            if xg is not None:
                xm = xgr.GrammarMatcher(xg)
                xgr_forced = _forced_tokens(
                    ids,
                    piece,
                    lambda xm=xm: xm.find_jump_forward_string().encode(),
                    xm.accept_token,
                )
            rows.append(
                {
                    "name": name,
                    "tokens": len(ids),
                    "model": n_model,
                    "forced": forced,
                    "xgr_forced": xgr_forced,
                }
            )
    return {
        "allow_extra_properties": allow_extra_properties,
        "xgrammar": xcomp is not None,
        "rows": rows,
    }


def _rates(rows, key="model", skipped=True):
    """(pooled over tokens, mean per instance) of ``key / tokens`` (1 - that if skipped)."""
    if not rows:
        return float("nan"), float("nan")
    f = (lambda x: 1.0 - x) if skipped else (lambda x: x)
    pooled = f(sum(r[key] for r in rows) / sum(r["tokens"] for r in rows))
    return pooled, statistics.fmean(f(r[key] / r["tokens"]) for r in rows)


def jump_forward_report(stats_list) -> list[str]:
    """Markdown lines: one row per compile setting, then the largest instances."""
    lines = [
        'Jump-forward on the valid instances (structgen). Simulated decode: the "model" emits '
        "the instance's canonical tokens one at a time and `plan_jump_forward` appends forced text "
        "before each step; skipped = 1 - model steps / canonical tokens of the instance. "
        "*pooled* divides the totals (long instances weigh more), *mean* averages per instance. "
        "*forced tokens* (no planner; the same count for both engines): canonical tokens lying "
        "wholly inside the text the grammar forces where they start (structgen "
        "`Matcher.forced_bytes`, xgrammar `find_jump_forward_string` with `strict_mode` = "
        "not allow_extra_properties), on the instances both accept.",
        "",
        "| compile | instances | tokens | skipped pooled | skipped mean | forced tokens structgen "
        "pooled / mean | forced tokens xgrammar pooled / mean |",
        "|---|---|---|---|---|---|---|",
    ]
    for st in stats_list:
        rows = st["rows"]
        label = (
            "allow_extra_properties=True (spec reading, this bench's compile)"
            if st["allow_extra_properties"]
            else "allow_extra_properties=False (Engine.extract, server strict mode)"
        )
        pooled, mean = _rates(rows)
        both = [r for r in rows if r["forced"] is not None and r["xgr_forced"] is not None]
        if st["xgrammar"]:
            sp, sm = _rates(both, "forced", skipped=False)
            xp, xm = _rates(both, "xgr_forced", skipped=False)
            sg = f"{sp:.1%} / {sm:.1%}"
            xg = f"{xp:.1%} / {xm:.1%}"
            if len(both) < len(rows):
                xg += f" ({len(both)} of {len(rows)} instances)"
        else:
            sp, sm = _rates([r for r in rows if r["forced"] is not None], "forced", skipped=False)
            sg, xg = f"{sp:.1%} / {sm:.1%}", "n/a (xgrammar not installed)"
        lines.append(
            f"| {label} | {len(rows)} | {sum(r['tokens'] for r in rows)} | {pooled:.1%} "
            f"| {mean:.1%} | {sg} | {xg} |"
        )
    rows = stats_list[0]["rows"] if stats_list else []
    if rows:
        total = sum(r["tokens"] for r in rows)
        big = sorted(rows, key=lambda r: -r["tokens"])[:3]
        lines += [
            "",
            "Largest instances (their share of the pooled tokens): "
            + "; ".join(
                f"{r['name']} {r['tokens']} tokens ({r['tokens'] / total:.0%}), "
                f"{1 - r['model'] / r['tokens']:.0%} skipped"
                for r in big
            )
            + ".",
        ]
    return lines


def summarize(label, results, jf):
    lines = [
        f"### Tokenizer: {label}",
        "",
        "| engine | compile p50 ms | p90 | max | first mask ms | mask warm p50 us | warm p99 us "
        "| cold p99 us | compiled | valid rejected | invalid accepted | warm p50 vs structgen |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = pct(results["structgen"]["warm"], 50) if "structgen" in results else float("nan")
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | n/a: {r['error'][:60]} |" + " |" * 10)
            continue
        subs = r["subsets"].values()
        n = sum(s["schemas"] for s in subs)
        comp = sum(s["compiled"] for s in subs)
        vr = sum(s["valid_rej"] for s in subs)
        va = sum(s["valid"] for s in subs)
        ia = sum(s["invalid_acc"] for s in subs)
        iv = sum(s["invalid"] for s in subs)
        w50 = pct(r["warm"], 50) * 1e6
        lines.append(
            f"| {name} | {pct(r['compile'], 50) * 1e3:.1f} | {pct(r['compile'], 90) * 1e3:.1f} | "
            f"{max(r['compile'], default=float('nan')) * 1e3:.1f} | "
            f"{pct(r['first_mask'], 50) * 1e3:.2f} | "
            f"{w50:.1f} | {pct(r['warm'], 99) * 1e6:.1f} | {pct(r['cold'], 99) * 1e6:.1f} | "
            f"{comp}/{n} | {vr}/{va} | {ia}/{iv} | {w50 / (base * 1e6):.2f}x |"
        )
    lines += [
        "",
        "Per subset (compiled / valid rejected / invalid accepted):",
        "",
        "| subset | " + " | ".join(k for k in results if "error" not in results[k]) + " |",
        "|---|" + "---|" * sum("error" not in r for r in results.values()),
    ]
    subsets = sorted({s for r in results.values() if "error" not in r for s in r["subsets"]})
    for sub in subsets:
        cells = []
        for r in results.values():
            if "error" in r:
                continue
            s = r["subsets"].get(sub, {})
            cells.append(
                f"{s.get('compiled', 0)}/{s.get('schemas', 0)} · {s.get('valid_rej', 0)}/"
                f"{s.get('valid', 0)} · {s.get('invalid_acc', 0)}/{s.get('invalid', 0)}"
            )
        lines.append(f"| {sub} | " + " | ".join(cells) + " |")
    lines += [""] + jump_forward_report(jf) + [""]
    return "\n".join(lines)


def plot(all_results, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: plot skipped"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    engines = list(dict.fromkeys(n for r in all_results.values() for n in r if "error" not in r[n]))
    width = 0.8 / max(len(all_results), 1)
    for k, (label, results) in enumerate(all_results.items()):
        xs = [i + (k - (len(all_results) - 1) / 2) * width for i in range(len(engines))]
        short = label.split(" (")[0]  # the tokenizer, without its provenance
        for ax, key, scale in ((axes[0], "compile", 1e3), (axes[1], "warm", 1e6)):
            vals = [
                pct(results[n][key], 50) * scale
                if n in results and "error" not in results[n]
                else 0
                for n in engines
            ]
            ax.bar(xs, vals, width, label=short)
    axes[0].set_ylabel("compile p50 (ms)")
    axes[1].set_ylabel("warm mask p50 (us)")
    for ax in axes:
        ax.set_yscale("log")
        ax.set_xticks(range(len(engines)), engines)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return f"plot: {path.name}"


# ---------------------------------------------------------------------------- batch mode
# 64 matchers over 64 distinct MaskBench schemas (the --sample set of bench_maskbench.py)
# stepping together: per step, fill_bitmask of every active row plus each row's advance
# along its schema's first valid instance (canonical tokens). Compile is timed apart.
BATCH_SIZE = 64
BATCH_FORWARDS_S = (0.005, 0.030)  # the simulated forwards (time.sleep: the CPU stays free)
BATCH_THREADS = 2


class BatchStructgen:
    """structgen's ``fill_bitmask_batch``: serially (``threads=0``) or on a GrammarPool."""

    def __init__(self, tok, threads: int):
        from structgen.fsm.grammar_pool import GrammarPool

        self.base = Structgen(tok)
        self.words = self.base.words
        self.pool = GrammarPool(threads) if threads else None
        self.name = f"structgen (pool {threads})" if threads else "structgen (serial)"

    def compile_all(self, schemas):
        from structgen.fsm import clear_cache, compile_json_schema

        clear_cache()  # cold-empty: nothing cached from an earlier schema or run
        self.base.vocab.lexical_masks.clear()
        return [
            compile_json_schema(s, self.base.vocab, strict=False, allow_extra_properties=True)
            for s in schemas
        ]

    def matchers(self, grammars):
        return [g.matcher() for g in grammars]

    def fill(self, matchers, bitmask, rows):
        from structgen.fsm import BaseMatcher

        errors = BaseMatcher.fill_bitmask_batch(matchers, bitmask, rows, pool=self.pool)
        assert not any(errors), errors

    def advance(self, m, t):
        return m.advance(t)

    def reset(self, m):
        m.reset()


class BatchXGrammar:
    """XGrammar's ``BatchGrammarMatcher.batch_fill_next_token_bitmask`` (its threads)."""

    def __init__(self, tok, threads: int):
        self.base = XGrammar(tok)
        self.words = self.base.words
        self.batch = self.base.xgr.BatchGrammarMatcher(max_threads=threads)
        self.name = f"xgrammar (batch, {threads} threads)"

    def compile_all(self, schemas):
        return [self.base.compile(s) for s in schemas]

    def matchers(self, grammars):
        return [self.base.matcher(g) for g in grammars]

    def fill(self, matchers, bitmask, rows):
        self.batch.batch_fill_next_token_bitmask(matchers, bitmask, rows)

    def advance(self, m, t):
        return m.accept_token(t)

    def reset(self, m):
        m.reset()


class BatchLLGuidance:
    """llguidance's ``fill_next_token_bitmask_par`` over an ``LLExecutor``."""

    def __init__(self, tok, threads: int):
        import llguidance.torch

        self.base = LLGuidance(tok)
        self.words = self.base.words
        self.executor = self.base.llg.LLExecutor(num_threads=threads)
        self.fill_par = llguidance.torch.fill_next_token_bitmask_par
        self.name = f"llguidance (par, {threads} threads)"

    def compile_all(self, schemas):
        grammars = [
            self.base.llg.LLMatcher.grammar_from_json_schema(
                s, defaults={"whitespace_flexible": False}
            )
            for s in schemas
        ]
        return grammars

    def matchers(self, grammars):
        return [self.base.matcher(g) for g in grammars]  # a matcher builds its parser: cold

    def fill(self, matchers, bitmask, rows):
        self.fill_par(self.executor, list(zip(matchers, rows)), bitmask)

    def advance(self, m, t):
        return m.consume_token(t)

    def reset(self, m):
        m.reset()


def batch_engines(tok, threads: int = BATCH_THREADS) -> list:
    """The batch adapters that import here (a peer missing: left out, named on stderr)."""
    makers = [
        lambda: BatchStructgen(tok, 0),
        lambda: BatchStructgen(tok, threads),
        lambda: BatchXGrammar(tok, threads),
        lambda: BatchLLGuidance(tok, threads),
    ]
    out = []
    for make in makers:
        try:
            out.append(make())
        except Exception as exc:  # noqa: BLE001 - a peer not installed or incompatible
            print(f"batch: peer left out: {type(exc).__name__}: {exc}", file=sys.stderr)
    return out


def load_batch_items(tok, n: int = BATCH_SIZE, seed: int = 0) -> list[tuple[str, dict, list]]:
    """``(name, schema, canonical token ids of its first valid instance)`` of ``n`` distinct
    schemas of bench_maskbench's --sample set (first 60 members per subset), in a seeded
    order, keeping those structgen, XGrammar and llguidance all compile and whose instance
    every engine that imports accepts token by token.
    """
    import bench_maskbench as mb

    docs = []
    for sub, name, raw in mb.iter_corpus(mb.subsets_on_disk(), mb.SAMPLE_PER_SUBSET):
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        valid = [text for ok, text in mb.canonical_tests(doc) if ok]
        if valid and isinstance(doc.get("schema"), dict):
            docs.append((f"{sub}/{name}", doc["schema"], valid[0]))
    random.Random(seed).shuffle(docs)
    engines = [e for e in (Structgen, XGrammar, LLGuidance) if _imports(e, tok)]
    engines = [e(tok) for e in engines]
    seen, items = set(), []
    for name, schema, text in docs:
        key = json.dumps(schema, sort_keys=True)
        if key in seen:
            continue
        ids = tok.encode(text, add_special_tokens=False)
        if not ids or not all(_forces(e, schema, ids) for e in engines):
            continue
        seen.add(key)
        items.append((name, schema, ids))
        if len(items) == n:
            break
    return items


def _imports(cls, tok) -> bool:
    try:
        cls(tok)
        return True
    except Exception:  # noqa: BLE001 - not installed
        return False


def _forces(eng, schema, ids) -> bool:
    """True when ``eng`` compiles ``schema`` and accepts ``ids`` one by one."""
    try:
        m = eng.matcher(eng.compile(schema))
        return all(eng.accept(m, t) for t in ids)
    except BaseException as exc:  # noqa: BLE001 - a compile error or a Rust panic
        if isinstance(exc, KeyboardInterrupt):
            raise
        return False


def run_batch(eng, items, forward_s: float | None = None, warm: dict | None = None) -> dict:
    """Step ``eng``'s matchers over ``items`` together; per-step seconds.

    Without ``forward_s``: a step is the fill of every active row plus their advances. With
    it: the fill runs on a thread (structgen's: its GrammarPool) while the main thread
    sleeps ``forward_s`` (the forward), then the advances; the step's wall time is
    reported. ``warm``: an earlier result of the same engine, whose matchers are reset and
    stepped again (states built); else everything is compiled afresh (cold-empty).
    """
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.perf_counter()
    if warm is None:
        grammars = eng.compile_all([s for _, s, _ in items])
        compile_s = time.perf_counter() - t0
        matchers = eng.matchers(grammars)
    else:
        grammars, matchers, compile_s = warm["grammars"], warm["matchers"], 0.0
        for m in matchers:
            eng.reset(m)
    matcher_s = time.perf_counter() - t0 - compile_s
    bitmask = torch.zeros((len(items), eng.words), dtype=torch.int32)
    paths = [ids for _, _, ids in items]
    pos = [0] * len(items)
    steps, rejected = [], 0
    side = ThreadPoolExecutor(1) if forward_s is not None else None
    submit = getattr(getattr(eng, "pool", None), "submit", None) if side else None
    while True:
        active = [i for i in range(len(items)) if pos[i] < len(paths[i])]
        if not active:
            break
        ms = [matchers[i] for i in active]
        t = time.perf_counter()
        if forward_s is None:
            eng.fill(ms, bitmask, active)
        else:
            job = (submit or side.submit)(eng.fill, ms, bitmask, active)
            time.sleep(forward_s)
            job.result()
        for i in active:
            if not eng.advance(matchers[i], paths[i][pos[i]]):
                rejected += 1
                pos[i] = len(paths[i])
            else:
                pos[i] += 1
        steps.append(time.perf_counter() - t)
    if side is not None:
        side.shutdown()
    return {
        "grammars": grammars,
        "matchers": matchers,
        "compile_s": compile_s,
        "matcher_s": matcher_s,
        "steps": steps,
        "rejected": rejected,
    }


def batch_benchmark(tok, n: int = BATCH_SIZE, threads: int = BATCH_THREADS) -> dict:
    """Every batch adapter over the same items: cold-empty, warm and overlapped steps,
    the engines interleaved per mode (this host's speed drifts)."""
    items = load_batch_items(tok, n)
    engines = batch_engines(tok, threads)
    results = {e.name: {} for e in engines}
    for e in engines:
        results[e.name]["cold"] = run_batch(e, items)
    for e in engines:
        results[e.name]["warm"] = run_batch(e, items, warm=results[e.name]["cold"])
    sleeps: dict[float, list[float]] = {f: [] for f in BATCH_FORWARDS_S}
    for f in BATCH_FORWARDS_S:
        for e in engines:  # overlapped with a forward, cold-empty and warm
            r = results[e.name]
            r[f"cold+{f}"] = run_batch(e, items, forward_s=f)
            sleeps[f] += _sleep_steps(f, 20)  # the forward alone, between the engines
            r[f"warm+{f}"] = run_batch(e, items, forward_s=f, warm=r["cold"])
    for e in engines:
        pool = getattr(e, "pool", None)
        if pool is not None:
            pool.close()
    return {"items": items, "results": results, "threads": threads, "sleeps": sleeps}


def _sleep_steps(forward_s: float, n: int) -> list[float]:
    """Wall seconds of ``n`` bare ``time.sleep(forward_s)`` steps: the forward without
    grammar work (a loaded host oversleeps; the overlap's cost is measured against this)."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        time.sleep(forward_s)
        out.append(time.perf_counter() - t)
    return out


def batch_summary(label: str, bench: dict) -> str:
    """Markdown: per-step grammar ms (mean / p99) cold-empty and warm, and the overlap's
    added share of a 5 ms and 30 ms forward."""
    items, results = bench["items"], bench["results"]
    lens = [len(ids) for _, _, ids in items]
    ms = lambda xs: 1e3 * statistics.fmean(xs) if xs else float("nan")  # noqa: E731
    lines = [
        f"### Batch: {len(items)} distinct MaskBench --sample schemas, {label}",
        "",
        f"Instance tokens per row: median {statistics.median(lens):.0f}, max {max(lens)} "
        f"(steps = the longest; rows drop out as their instance ends). Grammar threads: "
        f"{bench['threads']}. Added to a forward: overlapped step wall time over the bare "
        f"sleep's in the same run (5 ms sleeps took {ms(bench['sleeps'][0.005]):.2f} ms, "
        f"30 ms took {ms(bench['sleeps'][0.03]):.2f} ms).",
        "",
        "| engine | compile all ms | cold step ms mean / p99 | warm step ms mean / p99 | "
        "cold vs structgen serial | "
        + " | ".join(f"added to {1e3 * f:.0f} ms fwd (cold / warm)" for f in BATCH_FORWARDS_S)
        + " | rejected |",
        "|---|---|---|---|---|" + "---|" * len(BATCH_FORWARDS_S) + "---|",
    ]
    ref = results.get("structgen (serial)", {}).get("cold")
    for name, r in results.items():
        cold, warm = r["cold"]["steps"], r["warm"]["steps"]
        added = []
        for f in BATCH_FORWARDS_S:
            alone = ms(bench["sleeps"][f])
            a = [(ms(r[f"{k}+{f}"]["steps"]) - alone) / alone for k in ("cold", "warm")]
            added.append(f"{100 * a[0]:+.1f}% / {100 * a[1]:+.1f}%")
        ratio = ms(cold) / ms(ref["steps"]) if ref else float("nan")
        lines.append(
            f"| {name} | {1e3 * (r['cold']['compile_s'] + r['cold']['matcher_s']):.0f} | "
            f"{ms(cold):.2f} / {1e3 * pct(cold, 99):.2f} | {ms(warm):.3f} / "
            f"{1e3 * pct(warm, 99):.3f} | {ratio:.2f}x | " + " | ".join(added) + " | "
            f"{r['cold']['rejected'] + r['warm']['rejected']} |"
        )
    lines.append("")
    return "\n".join(lines)


def batch_plot(label: str, bench: dict, path: Path) -> str:
    """Bars: cold and warm per-step ms per engine (log scale); returns a markdown image line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = bench["results"]
    names = list(results)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(9, 4))
    for mode, off in (("cold", -0.2), ("warm", 0.2)):
        vals = [1e3 * statistics.fmean(results[n][mode]["steps"]) for n in names]
        ax.bar(x + off, vals, 0.4, label=f"{mode} step mean")
    ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=15, fontsize=8)
    ax.set_ylabel("ms per step (64 rows: fills + advances)")
    ax.set_title(f"Batch of {len(bench['items'])} distinct schemas, {label}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"![batch]({path.name})"


def main_batch(args) -> None:
    """--batch: the batch table for SmolLM2 (49k), appended to ``args.out``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    tok = smollm2_tokenizer()
    label = "SmolLM2 49k"
    bench = batch_benchmark(tok, args.batch_size, args.batch_threads)
    table = batch_summary(label, bench)
    note = batch_plot(label, bench, args.out.with_name("bench_grammar_batch.png"))
    cmd = "python benchmarks/bench_grammar.py " + " ".join(sys.argv[1:])
    text = (
        f"## Grammar batch mode ({time.strftime('%Y-%m-%d')})\n\n"
        f"Command: `{cmd.strip()}`\n\n"
        f"Load average at the end (1/5/15 min, 2 shared cores): "
        f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())}\n\n{table}\n{note}\n"
    )
    print(text)
    with open(args.out, "a") as f:
        f.write("\n" + text)


# ---------------------------------------------------------------------------- cold modes
COLD_SCHEMAS = ROOT / "benchmarks" / "data" / "cold_schemas.json"
COLD_MODES = ("cold-empty", "cold-shared", "warm")


def cold_cases(per_subset: int) -> list[tuple[str, object, str]]:
    """``(label, schema, instance text)``: the five schemas of ``data/cold_schemas.json``,
    then the first ``per_subset`` MaskBench archive members of each subset (the ``--sample``
    set at 60; bench_maskbench's reader and canonical form) with their first valid test."""
    from benchmarks.bench_maskbench import canonical_tests, iter_corpus, subsets_on_disk

    out = [
        (name, case["schema"], json.dumps(case["instance"], separators=(",", ":")))
        for name, case in json.loads(COLD_SCHEMAS.read_text()).items()
    ]
    for sub, name, raw in iter_corpus(subsets_on_disk() if per_subset else [], per_subset):
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        valid = [text for ok, text in canonical_tests(doc) if ok]
        if valid and isinstance(doc.get("schema"), (dict, bool)):
            out.append((f"{sub}/{name}", doc["schema"], valid[0]))
    return out


class _Fresh:
    """An engine's grammar for one cold mode: ``cold-empty`` compiles with every cache of the
    engine emptied first (structgen: ``Structgen.reset``, untimed: its per-process memos
    back to what setup left, then ``clear_cache``; xgrammar: cache off; llguidance and
    outlines-core keep none between grammars); ``cold-shared`` keeps the caches (structgen's
    compile cache and xgrammar's compiler cache on)."""

    def __init__(self, eng, mode: str):
        self.eng, self.mode = eng, mode
        self.shared = None
        if mode == "cold-shared" and eng.name == "xgrammar":
            self.shared = eng.xgr.GrammarCompiler(eng.info, cache_enabled=True)

    def compile(self, schema):
        eng = self.eng
        if self.mode == "cold-shared" and eng.name.startswith("structgen"):
            from structgen.fsm import compile_json_schema

            return compile_json_schema(schema, eng.vocab, strict=False, allow_extra_properties=True)
        if self.shared is not None:
            return self.shared.compile_json_schema(
                json.dumps(schema), any_whitespace=False, separators=(",", ":")
            )
        return eng.compile(schema)


def force_instance(eng, g, ids, buf, clock=time.perf_counter) -> tuple[list[float], float, bool]:
    """(seconds of each ``fill_bitmask``, seconds of all advances, accepted) forcing the token
    ids ``ids`` through a new matcher of ``g``, a mask before every token, timed by ``clock``."""
    m = eng.matcher(g)
    masks, adv = [], 0.0
    for t in ids:
        t0 = clock()
        eng.mask(m, buf)
        t1 = clock()
        ok = eng.accept(m, t)
        adv += clock() - t1
        masks.append(t1 - t0)
        if not ok:
            return masks, adv, False
    return masks, adv, bool(eng.accepting(m))


# (compile clock, mask and advance clock) of the cold modes: "cpu" (the default) takes process
# CPU for a compile (xgrammar compiles on threads) and this thread's CPU for the masks and
# advances, as cold_ab.py does: on shared, loaded cores the wall clock adds every preemption
# (several ms) to the token it lands in. "wall": perf_counter for both. Warm is timed by the
# wall clock either way (a CPU-clock read costs about as much as a warm mask).
COLD_CLOCKS = {
    "cpu": (time.process_time, time.thread_time),
    "wall": (time.perf_counter, time.perf_counter),
}


def cold_run(
    engines: dict, tok, cases, repeats: int = 3, seed: int = 0, clock: str = "cpu"
) -> dict:
    """Every engine on every case in each mode, the engines interleaved per case, the cold
    modes timed by ``COLD_CLOCKS[clock]``.

    Returns ``{mode: {engine: {label: record}}}``, a record holding the per-token mask times
    (median run of ``repeats`` for the five schemas, one run for the rest), the compile, all
    masks and all advances of the request (s), and whether the instance was accepted.
    cold-shared runs the cases in a seeded shuffled order after the others with caches kept;
    warm forces the same instance again through the grammar compiled for cold-empty.
    """
    out = {mode: {n: {} for n in engines} for mode in COLD_MODES}
    order = {"cold-empty": list(range(len(cases)))}
    shuffled = list(range(len(cases)))
    random.Random(seed).shuffle(shuffled)
    order["cold-shared"] = shuffled
    fresh = {mode: {n: _Fresh(e, mode) for n, e in engines.items()} for mode in order}
    bufs = {n: torch.zeros((1, e.words), dtype=torch.int32) for n, e in engines.items()}
    compile_clock, mask_clock = COLD_CLOCKS[clock]
    for mode in ("cold-empty", "cold-shared"):
        if mode == "cold-shared":  # it starts from setup's state and keeps what it builds
            for eng in engines.values():
                if hasattr(eng, "reset"):
                    eng.reset()
        for i in tqdm(order[mode], desc=mode, leave=False):
            label, schema, text = cases[i]
            ids = tok.encode(text, add_special_tokens=False)
            runs = repeats if i < 5 and mode == "cold-empty" else 1
            for name, eng in engines.items():
                tries = []
                for _ in range(runs):
                    if mode == "cold-empty" and hasattr(eng, "reset"):
                        eng.reset()  # the process as setup left it (untimed)
                    try:
                        t0 = compile_clock()
                        g = fresh[mode][name].compile(schema)
                        comp = compile_clock() - t0
                        masks, adv, ok = force_instance(eng, g, ids, bufs[name], mask_clock)
                    except BaseException as exc:  # peers' Rust panics are BaseExceptions
                        if isinstance(exc, KeyboardInterrupt):
                            raise
                        break
                    total = comp + sum(masks) + adv
                    tries.append((total, comp, masks, adv, ok, g))
                if not tries:
                    continue
                total, comp, masks, adv, ok, g = sorted(tries, key=lambda r: r[0])[len(tries) // 2]
                out[mode][name][label] = {
                    "masks": masks,
                    "compile": comp,
                    "advance": adv,
                    "total": total,
                    "ok": ok,
                }
                if mode == "cold-empty":  # warm: the same grammar, its states visited
                    wm, wadv, wok = force_instance(eng, g, ids, bufs[name])
                    out["warm"][name][label] = {
                        "masks": wm,
                        "compile": 0.0,
                        "advance": wadv,
                        "total": sum(wm) + wadv,
                        "ok": wok,
                    }
    return out


def _common(per_engine: dict, labels) -> list[str]:
    """Labels every engine ran and accepted."""
    return [lb for lb in labels if all(lb in r and r[lb]["ok"] for r in per_engine.values())]


def cold_report(
    label: str, res: dict, cases, setup_s: dict, clock: str = "cpu"
) -> tuple[list[str], dict]:
    """Markdown tables of ``cold_run``'s result, and the figures the plot draws."""
    names = list(res["cold-empty"])
    five = [c[0] for c in cases[:5]]
    lines = [f"### {label}: cold modes", ""]
    lines.append(
        "Per-tokenizer preprocessing (timed apart, once, wall clock): "
        + ", ".join(f"{n} {setup_s[n]:.2f} s" for n in names)
    )
    timed = (
        "process CPU for compiles, thread CPU for masks and advances"
        if clock == "cpu"
        else "wall clock"
    )
    lines.append("")
    lines.append(
        f"Cold modes timed by {timed}; warm by the wall clock; the collector frozen after setup."
    )
    lines.append("")
    head = (
        "| schema (tokens) | mode | "
        + " | ".join(f"{n} mean / median / p99 us, total ms" for n in names)
        + " |"
    )
    lines += [head, "|" + "---|" * (2 + len(names))]
    fig = {}
    for mode in COLD_MODES:
        for lb in five:
            cells = []
            for n in names:
                r = res[mode][n].get(lb)
                if r is None or not r["masks"]:
                    cells.append("-")
                    continue
                us = np.array(r["masks"]) * 1e6
                flag = "" if r["ok"] else " (rejected)"
                cells.append(
                    f"{us.mean():.1f} / {np.median(us):.1f} / {np.percentile(us, 99):.0f}, "
                    f"{r['total'] * 1e3:.2f}{flag}"
                )
                fig.setdefault(mode, {}).setdefault(n, {})[lb] = float(us.mean())
            ntok = len(
                next((r for r in (res[mode][n].get(lb) for n in names) if r), {"masks": []})[
                    "masks"
                ]
            )
            lines.append(f"| {lb} ({ntok}) | {mode} | " + " | ".join(cells) + " |")
    sample = [c[0] for c in cases[5:]]
    if sample:
        lines += [
            "",
            f"MaskBench sample ({len(sample)} schemas with a valid instance; figures over "
            "the schemas every engine compiled and accepted):",
            "",
        ]
        lines += [
            "| mode | schemas | "
            + " | ".join(
                f"{n} median of per-schema mean us / pooled p99 us / median total ms" for n in names
            )
            + " |",
            "|" + "---|" * (2 + len(names)),
        ]
        for mode in COLD_MODES:
            common = _common(res[mode], sample)
            cells = []
            for n in names:
                rs = [res[mode][n][lb] for lb in common]
                if not rs:
                    cells.append("-")
                    continue
                means = [np.mean(r["masks"]) * 1e6 for r in rs if r["masks"]]
                pooled = np.concatenate([r["masks"] for r in rs]) * 1e6
                cells.append(
                    f"{np.median(means):.1f} / {np.percentile(pooled, 99):.0f} / "
                    f"{np.median([r['total'] for r in rs]) * 1e3:.2f}"
                )
                fig.setdefault(mode, {}).setdefault(n, {})["sample median"] = float(
                    np.median(means)
                )
            lines.append(f"| {mode} | {len(common)} | " + " | ".join(cells) + " |")
        handled = {
            n: sum(lb in res["cold-empty"][n] and res["cold-empty"][n][lb]["ok"] for lb in sample)
            for n in names
        }
        lines += [
            "",
            "Sample schemas compiled and accepted per engine (cold-empty): "
            + ", ".join(f"{n} {k}" for n, k in handled.items()),
        ]
    return lines, fig


def cold_plot(figs: dict, path: Path) -> str:
    """Cold-empty per-token mean per schema and engine, one panel per tokenizer (log scale)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: plot skipped"
    fig, axes = plt.subplots(1, len(figs), figsize=(6.5 * len(figs), 4.2), squeeze=False)
    for ax, (label, f) in zip(axes[0], figs.items()):
        data = f.get("cold-empty", {})
        names = list(data)
        schemas = list(dict.fromkeys(s for d in data.values() for s in d))
        width = 0.8 / max(len(names), 1)
        for k, n in enumerate(names):
            xs = [i + (k - (len(names) - 1) / 2) * width for i in range(len(schemas))]
            ax.bar(xs, [data[n].get(s, 0) for s in schemas], width, label=n)
        ax.set_xticks(range(len(schemas)), schemas, rotation=20, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("cold-empty mask mean (us per token)")
        ax.set_title(label.split(" (")[0], fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return f"plot: {path.name}"


def cold_main(args, toks: dict) -> str:
    """The ``--cold`` run: every tokenizer, every engine, the three cold modes."""
    cases = cold_cases(args.cold_per_subset)
    report, figs = [], {}
    for label, make in toks.items():
        tok = make()
        label = getattr(tok, "bench_label", label)
        engines, setup_s = {}, {}
        for cls in ENGINES + COLD_ONLY_ENGINES:
            wanted = args.cold_engines.split(",") if args.cold_engines else None
            if (wanted or cls in COLD_ONLY_ENGINES) and cls.name not in (wanted or ()):
                continue
            try:
                t0 = time.perf_counter()
                engines[cls.name] = cls(tok)
                setup_s[cls.name] = time.perf_counter() - t0
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                print(f"{cls.name}: {type(exc).__name__}: {exc}", flush=True)
        gc.collect()  # what setup made is long-lived: no collection walks it per schema
        gc.freeze()
        res = cold_run(engines, tok, cases, clock=args.cold_clock)
        lines, figs[label] = cold_report(label, res, cases, setup_s, args.cold_clock)
        gc.unfreeze()
        report += lines + [""]
        print("\n".join(lines), flush=True)
    note = cold_plot(figs, args.out.with_name("bench_grammar_cold.png"))
    return "\n".join(report) + f"\n{note}\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 schemas per subset, SmolLM2 only")
    ap.add_argument(
        "--tokenizers",
        choices=["smollm2", "bpe150k", "both"],
        default=None,
        help="which tokenizers (default: smollm2 with --quick, else both)",
    )
    ap.add_argument("--per-subset", type=int, default=None)
    ap.add_argument("--max-tests", type=int, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    ap.add_argument(
        "--grammars",
        action="store_true",
        help="context-free grammars (benchmarks/data/grammars) instead of schemas",
    )
    ap.add_argument(
        "--gbnf-sweep",
        action="store_true",
        help="llama.cpp's grammars/*.gbnf (tests/fixtures/gbnf): structgen vs llguidance",
    )
    ap.add_argument(
        "--gbnf-names", default="", help="comma-separated llama.cpp grammars (--gbnf-sweep)"
    )
    ap.add_argument(
        "--batch", action="store_true", help="batch mode only: 64 schemas stepping together"
    )
    ap.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    ap.add_argument("--batch-threads", type=int, default=BATCH_THREADS)
    ap.add_argument("--cold", action="store_true", help="the cold modes only (cold_main)")
    ap.add_argument(
        "--cold-per-subset", type=int, default=60, help="MaskBench members per subset (--cold)"
    )
    ap.add_argument(
        "--cold-engines", default="", help="comma-separated engines (--cold, --grammars)"
    )
    ap.add_argument(
        "--cold-clock",
        choices=sorted(COLD_CLOCKS),
        default="cpu",
        help="--cold: time compiles and masks by CPU time (default) or the wall clock",
    )
    args = ap.parse_args(argv)
    if args.grammars or args.gbnf_sweep:  # SmolLM2 unless --tokenizers says otherwise
        from grammar_cfg_mode import run_gbnf_sweep, run_grammars

        cmd = ("python benchmarks/bench_grammar.py " + " ".join(argv or sys.argv[1:])).strip()
        names = args.cold_engines.split(",") if args.cold_engines else None
        which = args.tokenizers or "smollm2"
        for key, make in (("smollm2", smollm2_tokenizer), ("bpe150k", bpe_150k_tokenizer)):
            if which not in (key, "both"):
                continue
            tok = make()
            label = "SmolLM2 49k" if key == "smollm2" else tok.bench_label
            if args.grammars:
                print(run_grammars(tok, args.out, cmd, names, label))
            else:
                only = args.gbnf_names.split(",") if args.gbnf_names else None
                print(run_gbnf_sweep(tok, args.out, cmd, names, label, only))
        return
    if args.batch:
        main_batch(args)
        return
    if args.cold:
        _cold_entry(args, argv)
        return
    per = args.per_subset or (2 if args.quick else 12)
    max_tests = args.max_tests or (2 if args.quick else 6)
    sample = load_sample(per, max_tests)
    which = args.tokenizers or ("smollm2" if args.quick else "both")
    toks = {}
    if which in ("smollm2", "both"):
        toks["SmolLM2 49k"] = smollm2_tokenizer
    if which in ("bpe150k", "both"):
        toks["byte-level BPE 150k (local)"] = bpe_150k_tokenizer
    report, all_results = [], {}
    for label, make in toks.items():
        tok = make()
        label = getattr(tok, "bench_label", label)
        results, engines = {}, {}
        for cls in ENGINES:
            try:
                eng = cls(tok)
            except BaseException as exc:  # not installed, incompatible, or a Rust panic
                if isinstance(exc, KeyboardInterrupt):
                    raise
                results[cls.name] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            results[cls.name] = run_engine(eng, tok, sample)
            engines[cls.name] = eng
        best_of_interleaved(engines, sample, results)
        jf = [jump_forward_stats(tok, sample, extra) for extra in (True, False)]
        all_results[label] = results
        report.append(summarize(label, results, jf))
        print(report[-1], flush=True)
    note = plot(all_results, args.out.with_name("bench_grammar.png"))
    cmd = "python benchmarks/bench_grammar.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    text = (
        f"## Grammar engines ({time.strftime('%Y-%m-%d')}, {len(sample)} schemas)\n\n"
        f"Command: `{cmd.strip()}`\n\n"
        f"Load average at the end (1/5/15 min, 2 shared cores): "
        f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())}\n\n" + "\n".join(report) + f"\n{note}\n"
    )
    print(text)
    with open(args.out, "a") as f:
        f.write("\n" + text)


def _cold_entry(args, argv) -> None:
    toks = {}
    if (args.tokenizers or "both") in ("smollm2", "both"):
        toks["SmolLM2 49k"] = smollm2_tokenizer
    if (args.tokenizers or "both") in ("bpe150k", "both"):
        toks["byte-level BPE 150k (local)"] = bpe_150k_tokenizer
    body = cold_main(args, toks)
    cmd = "python benchmarks/bench_grammar.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    text = (
        f"## Grammar engines, cold modes ({time.strftime('%Y-%m-%d')})\n\n"
        f"Command: `{cmd.strip()}`\n\n"
        f"Load average at the end (1/5/15 min, 2 shared cores): "
        f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())}\n\n" + body
    )
    with open(args.out, "a") as f:
        f.write("\n" + text)


if __name__ == "__main__":
    main()
