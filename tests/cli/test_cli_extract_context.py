"""`structgen extract` of a text whose output the model's context cut (not --max-tokens):
the error names the context and its remedy, without the ``(--max-tokens)`` hint that a
``max_tokens`` cut gets; an output the grammar closed before a limit cut it is written, and
its warning line, the batch summary and ``ExtractionResult.cut_by`` name the limit that cut
it (the context or ``max_tokens``); on a stand-in engine whose context is 300 tokens."""

from __future__ import annotations

import json

import pytest

from structgen import cli
from tests.test_errors import CutEngine

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class ShortContextEngine(CutEngine):
    """Cuts every output after 7 tokens, as a 300-token context would (max_tokens: 512);
    a text ``"CLOSED"`` gets a JSON the grammar closed before the context cut it, a text
    ``"MAX"`` one closed before ``max_tokens`` (512 tokens) cut it."""

    OUTPUTS = {"CLOSED": ('{"n":3}', 7, "length"), "MAX": ('{"n":3}', 512, "length")}
    DEFAULT = ('{"n":', 7, "length")


CONTEXT_CUT = (
    "extraction did not complete: the end of the model's context (300 tokens, prompt "
    "included) was reached before the JSON was complete; shorten the text, or create the "
    "engine with a larger max_model_len"
)


@pytest.fixture
def schema(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_engine", lambda args: ShortContextEngine())
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def test_a_single_text_cut_by_the_context(schema, capsys):
    code = cli.main(["extract", "--schema", str(schema), "--text", "Ann is 3."])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == f"structgen: error: {CONTEXT_CUT} (raw output: '{{\"n\":')"


def test_a_jsonl_text_cut_by_the_context(schema, tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps("Ann is 3.") + "\n")
    code = cli.main(["extract", "--schema", str(schema), "--input", str(inp)])
    rows = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert rows == [{"error": f"{inp}:1: {CONTEXT_CUT}", "raw_text": '{"n":'}]


CLOSED_EARLY = "the grammar closed the JSON early, so later fields may be shortened"


def test_a_closed_early_output_names_the_limit_that_cut_it(schema, tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    texts = ["CLOSED", "MAX", "CLOSED", "Ann is 3."]
    inp.write_text("".join(json.dumps(t) + "\n" for t in texts))
    code = cli.main(["extract", "--schema", str(schema), "--input", str(inp)])
    cap = capsys.readouterr()
    rows = [json.loads(ln) for ln in cap.out.splitlines()]
    assert code == 1
    assert rows[:3] == [{"n": 3}] * 3
    assert rows[3] == {"error": f"{inp}:4: {CONTEXT_CUT}", "raw_text": '{"n":'}
    warnings = [ln for ln in cap.err.splitlines() if ln.startswith("structgen: warning:")]
    assert warnings == [
        f"structgen: warning: {inp}:1: cut by the end of the model's context (300 tokens, "
        f"prompt included); {CLOSED_EARLY}",
        f"structgen: warning: {inp}:2: cut by max_tokens=512; {CLOSED_EARLY}",
        f"structgen: warning: {inp}:3: cut by the end of the model's context (300 tokens, "
        f"prompt included); {CLOSED_EARLY}",
    ]
    (summary,) = [ln for ln in cap.err.splitlines() if "documents in" in ln]
    assert summary.endswith(
        f"; 1 cut by max_tokens ({inp}:2); 2 cut by the model's context ({inp}:1, {inp}:3)"
        f"; 1 failed ({inp}:4)"
    )


def test_a_closed_early_single_text_names_the_context(schema, capsys):
    code = cli.main(["extract", "--schema", str(schema), "--text", "CLOSED"])
    cap = capsys.readouterr()
    assert code == 0 and json.loads(cap.out) == {"n": 3}
    assert cap.err.strip() == (
        "structgen: warning: text: cut by the end of the model's context (300 tokens, prompt "
        f"included); {CLOSED_EARLY}"
    )


def test_extraction_result_records_the_limit_that_cut_it():
    import warnings

    from structgen.errors import ExtractionTruncatedWarning, LengthLimit
    from structgen.extraction import extract

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = extract(ShortContextEngine(), SCHEMA, ["CLOSED", "MAX"], copy=False,
                          return_details=True)  # fmt: skip
    assert [r.truncated for r in results] == [True, True]
    assert [r.cut_by for r in results] == [
        LengthLimit("context", 300),
        LengthLimit("max_tokens", 512),
    ]
    cut = [str(w.message) for w in caught if w.category is ExtractionTruncatedWarning]
    assert [m.split("; ")[0] for m in cut] == [
        f"extraction of text {i} was cut by {r.cut_by}" for i, r in enumerate(results)
    ]
