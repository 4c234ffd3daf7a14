"""Copied numbers chosen as whole numerals by score, not by greedy's first digit.

Under a copy constraint a number field may only take the numerals the text writes
(``structgen.fsm.numerals``), but greedy decoding writes the first digit before it
knows which numeral it writes: for "58 years old ... 2026-02-11" an age's grammar is
``(?:58|2|11|...)``, this model starts ages with ``2``, and ``2`` closes as a whole
numeral. ``choose_numbers`` revisits each copied number field of the greedy objects
(``number_fields``: a property reached through objects whose subschema is a
``number`` or ``integer``, nullable or not): every numeral of the text that the object
stays valid with is scored, in the context the model wrote the value in (the prompt
and the output up to the value, then the numeral as JSON and the structural character
the output wrote after it), by the summed log-probability of its tokens (the mean,
as ``choose_options`` scores enum options, favours longer numerals: a confident second
digit raises it, so "4" weeks lost to "10"; benchmarks/RESULTS.md); all candidates of
a batch go in one batch of prompt-log-prob requests whose shared prefixes the radix
cache computes once. The best numeral replaces the value (a tie keeps greedy's); the
fields after it keep what greedy wrote. A ``null`` greedy wrote stays null (the
field's absence is not a numeral to score against).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import jsonschema

from structgen.extraction.choices import (
    CandidateJob,
    best_candidates,
    field_value,
    revise_outputs,
    same_json,
    with_field,
)
from structgen.extraction.prompt import prompt_text
from structgen.extraction.refs import MAX_REF_DEPTH
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.numerals import json_numeral, numerals

__all__ = ["choose_numbers", "number_fields", "numeral_candidates", "MAX_NUMERAL_CANDIDATES"]

MAX_NUMERAL_CANDIDATES = 32  # numerals scored per field (first written first)


def _is_number(root: Any, sub: Any) -> bool:
    sub = _resolve(root, sub)
    if not isinstance(sub, dict) or "const" in sub or "enum" in sub:
        return False
    for key in ("anyOf", "oneOf"):
        branches = sub.get(key)
        if isinstance(branches, list) and len(branches) == 2:
            rest = [b for b in (_resolve(root, b) for b in branches) if b != {"type": "null"}]
            if len(rest) == 1 and isinstance(rest[0], dict):
                sub = rest[0]
                break
    types = sub.get("type")
    types = [types] if isinstance(types, str) else list(types or ())
    return bool(types) and set(types) <= {"number", "integer", "null"} and types != ["null"]


def number_fields(schema: Any) -> list[tuple[str, ...]]:
    """The number and integer fields of ``schema`` reached through object properties only.

    Args:
        schema: a JSON Schema dict (local ``$ref`` s followed).

    Returns:
        Key paths, in schema order (items of arrays are not included).
    """
    out: list[tuple[str, ...]] = []

    def walk(sub: Any, path: tuple[str, ...], depth: int) -> None:
        sub = _resolve(schema, sub)
        if not isinstance(sub, dict) or depth > MAX_REF_DEPTH:
            return
        for name, prop in (sub.get("properties") or {}).items():
            if _is_number(schema, prop):
                out.append(path + (name,))
            else:
                walk(prop, path + (name,), depth + 1)

    walk(schema, (), 0)
    return out


def numeral_candidates(text: str) -> list[Any]:
    """The numerals ``text`` writes as JSON values (int where integral), first written
    first, without repeats, at most ``MAX_NUMERAL_CANDIDATES``.

    Args:
        text: the source text.

    Returns:
        ``int`` or ``float`` values, as the copy grammar writes them (``json_numeral``).
    """
    out: dict[str, Any] = {}
    for v in numerals(text):
        lit = json_numeral(v)
        if lit not in out:
            out[lit] = int(v) if v == v.to_integral_value() else float(Decimal(lit))
    return list(out.values())[:MAX_NUMERAL_CANDIDATES]


def choose_numbers(
    engine: Any,
    schema: Any,
    prompts: list[Any],
    raw_texts: list[str],
    texts: list[str],
    copied: list[tuple[str, ...]],
) -> list[str]:
    """The generated JSON texts with each copied number field decided among the text's
    numerals by score (module docstring).

    Args:
        engine: the engine (``tokenizer``, ``generate``).
        schema: the JSON Schema the objects are valid under (a dict).
        prompts: each document's chat messages, or a plain prompt string.
        raw_texts: each document's generated JSON text (one that does not parse as an
            object, or an empty one, is left as it is).
        texts: each document's source text (the numerals come from it).
        copied: each document's copy-constrained field paths (``field_path``: ``a.b``);
            only those number fields are revisited.

    Returns:
        The texts; where another numeral scored higher, the object written again
        compactly (``separators=(",", ":")``, keys in their order) with that numeral.
    """
    fields = number_fields(schema) if isinstance(schema, dict) else []
    if not fields:
        return list(raw_texts)
    checker = jsonschema.validators.validator_for(schema)(schema)

    def plan(i: int, value: Any, raw: str, spans: dict) -> Iterable[CandidateJob]:
        cands_all = numeral_candidates(texts[i])
        context = None
        for keys in fields:
            present, current = field_value(value, keys)
            if (
                ".".join(keys) not in copied[i]
                or not present
                or keys not in spans
                or isinstance(current, bool)
                or not isinstance(current, (int, float))
            ):
                continue
            cands = [c for c in cands_all if _valid_with(checker, value, keys, c)]
            if not any(same_json(c, current) for c in cands):
                cands.append(current)
            if len(cands) < 2:
                continue
            if context is None:
                context = prompt_text(engine, prompts[i])
            yield CandidateJob(i, keys, cands, context, raw, spans[keys])

    def score(jobs: list[CandidateJob], values: list[Any]) -> list[Any]:
        return best_candidates(engine, jobs, values, summed=True)

    def decide(job: CandidateJob, best: Any, value: Any) -> Any:
        # a document's later fields are set on its object with the earlier ones replaced
        return None if best is None else with_field(value, job.keys, best)

    return revise_outputs(raw_texts, plan, decide, score)


def _valid_with(checker: Any, value: Any, keys: tuple[str, ...], new: Any) -> bool:
    return checker.is_valid(with_field(value, keys, new))
