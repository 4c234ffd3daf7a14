"""Applying ``structgen.env``'s settings to the model's C kernels (when an Engine is built).

The kernels' switches are process-wide (module state read on the hot path, never the
environment): :func:`apply_kernel_settings` sets them from a :class:`~structgen.env.Settings`.
A switch is written only when its setting differs from the one last applied (at first, the
defaults), so a switch set by hand (``quant.set_threads``, a test's ``monkeypatch``)
stays until the environment says otherwise. A kernel's wrapper module (they import torch) is
imported only to write a switch that changes, so the default settings import no torch (the
torch-free default CPU engine).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import warnings

from structgen.env import Settings

__all__ = ["apply_kernel_settings"]

_CPU = "structgen.runtime.cpu."
_SWITCHES = {  # setting -> the module whose set_enabled writes it
    "qkernel": _CPU + "quant",
    "dense_kernel": _CPU + "dense",
    "cpu_ops": _CPU + "ops",
    "decode_step": _CPU + "decode_step",
}
_BUILT = {"dense_kernel": (_CPU + "dense", "_densekernel"), "cpu_ops": (_CPU + "ops", "_cpuops")}
_applied = Settings()  # what the switches were last set to (the modules start at the defaults)
_warned: set[str] = set()  # kernels whose missing build was reported
_lock = threading.Lock()


def apply_kernel_settings(settings: Settings) -> None:
    """Set the C-kernel switches and the quantized kernel's threads as ``settings`` says.

    Warns once per process when a fused kernel that is on is not built (torch's path runs).

    Raises: never.
    """
    global _applied
    with _lock:
        for name, module in _SWITCHES.items():
            if getattr(settings, name) != getattr(_applied, name):
                importlib.import_module(module).set_enabled(getattr(settings, name))
        if settings.qkernel_threads != _applied.qkernel_threads:
            importlib.import_module(_SWITCHES["qkernel"]).set_threads(settings.qkernel_threads)
        _applied = settings
        for name, (module, ext) in _BUILT.items():
            if getattr(settings, name) and name not in _warned and not _built(ext):
                _warned.add(name)
                message = importlib.import_module(module).MISSING_WARNING
                warnings.warn(message, RuntimeWarning, stacklevel=3)


def _built(ext: str) -> bool:
    """Whether the extension ``structgen.runtime.cpu.<ext>`` is importable (not imported)."""
    if _CPU + ext in sys.modules:
        return True
    try:
        return importlib.util.find_spec(_CPU + ext) is not None
    except (ImportError, ValueError):  # pragma: no cover - a broken install
        return False
