"""The quantization method names and their check (torch-free: ``EngineConfig`` validates
its ``quantization`` field with it before anything imports torch).
"""

from __future__ import annotations

from structgen.errors import ConfigError

__all__ = ["QUANTIZATION_METHODS", "check_quantization"]

QUANTIZATION_METHODS = ("int8", "int4", "int4-g32", "int4-g64", "int4-g128", "gguf")


def check_quantization(method: str | None) -> tuple[str | None, int | None]:
    """``(kind, group_size)`` of a method name (``int4`` = group 64); None for no quantization.

    Raises:
        ConfigError: unknown method.
    """
    if method is None or method in ("none", "gguf"):
        return None, None
    if method == "int8":
        return "int8", None
    if method == "int4":
        return "int4", 64
    if method.startswith("int4-g") and method[6:] in ("32", "64", "128"):
        return "int4", int(method[6:])
    raise ConfigError(
        f"unknown quantization {method!r}; choose one of {', '.join(QUANTIZATION_METHODS)}, "
        "'none' or None (float weights), or 'auto' (the default)"
    )
