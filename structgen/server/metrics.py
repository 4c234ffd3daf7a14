"""Prometheus metrics of one server (its own registry, so several apps can coexist).

Per request (observed when it finishes): ``structgen_time_to_first_token_seconds`` and
``structgen_time_per_output_token_seconds`` histograms, ``structgen_prompt_tokens_total``,
``structgen_generation_tokens_total``, ``structgen_cached_prompt_tokens_total`` and
``structgen_requests_finished_total{finish_reason}``. Read from ``engine.stats()`` at
scrape time: ``structgen_num_requests_running`` / ``_waiting``, ``structgen_kv_pages_total``
/ ``_free`` / ``_used`` / ``_cached``, ``structgen_prefix_cache_hit_rate``,
``structgen_prefix_cache_hit_tokens_total``, ``structgen_preemptions_total``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from structgen.runtime.outputs import RequestOutput

__all__ = ["ServerMetrics"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class _EngineCollector:
    """Gauges read from the engine's counters at each scrape."""

    def __init__(self, stats: Callable[[], dict]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        s = self._stats()
        gauges = {
            "num_requests_running": ("requests running in the engine", s["running"]),
            "num_requests_waiting": ("requests waiting to be scheduled", s["waiting"]),
            "kv_pages_total": ("usable KV cache pages", s["pages_total"]),
            "kv_pages_free": ("free KV cache pages", s["pages_free"]),
            "kv_pages_used": (
                "KV cache pages in use or cached",
                s["pages_total"] - s["pages_free"],
            ),
            "kv_pages_cached": ("KV cache pages held by the prefix cache", s["pages_cached"]),
            "prefix_cache_hit_rate": (
                "share of prompt tokens served from the prefix cache",
                s["prefix_hit_rate"],
            ),
        }
        for name, (doc, value) in gauges.items():
            yield GaugeMetricFamily(f"structgen_{name}", doc, value=value)
        yield CounterMetricFamily(
            "structgen_prefix_cache_hit_tokens",
            "prompt tokens served from the prefix cache",
            value=s["prefix_hit_tokens"],
        )
        yield CounterMetricFamily(
            "structgen_preemptions", "requests preempted", value=s["preemptions"]
        )


class ServerMetrics:
    """The server's Prometheus registry.

    Args:
        stats: callable returning ``Engine.stats()``.
    """

    def __init__(self, stats: Callable[[], dict]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.ttft = Histogram(
            "structgen_time_to_first_token_seconds",
            "time to first token",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.tpot = Histogram(
            "structgen_time_per_output_token_seconds",
            "mean time per output token after the first",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.prompt_tokens = Counter("structgen_prompt_tokens", "prompt tokens", registry=r)
        self.generation_tokens = Counter(
            "structgen_generation_tokens", "generated tokens", registry=r
        )
        self.cached_tokens = Counter(
            "structgen_cached_prompt_tokens",
            "prompt tokens served from the prefix cache",
            registry=r,
        )
        self.finished = Counter(
            "structgen_requests_finished", "finished engine requests", ["finish_reason"], registry=r
        )
        r.register(_EngineCollector(stats))

    def observe(self, out: RequestOutput) -> None:
        """Record one finished engine request. Raises: never."""
        m = out.metrics
        if m.num_generated_tokens > 0:
            self.ttft.observe(m.ttft_s)
        if m.num_generated_tokens > 1:
            self.tpot.observe(m.tpot_s)
        self.prompt_tokens.inc(m.num_prompt_tokens)
        self.generation_tokens.inc(m.num_generated_tokens)
        self.cached_tokens.inc(m.cached_tokens)
        self.finished.labels(out.finish_reason or "abort").inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
