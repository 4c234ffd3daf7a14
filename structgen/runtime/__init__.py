"""The inference runtime: engine, scheduler, KV page pool, model runner, sampler, models, loader."""

from __future__ import annotations

from structgen.runtime.outputs import RequestMetrics, RequestOutput
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["EngineConfig", "RequestMetrics", "RequestOutput", "SamplingParams", "Engine"]


def __getattr__(name: str):
    """Import the Engine (it pulls in the fsm and the runtime's modules) and EngineConfig
    lazily.
    """
    if name == "Engine":
        from structgen.runtime.engine import Engine

        return Engine
    if name == "EngineConfig":
        from structgen.runtime.config import EngineConfig

        return EngineConfig
    raise AttributeError(name)
