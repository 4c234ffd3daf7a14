"""README's server example ("The server"), run as written against ``structgen serve`` over
the packaged SmolLM2: it must run, and print the object its comment shows."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import jsonschema
import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:30000/v1"


def readme_server_block() -> str:
    """The python block of README that starts with the ``structgen serve`` comment."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    found = [b for b in blocks if b.startswith("# structgen serve ")]
    assert len(found) == 1, "README lost its server example (or has two)"
    return found[0]


def test_readme_server_example_prints_what_it_says(smol_server, monkeypatch, capsys):
    block = readme_server_block()
    assert README_URL in block, "README's server example no longer uses the default port"
    shown = re.search(r"^print\(person\)\s+# (\{.*\})$", block, re.M)
    assert shown, "README's server example lost its printed object"
    monkeypatch.chdir(ROOT)  # the example reads examples/schemas/person.json
    scope: dict = {}
    exec(compile(block.replace(README_URL, smol_server + "/v1"), "README.md", "exec"), scope)
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed == [repr(ast.literal_eval(shown.group(1)))]
    schema = json.loads((ROOT / "examples/schemas/person.json").read_text(encoding="utf-8"))
    # after the trigger the answer is valid against the schema, the text before it is returned
    jsonschema.validate(scope["answer"], schema)
    assert isinstance(scope["reasoning"], str)
