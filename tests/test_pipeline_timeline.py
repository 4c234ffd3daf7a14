"""benchmarks/pipeline_timeline.py's idle accounting, without a model: hand-made intervals of
two pipelines against the idle core-seconds worked out by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import pipeline_timeline as timeline  # noqa: E402 - the benchmark is a script beside the tests


def test_idle_core_time_is_charged_to_the_pipelines_not_at_work():
    rec = timeline._Recorder()
    rec.reset()
    t0 = rec.t0
    rec.events += [
        (0, "host", t0, t0 + 1.0, 0),
        (0, "forward", t0 + 1.0, t0 + 3.0, 1),  # one kernel thread
        (1, "lock wait", t0, t0 + 1.0, 0),  # waits while pipeline 0 holds the lock
        (1, "host", t0 + 1.0, t0 + 2.0, 0),
        (1, "forward", t0 + 2.0, t0 + 4.0, 2),  # alone at the end: both cores
        (-1, "host", t0, t0 + 4.0, 0),  # the calling thread: not a pipeline
    ]
    rec.passes += [(0, t0 + 1.0, t0 + 3.0, 5), (1, t0 + 2.0, t0 + 4.0, 300)]
    a = timeline._analyse(rec, t0 + 4.0, cores=2, small_rows=8)
    # 0-1: one busy, pipeline 1 waits (1 core-s); 1-2: both busy; 2-3: pipeline 1's two
    # threads and pipeline 0's one on 2 cores; 3-4: pipeline 0 done, pipeline 1 on both cores
    assert a["idle"]["lock wait"] == pytest.approx(1.0)
    assert a["idle"]["done"] == pytest.approx(0.0)
    assert a["idle share"] == pytest.approx(1.0 / 8.0)
    p0, p1 = a["pipeline 0"], a["pipeline 1"]
    assert p0["done s"] == pytest.approx(1.0) and p0["ended s"] == pytest.approx(3.0)
    assert p1["lock wait s"] == pytest.approx(1.0) and p1["forward s"] == pytest.approx(2.0)
    assert (p0["passes <= 8 rows"], p1["passes <= 8 rows"]) == (1, 0)
    assert p1["rows"] == 300


def test_a_pipeline_done_while_the_other_forwards_on_one_thread_idles_a_core():
    rec = timeline._Recorder()
    rec.reset()
    t0 = rec.t0
    rec.events += [(0, "forward", t0, t0 + 1.0, 1), (1, "forward", t0, t0 + 3.0, 1)]
    a = timeline._analyse(rec, t0 + 3.0, cores=2, small_rows=8)
    assert a["idle"]["done"] == pytest.approx(2.0)  # pipeline 0 done for 2 s, one core idle
    assert a["idle share"] == pytest.approx(2.0 / 6.0)
