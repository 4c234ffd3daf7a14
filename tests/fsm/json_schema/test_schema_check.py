"""The metaschema check's fast path (``structgen.fsm.json_schema.check``) against jsonschema.

The fast table may only accept what jsonschema's ``check_schema`` accepts; whatever it
does not show valid goes to jsonschema, so errors stay jsonschema's. Checked on the
MaskBench corpus schemas and seeded mutations of them (wrong value types, negative
counts, bad regexes, duplicate names), and on hand-picked draft corner cases.
"""

from __future__ import annotations

import copy
import json
import random
import warnings

import jsonschema
import pytest
from jsonschema_specifications import REGISTRY

from benchmarks.corpus import CORPORA
from structgen.errors import InvalidSchemaError
from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.check import check_schema, constrained_keywords, proves_valid

PLAIN = CORPORA / "jsonschemabench" / "plain"
_BAD_VALUES = [
    None,
    1.5,
    1.0,
    -1,
    "x",
    [],
    {},
    True,
    False,
    [1, 1],
    ["a", "a"],
    "(",
    0,
    {"a": 1},
    ["string", "strin"],
    2**70,
    [1, True],
    "#frag",
    "a b",
]
_KEYS = [
    "minLength",
    "type",
    "required",
    "enum",
    "pattern",
    "items",
    "additionalProperties",
    "$ref",
    "exclusiveMinimum",
    "multipleOf",
    "properties",
    "const",
    "dependencies",
    "$id",
    "$anchor",
    "format",
    "prefixItems",
    "patternProperties",
    "$defs",
    "definitions",
    "minItems",
    "maximum",
    "examples",
    "uniqueItems",
    "not",
    "anyOf",
    "$vocabulary",
]


def _jsonschema_valid(schema: dict) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True


def _mutate(schema: dict, rng: random.Random) -> dict:
    schema = copy.deepcopy(schema)
    nodes: list[dict] = []
    todo = [schema]
    while todo:
        cur = todo.pop()
        if isinstance(cur, dict):
            nodes.append(cur)
            todo.extend(cur.values())
        elif isinstance(cur, list):
            todo.extend(cur)
    node = rng.choice(nodes)
    key = rng.choice(list(node)) if node and rng.random() < 0.6 else rng.choice(_KEYS)
    if key == "$schema":
        return schema
    node[key] = copy.deepcopy(rng.choice(_BAD_VALUES))
    return schema


def _corpus_schemas(per_subset: int) -> list[dict]:
    if not PLAIN.exists():
        pytest.skip(f"{PLAIN} not found")
    out = []
    for sub in sorted(p for p in PLAIN.iterdir() if p.is_dir()):
        for f in sorted(sub.glob("*.json"))[:per_subset]:
            schema = json.loads(f.read_text())["schema"]
            if isinstance(schema, dict):
                out.append(schema)
    return out


def test_fast_path_accepts_only_what_jsonschema_accepts() -> None:
    rng = random.Random(0)
    schemas = _corpus_schemas(15)
    cases = schemas + [_mutate(s, rng) for s in schemas for _ in range(3)]
    proved = valid = 0
    for schema in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls = jsonschema.validators.validator_for(schema)
        fast = proves_valid(schema, cls)
        ok = _jsonschema_valid(schema)
        assert not fast or ok, json.dumps(schema)[:300]
        proved += fast
        valid += ok
    # the fast path must carry the common case (else compile pays jsonschema again)
    assert proved >= 0.95 * sum(_jsonschema_valid(s) for s in schemas)
    assert valid > proved * 0.9  # the mutations did produce valid and invalid schemas


def test_shallow_walk_gives_the_counted_walks_verdict() -> None:
    """``proves_valid(shallow=True)`` (levels not counted) and ``check_schema(depth=...)``
    give what the counted walk and the measured depth give: the same verdict, message and
    pointer, on corpus schemas, their mutations (valid and invalid) and a schema just under
    ``nesting.SEGMENT`` levels."""
    from structgen.fsm.json_schema.ids import check_schema_depth
    from structgen.fsm.nesting import SEGMENT

    def outcome(schema, **kw):
        try:
            check_schema(schema, **kw)
            return None
        except InvalidSchemaError as exc:
            return str(exc), exc.pointer

    rng = random.Random(1)
    schemas = _corpus_schemas(15)
    deep: dict = {"type": "string"}
    while check_schema_depth(deep) < SEGMENT - 1:
        deep = {"properties": {"a": deep}, "minLength": 1}
    cases = schemas + [_mutate(s, rng) for s in schemas for _ in range(3)] + [deep]
    shown = refused = 0
    for schema in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls = jsonschema.validators.validator_for(schema)
        depth = check_schema_depth(schema)
        fast = proves_valid(schema, cls)
        if depth < SEGMENT:
            assert proves_valid(schema, cls, shallow=True) == fast
        want = outcome(schema)
        assert outcome(schema, depth=depth) == want, json.dumps(schema)[:300]
        shown += fast
        refused += want is not None
    assert shown > 100 and refused > 20  # both verdicts taken
    assert proves_valid(deep, jsonschema.Draft202012Validator, shallow=True)


@pytest.mark.parametrize(
    "schema",
    [
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "integer",
            "exclusiveMinimum": True,
        },
        {"$schema": "http://json-schema.org/draft-04/schema#", "items": True},
        {"$schema": "http://json-schema.org/draft-04/schema#", "required": []},
        {"$schema": "http://json-schema.org/draft-04/schema#", "minLength": 1.0},
        {"$schema": "http://json-schema.org/draft-04/schema#", "enum": [1, True]},
        {"$schema": "http://json-schema.org/draft-04/schema#", "enum": [1, 1.0]},
        {"$schema": "http://json-schema.org/draft-07/schema#", "exclusiveMinimum": True},
        {"$schema": "http://json-schema.org/draft-07/schema#", "patternProperties": {"(": {}}},
        {"items": [{"type": "string"}]},  # 2020-12: items is one schema
        {"$id": "http://x/y#frag"},
        {"$anchor": "1bad"},
        {"$anchor": "ok\n"},
        {"type": ["string", "string"]},
        {"required": ["a", "a"]},
        {"multipleOf": 0},
        {"properties": {"a": {"minLength": -1}}},
        {"dependentRequired": {"a": ["b", "b"]}},
        {"$vocabulary": {"https://example.com/v": True}},
        {"minLength": 2**70},
    ],
)
def test_corner_cases_agree_with_jsonschema(schema: dict) -> None:
    cls = jsonschema.validators.validator_for(schema)
    if proves_valid(schema, cls):
        assert _jsonschema_valid(schema)
    try:
        check_schema(schema)
        ok = True
    except InvalidSchemaError:
        ok = False
    assert ok == _jsonschema_valid(schema)


def test_constrained_keywords_cover_the_metaschemas() -> None:
    for cls in (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator):
        assert set(cls.META_SCHEMA["properties"]) <= constrained_keywords(cls)
    meta = jsonschema.Draft202012Validator.META_SCHEMA
    for vocab in (
        "core",
        "applicator",
        "unevaluated",
        "validation",
        "meta-data",
        "format-annotation",
        "content",
    ):
        props = REGISTRY[f"https://json-schema.org/draft/2020-12/meta/{vocab}"].contents[
            "properties"
        ]
        assert set(props) <= constrained_keywords(jsonschema.Draft202012Validator)
    assert set(meta["properties"]) <= constrained_keywords(jsonschema.Draft202012Validator)


def test_invalid_schema_error_is_jsonschemas() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}
    with pytest.raises(InvalidSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.pointer == "/properties/a/minLength"
    assert "-1 is less than the minimum of 0" in str(info.value)
    with pytest.raises(InvalidSchemaError, match="must be a string"):
        compile_json_schema({"$schema": 4, "type": "string"})


def test_common_schema_skips_jsonschema(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the fast path should have decided")

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", refuse)
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z]+$"},
            "n": {"type": "integer", "minimum": 0},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    assert compile_json_schema(schema).matches('{"name":"ab","n":3}')


def test_unknown_schema_uri_is_read_as_latest_draft_with_a_warning() -> None:
    import warnings

    from structgen.fsm import compile_json_schema

    schema = {
        "$schema": "http://example.com/nope",
        "type": "object",
        "properties": {"a": {"type": "integer", "exclusiveMinimum": 1}},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no DeprecationWarning from jsonschema's lookup
        grammar = compile_json_schema(schema)
    assert any("unknown $schema 'http://example.com/nope'" in w for w in grammar.warnings)
    assert grammar.matches('{"a":2}') and not grammar.matches('{"a":1}')  # 2020-12 reading
    known = compile_json_schema({**schema, "$schema": "http://json-schema.org/draft-07/schema#"})
    assert not any("$schema" in w for w in known.warnings)


@pytest.mark.parametrize(
    ("schema", "message", "pointer"),
    [
        (
            {"type": "strin"},
            "type name 'strin' is not one of array, .*; did you mean 'string'",
            "/type",
        ),
        (
            {"properties": {"a": {"type": ["integer", "nul"]}}},
            "type name 'nul' is not one of .*; did you mean 'null'",
            "/properties/a/type",
        ),
        ({"type": ["string", "string"]}, r"type \['string', 'string'\] is neither one of", "/type"),
        (
            {"type": ["string", 7]},
            "type name 7 is not one of array, boolean, integer, null, number",
            "/type",
        ),
        # a property named "type" keeps jsonschema's message: its value is a schema
        (
            {"properties": {"type": "string"}},
            "'string' is not of type 'object', 'boolean'",
            "/properties/type",
        ),
    ],
)
def test_a_bad_type_name_lists_the_names_and_the_nearest(schema, message, pointer) -> None:
    assert not _jsonschema_valid(schema)
    with pytest.raises(InvalidSchemaError, match=message) as info:
        check_schema(schema)
    assert info.value.pointer == pointer and str(info.value).endswith(f"(at {pointer})")
