"""Every environment variable structgen reads or sets, and the one place that reads them.

:data:`VARIABLES` is the table (name, type, default, when it is read, effect); README's
table of environment variables is rendered from it (:func:`markdown_table`, checked by
``tests/test_env.py``). No other module of the package touches ``os.environ``.

Nothing is read at import. The settings are read when they take effect:

* :func:`read_env` reads every ``STRUCTGEN_*`` setting into a frozen :class:`Settings`;
  an ``Engine`` calls it once in its constructor and hands the result down (the model's
  C-kernel switches are applied then, see ``structgen.runtime.cpu.settings``; a
  tensor-parallel worker receives the engine's settings);
* :func:`read` reads one setting by its :class:`Settings` field name: each ``compile_*``
  call reads the grammar's two C-loop switches, each model load the cache directory.

So a test changes a setting with ``monkeypatch.setenv`` before it builds an engine or
compiles a grammar. A value that does not parse raises :class:`~structgen.errors.ConfigError`
naming the variable.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from structgen.errors import ConfigError

__all__ = [
    "EnvVar",
    "Settings",
    "VARIABLES",
    "markdown_table",
    "cuda_visible_devices",
    "openai_api_key",
    "read",
    "read_env",
    "texts",
    "set_default",
]

_PREFIX = "STRUCTGEN_"


@dataclass(frozen=True)
class EnvVar:
    """One row of the table.

    Attributes:
        name: the variable, e.g. ``"STRUCTGEN_CPU_OPS"``.
        type: ``"0/1"`` (a switch: ``0`` off, ``1`` on), ``"int"``, ``"path"`` or ``"str"``.
        default: the value in effect when the variable is unset (or empty), as text.
        read_when: when structgen reads (or sets) it.
        effect: what it changes.
        set_by_structgen: structgen sets it (when unset) rather than only reading it.
    """

    name: str
    type: str
    default: str
    read_when: str
    effect: str
    set_by_structgen: bool = False

    @property
    def field(self) -> str | None:
        """The :class:`Settings` field of a ``STRUCTGEN_*`` variable (None for the others)."""
        return self.name[len(_PREFIX) :].lower() if self.name.startswith(_PREFIX) else None


_ENGINE = "`Engine(...)`"
VARIABLES: tuple[EnvVar, ...] = (
    EnvVar(
        "STRUCTGEN_QKERNEL",
        "0/1",
        "1",
        _ENGINE,
        "the C quantized-matmul kernel (`csrc/qkernel.c`); `0`: torch's packed kernels",
    ),
    EnvVar(
        "STRUCTGEN_QKERNEL_THREADS",
        "int",
        "unset",
        _ENGINE,
        "OpenMP threads of the quantized kernel (>= 1); unset: `torch.get_num_threads()`",
    ),
    EnvVar(
        "STRUCTGEN_DENSE_KERNEL",
        "0/1",
        "1",
        _ENGINE,
        "the C kernel of fp32/bf16 linears with 1-8 rows (`csrc/densekernel.c`); `0`: `F.linear`",
    ),
    EnvVar(
        "STRUCTGEN_CPU_OPS",
        "0/1",
        "1",
        _ENGINE,
        "the fused CPU ops around the matmuls (`csrc/cpuops.c`); `0`: their torch references",
    ),
    EnvVar(
        "STRUCTGEN_DECODE_STEP",
        "0/1",
        "1",
        _ENGINE,
        "the fused decode step, all layers in one C call (`csrc/decodestep.c`); "
        "`0`: the per-op path",
    ),
    EnvVar(
        "STRUCTGEN_TOKENTRIE",
        "0/1",
        "1",
        "each `compile_*` call",
        "the C token-trie walk and mask writer of the grammar (`csrc/tokentrie.c`); `0`: numpy",
    ),
    EnvVar(
        "STRUCTGEN_REGEXLOWER",
        "0/1",
        "1",
        "each `compile_*` call",
        "the C loops lowering regex text to automaton terms and building the lazy DFA's "
        "derivatives and rows (`csrc/regexlower.c`); `0`: Python",
    ),
    EnvVar(
        "STRUCTGEN_CACHE_DIR",
        "path",
        "`~/.cache/structgen`",
        "each model load",
        "where tokenizers built from GGUF files are cached",
    ),
    EnvVar(
        "TRITON_INTERPRET",
        "0/1",
        "unset",
        "first import of `structgen.kernels`",
        "set to `1` when CUDA is unavailable and it is unset, before Triton is imported "
        "(Triton kernels on CPU run interpreted: tests only)",
        set_by_structgen=True,
    ),
    EnvVar(
        "CUDA_VISIBLE_DEVICES",
        "str",
        "unset",
        '`Engine(...)` with `device="auto"`',
        '`""` or `"-1"` (CUDA sees no device): `"auto"` resolves to CPU without importing '
        "torch (`structgen.runtime.config.auto_device`)",
    ),
    EnvVar(
        "OPENAI_API_KEY",
        "str",
        "unset",
        "`OpenAIBackend(...)`",
        'the API key sent when `api_key` is not given (unset: `"none"`)',
    ),
)
_BY_FIELD = {v.field: v for v in VARIABLES if v.field is not None}


def _default_cache_dir() -> Path:
    return Path.home() / ".cache" / "structgen"


@dataclass(frozen=True)
class Settings:
    """Every ``STRUCTGEN_*`` setting, parsed (the defaults are the unset values).

    Attributes:
        qkernel: the C quantized-matmul kernel on.
        qkernel_threads: its OpenMP threads, or None (follow ``torch.get_num_threads()``).
        dense_kernel: the C small-batch dense linear on.
        cpu_ops: the fused CPU ops on.
        decode_step: the fused decode step on.
        tokentrie: the grammar's C token-trie walk and mask writer on.
        regexlower: the grammar's C regex lowering, derivatives and DFA rows on.
        cache_dir: the loader's cache directory.
    """

    qkernel: bool = True
    qkernel_threads: int | None = None
    dense_kernel: bool = True
    cpu_ops: bool = True
    decode_step: bool = True
    tokentrie: bool = True
    regexlower: bool = True
    cache_dir: Path = dataclasses.field(default_factory=_default_cache_dir)


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}  # the keys of _BY_FIELD (test_env)


def _switch(name: str, text: str) -> bool:
    if text not in ("0", "1"):
        raise ConfigError(f"environment variable {name} must be 0 or 1, got {text!r}")
    return text == "1"


def _positive_int(name: str, text: str) -> int:
    value = int(text) if text.isascii() and text.isdigit() else 0
    if value < 1:
        raise ConfigError(f"environment variable {name} must be an int >= 1, got {text!r}")
    return value


_PARSERS = {
    "0/1": _switch,
    "int": _positive_int,
    "path": lambda _name, text: Path(text).expanduser(),
}


def read(field: str, environ: Mapping[str, str] | None = None) -> Any:
    """One setting, read from the environment now.

    Args:
        field: a :class:`Settings` field name, e.g. ``"tokentrie"``.
        environ: the mapping to read (default ``os.environ``).

    Returns:
        The parsed value; the field's default when the variable is unset or empty.

    Raises:
        ConfigError: the variable's value does not parse (the message names it).
        KeyError: ``field`` is not a :class:`Settings` field.
    """
    var = _BY_FIELD[field]
    text = (os.environ if environ is None else environ).get(var.name, "")
    if text == "":
        spec = _FIELDS[field]
        return spec.default_factory() if spec.default is dataclasses.MISSING else spec.default
    return _PARSERS[var.type](var.name, text)


_KEYS: dict[tuple[str, ...], tuple[Any, ...]] = {}  # fields -> os.environ's keys of them


def texts(fields: tuple[str, ...]) -> tuple[Any, ...]:
    """The raw values of some settings' variables, for noticing a change cheaply.

    Equal tuples from two calls mean the variables held the same values (None: unset);
    the values are ``os.environ``'s stored form (bytes on POSIX), only to compare. Reads
    ``os.environ``'s own dict when it has one (no KeyError per unset variable), else
    ``os.environ.get``.

    Args:
        fields: :class:`Settings` field names, e.g. ``("tokentrie", "regexlower")``.

    Raises:
        KeyError: a name is not a :class:`Settings` field.
    """
    environ = os.environ
    data = getattr(environ, "_data", None)
    if type(data) is not dict:
        return tuple(environ.get(_BY_FIELD[f].name) for f in fields)
    keys = _KEYS.get(fields)
    if keys is None:
        keys = _KEYS[fields] = tuple(environ.encodekey(_BY_FIELD[f].name) for f in fields)
    return tuple(map(data.get, keys))


def read_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Every ``STRUCTGEN_*`` setting, read from the environment now.

    Args:
        environ: the mapping to read (default ``os.environ``).

    Raises:
        ConfigError: a variable's value does not parse (the message names it).
    """
    return Settings(**{f.name: read(f.name, environ) for f in dataclasses.fields(Settings)})


def openai_api_key() -> str | None:
    """``OPENAI_API_KEY``, or None when it is unset or empty."""
    return os.environ.get("OPENAI_API_KEY") or None


def cuda_visible_devices(environ: Mapping[str, str] | None = None) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` as set (None when unset; ``""`` is a value: no device).

    Args:
        environ: the mapping to read (default ``os.environ``).
    """
    return (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")


def is_set(name: str) -> bool:
    """True when ``name`` (a variable of ``VARIABLES``) is set in the environment.

    Raises:
        ValueError: ``name`` is not in ``VARIABLES``.
    """
    if not any(v.name == name for v in VARIABLES):
        raise ValueError(f"{name} is not a variable of structgen.env.VARIABLES")
    return name in os.environ


def set_default(name: str, value: str) -> None:
    """Set ``name`` to ``value`` unless it is set already.

    Raises:
        ValueError: ``name`` is not a variable the table marks as set by structgen.
    """
    if not any(v.name == name and v.set_by_structgen for v in VARIABLES):
        raise ValueError(f"{name} is not a variable structgen sets (see structgen.env.VARIABLES)")
    os.environ.setdefault(name, value)


def markdown_table() -> str:
    """The table as GitHub markdown (README's section on environment variables)."""
    lines = ["| Variable | Type | Default | Read | Effect |", "| --- | --- | --- | --- | --- |"]
    for v in VARIABLES:
        plain = v.default.startswith("`") or v.default == "unset"
        default = v.default if plain else f"`{v.default}`"
        read_when = ("set at " if v.set_by_structgen else "") + v.read_when
        lines.append(f"| `{v.name}` | {v.type} | {default} | {read_when} | {v.effect} |")
    return "\n".join(lines) + "\n"
