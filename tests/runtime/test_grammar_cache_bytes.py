"""``EngineConfig.grammar_cache_bytes``: the bound of the vocabulary's shared lexical mask
cache, and its counters in ``Engine.stats()``.

Reference: greedy outputs under JSON Schemas with the cache off (bound 0) equal those with
it on (sharing mask parts must never change a mask).
"""

from __future__ import annotations

import pytest

from structgen import Engine, JsonSchema, SamplingParams
from structgen.errors import ConfigError
from structgen.fsm.index.lexical_masks import DEFAULT_CAPACITY_BYTES
from structgen.runtime.config import EngineConfig

SCHEMAS = [
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
        "required": ["name", "city"],
    },
    {
        "type": "object",
        "properties": {"title": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["title", "n"],
    },
]
KEYS = (
    "lexical_cache_bytes",
    "lexical_cache_entries",
    "lexical_cache_pinned",
    "lexical_cache_hits",
    "lexical_cache_misses",
    "lexical_cache_hit_rate",
)


@pytest.mark.parametrize("bad", [-1, 1.5, "64MiB", True])
def test_invalid_bound_is_a_config_error(bad) -> None:
    with pytest.raises(ConfigError, match="grammar_cache_bytes"):
        EngineConfig(grammar_cache_bytes=bad)


def _run(engine: Engine) -> list[str]:
    params = SamplingParams(max_tokens=48, temperature=0.0)
    return [o.text for o in engine.generate(["a", "b"], params, [JsonSchema(s) for s in SCHEMAS])]


def test_bound_zero_turns_sharing_off_and_outputs_are_unchanged(tiny_llama_dir) -> None:
    from structgen.fsm import clear_cache

    off = Engine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=2048, grammar_cache_bytes=0)
    cache = off.vocab.lexical_masks
    try:
        assert cache.capacity_bytes == 0
        clear_cache()
        want = _run(off)
        stats = off.stats()
        assert all(k in stats for k in KEYS)
        assert stats["lexical_cache_bytes"] == 0 and stats["lexical_cache_entries"] == 0
        on = Engine(
            str(tiny_llama_dir),
            dtype="float32",
            max_kv_tokens=2048,
            grammar_cache_bytes=DEFAULT_CAPACITY_BYTES,
        )
        assert on.vocab.lexical_masks.capacity_bytes == DEFAULT_CAPACITY_BYTES
        clear_cache()
        assert _run(on) == want
        assert on.stats()["lexical_cache_bytes"] <= DEFAULT_CAPACITY_BYTES
    finally:
        cache.set_capacity(DEFAULT_CAPACITY_BYTES)
