"""structgen: structured LLM generation with its own inference runtime.

Public API (heavy modules are imported on first use)::

    import structgen
    engine = structgen.Engine()                      # packaged SmolLM2
    engine.extract({"type": "object", ...}, "Maria Lopez, 34, ...")
    engine.generate(["Hi"], structgen.SamplingParams(max_tokens=16),
                    structgen.Regex(r"[A-Z][a-z]+"))
"""

from __future__ import annotations

from typing import Any

from structgen.errors import StructgenError
from structgen.lang.constraints import Choice, JsonSchema, Regex
from structgen.runtime.outputs import RequestMetrics, RequestOutput
from structgen.runtime.sampling_params import SamplingParams

__version__ = "0.1.0"

__all__ = [
    "Engine",
    "AsyncEngine",
    "EngineConfig",
    "SamplingParams",
    "RequestOutput",
    "RequestMetrics",
    "Regex",
    "JsonSchema",
    "Choice",
    "StructgenError",
    "__version__",
]

_LAZY = {
    "Engine": "structgen.runtime.engine",
    "AsyncEngine": "structgen.runtime.async_engine",
    "EngineConfig": "structgen.runtime.config",
}


def __getattr__(name: str) -> Any:
    """Import Engine / EngineConfig lazily so ``import structgen`` stays light."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'structgen' has no attribute {name!r}")
