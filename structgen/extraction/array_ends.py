"""Where an array of copied values ends: cut where the model prefers closing it, and
generate the rest of the object again from the cut.

Under a copy constraint (``structgen.fsm.copy``) greedy decoding rarely closes an array
of copied values: after the real items the separator stays likelier than ``]``, so the
model goes on copying other spans of the text ("Python", "Rust", then "Lyon", "Berlin",
"Lyon", ... as skills) until the token budget or ``maxItems`` stops it, and the fields
after the array are generated after that run (the addresses, never written right).
Dropping the run from the finished object (``items.trim_items``) cannot bring those
fields back; the object has to be generated again from where the array should have
ended.

``choose_array_ends`` revisits each array of copied values reached through object
properties in a finished output (``copied_arrays``: an array of scalars at a copied
field path ``a.b[]``, ``copy.field_path``; an array of objects with a copied field) and
decides where it ends (``first_cut``):

* **a scored end** (arrays of scalars): at each item boundary before the first repeated
  item (``k`` items kept, ``k`` at least one and ``minItems``), the model's score of
  closing the array there (the output up to item ``k-1``'s end, then ``]`` and the
  structural characters the output wrote after the array, ``"],"``) against its score
  of going on with the item greedy wrote next (the separator and that item's text
  without its closing quote, ``","Lyon``), each the summed log-probability of the
  tokens after the two texts' shared tokens; the first boundary where closing scores
  higher ends the array, unless the text lists greedy's next item right after the last
  kept one ("Hiroshi Nakamura, Chiamaka Okafor and Sigrid Berg": the list the text writes
  goes on; ``items.listed_together``). All boundaries of a batch go in one batch of prompt-log-prob
  requests (the radix cache computes their shared prefix once);
* **the evidence** (any array, where no score ended it): the first item equal to an
  earlier one (JSON equality) starts a loop, and where ``items.trim_items``' rules keep
  a leading run of the items and drop every item after it (``items.kept_prefix``:
  invented objects pairing parts the text writes apart, a record copying an earlier
  one's single mention), the array ends after that run.

Where an array ends before greedy's end, the output is cut there (``cut_text``: the
output up to the kept items' end and ``]``), the grammar's forced text after it is
appended, and generation continues from that point under the same compiled grammar, its
matcher advanced over the kept output (``continuation``), within the request's token
budget (the tokens kept count against ``max_tokens``); the continuation's text replaces
everything after the cut. The continued outputs are revisited for the arrays after the
cut, up to ``MAX_ROUNDS`` rounds, so a document is generated at most ``MAX_ROUNDS + 1``
times and never past its budget. A continuation that fails keeps greedy's output.

Only an :class:`~structgen.runtime.engine.Engine` continues a cut output (its requests
run the matcher they are made with; another engine's replicas make their own): on any
other engine the pass changes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from structgen.extraction.choices import common_prefix, encode_in_context, score_prompts
from structgen.extraction.items import kept_prefix, listed_together
from structgen.extraction.prompt import prompt_text
from structgen.extraction.refs import resolve as _resolve
from structgen.extraction.spans import summed_logprob
from structgen.runtime.sampling_params import SamplingParams

__all__ = [
    "choose_array_ends",
    "copied_arrays",
    "CopiedArray",
    "boundary_texts",
    "boundary_scores",
    "first_cut",
    "repeat_index",
    "cut_text",
    "continuation",
    "MAX_ROUNDS",
    "SCORE_ARRAY_ENDS_DEFAULT",
]

SCORE_ARRAY_ENDS_DEFAULT = True  # measured: benchmarks/RESULTS.md, session 30 e12
MAX_ROUNDS = 3  # continuations per document (each after a cut further on)
_SCORE = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
_DECODER = json.JSONDecoder()
_AFTER_ARRAY = re.compile(r'[,}\]:]*"?')  # the structural characters after a ``]``


@dataclasses.dataclass(frozen=True)
class CopiedArray:
    """One array of scalars in a generated JSON text.

    Attributes:
        keys: the array's key path (object properties).
        start: the offset of its ``[`` in the text.
        end: the offset just after its ``]``.
        items: each item's ``(start, end)`` offsets (the item's JSON text).
        values: each item's value.
        min_items: the schema's ``minItems`` of the array (0 when it has none).
        scalars: whether its items are scalars (an array of objects: False); only an
            array of scalars has its boundaries scored.
    """

    keys: tuple[str, ...]
    start: int
    end: int
    items: tuple[tuple[int, int], ...]
    values: tuple[Any, ...]
    min_items: int
    scalars: bool = True


def _ws(raw: str, i: int) -> int:
    while i < len(raw) and raw[i] in " \t\n\r":
        i += 1
    return i


def _arrays(raw: str) -> dict[tuple[str, ...], tuple[int, int, list[tuple[int, int]], list]]:
    """Key path -> ``(start, end, item spans, item values)`` of every array of scalars
    or of objects reached through object properties in the JSON object text ``raw``.

    Raises:
        ValueError: ``raw`` is not a JSON object's text.
    """
    out: dict[tuple[str, ...], tuple[int, int, list[tuple[int, int]], list]] = {}

    def walk(i: int, path: tuple[str, ...] | None) -> int:
        i = _ws(raw, i)
        if raw.startswith("{", i):
            i = _ws(raw, i + 1)
            if raw.startswith("}", i):
                return i + 1
            while True:
                key, i = json.decoder.scanstring(raw, _ws(raw, i) + 1)
                i = _ws(raw, i)
                if not raw.startswith(":", i):
                    raise ValueError(f"expected ':' at {i}")
                i = _ws(raw, walk(i + 1, None if path is None else path + (key,)))
                if raw.startswith("}", i):
                    return i + 1
                if not raw.startswith(",", i):
                    raise ValueError(f"expected ',' or '}}' at {i}")
                i += 1
        if raw.startswith("[", i) and path is not None:
            start, spans, values = i, [], []
            i = _ws(raw, i + 1)
            scalars = objects = True
            if not raw.startswith("]", i):
                while True:
                    s = _ws(raw, i)
                    value, i = _DECODER.raw_decode(raw, s)
                    scalars = scalars and not isinstance(value, (dict, list))
                    objects = objects and isinstance(value, dict)
                    spans.append((s, i))
                    values.append(value)
                    i = _ws(raw, i)
                    if raw.startswith("]", i):
                        break
                    if not raw.startswith(",", i):
                        raise ValueError(f"expected ',' or ']' at {i}")
                    i += 1
            if scalars or objects:
                out[path] = (start, i + 1, spans, values)
            return i + 1
        _, end = _DECODER.raw_decode(raw, i)
        return end

    if not raw.lstrip().startswith("{"):
        raise ValueError("not a JSON object")
    walk(0, ())
    return out


def _min_items(schema: Any, keys: tuple[str, ...]) -> int:
    """The ``minItems`` of the array at ``keys`` (0 where the schema gives none)."""
    node = schema
    for k in keys:
        node = _resolve(schema, node)
        node = (node.get("properties") or {}).get(k) if isinstance(node, dict) else None
    node = _resolve(schema, node)
    low = node.get("minItems", 0) if isinstance(node, dict) else 0
    return low if isinstance(low, int) and not isinstance(low, bool) else 0


def copied_arrays(schema: Any, raw: str, copied: tuple[str, ...]) -> list[CopiedArray]:
    """The arrays of copied values in one generated JSON text, in text order.

    Args:
        schema: the JSON Schema the text was generated under (a dict).
        raw: the generated JSON text.
        copied: the document's copied field paths (``copy.field_path``: ``a.b[]`` is an
            array of copied values at ``a.b``, ``a[].c`` a copied field of the objects
            of the array at ``a``; a schema pointer, ``/$defs/...``, a copied field of
            a shared definition, which any array of objects may hold).

    Returns:
        One ``CopiedArray`` per array at a copied ``[]`` path whose items are all
        scalars (``scalars`` True), and per array of objects with a copied field
        (``scalars`` False); none where ``raw`` does not parse as a JSON object.
    """
    scalar_paths = {tuple(p[:-2].split(".")) for p in copied if p.endswith("[]")}
    object_paths = {tuple(p.split("[].", 1)[0].split(".")) for p in copied if "[]." in p}
    any_objects = any(p.startswith("/") for p in copied)
    if not (scalar_paths or object_paths or any_objects):
        return []
    try:
        found = _arrays(raw)
    except ValueError:
        return []
    out = []
    for keys, (s, e, spans, values) in found.items():
        scalars = not any(isinstance(v, dict) for v in values)
        if (keys in scalar_paths and scalars) or (
            not scalars and (keys in object_paths or any_objects)
        ):
            out.append(
                CopiedArray(
                    keys, s, e, tuple(spans), tuple(values), _min_items(schema, keys), scalars
                )
            )
    return sorted(out, key=lambda a: a.start)


def repeat_index(values: tuple[Any, ...] | list[Any]) -> int | None:
    """The index of the first item equal (JSON equality: ``true`` is not ``1``) to an
    earlier one, or None when the items are distinct.
    """
    seen: set[str] = set()
    for k, v in enumerate(values):
        key = json.dumps(v, sort_keys=True)
        if key in seen:
            return k
        seen.add(key)
    return None


def _boundaries(arr: CopiedArray) -> list[int]:
    """The item counts ``k`` at which the array's end is scored: at least one and
    ``minItems`` items kept, an item greedy wrote after them, before the first repeat.
    """
    if not arr.scalars:
        return []
    stop = repeat_index(arr.values)
    last = len(arr.values) if stop is None else stop
    return list(range(max(1, arr.min_items), last))


def boundary_texts(raw: str, arr: CopiedArray, k: int) -> tuple[str, str]:
    """``(close, go_on)``: the output up to item ``k - 1``'s end (a string item's
    content, before its closing quote) continued by closing the array (the item's
    closing quote, ``]`` and the structural characters the output wrote after the array)
    or by going on with item ``k`` (the item's closing quote, the separator greedy wrote
    and item ``k``'s text, a string without its closing quote).

    Raises:
        ValueError: ``k`` is not in ``1 .. len(items) - 1``.
    """
    if not 1 <= k < len(arr.items):
        raise ValueError(f"boundary {k} of an array of {len(arr.items)} items")
    prev_end = arr.items[k - 1][1]
    s, e = arr.items[k]
    quoted = raw[prev_end - 1] == '"'
    head = raw[: prev_end - 1] if quoted else raw[:prev_end]
    closing = '"' if quoted else ""
    after = _AFTER_ARRAY.match(raw, arr.end).group()
    close = head + closing + "]" + after
    item = raw[s : e - 1] if raw[e - 1] == '"' else raw[s:e]
    go_on = head + raw[prev_end - 1 if quoted else prev_end : s] + item
    return close, go_on


def first_cut(
    arr: CopiedArray,
    scores: dict[int, tuple[float, float]] | None = None,
    text: str | None = None,
) -> int | None:
    """How many items the array keeps, or None where it keeps greedy's items.

    Args:
        arr: the array.
        scores: boundary ``k`` -> ``(close, go_on)`` summed log-probabilities
            (``boundary_texts``); a boundary without scores is not decided by score.
        text: the document; with it, the evidence rules decide too.

    Returns:
        The first boundary ``k`` (``_boundaries``) where closing scores strictly higher
        than going on, except, with ``text``, one where the text lists item ``k`` right
        after item ``k - 1`` (``items.listed_together``: "Hiroshi Nakamura, Chiamaka
        Okafor"); else the first repeat's index or, with ``text``, the length of
        the leading run of items the evidence rules keep where they drop every item
        after it (``items.kept_prefix``), whichever is smaller, when it leaves at least
        ``max(1, minItems)`` items; else None.
    """
    for k in _boundaries(arr):
        if scores and k in scores and scores[k][0] > scores[k][1]:
            if text is not None and listed_together(arr.values[k - 1], arr.values[k], text):
                continue  # "Hiroshi Nakamura, Chiamaka Okafor": the text lists item k next
            return k
    stop = repeat_index(arr.values)
    if text is not None:
        kept = kept_prefix(list(arr.values), arr.min_items, text)
        if kept is not None:
            stop = kept if stop is None else min(stop, kept)
    if stop is not None and stop >= max(1, arr.min_items):
        return stop
    return None


def cut_text(raw: str, arr: CopiedArray, k: int) -> str:
    """The output up to item ``k - 1``'s end (``0 < k``), then ``]``: the text a
    continuation starts from.
    """
    return raw[: arr.items[k - 1][1]] + "]"


def continuation(
    engine: Any, prompt: Any, grammar: Any, params: SamplingParams, out: Any, head: str
) -> tuple[Any, list[int]] | None:
    """A request that continues ``out`` from ``head`` (a prefix of a valid output), and
    the output token ids it starts from, or None where it cannot be made.

    The output's own tokens that lie within the text ``head`` shares with ``out.text``
    are kept; the rest of ``head`` and the grammar's forced text after it are encoded
    with the tokenizer. The request's prompt is the prompt's ids and those ids; its
    matcher is ``grammar``'s, budgeted at ``params.max_tokens`` and advanced over them, so
    the kept tokens count against the budget and its ``max_tokens`` is what is left.

    Returns:
        ``(request, ids)``; None where the grammar refuses the ids, the budget has no
        token left, or the engine is not an ``Engine`` (module docstring).
    """
    from structgen.runtime.engine import Engine

    if not isinstance(engine, Engine) or engine.vocab is None:
        return None
    token_bytes = engine.vocab.token_bytes
    shared = len(_shared_prefix(out.text, head).encode("utf-8"))
    kept, used = [], 0
    for t in out.token_ids:
        n = len(token_bytes[t])
        if used + n > shared:
            break
        kept.append(t)
        used += n
    head_b = head.encode("utf-8")
    if b"".join(token_bytes[t] for t in kept) != head_b[:used]:
        return None  # the tokens do not spell the text (a stop string, say)
    try:
        rest = head_b[used:].decode("utf-8")
    except UnicodeDecodeError:
        return None
    advanced = _advanced(grammar, params, kept + _encode(engine, rest))
    if advanced is None:
        return None
    forced = advanced[0].forced_bytes()
    if forced:
        try:
            more = _advanced(grammar, params, kept + _encode(engine, rest + forced.decode("utf-8")))
        except UnicodeDecodeError:
            more = None
        if more is not None:
            advanced = more
    m, ids = advanced
    left = None if params.max_tokens is None else params.max_tokens - len(ids)
    if (left is not None and left <= 0) or m.is_terminated():
        return None
    prompt_ids = engine.encode_prompt(prompt)
    rest_params = dataclasses.replace(params, max_tokens=left)
    req = engine.make_request(prompt_ids + ids, rest_params, grammar)
    req.matcher = m
    return req, ids


def _encode(engine: Any, text: str) -> list[int]:
    return engine.tokenizer.encode(text, add_special_tokens=False) if text else []


def _advanced(grammar: Any, params: SamplingParams, ids: list[int]) -> tuple[Any, list[int]] | None:
    """``(matcher, ids)``: a fresh matcher of ``grammar`` (budget ``params.max_tokens``)
    advanced over ``ids``, or None where it refuses one of them.
    """
    m = grammar.matcher(max_tokens=params.max_tokens)
    for t in ids:
        if not m.advance(t):
            return None
    return m, ids


def _shared_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


def choose_array_ends(
    engine: Any,
    schema: Any,
    prompts: list[Any],
    outputs: list[Any],
    texts: list[str],
    copied: list[tuple[str, ...]],
    grammars: list[Any],
    params: SamplingParams,
) -> list[Any]:
    """The finished outputs with each array of copied values ended where the model
    prefers to end it, the rest of the object generated again from there (module
    docstring).

    Args:
        engine: the engine (``tokenizer``, ``generate``, ``make_request``,
            ``run_requests``).
        schema: the JSON Schema the outputs were generated under (a dict).
        prompts: each document's prompt (chat messages or a string).
        outputs: each document's finished ``RequestOutput``; one that did not finish
            with ``"stop"`` or ``"length"`` or whose text is not a JSON object is left.
        texts: each document's source text (the evidence rules read it).
        copied: each document's copied field paths (``copy.field_path``).
        grammars: each document's compiled grammar (the one its output was generated
            under).
        params: the sampling settings the outputs were generated with (their
            ``max_tokens`` is each document's whole budget).

    Returns:
        The outputs, in order; a continued one is a copy of the original whose
        ``text``, ``token_ids``, ``finish_reason`` and ``error`` are the cut output's
        head followed by the continuation's.
    """
    outs = list(outputs)
    after = [0] * len(outs)  # arrays starting before this offset are decided
    active = [
        d
        for d, o in enumerate(outs)
        if o.finish_reason in ("stop", "length") and o.text and copied[d]
    ]
    for _ in range(MAX_ROUNDS):
        planned: list[tuple[int, CopiedArray]] = []
        for d in active:
            for arr in copied_arrays(schema, outs[d].text, copied[d]):
                if arr.start < after[d]:
                    continue
                planned.append((d, arr))
                if first_cut(arr, None, texts[d]) is not None:
                    break  # it ends by this array at the latest: later ones are generated again
        if not planned:
            break
        scores = boundary_scores(engine, prompts, outs, planned)
        cuts: dict[int, tuple[CopiedArray, int]] = {}
        for d, arr in planned:
            if d not in cuts:
                k = first_cut(arr, scores.get((d, arr.start)), texts[d])
                if k is not None:
                    cuts[d] = (arr, k)
        made = []
        for d, (arr, k) in cuts.items():
            head = cut_text(outs[d].text, arr, k)
            req = continuation(engine, prompts[d], grammars[d], params, outs[d], head)
            if req is not None:
                made.append((d, req))
        if not made:
            break
        results = engine.run_requests([req for _, (req, _) in made])
        active = []
        token_bytes = engine.vocab.token_bytes
        for (d, (_, ids)), res in zip(made, results):
            if res.finish_reason not in ("stop", "length"):
                continue  # greedy's output stands
            head = b"".join(token_bytes[t] for t in ids).decode("utf-8", errors="replace")
            text = head + res.text
            try:
                json.loads(text)
            except ValueError:
                continue  # cut by the budget before the JSON closed: greedy's stands
            outs[d] = dataclasses.replace(
                outs[d],
                text=text,
                token_ids=list(ids) + list(res.token_ids),
                finish_reason=res.finish_reason,
                error=res.error,
            )
            after[d] = len(head)
            active.append(d)
    return outs


def boundary_scores(
    engine: Any, prompts: list[Any], outs: list[Any], planned: list[tuple[int, CopiedArray]]
) -> dict[tuple[int, int], dict[int, tuple[float, float]]]:
    """``(doc, array start)`` -> boundary ``k`` -> ``(close, go_on)``: the summed
    log-probabilities of each of the two ``boundary_texts``' token ids after the ids they
    share (at least one, never the last), every boundary of ``planned`` (``(doc, array)``
    pairs, ``outs[doc].text`` holding the array) scored in one batch of prompt-log-prob
    requests (``choices.score_prompts``); ``-inf`` where a request failed.
    """
    jobs: list[tuple[tuple[int, int], int, list[int], list[int], int]] = []
    templates: dict[int, str] = {}
    for d, arr in planned:
        ks = _boundaries(arr)
        if not ks:
            continue
        if d not in templates:
            templates[d] = prompt_text(engine, prompts[d])
        texts = [t for k in ks for t in boundary_texts(outs[d].text, arr, k)]
        ids = encode_in_context(engine, templates[d], texts)
        for j, k in enumerate(ks):
            close, go_on = ids[2 * j], ids[2 * j + 1]
            start = max(1, min(common_prefix(close, go_on), len(close) - 1, len(go_on) - 1))
            jobs.append(((d, arr.start), k, close, go_on, start))
    if not jobs:
        return {}
    requests = [ids for job in jobs for ids in (job[2], job[3])]
    params = [
        dataclasses.replace(_SCORE, prompt_logprobs_start=job[4]) for job in jobs for _ in (0, 1)
    ]
    results = score_prompts(engine, requests, params)
    scores: dict[tuple[int, int], dict[int, tuple[float, float]]] = {}
    for j, (key, k, close, go_on, start) in enumerate(jobs):
        pair = (
            summed_logprob(results[2 * j], close, start),
            summed_logprob(results[2 * j + 1], go_on, start),
        )
        scores.setdefault(key, {})[k] = pair
    return scores
