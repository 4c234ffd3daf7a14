"""Where a copied string ends: candidate spans scored by the model, not greedy's first stop.

Greedy decoding under a span automaton (``structgen.fsm.copy``) closes the string at the
first boundary where the closing quote is the likeliest token (``"Aiko"`` for
``"Aiko Tanaka"``). ``choose_span_ends`` revisits each copied string value of the
greedy objects: the candidates are the value itself and the spans of the text that
extend one of its occurrences by up to ``MAX_EXTRA_UNITS`` units (``fsm.copy.text_units``)
on the same line; each is scored, in the context the model wrote the value in (the
prompt and the output up to the value's opening quote, then the candidate, its closing
quote and the structural characters the output wrote after it), by the mean
log-probability of its tokens, as ``select`` scores options (``structgen.lang``); all
candidates of all documents go in one batch of prompt-log-prob requests whose shared
prefixes the radix cache computes once. The best candidate replaces the value when the
object stays valid under the schema (``jsonschema``); the fields after it keep what
greedy wrote. ``extract`` runs it with ``score_span_ends=True`` (off by default: on the
test documents it changed no value and cost about as much as the generation itself,
benchmarks/RESULTS.md, "Copy constraints").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import jsonschema

from structgen.extraction.choices import _with, common_prefix, mean_logprob, revise_outputs
from structgen.fsm.copy import json_string_content, text_units
from structgen.runtime.sampling_params import SamplingParams

__all__ = [
    "choose_span_ends",
    "span_candidates",
    "MAX_EXTRA_UNITS",
]

MAX_EXTRA_UNITS = 6  # units a candidate may add after the greedy value
_STRUCTURAL = re.compile(r'"[,}\]:]*"?')
_SCORE = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)


def span_candidates(value: str, text: str, max_extra: int = MAX_EXTRA_UNITS) -> list[str]:
    """``value`` and the spans of ``text`` extending an occurrence of it to the right.

    Args:
        value: the greedy value (a span of ``text``).
        text: the source text.
        max_extra: most units added.

    Returns:
        Distinct candidates, ``value`` first; an extension never crosses a line break
        and never ends in whitespace.
    """
    units = text_units(text)
    starts = [0]
    for u in units:
        starts.append(starts[-1] + len(u))
    ends = {e: k for k, e in enumerate(starts)}  # unit boundary offset -> unit index
    out = [value]
    for m in re.finditer(re.escape(value), text):
        k = ends.get(m.end())
        if m.start() not in ends or k is None:
            continue
        for extra in range(1, max_extra + 1):
            if k + extra > len(units) or "\n" in units[k + extra - 1]:
                break
            if units[k + extra - 1].isspace():
                continue
            cand = text[m.start() : starts[k + extra]]
            if cand not in out:
                out.append(cand)
    return out


def _string_paths(value: Any, paths: tuple[str, ...]) -> list[tuple[list[str], str]]:
    """(key path, string) of each copied string field reachable through objects only."""
    out = []
    for path in paths:
        if "[]" in path or path.startswith("/"):
            continue
        keys = path.split(".") if path else []
        node = value
        for k in keys:
            node = node.get(k) if isinstance(node, dict) else None
        if keys and isinstance(node, str):
            out.append((keys, node))
    return out


def choose_span_ends(
    engine: Any,
    schema: Any,
    prompts: list[Any],
    raw_texts: list[str],
    texts: list[str],
    copied: list[tuple[str, ...]],
) -> list[str]:
    """The generated JSON texts with each copied string's end decided by score (module
    docstring).

    Args:
        engine: the engine (``tokenizer``, ``generate``).
        schema: the JSON Schema the objects are valid under (a dict).
        prompts: each document's chat messages.
        raw_texts: each document's generated JSON text (one that does not parse as an
            object is left as it is).
        texts: each document's source text.
        copied: each document's copied field paths (``extraction.copy.field_path``).

    Returns:
        The texts; where a longer span scored higher, the object written again compactly
        (``separators=(",", ":")``, keys in their order) with that span.
    """
    checker = None

    def plan(i: int, value: Any, raw: str, _: dict) -> Iterable[tuple]:
        template = None
        for keys, current in _string_paths(value, copied[i]):
            cands = span_candidates(current, texts[i])
            written = '"' + json_string_content(current) + '"'
            key = '"' + json_string_content(keys[-1]) + '":'
            at = raw.find(key + written)
            if len(cands) < 2 or at < 0:
                continue
            if template is None:
                template = engine.tokenizer.apply_chat_template(
                    prompts[i], tokenize=False, add_generation_prompt=True
                )
            start = at + len(key) + 1  # after the opening quote
            tail = _STRUCTURAL.match(raw, start + len(written) - 2).group()
            base = engine.tokenizer.encode(template + raw[:start], add_special_tokens=False)
            fulls = [
                engine.tokenizer.encode(
                    template + raw[:start] + json_string_content(c) + tail,
                    add_special_tokens=False,
                )
                for c in cands
            ]
            yield (keys, cands, base, fulls)  # (keys, candidates, base ids, candidate ids)

    def score(jobs: list[tuple], values: list[Any]) -> list[list[float]]:
        nonlocal checker
        requests, params = [], []
        for _, _, base, fulls in jobs:
            for full in fulls:
                first = common_prefix(base, full)
                requests.append(full)
                params.append(_with_start(max(1, first)))
        outs = engine.generate(requests, params)
        checker = jsonschema.validators.validator_for(schema)(schema)
        scores_all = []
        pos = 0
        for _, _, base, fulls in jobs:
            scores = []
            for full, out in zip(fulls, outs[pos : pos + len(fulls)]):
                scores.append(mean_logprob(out, full, max(1, common_prefix(base, full))))
            pos += len(fulls)
            scores_all.append(scores)
        return scores_all

    def decide(job: tuple, scores: list[float], value: Any) -> Any:
        keys, cands, _, _ = job
        order = sorted(range(len(cands)), key=lambda k: (-scores[k], k))
        for k in order:
            if k == 0:
                break
            trial = _with(value, keys, cands[k])
            if checker.is_valid(trial):
                return trial
        return None

    return revise_outputs(raw_texts, plan, decide, score)


def _with_start(start: int) -> SamplingParams:
    import dataclasses

    return dataclasses.replace(_SCORE, prompt_logprobs_start=start)
