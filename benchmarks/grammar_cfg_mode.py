"""``bench_grammar.py --grammars``: context-free grammars, structgen vs llguidance / XGrammar.

The grammars are the files in ``benchmarks/data/grammars/`` (structgen and llguidance read
both, llguidance GBNF through ``gbnf_to_lark``; XGrammar the GBNF files). Each has a long
valid text written below (>= 500 tokens) that every engine is forced through token by token:

* compile: ``compile_times``: process CPU time, best of ``COMPILE_REPEAT`` (7), the engines
  interleaved per grammar in a rotated order, the collector frozen after the tokenizer and
  vocabulary setup (no caches: structgen's cleared); the best wall clock is a column beside;
* cold mask: each mask of the first pass (a fresh compile: nothing built yet), mean;
* warm mask: each mask of a second pass with a new matcher on the same compile, median;
* the valid text must be accepted (a rejection is reported, not timed past it); the first
  ``MAX_FORCED`` tokens are forced (XGrammar's masks under the unbounded ``ws`` of a
  GBNF JSON grammar take minutes over the whole 2,500-token text).
"""

from __future__ import annotations

import gc
import json
import os
import re
import statistics
import time
from pathlib import Path

import torch

DATA = Path(__file__).resolve().parent / "data" / "grammars"
MAX_FORCED = 600  # tokens forced per text (a prefix of the valid text: masks stay defined)
COMPILE_REPEAT = 7  # compiles per grammar and engine; the best one is reported
PLOT_COLUMNS = (2, 4, 5)  # run_grammars' row cells plotted: compile CPU, cold mean, warm median


def _valid_texts() -> dict[str, str]:
    """One long valid text per grammar file (built here, checked by the run)."""
    arithmetic = " + ".join(f"({i} * {i + 1} - -{i}) / 2" for i in range(120))
    nested = (
        "[" + ", ".join(f"[word{chr(97 + i % 26)}, [{i}, -{i}, [x, []]]]" for i in range(60)) + "]"
    )
    doc = [
        {"id": i, "name": f"item {i}", "tags": ["a", "b\u00e9"], "score": i / 7, "ok": i % 2 == 0}
        for i in range(40)
    ]
    sql = (
        "SELECT "
        + ", ".join(f"c{i} AS a{i}" for i in range(120))
        + " FROM (SELECT * FROM t WHERE x = 1 AND y IN (SELECT id FROM u WHERE z < 3)) AS s"
        + " WHERE q >= 2 OR (r <> 'no' AND s = 4) ORDER BY a1 DESC LIMIT 10"
    ).replace("'no'", '"no"')
    c_code = "\n".join(
        f"int v{i} = {i} * (v{i} + 2);\n"
        f"if (v{i} < {i}) {{ v{i} = f(v{i}, 3); }} else {{ return -v{i}; }}"
        for i in range(50)
    )
    csv_text = (
        "id,name,note\n" + "\n".join(f'{i},"name, {i}","say ""hi"" {i}"' for i in range(120)) + "\n"
    )
    calls = "".join(
        f'<tool_call>get_weather:{{"city":"Paris {i}","days":{i}}}</tool_call>\n' for i in range(40)
    )
    config = (
        "\n".join(
            f'[section_{i}]\nkey_{i} = {i}.5\nname_{i} = "value {i}"\n'
            f'list_{i} = [1, "a", [true, false]]\n'
            f"block_{i} {{\nx = 1\ny = {{a = 1; b = [2, 3]}}\n}}"
            for i in range(30)
        )
        + "\n"
    )
    return {
        "arithmetic.lark": arithmetic,
        "nested_lists.lark": nested,
        "json.gbnf": json.dumps(doc, indent=1, ensure_ascii=False),
        "sql_select.lark": sql,
        "c_statements.lark": c_code,
        "csv.gbnf": csv_text,
        "tool_call.lark": calls,
        "config.gbnf": config,
    }


class _Structgen:
    name = "structgen"
    share_lexical = True  # the masks' shared head parts (fsm/index/lexical_masks.py)

    def __init__(self, tok):
        from structgen.fsm import Vocabulary
        from structgen.fsm.index.lexical_masks import LexicalMaskCache

        self.vocab = Vocabulary.from_tokenizer(tok)
        _ = self.vocab.token_trie, self.vocab.index_tables
        self.words = (self.vocab.vocab_size + 31) // 32
        if self.share_lexical:  # per-tokenizer preprocessing, as bench_grammar's engine
            self.vocab.lexical_masks.prepare()
        else:
            self.vocab.lexical_masks = LexicalMaskCache(self.vocab, 0, auto_prepare=False)

    def supports(self, path: Path) -> bool:
        return True

    def compile(self, text: str, path: Path):
        from structgen.fsm.grammar import compile as grammar_compile

        grammar_compile.clear_cache()
        self.vocab.lexical_masks.clear()  # no head part an earlier grammar stored
        syntax = "lark" if path.suffix == ".lark" else "gbnf"
        return grammar_compile.compile_grammar(text, self.vocab, syntax=syntax)

    def matcher(self, g):
        return g.matcher()

    def mask(self, m, buf):
        m.fill_bitmask(buf, 0)

    def accept(self, m, t):
        return m.advance(t)


class _StructgenWhole(_Structgen):
    """structgen with the shared head parts off (every first mask walks the whole token
    trie); only when named in ``--cold-engines`` (a before / after in one run)."""

    name = "structgen-whole"
    share_lexical = False


class _LLGuidance:
    """llguidance on the Lark files as they are and on ``llguidance.gbnf_to_lark``'s
    translation of the GBNF files (its terminals are greedy lexemes, not GBNF's
    character-level rules: a valid text may be rejected, which the row reports)."""

    name = "llguidance"

    def __init__(self, tok):
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(tok)
        self.words = (self.tok.vocab_size + 31) // 32

    def supports(self, path: Path) -> bool:
        return path.suffix in (".lark", ".gbnf")

    def compile(self, text: str, path: Path):
        if path.suffix == ".gbnf":  # the translation is timed with the compile
            from llguidance.gbnf_to_lark import gbnf_to_lark

            text = gbnf_to_lark(text)
        grm = self.llg.LLMatcher.grammar_from_lark(text)
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


class _XGrammar:
    name = "xgrammar"

    def __init__(self, tok):
        import xgrammar as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok))
        self.compiler = xgr.GrammarCompiler(self.info, cache_enabled=False)
        self.words = (self.info.vocab_size + 31) // 32

    def supports(self, path: Path) -> bool:
        return path.suffix == ".gbnf"

    def compile(self, text: str, path: Path):
        return self.compiler.compile_grammar(text, root_rule_name="root")

    def matcher(self, g):
        return self.xgr.GrammarMatcher(g)

    def mask(self, m, buf):
        m.fill_next_token_bitmask(buf, 0)

    def accept(self, m, t):
        return m.accept_token(t)


def compile_times(engines, text: str, path: Path, repeat: int = COMPILE_REPEAT, clocks=None):
    """Compile ``text`` (the grammar file ``path``) ``repeat`` times with every engine that
    supports it, the engines interleaved (round ``r`` starts at engine ``r mod n``), and keep
    each engine's best times.

    Timed with ``time.process_time`` (CPU seconds of the whole process, so an engine that
    compiles on a worker thread is charged too; what load on shared cores distorts least)
    and, separately, ``time.perf_counter`` (wall seconds); each is the minimum over the
    ``repeat`` compiles, so a collection or a load spike in some of them is dropped. The
    collector runs ``gc.collect()`` once first (an earlier grammar's garbage is not charged to
    this one's first compile); the caller freezes what its setup built (``gc.freeze()``).
    ``clocks``: ``(cpu, wall)`` callables returning seconds (tests pass fakes).

    Returns ``{engine name: (grammar, cpu_s, wall_s)}``, the grammar from the first compile,
    or ``{engine name: exception}`` for an engine whose compile raised (not retried). Raises
    ``ValueError`` when ``repeat`` < 1.
    """
    if repeat < 1:
        from structgen.errors import ConfigError

        raise ConfigError(f"compile_times: repeat must be >= 1, got {repeat}")
    cpu, wall = clocks or (time.process_time, time.perf_counter)
    active = [eng for eng in engines if eng.supports(path)]
    out: dict[str, object] = {}
    gc.collect()
    for r in range(repeat):
        k = r % len(active) if active else 0
        for eng in active[k:] + active[:k]:
            if isinstance(out.get(eng.name), Exception):
                continue
            c0, w0 = cpu(), wall()
            try:
                g = eng.compile(text, path)
            except Exception as exc:  # an unsupported construct, a peer's refusal
                out[eng.name] = exc
                continue
            c, w = cpu() - c0, wall() - w0
            if eng.name in out:
                g0, c_best, w_best = out[eng.name]
                out[eng.name] = (g0, min(c_best, c), min(w_best, w))
            else:
                out[eng.name] = (g, c, w)
    return out


def _force(eng, grammar, ids) -> tuple[list[float], int]:
    """Per-token mask times (s) forcing ``ids``, and how many tokens were accepted."""
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    m = eng.matcher(grammar)
    times = []
    for i, t in enumerate(ids):
        t0 = time.perf_counter()
        eng.mask(m, buf)
        times.append(time.perf_counter() - t0)
        if not eng.accept(m, t):
            return times, i
    return times, len(ids)


def _row(grammar, engine, compiled, cold_s, warm, n_forced, n_ok) -> tuple[str, ...]:
    """One table row: ``compiled`` is ``compile_times``' ``(grammar, cpu_s, wall_s)``,
    ``cold_s`` the cold mean (s), ``warm`` the warm pass's per-token times (s)."""
    _, cpu_s, wall_s = compiled
    ok = "yes" if n_ok == n_forced else f"rejected at token {n_ok}"
    return (
        grammar,
        engine,
        f"{cpu_s * 1e3:.2f}",
        f"{wall_s * 1e3:.2f}",
        f"{cold_s * 1e6:.1f}",
        f"{statistics.median(warm) * 1e6:.2f}",
        f"{n_forced} / {ok}",
    )


def plot_rows(rows, path: Path) -> str:
    """Compile ms, cold mean us and warm median us per grammar and engine (log scale),
    as three panels; returns a line for the report.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: plot skipped"
    rows = [r for r in rows if not r[2].startswith("error")]
    grammars = list(dict.fromkeys(r[0] for r in rows))
    engines = list(dict.fromkeys(r[1] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    width = 0.8 / len(engines)
    for ax, col, title in zip(
        axes,
        PLOT_COLUMNS,
        (f"compile CPU ms (best of {COMPILE_REPEAT})", "cold mask mean us", "warm mask median us"),
        strict=True,
    ):
        for k, eng in enumerate(engines):
            xs, ys = [], []
            for i, g in enumerate(grammars):
                for r in rows:
                    if r[0] == g and r[1] == eng:
                        xs.append(i + (k - (len(engines) - 1) / 2) * width)
                        ys.append(float(r[col]))
            ax.bar(xs, ys, width, label=eng)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xticks(range(len(grammars)))
        ax.set_xticklabels(grammars, rotation=45, ha="right", fontsize=8)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"plot: {path.name}"


def run_grammars(
    tokenizer,
    out: Path,
    cmd: str,
    names: list[str] | None = None,
    label: str = "SmolLM2 49k",
) -> str:
    """Measure every grammar file on every engine that reads it (compile: ``compile_times``,
    the collector frozen after the engines' setup); append to ``out``.
    ``names``: the engines to run, in that order (default: structgen and the peers;
    ``structgen-whole`` only when named); ``label``: the tokenizer, for the title."""
    engines = []
    classes = (_Structgen, _StructgenWhole, _LLGuidance, _XGrammar)
    if names:  # in the order named (the cold passes run in that order)
        classes = sorted((c for c in classes if c.name in names), key=lambda c: names.index(c.name))
    for cls in classes:
        if not names and cls is _StructgenWhole:
            continue
        try:
            engines.append(cls(tokenizer))
        except Exception as exc:  # not installed
            print(f"{cls.name}: {type(exc).__name__}: {exc}")
    gc.collect()  # what the tokenizer and vocabulary setup left is not charged to a compile
    gc.freeze()
    rows = []
    try:
        for name, valid in _valid_texts().items():
            path = DATA / name
            text = path.read_text(encoding="utf-8")
            ids = tokenizer.encode(valid, add_special_tokens=False)[:MAX_FORCED]
            compiled = compile_times(engines, text, path)
            for eng in engines:
                got = compiled.get(eng.name)
                if got is None:
                    continue
                if isinstance(got, Exception):
                    err = f"error: {type(got).__name__}: {got}"[:80]
                    rows.append((name, eng.name, err, "", "", "", ""))
                    continue
                fresh = eng.compile(text, path)  # cold: nothing built yet
                cold, n_ok = _force(eng, fresh, ids)
                warm, _ = _force(eng, fresh, ids)
                cold_s = statistics.fmean(cold)
                rows.append(_row(name, eng.name, got, cold_s, warm, len(ids), n_ok))
                print(rows[-1], flush=True)
    finally:
        gc.unfreeze()
    head = (
        f"| grammar | engine | compile CPU ms (best of {COMPILE_REPEAT}) "
        f"| compile wall ms (best of {COMPILE_REPEAT}) | cold mask mean us "
        "| warm mask median us | tokens forced / accepted |\n|---|---|---|---|---|---|---|\n"
    )
    table = head + "\n".join("| " + " | ".join(r) + " |" for r in rows)
    figure = plot_rows(rows, out.parent / "bench_grammar_cfg.png")
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    section = (
        f"## Context-free grammars ({time.strftime('%Y-%m-%d %H:%M')}, {label})\n\n"
        f"Command: `{cmd}`\n\nLoad average at the end (1/5/15 min): {load}\n\n"
        f"{table}\n\n{figure}\n"
    )
    with open(out, "a") as f:
        f.write("\n" + section)
    return section


# ---- --gbnf-sweep: llama.cpp's own grammars (#24) -----------------------------------------

GBNF_FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "gbnf"


def _gbnf_valid_texts() -> dict[str, str]:
    """One long valid text per llama.cpp grammar (checked by the run: a rejection is
    reported)."""
    moves = ["e4 e5", "Nf3 Nc6", "Bb5 a6", "Ba4 Nf6", "O-O Be7", "Re1 b5", "Bb3 d6", "c3 O-O"]
    doc = [
        {"id": i, "name": f"item {i}", "tags": ["a", "b\\u00e9"], "score": i / 7, "ok": i % 2 == 0}
        for i in range(40)
    ]
    return {
        "arithmetic": "".join(f"v{i} +{i}*(w{i} -3)= {i}\n" for i in range(80)),
        "c": "".join(
            f"int f{i}(int a){{int b = a*{i}+f(a);while(b<{i}){{b = b+1;}}return b;}}"
            for i in range(30)
        ),
        "chess": "1. e4 e5\n" + "".join(f"{n}. {moves[n % len(moves)]}\n" for n in range(2, 99)),
        "english": " ".join(f"The word number {i} is here, isn't it?" for i in range(60)),
        "japanese": " ".join("これはテストです、日本語の文章。" for _ in range(60)),
        "json": "{" + f'"items": {json.dumps(doc, indent=1)}' + "}",
        "json_arr": "[\n" + ",\n".join(json.dumps(d) for d in doc) + "]",
        "list": "".join(f"- item number {i}: buy {i} apples\n" for i in range(80)),
    }


class _StructgenGbnf(_Structgen):
    def supports(self, path: Path) -> bool:
        return True


class _XGrammarGbnf(_XGrammar):
    """XGrammar on every file of ``--gbnf-sweep``. Its EBNF parser refuses an empty first
    alternative (llama.cpp's ``ws ::= | " " | ...``): written ``""`` (the same language;
    the rewrite is timed with the compile)."""

    def supports(self, path: Path) -> bool:
        return True

    def compile(self, text: str, path: Path):
        return super().compile(re.sub(r"::=(\s*)\|", r'::=\1"" |', text), path)


class _LLGuidanceGbnf(_LLGuidance):
    """llguidance on every file of ``--gbnf-sweep`` (``_LLGuidance`` reads GBNF through
    ``llguidance.gbnf_to_lark``)."""

    def supports(self, path: Path) -> bool:
        return True


REPEATS = 3  # --gbnf-sweep: fresh compiles per grammar and engine (cold passes)


def run_gbnf_sweep(
    tokenizer,
    out: Path,
    cmd: str,
    names: list[str] | None = None,
    label: str = "SmolLM2 49k",
    grammars: list[str] | None = None,
) -> str:
    """Compile time (``compile_times``: CPU and wall, best of 7, the collector frozen after
    the engines' setup), cold mask per token (each of 3 fresh compiles forced through the
    valid text, the median of their means) and warm mask per token (a second pass, median)
    of every llama.cpp grammar, structgen, llguidance and XGrammar interleaved in the same
    run; appends a section to ``out`` and returns it. ``names``: the engines (default all
    three); ``label``: the tokenizer, for the title; ``grammars``: the llama.cpp grammars by
    stem (default all)."""
    engines = []
    classes = (_StructgenGbnf, _LLGuidanceGbnf, _XGrammarGbnf)
    if names:
        classes = tuple(c for c in classes if c.name in names)
    for cls in classes:
        try:
            engines.append(cls(tokenizer))
        except Exception as exc:  # not installed
            print(f"{cls.name}: {type(exc).__name__}: {exc}")
    gc.collect()  # what the tokenizer and vocabulary setup left is not charged to a compile
    gc.freeze()
    rows = []
    for name, valid in _gbnf_valid_texts().items():
        if grammars and name not in grammars:
            continue
        path = GBNF_FIXTURES / f"{name}.gbnf"
        text = path.read_text(encoding="utf-8")
        ids = tokenizer.encode(valid, add_special_tokens=False)[:MAX_FORCED]
        compiled = compile_times(engines, text, path)
        runs: dict[str, list] = {eng.name: [] for eng in engines}
        for _ in range(REPEATS):  # engines interleaved; each repeat a fresh compile
            for eng in engines:
                if isinstance(compiled.get(eng.name, None), Exception):
                    continue
                g = eng.compile(text, path)
                cold, n_ok = _force(eng, g, ids)  # cold: nothing built yet
                runs[eng.name].append((statistics.fmean(cold), n_ok, g))
        for eng in engines:
            got = compiled[eng.name]
            if isinstance(got, Exception):
                err = f"error: {type(got).__name__}: {got}"[:90]
                rows.append((name, eng.name, err, "", "", "", ""))
                continue
            colds = runs[eng.name]
            warm, _ = _force(eng, colds[-1][2], ids)
            n_ok = colds[-1][1]
            cold_s = statistics.median(r[0] for r in colds)
            rows.append(_row(name, eng.name, got, cold_s, warm, len(ids), n_ok))
            print(rows[-1], flush=True)
    gc.unfreeze()
    head = (
        f"| grammar | engine | compile CPU ms (best of {COMPILE_REPEAT}) "
        f"| compile wall ms (best of {COMPILE_REPEAT}) | cold mask mean us (median of 3) "
        "| warm mask median us | tokens forced / accepted |\n|---|---|---|---|---|---|---|\n"
    )
    table = head + "\n".join("| " + " | ".join(r) + " |" for r in rows)
    section = (
        f"## #24: llama.cpp grammars sweep ({time.strftime('%Y-%m-%d')}, {label})\n\n"
        f"Command: `{cmd}`\n\n{table}\n"
    )
    with open(out, "a") as f:
        f.write("\n" + section)
    return section
