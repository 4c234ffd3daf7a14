"""Where a copied string ends: the model's probability that the value ends there, not
greedy's first stop.

Greedy decoding under a span automaton (``structgen.fsm.copy``) closes a string at the
first boundary where the closing quote is the likeliest token, which cuts a name before
its head noun: ``"Nimbus"`` for "Her Nimbus router drops the Wi-Fi", ``"Aurora"`` for
"his Aurora desk lamp", ``"Trailblazer 40L"`` for "the Trailblazer 40L backpack".
``choose_span_ends`` revisits each copied free string value (no ``enum``, ``const``,
``format`` or ``pattern``) of the finished objects. Its candidates (``span_candidates``)
are the value and the spans that extend an occurrence of it by one to
``MAX_EXTRA_WORDS`` words of the same clause, each a lowercase word of letters that is
not a function word (``the``, ``at``, ``for``, ``is``, ...; ``evidence.names``): the
head nouns a greedy stop leaves behind, never a prepositional phrase ("Head of Research
at Quantix Labs"), a capitalised name ("00-950 Warszawa") or a number; nor an extension
that runs into another string field's value (``runs_into``: "Lyon" is not extended to
"Lyon jazz festival", the title's span; #23 o11). Each candidate is
written in the context the model wrote the value in (the prompt and the output up to
the value's opening quote, then the candidate, its closing quote and the structural
characters the output wrote after it) and scored by the log-probability of the tokens
from its closing quote on: the model's probability that the value ends there. The
candidate that ends most surely replaces the value when it ends more surely than the
value itself and the object stays valid under the schema (``jsonschema``); the fields
after it keep what greedy wrote. An extension that would make the object invalid is not
scored where the object it is decided on is the one greedy wrote (a document's first
field with a candidate left): it can never be chosen, and a field left with none sends
no request. All candidates of a batch go in one batch of
prompt-log-prob requests whose shared prefixes the radix cache computes once; a value
with no such continuation in the text costs nothing.

``extract`` runs it on each output as it finishes with ``score_span_ends=True``, the
measured default ``SCORE_SPAN_ENDS_DEFAULT`` (benchmarks/RESULTS.md, #23 q23: on the dev
set's greedy outputs +4 fields, none lost, no right value of an expected record changed; an
earlier version, mean log-probability over extensions by any unit, changed no value on
other documents).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from typing import Any

import jsonschema

from structgen.extraction.choices import (
    common_prefix,
    encode_in_context,
    revise_outputs,
    score_prompts,
    with_field,
)
from structgen.extraction.evidence.fields import free_string_schema
from structgen.extraction.evidence.names import FUNCTION_WORDS
from structgen.extraction.overlaps import overlaps, string_values
from structgen.extraction.prompt import prompt_text
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.copy import json_string_content
from structgen.runtime.sampling_params import SamplingParams

__all__ = [
    "choose_span_ends",
    "span_candidates",
    "runs_into",
    "summed_logprob",
    "MAX_EXTRA_WORDS",
    "SCORE_SPAN_ENDS_DEFAULT",
]

SCORE_SPAN_ENDS_DEFAULT = True  # measured: RESULTS.md, #23 q23
MAX_EXTRA_WORDS = 3  # words a candidate may add after the value
_STRUCTURAL = re.compile(r'"[,}\]:]*"?')
_SCORE = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
# one space, then a lowercase word of letters (inner hyphens and apostrophes allowed)
_HEAD_WORD = re.compile(r" ([^\W\d_]+(?:[-'’][^\W\d_]+)*)(?![\w'’-])")


def span_candidates(value: str, text: str, max_words: int = MAX_EXTRA_WORDS) -> list[str]:
    """``value`` and the spans of ``text`` extending an occurrence of it by head words.

    An occurrence counts where the text has no letter or digit right before or after it;
    it is extended by one to ``max_words`` words, each one space after the last and a
    lowercase word of letters (no digit, no capital first letter) that is not a function
    word (``evidence.names.FUNCTION_WORDS``); a punctuation mark, a line break, a
    capitalised word, a number or a function word ends the extension.

    Args:
        value: the value (a span of ``text``; one that is not is returned alone).
        text: the source text.
        max_words: most words added.

    Returns:
        Distinct candidates, ``value`` first, then each occurrence's extensions in text
        order, shortest first.
    """
    out = [value]
    if not value:
        return out
    for m in re.finditer(re.escape(value), text):
        s, pos = m.start(), m.end()
        if (s > 0 and text[s - 1].isalnum()) or (pos < len(text) and text[pos].isalnum()):
            continue
        for _ in range(max_words):
            w = _HEAD_WORD.match(text, pos)
            if w is None or not w.group(1)[0].islower() or w.group(1) in FUNCTION_WORDS:
                break
            pos = w.end()
            if text[s:pos] not in out:
                out.append(text[s:pos])
    return out


def runs_into(value: str, extension: str, other: str) -> bool:
    """Whether ``extension`` of ``value`` runs into ``other``, another string field's
    value: it overlaps ``other`` (``overlaps.overlaps``: equal, or one inside the other at
    word boundaries) where ``value`` does not already hold ``other`` whole ("Lyon" ->
    "Lyon jazz" runs into the title "Lyon jazz festival"; "Lyon jazz festival" -> "Lyon
    jazz festival runs" does not run into the location "Lyon", which it holds already).
    """
    held = overlaps(value, other) and len(" ".join(other.split())) <= len(" ".join(value.split()))
    return overlaps(extension, other) and not held


def _subschema(root: Any, keys: tuple[str, ...]) -> Any:
    node = root
    for k in keys:
        node = _resolve(root, node)
        node = (node.get("properties") or {}).get(k) if isinstance(node, dict) else None
    return node


def choose_span_ends(
    engine: Any,
    schema: Any,
    prompts: list[Any],
    raw_texts: list[str],
    texts: list[str],
    copied: list[tuple[str, ...]],
) -> list[str]:
    """The generated JSON texts with each copied string's end decided by the model's
    probability that the value ends there (module docstring).

    Args:
        engine: the engine (``tokenizer``, ``generate``).
        schema: the JSON Schema the objects are valid under (a dict).
        prompts: each document's chat messages (or prompt string).
        raw_texts: each document's generated JSON text (one that does not parse as an
            object is left as it is).
        texts: each document's source text.
        copied: each document's copied field paths (``extraction.copy.field_path``);
            fields reached through objects only (``a.b``) are revisited.

    Returns:
        The texts; where a longer span ends more surely, the object written again
        compactly (``separators=(",", ":")``, keys in their order) with that span.
    """
    checker = jsonschema.validators.validator_for(schema)(schema)

    def plan(i: int, value: Any, raw: str, spans: dict) -> Iterable[tuple]:
        template = None
        paths = {tuple(p.split(".")) for p in copied[i] if p and "[]" not in p}
        first = True  # no job planned yet: this document's first job is decided on ``value``
        strings = string_values(value)
        for keys, (start, end) in spans.items():
            current = raw[start:end]
            if keys not in paths or not current.startswith('"'):
                continue
            if free_string_schema(schema, _subschema(schema, keys)) is None:
                continue
            cands = span_candidates(json.loads(current), texts[i])
            others = [v for k, v in strings.items() if k != keys]
            cands = cands[:1] + [
                c for c in cands[1:] if not any(runs_into(cands[0], c, o) for o in others)
            ]
            if first and len(cands) > 1:
                # ``decide`` sees ``value`` unchanged here: an extension invalid in it can
                # never be chosen, so it is not scored (nor the job, with none left)
                cands = cands[:1] + [
                    c for c in cands[1:] if checker.is_valid(with_field(value, keys, c))
                ]
            if len(cands) < 2:
                continue
            first = False
            if template is None:
                template = prompt_text(engine, prompts[i])
            head = raw[: start + 1]  # up to the opening quote
            tail = _STRUCTURAL.match(raw, end - 1).group()
            bodies = [head + json_string_content(c) for c in cands]
            ids = encode_in_context(engine, template, [b + t for b in bodies for t in (tail, "")])
            fulls = ids[0::2]
            closes = [
                max(1, min(common_prefix(mid, full), len(full) - 1))
                for full, mid in zip(fulls, ids[1::2])
            ]
            yield (keys, cands, fulls, closes)

    def score(jobs: list[tuple], values: list[Any]) -> list[list[float]]:
        requests = [f for job in jobs for f in job[2]]
        params = [dataclasses.replace(_SCORE, prompt_logprobs_start=c) for j in jobs for c in j[3]]
        outs = score_prompts(engine, requests, params)
        scores_all, pos = [], 0
        for _, cands, fulls, closes in jobs:
            scores_all.append(
                [summed_logprob(o, f, c) for o, f, c in zip(outs[pos:], fulls, closes)]
            )
            pos += len(cands)
        return scores_all

    def decide(job: tuple, scores: list[float], value: Any) -> Any:
        keys, cands, _, _ = job
        order = sorted(range(1, len(cands)), key=lambda k: (-scores[k], k))
        for k in order:
            if scores[k] <= scores[0]:
                break
            trial = with_field(value, keys, cands[k])
            if checker.is_valid(trial):
                return trial
        return None

    return revise_outputs(raw_texts, plan, decide, score)


def summed_logprob(out: Any, full: list[int], start: int) -> float:
    """Summed log-probability of ``full[start:]`` (here: the closing quote and what
    follows it), ``-inf`` when the scoring request failed.
    """
    if out.finish_reason == "error" or out.prompt_logprobs is None:
        return float("-inf")
    return sum(out.prompt_logprobs[j][full[j]] for j in range(start, len(full)))
