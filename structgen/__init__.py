"""structgen: structured LLM generation with its own inference runtime.

Public API (heavy modules are imported on first use)::

    import structgen
    engine = structgen.Engine()                      # packaged SmolLM2
    engine.extract({"type": "object", ...}, "Maria Lopez, 34, ...")
    engine.generate(["Hi"], structgen.SamplingParams(max_tokens=16),
                    structgen.Regex(r"[A-Z][a-z]+"))

    @structgen.function                              # the language
    def qa(s, question):
        s += structgen.user(question)
        s += structgen.assistant(structgen.gen("answer", max_tokens=64))
    qa.run(question="Why is the sky blue?", backend=engine)["answer"]
"""

from __future__ import annotations

from typing import Any

from structgen.errors import StructgenError
from structgen.fsm.spec import Choice, Grammar, JsonSchema, Regex, StructuralTag, TagStructure
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
    "Grammar",
    "StructuralTag",
    "TagStructure",
    "StructgenError",
    "function",
    "gen",
    "select",
    "template",
    "system",
    "user",
    "assistant",
    "set_default_backend",
    "OpenAIBackend",
    "ProgramState",
    "ProgramError",
    "__version__",
]

_LAZY = {
    "Engine": "structgen.runtime.engine",
    "AsyncEngine": "structgen.runtime.async_engine",
    "EngineConfig": "structgen.runtime.config",
    "function": "structgen.lang.program",
    "gen": "structgen.lang.expr",
    "select": "structgen.lang.expr",
    "system": "structgen.lang.expr",
    "user": "structgen.lang.expr",
    "assistant": "structgen.lang.expr",
    "template": "structgen.lang.program",
    "set_default_backend": "structgen.lang.backend",
    "OpenAIBackend": "structgen.lang.openai_backend",
    "ProgramState": "structgen.lang.state",
    "ProgramError": "structgen.errors",
}


def __getattr__(name: str) -> Any:
    """Import the engine and the language lazily so ``import structgen`` stays light."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'structgen' has no attribute {name!r}")
