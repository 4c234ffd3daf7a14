"""Schemas and patterns nested 10, 1,000 and 100,000 deep (#20): the first two compile and
match exactly, the last raises ``GrammarTooComplexError`` naming the depth limit; nothing
raises ``RecursionError``.

Reference: ``jsonschema`` at depth 10 (valid and invalid instances); at depth 1,000
``jsonschema`` itself recurses past Python's limit, so the reference is the instance's
construction: exactly the nesting the schema describes is valid, one level more or less,
or a wrong leaf, is not (the same construction is checked against ``jsonschema`` at 10).
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from structgen.errors import GrammarTooComplexError
from structgen.fsm import compile_json_schema, compile_regex
from structgen.fsm.nesting import MAX_SCHEMA_DEPTH
from structgen.fsm.regex.parse import MAX_NESTING


def _arrays(n: int):
    schema: dict = {"type": "integer"}
    for _ in range(n):
        schema = {"type": "array", "items": schema, "minItems": 1, "maxItems": 1}
    return schema, lambda k, leaf="1": "[" * k + leaf + "]" * k


def _objects(n: int):
    schema: dict = {"type": "integer"}
    for _ in range(n):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema, lambda k, leaf="1": '{"a":' * k + leaf + "}" * k


def _all_of(n: int):
    schema: dict = {"type": "array", "items": {"type": "integer"}, "maxItems": 2}
    for i in range(n):
        schema = {"allOf": [schema, {"minItems": 1}] if i == 0 else [schema]}
    # valid: 1 or 2 integers; k stands for the number of items
    return schema, lambda k, leaf="1": "[" + ",".join([leaf] * k) + "]"


def _refs(n: int):
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "array", "items": {"type": "integer"}, "maxItems": 2}
    return {
        "$defs": defs,
        "$ref": "#/$defs/d0",
    }, lambda k, leaf="1": "[" + ",".join([leaf] * k) + "]"


KINDS = {"arrays": _arrays, "objects": _objects, "allOf": _all_of, "$ref": _refs}
# (instance shape parameter, valid?) for each kind, given its depth n
CASES = {
    "arrays": lambda n: [
        (n, "1", True),
        (n - 1, "1", False),
        (n + 1, "1", False),
        (n, '"x"', False),
    ],
    "objects": lambda n: [
        (n, "1", True),
        (n - 1, "1", False),
        (n + 1, "1", False),
        (n, "true", False),
    ],
    "allOf": lambda n: [
        (1, "1", True),
        (2, "7", True),
        (0, "1", False),
        (3, "1", False),
        (1, "1.5", False),
    ],
    "$ref": lambda n: [(0, "1", True), (2, "7", True), (3, "1", False), (1, "null", False)],
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", list(KINDS))
def test_depth_10_matches_jsonschema(kind):
    schema, text = KINDS[kind](10)
    grammar = compile_json_schema(schema)
    for k, leaf, valid in CASES[kind](10):
        instance = text(k, leaf)
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(instance)) is valid
        assert grammar.matches(instance) is valid, (kind, instance)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", list(KINDS))
def test_depth_1000_compiles_and_matches(kind):
    schema, text = KINDS[kind](1000)
    grammar = compile_json_schema(schema)
    for k, leaf, valid in CASES[kind](1000):
        assert grammar.matches(text(k, leaf)) is valid, (kind, k, leaf)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["arrays", "objects", "allOf"])
def test_depth_100000_names_the_limit(kind):
    schema, _ = KINDS[kind](100_000)
    with pytest.raises(GrammarTooComplexError, match=f"more than {MAX_SCHEMA_DEPTH} .*depth limit"):
        compile_json_schema(schema)


@pytest.mark.timeout(60)
def test_ref_chain_past_the_limit_names_it():
    """A ``$ref`` chain nests without JSON nesting: refused naming the limit and where."""
    schema, _ = _refs(MAX_SCHEMA_DEPTH + 10)
    with pytest.raises(GrammarTooComplexError, match="MAX_SCHEMA_DEPTH") as info:
        compile_json_schema(schema)
    assert str(info.value).endswith(f"at /$defs/d{MAX_SCHEMA_DEPTH - 1}")


@pytest.mark.timeout(60)
def test_ref_chain_100000_is_refused_before_the_conversion(monkeypatch):
    """The 100,000-long chain is refused by ``check_ref_depth``'s walk along the chain,
    before any walk of the whole document (the converter's ``RefIndex`` is never built)."""
    from structgen.fsm.json_schema import ids

    def no_index(*args, **kwargs):
        raise AssertionError("the conversion started")

    monkeypatch.setattr(ids.RefIndex, "__init__", no_index)
    schema, _ = _refs(100_000)
    with pytest.raises(GrammarTooComplexError, match="more than 5000 deep .*counting \\$ref"):
        compile_json_schema(schema)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("max_recursion_depth", [None, 3])
def test_one_compile_walks_the_depth_checks_once(monkeypatch, max_recursion_depth):
    """One compile walks the document for its depth checks once (``_nesting_counts``: the
    JSON nesting, whether a ``$ref`` is held, the objects; not at each entry point), and
    ``check_ref_depth`` only for a document holding a ``$ref`` and more than
    ``MAX_SCHEMA_DEPTH`` objects; a second object, or the same one outside the compile, is
    checked again; a document past the limit is walked again by ``schema_nesting`` for its
    error's pointer; and the checked compile still refuses what the checks refuse."""
    from structgen.fsm import clear_cache
    from structgen.fsm.json_schema import ids

    calls = []
    for name in ("check_ref_depth", "schema_nesting", "_nesting_counts"):
        real = getattr(ids, name)
        monkeypatch.setattr(
            ids, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k)
        )
    schema, write = _refs(12)
    for _ in range(2):
        clear_cache()
        calls.clear()
        g = compile_json_schema(schema, max_recursion_depth=max_recursion_depth)
        assert calls == ["_nesting_counts"]  # 12 $refs, few objects: no chain too long
        assert g.matches(write(2)) and not g.matches(write(3))
    calls.clear()
    assert ids.check_schema_depth(schema) == ids.check_schema_depth(json.loads(json.dumps(schema)))
    assert calls == ["_nesting_counts"] * 2
    plain, write = _arrays(12)
    clear_cache()
    calls.clear()
    g = compile_json_schema(plain, max_recursion_depth=max_recursion_depth)
    assert calls == ["_nesting_counts"]
    assert g.matches(write(12)) and not g.matches(write(11))
    deep, _ = _refs(MAX_SCHEMA_DEPTH + 10)
    calls.clear()
    with pytest.raises(GrammarTooComplexError, match="MAX_SCHEMA_DEPTH"):
        compile_json_schema(deep, max_recursion_depth=max_recursion_depth)
    assert calls == ["_nesting_counts", "check_ref_depth"]  # within the JSON limit
    too_deep, _ = _arrays(MAX_SCHEMA_DEPTH + 10)
    calls.clear()
    with pytest.raises(GrammarTooComplexError, match="arrays/objects deep .*, at /items/items"):
        compile_json_schema(too_deep, max_recursion_depth=max_recursion_depth)
    assert calls == ["_nesting_counts", "schema_nesting", "check_ref_depth"]  # the pointer


@pytest.mark.timeout(60)
def test_ref_chain_at_the_limit_compiles_and_matches():
    """The longest chain within the limit compiles (the root, d0 ... d4997, the array's
    ``items``: 5,000 subschemas); one reference more is refused where the converter's own
    count refuses it (``/$defs/d4998/items``, checked with the early walk switched off)."""
    schema, text = _refs(MAX_SCHEMA_DEPTH - 3)
    grammar = compile_json_schema(schema)
    for k, leaf, valid in CASES["$ref"](MAX_SCHEMA_DEPTH - 3):
        assert grammar.matches(text(k, leaf)) is valid, (k, leaf)
    with pytest.raises(GrammarTooComplexError, match="MAX_SCHEMA_DEPTH") as info:
        compile_json_schema(_refs(MAX_SCHEMA_DEPTH - 2)[0])
    assert str(info.value).endswith(f"at /$defs/d{MAX_SCHEMA_DEPTH - 2}/items")


@pytest.mark.timeout(60)
def test_ref_chain_in_an_embedded_resource_meets_the_converter_limit():
    """References relative to an embedded resource (``$id``) are not followed by the early
    walk; the converter's own depth check refuses the chain, at the same count."""
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(MAX_SCHEMA_DEPTH + 10)}
    defs[f"d{MAX_SCHEMA_DEPTH + 10}"] = {"type": "integer"}
    resource = {"$id": "https://example.com/r", "$defs": defs, "$ref": "#/$defs/d0"}
    schema = {"$defs": {"r": resource}, "$ref": "https://example.com/r"}
    with pytest.raises(GrammarTooComplexError, match="MAX_SCHEMA_DEPTH") as info:
        compile_json_schema(schema, max_convert_seconds=50.0)  # a loaded machine: the depth
    # root, r, then d0 ... d4997: 5,000 subschemas; d4998 is the first past the limit
    assert str(info.value).endswith(f"at /$defs/r/$defs/d{MAX_SCHEMA_DEPTH - 2}")


def _chain(n: int, hop: str = "$ref") -> dict:
    """``n`` definitions, each referring to the next (``hop``: "$ref", or "anyOf" for two
    references to it: 2^n paths), the last an integer."""
    defs: dict = {}
    for i in range(n):
        ref = {"$ref": f"#/$defs/d{i + 1}"}
        defs[f"d{i}"] = ref if hop == "$ref" else {"anyOf": [ref, dict(ref)]}
    defs[f"d{n}"] = {"type": "integer"}
    return defs


@pytest.mark.timeout(60)
def test_check_ref_depth_boundary_cycles_and_unused_definitions():
    from structgen.fsm.json_schema.ids import check_ref_depth

    limit = 100
    check_ref_depth({"$defs": _chain(limit - 2), "$ref": "#/$defs/d0"}, limit)
    with pytest.raises(GrammarTooComplexError, match=f"more than {limit} deep") as info:
        check_ref_depth({"$defs": _chain(limit - 1), "$ref": "#/$defs/d0"}, limit)
    assert str(info.value).endswith(f"at /$defs/d{limit - 1}")
    # definitions no subschema refers to are never converted: not walked
    check_ref_depth({"$defs": _chain(10 * limit), "type": "integer"}, limit)
    # a cycle is walked once; so is a target two references share (2^30 paths)
    tree = {
        "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
        "properties": {"a": {"$ref": "#/$defs/t"}, "b": {"$ref": "#"}},
    }
    check_ref_depth(tree, limit)
    check_ref_depth({"$defs": _chain(30, "anyOf"), "$ref": "#/$defs/d0"}, limit)
    with pytest.raises(GrammarTooComplexError, match="counting \\$ref"):
        check_ref_depth({"$defs": _chain(10 * limit, "anyOf"), "$ref": "#/$defs/d0"}, limit)


@pytest.mark.timeout(60)
def test_check_ref_depth_skips_what_the_draft_ignores():
    """Draft 7: the siblings of ``$ref`` are ignored, so a chain below one is not walked;
    the same document in draft 2020-12 is refused."""
    from structgen.fsm.json_schema.ids import check_ref_depth

    limit = 100
    schema = {
        "$defs": {**_chain(2 * limit), "leaf": {"type": "integer"}},
        "$ref": "#/$defs/leaf",
        "properties": {"a": {"$ref": "#/$defs/d0"}},
    }
    with pytest.raises(GrammarTooComplexError, match="MAX_SCHEMA_DEPTH"):
        check_ref_depth(schema, limit)
    draft7 = "http://json-schema.org/draft-07/schema#"
    check_ref_depth({"$schema": draft7, **schema}, limit)


@pytest.mark.timeout(60)
def test_deep_invalid_schema_is_reported_with_its_pointer():
    """Past what ``jsonschema``'s recursive validator takes, the metaschema is still
    checked (subschema by subschema) and the error names the pointer."""
    schema: dict = {"type": "strnig"}
    for _ in range(500):
        schema = {"type": "array", "items": schema}
    from structgen.errors import InvalidSchemaError

    with pytest.raises(InvalidSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.pointer == "/items" * 500 + "/type"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [10, 1000])
def test_nested_groups_match_like_re(depth):
    pattern = "(" * depth + "a|b" + ")" * depth + "(?:" * depth + "c+" + ")" * depth
    grammar = compile_regex(pattern)
    flat = re.compile("(?:a|b)c+")  # re recurses per group: the same language, unnested
    if depth <= 100:
        flat = re.compile(pattern)
    for text in ["ac", "bccc", "a", "c", "abc", "acx", ""]:
        assert grammar.matches(text) is bool(flat.fullmatch(text)), text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [90, 1000])
def test_nested_repeats_are_derived_without_recursion(depth):
    """Optional groups nested ``depth`` deep: the first derivative walks the whole nesting
    (``(x?)?`` is kept as two repetitions). ``re`` is the reference where it can parse."""
    pattern = "(?:" * depth + "a" + ")?" * depth + "b"
    grammar = compile_regex(pattern)
    reference = re.compile(pattern if depth <= 100 else "a?b")
    for text in ["ab", "b", "aab", "a", "", "abb"]:
        assert grammar.matches(text) is bool(reference.fullmatch(text)), text


@pytest.mark.timeout(60)
def test_groups_100000_deep_name_the_limit():
    with pytest.raises(GrammarTooComplexError, match=f"MAX_NESTING={MAX_NESTING}"):
        compile_regex("(" * 100_000 + "a" + ")" * 100_000)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", ["const", "enum"])
def test_deep_values_name_the_limit(key):
    from structgen.fsm.nesting import MAX_VALUE_DEPTH

    shallow, deep = 1, 1
    for _ in range(MAX_VALUE_DEPTH):
        shallow = [shallow]
    for _ in range(1000):
        deep = [deep]
    wrap = (lambda v: v) if key == "const" else (lambda v: [v])
    grammar = compile_json_schema({key: wrap(shallow)})
    assert grammar.matches("[" * MAX_VALUE_DEPTH + "1" + "]" * MAX_VALUE_DEPTH)
    with pytest.raises(GrammarTooComplexError, match=f"{key} values nest more than"):
        compile_json_schema({key: wrap(deep)})


# (pattern, strings) for the JSON ``pattern`` nested in groups: each core is searched as
# ``re.search`` does (anchors at its ends, classes, escapes, repetitions, alternation)
_PATTERN_CORES = [
    r"^[a-c]+\d{2,3}$",
    r"a|b$",
    r"^x(y|z)*?$",
    r"\.[^\s]",
    r"^(ab|c)+$",
    r'["\\]\n?',
    r"^\w{2}(-\w{2})?$",
]
_PATTERN_STRINGS = [
    "", "a", "b", "ab", "abc", "c", "ab12", "ab1234", "xab123", "x", "xy", "xyzzy", "xq",
    ".", "a.b", ". ", "abcab", "cc", 'q"', "\\\n", "en", "en-GB", "en-", "ba",
]  # fmt: skip


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [0, 250, 1000, MAX_NESTING - 10])
def test_pattern_nested_deep_matches_re(depth):
    """``pattern`` wrapped in ``depth`` groups (past ``RE_MAX_NESTING``: read by
    ``plain_tree`` and translated without recursion) matches what ``re.search`` matches
    with the core alone (the same language; ``re`` cannot parse 1,000 levels)."""
    for core in _PATTERN_CORES:
        grammar = compile_json_schema(
            {"type": "string", "pattern": "(?:" * depth + core + ")" * depth}
        )
        for s in _PATTERN_STRINGS:
            expected = bool(re.search(core, s))
            assert grammar.matches(json.dumps(s)) is expected, (depth, core, s)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [90, 1000])
def test_pattern_nested_repeats_and_alternations(depth):
    """Optional groups and alternations nested ``depth`` deep in a ``pattern``; ``re`` is
    the reference where it parses the pattern, else the flat pattern of the same language."""
    pattern = "^" + "(?:" * depth + "a" + ")?" * depth + "(b|" * depth + "c" + ")" * depth + "$"
    grammar = compile_json_schema({"type": "string", "pattern": pattern})
    reference = re.compile(pattern if depth <= 90 else "^a?(b|c)$")
    for s in ["ab", "b", "ac", "c", "aab", "a", "", "abc", "bc", "xb"]:
        assert grammar.matches(json.dumps(s)) is bool(reference.search(s)), s


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth", [20_000, 100_000])
def test_pattern_past_max_nesting_gets_compile_regexs_error(depth):
    """Past ``MAX_NESTING`` a schema ``pattern`` gets ``compile_regex``'s own error, word
    for word (a ``GrammarTooComplexError``, not an unsupported-keyword error)."""
    deep = "(" * depth + "a" + ")" * depth
    with pytest.raises(GrammarTooComplexError) as regex_error:
        compile_regex(deep)
    with pytest.raises(GrammarTooComplexError) as schema_error:
        compile_json_schema({"type": "string", "pattern": deep})
    assert str(schema_error.value) == str(regex_error.value)
    assert f"MAX_NESTING={MAX_NESTING}" in str(schema_error.value)


@pytest.mark.timeout(60)
def test_pattern_deep_next_to_length_bounds_is_a_clear_refusal():
    """``minLength`` with a pattern past ``RE_MAX_NESTING``: the exact product (a recursive
    NFA build) is refused naming the limit under ``strict``; otherwise the bound is ignored
    with that warning and the pattern still holds."""
    from structgen.errors import UnsupportedSchemaError

    schema = {"type": "string", "pattern": "^" + "(" * 1000 + "a|b" + ")" * 1000, "minLength": 2}
    with pytest.raises(UnsupportedSchemaError, match="RE_MAX_NESTING"):
        compile_json_schema(schema)
    grammar = compile_json_schema(schema, strict=False)
    assert any("RE_MAX_NESTING" in w for w in grammar.warnings)
    assert grammar.matches('"ax"') and not grammar.matches('"xa"')
