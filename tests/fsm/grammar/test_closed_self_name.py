"""A closed rule's expression kept as it is, naming the rule ``ir.CLOSED_SELF``.

``schema_rules.rules_grammar`` puts the one per-process expression of the "any JSON value"
rule into every grammar, the rule naming itself ``CLOSED_SELF``; ``ir.rule_expr`` names it
for a reader that walks it. References: the named expression equals, node for node, the
expression read from the rule's own text with its own slot (``regex_expr``), for each
schema and whitespace option; with the process's store filled the lowering never renames
it (``self_named`` unused), and the lowered grammar equals the one built with the store
empty (where the rename happens), field by field.
"""

from __future__ import annotations

import pytest

from structgen.fsm.deadline import Deadline
from structgen.fsm.grammar import ir, lower, schema_rules
from structgen.fsm.grammar.ir import CLOSED_SELF, Ref, rule_expr
from structgen.fsm.grammar.lower import nodes_of
from structgen.fsm.grammar.schema_rules import regex_expr
from tests.fsm.grammar.test_closed_rules import SCHEMAS, _fields, _lowered, _rules


@pytest.mark.parametrize("whitespace", ["compact", "flexible", 2])
def test_named_closed_rule_is_its_texts_expression(whitespace):
    for name, schema in SCHEMAS.items():
        rules = _rules(schema, whitespace)
        gdef, _ = _lowered(rules, closed=True)
        (rule,) = gdef.closed
        kept = gdef.rules[rule]
        assert any(r.name == CLOSED_SELF for r in nodes_of(kept, Ref)), name
        rule_of = {i: f"d{i}" for i in range(len(rules.definitions))}
        own = regex_expr(rules.definitions[rules.any_rule], rule_of, Deadline(10))
        assert rule_expr(gdef, rule) == own, (name, whitespace)
        assert rule_expr(gdef, "root") is gdef.rules["root"]


def test_filled_store_lowers_without_renaming(monkeypatch):
    lower.clear_closed()
    schema_rules._closed_expr.cache_clear()
    for name, schema in SCHEMAS.items():
        rules = _rules(schema)
        _, empty = _lowered(rules, closed=True)  # fills the store (renames on its miss)
        with monkeypatch.context() as m:

            def unused(expr, rule):
                raise AssertionError("renamed with the store filled")

            m.setattr(lower, "self_named", unused)
            m.setattr(ir, "self_named", unused)
            _, filled = _lowered(rules, closed=True)
        assert _fields(filled) == _fields(empty), name
        assert _fields(filled) == _fields(_lowered(rules, closed=False)[1]), name
