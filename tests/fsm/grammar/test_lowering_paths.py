"""The lowering's fast paths against the code they replaced: the same ``CfgGrammar``.

``_Lowering.is_regular`` decides each node once from its items' answers (it used to walk
every reference below each node it was asked about), and ``_Definitions.bundle`` /
``add_block`` renumber placeholders with ``renumber_placeholders`` (it used to be
``str.translate``). Both are exact: the grammar each lowering gives is compared field by
field with the one the replaced code gives (patched back in), on the recursive schemas of
the cold benchmark and the schema-rules tests, a schema whose ``$defs`` are used twice, the
official test suite's ``$ref`` cases, and the Lark / GBNF grammars of the tests.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from benchmarks.corpus import CORPORA
from structgen.errors import StructgenError
from structgen.fsm import clear_cache, compile_json_schema
from structgen.fsm.deadline import Deadline
from structgen.fsm.grammar import compile as grammar_compile
from structgen.fsm.grammar import lower
from structgen.fsm.grammar.compile import parse_grammar
from tests.fsm.grammar._grammars import JSON_GBNF, LARK_GRAMMARS
from tests.fsm.grammar.test_schema_rules import LINKED, MUTUAL, TREE

ROOT = Path(__file__).resolve().parents[3]
COLD = json.loads((ROOT / "benchmarks" / "data" / "cold_schemas.json").read_text())
GBNF = ROOT / "tests" / "fixtures" / "gbnf"
BENCH_GRAMMARS = ROOT / "benchmarks" / "data" / "grammars"
REF_SUITE = CORPORA / "json-schema-test-suite" / "tests" / "draft2020-12" / "ref.json"

TWICE = {  # one recursive definition used by two properties, one plain one used twice
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "id": {"$ref": "#/$defs/name"},
                "left": {"$ref": "#/$defs/node"},
                "right": {"$ref": "#/$defs/node"},
            },
            "required": ["id"],
        },
        "name": {"type": "string", "pattern": "^[a-z]{1,4}$"},
    },
    "type": "object",
    "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"$ref": "#/$defs/node"}},
    "required": ["a"],
}


def _reference_is_regular(self, expr) -> bool:
    """The replaced ``is_regular``: every reference below ``expr``, walked per call."""
    hit = self._is_regular.get(id(expr))
    if hit is not None and hit[0] is expr:
        return hit[1]
    found = all(r.name in self.g.terminals or self.regular[r.name] for r in lower.nodes_of(expr))
    self._is_regular[id(expr)] = (expr, found)
    return found


def _reference_lowering(gdef):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lower._Lowering, "is_regular", _reference_is_regular)
        mp.setattr(lower, "renumber_placeholders", lambda text, table: text.translate(table))
        return lower.lower_grammar(gdef, Deadline(60))


def _assert_same_lowering(gdef) -> None:
    new = lower.lower_grammar(gdef, Deadline(60))
    old = _reference_lowering(gdef)
    assert type(new) is type(old)
    if isinstance(new, lower.CfgGrammar):
        for f in dataclasses.fields(lower.CfgGrammar):
            assert getattr(new, f.name) == getattr(old, f.name), f.name
    else:
        assert new == old


def _schema_gdefs(schema) -> list:
    """The ``GrammarDef`` each compile of ``schema`` lowers (none: a regex schema)."""
    seen = []
    real = grammar_compile.compile_grammar_def

    def capture(gdef, *args, **kwargs):
        seen.append(gdef)
        return real(gdef, *args, **kwargs)

    clear_cache()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grammar_compile, "compile_grammar_def", capture)
        try:
            compile_json_schema(schema, None, strict=False, allow_extra_properties=True)
        except StructgenError:
            pass
    clear_cache()
    return seen


@pytest.mark.parametrize(
    "schema",
    [COLD["recursive"]["schema"], TREE, LINKED, MUTUAL, TWICE],
    ids=["cold-recursive", "tree", "linked", "mutual", "defs-twice"],
)
def test_schema_lowering_equals_the_replaced_code(schema) -> None:
    gdefs = _schema_gdefs(schema)
    assert gdefs, "the schema compiles as a grammar"
    for gdef in gdefs:
        _assert_same_lowering(gdef)


@pytest.mark.skipif(not REF_SUITE.exists(), reason=f"JSON-Schema-Test-Suite not at {REF_SUITE}")
def test_test_suite_ref_schemas_lower_as_before() -> None:
    lowered = 0
    for group in json.loads(REF_SUITE.read_text()):
        for gdef in _schema_gdefs(group["schema"]):
            _assert_same_lowering(gdef)
            lowered += 1
    assert lowered >= 3  # the suite's recursive $ref groups reach the grammar path


@pytest.mark.parametrize("name", sorted(LARK_GRAMMARS))
def test_lark_lowering_equals_the_replaced_code(name) -> None:
    _assert_same_lowering(parse_grammar(LARK_GRAMMARS[name], "lark"))


@pytest.mark.parametrize(
    "path",
    sorted(GBNF.glob("*.gbnf")) + sorted(BENCH_GRAMMARS.glob("*.*")),
    ids=lambda p: p.name,
)
def test_grammar_file_lowering_equals_the_replaced_code(path) -> None:
    syntax = "lark" if path.suffix == ".lark" else "gbnf"
    _assert_same_lowering(parse_grammar(path.read_text(encoding="utf-8"), syntax))


def test_json_gbnf_lowering_equals_the_replaced_code() -> None:
    _assert_same_lowering(parse_grammar(JSON_GBNF, "gbnf"))
