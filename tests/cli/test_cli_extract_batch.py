"""`structgen extract --input FILE.jsonl` as a batch job, on a stand-in engine whose
requests finish in reverse order: results in input order, error lines for failed texts,
truncations reported on stderr and in the summary, ``--output``."""

from __future__ import annotations

import json

import pytest

from structgen import cli
from structgen.runtime.outputs import RequestOutput

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}},
    "required": ["n", "ok"],
    "additionalProperties": False,
}


class ReversedEngine:
    """Answers ``{"n": <the text's number>, "ok": true}``; "FAIL" fails, "CUT" is cut by
    max_tokens after the JSON closed; requests finish last first."""

    vocab = None

    def make_request(self, prompt, params, constraint):
        return prompt[-1]["content"]  # the user's text

    def run_requests(self, reqs, listener=None):
        outs = [self._answer(text) for text in reqs]
        for i in reversed(range(len(reqs))):
            if listener is not None:
                listener(i, outs[i])
        return outs

    @staticmethod
    def _answer(text):
        if text == "FAIL":
            return RequestOutput(text="", finish_reason="error", error="prompt too long")
        cut = [0] * 512  # max_tokens (the CLI's default) tokens: max_tokens cut it
        if text == "CUT":
            return RequestOutput(text='{"n":0,"ok":false}', token_ids=cut, finish_reason="length")
        if text == "CUT-OPEN":  # cut before the JSON closed
            return RequestOutput(text='{"n":0,', token_ids=cut, finish_reason="length")
        return RequestOutput(text=json.dumps({"n": int(text), "ok": True}), finish_reason="stop")


@pytest.fixture
def run(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda args: ReversedEngine())
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))

    def go(texts, *extra):
        inp = tmp_path / "in.jsonl"
        inp.write_text("\n".join(json.dumps(t) for t in texts) + "\n")
        code = cli.main(["extract", "--schema", str(schema), "--input", str(inp), *extra])
        return code, capsys.readouterr()

    return go


def test_results_come_in_input_order(run):
    texts = [str(i) for i in range(7)]
    code, cap = run(texts)
    assert code == 0, cap.err
    assert [json.loads(ln) for ln in cap.out.splitlines()] == [
        {"n": i, "ok": True} for i in range(7)
    ]
    assert "7 documents in" in cap.err and "documents/s" in cap.err


def test_a_failed_text_is_an_error_line_and_the_batch_goes_on(run, tmp_path):
    code, cap = run(["1", "FAIL", "3", {"text": "CUT"}, "5"])
    assert code == 1
    rows = [json.loads(ln) for ln in cap.out.splitlines()]
    assert len(rows) == 5
    assert rows[0] == {"n": 1, "ok": True} and rows[2] == {"n": 3, "ok": True}
    assert set(rows[1]) == {"error", "raw_text"} and "prompt too long" in rows[1]["error"]
    assert rows[3] == {"n": 0, "ok": False}  # printed although cut
    assert rows[4] == {"n": 5, "ok": True}
    inp = tmp_path / "in.jsonl"
    assert f"{inp}:4: cut by max_tokens" in cap.err
    summary = [ln for ln in cap.err.splitlines() if "documents in" in ln]
    assert len(summary) == 1
    assert f"1 cut by max_tokens ({inp}:4)" in summary[0]
    assert f"1 failed ({inp}:2)" in summary[0]
    assert "1 of 5 extractions failed" in cap.err
    assert "Traceback" not in cap.err


def test_blank_texts_are_error_lines_named_by_their_line(run, tmp_path):
    code, cap = run(["1", "  ", "3", {"text": ""}])
    assert code == 1
    rows = [json.loads(ln) for ln in cap.out.splitlines()]
    inp = tmp_path / "in.jsonl"
    assert rows[0] == {"n": 1, "ok": True} and rows[2] == {"n": 3, "ok": True}
    assert rows[1]["error"] == f"{inp}:2: the text is empty: there is nothing to extract from"
    assert rows[3]["error"].startswith(f"{inp}:4: the text is empty")
    assert f"2 failed ({inp}:2, {inp}:4)" in cap.err


def test_only_blank_texts_never_load_the_model(tmp_path, monkeypatch, capsys):
    def no_model(args):
        raise AssertionError("the model was loaded for blank texts")

    monkeypatch.setattr(cli, "_engine", no_model)
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    inp = tmp_path / "in.jsonl"
    inp.write_text('""\n" "\n')
    assert cli.main(["extract", "--schema", str(schema), "--input", str(inp)]) == 1
    assert len(capsys.readouterr().out.splitlines()) == 2
    code = cli.main(["extract", "--schema", str(schema), "--text", "  "])
    err = capsys.readouterr().err
    assert code == 1 and "the text is empty" in err and "raw output" not in err


def test_schema_warnings_are_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda args: ReversedEngine())
    schema = tmp_path / "s.json"
    schema.write_text(
        json.dumps(
            {
                **SCHEMA,
                "properties": {**SCHEMA["properties"], "n": {"type": "integer", "maxValue": 3}},
            }
        )
    )
    assert cli.main(["extract", "--schema", str(schema), "--text", "7"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out) == {"n": 7, "ok": True}
    assert f"structgen: warning: schema {schema}: " in cap.err and "'maxValue'" in cap.err


def test_output_file(run, tmp_path):
    out = tmp_path / "out.jsonl"
    code, cap = run(["2", "4"], "--output", str(out))
    assert code == 0 and cap.out == ""
    assert out.read_text().splitlines() == ['{"n": 2, "ok": true}', '{"n": 4, "ok": true}']


def test_an_unwritable_output_is_one_error_line(run, tmp_path):
    code, cap = run(["2"], "--output", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert code == 2
    assert "cannot write --output" in cap.err and "Traceback" not in cap.err


def test_a_single_cut_text_prints_the_object_and_warns(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda args: ReversedEngine())
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    code = cli.main(["extract", "--schema", str(schema), "--text", "CUT"])
    cap = capsys.readouterr()
    assert code == 0
    assert json.loads(cap.out) == {"n": 0, "ok": False}
    assert "text: cut by max_tokens=512" in cap.err


def test_a_text_cut_before_the_json_closed_names_the_flag(run, tmp_path, monkeypatch, capsys):
    code, cap = run(["1", "CUT-OPEN"])
    assert code == 1
    rows = [json.loads(ln) for ln in cap.out.splitlines()]
    assert "max_tokens=512 was reached" in rows[1]["error"]
    assert rows[1]["error"].endswith("(--max-tokens)") and rows[1]["raw_text"] == '{"n":0,'
    monkeypatch.setattr(cli, "_engine", lambda args: ReversedEngine())
    schema = tmp_path / "s.json"
    code = cli.main(["extract", "--schema", str(schema), "--text", "CUT-OPEN"])
    err = capsys.readouterr().err
    assert code == 1 and "(--max-tokens)" in err and "Traceback" not in err


class RecordingEngine(ReversedEngine):
    """ReversedEngine that keeps the grammar each request was made with."""

    def __init__(self):
        self.grammars = []

    def make_request(self, prompt, params, constraint):
        self.grammars.append(constraint)
        return super().make_request(prompt, params, constraint)


@pytest.mark.parametrize("flag", [False, True])
def test_no_copy_generates_under_the_schema_grammar_only(tmp_path, monkeypatch, capsys, flag):
    engine = RecordingEngine()
    monkeypatch.setattr(cli, "_engine", lambda args: engine)
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    argv = ["extract", "--schema", str(schema), "--text", "7"] + (["--no-copy"] if flag else [])
    assert cli.main(argv) == 0
    capsys.readouterr()
    (grammar,) = engine.grammars
    # with copy, "n" may only be the text's numeral 7; without, any integer
    assert grammar.matches('{"n":7,"ok":true}')
    assert grammar.matches('{"n":8,"ok":true}') is flag


class InterruptedEngine(ReversedEngine):
    """Ctrl-C arrives while the texts are being generated."""

    def run_requests(self, reqs, listener=None):
        raise KeyboardInterrupt


def test_ctrl_c_exits_130_and_says_where_a_rerun_starts(tmp_path, monkeypatch, capsys):
    """Ctrl-C in a batch job exits 130 and says how many texts finished and were written
    and which text a rerun starts from."""
    monkeypatch.setattr(cli, "_engine", lambda args: InterruptedEngine())
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(json.dumps(t) for t in ["1", "", "3"]) + "\n")
    code = cli.main(["extract", "--schema", str(schema), "--input", str(inp)])
    cap = capsys.readouterr()
    assert code == 130
    assert cap.out == ""  # text 1 never finished: the blank line 2's error waits behind it
    assert (
        f"structgen: interrupted: 1 of 3 documents finished, 0 written; the first not written "
        f"is {inp}:1 (1 finished after it was held back to keep input order)\n"
    ) in cap.err


def test_the_interrupt_line_counts_written_and_held_results(tmp_path):
    """BatchWriter.interrupted after texts 0, 2 and 3 of 5 finished: text 0 written, 2 and 3
    held behind text 1; after all finish, nothing is named as unwritten."""
    from structgen.cli.batch import BatchWriter
    from structgen.extraction.result import ExtractionResult

    written = []
    w = BatchWriter(lambda res, name: written.append(name), 5, lambda i: f"in:{i + 1}", True, 9)
    ok = ExtractionResult({"n": 1}, False, "stop", "{}", [])
    for i in (0, 2, 3):
        w.on_result(i, ok)
    assert written == ["in:1"]
    assert w.interrupted() == (
        "interrupted: 3 of 5 documents finished, 1 written; the first not written is in:2 "
        "(2 finished after it were held back to keep input order)"
    )
    for i in (1, 4):
        w.on_result(i, ok)
    w.close()
    assert w.interrupted() == "interrupted: 5 of 5 documents finished, 5 written"
