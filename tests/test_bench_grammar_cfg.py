"""benchmarks/grammar_cfg_mode.py (``bench_grammar.py --grammars`` / ``--gbnf-sweep``): the
compile column's protocol on scripted clocks (each engine's best over the interleaved rounds,
against the minimum computed here), and one end-to-end run on the tiny tokenizer, so the
benchmark cannot rot. Nothing here is a timing claim."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import grammar_cfg_mode as gm  # noqa: E402 - the benchmark is a script beside the tests

from benchmarks.support import build_tiny_tokenizer  # noqa: E402
from structgen.errors import ConfigError  # noqa: E402


class _Clock:
    """A fake clock: seconds advance only when an engine's compile says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class _Scripted:
    """An engine whose r-th compile costs ``cpu[r]`` CPU and ``wall[r]`` wall seconds."""

    def __init__(self, name, cpu, wall, log, clocks, fail_at=None, suffixes=(".lark", ".gbnf")):
        self.name, self.cpu, self.wall, self.log = name, cpu, wall, log
        self.cpu_clock, self.wall_clock = clocks
        self.fail_at, self.suffixes, self.calls = fail_at, suffixes, 0

    def supports(self, path):
        return path.suffix in self.suffixes

    def compile(self, text, path):
        r = self.calls
        self.calls += 1
        self.log.append(self.name)
        if r == self.fail_at:
            raise RuntimeError(f"{self.name} refuses")
        self.cpu_clock.now += self.cpu[r]
        self.wall_clock.now += self.wall[r]
        return (self.name, r)


def test_compile_times_keeps_each_engines_best_cpu_and_wall_rounds_rotated():
    cpu_clock, wall_clock = _Clock(), _Clock()
    clocks = (cpu_clock, wall_clock)
    log: list[str] = []
    a_cpu = [0.011, 0.003, 0.0026, 0.0031, 0.0029, 0.0027, 0.004]  # a first compile's collection
    a_wall = [0.012, 0.009, 0.003, 0.0033, 0.0030, 0.0028, 0.02]  # load spikes in wall only
    b_cpu = [0.0025, 0.0024, 0.0026, 0.0021, 0.0030, 0.0022, 0.0023]
    b_wall = [0.0025, 0.0080, 0.0026, 0.0090, 0.0031, 0.0022, 0.0024]
    engines = [
        _Scripted("a", a_cpu, a_wall, log, clocks),
        _Scripted("b", b_cpu, b_wall, log, clocks),
        _Scripted("c", [1.0] * 7, [1.0] * 7, log, clocks, fail_at=2),  # fails in round 2
        _Scripted("lark-only", [1.0] * 7, [1.0] * 7, log, clocks, suffixes=(".lark",)),
    ]
    got = gm.compile_times(engines, "root ::= x", Path("x.gbnf"), repeat=7, clocks=clocks)
    assert got["a"] == (("a", 0), pytest.approx(min(a_cpu)), pytest.approx(min(a_wall)))
    assert got["b"] == (("b", 0), pytest.approx(min(b_cpu)), pytest.approx(min(b_wall)))
    assert isinstance(got["c"], RuntimeError) and engines[2].calls == 3  # not retried
    assert "lark-only" not in got and engines[3].calls == 0
    # round r starts at engine r mod 3 among those that read the file; c drops out after r 2
    expected = []
    for r in range(7):
        k = r % 3
        for name in ["a", "b", "c"][k:] + ["a", "b", "c"][:k]:
            if name == "c" and r > 2:
                continue
            expected.append(name)
    assert log == expected


def test_compile_times_refuses_no_rounds():
    with pytest.raises(ConfigError, match="repeat must be >= 1, got 0"):
        gm.compile_times([], "", Path("x.lark"), repeat=0)


def test_run_grammars_end_to_end_on_the_tiny_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setattr(gm, "MAX_FORCED", 80)  # a prefix of each valid text: the protocol only
    plotted = []  # matplotlib's layout is most of the run: the rows it would draw are checked
    monkeypatch.setattr(gm, "plot_rows", lambda rows, path: plotted.extend(rows) or "plot: -")
    out = tmp_path / "RESULTS.md"
    tok = build_tiny_tokenizer()
    section = gm.run_grammars(tok, out, "cmd", ["structgen"], "tiny")
    assert out.read_text().strip() == section.strip()
    lines = section.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| grammar |"))
    assert lines[head].split(" | ")[2:4] == [
        f"compile CPU ms (best of {gm.COMPILE_REPEAT})",
        f"compile wall ms (best of {gm.COMPILE_REPEAT})",
    ]
    rows = [line for line in lines[head + 2 :] if line.startswith("| ")]
    assert [r.split(" | ")[0][2:] for r in rows] == list(gm._valid_texts())
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 7 and cells[1] == "structgen"
        cpu_ms, wall_ms = float(cells[2]), float(cells[3])
        assert cpu_ms > 0 and wall_ms > 0
        assert cells[6] == "80 / yes"  # every valid text accepted
    assert "Load average at the end" in section
    assert len(plotted) == len(rows)
    names = [c.strip() for c in lines[head].strip("|").split("|")]
    assert [names[c].split(" (")[0] for c in gm.PLOT_COLUMNS] == [
        "compile CPU ms",
        "cold mask mean us",
        "warm mask median us",
    ]
    for r in plotted:  # the cells the plot reads are numbers
        assert all(float(r[c]) > 0 for c in gm.PLOT_COLUMNS)
