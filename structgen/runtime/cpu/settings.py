"""Applying ``structgen.env``'s settings to the model's C kernels (when an Engine is built).

The kernels' switches are process-wide (module state read on the hot path, never the
environment): :func:`apply_kernel_settings` sets them from a :class:`~structgen.env.Settings`.
A switch is written only when its setting differs from the one last applied (at first, the
defaults), so a switch set by hand (``quant.set_threads``, a test's ``monkeypatch``)
stays until the environment says otherwise.
"""

from __future__ import annotations

import threading
import warnings

from structgen.env import Settings
from structgen.runtime.cpu import decode_step, dense, quant
from structgen.runtime.cpu import ops as cpu_ops

__all__ = ["apply_kernel_settings"]

_SWITCHES = {
    "qkernel": quant.set_enabled,
    "dense_kernel": dense.set_enabled,
    "cpu_ops": cpu_ops.set_enabled,
    "decode_step": decode_step.set_enabled,
}
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
        for name, set_switch in _SWITCHES.items():
            if getattr(settings, name) != getattr(_applied, name):
                set_switch(getattr(settings, name))
        if settings.qkernel_threads != _applied.qkernel_threads:
            quant.set_threads(settings.qkernel_threads)
        _applied = settings
        for name, module in (("dense_kernel", dense), ("cpu_ops", cpu_ops)):
            if getattr(settings, name) and module._ext is None and name not in _warned:
                _warned.add(name)
                warnings.warn(module.MISSING_WARNING, RuntimeWarning, stacklevel=3)
