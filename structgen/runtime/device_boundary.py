"""The torch boundary of the host runtime, without importing torch.

The default CPU engine's host code works on numpy arrays; torch is an adapter at the device
boundary (``docs/torch_free_cpu.md``), imported only by the branches that hold a tensor or name
a device. These two questions are asked before any such branch, so they must not import torch:
a tensor can only exist once torch is loaded, and a device's type is in its name.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["is_tensor", "device_type", "numpy_float"]


def is_tensor(x: Any) -> bool:
    """True when ``x`` is a ``torch.Tensor`` (False, without importing torch, while torch is not
    loaded: no tensor exists then).
    """
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def device_type(device: Any) -> str:
    """The type of ``device``: ``"cpu"`` / ``"cuda"`` / ... of a ``torch.device`` or of a device
    name (``"cuda:1"`` -> ``"cuda"``), without importing torch.
    """
    kind = getattr(device, "type", None)
    return kind if isinstance(kind, str) else str(device).split(":")[0]


def numpy_float(t: Any) -> bool:
    """True when the tensor ``t``'s dtype is a float numpy shares (float32, float64: viewed with
    ``.numpy()``, not converted). Only called with a tensor (torch is loaded then).
    """
    import torch

    return t.dtype in (torch.float32, torch.float64)
