"""``ids.schema_nesting`` (one walk: the JSON nesting and whether a ``$ref`` is held) and
``check_schema_depth`` built on it give what the separate walks gave; ``RefIndex``'s walk
gives what its former walk gave.

Reference: a breadth-first count of levels and ``nesting.json_depth`` (depth and pointer; it
and ``schema_nesting`` share ``json_depth_holding``), a plain search of every object for a
string ``$ref`` (the former ``schema_rules._has_ref``), and the former
``check_schema_depth``: ``check_ref_depth`` on every document, then ``nesting.check_depth``;
``RefIndex`` with its former ``_walk`` (``_FormerWalk``, as on main 4719932).
Documents: every schema of the JSON-Schema-Test-Suite, a seeded sample of MaskBench
(``../shared/corpora``) and synthetic ones past the depth limits.
"""

from __future__ import annotations

import json
import random

import pytest

from benchmarks.corpus import CORPORA
from structgen.errors import GrammarTooComplexError
from structgen.fsm.json_schema import ids
from structgen.fsm.nesting import MAX_SCHEMA_DEPTH, check_depth, json_depth

SUITE = CORPORA / "json-schema-test-suite" / "tests"
PLAIN = CORPORA / "jsonschemabench" / "plain"
PER_SUBSET = 25


def _has_ref(node) -> bool:
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            if isinstance(cur.get("$ref"), str):
                return True
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return False


def _objects(node) -> int:
    """Dict occurrences in ``node`` (a plain walk)."""
    stack, n = [node], 0
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            n += 1
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return n


def _levels(node) -> int:
    """Containers nested in ``node``, level by level (breadth first)."""
    level, n = [node], 0
    while True:
        level = [c for c in level if isinstance(c, (dict, list))]
        if not level:
            return n
        n += 1
        level = [v for c in level for v in (c.values() if isinstance(c, dict) else c)]


def _old_check(schema) -> int | str:
    """The former ``check_schema_depth``: its depth, or its error's message."""
    try:
        ids.check_ref_depth(schema)
        return check_depth(schema, MAX_SCHEMA_DEPTH, "JSON Schema")
    except GrammarTooComplexError as exc:
        return str(exc)


def _new_check(schema) -> int | str:
    try:
        return ids.check_schema_depth(schema)
    except GrammarTooComplexError as exc:
        return str(exc)


def _synthetic() -> list:
    n = MAX_SCHEMA_DEPTH + 10
    chain = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    chain[f"d{n}"] = {"type": "integer"}
    deep: dict = {"type": "integer"}
    for _ in range(n):
        deep = {"type": "array", "items": deep}
    ref_deep: dict = {"$ref": "#/$defs/d0"}  # a chain reached from a $ref nested deep
    for _ in range(40):
        ref_deep = {"type": "array", "items": ref_deep}
    return [
        {"$defs": chain, "$ref": "#/$defs/d0"},
        {"$defs": chain, "items": ref_deep},
        {"$defs": chain, "$ref": "#/$defs/d0", "items": deep},  # both limits passed
        deep,
        {"$defs": {"x": deep}, "items": {"$ref": "#/$defs/x"}},
        {"enum": [{"$ref": "#/nothing"}]},  # a $ref in a value, not a subschema
        {"properties": {"$ref": {"type": "string"}}},  # a property named $ref
        True,
        [],
    ]


def _documents() -> list:
    docs = _synthetic()
    for path in sorted(SUITE.rglob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            docs.append(group["schema"])
    if PLAIN.is_dir():
        for subset in sorted(p for p in PLAIN.iterdir() if p.is_dir()):
            files = sorted(subset.glob("*.json"))
            for f in random.Random(0).sample(files, min(PER_SUBSET, len(files))):
                docs.append(json.loads(f.read_text(encoding="utf-8")))
    return docs


@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/corpora not beside the checkout")
def test_schema_nesting_and_depth_checks_equal_the_separate_walks() -> None:
    docs = _documents()
    assert len(docs) > 1000
    refs = refused = 0
    for doc in docs:
        for limit in (MAX_SCHEMA_DEPTH, 2):
            depth, pointer, has_ref, objects = ids.schema_nesting(doc, limit)
            assert (depth, pointer) == json_depth(doc, limit)
            if depth <= limit:  # the walk met every object
                assert objects == _objects(doc)
            assert depth == min(_levels(doc), limit + 1)
            assert has_ref == (depth > limit or _has_ref(doc))
            # the depth check's own walk: the same counts, None past the limit
            counts = ids._nesting_counts(doc, limit)
            assert counts == (None if depth > limit else (depth, has_ref, objects))
        want = _old_check(doc)
        assert _new_check(doc) == want
        if isinstance(want, int):
            assert ids.schema_has_ref(doc) == _has_ref(doc)
            with ids.schema_depth_checked(doc):  # the block's memo
                assert ids.schema_has_ref(doc) == _has_ref(doc)
        refs += _has_ref(doc)
        refused += isinstance(want, str)
    assert refs > 100 and refused >= 4  # both paths taken


class _FormerWalk(ids.RefIndex):
    """``RefIndex`` with the walk it had before one-pass pointers (the reference)."""

    def _walk(self, root):
        out: dict = {}
        base = ""
        self._resources[base] = ()
        stack = [(root, out, "root", (), base, "")]  # ..., tokens, base, their pointer
        while stack:
            node, holder, slot, tokens, base, ptr = stack.pop()
            if not isinstance(node, dict):
                holder[slot] = node
                continue
            base = self._own_base(node, base, tokens)
            drop = {self._id_key, "$anchor", "$dynamicAnchor"}
            copy = {k: v for k, v in node.items() if k not in drop}
            holder[slot] = copy
            self.origin[id(copy)] = ptr
            if isinstance(node.get("$ref"), str):
                self._sites.append((copy, node["$ref"], base, False))
                if self.legacy and len(copy) > 1:
                    self._overridden.append(copy)
            elif isinstance(node.get("$dynamicRef"), str) and not self.legacy:
                self._sites.append((copy, node["$dynamicRef"], base, True))
            if not self.legacy and ("unevaluatedProperties" in node or "unevaluatedItems" in node):
                self._unevaluated.append(copy)
            if isinstance(node.get("$dynamicAnchor"), str) and not self.legacy:
                name = node["$dynamicAnchor"]
                self._dynamic[name] = self._dynamic.get(name, 0) + 1
            for key, val in node.items():
                if key in ids._IN_VALUE and isinstance(val, (dict, bool)):
                    stack.append((val, copy, key, tokens + (key,), base, ptr + ids._token(key)))
                elif key in ids._IN_ARRAY and isinstance(val, list):
                    copy[key] = items = list(val)
                    for i, sub in enumerate(val):
                        at = ptr + ids._token(key) + "/" + str(i)
                        stack.append((sub, items, i, tokens + (key, str(i)), base, at))
                elif key in ids._IN_MAP and isinstance(val, dict):
                    copy[key] = members = dict(val)
                    for name, sub in val.items():
                        if isinstance(sub, (dict, bool)):
                            at = ptr + ids._token(key) + ids._token(name)
                            stack.append((sub, members, name, tokens + (key, name), base, at))
        return out["root"]


def _origins(index, node, out: list) -> list:
    """``index.origin`` of every dict of its rewritten document, in one fixed order."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            out.append(index.origin.get(id(cur)))
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return out


def _ids_doc(n: int) -> dict:
    """Embedded resources, anchors, escaped keys and a $dynamicRef (synthetic)."""
    return {
        "$id": "https://example.com/root",
        "$defs": {
            "a/b~c": {"$id": "inner", "$anchor": "here", "type": "integer"},
            "dyn": {"$dynamicAnchor": "node", "items": {"$dynamicRef": "#node"}},
            "%41": {"$ref": "inner#here"},
        },
        "properties": {f"p{i}": {"$ref": "#/$defs/a~1b~0c"} for i in range(n)},
        "unevaluatedProperties": False,
    }


@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/corpora not beside the checkout")
def test_ref_index_walk_equals_the_former_walk() -> None:
    docs = [d for d in _documents() if isinstance(_old_check(d), int)]  # depth-checked
    docs += [_ids_doc(3), {"id": "#legacy", "$schema": "http://json-schema.org/draft-04/schema#"}]
    compared = 0
    for doc in docs:
        want = _FormerWalk(doc)
        got = ids.RefIndex(doc)
        assert got.root == want.root
        assert _origins(got, got.root, []) == _origins(want, want.root, [])
        assert got._resources == want._resources
        assert got._anchors == want._anchors
        assert got._dynamic == want._dynamic
        assert got._table.keys() == want._table.keys()
        assert [s[1:] for s in got._sites] == [s[1:] for s in want._sites]
        compared += 1
    assert compared > 1000


@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/corpora not beside the checkout")
def test_check_ref_depth_never_refuses_a_document_of_at_most_limit_objects() -> None:
    """The bound ``check_schema_depth`` skips ``check_ref_depth`` by: a document holding at
    most ``limit`` objects is never refused at ``limit`` (every document, every small limit);
    and the bound is tight: a ``$ref`` chain of ``limit + 1`` objects is refused."""
    docs = _documents()
    checked = refused = 0
    for doc in docs:
        n = _objects(doc)
        if n > 40 or not _has_ref(doc):
            continue
        for limit in range(1, n + 1):
            try:
                ids.check_ref_depth(doc, limit)
            except GrammarTooComplexError:
                assert n > limit
                refused += 1
            else:
                checked += n <= limit
    assert checked > 100 and refused > 100  # both outcomes below the bound's edge
    for limit in (1, 2, 5, 30):
        chain = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(limit - 1)}
        chain[f"d{limit - 1}"] = {"type": "integer"}
        doc = {"$defs": chain, "$ref": "#/$defs/d0"}  # limit + 1 objects in a chain
        assert _objects(doc) == limit + 2  # with $defs itself, which no path walks
        with pytest.raises(GrammarTooComplexError):
            ids.check_ref_depth(doc, limit)
