"""Property tests: random schemas -> hypothesis-jsonschema instances, judged by jsonschema.

A small generator draws schemas from the keywords we enforce (types, numeric bounds,
multipleOf, string lengths, patterns, formats, enum/const, arrays, objects with required
and optional properties, anyOf over distinct types, local $ref). With ``strict=True`` a
schema either compiles (then every keyword is enforced) or raises
``UnsupportedSchemaError`` (skipped). For compiled schemas:

* every valid instance (``hypothesis_jsonschema.from_schema``), serialized canonically
  (schema property order, compact), is accepted;
* every mutation of it that ``jsonschema`` rejects is rejected too.
"""

from __future__ import annotations

import itertools
import json
import random
from fractions import Fraction

import jsonschema
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema

NAMES = ["a", "b", "id", "name", "x y", "é"]
# no \d, \w: ECMA-262 (what we enforce) makes them ASCII, Python's re (jsonschema's
# reference) Unicode, so the two judges differ on e.g. "٠"
PATTERNS = ["^[a-z]+$", "ab", "^[0-9]{3}-[0-9]{2}$", "^(red|green)$", "[0-9]"]
FORMATS = ["date", "uuid", "ipv4"]
SCALAR_VALUES = [None, True, False, 0, -1, 7, 2.5, "", "x", "é\n", [], {}, 10**20]


def _bounded(draw, schema: dict, integer: bool) -> dict:
    lo = draw(st.none() | st.integers(-50, 50))
    hi = draw(st.none() | st.integers(-50, 50))
    if lo is not None:
        key = draw(st.sampled_from(["minimum", "exclusiveMinimum"]))
        schema[key] = lo if integer else lo + draw(st.sampled_from([0, 0.5, 0.25]))
    if hi is not None:
        key = draw(st.sampled_from(["maximum", "exclusiveMaximum"]))
        schema[key] = hi if integer else hi + draw(st.sampled_from([0, 0.5]))
    if integer and draw(st.booleans()):
        schema["multipleOf"] = draw(st.integers(2, 7))
    return schema


@st.composite
def scalar_schema(draw) -> dict:
    kind = draw(
        st.sampled_from(["integer", "number", "string", "boolean", "null", "enum", "const"])
    )
    if kind in ("integer", "number"):
        return _bounded(draw, {"type": kind}, kind == "integer")
    if kind == "string":
        schema: dict = {"type": "string"}
        extra = draw(st.sampled_from(["len", "pattern", "format", "none"]))
        if extra == "len":
            lo = draw(st.integers(0, 4))
            schema.update(minLength=lo, maxLength=lo + draw(st.integers(0, 5)))
        elif extra == "pattern":
            schema["pattern"] = draw(st.sampled_from(PATTERNS))
        elif extra == "format":
            schema["format"] = draw(st.sampled_from(FORMATS))
        return schema
    if kind in ("enum", "const"):
        values = draw(
            st.lists(
                st.sampled_from(SCALAR_VALUES[:10] + [[1, "a"], {"k": None}]),
                min_size=1,
                max_size=4,
                unique_by=json.dumps,
            )
        )
        return {"enum": values} if kind == "enum" else {"const": values[0]}
    return {"type": kind}


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    array = st.builds(
        lambda items, lo, span: {
            "type": "array",
            "items": items,
            "minItems": lo,
            "maxItems": lo + span,
        },
        children,
        st.integers(0, 2),
        st.integers(0, 3),
    )
    obj = st.builds(
        lambda props, req: {
            "type": "object",
            "properties": props,
            "required": [k for k in props if k in req],
            "additionalProperties": False,
        },
        st.dictionaries(st.sampled_from(NAMES), children, min_size=1, max_size=3),
        st.sets(st.sampled_from(NAMES)),
    )
    any_of = st.builds(
        lambda a, b: {"anyOf": [a, b]},
        st.builds(lambda s: {"type": "string", "maxLength": s}, st.integers(0, 3)),
        children,
    )
    return array | obj | any_of


schemas = st.recursive(scalar_schema(), _extend, max_leaves=6)


@st.composite
def with_ref(draw) -> dict:
    """A schema, sometimes moved into ``$defs`` and referenced from the root."""
    schema = draw(schemas)
    if draw(st.booleans()):
        return {
            "$defs": {"item": schema},
            "type": "array",
            "items": {"$ref": "#/$defs/item"},
            "maxItems": 2,
        }
    return schema


def _resolve(schema, root):
    while isinstance(schema, dict) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _canonical(value, schema, root):
    """``value`` with object keys in schema property order (recursively), for serializing."""
    schema = _resolve(schema, root)
    if isinstance(schema, dict) and "anyOf" in schema:
        for branch in schema["anyOf"]:
            # the branch alone, with the root's $defs in scope (not the root's own
            # assertions: a nested anyOf branch under "type": "array" matched nothing)
            if jsonschema.Draft202012Validator(
                {"$defs": root["$defs"], **branch} if "$defs" in root else branch
            ).is_valid(value):
                return _canonical(value, branch, root)
        return value
    if isinstance(value, dict) and isinstance(schema, dict):
        props = schema.get("properties", {})
        ordered = [k for k in props if k in value] + [k for k in value if k not in props]
        return {k: _canonical(value[k], props.get(k, {}), root) for k in ordered}
    if isinstance(value, list) and isinstance(schema, dict):
        return [_canonical(v, schema.get("items", {}), root) for v in value]
    return value


def _dump(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _mutations(value, rng_draw) -> list:
    """A few structural and value mutations of ``value`` (some may still be valid)."""
    out = []
    paths = []

    def walk(v, path):
        paths.append(path)
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, path + [k])
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, path + [i])

    walk(value, [])
    path = rng_draw(st.sampled_from(paths))
    for new in SCALAR_VALUES:
        out.append(_replace(value, path, lambda _old, n=new: n))
    out.append(
        _replace(value, path, lambda old: {**old, "zz": 1} if isinstance(old, dict) else old)
    )
    out.append(
        _replace(
            value,
            path,
            lambda old: dict(list(old.items())[1:]) if isinstance(old, dict) and old else old,
        )
    )
    out.append(_replace(value, path, lambda old: old + old[:1] if isinstance(old, list) else old))
    out.append(_replace(value, path, lambda old: old[1:] if isinstance(old, list) else old))
    out.append(_replace(value, path, lambda old: old + "a" if isinstance(old, str) else old))
    out.append(_replace(value, path, lambda old: old + 1 if type(old) is int else old))
    out.append(_replace(value, path, lambda old: old - 1 if type(old) is int else old))
    return out


def _replace(value, path, fn):
    if not path:
        return fn(value)
    copy = json.loads(json.dumps(value))
    parent = copy
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = fn(parent[path[-1]])
    return copy


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
@given(schema=with_ref(), data=st.data())
def test_random_schemas_valid_accepted_invalid_rejected(schema, data) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    try:
        grammar = compile_json_schema(schema)
    except UnsupportedSchemaError:
        assume(False)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    # from_schema canonicalises the schema it is given in place (sorts properties)
    instance = data.draw(from_schema(json.loads(json.dumps(schema))), label="instance")
    # hypothesis-jsonschema ignores some formats (uuid): keep what jsonschema accepts
    assume(validator.is_valid(instance))
    text = _dump(_canonical(instance, schema, schema))
    assert grammar.matches(text), (json.dumps(schema), text)
    for bad in _mutations(instance, data.draw):
        if validator.is_valid(bad):
            continue
        bad_text = _dump(_canonical(bad, schema, schema))
        assert not grammar.matches(bad_text), (json.dumps(schema), bad_text)


def _exact_value(text: str) -> Fraction:
    mantissa, _, exp = text.lower().partition("e")
    return Fraction(mantissa) * Fraction(10) ** int(exp or 0)


def test_bounded_numbers_exponent_spellings_exact() -> None:
    """Bounded numbers accept ``json.dumps``'s exponent spellings (``1e+16``, ``1e-05``)
    where in range, and never one out of range (exact rational reference)."""
    rng = random.Random(0)
    texts = [
        "1e+16",
        "1e-05",
        "0e5",
        "-0e5",
        "0.0e1",
        "1e+20",
        "9.9e+19",
        "1e-0",
        "1E-7",
        "10e-2",
        "0.5e0",
        "-2e-1",
        "5e-324",
        "1.7976931348623157e+308",
        "1e-300",
    ]
    for _ in range(1500):
        e = rng.randint(-25, 25)
        texts.append(
            f"{rng.choice(['', '-'])}{rng.choice(['1', '9.99', '5', '1.5'])}e"
            f"{rng.choice(['', '+']) if e >= 0 else ''}{e:0{rng.choice([1, 3])}d}"
        )
    schemas = [
        {"minimum": 0},
        {"exclusiveMinimum": 0},
        {"minimum": -1, "maximum": 1},
        {"exclusiveMaximum": 0},
        {"minimum": 0.5},
        {"maximum": 0.001, "minimum": -3},
        {"exclusiveMinimum": 0, "exclusiveMaximum": 0.01},
        {"minimum": -5, "maximum": -1e-9},
        {"exclusiveMinimum": 100, "maximum": 1e20},
        {"minimum": 1e-5, "maximum": 1e-3},
    ]
    for bounds in schemas:
        grammar = compile_json_schema({"type": "number", **bounds})
        lo = (
            Fraction(str(bounds.get("minimum", bounds.get("exclusiveMinimum", "-inf"))))
            if "minimum" in bounds or "exclusiveMinimum" in bounds
            else None
        )
        hi = (
            Fraction(str(bounds.get("maximum", bounds.get("exclusiveMaximum"))))
            if "maximum" in bounds or "exclusiveMaximum" in bounds
            else None
        )
        accepted = 0
        for text in texts:
            x = _exact_value(text)
            inside = (lo is None or x > lo or (x == lo and "minimum" in bounds)) and (
                hi is None or x < hi or (x == hi and "maximum" in bounds)
            )
            if grammar.matches(text):
                accepted += 1
                assert inside, (bounds, text)
            elif inside and text == json.dumps(json.loads(text)):  # canonical spelling
                assert (bounds, text) == ({"exclusiveMinimum": 100, "maximum": 1e20}, "1e+20")
        assert accepted > 0, bounds
    assert compile_json_schema({"type": "number", "minimum": 0}).matches("1e+16")


def test_keys_are_written_in_schema_order() -> None:
    """The documented layout (README, ``objects``): the members of ``properties`` in the
    schema's order (not sorted, not the instance's), then required keys ``properties``
    does not list in ``required`` order, then extra keys. ``jsonschema`` accepts every
    order of the members; the grammar exactly one: the schema's."""
    schema = {
        "type": "object",
        "properties": {"z": {"type": "integer"}, "a": {"type": "integer"}, "m": {}},
        "required": ["q", "m", "p"],
    }
    value = {"z": 1, "a": 2, "m": "x", "q": None, "p": [], "extra": True}
    grammar = compile_json_schema(schema, allow_extra_properties=True)
    accepted = []
    for order in itertools.permutations(value):
        ordered = {k: value[k] for k in order}
        assert jsonschema.Draft202012Validator(schema).is_valid(ordered)
        if grammar.matches(json.dumps(ordered, separators=(",", ":"))):
            accepted.append(order)
    assert accepted == [("z", "a", "m", "q", "p", "extra")]
    # optional members keep their places when others are absent
    assert grammar.matches('{"a":2,"m":1,"q":0,"p":0}')
    assert not grammar.matches('{"m":1,"a":2,"q":0,"p":0}')
