"""Jump-forward plans: append the grammar's forced text as canonical tokens.

Where the matcher has a single way on (``Matcher.forced_bytes()``), the engine appends
that text without sampling. Tokenizing the forced text on its own gives token splits the
model would never produce (``"`` + ``name`` where the tokenizer writes ``"name``), so the
text is retokenized together with the last few generated tokens (SGLang's compressed-FSM
approach): the plan says how many trailing tokens to drop and which tokens to append.

Rules (``plan_jump_forward``):

1. The forced bytes are cut to whole UTF-8 characters; the tail (the last ``lookback``
   generated tokens, fewer where the tail would start inside a character) plus the forced
   text is encoded canonically; the longest common prefix with the tail is kept, the rest
   of the tail dropped, the new tokens appended.
2. Boundary rule: the appended tokens must not end inside what would be one canonical
   token of the text that follows. For each byte the grammar allows after the forced
   text (completed to a whole character along the grammar's shortest path), the
   text + that character is encoded; only the tokens on which every such encoding agrees
   with the plain encoding are appended. When nothing can follow (the grammar accepts and
   has no way on) every token is appended. Results are cached per (state after the
   forced text, last bytes of the text); each probe's result is cached per (``encode``,
   text, character) for every grammar of the vocabulary (a copy grammar is per document,
   so its states are new, but the texts and characters it probes recur). With the engine's
   ``encode`` over a GPT-2-style byte-level BPE (``_pre_token_split``), only the text's
   last two pre-tokens are probed (the tokens before them cannot change), so the probes
   of texts that end alike (``...","email":"``) are one probe each.
3. The plan is checked on a fork of the matcher (``rollback(num_drop)`` then ``advance``
   of each appended token, the token budget included). If it fails, the naive plan
   (forced text encoded alone, nothing dropped, the boundary rule applied) is tried, and
   if that fails too the plan is empty.

Applying a plan (the engine)::

    plan = plan_jump_forward(matcher, output_ids, encode, vocab)
    if plan:
        matcher.rollback(plan.num_drop)
        for t in plan.append:
            matcher.advance(t)          # always True for a returned plan
        # drop plan.num_drop output tokens (and their KV), append plan.append as one extend
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..lru import LRUCache
from .matcher import Matcher

__all__ = ["JumpForwardPlan", "plan_jump_forward", "complete_utf8_prefix_len"]

Encode = Callable[[str], list[int]]


@dataclass(frozen=True)
class JumpForwardPlan:
    """Drop the last ``num_drop`` generated tokens, then append ``append``.

    Attributes:
        num_drop: trailing generated tokens to remove (and roll the matcher back by).
        append: token ids to append (computed by the model as one extend, not sampled).
        num_forced_bytes: bytes of grammar-forced text the plan adds.
    """

    num_drop: int = 0
    append: tuple[int, ...] = ()
    num_forced_bytes: int = 0

    def __bool__(self) -> bool:
        return bool(self.append)


NO_JUMP = JumpForwardPlan()


def complete_utf8_prefix_len(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 character."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b & 0xC0 == 0x80:
            continue
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return n - back if need > back else n
    return n


# per token index; unlocked: a matcher (and its token index) is used by one thread at a time
_boundary_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_BOUNDARY_CACHE_SIZE = 4096
# per vocabulary, shared by every grammar over it (a copy grammar is per document, so its
# states miss the cache above; locked: grammars of one vocabulary may be planned on several
# threads): (encode, text, next character) -> how many of encode(text) the probe agrees on
_probe_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PROBE_CACHE_SIZE = 16384


def plan_jump_forward(
    matcher,
    generated: Sequence[int],
    encode: Encode,
    vocab,
    *,
    lookback: int = 4,
    max_append: int | None = None,
) -> JumpForwardPlan:
    """Plan a jump-forward from the matcher's current state.

    Args:
        matcher: the request's matcher; its accepted tokens are the end of ``generated``.
            Not mutated (the plan is checked on a fork). Planning reads the regex
            implementation's automaton: a matcher of another ``BaseMatcher``
            implementation gets ``NO_JUMP``.
        generated: the token ids generated so far (the last ``lookback`` + a few suffice).
        encode: canonical tokenizer, ``str -> list[int]`` without special tokens.
        vocab: the ``Vocabulary`` (token id -> bytes).
        lookback: how many trailing generated tokens may be retokenized.
        max_append: bound on ``len(append) - num_drop`` (the room left in the budget).

    Returns:
        The plan; ``NO_JUMP`` (falsy) when nothing is forced or no valid plan exists.

    Raises: never for a well-formed tokenizer (an ``encode`` failure gives ``NO_JUMP``).
    """
    if not isinstance(matcher, Matcher):
        return NO_JUMP
    forced = matcher.forced_bytes()
    if not forced or complete_utf8_prefix_len(forced) == 0:
        return NO_JUMP
    try:
        plan = _retokenized(matcher, generated, forced, encode, vocab, lookback, max_append)
        if plan is None:
            plan = _retokenized(matcher, generated, forced, encode, vocab, 0, max_append)
    except Exception:  # a tokenizer failure must not fail the request: sample instead
        return NO_JUMP
    return plan or NO_JUMP


def _tail_len(matcher, generated: Sequence[int], vocab, lookback: int) -> int:
    """Trailing tokens to retokenize: <= lookback, accepted by the matcher, after the
    last special token, and starting on a character boundary (so their bytes decode on
    their own).
    """
    k = min(lookback, len(generated), matcher.num_accepted_tokens)
    special = getattr(vocab, "special_token_ids", ())
    for back in range(1, k + 1):  # never past a special token: its text is not the token
        if generated[len(generated) - back] in special:
            k = back - 1
            break
    while k > 0:
        data = vocab.decode(generated[len(generated) - k :])
        if data and data[0] & 0xC0 != 0x80:
            return k
        k -= 1
    return 0


def _retokenized(matcher, generated, forced, encode, vocab, lookback, max_append):
    k = _tail_len(matcher, generated, vocab, lookback)
    tail_ids = list(generated[len(generated) - k :]) if k else []
    tail = vocab.decode(tail_ids)
    full = tail + forced
    cut = complete_utf8_prefix_len(full)
    if cut <= len(tail):
        return None
    text_bytes = full[:cut]
    try:
        text = text_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return None
    ids = _encoded(encode, text, vocab)
    if vocab.decode(ids) != text_bytes:
        return None
    # state after the forced part that the plan covers
    state_after = _walk(matcher, text_bytes[len(tail) :])
    if state_after < 0:
        return None
    keep = _safe_prefix_len(matcher, state_after, text, ids, encode, vocab)
    ids = ids[:keep]
    common = 0
    while common < min(k, len(ids)) and ids[common] == tail_ids[common]:
        common += 1
    num_drop, append = k - common, ids[common:]
    if max_append is not None and len(append) - num_drop > max_append:
        return None
    new_bytes = len(vocab.decode(ids)) - len(tail)
    if not append or new_bytes <= 0:
        return None
    fork = matcher.fork()
    fork.rollback(num_drop)
    if fork.num_accepted_tokens != matcher.num_accepted_tokens - num_drop:
        return None
    if fork.validate(append) != len(append):
        return None
    return JumpForwardPlan(num_drop, tuple(int(t) for t in append), new_bytes)


def _walk(matcher, data: bytes) -> int:
    dfa, state = matcher._dfa, matcher.state
    for b in data:
        state = int(dfa.row(state)[b])
        if state < 0:
            return -1
    return state


def _next_chars(dfa, state: int, limit: int = 160) -> list[bytes]:
    """One whole character per byte allowed from ``state`` (continued along the first
    live byte until the character is complete).
    """
    out = []
    for b in np.nonzero(dfa.row(state) >= 0)[0].tolist()[:limit]:
        data, s = bytes([b]), int(dfa.row(state)[b])
        while complete_utf8_prefix_len(data) < len(data) and len(data) < 4:
            live = np.nonzero(dfa.row(s) >= 0)[0]
            if live.size == 0:
                break
            data += bytes([int(live[0])])
            s = int(dfa.row(s)[int(live[0])])
        out.append(data)
    return out


def _safe_prefix_len(matcher, state_after, text, ids, encode, vocab) -> int:
    """How many of ``ids`` are stable whatever single character the grammar lets follow."""
    dfa = matcher._dfa
    row = dfa.row(state_after)
    if not (row >= 0).any():
        return len(ids)  # nothing can follow
    cache = _boundary_caches.get(matcher._index)
    if cache is None:
        cache = _boundary_caches[matcher._index] = LRUCache(_BOUNDARY_CACHE_SIZE, lock=False)
    key = (state_after, text.encode("utf-8")[-32:], len(ids), encode)
    hit = cache.get(key)
    if hit is not None:
        return max(0, len(ids) - hit)
    keep = _boundary_keep(text, ids, _next_chars(dfa, state_after), encode, vocab)
    cache.put(key, len(ids) - keep)
    return keep


def _boundary_keep(text: str, ids: list[int], chars: list[bytes], encode, vocab) -> int:
    """How many of ``ids`` (``encode(text)``) every ``encode(text + ch)`` starts with, for
    each ``ch`` of ``chars`` (one UTF-8 character each; one that does not decode is skipped).

    Where ``_pre_tokens`` knows the tokenizer behind ``encode``, only the text from its
    second-to-last pre-token on (``suffix``) is encoded with ``ch``: the pre-tokens before
    it are the same with any character after the text (``_pre_tokens``), and the model
    encodes each pre-token alone, so ``encode(text + ch)`` is ``ids[:head] +
    encode(suffix + ch)``. The count after ``head`` is cached per (``encode``, suffix,
    character) for the vocabulary; elsewhere the suffix is the whole text.
    """
    probes = _probes(vocab)
    head, suffix, suffix_ids = 0, text, ids
    split = _pre_token_split(encode, text)
    if split:
        cut = text[split:]
        cut_ids = _encoded(encode, cut, vocab)
        head = len(ids) - len(cut_ids)
        if head >= 0 and ids[head:] == cut_ids:  # as the pre-tokens say; else probe whole
            suffix, suffix_ids = cut, cut_ids
        else:
            head = 0
    keep = len(ids)
    for ch in chars:
        n = probes.get((encode, suffix, ch))
        if n is None:
            try:
                probe = encode(suffix + ch.decode("utf-8"))
            except UnicodeDecodeError:
                continue
            n = 0
            while n < len(suffix_ids) and n < len(probe) and probe[n] == suffix_ids[n]:
                n += 1
            probes.put((encode, suffix, ch), n)
        keep = min(keep, head + n)
        if keep == 0:
            break
    return keep


def _probes(vocab) -> LRUCache:
    """The vocabulary's probe cache (``_probe_caches``), made on first use."""
    probes = _probe_caches.get(vocab)
    if probes is None:
        probes = _probe_caches.setdefault(vocab, LRUCache(_PROBE_CACHE_SIZE))
    return probes


def _encoded(encode, text: str, vocab) -> list[int]:
    """``list(encode(text))``, kept in the vocabulary's probe cache under ``(encode, text)``
    (the list is shared: callers do not change it); encoded each time where ``vocab`` or
    ``encode`` cannot key the cache. Raises: what ``encode`` raises (nothing is kept).
    """
    try:
        probes, key = _probes(vocab), (encode, text)
        ids = probes.get(key)
    except TypeError:  # not weakly referable, or not hashable
        return list(encode(text))
    if ids is None:
        ids = list(encode(text))
        probes.put(key, ids)
    return ids


# ``encode`` -> its tokenizer's (pre-tokenizer, added tokens' texts), None where not known
_pre_tokenizers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# pre-tokenizers whose pre-tokens of a text, all but the last two, are pre-tokens of the
# text followed by anything (``_pre_token_split``)
_BYTE_LEVEL = {
    "type": "ByteLevel",
    "add_prefix_space": False,
    "trim_offsets": True,
    "use_regex": True,
}
_LOCAL_PRE_TOKENIZERS = (
    _BYTE_LEVEL,
    {
        "type": "Sequence",
        "pretokenizers": [{"type": "Digits", "individual_digits": True}, _BYTE_LEVEL],
    },
)


def _pre_token_split(encode, text: str) -> int:
    r"""Where ``text``'s second-to-last pre-token starts (0 when it has fewer than three, or
    the tokenizer is not known): the pre-tokens before it are pre-tokens of ``text + c`` for
    any text ``c``.

    Known: ``encode`` is ``functools.partial(tokenizer.encode, add_special_tokens=False)``
    (``Engine.encode_text``) over a ``tokenizers.Tokenizer`` (``backend_tokenizer``) that
    encodes each pre-token alone (a BPE model without dropout, no normalizer, no truncation
    or padding), whose pre-tokenizer is GPT-2's byte-level split (``ByteLevel`` with its
    regex, no prefix space), alone or after single digits (``Digits``), and ``text`` not
    near an added token (none in ``text``, none completed by one more character). Why two:
    the regex's match at a pre-token's start reads past its end by at most one character
    (greedy runs stop at the first character out of their class; ``\s+(?!\S)`` looks at
    one), except a contraction (``'re``) cut short by the text's end, whose shorter match
    then spans the last two pre-tokens at most; a match that reads to the text's end is the
    last pre-token. Digits split single digits, so they add no reach.
    """
    if not isinstance(encode, functools.partial):
        return 0
    known = _pre_tokenizers.get(encode, False)
    if known is False:
        known = _pre_tokenizers[encode] = _known_pre_tokenizer(encode)
    if known is None:
        return 0
    pre_tokenizer, added = known
    for content in added:
        if content[:-1] in text:  # in the text, or completed by the next character
            return 0
    try:
        pieces = pre_tokenizer.pre_tokenize_str(text)
    except Exception:  # noqa: BLE001 - what the pre-tokenizer refuses is probed whole
        return 0
    return pieces[-2][1][0] if len(pieces) >= 3 else 0


def _known_pre_tokenizer(encode):
    """``(pre_tokenizer, added tokens' texts)`` of the tokenizer behind ``encode`` (a
    ``functools.partial``) where it meets ``_pre_token_split``'s conditions, else None.
    """
    if encode.args or encode.keywords != {"add_special_tokens": False}:
        return None
    func = encode.func
    backend = getattr(getattr(func, "__self__", None), "backend_tokenizer", None)
    if getattr(func, "__name__", None) != "encode" or backend is None:
        return None
    try:
        model = backend.model
        if type(model).__name__ != "BPE" or getattr(model, "dropout", None) is not None:
            return None
        if backend.normalizer is not None or backend.truncation or backend.padding:
            return None
        state = json.loads(backend.pre_tokenizer.__getstate__())
        if state not in _LOCAL_PRE_TOKENIZERS:
            return None
        added = tuple(t.content for t in backend.get_added_tokens_decoder().values())
    except Exception:  # noqa: BLE001 - not a tokenizers.Tokenizer as expected: probe whole
        return None
    return backend.pre_tokenizer, tuple(c for c in added if c)
